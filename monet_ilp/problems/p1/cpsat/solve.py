"""Solving P1 with CP-SAT: ``solve_cpsat`` (min compute cost) and ``min_budget_cpsat`` (min peak).

Last step of the backend: build the grid and the model, hint it with a schedule (a
given one, or the best baseline that fits), run CP-SAT, and turn its cells back into
a :class:`~monet_ilp.schedule.Sequence` whose frees follow liveness.  The objective
returned is the sequence's compute cost, which the evaluator recomputes.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from monet_ilp.engines.cpsat import Hints, run_cpsat
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.errors import MonetError
from monet_ilp.problems.p1.cpsat.encodings import DEFAULT_ENCODING, build_model
from monet_ilp.problems.p1.cpsat.hints import (
    Completion,
    baseline_completions,
    complete,
    hint_from,
    sequence_of,
)
from monet_ilp.problems.p1.cpsat.repair import best_repair
from monet_ilp.problems.p1.data import P1Data, check_p1, p1_data
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Compute, Schedule, Sequence

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.problems.p1.cpsat.variables import P1Vars

__all__ = ["min_budget", "min_budget_cpsat", "solve_cpsat"]

#: Seconds ``solve_cpsat`` gives the minimum-budget search after proving infeasibility
#: when no time limit was set.
MIN_BUDGET_DEFAULT_SECONDS = 60.0

#: Seconds the repair heuristic may spend on a hint when no baseline fits.
REPAIR_SECONDS = 3.0

#: CP-SAT parameters set before the caller's ``params``.  The objective lower-bound
#: search proves P1 optima far faster than the default portfolio, because optima sit
#: close to the trivial bound (every node once): see ``p1_cpsat.md``.
DEFAULT_PARAMS: dict[str, Any] = {"extra_subsolvers": ["objective_lb_search"]}


def solve_cpsat(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    encoding: str = DEFAULT_ENCODING,
    max_computes: int | None = None,
    fixed_order: bool = True,
    passes: int = 1,
    use_baseline_hint: bool = True,
    warm_start: bool = True,
    log: bool = False,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    **options: Any,
) -> BackendResult:
    """Minimise the total compute cost of a P1 instance (``formulations/p1_cpsat.md``).

    Parameters
    ----------
    instance
        A P1 instance (one core whose memory holds the graph inputs).
    time_limit
        Seconds for CP-SAT (``None``: until proven).
    workers
        CP-SAT workers (default: the machine's cores, at most 8).
    hint
        A Sequence (or one-core timed Schedule) to start from.  Default: the
        cheapest baseline (store-all, Chen sqrt(n), Chen greedy) that fits.
    encoding
        ``"stages"`` (Checkmate-like, linear memory) or ``"intervals"``
        (Moccasin-like, retention intervals in a cumulative).
    max_computes
        At most this many computations of each node (Moccasin uses 2); default no
        limit (each node at most once per stage anyway).
    fixed_order
        First computations in graph order (default), or in any topological order.
    passes
        Sweeps of each stage over its nodes in order (``p1_cpsat.md``, "Passes"):
        1 is Checkmate's stage model; more passes let a stage recompute nodes out
        of graph order, a larger (slower) model that can only do better.
    use_baseline_hint
        Hint with the best fitting baseline when ``hint`` is not given.
    warm_start
        With ``fixed_order=False`` or ``passes > 1`` and no ``hint``: first solve
        the smaller model (fixed order, one pass) with a third of the time limit
        (to optimality without one) and hint with its schedule, so the result is
        never worse than that model's.
    log
        Print CP-SAT's search log.
    seed
        CP-SAT's random seed.
    params
        Further CP-SAT parameters, by name.

    Returns
    -------
    BackendResult
        ``OPTIMAL`` (proven), ``FEASIBLE`` (time limit; best schedule and bound),
        ``INFEASIBLE`` (proven; the message states the minimum feasible budget) or
        ``UNKNOWN``.  ``objective`` is the compute cost, ``bound`` the best lower
        bound rounded up.
    """
    # One core: latency is the compute cost (P1C.O1); energy and the weighted sum are not.
    check_p1(instance, "cpsat")
    # private: warm starts skip the explanation and run to a share of the caller's deadline
    explain_infeasible: bool = options.pop("_explain_infeasible", True)
    # a warm start's share of the caller's deadline, else time_limit; everything counts
    deadline: Deadline = options.pop("_deadline", None) or Deadline(time_limit)
    _no_unknown_options(options)
    started = deadline.started
    grid = p1_data(instance, fixed_order=fixed_order, passes=passes)
    stats: dict[str, Any] = _grid_stats(grid, encoding, max_computes)
    trivial_bound = sum(grid.cost)

    if grid.peak_lower_bound > grid.budget:
        stats["infeasible_by"] = "peak_lower_bound"
        if not explain_infeasible:
            return BackendResult(Status.INFEASIBLE, message="infeasible", stats=stats)
        return _infeasible(instance, grid, stats, started, deadline, workers, encoding)

    if hint is None and warm_start and (not fixed_order or passes > 1):
        hint = _warm_start(instance, deadline, workers, encoding, max_computes, seed, params, stats)
    chosen = _choose_hint(instance, grid, hint, use_baseline_hint, max_computes, stats, deadline)
    built = time.perf_counter()
    try:
        v = build_model(grid, encoding=encoding, max_computes=max_computes, deadline=deadline)
        if chosen is not None:
            add_hint(v, chosen)
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return _hint_or_unknown(instance, grid, chosen, trivial_bound, max_computes, stats, started,
                                str(stop))
    stats.update(_model_stats(v), build_seconds=round(time.perf_counter() - built, 3))
    if deadline.passed():
        return _hint_or_unknown(instance, grid, chosen, trivial_bound, max_computes, stats, started,
                                "time limit reached before CP-SAT could start")
    solver, status = _run(v, deadline, workers, log, seed, params, stats)

    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        cells = {key[1:] for key, x in v.var.items() if key[0] == "R" and solver.value(x)}
        completion = complete(grid, cells, source="cpsat")
        if completion is None or completion.cost != round(solver.objective_value):
            raise AssertionError("the CP-SAT solution does not replay; this is a bug in cpsat")
        bound = _bound(solver, trivial_bound)
        proven = status == cp_model.OPTIMAL
        form = f"stage form, passes={grid.passes}"
        return _result(instance, grid, completion, Status.OPTIMAL if proven else Status.FEASIBLE,
                       completion.cost if proven else bound, stats, started,
                       f"optimal in {form}" if proven
                       else f"time limit reached; best schedule and bound returned ({form})")
    if status == cp_model.INFEASIBLE:
        stats["infeasible_by"] = "cpsat"
        if not explain_infeasible:
            return BackendResult(Status.INFEASIBLE, message="infeasible", stats=stats)
        return _infeasible(instance, grid, stats, started, deadline, workers, encoding)
    if status == cp_model.MODEL_INVALID:
        raise AssertionError(f"CP-SAT rejects the model: {v.model.validate()}")
    return _hint_or_unknown(instance, grid, chosen, _bound(solver, trivial_bound),
                            max_computes, stats, started,
                            "time limit reached before CP-SAT found a schedule")


def min_budget_cpsat(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    fixed_order: bool = True,
    passes: int = 1,
    encoding: str = DEFAULT_ENCODING,
    log: bool = False,
    seed: int = 0,
    deadline: Deadline | None = None,
) -> tuple[int, bool]:
    """The smallest budget (bytes) for which a schedule exists, and whether it is proven.

    Minimises the model's memory peak (P1C.O2) with unlimited recomputation and the
    same order option; cost plays no part.  When not proven (time limit), the value
    is the smallest peak found, an upper bound on the minimum.  ``time_limit`` counts
    everything (baselines, model, search); a ``deadline`` replaces it.  The budget
    includes the persistent bytes the core memory holds (EV.E1.5; none unless modelled).

    Returns
    -------
    (budget_bytes, proven)
    """
    deadline = deadline or Deadline(time_limit)
    grid = p1_data(instance, fixed_order=fixed_order, passes=passes)
    low = grid.peak_lower_bound
    # Store-all's cells first: the one candidate that always exists (its peak is a
    # feasible budget), whatever time is left for the others.
    store_all = complete(grid, {(i, grid.passes - 1, i) for i in range(grid.n)},
                         source="store_all_cells")
    candidates = [] if store_all is None else [store_all]
    candidates += baseline_completions(instance, grid, deadline)
    best = min(candidates, key=lambda c: (c.peak, c.cost))
    if best.peak <= low:
        return best.peak * grid.scale + grid.persistent_bytes, True
    if deadline.passed():
        return best.peak * grid.scale + grid.persistent_bytes, False
    try:
        v = build_model(grid, encoding=encoding, minimize_peak=True, peak_bounds=(low, best.peak),
                        deadline=deadline)
        add_hint(v, best)
    except OutOfTime:
        return best.peak * grid.scale + grid.persistent_bytes, False
    if deadline.passed():
        return best.peak * grid.scale + grid.persistent_bytes, False
    stats: dict[str, Any] = {}
    solver, status = _run(v, deadline, workers, log, seed, None, stats)
    if status == cp_model.OPTIMAL:
        return round(solver.objective_value) * grid.scale + grid.persistent_bytes, True
    if status == cp_model.FEASIBLE:
        return round(solver.objective_value) * grid.scale + grid.persistent_bytes, False
    return best.peak * grid.scale + grid.persistent_bytes, False


#: The name the issue asks for, next to the backend's.
min_budget = min_budget_cpsat


# ------------------------------------------------------------------ helpers
def _no_unknown_options(options: dict[str, Any]) -> None:
    if options:
        name = min(options)
        raise MonetError(
            f"unknown cpsat option {name!r}", field=name,
            fix="use encoding, max_computes, fixed_order, passes, use_baseline_hint, warm_start, "
                "log, seed or params",
        )


def _grid_stats(grid: P1Data, encoding: str, max_computes: int | None) -> dict[str, Any]:
    return {
        "encoding": encoding,
        "fixed_order": grid.fixed_order,
        "passes": grid.passes,
        "max_computes": max_computes,
        "nodes": grid.n,
        "size_scale": grid.scale,
        "budget_bytes": grid.budget_bytes,
        "peak_lower_bound_bytes": grid.peak_lower_bound * grid.scale,
    }


def _model_stats(v: P1Vars) -> dict[str, Any]:
    proto = v.model.proto
    return {
        "cells": sum(1 for key in v.var if key[0] == "R"),
        "variables": len(proto.variables),
        "constraints": len(proto.constraints),
    }


def _warm_start(instance: Instance, deadline: Deadline, workers: int | None, encoding: str,
                max_computes: int | None, seed: int, params: dict[str, Any] | None,
                stats: dict[str, Any]) -> Schedule | Sequence | None:
    """The schedule of the fixed-order, one-pass model, or ``None``: a third of the time left."""
    first = solve_cpsat(instance, workers=workers, encoding=encoding, max_computes=max_computes,
                        seed=seed, params=params, _explain_infeasible=False,
                        _deadline=deadline.sub(1 / 3) if deadline.limited else None)
    stats["warm_start"] = {"status": str(first.status), "objective": first.objective,
                           "seconds": first.stats.get("wall_seconds")}
    if first.status in (Status.OPTIMAL, Status.FEASIBLE):
        return first.schedule
    return None


def _choose_hint(instance: Instance, grid: P1Data, hint: Schedule | Sequence | None,
                 use_baseline: bool, max_computes: int | None, stats: dict[str, Any],
                 deadline: Deadline) -> Completion | None:
    """The hint: the one given, else the cheapest baseline that fits (else a repaired one).

    Baselines and the repair run within the deadline; what they have not finished is
    left out.
    """
    if hint is not None:
        if isinstance(hint, Schedule):
            computations = [r.op for r in sorted(hint.ops, key=lambda r: (r.start, r.end))]
            hint = Sequence((), {}) if not computations else _as_sequence(computations)
        source = "warm_start" if "warm_start" in stats else "given"
        chosen = hint_from(grid, hint, source=source)
        stats["hint"] = source if chosen is not None else f"{source} (not usable: order differs)"
    elif use_baseline:
        fitting = [c for c in baseline_completions(instance, grid, deadline)
                   if c.fits(grid) and _within_computes(c, max_computes)]
        if not fitting and not deadline.passed():
            seconds = deadline.solver_limit(0.25, at_most=REPAIR_SECONDS)  # not None: at_most set
            cells = best_repair(grid, time_limit=REPAIR_SECONDS if seconds is None else seconds)
            try:
                repaired = None if cells is None else complete(grid, cells, source="repair",
                                                               deadline=deadline)
            except OutOfTime:
                repaired = None
            if repaired is not None and repaired.fits(grid) and _within_computes(repaired, max_computes):
                fitting.append(repaired)
        chosen = min(fitting, key=lambda c: c.cost, default=None)
        stats["hint"] = chosen.source if chosen is not None else "none (no baseline fits)"
    else:
        chosen = None
        stats["hint"] = "none"
    if chosen is not None:
        stats["hint_cost"] = chosen.cost
        stats["hint_fits"] = chosen.fits(grid)
    return chosen


def _as_sequence(computations: list[str]) -> Sequence:
    return Sequence(tuple(Compute(op) for op in computations))


def _within_computes(c: Completion, max_computes: int | None) -> bool:
    if max_computes is None:
        return True
    counts: dict[int, int] = {}
    for _, _, i in c.cells:
        counts[i] = counts.get(i, 0) + 1
    return max(counts.values(), default=0) <= max_computes


def add_hint(v: P1Vars, c: Completion) -> None:
    """Hint every variable of ``v`` with its value in ``c`` (absent booleans: 0)."""
    hints = Hints(v.model)
    for done, (key, x) in enumerate(v.var.items()):
        if done % 4096 == 0:
            v.check("hint", done, len(v.var))
        value = c.values.get(key)
        if value is None and key[0] in ("R", "F", "S", "Sin", "FREE", "present"):
            value = 0
        if value is not None:
            hints(x, value)


def _run(v: P1Vars, deadline: Deadline, workers: int | None, log: bool, seed: int,
         params: dict[str, Any] | None,
         stats: dict[str, Any]) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus]:
    run = run_cpsat(v.model, deadline=deadline, workers=workers, seed=seed, log=log,
                    params=params, defaults=DEFAULT_PARAMS)
    stats.update(
        solver_status=run.status_name,
        solve_seconds=round(run.seconds, 3),
        workers=run.solver.parameters.num_workers,
        conflicts=run.solver.num_conflicts,
        branches=run.solver.num_branches,
    )
    return run.solver, run.status


def _bound(solver: cp_model.CpSolver, trivial: int) -> int:
    """CP-SAT's bound rounded up, at least ``trivial`` (every op once): reported as proved (BD.C1)."""
    raw = solver.best_objective_bound
    bound = trivial
    if math.isfinite(raw):
        nearest = round(raw)
        solver_bound = nearest if abs(raw - nearest) <= 1e-6 * max(1.0, abs(raw)) else math.ceil(raw)
        bound = max(bound, int(solver_bound))
    return bound


def _result(instance: Instance, grid: P1Data, completion: Completion, status: Status, bound: int,
            stats: dict[str, Any], started: float, message: str,
            source: str = "cpsat") -> BackendResult:
    plan = completion.computations(grid)
    sequence = sequence_of(instance.graph, plan, meta={
        "backend": "cpsat", "encoding": stats["encoding"], "compute_cycles": completion.cost,
        "model_peak_bytes": completion.peak * grid.scale,
    })
    stats["recomputations"] = len(completion.cells) - grid.n
    stats["model_peak_bytes"] = completion.peak * grid.scale
    stats["wall_seconds"] = round(time.perf_counter() - started, 3)
    return BackendResult(status, sequence, completion.cost, bound, message, stats, source)


def _hint_or_unknown(instance: Instance, grid: P1Data, chosen: Completion | None, bound: int,
                     max_computes: int | None, stats: dict[str, Any], started: float,
                     reason: str) -> BackendResult:
    """No schedule of CP-SAT's own: the hint if it fits (FEASIBLE), else UNKNOWN; with ``bound``.

    The hint is a completion of the grid, so it lies in the model's class and ``bound``
    holds for it as it is (no cap: solve() checks it, BD.C1).
    """
    if chosen is not None and chosen.fits(grid) and _within_computes(chosen, max_computes):
        return _result(instance, grid, chosen, Status.FEASIBLE, bound, stats,
                       started, f"{reason}; returning the {chosen.source} hint",
                       source=f"hint:{chosen.source}")
    stats["wall_seconds"] = round(time.perf_counter() - started, 3)
    return BackendResult(Status.UNKNOWN, None, None, bound, f"{reason}; no schedule and no proof",
                         stats)


def _infeasible(instance: Instance, grid: P1Data, stats: dict[str, Any], started: float,
                deadline: Deadline, workers: int | None, encoding: str) -> BackendResult:
    """INFEASIBLE (proven), with the minimum budget found in the time left (time_limits.md)."""
    if not deadline.limited:
        deadline = Deadline(MIN_BUDGET_DEFAULT_SECONDS)
    budget, proven = min_budget_cpsat(instance, workers=workers, fixed_order=grid.fixed_order,
                                      passes=grid.passes, encoding=encoding, deadline=deadline)
    stats["min_budget_bytes"] = budget
    stats["min_budget_proven"] = proven
    stats["wall_seconds"] = round(time.perf_counter() - started, 3)
    form = f"stage form, passes={grid.passes}"
    if proven:
        claim = f"the minimum feasible budget is {budget} bytes (proven in {form})"
    else:
        claim = f"a budget of {budget} bytes is feasible (minimum not proven within the time limit)"
    message = f"no schedule in {form} fits the budget of {grid.capacity_bytes} bytes; {claim}"
    if stats.get("max_computes") is not None:
        message += f"; with at most {stats['max_computes']} computations per node it may need more"
    return BackendResult(Status.INFEASIBLE, None, None, None, message, stats)
