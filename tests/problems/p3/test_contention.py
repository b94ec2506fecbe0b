"""The contention relaxation (bounds.md BD.B13): a lower bound on the latency of every schedule.

It must never exceed the latency of a schedule the evaluator accepts: CP-SAT's proven
optima on small instances (also over the wider class of three runs and two transfers per
item), and random decoded schedules that pin, recompute, offload and cross cores.  Where
the cores are shared it must say more than BD.B12, which packs each SRAM's work only in
total.
"""

from __future__ import annotations

import pytest

from monet_ilp.analysis.bounds import lower_bounds
from monet_ilp.engines.deadline import Deadline
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance
from monet_ilp.problems.p3.bounds import combinatorial_bounds
from monet_ilp.problems.p3.contention import contention_bound
from monet_ilp.problems.p3.data import p3_data
from monet_ilp.problems.p3.latency import placement_path_bound
from monet_ilp.solve import Status, solve
from tests.conftest import random_latencies


def pins_split(kib: int):
    """mlp depth 2 on two Edge-TPU cores with ``kib`` KiB each: the weights fit in neither SRAM alone."""
    graph = zoo.mlp(depth=2, width=256, batch=8, in_features=256)
    return make_instance(graph, preset("edge_tpu", n_pe_x=2, n_pe_y=1), problem="P3", objective="latency",
                         sram_budget=kib * 1024)


def one_block_on_hetero_quad():
    """gpt2-tiny with one block on the four cores of two sizes: the optimizer steps and the
    weight gradients wait for the backward chain and compete with it for the big cores."""
    return make_instance(zoo.build("gpt2_tiny", n_layer=1, batch=1), preset("hetero_quad"), problem="P3",
                         objective="latency")


@pytest.mark.parametrize("kib", [512, 256])
def test_the_contention_relaxation_is_below_the_proven_optimum(kib):
    inst = pins_split(kib)
    bound = contention_bound(p3_data(inst), Deadline(30))
    assert bound.method == "optimal" and bound.value == bound.relaxed
    for wider in ({}, {"max_computes": 3, "max_transfers": 2}):
        best = solve(inst, "cpsat", time_limit=None, workers=2, **wider)
        assert best.status is Status.OPTIMAL
        assert bound.value <= best.objective, wider
    assert bound.value >= 0.99 * best.objective  # 41,047 / 58,658 against 41,111 / 58,799


def test_on_one_core_the_contention_relaxation_meets_the_optimum():
    """mlp depth 2 on one core at 512 KiB: every run on the one core, one after the other."""
    inst = make_instance(zoo.mlp(depth=2), preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P3",
                         objective="latency", sram_budget=512 * 1024)
    bound = contention_bound(p3_data(inst), Deadline(30))
    best = solve(inst, "cpsat", time_limit=None, workers=2)
    assert best.status is Status.OPTIMAL
    assert bound.value == best.objective  # 268,307


@pytest.mark.slow  # 10-30 s: the slow tier (CI runs it after the default one)
def test_the_contention_relaxation_lifts_the_placement_milp_and_holds_for_random_schedules():
    """On gpt2-tiny with one block on hetero_quad, above BD.B12 (80,831 against 80,637),
    and below every random decoding the evaluator accepts and the schedule `auto` finds."""
    inst = one_block_on_hetero_quad()
    data = p3_data(inst)
    placed = placement_path_bound(data).value
    bound = contention_bound(data, Deadline(60), floor=placed)
    assert bound.method == "optimal"
    assert bound.value > placed
    latencies = random_latencies(inst, 60, seed=3)
    assert len(latencies) >= 15
    assert min(latencies) >= bound.value
    found = solve(inst, "auto", time_limit=4, workers=2)
    assert found.metrics is not None and found.metrics.feasible
    assert found.objective >= bound.value
    # CP-SAT's bound is above the floor only once its search ends: cut short, the value
    # is the floor it was given (a bound over every schedule already), or none.
    cut = contention_bound(data, Deadline(0.05), floor=placed)
    assert cut.value is None or cut.value == placed


@pytest.mark.slow  # 8-14 s: the slow tier (CI runs it after the default one)
def test_bound_and_grade_report_it_and_the_backends_floor_does_not():
    """``lower_bounds`` (``monet-ilp bound``) lists ``contention`` among the relaxations on
    latency, after BD.B12 and at least as high; the floor the backends share leaves it out."""
    inst = one_block_on_hetero_quad()
    report = lower_bounds(inst, time_limit=4, workers=2, solver=True)
    names = {b["name"]: b for b in report["bounds"]}
    assert names["contention"]["family"] == "relaxation"
    assert names["contention"]["holds_for"] == "every schedule"
    assert names["contention"]["value"] >= names["placement_path"]["value"]
    assert report["best"] >= names["contention"]["value"]
    plain = {b.name for b in combinatorial_bounds(inst, relaxation_limit=5)}
    assert "placement_path" in plain and "contention" not in plain
