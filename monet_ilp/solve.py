"""The one entry point: ``solve(instance, backend=...) -> Result``, verified by the evaluator.

Backends (``monet_ilp.problems.*``, ``monet_ilp.heuristics``) return a
:class:`BackendResult`.  This module checks a call against the registry
(:mod:`monet_ilp.problems.registry`: class, objective, option names), times the
backend, sends its schedule through the evaluator, checks that the claimed objective
equals the evaluator's, and computes the gap.  A mismatch is a bug and is reported as status ``error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph.ir import read_json
from monet_ilp.heuristics.decisions import FORMAT_NAME as DECISIONS_FORMAT
from monet_ilp.heuristics.decisions import decisions_from_dict, decode
from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.problems import registry
from monet_ilp.problems.registry import Backend, BackendSpec
from monet_ilp.results import (
    GA_FORMAT,
    GAP_TOLERANCE,
    BackendResult,
    Result,
    Status,
    bound_error,
    gap_of,
)
from monet_ilp.schedule import FORMAT_NAME as SCHEDULE_FORMAT
from monet_ilp.schedule import Schedule, Sequence, check_made_for, schedule_from_dict, stamped

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["GAP_TOLERANCE", "Backend", "BackendResult", "Result", "Status", "backends", "bound_family",
           "check_limits",
           "gap_of", "load_hint", "register_backend", "solve"]


def register_backend(name: str, loader: Callable[[], Backend], *, heuristic: bool = False,
                     problems: Iterable[Problem] = tuple(Problem),
                     objectives: Iterable[Objective] = tuple(Objective),
                     options: Iterable[str] | None = None, exact_over: str = "its own model",
                     model: str = "") -> None:
    """Register a plugin backend for ``problems``; ``loader`` imports it lazily.

    ``heuristic`` backends make no claim that their schedule is feasible.  Without
    ``options`` the backend declares none and receives whatever the caller passes.
    The built-in backends are rows of :data:`monet_ilp.problems.registry.BACKENDS`.
    """
    for problem in problems:
        registry.register(BackendSpec(name, Problem(problem), loader, tuple(objectives),
                                      None if options is None else tuple(options),
                                      None if heuristic else exact_over, model))


def backends() -> tuple[str, ...]:
    """Every backend name (``monet-ilp backends`` shows what each solves)."""
    return registry.names()


def solve(
    instance: Instance,
    backend: str = "auto",
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    **options: Any,
) -> Result:
    """Solve ``instance`` with ``backend`` and verify the answer with the evaluator.

    Parameters
    ----------
    instance
        The problem.
    backend
        ``auto`` (the default: on P1 the portfolio of ``formulations/p1_portfolio.md``,
        on P2 and P3 ``cpsat``), ``cpsat``, ``milp``, ``dp``, ``interval``, ``lns``, or
        ``heuristic:<name>`` (see :func:`backends`).
    time_limit
        Seconds for the whole call, model building and the evaluator's check included;
        it returns within ``time_limit + max(2, 0.1 * time_limit)`` seconds
        (``formulations/time_limits.md``).  A run that hits it still returns its best
        schedule and bound.
    workers
        Solver threads.
    hint
        A schedule to warm-start from (any backend's, or a baseline's).
    **options
        Backend-specific options (e.g. ``max_computes``, ``milp_solver``).
    """
    spec = registry.find(backend, instance.problem)
    registry.check_call(spec, instance.objective, options)
    check_limits(time_limit, workers)
    run = spec.load()  # imported before the clock starts: an import is not solving time
    start = time.perf_counter()
    raw = run(instance, time_limit=time_limit, workers=workers, hint=hint, **options)
    schedule, source = raw.schedule, ""
    if schedule is not None:
        source = raw.source or backend
        schedule = stamped(schedule, instance, source)
    metrics = evaluate(instance, schedule) if schedule is not None else None
    status, message, objective = raw.status, raw.message, raw.objective
    if metrics is not None:
        if not metrics.feasible:
            kinds = ", ".join(sorted(metrics.violation_counts))
            first = metrics.violations[0].message
            if spec.heuristic:  # a heuristic promises no feasibility: its miss is no bug
                status = Status.INFEASIBLE
                count = len(metrics.violations)
                message = (f"the {source} schedule breaks the instance ({count} violation"
                           f"{'' if count == 1 else 's'}: {kinds}; first: {first})")
            else:
                status = Status.ERROR
                message = f"the evaluator rejects the schedule ({kinds}; first: {first}); {message}".rstrip("; ")
        elif objective is not None and objective != metrics.objective_value:
            status = Status.ERROR
            message = (f"backend claims objective {objective} but the evaluator finds "
                       f"{metrics.objective_value}; this is a bug in {backend}")
        objective = metrics.objective_value
    bound = raw.bound
    holds_for = "" if bound is None else str(raw.stats.get("bound_class") or spec.exact_over or "its own model")
    if status in (Status.OPTIMAL, Status.FEASIBLE):
        # BD.C1: the bound is checked against the verified schedule, never capped at it.
        wrong = bound_error(objective, bound, bound_family(backend, raw.stats), holds_for)
        if wrong is not None:
            status, message = Status.ERROR, f"{wrong}; {message}".rstrip("; ")
    wall = time.perf_counter() - start  # the evaluator's check counts (formulations/time_limits.md)
    gap = gap_of(objective, bound) if status in (Status.OPTIMAL, Status.FEASIBLE) else None
    if status is Status.OPTIMAL and (gap is None or gap > GAP_TOLERANCE):
        status = Status.FEASIBLE
    return Result(backend, status, schedule, objective, bound,
                  gap, wall, metrics, message, raw.stats, source, holds_for)


def bound_family(backend: str, stats: Mapping[str, Any]) -> str:
    """The name of the bound a backend reports: the family its stats name, else the backend's."""
    family = stats.get("bound_source") or stats.get("bound_family")
    return f"{backend} ({family})" if family else backend


