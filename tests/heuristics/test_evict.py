"""The feasible-first eviction heuristic (monet_ilp.heuristics.evict).

Every sequence it returns goes through the evaluator: it must keep to the budget, and
the numbers its ``meta`` claims must be the evaluator's.  What it finds is compared
with what must hold: store-all when it fits, nothing below the proven peak bound, no
schedule cheaper than the P1 optimum (an exhaustive search on tiny graphs), and a
schedule on random layered DAGs where the stage MILP finds one (regression cases).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, store_all_peak, zoo
from monet_ilp.graph.ir import OpKind
from monet_ilp.graph.random_dag import random_layered_literature
from monet_ilp.heuristics.evict import EVICTION_RULES, evict_sequence, min_budget_estimate
from monet_ilp.make import p1_instance
from monet_ilp.results import BackendResult, Status
from monet_ilp.solve import solve
from tests.conftest import verified
from tests.problems.p1.test_milp import brute_force, tiny_instance

SRAM = "core0.sram"


def checked(instance, sequence, budget: int | None = None):
    """The evaluator's metrics of a returned sequence: it fits ``budget`` (default the
    capacity), and ``meta`` claims the evaluator's cost, peak and recomputations."""
    budget = instance.budget_bytes if budget is None else budget
    metrics = evaluate(instance, sequence)
    assert not metrics.violation_counts.keys() - {"capacity"}, metrics.violations[:3]
    assert metrics.peak_bytes[SRAM] <= budget
    if budget <= instance.budget_bytes:
        verified(instance, BackendResult(Status.FEASIBLE, sequence))
    meta = sequence.meta
    assert meta["heuristic"] == "evict" and meta["budget_bytes"] == budget
    assert meta["compute_cycles"] == metrics.compute_cycles
    assert meta["peak_bytes"] == metrics.peak_bytes[SRAM]
    assert meta["recomputations"] == metrics.recomputations
    assert metrics.compute_cycles >= every_op_once(instance)
    return metrics


def every_op_once(instance) -> int:
    return sum(instance.cost(op.id, "core0").cycles for op in instance.graph.ops)


def graph_of(kind: str, n: int, seed: int):
    return random_layered(n, seed=seed) if kind == "layered" else random_layered_literature(n, seed=seed)


# ====================================================================== store-all
@pytest.mark.parametrize("graph", [random_layered(30, seed=1), random_layered_literature(40, seed=2),
                                   zoo.mlp(depth=2, width=16, batch=4, in_features=16)],
                         ids=["layered", "literature", "mlp"])
def test_store_all_is_returned_when_it_fits(graph):
    peak = store_all_peak(graph).activation_bytes
    for budget in (peak, peak + 7):
        instance = p1_instance(graph, budget=budget)
        sequence = evict_sequence(instance)
        metrics = checked(instance, sequence)
        assert sequence.meta["rule"] == sequence.meta["mode"] == "store_all"
        assert metrics.compute_cycles == every_op_once(instance) and metrics.recomputations == 0
        assert metrics.peak_bytes[SRAM] == peak


# ====================================================================== every sequence fits
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(3, 60), seed=st.integers(0, 10**6), literature=st.booleans(),
       fraction=st.sampled_from([0.5, 0.6, 0.7, 0.8, 0.9, 0.95]),
       rules=st.sampled_from([None, *[[r] for r in EVICTION_RULES], ["belady", "dtr"]]))
def test_every_sequence_fits_and_claims_the_evaluators_numbers(n, seed, literature, fraction, rules):
    graph = random_layered_literature(n, seed=seed) if literature else random_layered(n, seed=seed)
    instance = p1_instance(graph, budget=fraction)
    sequence = evict_sequence(instance, rules=rules)
    if sequence is None:
        return
    checked(instance, sequence)
    assert sequence.meta["mode"] in ("strict", "plain", "retry", "store_all")
    if sequence.meta["mode"] != "store_all":
        assert sequence.meta["rule"] in (rules or EVICTION_RULES)
        assert f"{sequence.meta['rule']}:{sequence.meta['mode']}" in sequence.meta["candidates"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(5, 40), seed=st.integers(0, 10**6), fraction=st.floats(0.3, 1.0))
