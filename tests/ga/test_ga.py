"""The MONET-style GA (NSGA-II over keep/offload/recompute and core genes), its CLI, and hints.

Small MLPs on a two-core Edge TPU (P3) with an SRAM budget below what store-all
needs; every point the GA returns is re-checked by the evaluator.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.ga.nsga2 import run_ga
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.decisions import Decisions, decode, save_decisions
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.make import make_instance
from monet_ilp.results import dominated_by
from monet_ilp.schedule import save_schedule, schedule_from_dict
from monet_ilp.solve import load_hint, solve

TIGHT = 9 * 1024
SMALL = {"generations": 3, "population": 8}


def mlp(objective="latency", sram_budget=TIGHT, hw=None):
    graph = zoo.mlp(depth=2, width=64, batch=8, in_features=64)
    return make_instance(graph, hw or preset("edge_tpu", n_pe_x=2, n_pe_y=1), problem="P3",
                         sram_budget=sram_budget, objective=objective)


@pytest.fixture(scope="module")
def inst():
    instance = mlp()
    assert not evaluate(instance, store_all_schedule(instance)).feasible
    return instance


@pytest.fixture(scope="module")
def front(inst):
    return run_ga(inst, seed=1, **SMALL)


def summary(result):
    return [(p["latency_cycles"], p["energy_pj"], p["decisions"]["tensors"], p["decisions"]["cores"])
            for p in result["points"]]


def test_points_are_feasible_verified_and_non_dominated(inst, front):
    json.dumps(front)  # JSON-able as it is
    assert front["format"] == "monet-ilp/ga" and front["instance"] == inst.name
    assert front["evaluations"] > SMALL["population"] and front["evaluations_per_second"] > 0
    points = front["points"]
    assert points
    for p in points:
        metrics = evaluate(inst, schedule_from_dict(p["schedule"]))
        assert p["feasible"] and metrics.feasible
        assert (metrics.latency_cycles, metrics.energy.total_pj) == (p["latency_cycles"], p["energy_pj"])
        assert p["objective_value"] == metrics.objective_value
        assert not any(dominated_by(p, q) for q in points)


def test_the_same_seed_gives_the_same_front(inst, front):
    assert summary(run_ga(inst, seed=1, **SMALL)) == summary(front)
    assert summary(run_ga(inst, seed=1, workers=2, **SMALL)) == summary(front)
    other = run_ga(inst, seed=2, **SMALL)
    assert other["points"] and all(p["feasible"] for p in other["points"])


def test_a_point_decodes_from_its_decisions(inst, front):
    point = front["points"][0]
    data = {"format": "monet-ilp/decisions", **point["decisions"]}
    schedule = decode(inst, Decisions(data["tensors"], data["cores"], pinned=tuple(data["pinned"])))
    assert evaluate(inst, schedule).latency_cycles == point["latency_cycles"]


def test_seeding_with_a_solver_schedule_keeps_what_it_found(inst):

    solved = solve(inst, "cpsat", time_limit=2, workers=1)
    assert solved.metrics.feasible
    result = run_ga(inst, seed=1, seed_schedules=[solved.schedule], generations=1, population=6)
    best = min(p["latency_cycles"] for p in result["points"])
    assert best <= solved.metrics.latency_cycles


def test_one_objective_and_bad_arguments(inst):
    result = run_ga(inst, objectives=("energy",), seed=1, **SMALL)
    assert len(result["points"]) == 1 and result["objectives"] == ["energy"]
    with pytest.raises(MonetError, match="objectives"):
        run_ga(inst, objectives=("speed",))
    with pytest.raises(MonetError, match="population"):
        run_ga(inst, population=1)


def test_time_limit_stops_after_the_first_generation(inst):
    result = run_ga(inst, seed=1, generations=50, population=6, time_limit=0.0)
    assert result["stopped"] == "time_limit" and result["generations"] == 0


def test_no_feasible_individual_returns_the_least_infeasible(inst):
    result = run_ga(mlp(sram_budget=6 * 1024), seed=1, generations=1, population=6)
    assert len(result["points"]) == 1 and not result["points"][0]["feasible"]


def test_load_hint_accepts_schedules_ga_results_and_decisions(inst, front, tmp_path):
    (tmp_path / "ga.json").write_text(json.dumps(front))
    best = load_hint(tmp_path / "ga.json", inst)
    assert evaluate(inst, best).latency_cycles == min(p["latency_cycles"] for p in front["points"])
    energy = mlp("energy")
    assert evaluate(energy, load_hint(tmp_path / "ga.json", energy)).energy.total_pj == min(
        p["energy_pj"] for p in front["points"])
    save_schedule(best, tmp_path / "s.json")
    assert load_hint(tmp_path / "s.json", inst) == best
    save_decisions(Decisions({"relu1": "offload"}, {"fc1": "pe_1"}), tmp_path / "d.json")
    assert evaluate(inst, load_hint(tmp_path / "d.json", inst)).feasible
    (tmp_path / "x.json").write_text('{"format": "something"}')
    with pytest.raises(MonetError, match="x.json.*format"):
        load_hint(tmp_path / "x.json", inst)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ilp", *args], capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.slow  # 10-30 s: the slow tier (CI runs it after the default one)
def test_cli_ga_then_solve_with_the_hint_then_grade(tmp_path):
    inst_path, ga_path = tmp_path / "inst.json", tmp_path / "ga.json"
    mlp().save(inst_path)
    made = run("ga", str(inst_path), "--objectives", "latency,energy", "--generations", "2", "--population",
               "6", "--seed", "1", "--out", str(ga_path))
    assert made.returncode == 0, made.stderr
    assert "evaluations" in made.stdout and "per second" in made.stdout
    result = json.loads(ga_path.read_text())
    assert result["points"] and result["evaluations"] > 0
    solved = run("solve", str(inst_path), "--hint", str(ga_path), "--time-limit", "2", "--workers", "1",
                 "--json", str(tmp_path / "r.json"))
    assert solved.returncode == 0, solved.stderr
    assert json.loads((tmp_path / "r.json").read_text())["stats"]["hint"] == "given"
    decisions = tmp_path / "d.json"
    decisions.write_text(json.dumps({"format": "monet-ilp/decisions", **result["points"][0]["decisions"]}))
    graded = run("grade", str(decisions), "--instance", str(inst_path), "--time-limit", "3", "--workers", "1",
                 "--json", str(tmp_path / "g.json"))
    assert graded.returncode == 0, graded.stderr
    assert "feasible" in graded.stdout
    (point,) = json.loads((tmp_path / "g.json").read_text())["points"]
    assert point["feasible"] and point["energy_bound_pj"] <= point["energy_pj"]
    decisions.write_text('{"format": "monet-ilp/decisions", "tensors": {"relu1": "drop"}}')
    bad = run("grade", str(decisions), "--instance", str(inst_path))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "d.json" in lines[0] and "tensors.relu1" in lines[0]


@pytest.mark.parametrize("problem", ["P1", "P2"])
def test_the_ga_runs_on_one_core_problems(problem):
    """P1 (keep / recompute, decoded into a Sequence) and P2 (keep / offload / recompute on
    one core): the same front file, every point checked by the evaluator and graded."""
    graph = zoo.resnet18(batch=1)
    inst = make_instance(graph, preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem=problem, budget=0.7)
    result = run_ga(inst, generations=4, population=12, seed=2)
    assert result["scoring"] == ("reference" if problem == "P1" else "fast")
    points = result["points"]
    assert points and all(p["feasible"] for p in points)
    for p in points:
        metrics = evaluate(inst, schedule_from_dict(p["schedule"]))
        assert metrics.feasible and metrics.objective_value == p["objective_value"]
        policies = set(p["decisions"]["tensors"].values())
        assert policies <= ({"keep", "recompute"} if problem == "P1" else {"keep", "offload", "recompute"})
    if problem == "P1":  # the GA's genes stop at recompute: no offload on a one-memory instance
        saved = next(iter(points[0]["decisions"]["tensors"]))
        with pytest.raises(MonetError, match="cannot be offloaded"):
            decode(inst, Decisions({saved: "offload"}))


def test_pin_genes_can_be_left_out():
    """Without pin genes the GA keeps every weight in DRAM (MONET's GA); with them it pins
    some, which on a hetero_quad MLP saves most of the energy."""
    inst = make_instance(zoo.mlp(depth=4), preset("hetero_quad"), problem="P3", objective="energy")
    plain = run_ga(inst, generations=6, population=16, seed=3, pins=False)
    pinned = run_ga(inst, generations=6, population=16, seed=3)
    assert plain["pin_genes"] == 0 and pinned["pin_genes"] > 0
    assert all(not p["decisions"]["pinned"] and not p["schedule"]["pinned"] for p in plain["points"])
    assert any(p["schedule"]["pinned"] for p in pinned["points"])
    assert min(p["energy_pj"] for p in pinned["points"]) < min(p["energy_pj"] for p in plain["points"])
