"""The retention-interval model of P1 (monet_ilp.problems.p1.interval): exact over its class.

The class (``class_text``): sequences with at most ``C`` computations per op, first
computations in the graph order (or any topological order with optimizer ops last),
no recomputation once an optimizer op has run.  The oracle (:func:`class_optimum`)
searches exactly that class by Dijkstra over (first computations done, resident set,
computations per op), sharing no code with the model.

Relations with the other backends that are theorems, and tested as such:

* every optimum is at least ``sum c_v`` (every op runs once);
* a stage-form schedule (``milp``, ``cpsat`` with one pass) with at most ``C``
  computations per op is in the class once its useless recomputations are dropped,
  so ``interval(C) <= milp(max_computes=C)``, and an interval-infeasible budget is
  milp-infeasible at that ``C``; the milp's schedule is accepted as a hint;
* ``C = 1`` is store-all with the earliest frees: optimal at ``sum c_v`` exactly when
  the store-all peak fits, infeasible otherwise;
* the class grows with ``C`` and (without optimizer ops) with the free order;
* on chains, a dp schedule with at most ``C`` computations per op is in the class, so
  ``interval(C) <= dp``; the class lies within P1's fixed-order schedules, so
  ``interval(C) >= `` the P1 optimum, which on homogeneous chains is the dp's
  (``dp.md`` §4): there ``interval(C) == dp``.  On heterogeneous chains the interval
  model may beat the dp (a checkpoint dropped and recomputed from below).

Every schedule goes through the evaluator (:func:`tests.conftest.verified`), and its
compute cycles must be the objective.
"""

from __future__ import annotations

import heapq
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, zoo
from monet_ilp.graph.analysis import store_all_peak
from monet_ilp.graph.chain import chain_graph
from monet_ilp.graph.ir import OpKind
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics import chen_greedy_sequence, place_releases, store_all_sequence
from monet_ilp.heuristics.liveness import replay
from monet_ilp.make import make_instance, p1_instance
from monet_ilp.problems.p1.data import p1_data
from monet_ilp.problems.p1.interval import (
    OutsideClass,
    assignment,
    build_interval_model,
    canonical_plan,
    copies_per_node,
    plan_of_sequence,
    plan_of_solution,
    sequence_of_plan,
    solve_interval,
)
from monet_ilp.schedule import Compute, Release, Sequence
from monet_ilp.solve import Status, solve
from tests.conftest import freed_tensor_by_tensor, verified
from tests.problems.p1.test_dp import p1_optimum
from tests.problems.p1.test_milp import between, brute_force, tiny_instance

W = 2  # CP-SAT workers