def test_an_explicit_budget_is_kept(n, seed, fraction):
    """``budget_bytes`` replaces the capacity: the sequence fits it."""
    instance = p1_instance(random_layered(n, seed=seed), budget=1.0)
    budget = int(fraction * instance.budget_bytes)
    sequence = evict_sequence(instance, budget_bytes=budget)
    if sequence is not None:
        checked(instance, sequence, budget)
        assert evaluate(p1_instance(instance.graph, budget=budget), sequence).feasible


# ====================================================================== against exact answers
@pytest.mark.parametrize("seed", range(30))
def test_never_below_the_p1_optimum_nor_where_nothing_fits(seed):
    """On tiny graphs (test_milp's): an exhaustive search over every fixed-order P1
    sequence (node-level values) gives the optimum; the heuristic's own schedules are
    such sequences, so they cost at least that, and there are none where none exists.
    Store-all frees tensor by tensor (EV.E3 allows it, P1M.A2): it may fit where no
    node-level sequence does, at the least cost of all."""
    instance = tiny_instance(seed, optimizer=seed % 3 == 0)
    best, _ = brute_force(instance, order="any")
    sequence = evict_sequence(instance)
    if sequence is None:
        return
    cost = checked(instance, sequence).compute_cycles
    if sequence.meta["mode"] == "store_all":
        assert cost == every_op_once(instance) <= best
    else:
        assert best < math.inf and cost >= best


#: Random layered DAGs where the stage MILP finds a schedule, and so does the heuristic
#: since its strict and retrying modes (the plain rules alone found none on these).
FOUND_SINCE_STRICT = [
    ("layered", 20, 5, 0.8), ("layered", 50, 0, 0.7), ("layered", 50, 2, 0.8), ("layered", 50, 3, 0.7),
    ("layered", 50, 4, 0.8), ("layered", 50, 6, 0.8), ("layered", 50, 9, 0.9), ("literature", 20, 2, 0.7),
    ("literature", 20, 3, 0.8), ("literature", 20, 6, 0.9), ("literature", 50, 0, 0.9),
    ("literature", 50, 3, 0.9), ("literature", 50, 7, 0.8), ("literature", 50, 8, 0.8),
    ("literature", 50, 9, 0.7),
]


@pytest.mark.parametrize("kind,n,seed,budget", FOUND_SINCE_STRICT)
def test_schedules_on_random_dags_where_the_milp_finds_one(kind, n, seed, budget):
    instance = p1_instance(graph_of(kind, n, seed), budget=budget)
    sequence = evict_sequence(instance)
    assert sequence is not None
    checked(instance, sequence)
    assert sequence.meta["mode"] in ("strict", "retry")
    alone = [evict_sequence(instance, rules=[rule]) for rule in EVICTION_RULES]
    # one rule at a time, each gets the whole fallback (the rules share it otherwise)
    assert min(s.meta["compute_cycles"] for s in alone if s is not None) <= sequence.meta["compute_cycles"]


@pytest.mark.slow  # 10-30 s: the slow tier (CI runs it after the default one)
def test_the_milp_agrees_the_budget_is_feasible():
    """One of the cases above: the premise, checked (the MILP's class is not the
    heuristic's, so neither cost bounds the other)."""
    instance = p1_instance(graph_of("layered", 20, 5), budget=0.8)
    result = solve(instance, "milp", time_limit=30)
    verified(instance, result)
    assert result.schedule is not None


def test_a_training_graph_keeps_the_optimizer_rule():
    """A training chain with optimizer ops: the values read after the first update are
    made resident before it and nothing is recomputed from it on (EV.E2 update_hazard,
    which the evaluator checks)."""
    graph = zoo.mlp(depth=3, width=32, batch=8, in_features=32)
    found = 0
    for fraction in (0.95, 0.9, 0.85):
        instance = p1_instance(graph, budget=fraction)
        sequence = evict_sequence(instance)
        if sequence is None:
            continue
        found += 1
        assert checked(instance, sequence).recomputations > 0
        runs = sequence.computations
        first_update = next(i for i, op in enumerate(runs) if instance.graph.op(op).kind is OpKind.OPTIMIZER)
        assert len(set(runs[first_update:])) == len(runs[first_update:])
    assert found


