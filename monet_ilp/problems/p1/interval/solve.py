"""``solve_interval``: P1 on the retention-interval model (``formulations/p1_interval.md``).

Build the model (checking the deadline), hint it with a plan (the given schedule, else
the cheapest baseline that the class can represent), run CP-SAT, and turn its
positions back into a :class:`~monet_ilp.schedule.Sequence`, which the evaluator
checks before it is returned.  Optimality, infeasibility and bounds hold for the
class of §1 (``stats["bound_class"]``), not for every P1 schedule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from monet_ilp.engines.cpsat import Hints, run_cpsat
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import verified
from monet_ilp.heuristics import chen_greedy_sequence, store_all_sequence
from monet_ilp.instance import Objective
from monet_ilp.problems.p1.data import P1Data, check_max_computes, check_p1, p1_data
from monet_ilp.problems.p1.interval.model import (
    IntervalModel,
    assignment,
    build_interval_model,
    copies_per_node,
    plan_of_solution,
)
from monet_ilp.problems.p1.interval.plan import (
    OutsideClass,
    Plan,
    plan_of_sequence,
    sequence_of_plan,
)
from monet_ilp.results import BackendResult, Status

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["DEFAULT_PARAMS", "INTERVAL_OPTIONS", "class_text", "hint_plan", "solve_interval"]

#: CP-SAT parameters set before the caller's ``params`` (``p1_interval.md`` §8).
DEFAULT_PARAMS: dict[str, Any] = {"extra_subsolvers": ["objective_lb_search"]}

#: The options of the ``interval`` backend beyond time_limit, workers and hint.
INTERVAL_OPTIONS = ("max_computes", "fixed_order", "tight_ends", "use_baseline_hint", "log", "seed",
                    "params")


def class_text(max_computes: int, fixed_order: bool) -> str:
    """The class of schedules the model is exact over (``p1_interval.md`` §1)."""
    order = "first computations in the graph order" if fixed_order else \
        "first computations in any topological order (optimizer ops last)"
    return f"sequences with at most {max_computes} computations per op, {order}"


def solve_interval(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    max_computes: int = 2,
    fixed_order: bool = True,
    tight_ends: bool = False,
    use_baseline_hint: bool = True,
    log: bool = False,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    **options: Any,
) -> BackendResult:
    """Minimise the compute cost of a P1 instance over the interval class (``p1_interval.md``).

    Parameters
    ----------
    instance
        A P1 instance (one core whose memory holds the graph inputs).
    time_limit
        Seconds for everything: baselines, model, CP-SAT (``None``: until proven).
    workers
        CP-SAT workers (default: the machine's cores, at most 8).
    hint
        A Sequence (or one-core timed Schedule) to start from.  Used when the class can
        represent it (at most ``max_computes`` computations per op after dropping
        useless ones, first computations in the order); ``stats["hint"]`` says why not.
    max_computes
        ``C``: computations per op (P1I.D1); the class grows with it.
    fixed_order
        First computations in graph order (default), or in any topological order.
    tight_ends
        Add P1I.C10 (each end at a reader's start or the copy's own).
    use_baseline_hint
        Without ``hint``, hint with the cheapest fitting baseline (Chen's greedy,
        store-all) that the class represents.
    log
        Print CP-SAT's search log.
    seed
        CP-SAT's random seed.
    params
        Further CP-SAT parameters, by name.

    Returns
    -------
    BackendResult
        ``OPTIMAL`` when CP-SAT proves it (optimal within the class); ``FEASIBLE`` at a
        limit, with CP-SAT's bound for the class (at least ``sum c_v``, a bound for
        every schedule); ``INFEASIBLE`` when no schedule of the class fits; ``UNKNOWN``
        without a schedule.  ``objective`` is the evaluator's ``compute_cycles``.

    Raises
    ------
    MonetError
        Not a P1 instance, an objective P1 does not minimise, a bad option.
    """
    deadline: Deadline = options.pop("_deadline", None) or Deadline(time_limit)
    if options:
        name = min(options)
        raise MonetError(f"backend 'interval' on P1 has no option {name!r}", field=name,
                         fix=f"its options are: {', '.join(INTERVAL_OPTIONS)}")
    check_p1(instance)
    check_objective(instance)
    check_max_computes(max_computes)
    started = deadline.started
    data = p1_data(instance, fixed_order=fixed_order)
    copies = copies_per_node(data, max_computes)
    bound_class = class_text(max_computes, fixed_order)
    trivial = sum(data.cost)
    stats: dict[str, Any] = {
        "nodes": data.n, "max_computes": max_computes, "fixed_order": fixed_order,
        "tight_ends": tight_ends, "copies": sum(copies), "size_scale": data.scale,
        "budget_bytes": data.budget_bytes, "bound_class": bound_class,
    }
    if data.peak_lower_bound > data.budget:
        stats["infeasible_by"] = "peak_lower_bound"
        return finish(BackendResult(
            Status.INFEASIBLE, message=f"no schedule fits the budget of {data.budget_bytes} bytes: "
            f"some op needs {data.peak_lower_bound * data.scale} bytes with its inputs and outputs "
            "(a bound for every P1 schedule with this order option, a node's outputs held together)",
            stats=stats), started)

    chosen = choose_hint(instance, data, copies, hint, use_baseline_hint, deadline, stats)
    began = time.perf_counter()
    try:
        im = build_interval_model(data, copies, tight_ends=tight_ends, deadline=deadline)
        if chosen is not None:
            add_hints(im, chosen[1], deadline)
    except OutOfTime as stop:
        reason = f"the time limit ran out while building the model ({stop.detail or stop.step})"
        stats["stopped"] = reason
        stats["build_seconds"] = round(time.perf_counter() - began, 3)
        return fallback(instance, data, chosen, trivial, reason, stats, started)
    stats.update(model_stats(im), build_seconds=round(time.perf_counter() - began, 3))
    if deadline.passed():
        return fallback(instance, data, chosen, trivial, "time limit reached before CP-SAT could start",
                        stats, started)
    run = run_cpsat(im.model, deadline=deadline, workers=workers, seed=seed, log=log, params=params,
                    defaults=DEFAULT_PARAMS)
    stats.update(solver_status=run.status_name, solve_seconds=round(run.seconds, 3),
                 workers=run.solver.parameters.num_workers)
    if run.has_solution:
        plan = plan_of_solution(im, run.solver.value)
        solver_cost = round(run.solver.objective_value)
        if plan.cost > solver_cost or not plan.fits(data):
            raise AssertionError("the interval model's solution does not replay; this is a bug")
        proven = run.status == cp_model.OPTIMAL
        if proven and plan.cost != solver_cost:
            raise AssertionError("dropping useless recomputations beat a proven optimum; this is a bug")
        bound = plan.cost if proven else solver_bound(run.solver, trivial)
        message = (f"optimal within the class ({bound_class})" if proven
                   else f"time limit reached; best schedule and its bound within the class ({bound_class})")
        return result(instance, data, plan, Status.OPTIMAL if proven else Status.FEASIBLE, bound,
                      message, stats, started)
    if run.status == cp_model.INFEASIBLE:
        stats["infeasible_by"] = "cpsat"
        return finish(BackendResult(
            Status.INFEASIBLE, message=f"no schedule of the class ({bound_class}) fits the budget of "
            f"{data.budget_bytes} bytes (proven for the class only; more computations per op or "
            "another backend may fit it)", stats=stats), started)
    if run.status == cp_model.MODEL_INVALID:
        raise AssertionError(f"CP-SAT rejects the interval model: {im.model.validate()}")
    return fallback(instance, data, chosen, solver_bound(run.solver, trivial),
                    "time limit reached before CP-SAT found a schedule", stats, started)


# ------------------------------------------------------------------ the steps
def check_objective(instance: Instance) -> None:
    """P1 models minimise compute cycles: the ``compute`` or ``latency`` objective (one core)."""
    if instance.objective not in (Objective.COMPUTE, Objective.LATENCY):
        raise MonetError(f"the P1 interval model minimises compute cycles, not the {instance.objective} "
                         "objective", field="objective", fix="use the compute or latency objective")


def baselines(instance: Instance, data: P1Data,
              deadline: Deadline) -> list[tuple[str, Callable[[], Sequence | None]]]:
    """The baselines a hint is chosen from: Chen's greedy and store-all."""
    return [
        ("greedy", lambda: chen_greedy_sequence(instance, data.capacity_bytes, deadline=deadline)),
        ("store_all", lambda: store_all_sequence(instance)),
    ]