# ====================================================================== helpers
def class_optimum(instance, *, max_computes: int, fixed_order: bool = True) -> float:
    """The least compute cost over the interval class (``math.inf``: nothing fits).

    States are (first computations done, resident values, computations per op); a
    value is a node's non-persistent outputs or a graph input (resident at the start,
    never recomputed).  A move frees a resident value, or computes an op whose reads
    are resident and whose outputs fit (EV.E3): its first computation when its
    producers have run and the order allows it (fixed: the next op of the graph; free:
    optimizer ops last and in order), a recomputation while no optimizer op has run.
    """
    graph = instance.graph
    ops = list(graph.ops)
    if not fixed_order:
        ops = ([op for op in ops if op.kind is not OpKind.OPTIMIZER]
               + [op for op in ops if op.kind is OpKind.OPTIMIZER])
    n = len(ops)
    index = {op.id: i for i, op in enumerate(ops)}
    inputs = [t.id for t in graph.tensors if t.producer is None and not t.persistent]
    bit = {t: 1 << (n + k) for k, t in enumerate(inputs)}
    size = [sum(graph.tensor(t).bytes for t in set(op.outputs) if not graph.tensor(t).persistent)
            for op in ops] + [graph.tensor(t).bytes for t in inputs]
    reads, producers = [], []
    for op in ops:
        mask = before = 0
        for t in set(op.inputs):
            tensor = graph.tensor(t)
            if tensor.producer is not None:
                before |= 1 << index[tensor.producer]
            if not tensor.persistent:
                mask |= 1 << index[tensor.producer] if tensor.producer else bit[t]
        reads.append(mask)
        producers.append(before)
    optimizer = [i for i, op in enumerate(ops) if op.kind is OpKind.OPTIMIZER]
    updates = sum(1 << i for i in optimizer)
    cost = [instance.cost(op.id, instance.cores[0].id).cycles for op in ops]
    full = (1 << n) - 1

    def held(mask: int) -> int:
        return sum(size[v] for v in range(len(size)) if mask >> v & 1)

    start = (0, sum(bit.values()), (0,) * n)
    dist = {start: 0}
    heap = [(0, 0, start)]
    tie = 1
    while heap:
        d, _, state = heapq.heappop(heap)
        if d > dist[state]:
            continue
        done, resident, counts = state
        if done == full:
            return d
        moves = [((done, resident & ~(1 << v), counts), 0) for v in range(len(size)) if resident >> v & 1]
        updated = bool(done & updates)
        for i in range(n):
            if counts[i] >= max_computes or reads[i] & ~resident or held(resident | 1 << i) > instance.budget_bytes:
                continue
            if done >> i & 1:
                if updated:
                    continue
            elif producers[i] & ~done:
                continue
            elif fixed_order:
                if i != done.bit_count():
                    continue
            elif i in optimizer:
                if done | updates != full or any(not done >> j & 1 for j in optimizer if j < i):
                    continue
            elif updated:
                continue
            after = (done | 1 << i, resident | 1 << i, counts[:i] + (counts[i] + 1,) + counts[i + 1:])
            moves.append((after, cost[i]))
        for nxt, c in moves:
            if d + c < dist.get(nxt, math.inf):
                dist[nxt] = d + c
                heapq.heappush(heap, (d + c, tie, nxt))
                tie += 1
    return math.inf


def interval(instance, **options):
    """:func:`solve_interval`, then :func:`verified`: a schedule's compute cycles are the
    objective and no op runs more than ``max_computes`` times."""
    options.setdefault("workers", W)
    options.setdefault("time_limit", 60)
    result = solve_interval(instance, **options)
    metrics = verified(instance, result)
    if metrics is not None:
        assert metrics.compute_cycles == result.objective
        runs = result.schedule.computations
        assert max(runs.count(op) for op in runs) <= options.get("max_computes", 2)
        assert result.objective >= every_op_once(instance)
    else:
        assert result.objective is None
    return result


def every_op_once(instance) -> int:
    core = instance.cores[0].id
    return sum(instance.cost(op.id, core).cycles for op in instance.graph.ops)


def most_runs(schedule) -> int:
    runs = schedule.computations
    return max(runs.count(op) for op in runs)


def small_dag(n: int, seed: int):
    return random_layered(n, seed=seed, width=(1, 3), size=(1, 20), duration=(0, 10))


# ====================================================================== the oracle
def test_oracle_agrees_with_the_milp_tests_any_order_search():
    """The oracle in fixed order is the any-order search of test_milp (independent code)."""
    for seed in range(16):
        instance = tiny_instance(seed, optimizer=seed % 4 == 3)
        for limit in (1, 2):
            assert class_optimum(instance, max_computes=limit) == brute_force(
                instance, order="any", max_computes=limit)[0], (seed, limit)


# ====================================================================== exactness
@pytest.mark.parametrize("seed", range(24))
def test_the_optimum_of_the_class(seed):
    """Optimal (or infeasible) exactly as the class oracle says, for C = 1, 2, 3, both orders."""
    instance = tiny_instance(seed, optimizer=seed % 4 == 3)
    for limit in (1, 2, 3):
        for fixed in (True, False):
            best = class_optimum(instance, max_computes=limit, fixed_order=fixed)
            result = interval(instance, max_computes=limit, fixed_order=fixed)
            if best == math.inf:
                assert result.status is Status.INFEASIBLE, (limit, fixed, result.message)
                assert "budget" in result.message and result.schedule is None
            else:
                assert result.status is Status.OPTIMAL, (limit, fixed, result.message)
                assert result.objective == best and result.bound == best, (limit, fixed)
                assert "optimal within the class" in result.message
                assert result.stats["bound_class"] in result.message


