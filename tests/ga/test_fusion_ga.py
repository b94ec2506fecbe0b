"""The GA's fusion genes (``formulations/fusion.md`` FU.G): plans from genes, decisions
mapped by name onto the tiled instance, the fast path equal to the evaluator on fused
decisions, and a front of verified fused points."""

from __future__ import annotations

import json

import numpy as np
import pytest

from monet_ilp.analysis.fusion import fusion_bound
from monet_ilp.cli import main
from monet_ilp.evaluate import evaluate
from monet_ilp.ga.fusion import FusionGenome, run_fusion_ga
from monet_ilp.graph import zoo
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.graph.fusion import FusionPlan, chains
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance
from monet_ilp.schedule import schedule_from_dict

HW = preset("edge_tpu", n_pe_x=2, n_pe_y=2)


@pytest.fixture(scope="module")
def gpt():
    return zoo.gpt2(n_layer=1, d_model=32, n_head=2, seq=16, vocab=64, batch=2)


def test_cut_and_tile_genes_make_the_plan(gpt):
    genome = FusionGenome(gpt, HW, {"problem": "P3", "sram_budget": 2**20})
    run = chains(gpt)[0]
    x = np.zeros(genome.size, dtype=int)
    assert genome.plan(x).fused == ()  # every cut gene 0: layer by layer
    n = genome.genome.size
    x[n:n + 2] = 1            # the first three ops of the chain joined
    x[n + len(run) - 1] = 2   # the first op's tile gene: 4 tiles
    (stack,) = genome.plan(x).fused
    assert stack.ops == tuple(run[:3]) and stack.tiles == 4
    x[n + len(run) - 1] = 0   # one tile: layer by layer again
    assert genome.plan(x).fused == ()


@pytest.mark.parametrize("phase,objective", [("training", "latency"), ("training", "energy"),
                                             ("inference", "latency")])
def test_the_fast_path_equals_the_evaluator_on_random_fused_decisions(gpt, phase, objective):
    graph = gpt if phase == "training" else inference_graph(gpt)
    genome = FusionGenome(graph, HW, {"problem": "P3", "sram_budget": 2**19, "objective": objective})
    rng = np.random.default_rng(7)
    fused = 0
    for _ in range(60):
        x = rng.integers(genome.lower, genome.upper + 1)
        score = genome.score(x, ("latency", "energy"))
        _, metrics = genome.evaluated(x)
        assert score.objectives == (metrics.latency_cycles, metrics.energy.total_pj)
        assert (score.violation == 0) == metrics.feasible
        assert score.objective_value == metrics.objective_value
        fused += bool(genome.plan(x).fused)
    assert fused >= 40  # most random vectors fuse something


# Found by scripts/bench_fusion_fast.py (seed 1): ResNet-18 inference, energy, four stacks
# of 2-4 layers. A rerun chain three tiles deep moved an input into another core and
# released its home copy, which an op waiting on the rerun had fetched already: the
# decoder then lost that input (KeyError).
RERUN_CHAIN = [0, 2, 3, 3, 1, 2, 2, 3, 1, 2, 1, 1, 2, 2, 0, 2, 0, 1, 0, 3, 2, 0, 1, 1, 0, 0, 0, 0, 1, 1,
               1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0,
               3, 1, 1, 2, 3, 3, 0, 3, 3, 0, 1, 1, 0, 1, 3, 1, 0, 1, 0]


def test_a_rerun_keeps_the_copies_that_the_ops_waiting_on_it_hold():
    graph = inference_graph(zoo.resnet18(batch=1))
    genome = FusionGenome(graph, HW, {"problem": "P3", "sram_budget": 3 * 2**20, "objective": "energy"})
    x = np.array(RERUN_CHAIN)
    assert len(genome.plan(x).fused) == 4
    score = genome.score(x, ("latency", "energy"))
    _, metrics = genome.evaluated(x)
    assert metrics.recomputations > 0
    assert score.objectives == (metrics.latency_cycles, metrics.energy.total_pj)
    assert (score.violation == 0) == metrics.feasible


def test_the_front_holds_verified_fused_points(gpt):
    opts = {"problem": "P3", "sram_budget": 2**20}
    front = run_fusion_ga(gpt, HW, opts, generations=4, population=16, seed=3)
    assert front["points"] and front["fusion_genes"] > 0
    assert any(p["fusion"]["stacks"] for p in front["points"])
    genome = FusionGenome(gpt, HW, opts)
    for point in front["points"]:
        inst = make_instance(gpt, HW, fusion=FusionPlan.from_dict(point["fusion"]), **opts)
        assert inst.fingerprint == point["instance_fingerprint"]
        metrics = evaluate(inst, schedule_from_dict(point["schedule"]))
        assert metrics.feasible and metrics.latency_cycles == point["latency_cycles"]
    assert genome.size == front["fusion_genes"] + genome.genome.size


@pytest.mark.parametrize("phase,objective", [("training", "latency"), ("inference", "energy")])
def test_the_bound_over_every_plan_holds_for_random_fused_schedules(gpt, phase, objective):
    """FU.B1, FU.B2: no verified schedule of any plan is below the bound."""
    graph = gpt if phase == "training" else inference_graph(gpt)
    genome = FusionGenome(graph, HW, {"problem": "P3", "sram_budget": 2**20, "objective": objective})
    bound = fusion_bound(graph, HW, genome.base)
    assert 0 < bound.latency_cycles and 0 < bound.energy_pj
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(40):
        x = rng.integers(genome.lower, genome.upper + 1)
        _, metrics = genome.evaluated(x)
        if metrics.feasible:
            checked += 1
            assert metrics.latency_cycles >= bound.latency_cycles
            assert metrics.energy.total_pj >= bound.energy_pj
    assert checked >= 20


def test_grade_sends_a_fused_front_to_the_fusion_ga(gpt, tmp_path, capsys):
    opts = {"problem": "P3", "sram_budget": 2**20}
    front = run_fusion_ga(gpt, HW, opts, generations=2, population=12, seed=5)
    fused = [p for p in front["points"] if p["fusion"]["stacks"]]
    assert fused
    (tmp_path / "front.json").write_text(json.dumps({**front, "points": fused}))
    make_instance(gpt, HW, **opts).save(tmp_path / "plain.json")
    try:
        main(["grade", str(tmp_path / "front.json"), "--instance", str(tmp_path / "plain.json")])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2 and "fusion ga --grade" in capsys.readouterr().err
