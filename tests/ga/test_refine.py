"""``ga --refine``: GA rounds and CP-SAT runs in one loop.

The GA's best point hints the solver, the solver's schedule seeds the next GA round;
every point of the result is checked by the evaluator, and the solver's bound
certifies the best point.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from monet_ilp.evaluate import evaluate
from monet_ilp.ga.refine import refine
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance
from monet_ilp.results import dominated_by
from monet_ilp.schedule import schedule_from_dict


def mlp4():
    return make_instance(zoo.mlp(depth=4), preset("hetero_quad"), problem="P3", objective="energy")


def test_rounds_hint_the_solver_and_seed_the_ga():
    inst = mlp4()
    result = refine(inst, 2, generations=4, population=12, seed=3, solver_time=4, workers=1)
    json.dumps(result)
    assert result["format"] == "monet-ilp/ga" and len(result["refine"]) == 2
    points = result["points"]
    assert points and all(p["feasible"] for p in points)
    for p in points:  # each point is what the evaluator says of its schedule
        metrics = evaluate(inst, schedule_from_dict(p["schedule"]))
        assert metrics.feasible and (metrics.latency_cycles, metrics.energy.total_pj) == (
            p["latency_cycles"], p["energy_pj"])
        assert not any(dominated_by(p, q) for q in points)
    first, second = result["refine"]
    # The solver starts from the GA's best, so it is never worse; the next round starts from it.
    assert first["solver_objective"] <= first["ga_best"]
    assert second["ga_best"] <= first["solver_objective"]
    best = min(p["objective_value"] for p in points)
    assert best == second["best"] <= first["best"]
    assert result["bound"] is not None and result["bound"] <= best
    assert result["gap"] == second["gap"] and 0 <= result["gap"] < 1


@pytest.mark.slow  # the README's `ga --refine` line runs the command in the default run
def test_cli_refine_writes_a_front_that_grade_reads(tmp_path):
    inst = mlp4()
    path, out = tmp_path / "mlp4.json", tmp_path / "refined.json"
    inst.save(path)
    done = subprocess.run([sys.executable, "-m", "monet_ilp", "ga", str(path), "--refine", "1", "--refine-time", "3",
                           "--generations", "3", "--population", "8", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "GA + solver" in done.stdout and "bound" in done.stdout
    data = json.loads(out.read_text())
    assert data["refine"][0]["round"] == 1 and data["points"]
    graded = subprocess.run([sys.executable, "-m", "monet_ilp", "grade", str(out), "--instance", str(path),
                             "--time-limit", "3"], capture_output=True, text=True, timeout=300, check=False)
    assert graded.returncode == 0, graded.stderr
