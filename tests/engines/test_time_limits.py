"""Time limits (``formulations/time_limits.md``): one deadline for the whole backend call.

A limit shorter than the model takes to build must end the build and return the best
schedule known so far, marked ``hint:<name>``, or nothing (``unknown``), with a valid
bound, never a wrong claim; every schedule goes through ``monet_ilp.solve.solve``, so
the evaluator checks it.  No assertion here is about how long anything takes: the
measurements are ``scripts/bench_time_limits.py``'s.
"""

from __future__ import annotations

import warnings

import pytest

from monet_ilp import progress
from monet_ilp.engines.cbc import cbc_path
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.graph import random_layered, zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance
from monet_ilp.solve import Status, solve
from tests.clock import ticking

WORKERS = 2


@pytest.fixture(scope="module")
def resnet_p3():
    """ResNet-18 (CIFAR, batch 1) on an Edge TPU 2x2 at 3 MiB of SRAM per core: the P3 MILP
    of this instance takes minutes to build."""
    graph = zoo.resnet18(batch=1)
    return make_instance(graph, preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3",
                         sram_budget=3 * 2**20)


@pytest.fixture(scope="module")
def random_p1():
    """A 200-node random DAG at 0.95 of its store-all peak: seconds to build either P1 model."""
    return make_instance(random_layered(200, seed=3), None, problem="P1", budget=0.95)


def no_wrong_claim(result) -> None:
    """What a run cut short may return: a verified schedule (its own or a hint) or nothing."""
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE, Status.UNKNOWN), result.message
    if result.status is Status.UNKNOWN:
        assert result.schedule is None
    else:
        assert result.metrics.feasible and result.objective == result.metrics.objective_value
    if result.bound is not None and result.objective is not None:
        assert result.bound <= result.objective


# ================================================================== the deadline
def test_deadline_checks_raise_once_passed_and_report_progress():
    heard: list[str] = []
    with progress.listening(heard.append):
        Deadline(60).check("building", "1 of 2")
        with pytest.raises(OutOfTime, match="time limit reached while building"):
            Deadline(1e-9).check("building", lambda: "2 of 2")
    assert heard == ["building: 1 of 2"]
    unlimited = Deadline(None)
    assert unlimited.left() is None and unlimited.solver_limit() is None
    assert not unlimited.passed()
    unlimited.check("building")  # never raises


def test_solvers_stop_before_the_deadline_and_sub_deadlines_take_a_share(monkeypatch):
    ticking(monkeypatch, "monet_ilp.engines.deadline", step=0.0)  # the clock stands still
    deadline = Deadline(20)
    assert deadline.solver_limit() == 19.5  # the wrap-up (0.5 s) is set aside
    assert deadline.solver_limit(0.5) == 9.75
    assert deadline.solver_limit(at_most=3) == 3
    assert deadline.sub(0.5).left() == 9.75
    assert Deadline(1e-9).solver_limit() > 0  # never 0: some solvers reject it


# ================================================================== P3
@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_p3_milp_out_of_time_while_building_returns_the_best_list_schedule(resnet_p3, solver, monkeypatch):
    """The limit ends the build at the same row on every machine: the deadlines' clock
    moves 0.1 ms per look (tests/clock.py), so 1 s is 10,000 checks, the last few inside
    the build, however loaded the machine is."""
    ticking(monkeypatch, "monet_ilp.engines.deadline", step=1e-4)
    heard: list[str] = []
    with progress.listening(heard.append):
        result = solve(resnet_p3, "milp", time_limit=1, workers=WORKERS, milp_solver=solver)
    no_wrong_claim(result)
    assert result.status is Status.FEASIBLE
    assert result.source.startswith("hint:") and result.schedule.meta["source"] == result.source
    assert "time limit reached while building the P3 MILP" in result.message
    assert result.bound is not None and result.bound > 0  # the combinatorial bound
    assert any(line.startswith("building the P3 MILP") for line in heard)


def test_p3_cpsat_keeps_its_limit_and_returns_its_hint_or_better(resnet_p3):
    result = solve(resnet_p3, "cpsat", time_limit=1, workers=WORKERS)
    no_wrong_claim(result)
    assert result.status is Status.FEASIBLE  # the list schedules fit: at least the hint
    assert result.source == "cpsat" or result.source.startswith("hint:")


# ================================================================== P1
@pytest.mark.parametrize("backend,options", [("milp", {"milp_solver": "highs"}),
                                             ("milp", {"milp_solver": "cbc"}),
                                             ("cpsat", {})])
def test_p1_out_of_time_while_building_claims_nothing_wrong(random_p1, backend, options):
    result = solve(random_p1, backend, time_limit=0.5, workers=WORKERS, **options)
    no_wrong_claim(result)
    assert result.status is not Status.OPTIMAL
    if result.status is Status.FEASIBLE:
        assert result.source.startswith("hint:")
    assert "time limit" in result.message


def test_p1_lp_rounding_out_of_time_is_unknown_not_an_error(random_p1):
    result = solve(random_p1, "heuristic:lp-round", time_limit=0.5, workers=WORKERS)
    assert result.status in (Status.FEASIBLE, Status.UNKNOWN), result.message


def test_an_infeasible_budget_is_proven_and_its_minimum_searched_in_the_time_left():
    inst = make_instance(random_layered(120, seed=3), None, problem="P1", budget=0.5)
    result = solve(inst, "cpsat", time_limit=2, workers=WORKERS)
    assert result.status is Status.INFEASIBLE  # the peak lower bound is above the budget
    assert "is feasible" in result.message or "minimum feasible budget is" in result.message
    assert result.stats["min_budget_bytes"] >= inst.budget_bytes


# ================================================================== P2
@pytest.mark.parametrize("backend,options", [("milp", {"milp_solver": "highs"}),
                                             ("milp", {"milp_solver": "cbc"}),
                                             ("cpsat", {})])
def test_p2_short_limits_return_a_verified_schedule_or_nothing(backend, options):
    graph = zoo.mlp(depth=8, width=64, batch=8, in_features=64)
    inst = make_instance(graph, preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P2", budget=0.6)
    result = solve(inst, backend, time_limit=0.5, workers=WORKERS, **options)
    no_wrong_claim(result)
    if result.status is Status.FEASIBLE and result.source != backend:
        assert result.source.startswith("hint:")


# ================================================================== CBC
def test_cbc_runs_for_every_class_without_a_deprecation_warning():
    from tests.problems.p3.test_milp import fork

    assert cbc_path()
    p3 = fork()
    p2 = make_instance(zoo.mlp(depth=2, width=16, batch=4, in_features=16),
                       preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P2", budget=0.9)
    p1 = make_instance(random_layered(12, seed=1), None, problem="P1", budget=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for instance in (p3, p2, p1):
            result = solve(instance, "milp", time_limit=60, workers=WORKERS, milp_solver="cbc")
            assert result.status in (Status.OPTIMAL, Status.INFEASIBLE), result.message
