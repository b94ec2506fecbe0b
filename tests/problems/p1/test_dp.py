"""The chain DP (monet_ilp.problems.p1.dp, formulations/dp.md).

Every schedule goes through ``solve``, hence through the evaluator: it must be
feasible and its compute cycles must be the DP's objective.  The DP is compared
with hand-worked optima and with the true P1 optimum of small chains, found by a
shortest path over (resident set, first computations done).
"""

from __future__ import annotations

import heapq

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monet_ilp.errors import MonetError
from monet_ilp.graph import random_layered, zoo
from monet_ilp.graph.analysis import store_all_peak
from monet_ilp.graph.chain import chain_graph
from monet_ilp.graph.node_link import from_node_link, to_node_link
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1.dp import chain_of, is_chain, solve_dp
from monet_ilp.solve import Status, solve


def dp(graph, budget):
    """Solve with the dp backend; a schedule must pass the evaluator."""
    result = solve(p1_instance(graph, budget), "dp")
    assert result.status in (Status.OPTIMAL, Status.INFEASIBLE), result.message
    if result.status is Status.OPTIMAL:
        m = result.metrics
        assert m.feasible, m.violation_counts
        assert result.objective == m.compute_cycles
        assert max(m.peak_bytes.values()) <= budget
        assert result.bound == result.objective and "class" in result.message
    return result


def cost(graph, budget):
    r = dp(graph, budget)
    return r.objective if r.status is Status.OPTIMAL else None


def p1_optimum(instance):
    """The P1 optimum by Dijkstra (tiny graphs only): states are (resident set, k).

    ``k`` first computations are done (fixed order); a move computes the next op or
    recomputes an earlier one whose inputs are resident (E3 memory check), or frees
    a resident node output or graph input (free of cost).
    """
    g = instance.graph
    core = instance.cores[0].id
    persistent = {t.id for t in g.tensors if t.persistent}
    ops = [op.id for op in g.ops]
    inputs = [t.id for t in g.tensors if t.producer is None and t.id not in persistent]
    items = ops + inputs
    bit = {x: 1 << i for i, x in enumerate(items)}
    size = {op.id: sum(g.tensor(t).bytes for t in set(op.outputs) - persistent) for op in g.ops}
    size.update({t: g.tensor(t).bytes for t in inputs})
    need = {op.id: sum({bit[g.tensor(t).producer or t] for t in set(op.inputs) - persistent})
            for op in g.ops}
    cycles = {v: instance.cost(v, core).cycles for v in ops}
    start = (sum(bit[t] for t in inputs), 0)
    dist = {start: 0}
    queue = [(0, start)]
    while queue:
        d, (mask, k) = heapq.heappop(queue)
        if dist[(mask, k)] != d:
            continue
        if k == len(ops):
            return d
        held = sum(size[x] for x in items if mask & bit[x])
        moves = [(mask & ~bit[x], k, 0) for x in items if mask & bit[x]]
        for i in range(min(k + 1, len(ops))):
            v = ops[i]
            if not mask & bit[v] and not need[v] & ~mask and held + size[v] <= instance.budget_bytes:
                moves.append((mask | bit[v], max(k, i + 1), cycles[v]))
        for m2, k2, c in moves:
            if d + c < dist.get((m2, k2), 1 << 62):
                dist[(m2, k2)] = d + c
                heapq.heappush(queue, (d + c, (m2, k2)))
    return None


# ------------------------------------------------------------------ hand-worked
def test_hand_worked_l3():
    # F1 F2 F3 loss B3 B2 B1, every op 1 cycle and 1 byte; Bi reads B(i+1) (loss) and Fi.
    # Store-all: 7 cycles, peak 5 while B3 runs (F1 F2 F3 loss + B3).
    # B = 4: free F1 after F2 and recompute it before B1 (it reads nothing): 8.
    # B = 3: B3 needs loss + F3 + its output, so nothing else may stay; B2 needs F2
    #   (recompute F1 F2 with B3 held: 3 bytes), B1 needs F1 (recompute, B2 held): 7+2+1 = 10.
    # B = 2: B3 alone needs 3 bytes: infeasible, least budget 3.
    g = chain_graph(3)
    assert [cost(g, b) for b in (6, 5, 4, 3)] == [7, 7, 8, 10]
    r = dp(g, 2)
    assert r.status is Status.INFEASIBLE
    assert r.stats["min_budget_bytes"] == 3 and "at least 3 bytes" in r.message


