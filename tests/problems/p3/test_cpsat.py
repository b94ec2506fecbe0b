"""P3 (joint allocation, remat, offload, pinning on several cores): the CP-SAT model.

Every schedule goes through the evaluator (``monet_ilp.solve``), and every claimed
objective must be the evaluator's.  Instances are small MLPs on two-core Edge TPUs
and on hetero_quad, built by ``make_instance(..., problem="P3")``.
"""

from __future__ import annotations

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.make import make_instance
from monet_ilp.problems.p3.cpsat import SMALL_OPS, P3CpModel, solve_p3_cpsat
from monet_ilp.problems.p3.data import p3_data
from monet_ilp.problems.p3.milp.symmetry import core_automorphisms, first_core_excluded
from monet_ilp.schedule import load_schedule
from monet_ilp.solve import Status, solve
from tests.conftest import verified

TWO = {"n_pe_x": 2, "n_pe_y": 1}


def small(objective="latency", *, depth=1, width=64, batch=8, hw=None, **kwargs):
    graph = zoo.mlp(depth=depth, width=width, batch=batch, in_features=64)
    return make_instance(graph, hw or preset("edge_tpu", **TWO), problem="P3", objective=objective,
                         **kwargs)


def solved(instance, **options):
    """``solve(instance, "cpsat", ...)``, then :func:`verified`; it must return a schedule."""
    result = solve(instance, "cpsat", **options)
    assert verified(instance, result) is not None and result.metrics is not None, result.message
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE), result.message
    return result


def test_latency_optimum_is_verified_and_beats_store_all():
    inst = small()
    result = solved(inst, time_limit=None, workers=2)
    assert result.status is Status.OPTIMAL and result.gap == 0
    assert result.objective == result.metrics.latency_cycles
    base = evaluate(inst, store_all_schedule(inst))
    assert base.feasible and result.objective <= base.latency_cycles
    assert result.objective >= p3_data(inst).critical_path_cycles()
    assert {r.core for r in result.schedule.ops} <= {"pe_0", "pe_1"}


def test_energy_optimum_under_a_runtime_limit():
    free = solved(small("energy"), time_limit=None, workers=2)
    fast = solved(small("latency"), time_limit=None, workers=2)
    assert free.status is Status.OPTIMAL and fast.status is Status.OPTIMAL
    # The ε-constraint: the energy optimum within the fastest schedule's latency costs at
    # least the unconstrained energy optimum, and keeps to the limit.
    limit = fast.metrics.latency_cycles
    capped = solved(small("energy", runtime_limit_cycles=limit), time_limit=None, workers=2)
    assert capped.metrics.latency_cycles <= limit
    assert capped.objective >= free.objective
    assert capped.objective == capped.metrics.energy.total_pj


def test_pinning_weights_saves_dram_energy():
    pinned = solved(small("energy"), time_limit=None, workers=2)
    unpinned = solved(small("energy"), time_limit=None, workers=2, allow_pin=False)
    assert pinned.schedule.pinned and not unpinned.schedule.pinned
    assert pinned.objective < unpinned.objective


def test_small_sram_needs_recompute_or_offload():
    inst = small()
    base = evaluate(inst, store_all_schedule(inst))
    peak = max(base.peak_bytes[m.memory] for m in inst.cores)
    need = p3_data(inst).min_sram_bytes()
    assert need < peak
    budget = need + (peak - need) // 3
    tight = small(sram_budget=budget)
    assert not evaluate(tight, store_all_schedule(tight)).feasible
    result = solved(tight, time_limit=None, workers=2)
    assert result.metrics.recomputations + result.metrics.transfers > 0
    for core in tight.cores:
        assert result.metrics.peak_bytes[core.memory] <= budget


def test_an_sram_that_no_op_fits_is_infeasible_with_the_minimum():
    inst = small(sram_budget=1024)
    result = solve(inst, "cpsat", time_limit=10, workers=2)
    assert result.status is Status.INFEASIBLE and result.schedule is None
    assert str(p3_data(inst).min_sram_bytes()) in result.message


def test_weighted_objective_matches_the_evaluator():
    inst = small("weighted")
    assert {"latency_ref_cycles", "energy_ref_pj"} <= set(inst.meta)
    result = solved(inst, time_limit=None, workers=2)
    assert isinstance(result.objective, float) and result.objective <= 1.0
    assert result.bound is not None and result.bound <= result.objective


def test_colocating_layers_never_beats_the_free_allocation():
    free = solved(small(depth=2), time_limit=None, workers=2)
    layer = solved(small(depth=2), time_limit=None, workers=2, colocate="layer")
    assert free.objective <= layer.objective
    graph = small(depth=2).graph
    first = {}
    for run in sorted(layer.schedule.ops):
        first.setdefault(run.op, run.core)
    core_of = {}
    for op_id, core in first.items():
        core_of.setdefault(graph.op(op_id).layer, set()).add(core)
    assert all(len(cores) == 1 for layer_id, cores in core_of.items() if layer_id)


