"""``solve_lns``: large-neighbourhood search for P1 on the interval model (``p1_interval.md`` §9).

The interval model of the whole graph is built once, in its free form
(``canonical=False``) with empty positions to spare.  Each step keeps the current
plan outside a window of consecutive positions (P1I.L1), lets CP-SAT re-decide the
window (which computations run there, in which order, and which copies end where:
P1I.L2), and takes the result when it is cheaper (P1I.L3).  The window's size adapts to
how quickly its sub-problems are proven (P1I.L4).  Every step starts from the current
plan as a full hint, so the search is anytime: the returned plan is the best one
found, checked by the evaluator.  With the same seed, workers and number of steps the
run is the same (each sub-solve has a deterministic-time limit).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from monet_ilp.engines.cpsat import configured_solver
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.errors import MonetError
from monet_ilp.heuristics.liveness import replay
from monet_ilp.heuristics.repair import repair_sequence
from monet_ilp.heuristics.store_all import store_all_sequence
from monet_ilp.problems.p1.anneal import anneal as anneal_plan
from monet_ilp.problems.p1.data import P1Data, check_max_computes, check_p1, p1_data
from monet_ilp.problems.p1.interval import (
    IntervalModel,
    OutsideClass,
    Plan,
    assignment,
    build_interval_model,
    canonical_plan,
    class_text,
    copies_per_node,
    plan_of_sequence,
    sequence_of_plan,
    solve_interval,
)
from monet_ilp.problems.p1.interval.solve import check_objective, result
from monet_ilp.problems.p1.prune import prune, pruned_starts
from monet_ilp.results import BackendResult, Status

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from monet_ilp.heuristics.starts import Starts
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["LNS_OPTIONS", "LnsStep", "LowestPeak", "Offers", "descent_steps", "lns_steps", "lowest_peak",
           "solve_lns"]

#: The options of the ``lns`` backend beyond time_limit, workers and hint.
LNS_OPTIONS = ("max_computes", "window", "slack", "step_time", "steps", "anneal", "log", "seed", "params")

#: P1I.L7: the share of the time left after the start that the annealing takes, when the
#: option ``anneal`` does not say how many moves.
ANNEAL_SHARE = 0.8
#: Window bounds (positions of the plan), P1I.L4.
MIN_WINDOW, MAX_WINDOW = 8, 400
#: Deterministic seconds of CP-SAT per step (P1I.L4).  Wall seconds run several times
#: higher on this model (0.5-2 s a step at n = 250-1000); shorter steps, more of them,
#: found cheaper plans in a minute than 0.25 (scripts/bench_remat.py, random DAGs at 0.9).
STEP_DETERMINISTIC_TIME = 0.1
#: P1I.L5's first window and deterministic seconds per step.  Lowering a peak takes
#: changes farther apart than lowering a cost: on the random DAG n = 250 at 0.8, windows of
#: 16 positions at 0.1 s stalled 37 bytes over the budget; 40 at 0.5 s reached it in 4 steps.
DESCENT_WINDOW, DESCENT_STEP_TIME = 40, 0.5
#: P1I.L5's detour: from a start over the budget that costs at most half of the best one
#: within it, with at most this share of the time left.
DETOUR_RATIO, DETOUR_SHARE = 2, 0.4
#: P1I.L6: a plan offered during the run may take this share of the time left for its descent.
OFFER_SHARE = 0.5
#: P1I.L6: an offer whose peak is more than this share over the budget is left.  The
#: relaxation's plans on the random DAGs n = 250-500 at 0.8 peak 50 % over it (the memory
#: inside a stage, which the relaxation does not see); at n = 40-150, 1-17 % over.
OFFER_MAX_OVER = 0.2
#: A step with less wall time left than this runs on one worker.  With several, CP-SAT's
#: interleaved search can abort the whole process (``Check failed: solution->size() ==
#: postsolve_mapping.size()``) when its time limit stops it while it loads the step's hint:
#: seen on the random DAG n = 30, seed 3, at 303-313 B, in descent steps started with
#: 0.01-0.015 s left (about one run in three of 20 s).  Only a step's start is guarded.
INTERLEAVE_MIN_S = 3.0


class Offers:
    """Schedules another thread offers a running search (P1I.L6): a portfolio's relaxation
    plans (``p1_portfolio.md`` PF.S5).  The search looks between two steps; an offer not
    yet taken is replaced by a later one from the same source (a solver's better incumbent)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[tuple[str, Sequence]] = []
        self._last: dict[str, Sequence] = {}

    def put(self, source: str, schedule: Sequence) -> None:
        """Offer ``schedule``; the same one again from ``source`` is no new offer."""
        with self._lock:
            last = self._last.get(source)
            if last is not None and last.steps == schedule.steps:
                return
            self._last[source] = schedule
            self._items = [item for item in self._items if item[0] != source] + [(source, schedule)]

    def ready(self) -> bool:
        return bool(self._items)

    def take(self) -> list[tuple[str, Sequence]]:
        with self._lock:
            items, self._items = self._items, []
        return items


@dataclass(frozen=True)
class LnsStep:
    """One step of the search: the window, what CP-SAT said, the cost before and after."""

    first: int
    last: int
    status: str
    cost_before: int
    cost_after: int
    seconds: float


def solve_lns(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    max_computes: int = 2,
    window: int = 16,
    slack: int | None = None,
    step_time: float = STEP_DETERMINISTIC_TIME,
    steps: int | None = None,
    anneal: int | None = None,
    log: bool = False,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    **options: Any,
) -> BackendResult:
    """Improve a P1 schedule by re-solving windows of it exactly (``p1_interval.md`` §9).

    Parameters
    ----------
    instance
        A P1 instance.
    time_limit
        Seconds for everything (``None``: until ``steps`` steps, or until a whole-plan
        window is proven optimal).
    workers
        CP-SAT workers per step (default 1; more run the sub-solver's portfolio
        interleaved, so a run stays deterministic).
    hint
        The schedule to start from; otherwise the cheapest of the eviction heuristic,
        Chen's greedy and store-all that the class represents.  Without any, the
        interval model is solved whole for a first schedule.
    max_computes
        ``C``, computations per op (P1I.D1).
    window
        The first window's length, in positions of the plan (P1I.L1).
    slack
        Empty positions inside the window, room for added recomputations (default
        half the window, at least 4).
    step_time
        CP-SAT's deterministic-time limit per step (P1I.L4).
    steps
        Stop after this many steps.
    anneal
        Moves of the annealing (P1I.L7) from a start within the budget, before the
        steps (deterministic per seed); ``None``: :data:`ANNEAL_SHARE` of the time
        under a time limit when ``steps`` is not given, none otherwise; ``0``: none.
    seed
        Seeds the windows and CP-SAT.
    params
        Further CP-SAT parameters for each step.

    Returns
    -------
    BackendResult
        ``FEASIBLE`` with the best plan and the bound every schedule has (every op
        once), ``OPTIMAL`` when that bound is met or a window covering the whole plan is
        proven, ``UNKNOWN`` without a start.  ``stats["steps"]`` lists the steps.
    """
    deadline: Deadline = options.pop("_deadline", None) or Deadline(time_limit)
    starts: Starts | None = options.pop("_starts", None)  # a portfolio's, made once
    offers: Offers | None = options.pop("_offers", None)  # a portfolio's plans, during the run
    if options:
        name = min(options)
        raise MonetError(f"backend 'lns' on P1 has no option {name!r}", field=name,
                         fix=f"its options are: {', '.join(LNS_OPTIONS)}")
    check_p1(instance)
    check_objective(instance)
    check_max_computes(max_computes)
    if window < 1 or (slack is not None and slack < 0) or step_time <= 0:
        raise MonetError("lns needs window >= 1, slack >= 0 and step_time > 0", field="window",
                         fix="pass a positive window and step_time")
    if anneal is not None and anneal < 0:
        raise MonetError("lns needs anneal >= 0 (moves of the annealing)", field="anneal",
                         fix="pass a number of moves, 0 for none, or leave it out")
    started = deadline.started
    data = p1_data(instance)
    trivial = sum(data.cost)
    stats: dict[str, Any] = {"nodes": data.n, "max_computes": max_computes,
                             "bound_class": class_text(max_computes, True)}

    current, source, detour = _start(instance, data, hint, deadline, stats, starts)
    if current is None:
        # No heuristic start: the whole interval model, for a first schedule.
        whole = solve_interval(instance, hint=None, max_computes=max_computes, workers=workers,
                               seed=seed, log=log, use_baseline_hint=False, _deadline=deadline)
        if whole.schedule is None:
            return BackendResult(whole.status, bound=whole.bound, stats={**stats, **whole.stats},
                                 message=f"no start from the heuristics; the interval model: {whole.message}")
        current = plan_of_sequence(data, whole.schedule)
        source = "interval"
    timed = anneal is None and steps is None and deadline.limited
    if current.fits(data) and current.cost > trivial and (anneal or timed):
        # P1I.L7: anneal from the start, then the steps go on from its best plan.
        began = time.perf_counter()
        annealed = anneal_plan(data, current, deadline=deadline.sub(ANNEAL_SHARE), seed=seed, moves=anneal)
        best_annealed = prune(data, annealed.plan, deadline=deadline)
        stats["anneal"] = {"from": current.cost, "to": best_annealed.cost, "moves": annealed.tried,
                           "taken": annealed.taken, "uphill": annealed.uphill,
                           "seconds": round(time.perf_counter() - began, 3)}
        if best_annealed.cost < current.cost:
            current, source = best_annealed, "anneal"
    # The class grows to hold the start (P1I.L2): an op the start computes more than C
    # times gets as many copies.
    copies = _copies(data, max_computes, [current] + ([detour[0]] if detour else []))
    _raised(data, copies, max_computes, stats)
    over = not current.fits(data)
    if current.cost == trivial and not over:
        return result(instance, data, current, Status.OPTIMAL, trivial,
                      "optimal: no recomputation (every op once, a bound for every schedule)",
                      stats, started, source="lns" if source == "interval" else source)

    room = slack if slack is not None else max(4, window // 2)
    try:
        ceiling = current.peak if over else (detour[0].peak if detour else None)
        im = build_interval_model(data, copies, canonical=False, slack=room, capacity=ceiling,
                                  deadline=deadline)
    except OutOfTime as stop:
        stats["stopped"] = f"the time limit ran out while building the model ({stop.detail or stop.step})"
        if over:
            return BackendResult(Status.UNKNOWN, bound=trivial, stats=stats,
                                 message=f"{stats['stopped']}; no schedule within the budget")
        return result(instance, data, current, Status.FEASIBLE, trivial,
                      f"{stats['stopped']}; returning the start", stats, started, source=source)
    stats["build_seconds"] = round(time.perf_counter() - started, 3)
    stats["variables"] = len(im.model.proto.variables)

    # P1I.L6: the offers pending, taken against a plan (the first one that ends within the budget).
    take = None if offers is None else partial(
        _take_offers, data, offers=offers, max_computes=max_computes, slack=room, window=window,
        step_time=step_time, deadline=deadline, seed=seed, workers=workers, log=log, params=params,
        stats=stats)
    if over or detour:
        # P1I.L5: descend to the budget first (a detour: with a share of the time, and
        # taken only when it ends within the budget below the start's cost).
        descent: list[LnsStep] = []
        origin, name = (current, source) if detour is None else detour
        waiting = offers.ready if over and offers is not None else None
        found = descent_steps(im, origin, deadline=deadline if over else deadline.sub(DETOUR_SHARE),
                              window=max(window, DESCENT_WINDOW), slack=room,
                              step_time=max(step_time, DESCENT_STEP_TIME), seed=seed, workers=workers,
                              log=log, params=params, history=descent, interrupt=waiting)
        while take is not None and waiting is not None and waiting() and not deadline.passed(margin=0.05):
            # P1I.L6: a plan offered while no schedule fits; the first that reaches the
            # budget is the start, else this descent goes on.
            offered = take(found)
            if offered is not None:
                im, found = offered
            if not found.fits(data):
                found = descent_steps(im, found, deadline=deadline, window=max(window, DESCENT_WINDOW),
                                      slack=room, step_time=max(step_time, DESCENT_STEP_TIME),
                                      seed=seed + len(descent), workers=workers, log=log, params=params,
                                      history=descent, interrupt=waiting)
        taken = found.fits(data) and (over or found.cost < current.cost)
        stats["descent"] = {"from": name, "detour": not over, "steps": len(descent),
                            "peak_bytes": found.peak * data.scale, "cost": found.cost, "taken": taken,
                            "seconds": round(sum(d.seconds for d in descent), 3)}
        if taken:
            current, source = prune(data, found, deadline=deadline), "lns"
        elif over:
            return BackendResult(Status.UNKNOWN, bound=trivial, stats=stats, message=(
                f"no start within the budget; the descent (P1I.L5) lowered the peak of {source} "
                f"to {found.peak * data.scale:,} B in {len(descent)} steps, over the budget of "
                f"{data.budget * data.scale:,} B; no schedule and no proof"))

    history: list[LnsStep] = []
    best, proven = current, False
    while True:
        best, proven = lns_steps(im, best, deadline=deadline, window=window, slack=room,
                                 step_time=step_time,
                                 steps=None if steps is None else steps - len(history), seed=seed + len(history),
                                 workers=workers, log=log, params=params, history=history,
                                 interrupt=None if offers is None else offers.ready)
        if proven or take is None or offers is None or not offers.ready() or deadline.passed(margin=0.05):
            break
        # P1I.L6: a plan offered during the run, brought down to the budget in a model
        # of its own, replaces the current one when it ends within the budget and cheaper.
        offered = take(best)
        if offered is not None:
            im, best = offered
            source = "lns"
    stats["steps"] = len(history)
    stats["improving_steps"] = sum(s.cost_after < s.cost_before for s in history)
    stats["trajectory"] = [[round(time.perf_counter() - started, 3), best.cost]]
    stats["last_window"] = (history[-1].last - history[-1].first + 1) if history else window
    improved = best.cost < current.cost
    if proven or best.cost == trivial:
        return result(instance, data, best, Status.OPTIMAL, best.cost,
                      f"optimal within the class ({stats['bound_class']}): "
                      + ("a window covering the whole plan was proven" if proven else
                         "no recomputation left"), stats, started,
                      source="lns" if improved or source == "interval" else source)
    message = (f"time limit reached after {len(history)} LNS steps; best schedule "
               f"{'improved from' if improved else 'still'} {source}"
               f" (cost {current.cost} -> {best.cost}); bound: every op once")
    return result(instance, data, best, Status.FEASIBLE, trivial, message, stats, started,
                  source="lns" if improved else source)


def _start(instance: Instance, data: P1Data, hint: Schedule | Sequence | None,
           deadline: Deadline, stats: dict[str, Any], starts: Starts | None
           ) -> tuple[Plan | None, str, tuple[Plan, str] | None]:
    """The cheapest start within the budget: the hint, else the feasible-first heuristics
    (PF.S1; ``starts`` when a portfolio has made them already).  When none fits, the one
    over the budget with the lowest peak (store-all at worst), for P1I.L5.  The third
    value is a detour (P1I.L5): a start over the budget that costs at most
    ``1 / DETOUR_RATIO`` of the one that fits (the repair as far as it got, usually)."""
    made = pruned_starts(instance, deadline=deadline) if starts is None else starts
    candidates = ([] if hint is None else [("hint", hint)]) + [(f"heuristic:{n}", s) for n, s in made]
    if dict(made).get("repair") is None:
        # The repair as far as it got: the usual start of the descent (P1I.L5).
        candidates.append(("heuristic:repair (over the budget)", _repair_best_effort(instance, deadline=deadline)))
    best: tuple[Plan, str] | None = None
    overs: list[tuple[Plan, str]] = []  # over the budget
    rejected: dict[str, str] = {}
    for name, schedule in candidates:
        try:
            plan = None if schedule is None else plan_of_sequence(data, schedule)
        except (MonetError, OutsideClass) as err:
            rejected[name] = f"failed: {err}"
            continue
        if plan is None:
            rejected[name] = "no schedule within the budget"
        elif not plan.fits(data):
            rejected[name] = f"peak {plan.peak * data.scale:,} B over the budget"
            overs.append((plan, name))
        elif best is None or plan.cost < best[0].cost:
            best = (plan, name)
    # P1I.L5: the descent starts from the lowest peak over the budget (among those that
    # cost at most 1 / DETOUR_RATIO of the best start within it, for a detour).
    cheap = [o for o in overs if best is None or o[0].cost * DETOUR_RATIO <= best[0].cost]
    lowest = min(cheap, key=lambda o: (o[0].peak, o[0].cost), default=None)
    detour = None
    if best is None and lowest is not None:
        best = lowest
        rejected.pop(lowest[1], None)
    elif lowest is not None:
        detour = lowest
    stats["start"] = None if best is None else {"source": best[1], "cost": best[0].cost,
                                                "peak_bytes": best[0].peak * data.scale}
    if rejected:
        stats["starts_rejected"] = rejected
    return (None, "", None) if best is None else (*best, detour)


@dataclass(frozen=True)
class LowestPeak:
    """What :func:`lowest_peak` found: the least peak (bytes, persistent included, as a
    capacity is given), the schedule that has it, and how the descent went."""

    peak_bytes: int
    schedule: Sequence
    floor_bytes: int
    steps: int
    source: str

    @property
    def proven(self) -> bool:
        """The peak meets the floor no schedule can beat."""
        return self.peak_bytes <= self.floor_bytes


def lowest_peak(instance: Instance, *, time_limit: float | None = None, workers: int | None = None,
                starts: Iterable[Sequence] = (), max_computes: int = 2, seed: int = 0,
                deadline: Deadline | None = None) -> LowestPeak:
    """A P1 schedule with a low memory peak, for ``min-budget`` at sizes where the stage
    model does not build: P1I.L5's descent with the budget set to the floor no schedule
    can beat (``P1Data.peak_lower_bound``), from the lowest peak among ``starts``,
    store-all and the repair pushed as far as it goes.  The descent stops at the floor
    (then the peak is the least budget, proven) or at the deadline; every step keeps a
    schedule, so the peak found is a budget at which one exists.
    """
    deadline = deadline or Deadline(time_limit)
    check_p1(instance)
    base = p1_data(instance)
    floor_values = base.peak_lower_bound * base.scale
    data = p1_data(instance, budget_bytes=floor_values)
    floor_bytes = floor_values + data.persistent_bytes
    candidates = [("store_all", store_all_sequence(instance))] + [("start", s) for s in starts]
    repaired = _repair_best_effort(instance, budget_bytes=floor_bytes, deadline=deadline)
    if repaired is not None:
        candidates.append(("repair", repaired))
    plans = []
    for name, schedule in candidates:
        try:
            plans.append((plan_of_sequence(data, schedule), name))
        except (MonetError, OutsideClass):
            continue
    plan, source = min(plans, key=lambda p: (p[0].peak, p[0].cost))
    steps = 0
    if not plan.fits(data) and not deadline.passed():
        copies = _copies(data, max_computes, [plan])
        try:
            im = build_interval_model(data, copies, canonical=False, slack=DESCENT_WINDOW // 2,
                                      capacity=plan.peak, deadline=deadline)
        except OutOfTime:
            im = None
        if im is not None:
            history: list[LnsStep] = []
            found = descent_steps(im, plan, deadline=deadline, window=DESCENT_WINDOW,
                                  slack=DESCENT_WINDOW // 2, step_time=DESCENT_STEP_TIME, seed=seed,
                                  workers=workers, log=False, params=None, history=history)
            steps = len(history)
            if found.peak < plan.peak:
                plan, source = found, "descent"
    sequence = sequence_of_plan(data, plan, meta={"backend": "lns", "source": source})
    peak = replay(instance, sequence.steps).peak_bytes
    return LowestPeak(peak, sequence, floor_bytes, steps, source)


def _copies(data: P1Data, max_computes: int, plans: list[Plan]) -> list[int]:
    """``C_v`` of P1I.D1, raised for each node to the computations some of ``plans`` make
    (the class grows to hold its starts, P1I.L2)."""
    counts = [max(c) for c in zip(*(p.counts(data.n) for p in plans), strict=True)]
    return [c if c == 1 else max(c, counts[v]) for v, c in enumerate(copies_per_node(data, max_computes))]


def _raised(data: P1Data, copies: Iterable[int], max_computes: int, stats: dict[str, Any]) -> None:
    """Say in ``stats`` which ops the class allows more than ``C`` computations (P1I.L2)."""
    raised = {data.ops[v]: c for v, c in enumerate(copies) if c > max_computes}
    if raised:
        stats["copies_raised"] = {**stats.get("copies_raised", {}), **raised}
        stats["bound_class"] = (class_text(max_computes, True) + ", more for the ops the start "
                                "computes more often (stats['copies_raised'])")


def _repair_best_effort(instance: Instance, budget_bytes: int | None = None,
                        deadline: Deadline | None = None) -> Sequence | None:
    try:
        return repair_sequence(instance, budget_bytes=budget_bytes, best_effort=True, deadline=deadline)
    except MonetError:
        return None


def lns_steps(im: IntervalModel, plan: Plan, *, deadline: Deadline, window: int, slack: int,
              step_time: float, steps: int | None, seed: int, workers: int | None, log: bool,
              params: dict[str, Any] | None, history: list[LnsStep],
              interrupt: Callable[[], bool] | None = None) -> tuple[Plan, bool]:
    """Run LNS steps on ``im`` from ``plan`` until the deadline, ``steps``, or ``interrupt()``
    between two steps (P1I.L1-L4).

    Returns the best plan and whether a window covering all of it was proven optimal.
    """
    rng = random.Random(seed)
    data = im.data
    length = max(MIN_WINDOW, window)
    done = 0
    # P1I.L1: the windows proven optimal for this plan; a recomputation inside one at least
    # as long as the next window is settled, and the draw leaves it out.
    settled: list[tuple[int, int]] = []
    while ((steps is None or done < steps) and not deadline.passed(margin=0.05)
           and not (interrupt is not None and interrupt())):
        if deadline.left() is None and steps is None and length >= len(plan) and done > 0:
            break  # unlimited, and the whole plan was searched without a proof: stop
        while length < min(len(plan), MAX_WINDOW) and not _unsettled(plan, settled, length):
            length = _next_length(length, "OPTIMAL", False)  # every one settled: longer windows
        first, last = _window(plan, data, min(length, len(plan)), rng, settled)
        began = time.perf_counter()
        status, found = _solve_window(im, plan, first, last, slack, deadline=deadline,
                                      step_time=step_time, seed=seed + done, workers=workers,
                                      log=log, params=params)
        history.append(LnsStep(first, last, status, plan.cost, found.cost if found else plan.cost,
                               round(time.perf_counter() - began, 3)))
        done += 1
        whole = first == 0 and last == len(plan) - 1
        better = found is not None and found.cost < plan.cost
        if found is not None and (better or (found.cost == plan.cost and found.peak < plan.peak)):
            plan = found
            settled.clear()
            if better:
                # P1I.L0: the step may have freed memory that a recomputation elsewhere was for.
                plan = prune(data, plan, deadline=deadline)
        elif status == "OPTIMAL":
            settled.append((first, last))
        if status == "OPTIMAL" and whole:
            return plan, True
        length = _next_length(length, status, better)
    return plan, False


def _take_offers(data: P1Data, best: Plan, *, offers: Offers, **settings: Any
                 ) -> tuple[IntervalModel, Plan] | None:
    """P1I.L6: the pending offers in turn (:func:`_take_offer`); the first one taken, if any."""
    for name, schedule in offers.take():
        taken = _take_offer(data, best, name, schedule, offers=offers, **settings)
        if taken is not None:
            return taken
    return None


def _take_offer(data: P1Data, best: Plan, name: str, schedule: Sequence, *,
                max_computes: int, slack: int, window: int, step_time: float, deadline: Deadline,
                seed: int, workers: int | None, log: bool, params: dict[str, Any] | None,
                stats: dict[str, Any], offers: Offers) -> tuple[IntervalModel, Plan] | None:
    """P1I.L6: the model and plan to go on with when ``schedule``, offered during the run,
    ends within the budget cheaper than ``best``; ``None`` to keep the current ones.

    A ``best`` over the budget (no schedule yet) is only beaten by a lower peak: then an
    offer is taken when its descent reaches the budget, at any cost.

    The offer gets a model of its own (its copies, P1I.C12 at its peak) and P1I.L5's
    descent, with at most :data:`OFFER_SHARE` of the time left, until a later offer
    arrives.  ``stats["offers"]`` says what became of each."""
    within = best.fits(data)
    record: dict[str, Any] = {"from": name, "best_cost": best.cost}
    if not within:
        record["best_peak_bytes"] = best.peak * data.scale
    stats.setdefault("offers", []).append(record)
    try:
        plan = plan_of_sequence(data, schedule)
    except (MonetError, OutsideClass) as err:
        record["taken"] = f"no: {err}"
        return None
    record.update(cost=plan.cost, peak_bytes=plan.peak * data.scale)
    if within and plan.cost >= best.cost:
        record["taken"] = "no: not cheaper"
        return None
    if not within and plan.peak >= best.peak:
        # No schedule yet: the budget first.  A cheaper plan that peaks higher would take
        # the time of the descent that is closer to it (random n = 1000 just above its
        # least budget: two such offers took 27 of 54 s and no schedule was found).
        record["taken"] = "no: no lower peak than the plan being brought down to the budget"
        return None
    if plan.peak > data.budget * (1 + OFFER_MAX_OVER):
        record["taken"] = f"no: its peak is more than {OFFER_MAX_OVER:.0%} over the budget"
        return None
    over = not plan.fits(data)
    began = time.perf_counter()
    try:
        model = build_interval_model(data, _copies(data, max_computes, [plan]), canonical=False,
                                     slack=slack, capacity=plan.peak if over else None,
                                     deadline=deadline)
    except OutOfTime:
        record["taken"] = "no: the time ran out while building its model"
        return None
    found = plan
    if over:
        descent: list[LnsStep] = []
        found = descent_steps(model, plan, deadline=deadline.sub(OFFER_SHARE),
                              window=max(window, DESCENT_WINDOW), slack=slack,
                              step_time=max(step_time, DESCENT_STEP_TIME), seed=seed, workers=workers,
                              log=log, params=params, history=descent, interrupt=offers.ready)
        record.update(descent_steps=len(descent), descent_cost=found.cost,
                      descent_peak_bytes=found.peak * data.scale)
    record["seconds"] = round(time.perf_counter() - began, 3)
    if not found.fits(data) or (within and found.cost >= best.cost):
        record["taken"] = "no: " + ("not cheaper once within the budget" if found.fits(data)
                                    else "a later offer came during its descent" if offers.ready()
                                    else "the descent did not reach the budget")
        return None
    record["taken"] = True
    _raised(data, model.copies, max_computes, stats)
    return model, found


def descent_steps(im: IntervalModel, plan: Plan, *, deadline: Deadline, window: int, slack: int,
                  step_time: float, seed: int, workers: int | None, log: bool,
                  params: dict[str, Any] | None, history: list[LnsStep],
                  interrupt: Callable[[], bool] | None = None) -> Plan:
    """P1I.L5: from a plan over the budget, windows that lower the memory inside them,
    until the plan fits, the deadline passes or ``interrupt()`` between two steps.
    Returns the plan that is least over (:meth:`Plan.overflow`, then cost); it fits when
    the descent reached the budget.

    Each window is centred on a position at the plan's peak (chosen by the seed); its
    length adapts as in P1I.L4.  ``im`` must have P1I.C12 (``capacity`` at least the plan's peak).
    """
    if im.ceiling is None:
        raise ValueError("the descent needs the model's P1I.C12 (build it with capacity)")
    rng = random.Random(seed)
    data = im.data
    length = max(MIN_WINDOW, window)
    done = 0
    while (not plan.fits(data) and not deadline.passed(margin=0.05)
           and not (interrupt is not None and interrupt())):
        memory = plan.memory(data)
        centre = rng.choice([k for k, m in enumerate(memory) if m == plan.peak])
        first, last = _around(centre, min(length, len(plan)), len(plan), rng)
        began = time.perf_counter()
        status, found = _solve_window(im, plan, first, last, slack, deadline=deadline,
                                      step_time=step_time, seed=seed + done, workers=workers,
                                      log=log, params=params, ceiling=plan.peak)
        better = found is not None and (found.overflow(data), found.cost) < (plan.overflow(data), plan.cost)
        history.append(LnsStep(first, last, status, plan.cost, found.cost if found else plan.cost,
                               round(time.perf_counter() - began, 3)))
        done += 1
        if better and found is not None:
            plan = found
        length = _next_length(length, status, better)
    return plan


def _next_length(length: int, status: str, better: bool) -> int:
    """P1I.L4: a proven window grows; one that ran out of time without a better plan shrinks."""
    if status == "OPTIMAL":
        return min(MAX_WINDOW, int(length * 1.25) + 1)
    return length if better else max(MIN_WINDOW, int(length * 0.8))


def _unsettled(plan: Plan, settled: list[tuple[int, int]], length: int) -> list[int]:
    """The recomputed positions of ``plan`` in no window of ``settled`` (proven optimal
    for this plan) of at least ``length`` positions (P1I.L1)."""
    long = [(a, b) for a, b in settled if b - a + 1 >= length]
    return [k for k, j in enumerate(plan.copy) if j > 0 and not any(a <= k <= b for a, b in long)]


def _window(plan: Plan, data: P1Data, length: int, rng: random.Random,
            settled: list[tuple[int, int]] | None = None) -> tuple[int, int]:
    """P1I.L1: ``length`` consecutive positions, around a recomputation when there is one
    (only there can the cost fall) that no window of ``settled`` as long holds, the
    centre drawn among them in proportion to what the recomputation costs (plus one)."""
    recomputed = _unsettled(plan, settled or [], length) or [k for k, j in enumerate(plan.copy) if j > 0]
    if not recomputed:
        return _around(rng.randrange(len(plan)), length, len(plan), rng)
    weights = [data.cost[plan.nodes[k]] + 1 for k in recomputed]
    return _around(rng.choices(recomputed, weights=weights)[0], length, len(plan), rng)


def _around(centre: int, length: int, n: int, rng: random.Random) -> tuple[int, int]:
    """``length`` consecutive positions of ``n`` that hold ``centre``, placed at random."""
    first = min(max(0, centre - rng.randrange(length)), n - length)
    return first, first + length - 1


def _slots(plan: Plan, im: IntervalModel, first: int, last: int) -> list[int]:
    """The copy slot of each computation: copies before and in the window first, the
    copies after it in the last slots, so that free slots sit in between (P1I.L2)."""
    by_node: dict[int, list[int]] = {}
    for k, v in enumerate(plan.nodes):
        by_node.setdefault(v, []).append(k)
    slot = [0] * len(plan)
    for v, ks in by_node.items():
        later = [k for k in ks if k > last]
        earlier = [k for k in ks if k <= last]
        for j, k in enumerate(earlier):
            slot[k] = j
        # A node first computed after the window keeps slot 0 for its first computation.
        top = im.copies[v] if earlier else len(later)
        for j, k in enumerate(later):
            slot[k] = top - len(later) + j
    return slot


def _solve_window(im: IntervalModel, plan: Plan, first: int, last: int, slack: int, *,
                  deadline: Deadline, step_time: float, seed: int, workers: int | None, log: bool,
                  params: dict[str, Any] | None, ceiling: int | None = None) -> tuple[str, Plan | None]:
    """One step (P1I.L2-L3): fix every computation outside ``[first, last]``, free the
    window and the unused copies inside it, solve, and read the plan back.

    With ``ceiling`` (a descent step, P1I.L5): memory stays within ``ceiling`` everywhere,
    and the step lowers the most memory inside the window first, the cost second."""
    data, model = im.data, im.model
    free = im.horizon - len(plan)
    room = min(slack, free)
    # Positions: before the window as they are; the window gets ``room`` empty positions;
    # what follows shifts by ``room``; the remaining empty positions come last.
    positions = [k if k <= last else k + room for k in range(len(plan))]
    lo, hi = first, last + room
    slots = _slots(plan, im, first, last)
    placed = {(v, slots[k]): k for k, v in enumerate(plan.nodes)}
    fixed: dict[int, tuple[int, int]] = {}  # variable index -> its domain (lo, hi) this step

    def pin(var: cp_model.IntVar, a: int, b: int) -> None:
        fixed[var.index] = (a, b)

    # P1I.L2: a copy not in the plan may appear in the window only for an op read in the
    # window (a recomputation elsewhere serves nobody there), and only in its first free slot.
    window_nodes = set(plan.nodes[first:last + 1])
    read_here = {u for v in window_nodes for u in data.preds[v]}
    movable = window_nodes | read_here | {u for v in read_here for u in data.preds[v]}
    used = set(placed)
    opening = {v: next((j for j in range(im.copies[v]) if (v, j) not in used), None) for v in movable}
    absent: dict[tuple[int, int], int] = {}
    for key, s in im.start.items():
        dom_lo, dom_hi = im.start_domain[key]
        k = placed.get(key)
        if k is not None and not first <= k <= last:
            pin(s, positions[k], positions[k])
            if key in im.present:
                pin(im.present[key], 1, 1)
            end = positions[plan.end[k]]
            if k > last or (plan.end[k] < first and key[0] not in movable):
                # After the window, or before it and read by nothing that may run in it:
                # its readers are fixed, and so is its end.
                pin(im.end[key], end, end)
                pin(im.length[key], end - positions[k] + 1, end - positions[k] + 1)
            elif plan.end[k] < first:
                # Before the window: held longer, it may serve a reader in the window
                # instead of a recomputation; past the window it would serve nobody new.
                pin(im.end[key], end, hi)
                pin(im.length[key], end - positions[k] + 1, hi - positions[k] + 1)
            continue
        a, b = max(lo, dom_lo), min(hi, dom_hi)
        if k is None and opening.get(key[0]) != key[1]:
            a, b = dom_lo, dom_lo - 1  # stays absent this step
        if a > b:  # cannot be in the window: absent (only an unused slot can be here)
            if k is not None:
                raise AssertionError("a computation of the window has no position in it")
            pin(im.present[key], 0, 0)
            absent[key] = dom_lo
            continue
        pin(s, a, b)
        if k is None:
            absent[key] = a
    values = assignment(im, plan, positions=positions, slots=slots, absent_start=absent)
    top = im.ceiling
    if top is not None:
        # P1I.C12: the budget once the descent is over; during it, the ceiling, with the
        # filler over the window's positions.
        cap = data.budget if ceiling is None else ceiling
        span = (lo, hi + 1) if cap > data.budget else (0, 0)
        for var, value in ((top.cap, cap), (top.first, span[0]), (top.end, span[1])):
            pin(var, value, value)
            values[var] = value
        pin(top.fill, 0, cap - data.budget)
        values[top.fill] = max(0, cap - max(plan.memory(data)[first:last + 1]))
    step = model.clone()
    proto = step.proto
    for index, (a, b) in fixed.items():
        proto.variables[index].domain.clear()
        proto.variables[index].domain.extend([a, b])
    # The hint in bulk (a call per variable costs a fifth of a step's Python at n = 1000).
    proto.solution_hint.vars.extend(var.index for var in values)
    proto.solution_hint.values.extend(int(value) for value in values.values())
    if top is not None and ceiling is not None:
        # P1I.L5's objective: the filler first (every unit of it is worth more than any cost).
        weight = sum(c * k for c, k in zip(data.cost, im.copies, strict=True)) + 1
        proto.objective.vars.append(top.fill.index)
        proto.objective.coeffs.append(-weight)
    limit = deadline.solver_limit()
    # Several workers only with INTERLEAVE_MIN_S left: an interleaved search stopped by its
    # time limit while it loads the hint may abort the process (OR-Tools 9.15).
    threads = (workers or 1) if limit is None or limit >= INTERLEAVE_MIN_S else 1
    solver = configured_solver(time_limit=limit, workers=threads, seed=seed, log=log,
                               params={**({"interleave_search": True} if threads > 1 else {}),
                                       "max_deterministic_time": step_time, **(params or {})})
    with deadline.on_cancel(solver.stop_search):
        status = solver.solve(step)
    name = str(solver.status_name(status))
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return name, None
    ran = sorted((int(solver.value(s)), v) for (v, j), s in im.start.items()
                 if j == 0 or int(solver.value(im.present[(v, j)])))
    found = canonical_plan(data, [v for _, v in ran])
    if found.peak > (data.budget if ceiling is None else ceiling):
        raise AssertionError("an LNS step's plan breaks the budget; this is a bug")
    return name, found
