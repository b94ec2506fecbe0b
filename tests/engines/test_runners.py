"""The solver engines on tiny models, with the real solvers: CP-SAT, HiGHS, CBC, the export.

The MILP ``min x + y + 3  s.t.  x + y >= 1.5,  x, y in {0..5}`` has the optimum 5 (x + y =
2) and the LP bound 4.5; every MILP engine must say so, with or without a start, in this
process or in a watched child, from arrays or from PuLP.
"""

from __future__ import annotations

import math

import highspy
import pulp
import pytest
from ortools.sat.python import cp_model

from monet_ilp.engines import MAX_DEFAULT_WORKERS, cbc, default_workers, highs
from monet_ilp.engines.cpsat import Hints, configured_solver, integer_bound, run_cpsat
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.engines.export import write_model
from monet_ilp.engines.milp import INTEGER_GAP, SOLVERS, SparseMilp, check_solver
from monet_ilp.engines.pulp_models import export_problem, solve_pulp, sparse_of
from monet_ilp.errors import MonetError

RUNNERS = {"highs": highs.run_highs, "cbc": cbc.run_cbc}


def tiny(*, need: float = 1.5, contradictions: tuple[str, ...] = ()) -> SparseMilp:
    """min x + y + 3  s.t.  x + y >= need,  x, y integers in [0, 5]."""
    return SparseMilp.of(cost=[1, 1], col_lb=[0, 0], col_ub=[5, 5], row_lb=[need],
                         row_ub=[math.inf], start=[0, 2], index=[0, 1], value=[1, 1],
                         integer=[True, True], offset=3, col_names=["x", "y"],
                         row_names=["cover"], contradictions=list(contradictions))


def file_optimum(path) -> float:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h.getInfo().objective_function_value


# ====================================================================== MILP runners
@pytest.mark.parametrize("solver", SOLVERS)
def test_milp_and_lp_optima(solver):
    run = RUNNERS[solver](tiny(), deadline=Deadline(60), gap_abs=INTEGER_GAP)
    assert run.status == "optimal" and run.objective == pytest.approx(5)
    assert run.bound == pytest.approx(5) and sum(run.values) == pytest.approx(2)
    lp = RUNNERS[solver](tiny(), relax=True, deadline=Deadline(60))
    assert lp.status == "optimal" and lp.objective == pytest.approx(4.5)
    assert lp.seconds > 0


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_start_is_taken_and_the_optimum_kept(solver):
    run = RUNNERS[solver](tiny(), start=[2.0, 0.0], gap_abs=INTEGER_GAP)
    assert run.status == "optimal" and run.objective == pytest.approx(5)


@pytest.mark.parametrize("solver", SOLVERS)
def test_infeasible_models(solver):
    assert RUNNERS[solver](tiny(need=11)).status == "infeasible"  # x + y <= 10
    contradicted = RUNNERS[solver](tiny(contradictions=("r: 1 <= 0 cannot hold",)))
    assert contradicted.status == "infeasible" and "cannot hold" in contradicted.detail


@pytest.mark.parametrize("solver", SOLVERS)
def test_no_time_left_and_nothing_to_solve(solver):
    late = RUNNERS[solver](tiny(), deadline=Deadline(1e-9))
    assert late.status == "limit" and late.values is None and "no time left" in late.detail
    empty = SparseMilp.of(cost=[], col_lb=[], col_ub=[], row_lb=[], row_ub=[], start=[0],
                          index=[], value=[], integer=[], offset=7)
    fixed = RUNNERS[solver](empty)
    assert fixed.status == "optimal" and fixed.objective == 7 and fixed.values == []


def test_highs_watched_child_returns_its_result_and_a_kill_keeps_nothing_wrong(monkeypatch):
    run = highs.run_highs(tiny(), deadline=Deadline(60), gap_abs=INTEGER_GAP, watch=True)
    assert run.status == "optimal" and run.objective == pytest.approx(5)
    monkeypatch.setattr(highs, "GRACE_S", -1e6)  # killed as soon as it starts
    killed = highs.run_highs(tiny(), deadline=Deadline(60), watch=True)
    assert killed.status in ("limit", "feasible") and "killed" in killed.detail
    if killed.values is not None:
        assert killed.objective >= 5 - 1e-9


