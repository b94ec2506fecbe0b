"""PuLP's HiGHS for the P2 and P3 MILPs, held to a deadline (:mod:`~monet_ilp.engines.deadline`).

PuLP hands a model to HiGHS one row at a time from Python, which takes minutes for a
large model and checks no time limit; :class:`PulpHiGHS` hands it over in one piece,
checking the deadline as it goes, gives HiGHS the seconds left when it starts, warm
starts it, and interrupts it from its callbacks (at the deadline, or once a solution
the caller accepts has stood for a while).
"""

from __future__ import annotations

import math
import time
from typing import Any

import pulp

from monet_ilp.engines.deadline import Deadline, OutOfTime

__all__ = ["PulpHiGHS", "reset_highs_threads"]


class PulpHiGHS(pulp.HiGHS):
    """PuLP's HiGHS with a warm start, the model status and MIP bound kept, and an
    interrupt once it has found a solution for which ``stop_at(value)`` is true and then
    nothing better for a while (``PATIENCE_S``, or a tenth of the time spent).

    With a ``deadline``, the model is handed to HiGHS in one piece, checking the deadline
    as it goes (PuLP adds one row at a time, minutes for a large model, with no check),
    and HiGHS's time limit is what is left when it starts; its callbacks interrupt it
    at the deadline too (HiGHS does not check its own limit everywhere).
    """

    PATIENCE_S = 1.0

    def __init__(self, start: dict[str, float] | None = None, stop_at=None,
                 deadline: Deadline | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.start = start
        self.stop_at = stop_at
        self.deadline = deadline
        self.info: dict[str, Any] = {}

    def buildSolverModel(self, lp):  # noqa: N802 (PuLP's name)
        import highspy
        import numpy as np

        step = "handing the MILP to HiGHS"

        def check(detail) -> None:
            if self.deadline is not None:
                self.deadline.check(step, detail)

        inf = highspy.kHighsInf
        variables = lp.variables()
        sign = -1 if lp.sense == pulp.LpMaximize else 1
        cost, lower, upper, integer = [], [], [], []
        for i, var in enumerate(variables):
            var.index = i
            cost.append(sign * lp.objective.get(var, 0.0))
            lower.append(-inf if var.lowBound is None else var.lowBound)
            upper.append(inf if var.upBound is None else var.upBound)
            integer.append(var.cat == pulp.LpInteger and self.mip)
        constraints = list(lp.constraints())
        starts, index, value, row_lower, row_upper = [0], [], [], [], []
        for i, constraint in enumerate(constraints):
            if i % 1024 == 0:
                check(lambda: f"{i:,} of {len(constraints):,} rows")
            constraint.index = i
            for var, coefficient in constraint.items():
                if coefficient != 0:
                    index.append(var.index)
                    value.append(coefficient)
            starts.append(len(index))
            lb, ub = constraint.getLb(), constraint.getUb()
            row_lower.append(-inf if lb is None else lb)
            row_upper.append(inf if ub is None else ub)
        model = highspy.HighsLp()
        model.num_col_, model.num_row_ = len(variables), len(constraints)
        model.col_cost_ = np.asarray(cost, dtype=np.float64)
        model.col_lower_ = np.asarray(lower, dtype=np.float64)
        model.col_upper_ = np.asarray(upper, dtype=np.float64)
        model.row_lower_ = np.asarray(row_lower, dtype=np.float64)
        model.row_upper_ = np.asarray(row_upper, dtype=np.float64)
        model.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        model.a_matrix_.num_col_, model.a_matrix_.num_row_ = model.num_col_, model.num_row_
        model.a_matrix_.start_ = np.asarray(starts, dtype=np.int32)
        model.a_matrix_.index_ = np.asarray(index, dtype=np.int32)
        model.a_matrix_.value_ = np.asarray(value, dtype=np.float64)
        if any(integer):
            kind = highspy.HighsVarType
            model.integrality_ = [kind.kInteger if flag else kind.kContinuous for flag in integer]
        lp.solverModel.passModel(model)

    def callSolver(self, lp):  # noqa: N802 (PuLP's name)
        import highspy

        h = lp.solverModel
        if self.deadline is not None:
            if self.deadline.passed():
                raise OutOfTime("handing the MILP to HiGHS", "no time left to run it")
            left = self.deadline.solver_limit()
            if left is not None:
                h.setOptionValue("time_limit", float(left))
        if self.start and self.mip:
            solution = highspy.HighsSolution()
            solution.col_value = [self.start.get(v.name, 0.0) for v in lp.variables()]
            h.setSolution(solution)
        stopped = [False]
        began, last = time.perf_counter(), [None]
        # Interrupt where the solver's own limit ends: the deadline less its wrap-up.
        at = None if self.deadline is None or not self.deadline.limited else (
            self.deadline.at - self.deadline.wrap_up)
        if self.stop_at is not None and self.mip:
            def improved(event) -> None:
                if self.stop_at(event.data_out.objective_function_value):
                    last[0] = time.perf_counter()

            h.cbMipImprovingSolution += improved

        def interrupt(event) -> None:
            now = time.perf_counter()
            if at is not None and now > at:
                event.interrupt()
            elif last[0] is not None and now - last[0] > max(self.PATIENCE_S, (now - began) / 10):
                stopped[0] = True
                event.interrupt()

        if at is not None or (self.stop_at is not None and self.mip):
            h.cbMipInterrupt += interrupt
            h.cbSimplexInterrupt += interrupt
            h.cbIpmInterrupt += interrupt
        h.run()
        info = h.getInfo()
        status = h.getModelStatus()
        kind = highspy.HighsModelStatus
        self.info = {
            "optimal": status == kind.kOptimal,
            "infeasible": status in (kind.kInfeasible, kind.kUnboundedOrInfeasible),
            "has_solution": info.primal_solution_status == 2,
            "objective": info.objective_function_value,
            "bound": info.mip_dual_bound if math.isfinite(info.mip_dual_bound) else None,
            "text": h.modelStatusToString(status),
            "stopped": stopped[0],
        }


def reset_highs_threads() -> None:
    """HiGHS's global scheduler refuses a thread count other than the one it started with."""
    import highspy

    highspy.Highs.resetGlobalScheduler(True)
    from monet_ilp.problems.p1.milp import solve as p1_solve

    p1_solve._HIGHS_THREADS.clear()  # the P1 backend tracks the count it started with
