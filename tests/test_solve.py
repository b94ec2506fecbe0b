"""solve(): dispatch by backend and problem class, evaluator verification, statuses and gaps."""

from __future__ import annotations

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance, p1_instance
from monet_ilp.solve import Status, backends, gap_of, solve


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
    assert result.metrics.feasible and result.objective == result.metrics.compute_cycles
    reference = solve(inst, "milp", time_limit=60, workers=2)
    assert result.objective == reference.objective


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_p2_dispatch(backend):
    inst = make_instance(zoo.mlp(depth=2, width=32, batch=4), preset("edge_tpu", n_pe_x=1, n_pe_y=1),
                         problem="P2", budget=1.0, objective="latency")
    result = solve(inst, backend, time_limit=60, workers=2)
    assert result.status is Status.OPTIMAL and result.metrics.feasible
    assert result.objective == result.metrics.latency_cycles


def test_heuristic_backend_is_feasible_not_optimal():
    inst = p1_instance(zoo.mlp(depth=3), 1.0)
    result = solve(inst, "heuristic:sqrt")
    assert result.status is Status.FEASIBLE and result.bound is None and result.metrics.feasible


def test_p3_instances_go_to_the_p3_model():
    inst = make_instance(zoo.mlp(depth=1, width=32, batch=4, in_features=32),
                         preset("edge_tpu", n_pe_x=2, n_pe_y=1), problem="P3")
    result = solve(inst, "cpsat", time_limit=30, workers=2)
    assert result.stats["model"] == "p3_cpsat" and result.metrics.feasible