def test_hand_worked_l4():
    # F1..F4 loss B4..B1, unit costs and sizes.  Store-all: 9 cycles, peak 6 at B4.
    # B = 5: drop F1 (recomputed before B1): 10.
    # B = 4: keep only F2 through the forward (F2 F4 loss B4 = 4 at B4); F3 is
    #   recomputed from F2 for B3, F1 from nothing for B1: 11.
    # B = 3: every backward step fills memory (gradient in, activation, gradient out),
    #   so nothing is stored: F1 F2 F3 before B3, F1 F2 before B2, F1 before B1: 9+3+2+1 = 15.
    g = chain_graph(4)
    assert [cost(g, b) for b in (6, 5, 4, 3)] == [9, 10, 11, 15]
    assert dp(g, 2).stats["min_budget_bytes"] == 3


def test_hand_worked_rotor_pattern():
    # Bi reads F(i-1) and Fi (rotor's chains), graph input x (1 byte) read by F1 and B1.
    # L = 2: F1 F2 loss B2 B1.  B2 reads loss, F1, F2; B1 reads B2, x, F1.
    # Store-all peak: x F1 F2 loss + B2 = 5; cost 5.  Nothing can be dropped while B2
    # runs (it reads everything but x, and x is read by B1 and can not be recomputed),
    # so the least budget is 5 and no budget makes it recompute.
    g = chain_graph(2, reads="both", input_bytes=1)
    assert cost(g, 5) == 5
    assert dp(g, 4).stats["min_budget_bytes"] == 5


# ------------------------------------------------------------------ against P1
@pytest.mark.parametrize("reads", ["output", "input", "both"])
@pytest.mark.parametrize("length", [1, 2, 3, 4])
@pytest.mark.parametrize("loss,input_bytes", [(True, 0), (False, 1), (True, 2)])
def test_homogeneous_chains_reach_the_p1_optimum(reads, length, loss, input_bytes):
    """dp.md §4: on homogeneous chains the class holds a P1 optimum, at every budget."""
    g = chain_graph(length, reads=reads, loss=loss, input_bytes=input_bytes)
    for budget in range(1, store_all_peak(g).activation_bytes + 1):
        assert cost(g, budget) == p1_optimum(p1_instance(g, budget)), budget


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(length=st.integers(1, 3), reads=st.sampled_from(["output", "input", "both"]),
       loss=st.booleans(), input_bytes=st.integers(0, 2), seed=st.integers(0, 10**6))
def test_heterogeneous_chains_never_beat_p1(length, reads, loss, input_bytes, seed):
    """cpsat and milp (the P1 optimum) are <= dp; the document explains when they are <."""
    g = chain_graph(length, reads=reads, loss=loss, input_bytes=input_bytes, costs=(0, 6),
                    sizes=(1, 4), seed=seed)
    for budget in range(1, store_all_peak(g).activation_bytes + 1):
        best = p1_optimum(p1_instance(g, budget))
        ours = cost(g, budget)
        if best is None:
            assert ours is None
        if ours is not None:
            assert best <= ours


def test_a_non_persistent_optimum_is_outside_the_class():
    """dp.md §4: P1 may store a checkpoint, drop it and recompute it from below."""
    g = chain_graph(4, reads="both", costs=(0, 6), sizes=(1, 5), seed=244873)
    instance = p1_instance(g, 11)
    assert p1_optimum(instance) == 29
    assert cost(g, 11) == 32


# ------------------------------------------------------------------ properties
chains = st.builds(
    chain_graph,
    st.integers(1, 12),
    costs=st.one_of(st.just(1), st.just((0, 9))),
    sizes=st.one_of(st.just(1), st.just((1, 6))),
    seed=st.integers(0, 10**6),
    loss=st.booleans(),
    reads=st.sampled_from(["output", "input", "both"]),
    input_bytes=st.integers(0, 3),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=chains, data=st.data())
