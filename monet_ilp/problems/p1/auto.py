"""``auto``: the P1 portfolio, and the default backend (``formulations/p1_portfolio.md``).

It runs, within one time limit and one thread budget:

1. the feasible-first heuristics (:func:`monet_ilp.heuristics.evict.evict_sequence`,
   Chen's greedy, store-all, and the caller's hint): the best one the evaluator accepts
   is the incumbent every member starts from (PF.S1);
2. the exact members chosen by the size of the stage model (PF.S2): ``milp`` and
   ``cpsat`` side by side on small models; ``milp`` and ``lns`` (the interval model's
   large-neighbourhood search) on medium ones; ``lns`` alone on large ones, where the
   stage model does not fit in memory or time;
3. beside them, the bound that holds for every P1 schedule
   (:func:`monet_ilp.problems.p1.relax.all_schedules_bound`, PF.B2), whose relaxation's
   solution is read as a plan and checked by the evaluator (PF.S4, BD.R7): at the
   relaxation's proven optimum it is optimal over every P1 schedule.

The first member that proves its answer, or the relaxation's schedule at its proven
optimum, cancels the others (their solvers stop at once,
:meth:`~monet_ilp.engines.deadline.Deadline.cancel`).  The result is the best
schedule the evaluator accepts, with the best bound that holds for every class of
schedules searched (PF.B1), and in ``stats`` the bound over every P1 schedule and the
gap to it (PF.B2).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import Deadline
from monet_ilp.evaluate import verified
from monet_ilp.problems.p1.cpsat import solve_cpsat
from monet_ilp.problems.p1.data import check_p1, p1_data
from monet_ilp.problems.p1.lns import Offers, solve_lns
from monet_ilp.problems.p1.milp import solve_milp
from monet_ilp.problems.p1.milp.solve import with_least_budget
from monet_ilp.problems.p1.prune import pruned_starts
from monet_ilp.problems.p1.relax import (
    HOLDS_FOR,
    P1Bound,
    all_schedules_bound,
    cut_bound,
    in_p1_class,
)
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Sequence

if TYPE_CHECKING:
    from monet_ilp.heuristics.starts import Starts
    from monet_ilp.instance import Instance
    from monet_ilp.problems.p1.data import P1Data
    from monet_ilp.schedule import Schedule

__all__ = ["CPSAT_STAGGER", "LARGE_CELLS", "SMALL_CELLS", "STAGE_CLASS", "Member", "members_for", "solve_auto",
           "stage_cells"]

#: Up to this many stage cells (PF.S2), ``milp`` and ``cpsat`` run side by side.
SMALL_CELLS = 8_000
#: Up to this many, ``milp`` and ``lns``; above it, ``lns`` alone, and the all-schedules
#: bound gets the MILP's thread: there the stage MILP does not leave its start within a
#: solve's limit (random DAG n = 250, 62 500 cells, 180 s: 17,811 at 0.8 and 13,421 at 0.9,
#: its PF.S1 starts, against the LNS's 16,768 and 13,393), and its O(n^2) grid soon no
#: longer builds in the time and memory a solve has.
LARGE_CELLS = 40_000
#: The class the stage members are exact over (``p1_milp.md`` P1M.A1).
STAGE_CLASS = "Checkmate's stage form (first computations in order, one index-ordered pass per stage)"
#: The class the LNS searches (``p1_interval.md``).
INTERVAL_CLASS = ("sequences with at most {} computations per op (more for an op its start computes more "
                  "often), first computations in order")
#: What every-op-once holds for (PF.B3): any schedule the evaluator accepts.
EVERY_SCHEDULE = "every schedule the evaluator accepts (every op computed at least once)"
#: Share of the time limit PF.S1 may take before Chen's greedy is cut short.
HEURISTICS_SHARE = 0.1
#: Seconds ``cpsat`` waits before it starts beside ``milp`` (PF.S3): the MILP proves most
#: small models within a second, and two model builds at once slow each other.
CPSAT_STAGGER = 0.5
#: Share of the time the all-schedules bound may take when it runs beside the members
#: (all of it when they leave it a thread of its own).
BOUND_SHARE = 0.5
#: Once the members are done, the bound runs on for at most this share of the time so
#: far, and at least :data:`BOUND_GRACE_S` seconds, before it stops with what it has.
BOUND_GRACE = 0.25
BOUND_GRACE_S = 1.0


@dataclass(frozen=True)
class Member:
    """One exact member of the portfolio: its backend, the class it searches, its threads."""

    name: str
    run: Callable[..., BackendResult]
    schedule_class: str
    threads: int
    options: dict[str, Any]


def stage_cells(data: P1Data) -> int:
    """The size of the stage model (PF.S2): open (stage, op) cells, computations and retentions.

    ``R`` and ``S`` of ``p1_milp.md`` have about this many columns; ``FREE`` and ``U``
    grow with it.  Counted from the domains in O(n).
    """
    compute = sum(max(0, hi - lo + 1) for lo, hi in data.compute_stages)
    retain = sum(max(0, hi - lo + 1) for lo, hi in data.retain_stages)
    return compute + retain


def members_for(cells: int, workers: int, *, max_computes: int | None, seed: int,
                members: tuple[str, ...] | None = None, beside: int = 0) -> list[Member]:
    """The exact members for a stage model of ``cells`` cells and ``workers`` threads (PF.S2).

    ``members`` names them explicitly (``milp``, ``cpsat``, ``lns``) instead.  ``beside``
    threads are busy with something else (the all-schedules bound, PF.B2): the CP-SAT
    members share what the MILP and it leave, at least one thread each.
    """
    if members is None:
        members = (("milp", "cpsat") if cells <= SMALL_CELLS
                   else ("milp", "lns") if cells <= LARGE_CELLS else ("lns",))
    unknown = sorted(set(members) - {"milp", "cpsat", "lns"})
    if unknown:
        raise ValueError(f"unknown portfolio members {unknown}: use milp, cpsat, lns")
    # HiGHS gains little from threads: one for it, the rest for the CP-SAT members.
    cp_members = [m for m in members if m != "milp"]
    cp_threads = max(1, (workers - ("milp" in members) - beside) // max(1, len(cp_members)))
    out: list[Member] = []
    for name in members:
        if name == "milp":
            out.append(Member("milp", solve_milp, STAGE_CLASS, 1,
                              {"max_computes": max_computes, "lp_bound": cells <= SMALL_CELLS}))
        elif name == "cpsat":
            out.append(Member("cpsat", solve_cpsat, STAGE_CLASS, cp_threads,
                              {"max_computes": max_computes, "seed": seed, "use_baseline_hint": False}))
        else:
            out.append(Member("lns", solve_lns, INTERVAL_CLASS.format(max_computes or 2), cp_threads,
                              {"max_computes": max_computes or 2, "seed": seed}))
    return out


def solve_auto(instance: Instance, *, time_limit: float | None = None, workers: int | None = None,
               hint: Schedule | Sequence | None = None, max_computes: int | None = None,
               members: tuple[str, ...] | list[str] | None = None, all_bound: bool = True,
               seed: int = 0, log: bool = False) -> BackendResult:
    """Solve a P1 instance with the portfolio (``formulations/p1_portfolio.md``).

    Parameters
    ----------
    instance
        A P1 instance.
    time_limit
        Seconds for everything (heuristics, members, bound).  Without one, the members
        run until one of them proves its answer.
    workers
        Threads in all (default 2): one for the MILP, the rest shared by the CP-SAT members.
    hint
        A schedule to start from (competes with the heuristics for the incumbent).
    max_computes
        Computations per op, for every member (default: unlimited for ``milp``/``cpsat``,
        2 for ``lns``, whose class needs a limit).
    members
        Run these members instead of the ones chosen by size: ``milp``, ``cpsat``, ``lns``.
    all_bound
        Compute the bound over every P1 schedule (PF.B2) beside the members.
    seed
        The CP-SAT members' seed.
    log
        Print each member's solver log.

    Returns
    -------
    BackendResult
        ``OPTIMAL`` when a member proves the optimum of its class and no schedule of
        another class beats it; ``FEASIBLE`` with the best bound over the classes
        searched (PF.B1); ``INFEASIBLE`` when a stage member proves it and no heuristic
        found a schedule; ``UNKNOWN`` without a schedule.  ``stats``: the incumbent
        and where it came from, each member's outcome, ``bound_class``, ``bound_all``
        (with what it holds for) and ``gap_all``.
    """
    check_p1(instance, "auto")
    deadline = Deadline(time_limit)
    threads = max(1, int(workers) if workers else 2)
    data = p1_data(instance, max_computes=max_computes)
    cells = stage_cells(data)
    stats: dict[str, Any] = {"stage_cells": cells, "workers": threads}
    every_op_once = sum(data.cost)

    # PF.S0: BD.B8 first (one linear pass): a first computation whose mandatory values
    # cannot fit proves at once that no P1 schedule exists.  A caller's hint may free a
    # node's outputs apart (PF.B3), outside what BD.B8 covers: not then.
    if hint is None:
        cut = cut_bound(data, deadline)
        if cut.infeasible:
            stats.update(infeasible_by="BD.B8", bound_all_holds_for=HOLDS_FOR)
            message = f"no P1 schedule exists (BD.B8, before any model): {cut.infeasible}"
            # The least budget by CP-SAT's stage model where it builds quickly; above, the
            # dedicated command (the interval model's descent) says it.
            message = (with_least_budget(instance, message, deadline) if cells <= SMALL_CELLS
                       else f"{message}; `monet-ilp min-budget` finds the least budget")
            return BackendResult(Status.INFEASIBLE, stats=stats, message=message)

    # PF.S1: the incumbent every member starts from.
    began = time.perf_counter()
    # Chen's greedy searches its threshold for seconds on large graphs: a tenth of the time.
    # The repair's sequences lose the recomputations the budget does not need (P1I.L0).
    starts = pruned_starts(instance, deadline=deadline.sub(HEURISTICS_SHARE))
    incumbent = _incumbent(instance, hint, starts, stats)
    stats["heuristics_s"] = round(time.perf_counter() - began, 3)

    if incumbent is not None and incumbent[2] == every_op_once:
        # Every op once, no recomputation: a bound for every P1 schedule is met.
        stats.update(bound_all=every_op_once, bound_class=HOLDS_FOR, gap_all=0.0,
                     bound_all_holds_for=HOLDS_FOR, bound_all_method="every-op-once")
        return BackendResult(Status.OPTIMAL, incumbent[1], every_op_once, every_op_once,
                             f"optimal: {incumbent[0]} computes every op once (no recomputation)",
                             stats, source=incumbent[0])
    # PF.S2: with no start within the budget the members get the bound's thread too (the
    # descent, P1I.L5, lowers a peak in fewer steps with two workers).
    chosen = members_for(cells, threads, max_computes=max_computes, seed=seed,
                         members=None if members is None else tuple(members),
                         beside=int(all_bound and incumbent is not None))
    stats["members"] = {m.name: {"threads": m.threads, "class": m.schedule_class} for m in chosen}
    # PF.B2 beside the members; all of their time when they leave it a thread of its own.
    bound_share = 1.0 if sum(m.threads for m in chosen) < threads else BOUND_SHARE
    results, bound_all, relaxed = _run_members(instance, chosen, incumbent, starts, deadline, log, stats,
                                               bound_task=all_bound, bound_share=bound_share)

    # The best schedule any member or heuristic has, checked by the evaluator (the
    # members' in the order of what they claim, until one passes).
    # Each candidate with the bound that holds for it (PF.B1-B3): a member's schedule lies
    # in its class, a heuristic's or the relaxation's in PF.B2's; a caller's hint only
    # where its first computations keep the graph's order and it frees each node's outputs
    # together (in_p1_class).
    candidates: list[tuple[int, str, Schedule | Sequence, str]] = []
    if incumbent is not None:
        name, start, value = incumbent
        kind = ("heuristic" if name != "hint" or (isinstance(start, Sequence)
                                                  and in_p1_class(instance.graph, start))
                else "hint")
        candidates.append((value, name, start, kind))
    claimed = sorted(((r.objective, n, r) for n, r in results.items()
                      if r.schedule is not None and r.objective is not None), key=lambda c: c[0])
    for _, member, result in claimed:
        if incumbent is not None and result.objective is not None and result.objective >= incumbent[2]:
            break
        metrics = verified(instance, result.schedule)
        if metrics is not None and result.schedule is not None:
            candidates.append((int(metrics.objective_value), result.source or member, result.schedule,
                               "member"))
            break
    if relaxed is not None:
        candidates.append((relaxed[0], "relaxation", relaxed[1], "heuristic"))
    all_value = max(every_op_once, bound_all.value if bound_all is not None else every_op_once)
    stats["bound_all"] = all_value
    stats["bound_all_holds_for"] = (bound_all.holds_for if bound_all is not None else
                                    "every P1 schedule (every op computed at least once)")
    stats["bound_all_method"] = bound_all.method if bound_all is not None else "every-op-once"

    infeasible = [r for r in results.values() if r.status is Status.INFEASIBLE]
    if not candidates:
        if infeasible:
            first = infeasible[0]
            return BackendResult(Status.INFEASIBLE, message=first.message, stats=stats)
        return BackendResult(Status.UNKNOWN, bound=all_value, stats=stats,
                             message="no schedule found within the time limit")

    objective, source, schedule, kind = min(candidates, key=lambda c: c[0])
    relaxation_proof = bound_all is not None and bound_all.solver_optimum == objective
    if relaxation_proof:
        # PF.S4: the relaxation's optimum, as HiGHS proved it, meets a P1 schedule.
        all_value = stats["bound_all"] = objective
    # The bound of the class the schedule lies in, as proved: one above the schedule's
    # cost is a wrong bound, for solve() to report (BD.C1), never replaced by a weaker one.
    if kind == "member":
        # PF.B1: the union of the members' classes holds the members' schedules.
        bound, bound_class = _class_bound(chosen, results, all_value, stats)
    elif kind == "heuristic":
        # PF.B3: the heuristics free a node's outputs together: PF.B2's class holds them.
        stats["bound_union"] = _class_bound(chosen, results, all_value, stats)[0]
        bound, bound_class = all_value, stats["bound_all_holds_for"]
    else:
        # PF.B3: a caller's hint that frees the outputs of one op apart lies outside
        # PF.B2's class: only every-op-once holds for it, and nothing is proven beyond it.
        stats["bound_union"] = _class_bound(chosen, results, all_value, stats)[0]
        bound, bound_class = every_op_once, EVERY_SCHEDULE
        all_value = every_op_once
        stats.update(bound_all=every_op_once, bound_all_holds_for=EVERY_SCHEDULE,
                     bound_all_method="every-op-once", bound_all_beaten_by=source)
    provers = [n for n, r in results.items() if r.status is Status.OPTIMAL and r.objective == objective]
    if provers and bound < objective:
        # PF.B1: a member proved this schedule optimal over its own class and nothing
        # cheaper was found elsewhere: optimal over that class, as the member alone says;
        # the union's bound stays in stats.
        stats["bound_union"] = bound
        bound, bound_class = objective, next(m.schedule_class for m in chosen if m.name == provers[0])
    stats["bound_class"] = bound_class
    stats["gap_all"] = _gap(objective, all_value)
    proven = bound >= objective
    if proven:
        how = (f"{' and '.join(provers)} proved it" if provers else
               "HiGHS proved the boundary relaxation's optimum, and it meets the schedule (BD.R7)"
               if relaxation_proof else "the bound meets the schedule")
        message = f"optimal over {bound_class} ({how})"
    else:
        limited = [n for n, r in results.items() if r.status not in (Status.OPTIMAL, Status.INFEASIBLE)]
        why = (f"time limit reached ({', '.join(limited)})" if limited
               else "every member proved its class, and a schedule from outside their classes is cheaper")
        message = (f"{why}; best schedule from {source}, bound over {bound_class} "
                   f"(gap {_gap(objective, bound):.2%}; over every P1 schedule {stats['gap_all']:.2%})")
    return BackendResult(Status.OPTIMAL if proven else Status.FEASIBLE, schedule, objective, bound,
                         message, stats, source=source)


def _incumbent(instance: Instance, hint: Schedule | Sequence | None, starts: Starts,
               stats: dict[str, Any]) -> tuple[str, Schedule | Sequence, int] | None:
    """PF.S1: the cheapest of the hint and the feasible-first heuristics the evaluator accepts."""
    candidates: list[tuple[str, Schedule | Sequence | None]] = [("hint", hint), *starts]
    found: dict[str, int | None] = {}
    best: tuple[str, Schedule | Sequence, int] | None = None
    for name, schedule in candidates:
        metrics = verified(instance, schedule)
        if name != "hint" or schedule is not None:
            found[name] = None if metrics is None else int(metrics.objective_value)
        if metrics is not None and schedule is not None and (best is None or metrics.objective_value < best[2]):
            best = (name if name == "hint" else f"heuristic:{name}", schedule, int(metrics.objective_value))
    stats["heuristics"] = found
    stats["incumbent"] = None if best is None else {"source": best[0], "objective": best[2]}
    return best


def _run_members(instance: Instance, chosen: list[Member],
                 incumbent: tuple[str, Schedule | Sequence, int] | None, starts: Starts,
                 deadline: Deadline, log: bool, stats: dict[str, Any], *, bound_task: bool,
                 bound_share: float = BOUND_SHARE
                 ) -> tuple[dict[str, BackendResult], P1Bound | None, tuple[int, Sequence] | None]:
    """Run the members side by side; the first proof cancels the rest (PF.S3).

    Beside them, the all-schedules bound (PF.B2); the schedule read from its relaxation
    (BD.R7), when the evaluator accepts it, comes back with its cost, and cancels the
    members when it meets the relaxation's proven optimum (PF.S4).
    """
    left = deadline.left()
    shared = Deadline(left)  # the members' own: cancelling it leaves the portfolio's alone
    hint = None if incumbent is None else incumbent[1]
    results: dict[str, BackendResult] = {}
    bound: list[P1Bound] = []
    lock = threading.Lock()

    staggered = "milp" in {m.name for m in chosen}
    # PF.S5: the relaxation's plan goes to the lns member while it runs.
    offers = Offers() if "lns" in {m.name for m in chosen} else None

    def run(member: Member) -> BackendResult:
        if member.name == "cpsat" and staggered and shared.wait(CPSAT_STAGGER):
            with lock:
                stats["members"][member.name].update(status="not started", seconds=0.0)
            return BackendResult(Status.UNKNOWN, message="not started: the portfolio had its answer "
                                                         f"within the {CPSAT_STAGGER} s stagger (PF.S3)")
        began = time.perf_counter()
        # milp and lns would make the feasible-first starts again: they get PF.S1's.
        made: dict[str, Any] = {"_starts": starts} if member.name in ("milp", "lns") else {}
        if member.name == "lns":
            made["_offers"] = offers
        result = member.run(instance, time_limit=shared.left(), workers=member.threads, hint=hint,
                            log=log, _deadline=shared, **made,
                            **{k: v for k, v in member.options.items() if v is not None})
        with lock:
            stats["members"][member.name].update(
                status=str(result.status), objective=result.objective, bound=result.bound,
                seconds=round(time.perf_counter() - began, 3), source=result.source or member.name)
            # PF.S5: what became of the relaxation's plans; P1I.L7: what the annealing did;
            # the LNS's steps
            for key in ("offers", "anneal", "steps", "improving_steps"):
                if key in result.stats:
                    stats["members"][member.name][key] = result.stats[key]
        return result

    relaxed: list[tuple[int, Sequence]] = []
    bound_deadline = Deadline(shared.solver_limit(bound_share))

    def run_bound() -> None:
        began = time.perf_counter()
        # PF.S5: each incumbent of the relaxation's MILP, over the budget or not, goes to
        # the lns member, which may bring it down and improve it.
        found = all_schedules_bound(instance, deadline=bound_deadline, workers=1,
                                    on_plan=None if offers is None else partial(offers.put, "relaxation"))
        bound.append(found)
        metrics = verified(instance, found.schedule)
        proof = metrics is not None and found.solver_optimum == int(metrics.objective_value)
        with lock:
            stats["bound_all_s"] = round(time.perf_counter() - began, 3)
            stats["relaxation_schedule"] = None if metrics is None else int(metrics.objective_value)
            if metrics is None or found.schedule is None:
                return
            relaxed.append((int(metrics.objective_value), found.schedule))
            if proof and not shared.cancelled:
                stats["cancelled_by"] = "relaxation"
                shared.cancel()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(chosen) + 1, thread_name_prefix="auto") as pool:
        futures: dict[Future[BackendResult], Member] = {pool.submit(run, m): m for m in chosen}
        extra = pool.submit(run_bound) if bound_task else None
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                member = futures[future]
                result = future.result()
                results[member.name] = result
                if result.status in (Status.OPTIMAL, Status.INFEASIBLE) and pending:
                    with lock:
                        if not shared.cancelled:
                            stats["cancelled_by"] = member.name
                            shared.cancel()
        if extra is not None:
            # A member's proof leaves the bound a grace (it gives gap_all), then stops it
            # with what it has.
            grace = max(BOUND_GRACE_S, BOUND_GRACE * (time.perf_counter() - started))
            if wait([extra], timeout=grace).not_done:
                bound_deadline.cancel()
            extra.result()
    return results, (bound[0] if bound else None), (relaxed[0] if relaxed else None)


def _class_bound(chosen: list[Member], results: dict[str, BackendResult], all_value: int,
                 stats: dict[str, Any]) -> tuple[int, str]:
    """PF.B1: the bound over the union of the classes searched.

    Members of one class share it, so the class's bound is the best of theirs; the union's
    optimum is the least of the classes' optima, so its bound is the least of the classes'
    bounds; the bound over every schedule holds for the union as well.
    """
    by_class: dict[str, int] = {}
    for member in chosen:
        result = results.get(member.name)
        value = all_value
        if result is not None and result.bound is not None and math.isfinite(result.bound):
            value = max(value, math.ceil(result.bound - 1e-9))
        by_class[member.schedule_class] = max(by_class.get(member.schedule_class, all_value), value)
    stats["bound_by_class"] = dict(by_class)
    if not by_class:
        return all_value, stats["bound_all_holds_for"]
    least = min(by_class.values())
    classes = [c for c, v in by_class.items() if v == least] if len(by_class) > 1 else list(by_class)
    if least <= all_value:
        return all_value, stats["bound_all_holds_for"]
    text = classes[0] if len(by_class) == 1 else " and ".join(sorted(by_class))
    return least, text


def _gap(objective: float, bound: float) -> float:
    """The relative gap for the message, as it is (a negative one is solve()'s to report)."""
    return (objective - bound) / max(abs(objective), 1e-12)
