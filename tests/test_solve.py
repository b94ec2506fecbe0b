"""solve(): dispatch by backend and problem class, evaluator verification, statuses and gaps."""

from __future__ import annotations

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.graph import zoo
from monet_ilp.make import p1_instance
from monet_ilp.solve import Status, backends, gap_of, solve
from tests.conftest import verified


def test_gap():
    assert gap_of(100, 90) == pytest.approx(0.1)
    assert gap_of(0, 0) == 0.0 and gap_of(None, 3) is None and gap_of(5, None) is None


def test_unknown_backend_suggests():
    inst = p1_instance(zoo.mlp(depth=1), 1.0)
    with pytest.raises(MonetError, match="did you mean 'cpsat'"):
        solve(inst, "cpsta")
    assert {"cpsat", "milp", "dp", "heuristic:sqrt", "heuristic:lp-round"} <= set(backends())


@pytest.mark.parametrize("backend", ["cpsat", "milp", "dp"])
def test_p1_backends_agree_and_are_verified(backend):
    graph = zoo.mlp(depth=3, width=32, batch=4)
    # The 784-wide input dominates: the minimum budget is 15104 bytes; take one between it and the peak.
    top = p1_instance(graph, 1.0).budget_bytes
    inst = p1_instance(graph, (15104 + top) // 2)
    result = solve(inst, backend, time_limit=60, workers=2)
    assert result.status is Status.OPTIMAL and result.gap == 0.0
    assert verified(inst, result).compute_cycles == result.objective
    reference = solve(inst, "milp", time_limit=60, workers=2)
    assert result.objective == reference.objective


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_p2_dispatch(backend, p2_small):
    result = solve(p2_small, backend, time_limit=60, workers=2)
    assert result.status is Status.OPTIMAL
    assert verified(p2_small, result).latency_cycles == result.objective


def test_heuristic_backend_is_feasible_not_optimal():
    inst = p1_instance(zoo.mlp(depth=3), 1.0)
    result = solve(inst, "heuristic:sqrt")
    assert result.status is Status.FEASIBLE and result.bound is None
    verified(inst, result)


def test_p3_instances_go_to_the_p3_model(p3_small):
    result = solve(p3_small, "cpsat", time_limit=30, workers=2)
    assert result.stats["model"] == "p3_cpsat"
    verified(p3_small, result)


def test_p1_fixture_solves_to_the_same_optimum_on_every_exact_backend(p1_small):
    """The shared P1 fixture: cpsat, milp and the chain DP's class agree (the MLP is a chain)."""
    optima = {b: solve(p1_small, b, time_limit=60, workers=2) for b in ("cpsat", "milp", "dp")}
    for result in optima.values():
        assert result.status is Status.OPTIMAL
        verified(p1_small, result)
    assert len({r.objective for r in optima.values()}) == 1