def test_more_computations_can_pay():
    """test_milp's two chains at 21 bytes: infeasible in the stage form (recomputations of a
    stage in index order) and in the class up to C = 2; with C = 3 (y1 computed three
    times: x1 y1 x2 y1 y2 w x1 x2 y1 y2 v) the any-order optimum, 11."""
    from tests.problems.p1.test_milp import two_chains

    instance = p1_instance(two_chains(), budget=21)
    assert solve(instance, "milp").status is Status.INFEASIBLE
    for limit in (1, 2):
        assert interval(instance, max_computes=limit).status is Status.INFEASIBLE
    result = interval(instance, max_computes=3)
    assert result.status is Status.OPTIMAL and result.objective == 11 == brute_force(instance, order="any")[0]


def test_the_backend_through_solve_and_more_computations_than_the_limit():
    """p1_interval.md §1: fb_chain(4) at 3 bytes needs f1 three times: infeasible with
    C = 2, 11 with C = 3 (the P1 optimum).  Reached through ``solve``'s registry."""
    from tests.problems.p1.test_cpsat import fb_chain

    instance = p1_instance(fb_chain(4), budget=3)
    two = solve(instance, "interval", max_computes=2, workers=W, time_limit=60)
    assert two.status is Status.INFEASIBLE and "proven for the class only" in two.message
    three = solve(instance, "interval", max_computes=3, workers=W, time_limit=60)
    verified(instance, three)
    assert three.status is Status.OPTIMAL and three.objective == 11 == p1_optimum(instance)
    assert three.schedule.computations.count("f1") == 3


# ====================================================================== other backends
#: CP-SAT's deterministic seconds for the interval model at ``C + 1`` in
#: :func:`check_relations`: a tight budget may take long to prove infeasible there, and a
#: deterministic limit (one worker) makes whether it is proven the same on every machine.
LARGER_DETERMINISTIC_TIME = 20.0


def check_relations(instance, *, limit: int = 2, more: bool = True) -> None:
    """The relations of the module docstring on one instance (those that are theorems).

    At ``C = 1`` and ``C = limit`` both models run to their proof (no time limit: the
    instances here are proven in seconds); at ``limit + 1`` CP-SAT may need long to prove
    a tight budget infeasible, even on 8 nodes, so it runs on one worker for
    :data:`LARGER_DETERMINISTIC_TIME` deterministic seconds, and the relations with it
    are asserted when it is proven, which is the same on every machine.
    """
    once = every_op_once(instance)
    data = p1_data(instance)
    store_all_fits = plan_of_sequence(data, store_all_sequence(instance)).fits(data)  # node-level values
    one = interval(instance, max_computes=1, time_limit=None)
    if store_all_fits:
        assert one.status is Status.OPTIMAL and one.objective == once
    else:
        assert one.status is Status.INFEASIBLE
    ours = interval(instance, max_computes=limit, time_limit=None)
    staged = solve(instance, "milp", max_computes=limit, time_limit=None)
    verified(instance, staged)
    assert ours.status in (Status.OPTIMAL, Status.INFEASIBLE) and staged.status in (Status.OPTIMAL, Status.INFEASIBLE)
    if staged.status is Status.OPTIMAL:  # the milp's schedule is in the class
        assert ours.status is Status.OPTIMAL and once <= ours.objective <= staged.objective
        if store_all_fits:
            assert ours.objective == staged.objective == once
    if not more:
        return
    larger = interval(instance, max_computes=limit + 1, time_limit=None, workers=1,
                      params={"max_deterministic_time": LARGER_DETERMINISTIC_TIME})
    if ours.status is Status.OPTIMAL:
        assert larger.status is not Status.INFEASIBLE
        if larger.status is Status.OPTIMAL:
            assert larger.objective <= ours.objective


