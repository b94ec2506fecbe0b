"""``auto`` on P3: the CP-SAT model, then a descent and large-neighbourhood search from its best schedule.

``formulations/p3_cpsat.md``, "auto" (P3A.1-P3A.3).  On a small graph the whole model
gets the whole time: it proves optima there.  Above :data:`LNS_MIN_OPS` ops, under a
time limit, CP-SAT on the whole model gets :data:`CPSAT_SHARE` of the time; when it
proves nothing in that time, the descent over cores, pins and policies
(:func:`~monet_ilp.problems.p3.descent.descend`) gets :data:`DESCENT_SHARE` of the rest,
and the LNS (:func:`~monet_ilp.problems.p3.lns.solve_p3_lns`) starts from the better
schedule and spends what is left.  Both search class P3.K3 (the LNS narrows domains of
the same model; the descent counts the runs and transfers the decoder may add beyond
it), so CP-SAT's bound over that class holds for what they return; a descent's schedule
that the LNS's check finds outside the class (P3L.N0) gets the bound over every schedule.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import Deadline
from monet_ilp.evaluate import verified
from monet_ilp.problems.p3.cpsat import solve_p3_cpsat
from monet_ilp.problems.p3.data import baseline_schedules
from monet_ilp.problems.p3.descent import descend
from monet_ilp.problems.p3.lns import solve_p3_lns
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Schedule

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Sequence

__all__ = ["CPSAT_SHARE", "DESCENT_AT_MOST", "DESCENT_SHARE", "LNS_MIN_OPS", "solve_p3_auto"]

#: Up to this many ops the whole model gets the whole time (P3A.1).
LNS_MIN_OPS = 40
#: Above it, the share of the time the whole model gets before the LNS takes over (P3A.2).
CPSAT_SHARE = 0.5
#: P3A.3: the share of the time left after CP-SAT (at most this many seconds) for the
#: descent over cores, pins and policies (``descent.py``) before the LNS.
DESCENT_SHARE = 0.1
DESCENT_AT_MOST = 15.0
#: Options that keep the LNS's class the one CP-SAT searched (the others narrow CP-SAT's
#: class, which the LNS does not take: with them, CP-SAT runs alone).
_SAME_CLASS = frozenset({"max_computes", "max_transfers", "use_baseline_hint", "params", "seed", "log"})


def solve_p3_auto(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    **options: Any,
) -> BackendResult:
    """CP-SAT on the whole P3 model, then the LNS from its best schedule (module docstring).

    Parameters
    ----------
    instance
        A P3 instance (latency, energy or weighted).
    time_limit
        Seconds for both phases (``None``: CP-SAT alone, until proven).
    workers, hint
        As for the ``cpsat`` backend; the LNS takes the same workers.
    options
        The ``cpsat`` backend's options.  ``max_computes``, ``max_transfers``, ``seed``
        and ``log`` reach the LNS too; a restriction of the class (``colocate``,
        ``allow_*``) makes CP-SAT run alone.

    Returns
    -------
    BackendResult
        CP-SAT's result when it proves its answer, runs alone, or has no schedule;
        otherwise the LNS's schedule (never worse than CP-SAT's, its start) with the
        better of CP-SAT's bound and the LNS's combinatorial one.  ``stats["members"]``
        gives each phase's status, objective, bound and seconds.
    """
    deadline = Deadline(time_limit)
    lns_too = (deadline.limited and len(instance.graph.ops) > LNS_MIN_OPS
               and set(options) <= _SAME_CLASS)
    left = deadline.left()
    first = solve_p3_cpsat(instance, time_limit=None if left is None else left * (CPSAT_SHARE if lns_too else 1.0),
                           workers=workers, hint=hint, **options)
    members: dict[str, Any] = {"cpsat": _summary(first, deadline, "cpsat")}
    first = replace(first, stats={**first.stats, "members": dict(members)}, source=first.source or "cpsat")
    if (not lns_too or first.status in (Status.OPTIMAL, Status.INFEASIBLE, Status.ERROR)
            or first.schedule is None or deadline.passed(margin=1.0)):
        return first
    same = {k: v for k, v in options.items() if k in ("max_computes", "max_transfers", "seed", "log")}
    start = first.schedule
    if isinstance(start, Schedule):  # P3A.3: the descent over cores, pins and policies
        baselines = [schedule for ok, _, schedule in baseline_schedules(instance) if ok][:2]
        found = descend(instance, [start, *baselines],
                        deadline=deadline.sub(DESCENT_SHARE, at_most=DESCENT_AT_MOST),
                        seed=options.get("seed", 0), max_computes=options.get("max_computes"),
                        max_transfers=options.get("max_transfers"))
        members["descent"] = {"objective": None if found is None else found.value,
                              "seconds": round(deadline.elapsed(), 3),
                              "moves": None if found is None else f"{found.taken} of {found.tried}"}
        if found is not None and first.objective is not None and found.value < first.objective:
            start = found.schedule
    second = solve_p3_lns(instance, time_limit=deadline.left(), workers=workers, hint=start, **same)
    members["lns"] = _summary(second, deadline, "lns")
    bound = max((b for b in (first.bound, second.bound) if b is not None), default=None)
    stats = {**first.stats, "members": members, "lns_steps": second.stats.get("steps"),
             "lns_improving_steps": second.stats.get("improving_steps")}
    metrics = verified(instance, second.schedule) if second.objective is not None else None
    schedule: Schedule | Sequence | None
    if metrics is None or first.objective is None or metrics.objective_value >= first.objective:
        schedule, objective, source = first.schedule, first.objective, first.source
        message = f"{first.message}; the LNS found nothing better"
    else:
        schedule, objective, source = second.schedule, metrics.objective_value, "lns"
        message = (f"CP-SAT {first.objective} in {members['cpsat']['seconds']} s, then the LNS {objective} "
                   f"({second.stats.get('improving_steps')} improving steps of {second.stats.get('steps')})")
        if second.source != "lns":  # the LNS's start: the descent's schedule
            source = "descent"
            message = (f"CP-SAT {first.objective} in {members['cpsat']['seconds']} s, then the descent "
                       f"{objective}; the LNS found nothing better")
            if second.stats.get("check_status") not in ("OPTIMAL", "FEASIBLE"):
                # Outside the model's class (P3L.N0): CP-SAT's bound for that class does not hold.
                bound = second.bound
                stats["bound_class"] = "every schedule (the descent's schedule is outside class P3.K3)"
    proven = bound is not None and objective is not None and objective <= bound
    return BackendResult(Status.OPTIMAL if proven else Status.FEASIBLE, schedule, objective,
                         objective if proven else bound, message, stats, source=source)


def _summary(result: BackendResult, deadline: Deadline, name: str) -> dict[str, Any]:
    return {"status": str(result.status), "objective": result.objective, "bound": result.bound,
            "seconds": round(deadline.elapsed(), 3), "source": result.source or name}
