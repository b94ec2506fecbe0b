"""The CP-SAT backend of P1: optimality against brute force, both encodings, options, statuses.

Every schedule goes through the evaluator, and its compute cycles must be the
backend's objective.  The brute-force oracles below are Dijkstra searches over
resident sets: one over the staged schedules the model covers (``passes`` sweeps
per stage, each node at most once per stage), one over all sequences.
"""

from __future__ import annotations

import heapq

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, zoo
from monet_ilp.graph.ir import TrainingGraph
from monet_ilp.graph.node_link import node_op
from monet_ilp.heuristics import chen_sqrt_sequence, store_all_sequence
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1.cpsat import (
    ENCODINGS,
    min_budget,
    min_budget_cpsat,
    solve_cpsat,
)
from monet_ilp.problems.p1.cpsat.hints import complete, hint_from
from monet_ilp.problems.p1.data import p1_data
from monet_ilp.solve import Status, solve
from tests.clock import ticking
from tests.conftest import verified

W = 2  # CP-SAT workers


# ------------------------------------------------------------------ helpers
def dag(name: str, nodes: list[tuple[str, int, int, list[str]]]) -> TrainingGraph:
    """A node-link style DAG from (id, cost, size, predecessors), in topological order."""
    ops, tensors = [], []
    for node_id, cost, size, preds in nodes:
        op, tensor = node_op(node_id, cost=cost, size=size, inputs=preds)
        ops.append(op)
        tensors.append(tensor)
    return TrainingGraph.build(name, ops, tensors)


def fb_chain(m: int, size: int = 1) -> TrainingGraph:
    """Forward chain f1..fm, then backward bm..b1; b_k reads f_k and b_{k+1}."""
    nodes = [(f"f{k}", 1, size, [f"f{k - 1}"] if k > 1 else []) for k in range(1, m + 1)]
    for k in range(m, 0, -1):
        nodes.append((f"b{k}", 1, size, [f"f{k}"] + ([f"b{k + 1}"] if k < m else [])))
    return dag(f"fb_chain{m}", nodes)


def small_dag(n: int, seed: int) -> TrainingGraph:
    return random_layered(n, seed=seed, width=(1, 3), size=(1, 20), duration=(0, 10))


def scheduled(instance, result):
    """:func:`verified`, with a schedule required whose compute cycles are the objective."""
    metrics = verified(instance, result)
    assert metrics is not None, result.message
    assert metrics.compute_cycles == result.objective
    return metrics


def _data(instance):
    graph = instance.graph
    ops = [op.id for op in graph.ops]
    index = {op: i for i, op in enumerate(ops)}
    cost = [instance.cost(op, "core0").cycles for op in ops]
    size = [sum(graph.tensor(t).bytes for t in graph.op(op).outputs) for op in ops]
    preds = [
        [index[graph.tensor(t).producer] for t in graph.op(op).inputs if graph.tensor(t).producer]
        for op in ops
    ]
    return len(ops), cost, size, preds, instance.budget_bytes


def _dijkstra(start, moves, done):
    dist = {start: 0}
    heap = [(0, start)]
    while heap:
        d, state = heapq.heappop(heap)
        if dist[state] != d:
            continue
        if done(state):
            return d
        for nxt, cost in moves(state):
            if d + cost < dist.get(nxt, float("inf")):
                dist[nxt] = d + cost
                heapq.heappush(heap, (d + cost, nxt))
    return None


def sequence_optimum(instance):
    """Cheapest sequence of all (state: first computations done, resident set), or None."""
    n, cost, size, preds, budget = _data(instance)

    def moves(state):
        k, res = state
        held = sum(size[i] for i in range(n) if res >> i & 1)
        for i in range(min(k + 1, n)):
            if not res >> i & 1 and all(res >> p & 1 for p in preds[i]) and held + size[i] <= budget:
                yield (k + (i == k), res | 1 << i), cost[i]
        for i in range(n):
            if res >> i & 1:
                yield (k, res & ~(1 << i)), 0

    return _dijkstra((0, 0), moves, lambda s: s[0] == n)


