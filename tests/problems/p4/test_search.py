"""The P4 search: a verified plan, a bound below every plan of the class, and the CLI around it."""

from __future__ import annotations

import json
import random

import pytest

from monet_ilp.cli import main
from monet_ilp.hardware.cluster import dgx_a100, edge_tpu_mesh
from monet_ilp.problems.p4.evaluate import evaluate_plan
from monet_ilp.problems.p4.model import model_config
from monet_ilp.problems.p4.plan import Plan
from monet_ilp.problems.p4.search import plan_pareto, plan_search, work_bound


def random_plans(model, cluster, global_batch, rng, count):
    """Plans of the search's class, drawn at random (uniform stages, one recomputation option)."""
    n = cluster.devices
    made = 0
    while made < count:
        t = rng.choice([x for x in (1, 2, 4, 8) if model.heads % x == 0 and x <= cluster.devices_per_node])
        p = rng.choice([x for x in range(1, model.layers + 1) if (n // t) % x == 0])
        d = n // (t * p)
        b = rng.choice([x for x in (1, 2, 4, 8) if global_batch % (d * x) == 0])
        per = [model.layers // p + (1 if i < model.layers % p else 0) for i in range(p)]
        yield Plan(d, p, t, t > 1 and rng.random() < 0.5, b, global_batch // (d * b), rng.choice(["1f1b", "gpipe"]),
                   tuple(per), tuple(rng.choice(["none", "selective", "full"]) for _ in range(model.layers)),
                   rng.choice([0, 1, 2, 3]) if d > 1 else 0)
        made += 1


def test_gpt2_medium_on_two_nodes_is_verified_and_bounded():
    model = model_config("gpt2", preset="medium")
    cluster = dgx_a100(nodes=2)
    result = plan_search(model, cluster, global_batch=256, time_limit=60)
    assert result.status in ("optimal", "feasible") and result.metrics.feasible
    again = evaluate_plan(model, cluster, result.plan)
    assert again.time_s == result.value
    assert work_bound(model, cluster, 256) <= result.bound <= result.value * (1 + 1e-9)  # float noise (BD.C1)
    assert result.gap <= 0.02
    rng = random.Random(3)
    for plan in random_plans(model, cluster, 256, rng, 60):
        metrics = evaluate_plan(model, cluster, plan)
        if metrics.feasible:
            assert metrics.time_s >= result.bound * (1 - 1e-9)


@pytest.mark.parametrize("preset,nodes", [("medium", 1), ("large", 2)])
def test_the_candidate_bound_holds_for_every_split_and_recomputation(preset, nodes):
    """P4.S3: the bound of a candidate (its degrees, micro-batching, schedule, ZeRO) is at
    most the time and energy of every plan of it: random uneven stages and options."""
    from monet_ilp.problems.p4.costs import plan_costs
    from monet_ilp.problems.p4.search import _even_bound

    model, cluster = model_config("gpt2", preset=preset), dgx_a100(nodes=nodes)
    rng = random.Random(5)
    checked = 0
    for plan in random_plans(model, cluster, rng.choice([8, 64, 256]), rng, 150):
        cut = sorted(rng.sample(range(1, model.layers), plan.pipeline - 1))
        stages = tuple(b - a for a, b in zip([0, *cut], [*cut, model.layers], strict=True))
        plan = Plan(plan.data, plan.pipeline, plan.tensor, plan.sequence_parallel, plan.micro_batch,
                    plan.micro_batches, plan.schedule, stages, plan.recompute, plan.zero)
        costs = plan_costs(model, cluster, data=plan.data, pipeline=plan.pipeline, tensor=plan.tensor,
                           sequence_parallel=plan.sequence_parallel, micro_batch=plan.micro_batch, zero=plan.zero)
        metrics = evaluate_plan(model, cluster, plan, costs=costs)
        candidate = {"data": plan.data, "pipeline": plan.pipeline, "tensor": plan.tensor,
                     "micro_batches": plan.micro_batches, "schedule": plan.schedule}
        _, seconds = _even_bound(costs, candidate, model.layers, (1.0, 0.0), cluster)
        joules, _ = _even_bound(costs, candidate, model.layers, (0.0, 1.0), cluster)
        assert seconds <= metrics.time_s * (1 + 1e-12)  # feasible or not: memory only restricts
        assert joules <= metrics.energy_j * (1 + 1e-12)
        checked += plan.pipeline > 1
    assert checked >= 60  # most with a pipeline, so the bubble terms are tested


def test_energy_objective_and_an_edge_mesh():
    model = model_config("gpt2", preset="small")
    cluster = edge_tpu_mesh(chips=4)
    result = plan_search(model, cluster, global_batch=8, objective="energy", time_limit=30)
    assert result.metrics is not None and result.metrics.feasible
    assert result.bound <= result.value * (1 + 1e-9) and result.value == result.metrics.energy_j


def test_cli_plan_and_layer_memory(tmp_path, capsys):
    out, png = tmp_path / "plan.json", tmp_path / "plan.png"
    try:
        main(["plan", "--model", "gpt2", "-p", "preset=small", "--cluster", "dgx_a100", "--nodes", "1",
              "--global-batch", "64", "--time-limit", "20", "--json", str(out), "--plot", str(png)])
    except SystemExit as stop:
        assert stop.code in (0, None)
    data = json.loads(out.read_text())
    assert data["feasible"] and data["bound"] <= data["time_per_iteration_s"]
    assert png.stat().st_size > 0
    memory = tmp_path / "layer.json"
    main(["layer-memory", "--seq", "2048", "--batch", "1", "--hidden", "12288", "--heads", "96", "--tp", "8",
          "--sequence-parallel", "--recompute", "selective", "--json", str(memory)])
    assert json.loads(memory.read_text())["bytes"] == 34 * 2048 * 12288 // 8


def test_cli_bad_input_exits_2(capsys):
    try:
        main(["plan", "--model", "gpt2", "-p", "size=huge", "--global-batch", "8"])
    except SystemExit as stop:
        assert stop.code == 2
    else:
        raise AssertionError("no exit")
    assert "size" in capsys.readouterr().err


def test_a_p4_instance_file_solves_and_bad_ones_exit_2(tmp_path, capsys):
    path, out = tmp_path / "p4.json", tmp_path / "result.json"
    try:
        main(["plan", "--model", "gpt2", "-p", "preset=small", "--nodes", "1", "--global-batch", "32",
              "--time-limit", "20", "--save-instance", str(path)])
    except SystemExit as stop:
        assert stop.code in (0, None)
    try:
        main(["solve", str(path), "--time-limit", "20", "--json", str(out)])
    except SystemExit as stop:
        assert stop.code in (0, None)
    assert json.loads(out.read_text())["feasible"]
    bad = tmp_path / "bad.json"
    data = json.loads(path.read_text())
    data["global_batch"] = 0
    bad.write_text(json.dumps(data))
    try:
        main(["solve", str(bad)])
    except SystemExit as stop:
        assert stop.code == 2
    else:
        raise AssertionError("no exit")
    assert "global_batch" in capsys.readouterr().err


@pytest.mark.slow  # 8-14 s: the slow tier (CI runs it after the default one)
def test_weighted_objective_and_the_pareto_front():
    model = model_config("gpt2", preset="small")
    cluster = dgx_a100(nodes=1)
    fastest = plan_search(model, cluster, global_batch=64, objective="time", time_limit=30)
    weighted = plan_search(model, cluster, global_batch=64, objective="weighted", alpha=0.5, time_limit=30)
    refs = weighted.stats["references"]
    assert refs["time_s"] == fastest.value
    expected = 0.5 * weighted.metrics.time_s / refs["time_s"] + 0.5 * weighted.metrics.energy_j / refs["energy_j"]
    assert weighted.value == expected and weighted.bound <= weighted.value <= 1.0 + 1e-12
    front = plan_pareto(model, cluster, global_batch=64, points=3, time_limit=60)
    assert front and all(r.metrics.feasible and r.bound <= r.value for r in front)
    times = [r.metrics.time_s for r in front]
    energies = [r.metrics.energy_j for r in front]
    assert times == sorted(times) and energies == sorted(energies, reverse=True)
    capped = plan_search(model, cluster, global_batch=64, objective="energy", time_cap=fastest.value * 0.5,
                         time_limit=30)
    assert capped.metrics is None  # nothing runs in half the fastest time