def test_highs_reports_its_incumbents_as_it_finds_them():
    seen = []
    run = highs.run_highs(tiny(), deadline=Deadline(60), gap_abs=INTEGER_GAP,
                          report=lambda kind, payload: seen.append((kind, payload)))
    incumbents = [payload for kind, payload in seen if kind == "incumbent"]
    assert run.status == "optimal" and incumbents
    values, objective = incumbents[-1]
    assert objective == pytest.approx(5) and sum(values) == pytest.approx(2)


def test_cbc_is_killed_past_the_deadline(monkeypatch):
    monkeypatch.setattr(cbc, "GRACE_S", -1e6)  # killed as soon as it starts
    run = cbc.run_cbc(tiny(), deadline=Deadline(60))
    assert run.status == "limit" and run.values is None and "CBC killed" in run.detail


def parity() -> SparseMilp:
    """2x + 2y + 2z = 3 over binaries: the LP is feasible, no integer point is; CBC's
    pre-processing finds it (and says "infeasible" the same way when a time limit stops it
    on a feasible model)."""
    return SparseMilp.of(cost=[1, 1, 1], col_lb=[0, 0, 0], col_ub=[1, 1, 1], row_lb=[3],
                         row_ub=[3], start=[0, 3], index=[0, 1, 2], value=[2, 2, 2],
                         integer=[True] * 3, col_names=["x", "y", "z"], row_names=["odd"])


def test_cbc_pre_processings_infeasible_is_no_proof_until_the_search_without_it_agrees(
        monkeypatch, tmp_path):
    milp = parity()
    write_model(milp, tmp_path / "parity.mps")
    first = cbc.run_cbc_binary(tmp_path / "parity.mps", relax=False, threads=1,
                               deadline=Deadline(60), gap_abs=None)
    assert cbc.PREPROCESS_INFEASIBLE in first.log
    alone = cbc.outcome(milp, first, relax=False, seconds=first.seconds)
    assert alone.status == "limit" and "not a proof" in alone.detail
    runs = []
    real = cbc.run_cbc_binary

    def recorded(*args, **kwargs):
        runs.append(kwargs.get("preprocess", True))
        return real(*args, **kwargs)

    monkeypatch.setattr(cbc, "run_cbc_binary", recorded)
    proved = cbc.run_cbc(milp, deadline=Deadline(60))
    assert proved.status == "infeasible" and runs == [True, False]


def test_highs_options_reach_highs():
    run = highs.run_highs(tiny(), options={"mip_feasibility_tolerance": 1e-7})
    assert run.status == "optimal"
    with pytest.raises(ValueError, match="no_such_option"):
        highs.run_highs(tiny(), options={"no_such_option": 1})


def test_solver_names():
    assert check_solver("HiGHS") == "highs" and check_solver("cbc") == "cbc"
    with pytest.raises(MonetError, match="unknown MILP solver 'gurobi'"):
        check_solver("gurobi")
    assert cbc.cbc_path()


# ====================================================================== export
@pytest.mark.parametrize("suffix", (".mps", ".lp"))
def test_export_reads_back_with_the_constant_as_a_column(tmp_path, suffix):
    path = write_model(tiny(), tmp_path / f"tiny{suffix}")
    assert file_optimum(path) == pytest.approx(5)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    assert h.getNumCol() == 3  # x, y and the constant
    with pytest.raises(MonetError, match=r"\.mps or \.lp"):
        write_model(tiny(), tmp_path / "tiny.txt")


def test_an_exported_contradiction_stays_infeasible(tmp_path):
    path = write_model(tiny(contradictions=("r cannot hold",)), tmp_path / "c.mps")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kInfeasible


