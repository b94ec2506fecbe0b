"""The ``milp`` backend of P3: :func:`solve_p3_milp` (``formulations/p3_milp.md`` §7).

The list schedules and the combinatorial bound first, then the model, its LP
relaxation, and rounds of the MILP with shrinking horizons (P3M.S1), each warm-started
from the best schedule so far; HiGHS or CBC through the engines every MILP shares.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monet_ilp.engines import default_workers
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.engines.milp import INTEGER_GAP, SolverRun, bound_ceil, check_solver
from monet_ilp.engines.pulp_models import export_problem, solve_pulp
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import best_verified, evaluate
from monet_ilp.instance import Instance, Objective
from monet_ilp.problems.p3.bounds import backend_floor
from monet_ilp.problems.p3.data import (
    DEFAULT_MAX_COMPUTES,
    DEFAULT_MAX_TRANSFERS,
    P3Data,
    baseline_schedules,
    p3_data,
    weighted_scale,
)
from monet_ilp.problems.p3.milp.model import P3Milp
from monet_ilp.problems.p3.milp.start import start_values
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Schedule, Sequence

if TYPE_CHECKING:
    from pathlib import Path

    import pulp

__all__ = ["solve_p3_milp"]

#: HiGHS's integrality and feasibility tolerances: times are read back rounded, and a
#: big-M row with a binary off by ``tol`` moves a time by ``tol * horizon`` cycles.
_TOLERANCE = 1e-7
_HIGHS_OPTIONS = {"mip_feasibility_tolerance": _TOLERANCE,
                  "primal_feasibility_tolerance": _TOLERANCE}
_OPTIONS = ("milp_solver", "max_computes", "max_transfers", "colocate", "allow_recompute",
            "allow_offload", "allow_pin", "export", "msg", "log", "use_baseline_hint",
            "recompute_after_first", "fixed_order")


def _baseline(instance: Instance) -> list[Schedule]:
    """The list schedules the evaluator accepts (``p3_data.baseline_schedules``), best first."""
    return [schedule for ok, _, schedule in baseline_schedules(instance) if ok]


# ====================================================================== solving
def _solve(problem: pulp.LpProblem, solver: str, *, relax: bool, threads: int,
           deadline: Deadline, start: dict[str, float] | None, msg: bool,
           gap_abs: float, stop_at: Callable[[float], bool] | None = None) -> SolverRun:
    """Solve the model (its LP relaxation with ``relax``) with HiGHS or CBC by ``deadline``.

    Raises :class:`OutOfTime` when the deadline passes before the solver starts.
    """
    return solve_pulp(problem, solver, relax=relax, threads=threads, deadline=deadline,
                      start=start, log=msg, gap_abs=gap_abs, options=_HIGHS_OPTIONS,
                      stop_at=stop_at)


def _horizon_of(data: P3Data, built: P3Milp, value: float) -> int | None:
    """The largest makespan that an optimal schedule needs when one of value ``value``
    (MILP units) is known (P3M.W1); None when nothing smaller than the horizon follows.

    Latency: ``value``.  Weighted: ``(value - w_E · E_min) / w_L``.  Energy: with
    ``φ > 0``, the static energy left; and in any case, a schedule without idle time
    (every schedule can be compacted to one, which costs no more) lasts at most its
    runs and transfers, whose extra energy beyond the cheapest first computations
    ``E_min`` is at most ``value - E_min``.
    """
    wl, we = built.weights
    cheapest = sum(min(list(op.energy_pj.values()) + list(op.pinned_energy_pj.values()))
                   for op in data.ops)
    if data.objective is Objective.LATENCY:
        return int(value)
    if data.objective is Objective.WEIGHTED:
        return int((value - we * cheapest) // wl) if wl else None
    slack = int(value) - cheapest
    found = []
    if data.static_fj_per_cycle:
        found.append((1000 * slack + 999) // data.static_fj_per_cycle)
    ratios = [max(op.cycles.values()) / min(list(op.energy_pj.values())
                                             + list(op.pinned_energy_pj.values()) or [0])
              if min(list(op.energy_pj.values()) + list(op.pinned_energy_pj.values())) > 0
              else math.inf for op in data.ops if op.max_runs > 1]
    ratios += [r.cycles / r.energy_pj if r.energy_pj > 0 else math.inf
               for x in built.transfers for r in x.routes.values()]
    worst = max(ratios, default=0.0)
    if math.isfinite(worst):
        longest = sum(max(list(op.cycles.values()) + list(op.pinned_cycles.values()))
                      for op in data.ops)
        found.append(longest + math.floor(slack * worst + 1e-9))
    return min(found) if found else None


def solve_p3_milp(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    milp_solver: str = "highs",
    max_computes: int | None = DEFAULT_MAX_COMPUTES,
    max_transfers: int | None = DEFAULT_MAX_TRANSFERS,
    colocate: str = "none",
    allow_recompute: bool = True,
    allow_offload: bool = True,
    allow_pin: bool = True,
    export: str | Path | None = None,
    msg: bool = False,
    **options: Any,
) -> BackendResult:
    """Solve a P3 instance over the class P3.K3 with a disjunctive MILP (``formulations/p3_milp.md``).

    Parameters
    ----------
    instance
        A P3 instance (``make_instance(..., problem="P3")``); objective ``latency``,
        ``energy`` (with an optional ``runtime_limit_cycles``) or ``weighted``.
    time_limit
        Seconds for the whole run: model, LP relaxation, MILP (``None``: until proven).
    workers
        Solver threads (default: the machine's cores, at most 8).
    hint
        A timed schedule (or a Sequence) to warm-start from.  Default (option
        ``use_baseline_hint``, true): the best of the list schedules (memory-aware and
        store-all, layer and op allocation) that the evaluator accepts.  A hint is used
        only when it lies in P3.K3 as the model spells it and meets every row; it then
        also bounds the first horizon (P3M.S1).  Binding SRAMs are hard for the MILP
        without one: give the CP-SAT schedule as the hint to cross-check it.
    milp_solver
        ``"highs"`` (default, through ``highspy``) or ``"cbc"``.
    max_computes, max_transfers, colocate, allow_recompute, allow_offload, allow_pin
        The limits of P3.K3 (``p3_problem.md``): runs per op ``C``, transfers of an item
        into a memory ``T`` (``None``: the defaults), ``"layer"`` to put a layer's
        first computations on one core, and switches for recomputation, offload and
        pinning.
    export
        Also write the model to this ``.mps`` or ``.lp`` file (the full-horizon model).
    msg
        Print the solver's log (``log`` is accepted as well).
    **options
        ``recompute_after_first`` (default true, P3.K3's P3.L4): start a recomputation only after the
        previous run of its op has ended, the CP-SAT model's reading of P3.K1 (p3_milp.md
        §1; by default runs are only numbered by start, as the evaluator numbers them);
        ``use_baseline_hint`` (default true).

    Returns
    -------
    BackendResult
        ``optimal`` (proven, over P3.K3 and its limits), ``feasible`` (time limit, with
        the best bound), ``infeasible`` (proven; the message gives the reason when one
        is found without a solver) or ``unknown``.  ``objective`` is the evaluator's
        value of the schedule built from the solution; ``stats`` holds the model size,
        the LP relaxation's bound (``lp_bound``), the MILP's (``milp_bound``) and the
        timings.
    """
    deadline = Deadline(time_limit)  # everything below counts (time_limits.md)
    began = deadline.started
    msg = bool(options.pop("log", msg))
    use_baseline_hint = bool(options.pop("use_baseline_hint", True))
    after_first = bool(options.pop("recompute_after_first", True))
    if options.pop("fixed_order", False):
        raise MonetError("P3 has no fixed order of first computations", field="fixed_order",
                         fix="drop fixed_order (P3 models choose the order)")
    if options:
        raise MonetError(f"unknown option(s) {', '.join(sorted(options))} for the P3 MILP backend",
                         field="options", fix=f"use: {', '.join(_OPTIONS)}")
    solver_name = check_solver(milp_solver)
    data = p3_data(instance,
                   max_computes=DEFAULT_MAX_COMPUTES if max_computes is None else max_computes,
                   max_transfers=DEFAULT_MAX_TRANSFERS if max_transfers is None else max_transfers,
                   colocate=colocate, allow_recompute=allow_recompute, allow_offload=allow_offload,
                   allow_pin=allow_pin)
    stats: dict[str, Any] = {"model": "p3_milp", "milp_solver": solver_name, **data.options}
    limits = (f"class K3: max_computes={data.options['max_computes']}, "
              f"max_transfers={data.max_transfers}, colocate={data.colocate}")

    def done(status: Status, **kwargs: Any) -> BackendResult:
        stats["wall_s"] = round(time.perf_counter() - began, 3)
        return BackendResult(status, stats=stats, **kwargs)

    def infeasible(how: str) -> BackendResult:
        reason = data.min_capacity_proof() or (
            f"infeasible: {how}; no schedule meets the SRAM capacities"
            + (f" and the runtime limit of {data.runtime_limit_cycles} cycles"
               if data.runtime_limit_cycles is not None else "")
            + f" (every op fits from an SRAM of {data.min_sram_bytes()} bytes on)")
        return done(Status.INFEASIBLE, message=f"{reason} ({limits})")

    quick = data.min_capacity_proof()
    if quick:
        return done(Status.INFEASIBLE, message=f"{quick} ({limits})")
    threads = default_workers(workers)

    # Before the model: the schedules to fall back on if the time runs out while building
    # (the hint and the list schedules, each checked by the evaluator) and the
    # combinatorial bound, which holds for every schedule (time_limits.md).
    candidates = [("given", _timed(instance, hint))] if hint is not None else []
    if use_baseline_hint:  # also when the hint given does not fit the model
        candidates += [(s.meta.get("heuristic", "baseline"), s) for s in _baseline(instance)]
    floor = backend_floor(instance, deadline)
    bounds: list[float] = []
    lp_bound: float | None = None

    def fallback(reason: str) -> BackendResult:
        """The best schedule known when the solver has none: the best verified candidate."""
        stats["milp_bound"] = max(bounds) if bounds else None
        bound = _bound(data, max(bounds) if bounds else None, lp_bound, floor)
        known = best_verified(instance, candidates)
        if known is None:
            return done(Status.UNKNOWN, bound=bound,
                        message=f"{reason}; no schedule known ({limits})")
        source, schedule, value = known
        # A candidate may lie outside the model's class: it gets the floor over every
        # schedule, and the model's bound over its class stays in stats (BD.C1).
        stats.update(solution=source, class_bound=bound,
                     bound_class="every schedule (BD.C2: the floor; the candidate may lie outside K3)")
        return done(Status.FEASIBLE, schedule=schedule, objective=value, bound=floor,
                    source=f"hint:{source}",
                    message=f"{reason}; returning the {source} schedule ({limits})")

    # P3M.W1: a schedule of the model bounds the makespan of any better one, so each
    # better schedule found rebuilds the model with a shorter horizon (tighter big-Ms).
    try:
        built = P3Milp(data, recompute_after_first=after_first, deadline=deadline)
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return fallback(str(stop))
    stats["full_horizon"] = built.H
    stats["recompute_after_first"] = after_first
    if export is not None:
        stats["export"] = str(export_problem(built.problem, export))
    if built.contradiction:
        return infeasible(built.contradiction)
    best: Incumbent | None = None
    try:
        for source, candidate in candidates:
            if start_values(built, candidate) is not None:
                best = _incumbent(built, source)
                break
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return fallback(str(stop))
    stats["warm_start"] = None if best is None else best.source
    integral = all(float(w).is_integer() for w in built.weights)
    gap_abs = INTEGER_GAP if integral else 1e-9
    rounds = 0
    run: SolverRun | None = None
    stopped: OutOfTime | None = None
    while True:
        try:
            horizon = None if best is None else _horizon_of(data, built, best.milp)
            if horizon is not None and horizon < built.H:
                built = P3Milp(data, horizon=horizon, recompute_after_first=after_first,
                               deadline=deadline)
            start = start_values(built, best.schedule) if best is not None else None
            if rounds == 0:
                stats.update(built.size(), build_s=round(built.build_seconds, 3),
                             binding_memories=list(built.binding))
                lp = _solve(built.problem, solver_name, relax=True, threads=threads,
                            deadline=deadline, start=None, msg=msg, gap_abs=gap_abs)
                stats["lp_s"] = round(lp.seconds, 3)
                if lp.status == "optimal" and lp.objective is not None:  # (optimal: it has one)
                    lp_bound = lp.objective
                    scale = weighted_scale(data) if data.objective is Objective.WEIGHTED else 1
                    stats["lp_bound"] = lp_bound / scale  # in the objective's units
                elif lp.status == "infeasible" and start is None:
                    return infeasible(f"{solver_name} proved even the LP relaxation infeasible")
            current = built.H

            def better(value: float, current: int = current, built: P3Milp = built,
                       best: Incumbent | None = best) -> bool:
                """A solution that shortens the horizon (then the round may be restarted, P3M.S1)."""
                tighter = _horizon_of(data, built, value)
                return (best is None or value < best.milp - 0.5) and (
                    tighter is not None and tighter < current)

            run = _solve(built.problem, solver_name, relax=False, threads=threads,
                         deadline=deadline, start=start, msg=msg, gap_abs=gap_abs, stop_at=better)
        except OutOfTime as stop:  # a rebuild, a warm start or a solver start ran out of time
            stopped = stop
            break
        rounds += 1
        stats.setdefault("rounds", []).append(
            {"horizon": built.H, "status": run.status, "objective": run.objective,
             "bound": run.bound, "s": round(run.seconds, 3), "warm_start": start is not None})
        if run.bound is not None:
            bounds.append(run.bound)
        if run.status == "infeasible":
            if best is None:
                return infeasible(f"{solver_name} proved that no schedule of K3 exists")
            break  # cannot happen: the incumbent is in the model
        if run.status in ("optimal", "feasible"):
            found = _incumbent(built, "milp")
            if run.status == "optimal" and best is not None and found.milp > best.milp + 0.5:
                return done(Status.ERROR, schedule=best.schedule,
                            objective=best.value["objective"],
                            message=f"model bug: the MILP optimum {found.milp} is worse "
                                    f"than its warm start's {best.milp}")
            if best is None or found.milp <= best.milp:
                best = found
        if not (run.stopped and best is not None and deadline_left(deadline)):
            break
    finished = run if stopped is None else None  # the solver run the rounds ended with
    detail = str(stopped) if finished is None else finished.detail
    stats.update(milp_s=round(sum(r["s"] for r in stats.get("rounds", [])), 3),
                 solver_status=detail, milp_objective=None if best is None else best.milp,
                 milp_bound=max(bounds) if bounds else None)
    if stopped is not None:
        stats["stopped"] = str(stopped)
    bound = _bound(data, max(bounds) if bounds else None, lp_bound, floor)
    if best is None:  # no schedule in the model: the best candidate outside it, if any
        return fallback(detail if stopped is not None else f"no schedule found ({detail})")
    schedule, value = best.schedule, best.value
    source = "milp" if best.source == "milp" else f"hint:{best.source}"
    stats.update(solution=best.source, recomputations=value["recomputations"],
                 transfers=value["transfers"], pins=len(schedule.pinned),
                 latency_cycles=value["latency_cycles"], energy_pj=value["energy_pj"])
    if finished is not None and finished.status == "optimal":
        if finished.objective is not None and abs(best.milp - finished.objective) > 0.5:
            return done(Status.ERROR, schedule=schedule, objective=value["objective"], bound=bound,
                        message=f"model bug: the MILP optimum {finished.objective} differs from "
                                f"its schedule's {best.milp}")
        return done(Status.OPTIMAL, schedule=schedule, objective=value["objective"],
                    bound=value["objective"], message=f"optimal ({limits})", source=source)
    # Every incumbent is a solution of the model (a candidate only with its start values),
    # so the bound holds for it as proved, never capped (BD.C1).
    reason = f"{stopped}" if stopped is not None else "time limit"
    return done(Status.FEASIBLE, schedule=schedule, objective=value["objective"], bound=bound,
                message=f"{reason}; best schedule and bound returned ({limits})", source=source)


def deadline_left(deadline: Deadline) -> bool:
    return not deadline.passed(0.5)


def _timed(instance: Instance, schedule: Schedule | Sequence) -> Schedule:
    """A timed schedule (a Sequence is timed by the evaluator)."""
    if isinstance(schedule, Sequence):
        return evaluate(instance, schedule).schedule
    return schedule


@dataclass(frozen=True)
class Incumbent:
    """The best schedule so far: its value in the MILP's units, the schedule, the value the
    schedule assembly claims (objective, latency, energy, moves) and where it came from."""

    milp: float
    schedule: Schedule
    value: dict[str, Any]
    source: str


def _incumbent(built: P3Milp, source: str) -> Incumbent:
    """The schedule of the model's current values (a solver's, or a hint's), pruned, and its
    value in the MILP's units (w_L · latency + w_E · energy)."""
    schedule, value = built.schedule(built.prune(built.solution()),
                                     {"backend": "milp", "model": "p3_milp", "source": source})
    wl, we = built.weights
    return Incumbent(wl * value["latency_cycles"] + we * value["energy_pj"], schedule, value,
                     source)


def _bound(data: P3Data, milp: float | None, lp: float | None,
           floor: int | float | None = None) -> int | float | None:
    """The best bound on the instance's objective: the MILP's, the LP's (MILP units) and
    ``floor`` (the combinatorial bound, objective units)."""
    raw = [b for b in (milp, lp) if b is not None and math.isfinite(b)]
    found = []
    if raw:
        best = max(raw)
        if data.objective is Objective.WEIGHTED:
            found.append(best / weighted_scale(data) * (1 - 1e-12))
        else:
            found.append(bound_ceil(best))
    if floor is not None:
        found.append(floor)
    return max(found, default=None)