@pytest.mark.parametrize("n,seed,fraction", [(10, 0, 0.3), (12, 1, 0.5), (14, 2, 0.6), (12, 4, 0.3), (16, 5, 0.6)])
def test_random_dags_against_the_stage_form(n, seed, fraction):
    check_relations(between(small_dag(n, seed), fraction))


def test_the_milp_optimum_is_a_hint_in_the_class_and_a_bound_on_it():
    """milp and cpsat (one pass) agree; with C at least the milp schedule's most
    computations per op, the milp schedule is accepted as a hint and the interval
    optimum is at most the milp's (here strictly less: recomputations of one stage
    out of index order)."""
    instance = between(random_layered(15, seed=4), 0.3)
    staged = solve(instance, "milp", time_limit=60)
    verified(instance, staged)
    assert staged.status is Status.OPTIMAL
    assert solve(instance, "cpsat", time_limit=60, workers=W).objective == staged.objective
    limit = most_runs(staged.schedule)
    result = interval(instance, max_computes=limit, hint=staged.schedule)
    assert result.stats["hint"] == "given" and result.stats["hint_cost"] == staged.objective
    assert "hints_rejected" not in result.stats
    assert result.status is Status.OPTIMAL
    assert every_op_once(instance) <= result.objective < staged.objective


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(4, 9), seed=st.integers(0, 10**6), fraction=st.sampled_from([0.0, 0.3, 0.6, 1.0]))
def test_property_relations_on_small_random_dags(n, seed, fraction):
    check_relations(between(small_dag(n, seed), fraction), more=False)


# ---------------------------------------------------------------------- chains and dp
@pytest.mark.parametrize("reads", ["output", "input", "both"])
@pytest.mark.parametrize("length", [2, 3, 4])
def test_homogeneous_chains_equal_the_dp(reads, length):
    """dp.md §4: the dp is the P1 optimum on homogeneous chains; the class holds the dp's
    schedule once C covers it, and lies within P1: so interval(C) == dp."""
    graph = chain_graph(length, reads=reads)
    for budget in range(1, store_all_peak(graph).activation_bytes + 1):
        instance = p1_instance(graph, budget)
        dp = solve(instance, "dp")
        if dp.status is Status.INFEASIBLE:
            assert interval(instance, max_computes=length).status is Status.INFEASIBLE
            continue
        limit = max(2, most_runs(dp.schedule))
        result = interval(instance, max_computes=limit, hint=dp.schedule)
        assert result.stats["hint"] == "given"
        assert result.status is Status.OPTIMAL and result.objective == dp.objective, budget


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(length=st.integers(1, 3), reads=st.sampled_from(["output", "input", "both"]),
       input_bytes=st.integers(0, 2), seed=st.integers(0, 10**6))
def test_heterogeneous_chains_between_p1_and_the_dp(length, reads, input_bytes, seed):
    """P1 optimum <= interval(C) <= dp when the dp's schedule has at most C computations per op."""
    graph = chain_graph(length, reads=reads, input_bytes=input_bytes, costs=(0, 6), sizes=(1, 4), seed=seed)
    for budget in range(1, store_all_peak(graph).activation_bytes + 1, 2):
        instance = p1_instance(graph, budget)
        dp = solve(instance, "dp")
        best = p1_optimum(instance)
        limit = max(2, most_runs(dp.schedule)) if dp.schedule is not None else 2
        result = interval(instance, max_computes=limit)
        if best is None:
            assert result.status is Status.INFEASIBLE
            continue
        if dp.status is Status.OPTIMAL:
            assert result.status is Status.OPTIMAL
            assert best <= result.objective <= dp.objective
        elif result.status is Status.OPTIMAL:
            assert result.objective >= best


