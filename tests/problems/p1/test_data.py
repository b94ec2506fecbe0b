"""The data every P1 backend reads (monet_ilp.problems.p1.data) and the one set of entry rules.

``p1_data`` is what the CP-SAT model (formulations/p1_cpsat.md, "Data") and the stage
MILP (p1_milp.md §1) are built from; ``check_p1`` is what cpsat, milp, lp-round and
the DP refuse, in the same words.
"""

from __future__ import annotations

import dataclasses

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.graph import zoo
from monet_ilp.graph.chain import chain_graph
from monet_ilp.instance import Objective, Problem
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1.cpsat import solve_cpsat
from monet_ilp.problems.p1.data import check_p1, p1_data, persistent_bytes_held
from monet_ilp.problems.p1.dp import solve_dp
from monet_ilp.problems.p1.milp import lp_bound, solve_lp_rounding, solve_milp
from monet_ilp.solve import Status, solve
from tests.conftest import verified

DIRECT = {"cpsat": solve_cpsat, "milp": solve_milp, "dp": solve_dp,
          "heuristic:lp-round": solve_lp_rounding}


def test_the_values_view_is_the_nodes_then_the_read_inputs():
    data = p1_data(p1_instance(chain_graph(3, reads="both", input_bytes=4, sizes=(2, 6), seed=1), 1.0))
    n = data.n
    assert data.n_values == n + 1 and data.tensors[n] == ("x",)
    assert data.value_bytes == data.size_bytes + data.input_size_bytes
    for j in range(n):
        assert data.reads[j] == tuple(sorted(data.preds[j] + tuple(n + g for g in data.node_inputs[j])))
        for e in data.reads[j]:
            assert j in data.users[e]
    assert data.label(n) == "x0" and data.is_input(n) and not data.is_input(n - 1)
    assert all(s * data.scale == b for s, b in zip(data.size, data.size_bytes, strict=True))
    assert data.recompute_last == min(data.first_update, n - 1)


def test_free_order_puts_the_optimizer_ops_last_and_keeps_the_values():
    inst = p1_instance(zoo.mlp(depth=2), 1.0)
    fixed, free = p1_data(inst), p1_data(inst, fixed_order=False, passes=2)
    assert sorted(fixed.ops) == sorted(free.ops) and free.passes == 2
    assert free.first_update == len(free.ops) - sum(1 for op in inst.graph.ops if op.kind.value == "optimizer")
    assert fixed.value_bytes != () and sorted(fixed.value_bytes) == sorted(free.value_bytes)


@pytest.mark.parametrize("backend", sorted(DIRECT))
def test_every_p1_backend_refuses_in_the_same_words(backend, p2_small):
    energy = dataclasses.replace(p1_instance(chain_graph(3), 1.0), objective=Objective.ENERGY)
    with pytest.raises(MonetError, match=f"backend {backend!r} on P1 does not minimise the energy"):
        DIRECT[backend](energy)
    with pytest.raises(MonetError, match=f"backend {backend!r} solves P1, but instance") as err:
        DIRECT[backend](p2_small)
    assert err.value.field == "problem"


def test_one_core_holding_the_inputs(p3_small):
    two_cores = dataclasses.replace(p3_small, problem=Problem.P1, objective=Objective.COMPUTE)
    with pytest.raises(MonetError, match="P1 runs on one core whose memory holds the graph inputs") as err:
        check_p1(two_cores, "cpsat")
    assert err.value.field == "cores"


def test_persistent_bytes_held_in_the_core_memory_come_off_every_budget():
    """E1.5: with the weights modelled in the core's memory, the values get the rest."""
    graph = zoo.mlp(depth=2, width=16, batch=4, in_features=16)
    plain = p1_instance(graph, 0.95)
    held = sum(t.bytes for t in graph.tensors if t.persistent)
    inst = dataclasses.replace(plain, persistent_home=plain.cores[0].memory, memories=tuple(
        dataclasses.replace(m, capacity_bytes=m.capacity_bytes + held) for m in plain.memories))
    assert persistent_bytes_held(plain) == 0 and persistent_bytes_held(inst) == held > 0
    assert p1_data(inst).budget_bytes == p1_data(plain).budget_bytes == plain.budget_bytes
    optima = set()
    for backend in ("cpsat", "milp"):
        result = solve(inst, backend, time_limit=60, workers=1)
        verified(inst, result)
        assert result.status is Status.OPTIMAL, result.message
        assert result.objective == solve(plain, backend, time_limit=60, workers=1).objective
        optima.add(result.objective)
    assert len(optima) == 1
    assert lp_bound(inst) == pytest.approx(lp_bound(plain))
