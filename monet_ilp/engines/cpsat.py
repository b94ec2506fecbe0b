"""One CP-SAT runner for every problem class: parameters, workers, time limit, log, hints.

A backend builds its ``cp_model.CpModel``, hints it through :class:`Hints`, and runs it
with :func:`run_cpsat`, which sets the solver up the same way for P1, P2 and P3:

- the time limit is what the backend's :class:`~monet_ilp.engines.deadline.Deadline`
  leaves when the solver starts, less its wrap-up (``formulations/time_limits.md``);
- workers default to the machine's cores, at most :data:`MAX_DEFAULT_WORKERS`
  (:func:`~monet_ilp.engines.default_workers`);
- ``defaults`` (the backend's own parameters, e.g. an extra subsolver) and then the
  caller's ``params`` are set by name, after everything else; a list or tuple replaces
  a repeated field's value (``extra_subsolvers=["objective_lb_search"]``), so a
  caller's list overrides the backend's;
- with one worker CP-SAT runs one search and no subsolvers, so an
  ``objective_lb_search`` among the extra subsolvers becomes that search's own strategy
  (``use_objective_lb_search``), unless the caller's ``params`` set it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from monet_ilp.engines import default_workers

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline

__all__ = ["CpSatRun", "Hints", "configured_solver", "integer_bound", "run_cpsat"]


def configured_solver(*, time_limit: float | None = None, workers: int | None = None,
                      seed: int = 0, log: bool = False,
                      params: Mapping[str, Any] | None = None,
                      defaults: Mapping[str, Any] | None = None) -> cp_model.CpSolver:
    """A solver with the time limit, workers, seed, log, then ``defaults`` and ``params``.

    Parameters are CP-SAT's ``SatParameters`` fields by name; a list or tuple replaces a
    repeated field's value.  ``params`` wins over ``defaults`` name by name.
    """
    solver = cp_model.CpSolver()
    p = solver.parameters
    if time_limit is not None:
        p.max_time_in_seconds = float(time_limit)
    p.num_workers = default_workers(workers)
    p.random_seed = int(seed)
    p.log_search_progress = bool(log)
    for name, value in {**(defaults or {}), **(params or {})}.items():
        if isinstance(value, (list, tuple)):
            repeated = getattr(p, name)
            repeated.clear()
            repeated.extend(value)
        else:
            setattr(p, name, value)
    # One worker runs one search and no subsolvers: the objective lower-bound search a
    # backend asks for as a subsolver becomes that search's strategy.  On the P1 stage
    # model with one worker, 20 s and no hint (scripts/bench_cpsat_workers.py) it proved 8
    # of 12 zoo and random-DAG rows against 6; at n = 60 and 80 at 0.8 the default search
    # ended at 5,962 and 28,162 where it proved 2,903 in 3.7 s and reached 3,998 (bound
    # 3,997).  It finds first solutions later: at n = 80 and 0.9 it had none after 20 s.
    if (p.num_workers == 1 and "objective_lb_search" in p.extra_subsolvers
            and "use_objective_lb_search" not in (params or {})):
        p.use_objective_lb_search = True
    return solver


@dataclass
class CpSatRun:
    """What :func:`run_cpsat` returns: the solver (for values and bounds), its status code,
    and the seconds ``solve`` took on this process's clock."""

    solver: cp_model.CpSolver
    status: cp_model.CpSolverStatus
    seconds: float

    @property
    def status_name(self) -> str:
        return str(self.solver.status_name(self.status))

    @property
    def has_solution(self) -> bool:
        return self.status in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def run_cpsat(model: cp_model.CpModel, *, deadline: Deadline | None = None,
              workers: int | None = None, seed: int = 0, log: bool = False,
              params: Mapping[str, Any] | None = None,
              defaults: Mapping[str, Any] | None = None) -> CpSatRun:
    """Solve ``model`` with :func:`configured_solver`, limited to what ``deadline`` leaves now.

    The caller checks beforehand that the deadline has not passed (it knows what to
    return then); without a deadline, or with an unlimited one, CP-SAT runs until it
    proves its answer.
    """
    limit = None if deadline is None else deadline.solver_limit()
    solver = configured_solver(time_limit=limit, workers=workers, seed=seed, log=log,
                               params=params, defaults=defaults)
    began = time.perf_counter()
    if deadline is None:
        status = solver.solve(model)
    else:
        with deadline.on_cancel(solver.stop_search):
            status = solver.solve(model)
    return CpSatRun(solver, status, time.perf_counter() - began)


class Hints:
    """Hints for one model: ``hints(var, value)`` hints a variable and counts it.

    Constants (a model that fixed a variable holds an ``int`` in its place) and absent
    variables (``None``) are skipped, so that a builder can hint every key it knows.
    """

    def __init__(self, model: cp_model.CpModel):
        self.model = model
        self.count = 0

    def __call__(self, var: Any, value: Any) -> None:
        if var is None or isinstance(var, int):
            return
        self.model.add_hint(var, int(value))
        self.count += 1


def integer_bound(bound: float) -> int:
    """A solver's bound on an integer objective, rounded up (with a margin for float noise)."""
    return math.ceil(bound - 1e-6)