def test_persistent_bytes_count_against_the_budget():
    graph = zoo.mlp(depth=2, width=16, batch=4, in_features=16)
    persistent = sum(t.bytes for t in graph.tensors if t.persistent)
    assert persistent > 0
    peak = store_all_peak(graph).activation_bytes
    instance = dataclasses.replace(p1_instance(graph, budget=persistent + peak), persistent_home=SRAM)
    whole = evict_sequence(instance)
    assert whole.meta["rule"] == "store_all" and checked(instance, whole).peak_bytes[SRAM] == persistent + peak
    tighter = dataclasses.replace(p1_instance(graph, budget=persistent + int(0.9 * peak)), persistent_home=SRAM)
    sequence = evict_sequence(tighter)
    assert sequence is not None
    assert persistent < checked(tighter, sequence).peak_bytes[SRAM] <= tighter.budget_bytes
    assert evict_sequence(dataclasses.replace(p1_instance(graph, budget=peak), persistent_home=SRAM)) is None


# ====================================================================== options
def test_rules_are_checked_and_each_rule_is_deterministic():
    instance = p1_instance(random_layered_literature(40, seed=3), budget=0.85)
    with pytest.raises(MonetError, match="unknown eviction rule 'lru'"):
        evict_sequence(instance, rules=["lru"])
    for rule in EVICTION_RULES:
        once, again = evict_sequence(instance, rules=[rule]), evict_sequence(instance, rules=[rule])
        assert (once is None) == (again is None)
        if once is not None:
            assert once.steps == again.steps and dict(once.meta) == dict(again.meta)
            assert once.meta["rule"] == rule
    best = evict_sequence(instance)
    assert best is not None
    costs = [s.meta["compute_cycles"] for r in EVICTION_RULES if (s := evict_sequence(instance, rules=[r]))]
    assert best.meta["compute_cycles"] >= min(costs)


def test_the_heuristic_backend_reports_what_it_found():
    found = p1_instance(random_layered_literature(40, seed=3), budget=0.85)
    result = solve(found, "heuristic:evict")
    assert result.status is Status.FEASIBLE and verified(found, result) is not None
    hopeless = p1_instance(random_layered(30, seed=1), budget=0.3)
    result = solve(hopeless, "heuristic:evict")
    assert result.status is Status.UNKNOWN and result.schedule is None


# ====================================================================== min_budget_estimate
@pytest.mark.parametrize("kind,n,seed", [("layered", 12, 0), ("layered", 30, 4), ("literature", 25, 1),
                                         ("literature", 60, 5)])
def test_min_budget_estimate_brackets_the_budget(kind, n, seed):
    graph = graph_of(kind, n, seed)
    instance = p1_instance(graph, budget=1.0)
    estimate = min_budget_estimate(instance)
    peak = store_all_peak(graph).activation_bytes
    assert 0 < estimate.lower <= estimate.upper <= peak
    assert estimate.proven == (estimate.lower == estimate.upper)
    assert estimate.lower_reason
    at_upper = p1_instance(graph, budget=estimate.upper)
    metrics = evaluate(at_upper, estimate.sequence)
    assert metrics.feasible and metrics.peak_bytes[SRAM] <= estimate.upper
    assert evict_sequence(at_upper) is not None
    below = p1_instance(graph, budget=estimate.lower - 1)
    assert evict_sequence(below) is None  # below the floor nothing fits
    if n <= 30:
        assert solve(below, "milp", time_limit=30).status is Status.INFEASIBLE


@pytest.mark.parametrize("seed", [*range(0, 30, 2), 22, 38, 54])
def test_the_floor_is_a_bound_on_every_schedule(seed):
    """Below ``lower`` the exhaustive search of every P1 sequence finds nothing, and
    ``lower`` is at most ``upper`` even where store-all's tensor-by-tensor frees fit a
    budget that no node-level sequence fits (seeds 22, 38 and 54 here)."""
    instance = tiny_instance(seed, optimizer=seed % 3 == 0)
    estimate = min_budget_estimate(instance)
    assert estimate.lower <= estimate.upper
    assert brute_force(p1_instance(instance.graph, budget=estimate.lower - 1), order="any")[0] == math.inf
    assert evaluate(p1_instance(instance.graph, budget=estimate.upper), estimate.sequence).feasible


def test_min_budget_estimate_within_a_time_limit():
    graph = random_layered_literature(200, seed=0)
    instance = p1_instance(graph, budget=1.0)
    estimate = min_budget_estimate(instance, time_limit=0.0)
    assert estimate.lower <= estimate.upper <= store_all_peak(graph).activation_bytes
    assert evaluate(p1_instance(graph, budget=estimate.upper), estimate.sequence).feasible