@pytest.mark.parametrize("seed", [22, 38])
def test_node_level_values_versus_tensor_by_tensor_frees(seed):
    """P1M.A2: a node's outputs are held together in P1 and in the class.  On these
    multi-output graphs, at the peak of the store-all order freed tensor by tensor (below
    the node-level store-all peak), that sequence passes the evaluator while no node-level
    sequence fits: the class is infeasible for every C, as the oracle says, and the
    message says for what."""
    graph = tiny_instance(seed, optimizer=seed % 3 == 0).graph
    apart = freed_tensor_by_tensor(graph, [op.id for op in graph.ops])
    tensor_peak = replay(p1_instance(graph, budget=1.0), apart.steps).peak_bytes
    assert tensor_peak < store_all_peak(graph).activation_bytes
    instance = p1_instance(graph, budget=tensor_peak)
    assert evaluate(instance, apart).feasible
    assert not evaluate(instance, store_all_sequence(instance)).feasible
    for limit in (1, 3):
        assert class_optimum(instance, max_computes=limit) == math.inf
        result = interval(instance, max_computes=limit)
        assert result.status is Status.INFEASIBLE and "a node's outputs held together" in result.message


def test_the_interval_class_beats_the_dp_where_p1_does():
    """dp.md §4's chain: P1 stores a checkpoint, drops it and recomputes it from below (29);
    the dp's class costs 32.  Two computations per op suffice for the P1 optimum."""
    instance = p1_instance(chain_graph(4, reads="both", costs=(0, 6), sizes=(1, 5), seed=244873), 11)
    assert solve(instance, "dp").objective == 32
    result = interval(instance, max_computes=2)
    assert result.status is Status.OPTIMAL and result.objective == 29 == p1_optimum(instance)


@pytest.mark.parametrize("budget", [1.0, 0.9, 0.85, 0.8])
def test_the_zoo_mlp_against_the_dp_and_the_milp(budget):
    """A training chain with optimizer ops: the dp's and the milp's schedules are accepted
    as hints (so interval <= both, a theorem); here the three optima are equal, or all
    three backends find the budget infeasible (below the peak bound)."""
    instance = p1_instance(zoo.mlp(depth=2, width=16, batch=4, in_features=16), budget=budget)
    dp = solve(instance, "dp")
    milp = solve(instance, "milp", time_limit=60)
    verified(instance, milp)
    result = interval(instance, hint=dp.schedule)
    if dp.status is Status.INFEASIBLE:
        assert milp.status is Status.INFEASIBLE and result.status is Status.INFEASIBLE
        assert result.stats["infeasible_by"] == "peak_lower_bound"
        return
    assert result.stats["hint"] == "given"
    assert result.status is Status.OPTIMAL and result.objective == dp.objective == milp.objective
    assert interval(instance, hint=milp.schedule, use_baseline_hint=False).stats["hint"] == "given"
    last = result.schedule.computations.index(next(op.id for op in instance.graph.ops
                                                   if op.kind is OpKind.OPTIMIZER))
    tail = result.schedule.computations[last:]
    assert len(tail) == len(set(tail))  # nothing is recomputed from the first optimizer op on


# ====================================================================== the solver's edges
def test_hints_outside_the_class_are_refused_with_a_reason():
    instance = between(random_layered(15, seed=4), 0.3)
    staged = solve(instance, "milp", time_limit=60)
    assert most_runs(staged.schedule) > 1
    short = interval(instance, max_computes=1, hint=staged.schedule)
    assert short.stats["hint"] == "none"
    assert "computed 2 times (at most 1)" in short.stats["hints_rejected"]["given"]
    over = interval(instance, hint=store_all_sequence(instance))
    assert over.stats["hints_rejected"]["given"].startswith("over the budget: peak")
    ops = [op.id for op in instance.graph.ops]
    swapped = Sequence(tuple(Compute(op) for op in [ops[1], ops[0], *ops[2:]]))
    refused = interval(instance, hint=swapped)
    assert refused.stats["hints_rejected"]["given"].startswith("not in the class")
    assert refused.objective == over.objective


