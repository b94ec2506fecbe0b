"""solve(): dispatch by backend and problem class, evaluator verification, statuses and gaps."""

from __future__ import annotations

import dataclasses

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.graph import zoo
from monet_ilp.instance import Problem
from monet_ilp.make import p1_instance
from monet_ilp.problems import registry
from monet_ilp.solve import Status, backends, gap_of, register_backend, solve
from tests.conftest import verified


def test_gap():
    assert gap_of(100, 90) == pytest.approx(0.1)
    assert gap_of(0, 0) == 0.0 and gap_of(None, 3) is None and gap_of(5, None) is None
    # Never clamped: a bound above the value shows as a negative gap (BD.C1).
    assert gap_of(100, 110) == pytest.approx(-0.1)


@pytest.mark.parametrize("status_claimed", ["optimal", "feasible"])
def test_a_planted_wrong_bound_makes_the_result_an_error(p1_small, p3_small, status_claimed):
    """BD.C1: a bound above the verified schedule's value is an error naming the family and both
    values, whatever status the backend claims; before, it was capped and read as optimal."""
    for instance, problem in ((p1_small, Problem.P1), (p3_small, Problem.P3)):
        name = f"test:planted-{problem}-{status_claimed}"

        def load(problem=problem):
            inner = registry.find("cpsat", problem).load()

            def run(inst, **options):
                raw = inner(inst, **options)
                assert raw.objective is not None
                status = Status.OPTIMAL if status_claimed == "optimal" else Status.FEASIBLE
                return dataclasses.replace(raw, status=status, bound=raw.objective + 1,
                                           stats={**raw.stats, "bound_source": "planted"})
            return run

        register_backend(name, load, problems=[problem])
        try:
            result = solve(instance, name, time_limit=30, workers=1, seed=0)
        finally:
            registry.unregister(name)
        assert result.status is Status.ERROR, result.message
        assert "planted" in result.message and "exceeds" in result.message
        assert f"{result.objective + 1:.10g}" in result.message and f"{result.objective:.10g}" in result.message
        assert result.gap is None and result.metrics is not None and result.metrics.feasible


def test_a_true_bound_passes_the_check(p1_small):
    """The real backend's bound passes the same check: optimal, gap 0."""
    result = solve(p1_small, "cpsat", time_limit=30, workers=1, seed=0)
    assert result.status is Status.OPTIMAL and result.bound == result.objective and result.gap == 0.0


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