def test_schedules_pass_the_evaluator_and_more_budget_never_costs_more(graph, data):
    peak = store_all_peak(graph).activation_bytes
    budgets = sorted(data.draw(st.lists(st.integers(1, peak + 2), min_size=2, max_size=5, unique=True)))
    costs = [cost(graph, b) for b in budgets]
    feasible = [c for c in costs if c is not None]
    assert costs == [None] * (len(costs) - len(feasible)) + feasible  # feasible from some budget on
    assert feasible == sorted(feasible, reverse=True)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=chains)
def test_store_all_budget_costs_every_op_once(graph):
    peak = store_all_peak(graph).activation_bytes
    once = sum(op.cost for op in graph.ops)
    assert cost(graph, peak) == once
    r = dp(graph, peak)
    runs = [s.op for s in r.schedule.steps if hasattr(s, "op")]
    again = {v for v in runs if runs.count(v) > 1}
    assert all(graph.op(v).cost == 0 for v in again)  # only free ops may run twice (a tie)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=chains)
def test_least_budget_is_tight(graph):
    r = dp(graph, 1)
    if r.status is Status.OPTIMAL:
        return
    least = r.stats["min_budget_bytes"]
    assert dp(graph, least).status is Status.OPTIMAL
    assert least == 1 or dp(graph, least - 1).status is Status.INFEASIBLE


# ------------------------------------------------------------------ graphs
def test_node_link_round_trip_keeps_the_chain_and_its_optimum():
    g = chain_graph(5, reads="both", costs=(1, 9), sizes=(1, 5), seed=3, input_bytes=2)
    back = from_node_link(to_node_link(g))
    assert is_chain(back)
    for budget in (8, 11, 15):
        assert cost(back, budget) == cost(g, budget)


def test_the_zoo_mlp_is_a_chain():
    g = zoo.mlp(depth=3)
    chain = chain_of(g)
    assert chain.forward == ("F:fc1", "F:fc2", "F:fc3", "F:head")
    assert chain.trailing and all(op.startswith("opt:") for op in chain.trailing)
    peak = store_all_peak(g).activation_bytes
    assert cost(g, peak) == sum(op.flops for op in g.ops)
    # The input stays until dW:fc1, the last backward op: the least budget is high.
    tight = dp(g, peak // 2)
    assert tight.status is Status.INFEASIBLE
    least = tight.stats["min_budget_bytes"]
    assert peak // 2 < least <= peak and cost(g, least) is not None


@pytest.mark.parametrize("graph", [
    random_layered(12, seed=1),
    random_layered(30, seed=4, width=(2, 4)),
    zoo.resnet18(),
], ids=["random12", "random30", "resnet18"])
def test_non_chains_raise_a_clear_error(graph):
    assert not is_chain(graph)
    with pytest.raises(MonetError, match="dp needs a chain graph") as err:
        solve(p1_instance(graph, 1.0), "dp")
    assert err.value.field == "backend" and "cpsat or milp" in err.value.fix


def test_a_path_is_a_chain_without_backward():
    g = random_layered(6, seed=0, width=(1, 1))
    assert is_chain(g) and chain_of(g).tail == ()
    assert cost(g, store_all_peak(g).activation_bytes) == sum(op.cost for op in g.ops)


# ------------------------------------------------------------------ options
def test_options():
    inst = p1_instance(chain_graph(4), 4)
    with pytest.raises(MonetError, match="no option"):
        solve_dp(inst, colour="red")
    assert solve_dp(inst, max_computes=1).status is Status.UNKNOWN  # the optimum recomputes
    assert solve_dp(inst, max_computes=3).status is Status.OPTIMAL
    assert solve_dp(inst, fixed_order=False).status is Status.FEASIBLE
    assert solve_dp(p1_instance(chain_graph(120), 30), time_limit=0.0).status is Status.UNKNOWN
    with pytest.raises(MonetError, match="table"):
        solve_dp(inst, max_table_bytes=16)