def choose_hint(instance: Instance, data: P1Data, copies: list[int],
                hint: Schedule | Sequence | None, use_baseline: bool, deadline: Deadline,
                stats: dict[str, Any]) -> tuple[str, Plan] | None:
    """The plan to start from: the given schedule, else the cheapest baseline that fits.

    ``stats["hint"]`` names it, ``stats["hint_cost"]`` gives its cost, and
    ``stats["hints_rejected"]`` why the others were not used.
    """
    rejected: dict[str, str] = {}
    found: list[tuple[str, Plan]] = []
    if hint is not None:
        candidates: list[tuple[str, Callable[[], Schedule | Sequence | None]]] = [("given", lambda: hint)]
    elif use_baseline:
        candidates = list(baselines(instance, data, deadline))
    else:
        candidates = []
    for name, make in candidates:
        if found and deadline.passed():
            rejected[name] = "not tried: out of time"
            continue
        try:
            schedule = make()
        except (MonetError, OutOfTime) as err:
            rejected[name] = f"failed: {err}"
            continue
        if schedule is None:
            rejected[name] = "no schedule"
            continue
        why = hint_plan(data, copies, schedule)
        if isinstance(why, str):
            rejected[name] = why
        else:
            found.append((name, why))
    chosen = min(found, key=lambda f: f[1].cost, default=None)
    stats["hint"] = "none" if chosen is None else chosen[0]
    if chosen is not None:
        stats["hint_cost"] = chosen[1].cost
    if rejected:
        stats["hints_rejected"] = rejected
    return chosen