def test_baseline_hints_are_reported():
    instance = p1_instance(zoo.mlp(depth=3, width=32, batch=8, in_features=32), budget=0.9)
    result = interval(instance)
    assert result.stats["hint"] in ("greedy", "store_all", "none")
    assert set(result.stats.get("hints_rejected", {})) <= {"greedy", "store_all"}
    if result.stats["hint"] != "none":
        assert result.objective <= result.stats["hint_cost"]
    bare = interval(instance, use_baseline_hint=False)
    assert bare.stats["hint"] == "none" and bare.objective == result.objective


def test_infeasible_budgets_say_why():
    graph = small_dag(12, 3)
    peak = store_all_peak(graph).activation_bytes
    tiny = interval(p1_instance(graph, budget=1))
    assert tiny.status is Status.INFEASIBLE and tiny.stats["infeasible_by"] == "peak_lower_bound"
    assert "no schedule fits the budget of 1 bytes" in tiny.message
    at_least = p1_data(p1_instance(graph, budget=peak)).peak_lower_bound
    # between the one-op bound and store-all: C = 1 cannot fit, CP-SAT proves it
    closed = interval(p1_instance(graph, budget=peak - 1), max_computes=1)
    assert at_least <= peak - 1
    assert closed.status is Status.INFEASIBLE and closed.stats["infeasible_by"] == "cpsat"
    assert "proven for the class only" in closed.message


def test_tiny_time_limits_never_claim_too_much():
    instance = between(random_layered(40, seed=0), 0.4)
    for limit in (0.0, 0.05, 0.5):
        result = interval(instance, time_limit=limit)
        assert result.status in (Status.OPTIMAL, Status.FEASIBLE, Status.UNKNOWN), result.message
        if result.status is Status.UNKNOWN:
            assert result.schedule is None and result.objective is None
            assert result.bound is None or result.bound >= every_op_once(instance)
    start = chen_greedy_sequence(instance, instance.budget_bytes)
    if start is not None and evaluate(instance, start).feasible:
        hinted = interval(instance, time_limit=0.0, hint=start)
        assert hinted.status is Status.FEASIBLE and hinted.source == "hint:given"


def test_a_hint_is_kept_when_the_time_runs_out():
    instance = between(random_layered(20, seed=0), 0.4)
    staged = solve(instance, "milp", max_computes=2, time_limit=60)
    assert staged.schedule is not None
    result = interval(instance, time_limit=0.0, hint=staged.schedule)
    assert result.status is Status.FEASIBLE and result.source == "hint:given"
    assert result.objective <= staged.objective  # useless recomputations dropped, if any
    assert "time limit" in result.message


def test_free_order_and_tight_ends():
    instance = between(small_dag(12, 6), 0.3)
    fixed = interval(instance)
    free = interval(instance, fixed_order=False)
    tight = interval(instance, tight_ends=True)
    assert "any topological order" in free.stats["bound_class"]
    assert free.stats["fixed_order"] is False
    for result in (fixed, free, tight):
        assert result.status is Status.OPTIMAL, result.message
    assert free.objective < fixed.objective == tight.objective


def test_options_and_instances_are_checked(p1_small, p2_small):
    with pytest.raises(MonetError, match="no option 'colour'"):
        solve_interval(p1_small, colour="blue")
    with pytest.raises(MonetError, match="max_computes"):
        solve_interval(p1_small, max_computes=0)
    with pytest.raises(MonetError, match="solves P1"):
        solve_interval(p2_small)
    energy = make_instance(zoo.mlp(depth=2, batch=4), preset("edge_tpu"), budget=0.95, objective="energy")
    with pytest.raises(MonetError, match="energy"):
        solve_interval(energy)


