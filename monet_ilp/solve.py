"""The one entry point: ``solve(instance, backend=...) -> Result``, verified by the evaluator.

Backends (``monet_ilp.problems.*``, ``monet_ilp.heuristics``) return a
:class:`BackendResult`; this module times them, sends their schedule through the
evaluator, checks that the claimed objective equals the evaluator's, and computes
the gap.  A mismatch is a bug and is reported as status ``error``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.problems import registry
from monet_ilp.problems.registry import Backend, BackendSpec
from monet_ilp.results import GAP_TOLERANCE, BackendResult, Result, Status, gap_of
from monet_ilp.schedule import Schedule, Sequence, stamped

__all__ = ["GAP_TOLERANCE", "Backend", "BackendResult", "Result", "Status", "backends", "check_limits",
           "gap_of", "register_backend", "solve"]


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
    backend: str = "cpsat",
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
        ``cpsat``, ``milp``, ``dp``, or ``heuristic:<name>`` (see :func:`backends`).
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
    wall = time.perf_counter() - start  # the evaluator's check counts (formulations/time_limits.md)
    bound = raw.bound
    gap = gap_of(objective, bound) if status in (Status.OPTIMAL, Status.FEASIBLE) else None
    if status is Status.OPTIMAL and (gap is None or gap > GAP_TOLERANCE):
        status = Status.FEASIBLE
    return Result(backend, status, schedule, objective, bound,
                  gap, wall, metrics, message, raw.stats, source)


def check_limits(time_limit: float | None, workers: int | None) -> None:
    """Reject a time limit or thread count that no run can honour (``None`` means the default)."""
    if time_limit is not None and (isinstance(time_limit, bool) or not time_limit > 0
                                   or time_limit == float("inf")):
        raise MonetError(f"time limit {time_limit!r} is not a positive number of seconds",
                         field="time_limit", fix="give a positive number of seconds, e.g. 60")
    if workers is not None and (isinstance(workers, bool) or int(workers) != workers or workers < 1):
        raise MonetError(f"workers {workers!r} is not a positive whole number", field="workers",
                         fix="give 1 or more solver threads, e.g. 2")