def staged_optimum(instance, passes: int = 1):
    """Cheapest staged schedule: stage t sweeps nodes < t ``passes`` times, then computes t.

    State: (stage, position in the sweeps, resident set, nodes computed in this stage).
    """
    n, cost, size, preds, budget = _data(instance)

    def moves(state):
        t, q, res, ran = state
        held = sum(size[i] for i in range(n) if res >> i & 1)
        for i in range(n):
            if res >> i & 1:
                yield (t, q, res & ~(1 << i), ran), 0
        last = q == passes * t
        p = t if last else q % t
        ok = (not res >> p & 1 and not ran >> p & 1 and held + size[p] <= budget
              and all(res >> x & 1 for x in preds[p]))
        if last:
            if ok:
                yield (t + 1, 0, res | 1 << p, 0), cost[p]
        else:
            yield (t, q + 1, res, ran), 0
            if ok:
                yield (t, q + 1, res | 1 << p, ran | 1 << p), cost[p]

    return _dijkstra((0, 0, 0, 0), moves, lambda s: s[0] == n)


# ------------------------------------------------------------ worked examples
def test_hand_worked_chain_needs_exactly_one_recompute():
    """f1 -> f2 -> f3, b3(f3), b2(f2, b3), b1(f1, b2); unit sizes and costs.

    Store-all peaks at 4 (f1, f2, f3, b3 while b3 runs).  With 3 bytes, dropping f1
    after f2 and recomputing it before b1 is the only way: cost 6 + 1 = 7.  Dropping
    f2 instead fails: recomputing it needs f1, and then b2 holds f1, f2, b3, b2.
    """
    graph = fb_chain(3)
    inst = p1_instance(graph, 3)
    result = solve_cpsat(inst, workers=W)
    assert result.status is Status.OPTIMAL
    assert result.objective == result.bound == 7
    scheduled(inst, result)
    assert result.schedule.computations == ("f1", "f2", "f3", "b3", "b2", "f1", "b1")
    assert sequence_optimum(inst) == 7  # no sequence at all does better

    store_all = solve_cpsat(p1_instance(graph, 4), workers=W)
    assert (store_all.status, store_all.objective) == (Status.OPTIMAL, 6)

    too_small = solve_cpsat(p1_instance(graph, 2), workers=W)
    assert too_small.status is Status.INFEASIBLE and too_small.schedule is None
    assert "minimum feasible budget is 3 bytes (proven" in too_small.message


def test_solve_entry_point_verifies_the_schedule():
    inst = p1_instance(fb_chain(4), 4)
    result = solve(inst, "cpsat", workers=W)
    assert result.status is Status.OPTIMAL and result.gap == 0
    assert result.metrics.feasible and result.objective == 9
    assert result.stats["encoding"] in ENCODINGS