# ====================================================================== PuLP models
def pulp_tiny() -> pulp.LpProblem:
    problem = pulp.LpProblem("tiny", pulp.LpMinimize)
    x = problem.add_variable("x", 0, 5, pulp.LpInteger)
    y = problem.add_variable("y", 0, 5, pulp.LpInteger)
    problem.addConstraint(x + y >= 1.5, "cover")
    problem.setObjective(x + y + 3)
    return problem


def test_pulp_models_read_in_order_with_names_and_the_constant_on_request():
    milp = sparse_of(pulp_tiny())
    assert milp.col_names == ["x", "y"] and milp.row_names == ["cover"] and milp.offset == 0
    assert list(milp.row_lb) == [1.5] and milp.integer.all()
    assert sparse_of(pulp_tiny(), with_constant=True).offset == 3


@pytest.mark.parametrize("solver", SOLVERS)
def test_pulp_models_solve_and_get_their_values_back(solver):
    problem = pulp_tiny()
    run = solve_pulp(problem, solver, deadline=Deadline(60), start={"x": 2.0},
                     gap_abs=INTEGER_GAP)
    assert run.status == "optimal" and run.objective == pytest.approx(2)  # constant left out
    assert pulp.value(problem.objective) == pytest.approx(5)
    lp = solve_pulp(problem, solver, relax=True)
    assert lp.status == "optimal" and lp.objective == pytest.approx(1.5)


def test_pulp_models_run_out_of_time_before_the_solver(tmp_path):
    with pytest.raises(OutOfTime, match="handing the MILP to CBC"):
        solve_pulp(pulp_tiny(), "cbc", deadline=Deadline(1e-9))
    assert file_optimum(export_problem(pulp_tiny(), tmp_path / "p.lp")) == pytest.approx(5)


# ====================================================================== CP-SAT
def test_cpsat_parameters_lists_replace_and_params_win_over_defaults():
    solver = configured_solver(time_limit=2, workers=3, seed=5, log=False,
                               defaults={"extra_subsolvers": ["objective_lb_search"],
                                         "linearization_level": 2},
                               params={"extra_subsolvers": ("probing",)})
    p = solver.parameters
    assert list(p.extra_subsolvers) == ["probing"] and p.linearization_level == 2
    assert p.num_workers == 3 and p.random_seed == 5 and p.max_time_in_seconds == 2
    assert configured_solver().parameters.num_workers == default_workers(None)
    assert 1 <= default_workers(None) <= MAX_DEFAULT_WORKERS and default_workers(4) == 4


def test_one_worker_runs_the_lower_bound_search_a_backend_asks_for():
    """With one worker there are no subsolvers: objective_lb_search becomes the search's own."""
    lb = {"extra_subsolvers": ["objective_lb_search"]}
    assert configured_solver(workers=1, defaults=lb).parameters.use_objective_lb_search
    assert not configured_solver(workers=2, defaults=lb).parameters.use_objective_lb_search
    assert not configured_solver(workers=1).parameters.use_objective_lb_search
    chosen = configured_solver(workers=1, defaults=lb, params={"use_objective_lb_search": False})
    assert not chosen.parameters.use_objective_lb_search


def test_cpsat_runs_to_the_deadline_with_hints():
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    y = model.new_int_var(0, 10, "y")
    model.add(x + y >= 7)
    model.minimize(2 * x + 3 * y)
    hints = Hints(model)
    for var, value in ((x, 7), (y, 0), (None, 1), (4, 4)):  # an absent variable, a constant
        hints(var, value)
    assert hints.count == 2
    run = run_cpsat(model, deadline=Deadline(30), workers=1)
    assert run.status == cp_model.OPTIMAL and run.has_solution and run.status_name == "OPTIMAL"
    assert run.solver.objective_value == 14 and integer_bound(run.solver.best_objective_bound) == 14
    assert run.solver.parameters.max_time_in_seconds <= 30