# ====================================================================== plans
def raw_computations(data, seed: int, extra: int) -> list[int]:
    """The fixed order of first computations with ``extra`` recomputations inserted at
    random places before the first optimizer op (each after the node's first computation)."""
    import random

    rng = random.Random(seed)
    order = list(range(data.n))
    for _ in range(extra):
        v = rng.randrange(data.first_update)
        stop = order.index(data.first_update) if data.first_update < data.n else len(order)
        order.insert(rng.randint(order.index(v) + 1, stop), v)
    return order


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(3, 25), seed=st.integers(0, 10**6), extra=st.integers(0, 12))
def test_plans_round_trip_and_never_cost_more(n, seed, extra):
    """canonical_plan drops only useless recomputations: cost and peak at most those of
    the raw computations with the earliest frees; sequence_of_plan gives the evaluator's
    cost and peak; plan_of_sequence and canonical_plan give the plan back."""
    graph = small_dag(n, seed)
    instance = p1_instance(graph, budget=sum(t.bytes for t in graph.tensors))  # everything fits
    data = p1_data(instance)
    raw = raw_computations(data, seed, extra)
    plan = canonical_plan(data, raw)
    raw_metrics = evaluate(instance, Sequence(place_releases(graph, [data.ops[v] for v in raw])))
    assert plan.cost <= raw_metrics.compute_cycles
    assert plan.peak * data.scale <= raw_metrics.peak_bytes["core0.sram"]
    assert sorted(set(plan.nodes)) == list(range(data.n))
    back = sequence_of_plan(data, plan)
    metrics = evaluate(instance, back)
    assert metrics.feasible and metrics.compute_cycles == plan.cost
    assert metrics.peak_bytes["core0.sram"] == plan.peak * data.scale
    assert plan_of_sequence(data, back) == plan == canonical_plan(data, plan.nodes)
    assert list(plan.counts(data.n)) == [plan.nodes.count(v) for v in range(data.n)]
    assert all(plan.starts()[(v, j)] == k for k, (v, j) in enumerate(zip(plan.nodes, plan.copy, strict=True)))


def test_useless_recomputations_are_dropped():
    # F1 F2 loss B2 B1; B2 reads loss and F2, B1 reads B2 and F1.  The second F1 is read
    # by nobody before F1 runs again, the third serves B1, the F2 at the end nobody.
    graph = chain_graph(2)
    instance = p1_instance(graph, budget=1.0)
    data = p1_data(instance)
    f1, f2, loss, b2, b1 = range(5)
    assert data.ops == ("F1", "F2", "loss", "B2", "B1")
    plan = canonical_plan(data, [f1, f2, loss, f1, b2, f1, b1, f2])
    assert plan.nodes == (f1, f2, loss, b2, f1, b1)
    assert plan.cost == sum(data.cost) + data.cost[f1]
    assert plan.copy == (0, 0, 0, 0, 1, 0)


def test_sequences_outside_the_class_are_named():
    from tests.problems.p1.test_milp import two_chains

    chains = p1_data(p1_instance(two_chains(), budget=1.0))  # x1 and y1 read nothing
    with pytest.raises(OutsideClass, match="leave the graph order"):
        canonical_plan(chains, [1, 0, 2, 3, 4, 5])
    assert canonical_plan(p1_data(p1_instance(two_chains(), budget=1.0), fixed_order=False),
                          [1, 0, 2, 3, 4, 5]).nodes == (1, 0, 2, 3, 4, 5)
    instance = p1_instance(zoo.mlp(depth=2, width=16, batch=4, in_features=16), budget=1.0)
    data = p1_data(instance)
    ops = list(data.ops)
    fu = data.first_update
    with pytest.raises(OutsideClass, match="never computes"):
        plan_of_sequence(data, Sequence(tuple(Compute(op) for op in ops[:-1])))
    with pytest.raises(OutsideClass, match="after the first optimizer op"):
        plan_of_sequence(data, Sequence(tuple(Compute(op) for op in [*ops[:fu + 1], ops[0], *ops[fu + 1:]])))
    with pytest.raises(OutsideClass, match="not in the graph"):
        plan_of_sequence(data, Sequence((Compute("nope"),)))
    free = p1_data(instance, fixed_order=False)
    reader = next(v for v in range(free.n) if free.preds[v])
    with pytest.raises(OutsideClass, match="which it reads"):
        canonical_plan(free, [reader])
    store = store_all_sequence(instance)
    assert plan_of_sequence(data, store).cost == sum(data.cost)
    assert [s for s in sequence_of_plan(data, plan_of_sequence(data, store)).steps
            if isinstance(s, Release)]  # values are freed


