"""PuLP models on the engines: a ``pulp.LpProblem`` as a :class:`~.milp.SparseMilp`, and back.

The P2 and P3 MILPs are written with PuLP.  PuLP hands a model to HiGHS one row at a
time from Python (minutes for a large model, with no time limit) and writes MPS files
for CBC in Python too; here the model is read into arrays once, checking the deadline
every 1024 rows, and solved by the same engines as every other MILP
(:func:`~monet_ilp.engines.highs.run_highs`, :func:`~monet_ilp.engines.cbc.run_cbc`).
The solution's values go back into the PuLP variables, where the backends read them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pulp

from monet_ilp.engines.cbc import run_cbc
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.engines.export import write_model
from monet_ilp.engines.highs import run_highs
from monet_ilp.engines.milp import SolverRun, SparseMilp

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["export_problem", "solve_pulp", "sparse_of"]

#: Rows read between two checks of the deadline.
CHECK_EVERY = 1024


def sparse_of(problem: pulp.LpProblem, *, with_constant: bool = False,
              deadline: Deadline | None = None,
              step: str = "handing the MILP to HiGHS") -> SparseMilp:
    """``problem`` (a minimisation) as a :class:`~.milp.SparseMilp`, names included.

    Columns come in ``problem.variables()`` order, rows in ``problem.constraints()``
    order.  The objective's constant is the model's ``offset`` with ``with_constant``
    (an export); without, it is left out, as PuLP's HiGHS interface left it out, and the
    objective values and bounds of a run exclude it.  Past ``deadline``
    (checked every :data:`CHECK_EVERY` rows, with ``step`` as what was being done)
    :class:`~monet_ilp.engines.deadline.OutOfTime` stops the reading.
    """
    if problem.sense != pulp.LpMinimize:
        raise ValueError("the engines minimise: negate the objective")
    problem.checkDuplicateVars()
    variables = problem.variables()
    cost, lower, upper, integer, names = [], [], [], [], []
    for i, var in enumerate(variables):
        var.index = i
        cost.append(problem.objective.get(var, 0.0))
        lower.append(-float("inf") if var.lowBound is None else var.lowBound)
        upper.append(float("inf") if var.upBound is None else var.upBound)
        integer.append(var.cat == pulp.LpInteger)
        names.append(var.name)
    rows = list(problem.constraints())
    starts, index, value, row_lower, row_upper, row_names = [0], [], [], [], [], []
    for i, constraint in enumerate(rows):
        if deadline is not None and i % CHECK_EVERY == 0:
            deadline.check(step, functools.partial("{:,} of {:,} rows".format, i, len(rows)))
        for var, coefficient in constraint.items():
            if coefficient != 0:
                index.append(var.index)
                value.append(coefficient)
        starts.append(len(index))
        lb, ub = constraint.getLb(), constraint.getUb()
        row_lower.append(-float("inf") if lb is None else lb)
        row_upper.append(float("inf") if ub is None else ub)
        row_names.append(constraint.name)
    offset = float(problem.objective.constant) if with_constant else 0.0
    return SparseMilp.of(cost=cost, col_lb=lower, col_ub=upper, row_lb=row_lower,
                         row_ub=row_upper, start=starts, index=index, value=value,
                         integer=integer, offset=offset, col_names=names, row_names=row_names)


def export_problem(problem: pulp.LpProblem, path: str | Path) -> Path:
    """Write ``problem`` as MPS or LP by the suffix of ``path`` (:func:`~.export.write_model`),
    its objective constant included."""
    return write_model(sparse_of(problem, with_constant=True), path)


def solve_pulp(problem: pulp.LpProblem, solver: str, *, relax: bool = False, threads: int = 1,
               deadline: Deadline | None = None, start: Mapping[str, float] | None = None,
               log: bool = False, gap_abs: float | None = None,
               options: Mapping[str, Any] | None = None,
               stop_at: Callable[[float], bool] | None = None) -> SolverRun:
    """Solve ``problem`` (its LP relaxation with ``relax``) with ``"highs"`` or ``"cbc"``.

    ``start`` maps variable names to values (the others start at 0); ``options`` and
    ``stop_at`` are HiGHS's (:func:`~monet_ilp.engines.highs.run_highs`).  The run's
    values are written to the variables (``var.value()``).  Raises
    :class:`~monet_ilp.engines.deadline.OutOfTime` when the deadline passes while the
    model is read, or before the solver can start.
    """
    name = "HiGHS" if solver == "highs" else "CBC"
    step = f"handing the MILP to {name}"
    milp = sparse_of(problem, deadline=deadline, step=step)
    if deadline is not None and deadline.passed():
        raise OutOfTime(step, "no time left to run it")
    values = None
    if start:
        values = [float(start.get(var, 0.0)) for var in milp.col_names or []]
    if solver == "highs":
        run = run_highs(milp, relax=relax, threads=threads, deadline=deadline, start=values,
                        log=log, gap_abs=gap_abs, options=options, stop_at=stop_at)
    else:
        run = run_cbc(milp, relax=relax, threads=threads, deadline=deadline, start=values,
                      log=log, gap_abs=gap_abs)
    if run.values is not None:
        for var, x in zip(problem.variables(), run.values, strict=True):
            var.varValue = x
    return run
