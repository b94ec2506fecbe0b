"""The ``heuristic:lp-round`` backend of P1: Checkmate's LP rounding (``formulations/p1_milp.md`` §7).

Solves the LP relaxation of the stage MILP (:mod:`.solve`), rounds it
(:mod:`.rounding`) at the budget fractions in turn (:func:`.solve.rounding_sweep`),
and returns the cheapest schedule that fits.  A heuristic: it proves nothing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.engines.milp import bound_ceil
from monet_ilp.problems.p1.data import check_p1
from monet_ilp.problems.p1.milp.rounding import BUDGET_FRACTIONS, THRESHOLDS, sequence_of_plan
from monet_ilp.problems.p1.milp.solve import (
    build_model,
    infeasible_message,
    model_stats,
    parse_options,
    rounding_sweep,
    run_solver,
)
from monet_ilp.results import BackendResult, Status

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Sequence

__all__ = ["solve_lp_rounding"]


def solve_lp_rounding(instance: Instance, *, time_limit: float | None = None,
                      workers: int | None = None, hint: Sequence | None = None,
                      **options: Any) -> BackendResult:
    """Checkmate's LP-rounding approximation (``formulations/p1_milp.md`` §7).

    Solves the LP relaxation of the stage MILP, rounds its S deterministically
    (``thresholds``, default 0.1 .. 0.9) and at random (``samples`` draws, ``seed``),
    completes each rounding with the least R (two-phase rounding) and keeps the
    cheapest schedule that fits the budget.  When none fits, the LP is solved again
    with the budget scaled by the next of ``budget_fractions`` (Checkmate's
    allowance for the rounding's overshoot), the schedule always checked against the
    true budget.

    Parameters
    ----------
    instance
        A P1 instance.
    time_limit, workers
        Seconds for the whole run; solver threads (default 1).
    hint
        Ignored (accepted for the common backend signature).
    **options
        ``milp_solver`` (``"highs"`` default, ``"cbc"``), ``max_computes``,
        ``samples`` (default 16), ``seed`` (0), ``thresholds``,
        ``budget_fractions`` (default 1.0, 0.9, ..., 0.4), ``fixed_order`` (must be
        true), ``log``.

    Returns
    -------
    BackendResult
        FEASIBLE with the schedule when a rounding fits, UNKNOWN when none does,
        INFEASIBLE when the LP relaxation is; ``bound`` is the LP bound rounded up
        (costs are integers) and ``stats["lp_bound"]`` the LP optimum.
    """
    deadline = Deadline(time_limit)  # everything counts (time_limits.md)
    start = deadline.started
    opts = parse_options(options, extra=("samples", "seed", "thresholds", "budget_fractions"))
    check_p1(instance, "heuristic:lp-round")
    threads = int(workers) if workers else 1
    stats: dict[str, Any] = {"solver": opts.solver, "lp_bound": None}

    def done(status: Status, **kwargs: Any) -> BackendResult:
        stats["wall_s"] = round(time.perf_counter() - start, 3)
        return BackendResult(status, stats=stats, **kwargs)

    try:
        built = build_model(instance, max_computes=opts.max_computes, deadline=deadline)
    except OutOfTime as stop:  # a heuristic: no fallback of its own, no claim
        stats["stopped"] = str(stop)
        return done(Status.UNKNOWN, message=f"{stop}; no rounding tried")
    stats.update(model_stats(built))
    if built.model.contradictions:
        return done(Status.INFEASIBLE, message=infeasible_message(instance, built,
                                                                  deadline=deadline))
    run = run_solver(opts.solver, built, relax=True, threads=threads, deadline=deadline,
                     log=opts.log)
    stats["lp_s"] = round(run.seconds, 3)
    if run.status == "infeasible":
        return done(Status.INFEASIBLE, message=infeasible_message(
            instance, built, lp=True, deadline=deadline))
    bound = None
    if run.status == "optimal" and run.objective is not None:
        stats["lp_bound"] = run.objective
        bound = bound_ceil(run.objective)
    fractions = tuple(opts.extra.get("budget_fractions", BUDGET_FRACTIONS))
    if fractions[:1] != (1.0,):
        fractions = (1.0,) + fractions
    plan, cost, info = rounding_sweep(
        instance, built, run.values if run.status == "optimal" else None, solver=opts.solver,
        threads=threads, deadline=deadline, fractions=fractions,
        thresholds=tuple(opts.extra.get("thresholds", THRESHOLDS)),
        samples=int(opts.extra.get("samples", 16)), seed=int(opts.extra.get("seed", 0)),
        log=opts.log)
    stats.update(info)
    if plan is None:
        return done(Status.UNKNOWN, bound=bound,
                    message="no rounding of the LP solutions fits the budget")
    sequence, cost = sequence_of_plan(built.data, plan, meta={"backend": "lp-round"})
    return done(Status.FEASIBLE, schedule=sequence, objective=cost.compute_cycles, bound=bound,
                message=f"Checkmate LP rounding (LP budget x{info['budget_fraction']})")
