"""``auto`` on P3: a descent, the CP-SAT model hinted with its schedule, then large-neighbourhood search.

``formulations/p3_cpsat.md``, "auto" (P3A.1-P3A.5).  On a small graph the whole model
gets the whole time: it proves optima there.  Above :data:`LNS_MIN_OPS` ops, under a
time limit, the descent over cores, pins and policies
(:func:`~monet_ilp.problems.p3.descent.descend`) first gets :data:`DESCENT_SHARE` of the
time from the list-scheduling baselines (and the caller's hint), while HiGHS computes the
bound over every schedule on a thread beside it (:data:`FLOOR_SHARE`); CP-SAT on the whole
model, hinted with the descent's schedule, gets :data:`CPSAT_SHARE` of the rest; when it
proves nothing, the LNS (:func:`~monet_ilp.problems.p3.lns.solve_p3_lns`) starts from the
better of the two schedules and spends what is left, less the time to retime the best
schedule at the end.  On energy the descent gets :data:`ENERGY_DESCENT_SHARE` and CP-SAT
all the rest (no LNS).  The descent and the LNS search
class P3.K3 (the LNS narrows domains of the same model; the descent counts the runs and
transfers the decoder may add beyond it), so CP-SAT's bound over that class holds for
what they return; a descent's schedule that the LNS's check finds outside the class
(P3L.N0) gets the bound over every schedule.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import Deadline
from monet_ilp.engines.highs import python_beside_highs
from monet_ilp.evaluate import verified
from monet_ilp.problems.p3.bounds import combinatorial_bound
from monet_ilp.problems.p3.cpsat import SMALL_OPS, solve_p3_cpsat
from monet_ilp.problems.p3.data import baseline_schedules
from monet_ilp.problems.p3.descent import descend
from monet_ilp.problems.p3.lns import retime, solve_p3_lns
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Schedule

if TYPE_CHECKING:
    from collections.abc import Callable

    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Sequence

__all__ = ["CPSAT_SHARE", "DESCENT_AT_MOST", "DESCENT_SHARE", "ENERGY_DESCENT_SHARE", "FLOOR_AT_MOST", "FLOOR_SHARE", "LNS_MIN_OPS",
           "solve_p3_auto"]

#: Up to this many ops the whole model gets the whole time (P3A.1), with the search CP-SAT
#: proves small graphs with (``cpsat.SMALL_PARAMS``).
LNS_MIN_OPS = SMALL_OPS
#: P3A.2: above it, the share of the time (at most this many seconds) for the descent over
#: cores, pins and policies (``descent.py``) before CP-SAT.
DESCENT_SHARE = 0.1
DESCENT_AT_MOST = 15.0
#: P3A.2, P3A.5: the share of the time left that the retiming of the descent's schedule,
#: and that of the best schedule at the end, may take.
RETIME_SHARE = 0.05
#: P3A.2: the share of the time (at most this many seconds) for the floor over every
#: schedule (``bounds.backend_floor``'s bounds, BD.B12 on latency, BD.E on energy), on a
#: thread beside the descent.
FLOOR_SHARE = 0.2
FLOOR_AT_MOST = 30.0
#: P3A.3: the share of the time left after the descent that the whole model gets before
#: the LNS takes over.
CPSAT_SHARE = 0.5
#: P3A.2-P3A.3 on energy: the descent's share (at most DESCENT_AT_MOST), and CP-SAT takes
#: all the time left (no LNS): there the LNS's steps rarely improve on CP-SAT, and the
#: descent, whose decoder sends data between cores over the NoC, is the better search.
ENERGY_DESCENT_SHARE = 0.5
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
    """The descent, CP-SAT on the whole P3 model, then the LNS from the better schedule (module docstring).

    Parameters
    ----------
    instance
        A P3 instance (latency, energy or weighted).
    time_limit
        Seconds for every phase (``None``: CP-SAT alone, until proven).
    workers, hint
        As for the ``cpsat`` backend; the LNS takes the same workers.  A schedule given
        as ``hint`` is one of the descent's starts; CP-SAT is hinted with the descent's.
    options
        The ``cpsat`` backend's options.  ``max_computes``, ``max_transfers``, ``seed``
        and ``log`` reach the descent and the LNS too; a restriction of the class
        (``colocate``, ``allow_*``) makes CP-SAT run alone.

    Returns
    -------
    BackendResult
        CP-SAT's result when it proves its answer or runs alone; otherwise the cheapest
        of CP-SAT's, the descent's and the LNS's schedules (the LNS starts from the better
        of the first two, so it is never worse) with the better of CP-SAT's bound and
        the LNS's combinatorial one.  ``stats["members"]`` gives each phase's status,
        objective, bound and seconds, and the floor's value and seconds.
    """
    deadline = Deadline(time_limit)
    lns_too = (deadline.limited and len(instance.graph.ops) > LNS_MIN_OPS
               and set(options) <= _SAME_CLASS)
    energy = instance.objective == "energy"
    members: dict[str, Any] = {}
    found = None
    floor = None
    # P3L.T1 in the class the other phases search.
    retimed = partial(retime, instance, workers=workers, seed=options.get("seed", 0),
                      max_computes=options.get("max_computes"), max_transfers=options.get("max_transfers"))
    if lns_too:
        # P3A.2: the bound over every schedule, once, for CP-SAT's result and the LNS's:
        # HiGHS on a thread of its own while the descent (Python, one core) runs.
        with ThreadPoolExecutor(max_workers=1) as pool:
            floor_job = pool.submit(_timed, combinatorial_bound, instance,
                                    relaxation_limit=deadline.solver_limit(FLOOR_SHARE, at_most=FLOOR_AT_MOST))
            # P3A.2: the descent over cores, pins and policies, from the hint and the baselines.
            starts = [hint] if isinstance(hint, Schedule) else []
            starts += [schedule for ok, _, schedule in baseline_schedules(instance) if ok][:2]
            with python_beside_highs:  # the floor's HiGHS callbacks get the interpreter in time
                share = ENERGY_DESCENT_SHARE if energy else DESCENT_SHARE
                found = descend(instance, starts, deadline=deadline.sub(share, at_most=DESCENT_AT_MOST),
                                seed=options.get("seed", 0), max_computes=options.get("max_computes"),
                                max_transfers=options.get("max_transfers"))
            members["descent"] = {"objective": None if found is None else found.value,
                                  "moves": None if found is None else f"{found.taken} of {found.tried}",
                                  "annealed": None if found is None else found.annealed,
                                  "seconds": round(deadline.elapsed(), 3)}
            if found is not None:
                # P3A.2: retimed in the model (P3L.T1), a complete hint for CP-SAT.
                timed = retimed(found.schedule, time_limit=RETIME_SHARE * (deadline.left() or 0.0))
                members["descent"]["retimed"] = None if timed is None else timed[1]
                if timed is not None:
                    hint = timed[0]
                    if timed[1] < found.value:
                        found = replace(found, schedule=timed[0], value=timed[1])
                elif energy:
                    # Not retimed (its decisions have no timing in the model), the descent's
                    # schedule is still the better hint on energy, where CP-SAT repairs it
                    # (on latency it found nothing from such a hint, P3A.2).
                    hint = found.schedule
            members["descent"]["ended_at"] = round(deadline.elapsed(), 3)
            floor, seconds = floor_job.result()
        members["floor"] = {"bound": floor, "seconds": seconds}
    # P3A.3: CP-SAT on the whole model, hinted with the descent's schedule.
    left = deadline.left()
    first = solve_p3_cpsat(instance, time_limit=None if left is None else left * (CPSAT_SHARE if lns_too and not energy else 1.0),
                           workers=workers, hint=hint, _floor=floor, **options)
    members["cpsat"] = _summary(first, deadline, "cpsat")
    first = replace(first, stats={**first.stats, "members": dict(members)}, source=first.source or "cpsat")
    if (not lns_too or first.status in (Status.OPTIMAL, Status.INFEASIBLE, Status.ERROR)
            or (first.schedule is None and found is None)):
        return first
    if deadline.passed(margin=1.0):  # no time for the LNS: the better of CP-SAT's and the descent's
        if found is None or (first.objective is not None and first.objective <= found.value):
            return first
        # Unchecked against CP-SAT's class here, so the bound is the one over every schedule.
        return replace(first, status=Status.FEASIBLE, schedule=found.schedule, objective=found.value,
                       bound=floor, source="descent",
                       stats={**first.stats, "bound_class": "every schedule (the floor, P3A.2)"},
                       message=f"the descent {found.value}, CP-SAT {first.objective}; no time was left for the LNS")
    same = {k: v for k, v in options.items() if k in ("max_computes", "max_transfers", "seed", "log")}
    # P3A.4: the LNS from the better of the two.
    start = first.schedule
    if found is not None and (first.objective is None or found.value < first.objective):
        start = found.schedule
    # P3A.5: the LNS leaves RETIME_SHARE of its time to retime the best schedule.
    reserve = RETIME_SHARE * (deadline.left() or 0.0)
    second = solve_p3_lns(instance, time_limit=max(0.0, (deadline.left() or 0.0) - reserve), workers=workers,
                          hint=start, _floor=floor, **same)
    members["lns"] = _summary(second, deadline, "lns")
    bound = max((b for b in (first.bound, second.bound) if b is not None), default=None)
    stats = {**first.stats, "members": members, "lns_steps": second.stats.get("steps"),
             "lns_improving_steps": second.stats.get("improving_steps")}
    metrics = verified(instance, second.schedule) if second.objective is not None else None
    # The best of the three: CP-SAT's, the descent's, the LNS's (an LNS that took no step
    # returns its start, one of the other two).
    schedule: Schedule | Sequence | None = first.schedule
    objective, source = first.objective, first.source
    if found is not None and (objective is None or found.value < objective):
        schedule, objective, source = found.schedule, found.value, "descent"
    if (metrics is not None and second.source == "lns"
            and (objective is None or metrics.objective_value < objective)):
        schedule, objective, source = second.schedule, metrics.objective_value, "lns"
    steps = f"{second.stats.get('improving_steps')} improving steps of {second.stats.get('steps')}"
    descent = "" if found is None else f"the descent {found.value}, "
    message = (f"{descent}CP-SAT {first.objective} in {members['cpsat']['seconds']} s, "
               f"then the LNS {second.objective} ({steps}); the best from {source}")
    if source == "descent" and second.stats.get("check_status") not in ("OPTIMAL", "FEASIBLE"):
        # The LNS started from it and found it outside the model's class (P3L.N0):
        # CP-SAT's bound for that class does not hold.
        bound = second.bound
        stats["bound_class"] = "every schedule (the descent's schedule is outside class P3.K3)"
    elif isinstance(schedule, Schedule) and objective is not None and not deadline.passed(margin=0.1):
        # P3A.5: the best schedule's decisions, timed at their best in the model (P3L.T1).
        timed = retimed(schedule, time_limit=deadline.left() or 0.0)
        stats["retimed"] = None if timed is None else timed[1]
        if timed is not None and timed[1] < objective:
            schedule, objective = timed
            message += f"; retimed to {objective}"
    proven = bound is not None and objective is not None and objective <= bound
    # The bound as proved: one above the schedule's value is for solve() to report (BD.C1).
    return BackendResult(Status.OPTIMAL if proven else Status.FEASIBLE, schedule, objective,
                         bound, message, stats, source=source)


def _timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``call``'s value and its seconds."""
    began = time.perf_counter()
    value = call(*args, **kwargs)
    return value, round(time.perf_counter() - began, 3)


def _summary(result: BackendResult, deadline: Deadline, name: str) -> dict[str, Any]:
    return {"status": str(result.status), "objective": result.objective, "bound": result.bound,
            "seconds": round(deadline.elapsed(), 3), "source": result.source or name}
