"""Certified lower bounds and grading: every bound is below every verified schedule's value."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from monet_ilp.analysis.bounds import EVERY_P1_SCHEDULE, combinatorial_bounds, lower_bounds
from monet_ilp.analysis.grade import grade, load_points
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered_literature, zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.memory_aware import memory_aware_schedule
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.instance import MemorySpec, Objective
from monet_ilp.make import make_instance, p1_instance
from monet_ilp.problems.p1.relax import all_schedules_bound
from monet_ilp.problems.p3.bounds import RELAXATION_AT_MOST
from monet_ilp.problems.p3.data import p3_data
from monet_ilp.problems.p3.latency import pinned_path_bound, placement_path_bound
from monet_ilp.schedule import save_schedule
from monet_ilp.solve import Status, solve
from tests.conftest import random_latencies


def small(objective="latency", **kwargs):
    graph = zoo.mlp(depth=1, width=64, batch=8, in_features=64)
    return make_instance(graph, preset("edge_tpu", n_pe_x=2, n_pe_y=1), problem="P3", objective=objective,
                         **kwargs)


def test_combinatorial_bounds_are_below_the_optimum():
    for objective in ("latency", "energy", "weighted"):
        inst = small(objective)
        best = solve(inst, "cpsat", time_limit=None, workers=2)
        assert best.status is Status.OPTIMAL
        for b in combinatorial_bounds(inst):
            if b.value is not None:
                assert b.value <= best.objective + 1e-9, (objective, b)


def test_the_pinned_path_lp_is_below_the_optimum_where_the_weights_do_not_fit():
    """BD.B9 on mlp depth 2 on one core at 512 KiB (2.1 MB of weights): far above the
    critical path, below CP-SAT's proven optimum, and it is the bound the solver reports
    while it has nothing better."""
    inst = make_instance(zoo.mlp(depth=2), preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P3",
                         objective="latency", sram_budget=512 * 1024)
    bounds = {b.name: b.value for b in combinatorial_bounds(inst)}
    assert bounds["pinned_path"] >= 1.4 * bounds["critical_path"]
    best = solve(inst, "cpsat", time_limit=None, workers=2)
    assert best.status is Status.OPTIMAL
    assert bounds["pinned_path"] <= best.objective


def test_the_pinned_path_lp_holds_for_random_decoded_schedules():
    """BD.B9 on ResNet-18 at 3 MiB per core (89 MB of weights, 12 MiB of SRAM): every
    random decoding the evaluator accepts, pins and all, is at least that long."""
    inst = make_instance(zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3",
                         objective="latency", sram_budget=3 * 2**20)
    bounds = {b.name: b.value for b in combinatorial_bounds(inst)}
    assert bounds["pinned_path"] > bounds["critical_path"]
    latencies = random_latencies(inst, 40, seed=3)
    assert len(latencies) >= 10
    assert min(latencies) >= bounds["pinned_path"]


def pins_split(kib=512, objective="latency"):
    """mlp depth 2 on two Edge-TPU cores with ``kib`` KiB each: the weights fit in neither SRAM alone."""
    graph = zoo.mlp(depth=2, width=256, batch=8, in_features=256)
    return make_instance(graph, preset("edge_tpu", n_pe_x=2, n_pe_y=1), problem="P3", objective=objective,
                         sram_budget=kib * 1024)


def test_the_placement_milp_is_below_the_optimum_where_the_pins_split():
    """BD.B12: with the pins and runs placed per SRAM, far above BD.B9 (which pools the
    SRAMs), and below CP-SAT's proven optimum, also over the wider class of three runs
    and two transfers per item.  The values compared are proven ones: BD.B12 and CP-SAT
    without a time limit."""
    for kib in (512, 256):
        inst = pins_split(kib)
        bounds = {b.name: b for b in combinatorial_bounds(inst, relaxation_limit=30)}
        assert bounds["placement_path"].holds_for == "every schedule"
        assert bounds["placement_path"].family == "relaxation"
        placed = placement_path_bound(p3_data(inst))
        assert placed.method == "milp" and bounds["placement_path"].value <= placed.value
        assert placed.value >= 1.4 * bounds["pinned_path"].value, kib
        for wider in ({}, {"max_computes": 3, "max_transfers": 2}):
            best = solve(inst, "cpsat", time_limit=None, workers=2, **wider)
            assert best.status is Status.OPTIMAL
            assert placed.value <= best.objective, (kib, wider)
        assert placed.value >= 0.99 * best.objective  # 41,047 against 41,111 at 512 KiB


def one_core_512k():
    return make_instance(zoo.mlp(depth=2), preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P3",
                         objective="latency", sram_budget=512 * 1024)


def mlp6_two_cores():
    return make_instance(zoo.mlp(depth=6), preset("edge_tpu", n_pe_x=2, n_pe_y=1), problem="P3",
                         objective="latency")


def resnet18_3mib():
    return make_instance(zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3",
                         objective="latency", sram_budget=3 * 2**20)


@pytest.mark.parametrize(("inst", "closes"), [
    pytest.param(one_core_512k, True, id="mlp2_one_core"),
    pytest.param(pins_split, False, id="split_pins"),
    pytest.param(mlp6_two_cores, False, id="mlp6_two_cores", marks=pytest.mark.slow),  # CP-SAT's proof: 10 s
])
def test_the_tail_rows_lift_the_placement_milp_to_the_optimum_on_one_core(inst, closes):
    """BD.B12.10: what runs after an op's earliest end must fit on the cores between it
    and the makespan.  On mlp depth 2 on one core at 512 KiB that closes BD.B12 on
    CP-SAT's proven optimum; on the split-pin MLP and mlp depth 6 on two cores it lifts
    it, and stays below the optimum."""
    inst = inst()
    data = p3_data(inst)
    plain = placement_path_bound(data, tails=False).value
    tailed = placement_path_bound(data).value
    best = solve(inst, "cpsat", time_limit=None, workers=2)
    assert best.status is Status.OPTIMAL
    assert plain < tailed <= best.objective
    assert (tailed == best.objective) is closes


@pytest.mark.parametrize(("inst", "draws"), [
    pytest.param(pins_split, 300, id="split_pins"),
    pytest.param(resnet18_3mib, 30, id="resnet18", marks=pytest.mark.slow),  # 30 decodings: 10 s
])
def test_the_placement_milp_holds_for_random_decoded_schedules(inst, draws):
    """BD.B12 against every random decoding the evaluator accepts (pins, recomputations,
    offloads, layers on either core), on the split-pin MLP and on ResNet-18 at 3 MiB."""
    inst = inst()
    bound = placement_path_bound(p3_data(inst))
    assert bound.value is not None and bound.value > pinned_path_bound(p3_data(inst))
    latencies = random_latencies(inst, draws, seed=5)
    assert len(latencies) >= draws // 4
    assert min(latencies) >= bound.value


def test_a_latency_backend_reports_the_placement_milp_as_its_floor():
    """The LNS proves nothing of its own: on latency its bound is BD.B12 (backend_floor).
    BD.B12 is computed once per instance (its limit is the floor's longest), and the
    LNS's floor is that same value, whatever the LNS's time limit let it compute."""
    inst = pins_split()
    bounds = {b.name: b.value for b in combinatorial_bounds(inst, relaxation_limit=RELAXATION_AT_MOST)}
    placed = bounds["placement_path"]
    assert placed == max(v for v in bounds.values() if v is not None)
    assert placed <= placement_path_bound(p3_data(inst)).value  # at most BD.B12's proven optimum
    result = solve(inst, "lns", time_limit=8, workers=1)
    assert result.bound == placed
    assert result.objective >= placed


@pytest.mark.slow  # 8-14 s: the slow tier (CI runs it after the default one)
def test_the_weighted_bound_takes_its_latency_term_from_the_placement_milp():
    """BD.B3w: each term of the weighted sum bounded on its own, the latency by BD.B12
    where it is above the closed forms, the energy by BD.E.  Each term is computed once
    per instance: the latency and energy bounds first, then the weighted one from them."""
    inst = pins_split(objective="weighted")
    data = p3_data(inst)
    assert placement_path_bound(data).value > pinned_path_bound(data)
    placed = next(b.value for b in combinatorial_bounds(inst, Objective.LATENCY, relaxation_limit=20)
                  if b.name == "placement_path")
    assert placed <= placement_path_bound(data).value
    energy = {b.name: b.value for b in combinatorial_bounds(inst, Objective.ENERGY, relaxation_limit=20)}
    bounds = {b.name: b for b in combinatorial_bounds(inst, relaxation_limit=20)}
    relaxed = bounds["latency_and_energy_relaxation"]
    meta, alpha = inst.meta, inst.alpha
    expected = (alpha * placed / meta["latency_ref_cycles"]
                + (1 - alpha) * energy["energy_relaxation"] / meta["energy_ref_pj"])
    assert relaxed.value == pytest.approx(expected, rel=1e-12)
    assert f"latency >= {placed} cycles" in relaxed.detail
    # Below the weighted value of every schedule: CP-SAT's proven optimum for its class.
    result = solve(inst, "cpsat", time_limit=None, workers=1)
    assert result.status is Status.OPTIMAL and relaxed.value <= result.objective


def test_bounds_hold_for_heuristic_schedules_too():
    inst = small("energy")
    for sched in (store_all_schedule(inst), memory_aware_schedule(inst)):
        metrics = evaluate(inst, sched)
        for b in combinatorial_bounds(inst):
            if b.value is not None:
                assert b.value <= metrics.energy.total_pj


def test_lower_bounds_report_the_best_and_its_source():
    report = lower_bounds(small(), time_limit=30, workers=2)
    names = {b["name"] for b in report["bounds"]}
    assert {"critical_path", "work", "memory", "cpsat"} <= names
    assert report["best"] == max(b["value"] for b in report["bounds"] if b["value"] is not None)
    assert report["incumbent"] is not None and report["best"] <= report["incumbent"]


def test_lower_bounds_on_p1_without_the_solver_are_the_closed_forms():
    inst = p1_instance(random_layered_literature(30, seed=0), 0.8)
    quick = lower_bounds(inst, solver=False)
    by_name = {b["name"]: b for b in quick["bounds"]}
    assert set(by_name) == {"every_op_once", "cut"}
    assert by_name["every_op_once"]["value"] <= by_name["cut"]["value"] == quick["best"]


@pytest.mark.slow  # 20 s of the solver; the bounds themselves are tests/problems/p1/test_relax.py's
def test_lower_bounds_on_p1_list_the_bounds_over_every_schedule():
    """P1: every op once, BD.B7, BD.B10 and the boundary relaxation, each at most what
    the solver's proven optimum costs (its class is a part of P1)."""
    inst = p1_instance(random_layered_literature(30, seed=0), 0.8)
    report = lower_bounds(inst, time_limit=20, workers=1)  # CP-SAT finds a schedule on a loaded machine too
    by_name = {b["name"]: b for b in report["bounds"]}
    assert {"every_op_once", "cut", "boundary_lp", "cpsat"} <= set(by_name)
    assert by_name["every_op_once"]["value"] <= by_name["cut"]["value"]
    assert by_name["boundary_lp"]["holds_for"] == EVERY_P1_SCHEDULE
    # On a model this small BD.B10 runs after the relaxation's MILP, and only when that MILP
    # is not proven in its time: asked for alone, it is there, above the cut bound.
    closure = all_schedules_bound(inst, method="closure")
    assert by_name["cut"]["value"] <= closure.value <= report["incumbent"]
    if "closure" in by_name:
        assert by_name["closure"]["value"] <= report["incumbent"]
    assert report["incumbent"] is not None
    assert all(b["value"] <= report["incumbent"] for b in report["bounds"] if b["value"] is not None)
    quick = lower_bounds(inst, solver=False)
    assert {b["name"] for b in quick["bounds"]} == {"every_op_once", "cut"}


def graded(inst, tmp_path, time_limit):
    """``grade`` on the memory-aware schedule of ``inst``, saved and loaded as a user's point."""
    path = tmp_path / "s.json"
    save_schedule(memory_aware_schedule(inst), path)
    report = grade(inst, load_points(path, inst), time_limit=time_limit, workers=2)
    (row,) = report["points"]
    return report, row


def test_grade_gives_certified_gaps(tmp_path):
    inst = small()
    _, row = graded(inst, tmp_path, 20)
    assert row["feasible"]
    assert row["latency_bound_cycles"] <= row["latency_cycles"]
    assert row["energy_bound_pj"] <= row["energy_pj"] and 0 <= row["energy_gap"] < 1
    # The bound at the point's latency holds for the energy optimum under that limit.
    capped = dataclasses.replace(inst, objective=Objective.ENERGY, runtime_limit_cycles=row["latency_cycles"])
    best = solve(capped, "cpsat", time_limit=30, workers=2)
    assert best.objective >= row["energy_bound_pj"]


def test_grade_bounds_latency_by_the_placement_milp_too(tmp_path):
    """Grading a point on the split-pin MLP: its latency bound is at least BD.B12, and the
    source is named after the bound that gave it (grading reuses the BD.B12 computed here)."""
    inst = pins_split()
    placed = next(b.value for b in combinatorial_bounds(inst, relaxation_limit=10) if b.name == "placement_path")
    assert placed <= placement_path_bound(p3_data(inst)).value
    report, row = graded(inst, tmp_path, 10)
    assert row["feasible"] and placed <= row["latency_bound_cycles"] <= row["latency_cycles"]
    assert report["latency_bound_source"] in ("placement_path", "cpsat")
    if report["latency_bound_source"] == "placement_path":
        assert row["latency_bound_cycles"] == placed


def test_bound_command_without_the_solver(tmp_path):
    inst = small()
    path = tmp_path / "inst.json"
    inst.save(path)
    out = subprocess.run([sys.executable, "-m", "monet_ilp", "bound", str(path), "--objective", "energy",
                          "--no-solver", "--json", str(tmp_path / "b.json")], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["objective"] == "energy" and data["best_source"] == "cheapest_energy"


def test_the_memory_bound_checks_each_op_against_its_own_cores():
    """An op confined to a small core that still fits it: no infeasibility claim."""
    inst = small()
    data = p3_data(inst)
    footprint = {op.id: sum(data.items[i].bytes for i in op.reads + op.writes) for op in data.ops}
    small_op = min((op for op in footprint if footprint[op] > 0), key=footprint.get)
    assert footprint[small_op] < max(footprint.values())
    tight = footprint[small_op]  # pe_1 holds this op, but not the largest one
    memories = tuple(MemorySpec(m.id, m.kind, tight if m.id == "pe_1.sram" else m.capacity_bytes,
                                m.read_fj_per_byte, m.write_fj_per_byte) for m in inst.memories)
    costs = {op: ({"pe_1": row["pe_1"]} if op == small_op else row) for op, row in inst.costs.items()}
    confined = dataclasses.replace(inst, memories=memories, costs=costs)
    memory = next(b for b in combinatorial_bounds(confined) if b.name == "memory")
    assert memory.value is None and "fits" in memory.detail
    infeasible = dataclasses.replace(inst, memories=tuple(
        dataclasses.replace(m, capacity_bytes=1) if m.kind == "sram" else m for m in inst.memories))
    memory = next(b for b in combinatorial_bounds(infeasible) if b.name == "memory")
    assert memory.value == float("inf")


def test_a_runtime_limit_below_the_latency_bound_is_an_infinite_bound_not_an_error():
    inst = small("energy")
    latency = max(b.value for b in combinatorial_bounds(small()) if b.value is not None)
    capped = dataclasses.replace(inst, runtime_limit_cycles=latency - 1)
    bounds = {b.name: b for b in combinatorial_bounds(capped)}
    assert bounds["runtime_limit"].value == float("inf")
