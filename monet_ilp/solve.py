"""The one entry point: ``solve(instance, backend=...) -> Result``, verified by the evaluator.

Backends (``monet_ilp.formulations.*``, ``monet_ilp.heuristics``) return a
:class:`BackendResult`; this module times them, sends their schedule through the
evaluator, checks that the claimed objective equals the evaluator's, and computes
the gap.  A mismatch is a bug and is reported as status ``error``.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.instance import Instance, Problem
from monet_ilp.results import GAP_TOLERANCE, BackendResult, Result, Status, gap_of
from monet_ilp.schedule import Schedule, Sequence, stamped

__all__ = ["GAP_TOLERANCE", "Backend", "BackendResult", "Result", "Status", "backends", "check_limits",
           "gap_of", "register_backend", "solve"]


Backend = Callable[..., BackendResult]
_BACKENDS: dict[str, Callable[[], Backend]] = {}


#: Backends that promise no feasibility: a schedule of theirs that breaks the
#: instance is reported ``infeasible`` (with the violation), not ``error``.
_HEURISTICS: set[str] = set()


def register_backend(name: str, loader: Callable[[], Backend], *, heuristic: bool = False) -> None:
    """Register a backend; ``loader`` imports it lazily (solver libraries are heavy).

    ``heuristic`` backends make no claim that their schedule is feasible.
    """
    _BACKENDS[name] = loader
    if heuristic:
        _HEURISTICS.add(name)


def backends() -> tuple[str, ...]:
    return tuple(sorted(_BACKENDS))


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
    if backend not in _BACKENDS:
        from difflib import get_close_matches

        close = get_close_matches(backend, list(_BACKENDS), n=1)
        raise MonetError(f"unknown backend {backend!r}", field="backend",
                         fix=(f"did you mean {close[0]!r}? " if close else "")
                         + f"use one of: {', '.join(backends())}")
    check_limits(time_limit, workers)
    run = _BACKENDS[backend]()
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
            if backend in _HEURISTICS:  # a heuristic promises no feasibility: its miss is no bug
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


def _heuristic_loader(name: str) -> Callable[[], Backend]:
    def load() -> Backend:
        from monet_ilp.heuristics import HEURISTICS, memory_aware_schedule

        # memory_aware is the multi-core list scheduler that keeps to the SRAM (P3).
        heuristic = memory_aware_schedule if name == "memory_aware" else HEURISTICS[name]

        def run(instance, *, time_limit=None, workers=None, hint=None, **options):
            schedule = heuristic(instance)
            return BackendResult(Status.FEASIBLE, schedule, message=f"heuristic {name}",
                                 source=f"heuristic:{name}")

        return run

    return load


for _name in ("store_all", "sqrt", "greedy", "memory_aware"):
    register_backend(f"heuristic:{_name}", _heuristic_loader(_name), heuristic=True)


def _lazy(module: str, attr: str) -> Callable[[], Backend]:
    def load() -> Backend:
        import importlib

        return getattr(importlib.import_module(module), attr)

    return load


def _by_problem(p1: Callable[[], Backend], p2: Callable[[], Backend],
                p3: Callable[[], Backend]) -> Callable[[], Backend]:
    """One backend name, one model per problem class.

    The models are imported when the backend is loaded, before :func:`solve` starts
    its clock: an import (about a second, once per process) is not solving time.
    """

    def load() -> Backend:
        models = {Problem.P1: p1(), Problem.P2: p2(), Problem.P3: p3()}

        def run(instance: Instance, **kwargs: Any) -> BackendResult:
            return models[instance.problem](instance, **kwargs)

        return run

    return load


register_backend("cpsat", _by_problem(_lazy("monet_ilp.formulations.cpsat", "solve_cpsat"),
                                      _lazy("monet_ilp.formulations.cpsat.p2_model", "solve_p2_cpsat"),
                                      _lazy("monet_ilp.formulations.cpsat.p3_model", "solve_p3_cpsat")))
register_backend("milp", _by_problem(_lazy("monet_ilp.formulations.milp", "solve_milp"),
                                     _lazy("monet_ilp.formulations.milp.p2_model", "solve_p2_milp"),
                                     _lazy("monet_ilp.formulations.milp.p3_model", "solve_p3_milp")))
register_backend("dp", _lazy("monet_ilp.formulations.dp", "solve_dp"))
register_backend("heuristic:lp-round", _lazy("monet_ilp.formulations.milp", "solve_lp_rounding"),
                 heuristic=True)
