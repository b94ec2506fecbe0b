"""Bounds over every P1 schedule (monet_ilp.problems.p1.relax; formulations/bounds.md BD.R0-R6,
BD.B7, BD.B8) against the literal P1 optimum and the exact backends.

The literal optimum is the exhaustive search of ``test_milp.brute_force`` with
``order="any"`` (any recomputations, in any order: ``p1_problem.md`` itself, not the
stage form); the stage form's optimum comes from ``solve(backend="milp")``, the chain
class's from ``solve(backend="dp")``.  A bound must never exceed any of them, and a
bound that calls an instance infeasible must be right.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monet_ilp.engines.deadline import Deadline
from monet_ilp.engines.highs import run_highs
from monet_ilp.engines.milp import INTEGER_GAP
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, random_layered_literature
from monet_ilp.graph.analysis import store_all_peak
from monet_ilp.graph.chain import chain_graph
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1 import relax
from monet_ilp.problems.p1.data import p1_data
from monet_ilp.problems.p1.relax import (
    HOLDS_FOR,
    P1Bound,
    all_schedules_bound,
    auto_reach,
    boundary_relaxation,
    chain_bound,
    chain_model,
    closure_model,
    cut_bound,
    model_columns,
    safe_ceil,
)
from monet_ilp.solve import Status, solve
from tests.conftest import verified
from tests.problems.p1.test_milp import between, brute_force, hand_chain, tiny_instance, two_chains


def bounds(instance, reach="full"):
    """The cut, closure, LP and MILP bounds (``method`` each), with no time limit."""
    return {m: all_schedules_bound(instance, method=m, reach=reach)
            for m in ("cut", "closure", "lp", "milp")}


def check_against(instance, optimum: float, found: dict[str, P1Bound]) -> None:
    """Every bound is at most ``optimum`` (a P1 optimum, ``inf`` when nothing fits); an
    infeasible verdict needs ``optimum == inf``; the relaxations are ordered cut <= LP <= MILP,
    and cut <= closure (BD.B10 solves BD.B7's cover exactly, with more rows; BD.B11 chains
    cuts, and its dual bound is not BD.B10's proven value)."""
    for method, bound in found.items():
        assert bound.holds_for == HOLDS_FOR
        if bound.infeasible:
            assert optimum == math.inf, (instance.name, method, bound.stats)
            continue
        assert bound.value <= optimum, (instance.name, method, bound.value, optimum, bound.stats)
        assert bound.value >= bound.stats["every_op_once"]
    if not any(b.infeasible for b in found.values()):
        cut, lp, milp = (found[m].value for m in ("cut", "lp", "milp"))
        assert cut <= lp <= milp, (cut, lp, milp)
        closure = found["closure"]
        assert cut <= closure.value and (closure.proven_optimal_relaxation or closure.stats["closure_chain"])
        assert found["milp"].method == "milp" and found["milp"].proven_optimal_relaxation
        check_relaxation_schedule(instance, optimum, found["milp"])


def check_relaxation_schedule(instance, optimum: float, bound: P1Bound) -> bool:
    """BD.R7: the MILP's plan computes what the relaxation pays; when the evaluator
    accepts it, it is a P1 schedule (never below the literal optimum), and at the
    relaxation's proven optimum it is the literal optimum.  Returns whether it was accepted."""
    assert bound.schedule is not None and bound.solver_optimum is not None
    metrics = evaluate(instance, bound.schedule)
    assert metrics.compute_cycles == bound.solver_optimum, (metrics.compute_cycles, bound.stats)
    if not metrics.feasible:
        return False
    assert metrics.compute_cycles >= optimum
    assert metrics.compute_cycles == optimum, (instance.name, metrics.compute_cycles, optimum)
    return True


# ====================================================================== the literal optimum
@pytest.mark.parametrize("seed", range(32))
def test_never_above_the_literal_p1_optimum(seed):
    instance = tiny_instance(seed, optimizer=seed % 4 == 3)
    optimum, _ = brute_force(instance, order="any")
    for reach in ("full", "direct"):
        check_against(instance, optimum, bounds(instance, reach))


def test_two_chains_bound_is_above_the_stage_forms_class():
    """p1_milp.md P1M.A1: the stage form cannot schedule two_chains at 21 bytes, P1 can (cost
    11).  The bound holds for P1, so it may not say "infeasible"; its MILP is tight here."""
    instance = p1_instance(two_chains(), budget=21)
    assert solve(instance, "milp").status is Status.INFEASIBLE
    optimum, _ = brute_force(instance, order="any")
    assert optimum == 11
    bound = all_schedules_bound(instance)
    assert not bound.infeasible
    assert bound.value == 11 and bound.method == "milp" and bound.proven_optimal_relaxation
    # BD.R7: its plan recomputes in node order inside a stage, which does not fit here.
    assert not check_relaxation_schedule(instance, optimum, bound)


def test_hand_chain_cut_bound_is_the_optimum():
    """At 4 bytes ``a`` cannot stay beside ``b -> c`` and must come back for ``d``: BD.B7 finds it."""
    instance = p1_instance(hand_chain(), budget=4)
    bound = all_schedules_bound(instance, method="cut")
    assert bound.value == 23 and bound.method == "cut" and bound.stats["cut_k"] == 2


@pytest.mark.slow  # 10-30 s: the slow tier (CI runs it after the default one)
def test_closure_bound_brings_back_what_recomputations_read():
    """BD.B10 on a literature DAG at 0.8: above BD.B7 and the relaxation's LP (each cut's
    restore problem, exactly, with the inputs of every recomputation); BD.B11's chain of
    cuts above its best cut (each cut forces recomputations of its own); all below a
    schedule."""
    instance = p1_instance(random_layered_literature(30, seed=0), 0.8)
    data = p1_data(instance)
    cuts = cut_bound(data).cuts
    single = sum(data.cost) + max(round(run_highs(closure_model(data, k)).objective or 0) for k in cuts)
    closure = all_schedules_bound(instance, method="closure")
    lp = all_schedules_bound(instance, method="lp")
    assert closure.method == "closure"
    assert single > lp.value > closure.stats["cut"]
    chain = closure.stats["closure_chain"]
    assert len(chain) >= 2 and closure.value > single
    linked = run_highs(chain_model(data, chain), gap_abs=INTEGER_GAP)
    assert linked.status == "optimal" and closure.value == sum(data.cost) + safe_ceil(linked.bound)
    # Below a schedule: CP-SAT's optimum of the stage form, on one worker and with no clock
    # (auto under a time limit may find none on a loaded machine); about 10 s here.
    result = solve(instance, "cpsat", workers=1, seed=0)
    verified(instance, result)
    assert result.objective is not None and closure.value <= result.objective


@pytest.mark.slow  # its rounds double from 1 ms up to the proofs; the chain itself is in the test above
def test_a_chain_cut_short_runs_again_with_twice_the_time(monkeypatch):
    """BD.B11: with a first limit far too short for HiGHS, a round that no try raises runs
    again with the limit doubled, the chain itself first, until every try is proven; the
    greedy then stops before its deadline, and the bound it returns is its chain's proven
    optimum, above the best cut's."""
    instance = p1_instance(random_layered_literature(30, seed=0), 0.8)
    data = p1_data(instance)
    values = {k: safe_ceil(run_highs(closure_model(data, k), gap_abs=INTEGER_GAP).bound)
              for k in cut_bound(data).cuts}
    start = max(values, key=values.__getitem__)
    monkeypatch.setattr(relax, "CHAIN_S", 1e-3)
    statuses: list[str] = []

    def recorded(*args, **kwargs):
        run = run_highs(*args, **kwargs)
        statuses.append(run.status)
        return run

    monkeypatch.setattr(relax, "run_highs", recorded)
    deadline = Deadline(120)
    chain, value = chain_bound(data, values, start, deadline)
    assert not deadline.passed() and len(chain) >= 2
    assert statuses[0] != "optimal" and statuses[-1] == "optimal"  # cut short, then proven
    linked = run_highs(chain_model(data, chain), gap_abs=INTEGER_GAP)
    assert linked.status == "optimal" and value == safe_ceil(linked.bound) > values[start]


def test_a_step_that_cannot_fit_is_infeasible_for_every_schedule():
    """BD.B8: at 3 bytes ``d`` reads ``a`` and ``c`` (1 + 2 bytes) and writes 1 byte."""
    instance = p1_instance(hand_chain(), budget=3)
    bound = all_schedules_bound(instance)
    assert bound.infeasible and "BD.B8" in bound.stats["infeasible"]
    assert brute_force(instance, order="any")[0] == math.inf
    assert solve(instance, "milp").status is Status.INFEASIBLE


# ====================================================================== the exact backends
def test_p1_small_against_the_milp_backend(p1_small):
    result = solve(p1_small, "milp")
    verified(p1_small, result)
    assert result.status is Status.OPTIMAL
    bound = all_schedules_bound(p1_small, time_limit=20)
    assert bound.value <= result.objective
    assert bound.method == "milp" and bound.stats["milp_status"] == "optimal"
    assert bound.value > bound.stats["every_op_once"]  # the budget forces a recomputation


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(3, 12), seed=st.integers(0, 10**6), fraction=st.floats(0.0, 1.0))
def test_random_dags_against_the_literal_optimum_and_the_milp(n, seed, fraction):
    graph = random_layered(n, seed=seed)
    instance = between(graph, fraction)
    optimum, _ = brute_force(instance, order="any")
    full, direct = bounds(instance, "full"), bounds(instance, "direct")
    check_against(instance, optimum, full)
    check_against(instance, optimum, direct)
    if optimum < math.inf:
        assert direct["milp"].value <= full["milp"].value  # BD.R0: the direct ranges relax more
    result = solve(instance, "milp", time_limit=20)
    verified(instance, result)
    if result.objective is not None:
        assert full["milp"].value <= result.objective
    if full["cut"].infeasible:
        assert result.status is Status.INFEASIBLE


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(length=st.integers(1, 4), reads=st.sampled_from(["output", "input", "both"]),
       loss=st.booleans(), input_bytes=st.integers(0, 2), seed=st.integers(0, 10**6),
       data=st.data())