def check_limits(time_limit: float | None, workers: int | None) -> None:
    """Reject a time limit or thread count that no run can honour (``None`` means the default)."""
    if time_limit is not None and (isinstance(time_limit, bool) or not time_limit > 0
                                   or time_limit == float("inf")):
        raise MonetError(f"time limit {time_limit!r} is not a positive number of seconds",
                         field="time_limit", fix="give a positive number of seconds, e.g. 60")
    if workers is not None and (isinstance(workers, bool) or int(workers) != workers or workers < 1):
        raise MonetError(f"workers {workers!r} is not a positive whole number", field="workers",
                         fix="give 1 or more solver threads, e.g. 2")


def load_hint(path: str | Path, instance: Instance) -> Schedule | Sequence:
    """A warm start for ``instance`` from ``path``: a schedule, a GA result or decisions.

    * a schedule file (``"format": "monet-ilp/schedule"``) as it is;
    * a GA result (``"monet-ilp/ga"``): the schedule of its point that the evaluator
      accepts with the best value of the instance's objective;
    * decisions (``"monet-ilp/decisions"``): checked against the instance and decoded.

    Raises
    ------
    MonetError
        Another format, a GA result without a feasible point for this instance, or
        decisions that name something the instance does not have.
    """
    data = read_json(path)
    kind = data.get("format") if isinstance(data, dict) else None
    if kind == SCHEDULE_FORMAT:
        schedule = schedule_from_dict(data, source=str(path))
        check_made_for(schedule, instance, source=str(path))
        return schedule
    if kind == DECISIONS_FORMAT:
        return decode(instance, decisions_from_dict(data, source=str(path), instance=instance))
    if kind == GA_FORMAT:
        return _best_point(data, instance, str(path))
    raise InputFormatError(f"not a schedule, GA result or decisions file (format {kind!r})",
                           file=str(path), field="format",
                           fix=f'give a file whose "format" is "{SCHEDULE_FORMAT}", "{GA_FORMAT}" or '
                               f'"{DECISIONS_FORMAT}"')


def _best_point(data: dict[str, Any], instance: Instance, source: str) -> Schedule | Sequence:
    """The GA point whose schedule the evaluator accepts with the best objective value."""
    best, best_value = None, None
    points = data.get("points")
    if not isinstance(points, list):
        raise InputFormatError("a GA result needs a list of points", file=source, field="points",
                               fix="pass the file written by `monet-ilp ga --out`")
    for k, point in enumerate(points):
        try:
            schedule = schedule_from_dict(point["schedule"], source=source)
        except (KeyError, TypeError):
            raise InputFormatError(f"point {k} has no schedule", file=source,
                                   field=f"points[{k}].schedule",
                                   fix="pass the file written by `monet-ilp ga --out`") from None
        check_made_for(schedule, instance, source=f"{source}: points[{k}]")
        metrics = evaluate(instance, schedule)
        if metrics.feasible and (best_value is None or metrics.objective_value < best_value):
            best, best_value = schedule, metrics.objective_value
    if best is None:
        raise MonetError(f"no point of this GA result is feasible for instance {instance.name!r}",
                         file=source, field="points",
                         fix="run `monet-ilp ga` on this instance, or pass another hint")
    return best