# ====================================================================== the model
def fixed_to(im, values) -> tuple[str, int | None, object]:
    """Solve ``im`` with every variable fixed to ``values``: status, objective, solver."""
    for var, value in values.items():
        im.model.add_hint(var, value)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    status = solver.solve(im.model)
    cost = round(solver.objective_value) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
    return solver.status_name(status), cost, solver


@pytest.mark.parametrize("tight_ends", [False, True])
@pytest.mark.parametrize("fixed_order", [True, False])
def test_a_plan_is_a_full_assignment_of_the_model(tight_ends, fixed_order):
    """assignment() satisfies every constraint (canonical and the LNS's non-canonical form,
    with gaps and copies in other slots) and reads back as the same plan."""
    instance = between(random_layered(14, seed=1), 0.6)
    staged = solve(instance, "milp", time_limit=60)
    data = p1_data(instance, fixed_order=fixed_order)
    plan = plan_of_sequence(data, staged.schedule)
    assert plan.fits(data) and len(plan) > data.n
    copies = copies_per_node(data, 3)
    im = build_interval_model(data, copies, tight_ends=tight_ends)
    status, cost, solver = fixed_to(im, assignment(im, plan))
    assert status == "OPTIMAL" and cost == plan.cost
    assert plan_of_solution(im, solver.value) == plan
    loose = build_interval_model(data, copies, tight_ends=tight_ends, canonical=False, slack=3)
    positions = [k + (k >= 3) + 2 * (k >= len(plan) - 2) for k in range(len(plan))]
    counts = plan.counts(data.n)
    slots = [2 if j == 1 and counts[v] == 2 else j  # a single recomputation in the last slot
             for v, j in zip(plan.nodes, plan.copy, strict=True)]
    status, cost, solver = fixed_to(loose, assignment(loose, plan, positions=positions, slots=slots))
    assert status == "OPTIMAL" and cost == plan.cost
    assert plan_of_solution(loose, solver.value) == plan


def test_a_plan_over_the_budget_or_the_copies_is_refused():
    instance = between(random_layered(14, seed=1), 0.6)
    data = p1_data(instance)
    im = build_interval_model(data, copies_per_node(data, 2))
    store = plan_of_sequence(data, store_all_sequence(instance))
    assert not store.fits(data)
    assert fixed_to(im, assignment(im, store))[0] == "INFEASIBLE"
    u = next(v for v in range(data.n) if data.consumers[v])
    reader = data.consumers[u][-1]
    again = canonical_plan(data, [*range(reader), u, *range(reader, data.n)])  # u again for its last reader
    assert again.counts(data.n)[u] == 2
    with pytest.raises(ValueError, match="more often than the model has copies"):
        assignment(build_interval_model(data, [1] * data.n), again)
    mlp = p1_data(p1_instance(zoo.mlp(depth=2, width=16, batch=4, in_features=16)))
    with pytest.raises(ValueError, match="one copy"):
        build_interval_model(mlp, [2] * mlp.n)


def test_copies_and_model_size():
    """C_v is 1 for unread nodes and from the first optimizer op on; read choices exist per
    edge and copy pair where the producer has several copies (O(n C + |E| C^2))."""
    instance = p1_instance(zoo.mlp(depth=2, width=16, batch=4, in_features=16), budget=1.0)
    data = p1_data(instance)
    copies = copies_per_node(data, 3)
    for v in range(data.n):
        assert copies[v] == (1 if v >= data.first_update or not data.consumers[v] else 3)
    graph = random_layered(60, seed=2)
    data = p1_data(p1_instance(graph, budget=0.9))
    copies = copies_per_node(data, 2)
    im = build_interval_model(data, copies)
    assert len(im.reads) == sum(copies[u] * copies[v] for v in range(data.n) for u in data.preds[v]
                                if copies[u] > 1)
    assert len(im.present) == sum(copies) - data.n and im.horizon == sum(copies)
    assert len(im.model.proto.variables) <= 8 * sum(copies) + len(im.reads) + len(data.input_ids)