def test_heterogeneous_cores_and_a_given_hint():
    inst = small(hw=preset("hetero_quad"))
    hint = store_all_schedule(inst)
    result = solved(inst, time_limit=8, workers=2, hint=hint)
    assert result.stats["hint"] == "given"
    assert result.objective <= evaluate(inst, hint).latency_cycles


def test_unknown_option_is_a_clear_error():
    with pytest.raises(MonetError, match="unknown option"):
        solve_p3_cpsat(small(), passes=2)


def test_memory_aware_list_schedule_keeps_to_the_sram():
    from monet_ilp.heuristics.memory_aware import memory_aware_schedule

    inst = small(depth=2)
    base = evaluate(inst, store_all_schedule(inst))
    peak = max(base.peak_bytes[c.memory] for c in inst.cores)
    need = p3_data(inst).min_sram_bytes()
    budget = need + (peak - need) // 4
    tight = small(depth=2, sram_budget=budget)
    for allocate in ("layer", "op"):
        sched = memory_aware_schedule(tight, allocate=allocate)
        metrics = evaluate(tight, sched)
        assert metrics.feasible, metrics.violations
        assert metrics.transfers > 0
    with pytest.raises(MonetError, match="needs"):
        memory_aware_schedule(small(depth=2, sram_budget=need - 1))


def test_the_hint_is_returned_when_the_solver_finds_nothing_better():
    inst = small(depth=2, hw=preset("hetero_quad"))
    result = solved(inst, time_limit=0.05, workers=1)
    assert result.bound is None or result.bound <= result.objective


def test_pareto_front_is_non_dominated_and_bounded(tmp_path):
    from monet_ilp.analysis.pareto import pareto_front
    from monet_ilp.results import dominated_by

    front = pareto_front(small(), points=4, time_limit=30, workers=2, schedule_dir=tmp_path / "s")
    points = front["points"]
    assert points and len(front["sweep"]) >= 2
    for p in points:
        assert not any(dominated_by(p, q) for q in points)
        assert p["energy_bound_pj"] is None or p["energy_bound_pj"] <= p["energy_pj"]
        metrics = evaluate(small(), load_schedule(p["schedule"]))
        assert metrics.feasible and metrics.energy.total_pj == p["energy_pj"]
    latencies = [p["latency_cycles"] for p in points]
    energies = [p["energy_pj"] for p in points]
    assert latencies == sorted(latencies) and energies == sorted(energies, reverse=True)


def test_pareto_needs_an_energy_trade_off():
    from monet_ilp.analysis.pareto import pareto_front

    graph = zoo.mlp(depth=1, width=16, batch=2, in_features=16)
    with pytest.raises(MonetError, match="P1"):
        pareto_front(make_instance(graph, None, problem="P1", budget=1.0), points=3)


def test_interchangeable_cores_put_the_first_op_on_the_first_core_and_map_the_hint():
    """P3C.C17: on two identical PEs the first op's first run goes to pe_0; a hint that runs
    it on pe_1 is mapped onto pe_0 (the same cost), so it still hints the whole model, and
    the optimum is the MILP's (which breaks the symmetry the same way, P3M.M15)."""
    inst = small()
    data = p3_data(inst)
    symmetries = core_automorphisms(data)
    assert len(symmetries) == 2 and first_core_excluded(data, symmetries) == ["pe_1"]
    base = store_all_schedule(inst)
    swap = next(g for g in symmetries if g.core["pe_0"] == "pe_1")
    mirrored = swap.apply(base)
    first_op = data.ops[0].id
    assert {r.core for r in mirrored.ops if r.op == first_op} == {"pe_1"}
    assert evaluate(inst, mirrored).latency_cycles == evaluate(inst, base).latency_cycles
    model = P3CpModel(data)
    assert model.add_hint(mirrored) == P3CpModel(data).add_hint(base)
    result = solved(inst, time_limit=None, workers=2, hint=mirrored)
    assert result.status is Status.OPTIMAL
    assert {r.core for r in result.schedule.ops if r.op == first_op} == {"pe_0"}
    assert result.objective == solve(inst, "milp", time_limit=None).objective


def test_small_graphs_prove_with_the_search_without_lp_larger_ones_keep_the_lower_bound_search():
    """p3_cpsat.md, "Search": up to SMALL_OPS ops the full-problem worker is CP-SAT's search
    without LP (it proves small optima under the incumbent); above, the objective
    lower-bound search, whose bound is the higher one there.  A caller's params win."""
    inst = small(depth=2)
    assert len(inst.graph.ops) <= SMALL_OPS
    result = solved(inst, time_limit=None, workers=2)
    assert result.stats["search"] == "no_lp" and result.status is Status.OPTIMAL
    # The same optimum with the lower-bound search, asked for by name.
    other = solved(inst, time_limit=None, workers=2, params={"extra_subsolvers": ["objective_lb_search"]})
    assert other.status is Status.OPTIMAL and other.objective == result.objective
    assert other.stats["search"] == "objective_lb_search"
    large = small(depth=8)
    assert len(large.graph.ops) > SMALL_OPS
    assert solved(large, time_limit=5, workers=2).stats["search"] == "objective_lb_search"