def test_chains_against_the_dp_and_the_literal_optimum(length, reads, loss, input_bytes, seed,
                                                         data):
    graph = chain_graph(length, reads=reads, loss=loss, input_bytes=input_bytes, costs=(0, 6),
                        sizes=(1, 4), seed=seed)
    budget = data.draw(st.integers(1, store_all_peak(graph).activation_bytes))
    instance = p1_instance(graph, budget)
    optimum, _ = brute_force(instance, order="any")
    check_against(instance, optimum, bounds(instance))
    result = solve(instance, "dp")
    verified(instance, result)
    if result.objective is not None:
        assert all_schedules_bound(instance).value <= result.objective


def test_a_non_persistent_chain_optimum():
    """dp.md §4's chain: P1 costs 29, the dp's class 32; the bound stays at or below 29."""
    instance = p1_instance(chain_graph(4, reads="both", costs=(0, 6), sizes=(1, 5), seed=244873), 11)
    bound = all_schedules_bound(instance)
    assert bound.value <= 29 < solve(instance, "dp").objective


# ====================================================================== sizes and limits
def test_reaches_and_model_sizes():
    data = p1_data(p1_instance(random_layered(60, seed=3), 0.8))
    full, direct = model_columns(data, "full"), model_columns(data, "direct")
    assert direct <= model_columns(data, 2) <= full
    for reach in ("full", "direct", 2):
        built = boundary_relaxation(data, reach=reach)
        assert built.milp.num_cols <= model_columns(data, reach)
    assert auto_reach(data, None) == "full"
    assert auto_reach(data, 0.0) in ("full", "direct") or isinstance(auto_reach(data, 0.0), int)


def test_the_deadline_stops_the_build_cleanly():
    instance = p1_instance(random_layered(400, seed=0), 0.9)
    bound = all_schedules_bound(instance, time_limit=0.2, reach="full")
    assert bound.method in ("cut", "closure", "every-op-once")
    assert "relaxation_skipped" in bound.stats or "cut_skipped" in bound.stats
    assert bound.value >= bound.stats["every_op_once"]
    assert bound.value >= cut_bound(p1_data(instance)).value or "cut_skipped" in bound.stats


def test_every_op_once_and_refusals(p1_small, p2_small):
    once = all_schedules_bound(p1_small, method="every-op-once")
    assert once.method == "every-op-once" and once.value == sum(p1_data(p1_small).cost)
    with pytest.raises(MonetError):
        all_schedules_bound(p1_small, method="simplex")
    with pytest.raises(MonetError):
        all_schedules_bound(p1_small, reach=-1)
    with pytest.raises(MonetError):
        all_schedules_bound(p2_small)


def test_safe_ceil_keeps_integer_optima():
    assert safe_ceil(5039.0000001) == 5039
    assert safe_ceil(5038.4) == 5039
    assert safe_ceil(0.0) == 0