def hint_plan(data: P1Data, copies: list[int], schedule: Schedule | Sequence) -> Plan | str:
    """The plan of ``schedule`` if the model can start from it, else why not."""
    try:
        plan = plan_of_sequence(data, schedule)
    except OutsideClass as err:
        return f"not in the class: {err}"
    over = [v for v, c in enumerate(plan.counts(data.n)) if c > copies[v]]
    if over:
        v = over[0]
        return (f"not in the class: {data.ops[v]!r} is computed {plan.counts(data.n)[v]} times "
                f"(at most {copies[v]})")
    if not plan.fits(data):
        return f"over the budget: peak {plan.peak * data.scale} bytes"
    return plan


def add_hints(im: IntervalModel, plan: Plan, deadline: Deadline | None = None) -> int:
    """Hint every variable of ``im`` with its value in ``plan``; returns how many."""
    hints = Hints(im.model)
    for done, (var, value) in enumerate(assignment(im, plan).items()):
        if deadline is not None and done % 4096 == 0:
            deadline.check("hinting the P1 interval model", f"{done:,} variables")
        hints(var, value)
    return hints.count


def model_stats(im: IntervalModel) -> dict[str, Any]:
    proto = im.model.proto
    return {"variables": len(proto.variables), "constraints": len(proto.constraints),
            "horizon": im.horizon, "read_choices": len(im.reads)}


def solver_bound(solver: cp_model.CpSolver, trivial: int) -> int:
    """CP-SAT's bound rounded up, at least ``trivial`` (every op once), as proved: never capped
    at a schedule's cost (a bound above it is for solve() to catch, BD.C1)."""
    raw = solver.best_objective_bound
    bound = trivial
    if math.isfinite(raw):
        nearest = round(raw)
        value = nearest if abs(raw - nearest) <= 1e-6 * max(1.0, abs(raw)) else math.ceil(raw)
        bound = max(bound, int(value))
    return bound


def finish(res: BackendResult, started: float) -> BackendResult:
    stats = dict(res.stats)
    stats["wall_seconds"] = round(time.perf_counter() - started, 3)
    return BackendResult(res.status, res.schedule, res.objective, res.bound, res.message, stats,
                         res.source)


def result(instance: Instance, data: P1Data, plan: Plan, status: Status, bound: int, message: str,
           stats: dict[str, Any], started: float, source: str = "interval") -> BackendResult:
    """The result for ``plan``, checked by the evaluator (its compute cycles are the objective)."""
    sequence = sequence_of_plan(data, plan, meta={"backend": "interval", "compute_cycles": plan.cost,
                                                  "model_peak_bytes": plan.peak * data.scale})
    metrics = verified(instance, sequence)
    if metrics is None or metrics.compute_cycles != plan.cost:
        raise AssertionError("the interval model's schedule fails the evaluator; this is a bug")
    stats.update(recomputations=len(plan) - data.n, model_peak_bytes=plan.peak * data.scale)
    return finish(BackendResult(status, sequence, plan.cost, bound, message, stats,
                                source), started)


def fallback(instance: Instance, data: P1Data, chosen: tuple[str, Plan] | None, bound: int, reason: str,
             stats: dict[str, Any], started: float) -> BackendResult:
    """No schedule of CP-SAT's own: the hint (FEASIBLE, ``source="hint:<name>"``) or UNKNOWN."""
    if chosen is not None:
        name, plan = chosen
        return result(instance, data, plan, Status.FEASIBLE, bound,
                      f"{reason}; returning the {name} hint", stats, started, source=f"hint:{name}")
    return finish(BackendResult(Status.UNKNOWN, None, None, bound, f"{reason}; no schedule and no proof",
                                stats), started)