# ------------------------------------------------------------ brute force
@pytest.mark.parametrize("n,seed", [(6, 0), (7, 1), (8, 2), (8, 5), (9, 3), (10, 0), (10, 4), (12, 1)])
def test_random_dags_match_the_staged_oracle(n, seed):
    graph = small_dag(n, seed)
    full = p1_instance(graph, 1.0)
    store_all_cost = sum(full.cost(op.id, "core0").cycles for op in graph.ops)
    result = solve_cpsat(full, workers=W)
    assert result.status is Status.OPTIMAL and result.objective == store_all_cost
    scheduled(full, result)

    low, proven = min_budget(full, workers=W)
    assert proven
    for budget in sorted({low, low + 1, (low + full.budget_bytes) // 2}):
        inst = p1_instance(graph, budget)
        result = solve_cpsat(inst, workers=W)
        assert result.status is Status.OPTIMAL
        assert result.objective >= store_all_cost
        assert result.objective == staged_optimum(inst)
        scheduled(inst, result)


def test_sequences_outside_the_grid_can_be_cheaper_and_passes_recover_them():
    """The documented gap (p1_cpsat.md): node 7's stage must recompute 4 before 2."""
    inst = p1_instance(small_dag(8, 0), 57)
    one_pass = solve_cpsat(inst, workers=W)
    two_passes = solve_cpsat(inst, workers=W, passes=2)
    assert one_pass.objective == staged_optimum(inst) == 59
    assert two_passes.objective == staged_optimum(inst, passes=2) == sequence_optimum(inst) == 57
    scheduled(inst, one_pass)
    scheduled(inst, two_passes)


def test_passes_can_lower_the_minimum_budget():
    """One pass needs 64 bytes here; two passes reach the true minimum, 56."""
    graph = small_dag(10, 8)
    one, proven_one = min_budget(p1_instance(graph, 1.0), workers=W)
    two, proven_two = min_budget(p1_instance(graph, 1.0), workers=W, passes=2)
    assert proven_one and proven_two and (one, two) == (64, 56)
    assert sequence_optimum(p1_instance(graph, 56)) == 72
    assert sequence_optimum(p1_instance(graph, 55)) is None


# ------------------------------------------------------------ encodings
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(5, 9), seed=st.integers(0, 10_000), fraction=st.floats(0.0, 1.0))
def test_both_encodings_agree(n, seed, fraction):
    graph = small_dag(n, seed)
    low, _ = min_budget(p1_instance(graph, 1.0), workers=W)
    top = p1_instance(graph, 1.0).budget_bytes
    inst = p1_instance(graph, int(low + fraction * (top - low)))
    results = {enc: solve_cpsat(inst, workers=W, encoding=enc) for enc in ENCODINGS}
    assert {r.status for r in results.values()} == {Status.OPTIMAL}
    assert len({r.objective for r in results.values()}) == 1
    for result in results.values():
        scheduled(inst, result)


# ------------------------------------------------------------ statuses
def test_infeasible_budget_names_the_minimum_and_it_is_tight():
    graph = random_layered(14, seed=3)
    low, proven = min_budget_cpsat(p1_instance(graph, 1.0), workers=W)
    assert proven
    at = solve_cpsat(p1_instance(graph, low), workers=W)
    assert at.status is Status.OPTIMAL
    scheduled(p1_instance(graph, low), at)
    below = solve_cpsat(p1_instance(graph, low - 1), workers=W)
    assert below.status is Status.INFEASIBLE
    assert f"the minimum feasible budget is {low} bytes (proven" in below.message
    assert below.stats["min_budget_bytes"] == low


def test_max_computes_two_is_infeasible_where_unlimited_is_not():
    """Backward over a 4-chain with 3 bytes recomputes f1 three times (Moccasin's C=2 fails)."""
    inst = p1_instance(fb_chain(4), 3)
    unlimited = solve_cpsat(inst, workers=W)
    assert (unlimited.status, unlimited.objective) == (Status.OPTIMAL, 11)
    scheduled(inst, unlimited)
    assert unlimited.schedule.computations.count("f1") == 3
    capped = solve_cpsat(inst, workers=W, max_computes=2)
    assert capped.status is Status.INFEASIBLE
    assert "at most 2 computations" in capped.message
    assert solve_cpsat(p1_instance(fb_chain(4), 4), workers=W, max_computes=2).objective == 9


def test_time_limit_returns_the_best_schedule_and_a_bound(monkeypatch):
    """n = 100 at this budget takes CP-SAT about 45 s to prove; 2 s gives a schedule and a
    bound.  The deadline's clock moves 10 us per look while the model is built (tests/clock.py:
    the build, 17,000 looks, ends in time on any machine); CP-SAT then gets what is left."""
    graph = random_layered(100, seed=0)
    inst = p1_instance(graph, 1122)
    ticking(monkeypatch, "monet_ilp.engines.deadline", step=1e-5)
    result = solve_cpsat(inst, workers=W, time_limit=2.0)
    assert result.status is Status.FEASIBLE
    assert result.bound is not None and result.bound <= result.objective
    assert result.bound >= sum(inst.cost(op.id, "core0").cycles for op in graph.ops)
    # How close to its limit a solve returns is scripts/bench_time_limits.py's table.
    scheduled(inst, result)


def test_fixed_order_false_is_never_worse():
    for n, seed in [(7, 2), (8, 11), (9, 6)]:
        graph = small_dag(n, seed)
        low, _ = min_budget(p1_instance(graph, 1.0), workers=W)
        free_low, _ = min_budget(p1_instance(graph, 1.0), workers=W, fixed_order=False)
        assert free_low <= low
        for budget in (low, low + 2):
            inst = p1_instance(graph, budget)
            fixed = solve_cpsat(inst, workers=W)
            free = solve_cpsat(inst, workers=W, fixed_order=False)
            assert free.status is Status.OPTIMAL
            assert free.objective <= fixed.objective
            scheduled(inst, free)


# ------------------------------------------------------------ hints
def test_hints_from_baselines_complete_to_their_own_cost():
    graph = zoo.mlp()
    inst = p1_instance(graph, 1.0)
    grid = p1_data(inst)
    for make in (store_all_sequence, chen_sqrt_sequence):
        sequence = make(inst)
        completion = hint_from(grid, sequence)
        assert completion is not None
        assert completion.cost == evaluate(inst, sequence).compute_cycles
    result = solve_cpsat(inst, workers=W, hint=store_all_sequence(inst))
    assert result.stats["hint"] == "given" and result.status is Status.OPTIMAL


def test_training_graph_with_size_zero_nodes_at_its_minimum_budget():
    """mlp: dW and optimizer ops have no non-persistent outputs; inputs live until dW:fc1."""
    graph = zoo.mlp()
    low, proven = min_budget(p1_instance(graph, 1.0), workers=W)
    assert proven
    inst = p1_instance(graph, low)
    result = solve_cpsat(inst, workers=W)
    assert result.status is Status.OPTIMAL
    metrics = scheduled(inst, result)
    assert metrics.peak_bytes["core0.sram"] <= low
    assert solve_cpsat(p1_instance(graph, low - 1), workers=W).status is Status.INFEASIBLE


def test_large_byte_sizes_and_zero_costs():
    """Sizes around 10^9-10^11 bytes (gcd 1 and not), zero-cost ops: exact and no overflow."""
    big = 10**9
    nodes = [("a", 0, 3 * big + 7, []), ("b", 5, 2 * big + 3, ["a"]), ("c", 0, 5 * big + 1, ["b"]),
             ("d", 4, big + 9, ["c", "a"]), ("e", 2, 7 * big, ["d", "b"])]
    graph = dag("big", nodes)
    full = p1_instance(graph, 1.0)
    for budget in (full.budget_bytes, full.budget_bytes - big):
        inst = p1_instance(graph, budget)
        result = solve_cpsat(inst, workers=W)
        if result.status is Status.OPTIMAL:
            scheduled(inst, result)
            assert result.objective == staged_optimum(inst)
        else:
            assert result.status is Status.INFEASIBLE and staged_optimum(inst) is None
    scaled = dag("scaled", [(i, c, s * 4096 * big, p) for i, c, s, p in [
        ("a", 1, 2, []), ("b", 1, 3, ["a"]), ("c", 1, 1, ["b", "a"])]])
    grid = p1_data(p1_instance(scaled, 1.0))
    assert grid.scale == 4096 * big and grid.size == (2, 3, 1)


def test_unknown_option_and_encoding_are_errors():
    inst = p1_instance(fb_chain(2), 1.0)
    with pytest.raises(MonetError, match="unknown cpsat option"):
        solve_cpsat(inst, colour="blue")
    with pytest.raises(MonetError, match="unknown encoding"):
        solve_cpsat(inst, encoding="pebbles")
    with pytest.raises(MonetError, match="max_computes"):
        solve_cpsat(inst, max_computes=0)


def test_completion_of_solver_cells_replays_the_model_memory():
    inst = p1_instance(fb_chain(5), 4)
    result = solve_cpsat(inst, workers=W)
    grid = p1_data(inst)
    completion = hint_from(grid, result.schedule)
    assert completion is not None and completion.cost == result.objective
    assert completion.peak <= grid.budget
    assert evaluate(inst, result.schedule).peak_bytes["core0.sram"] <= completion.peak * grid.scale
    assert complete(grid, completion.cells).cells == completion.cells


@pytest.mark.parametrize("passes,fixed_order", [(1, True), (2, True), (1, False), (2, False)])
def test_completed_hints_satisfy_every_constraint(passes, fixed_order):
    """Fixing every variable to its hint leaves a feasible model, with the hint's cost."""
    from ortools.sat.python import cp_model

    from monet_ilp.problems.p1.cpsat import build_model
    from monet_ilp.problems.p1.cpsat.hints import baseline_completions
    from monet_ilp.problems.p1.cpsat.repair import best_repair
    from monet_ilp.problems.p1.cpsat.solve import add_hint

    for graph, budget in ((zoo.mlp(), 1.0), (random_layered(30, seed=2), 820)):
        grid = p1_data(p1_instance(graph, budget), passes=passes, fixed_order=fixed_order)
        completions = baseline_completions(p1_instance(graph, budget), grid)
        completions.append(complete(grid, best_repair(grid), source="repair"))
        for completion in completions:
            if not completion.fits(grid):
                continue
            for encoding in ENCODINGS:
                v = build_model(grid, encoding=encoding)
                add_hint(v, completion)
                solver = cp_model.CpSolver()
                solver.parameters.fix_variables_to_their_hinted_value = True
                solver.parameters.num_workers = 1
                assert solver.solve(v.model) == cp_model.OPTIMAL, (completion.source, encoding)
                assert round(solver.objective_value) == completion.cost


def test_an_objective_the_p1_model_does_not_minimise_is_refused():
    """Energy on one core is P2's question: the P1 model would claim its compute cost."""
    from monet_ilp.errors import MonetError
    from monet_ilp.graph import zoo
    from monet_ilp.hardware.presets import preset
    from monet_ilp.make import make_instance

    inst = make_instance(zoo.mlp(depth=2, batch=4), preset("edge_tpu"), budget=0.95, objective="energy")
    for backend in ("cpsat", "milp"):
        with pytest.raises(MonetError, match="does not minimise the energy objective"):
            solve(inst, backend, time_limit=5)
