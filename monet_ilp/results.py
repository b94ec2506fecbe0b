"""What backends return and what :func:`monet_ilp.solve.solve` makes of it: statuses, results, gaps.

Also the two rules every consumer of verified points shares: the relative gap
between a value and a lower bound (:func:`gap_of`) and Pareto dominance
(:func:`dominated_by`, :func:`non_dominated`), used by the Pareto sweep, the GA, the
grader and the plots.

The layer between the evaluator and the backends: every backend returns a
:class:`BackendResult`; ``solve`` verifies it with the evaluator and returns a
:class:`Result`.  Backends import this module, never ``monet_ilp.solve``, so that the
dependency points one way (``solve`` loads the backends, not the reverse).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from monet_ilp.evaluate import Metrics, verified

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["BOUND_TOLERANCE", "GAP_TOLERANCE", "GA_FORMAT", "BackendResult", "Result", "Status",
           "bound_error", "dominated_by", "gap_of", "hint_or_unknown", "non_dominated", "objectives_of"]

#: The ``format`` of a GA result file: :func:`monet_ilp.ga.nsga2.run_ga` writes it;
#: the plots and the grader read it (here, below all three, so none imports another).
GA_FORMAT = "monet-ilp/ga"

P = TypeVar("P")


class Status(StrEnum):
    OPTIMAL = "optimal"  # proven by the solver: gap 0 within tolerance
    FEASIBLE = "feasible"  # a verified schedule, not proven optimal
    INFEASIBLE = "infeasible"  # proven: no schedule exists; heuristics: their schedule breaks the instance
    UNKNOWN = "unknown"  # no schedule and no proof (e.g. time limit)
    ERROR = "error"  # the backend failed, or its claim disagrees with the evaluator


@dataclass(frozen=True)
class BackendResult:
    """What a backend returns before verification.

    ``objective`` is the backend's own value for ``schedule``; ``bound`` the best
    proven lower bound on the optimum (``None`` if it has none).  ``source`` says
    where the schedule came from when it is not the backend's own search: a
    ``hint:<name>`` the solver returned because it found nothing better, a
    ``heuristic:<name>``, ...  Left empty, the source is the backend's name.
    """

    status: Status
    schedule: Schedule | Sequence | None = None
    objective: int | float | None = None
    bound: int | float | None = None
    message: str = ""
    stats: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""


@dataclass(frozen=True)
class Result:
    """A verified result: status, schedule, objective, bound, gap, time and metrics.

    ``source`` names what produced the schedule (``cpsat``, ``milp``,
    ``hint:memory_aware``, ``heuristic:greedy``, ...; empty without a schedule); the
    schedule's ``meta`` carries it too, with the fingerprint of the instance it solves.
    ``bound_holds_for`` names the class of schedules ``bound`` holds for: the backend's
    ``stats["bound_class"]`` when it names one, else the class its registry row is exact
    over; ``solve`` has checked the bound against the schedule (BD.C1).
    """

    backend: str
    status: Status
    schedule: Schedule | Sequence | None
    objective: int | float | None
    bound: int | float | None
    gap: float | None
    wall_time_s: float
    metrics: Metrics | None = None  # the evaluator's verdict on the schedule, when there is one
    message: str = ""
    stats: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    bound_holds_for: str = ""  # the class of schedules ``bound`` holds for (BD.C1)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stats", MappingProxyType(dict(self.stats)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "status": str(self.status),
            "source": self.source,
            "objective": self.objective,
            "bound": self.bound,
            "bound_holds_for": self.bound_holds_for,
            "gap": self.gap,
            "wall_time_s": round(self.wall_time_s, 4),
            "feasible": None if self.metrics is None else self.metrics.feasible,
            "message": self.message,
            "stats": dict(self.stats),
        }


#: Gap tolerance under which a solver's claim of optimality is accepted.
GAP_TOLERANCE = 1e-9

#: How far, relative to ``max(1, |value|)``, a bound may lie above a verified value before
#: :func:`bound_error` calls it wrong (formulations/bounds.md, BD.C1).  Integer objectives
#: compare exactly in effect (their bounds are whole numbers); the tolerance absorbs the
#: rounding of real-valued objectives (the weighted one, P4's seconds).
BOUND_TOLERANCE = 1e-9


def gap_of(objective: float | None, bound: float | None) -> float | None:
    """Relative gap ``(objective - bound) / |objective|`` (0 when both are 0), as it is.

    Never clamped: a bound above the objective gives a negative gap, which
    :func:`bound_error` turns into an error wherever a result is reported.
    """
    if objective is None or bound is None:
        return None
    if objective == 0:
        return 0.0 if bound == 0 else None
    return (objective - bound) / abs(objective)


def bound_error(value: float | None, bound: float | None, family: str, holds_for: str, *,
                tolerance: float = BOUND_TOLERANCE) -> str | None:
    """Why ``bound`` cannot be a lower bound on ``value``, or ``None`` when it can (BD.C1).

    ``value`` is the evaluator's objective of a verified schedule that lies in the class
    ``holds_for`` names; ``family`` names where the bound came from.  A bound above the
    value beyond ``tolerance`` (relative to ``max(1, |value|)``; :data:`BOUND_TOLERANCE`
    unless the bound's solver has a looser one) is a bug in that bound: the message names
    the family, its class and both values.
    """
    if value is None or bound is None:
        return None
    if bound - value <= tolerance * max(1.0, abs(value)):
        return None
    return (f"the {family} bound {bound:.10g} (holds for {holds_for}) exceeds {value:.10g}, the "
            f"evaluator's objective of a verified schedule in that class; the bound is wrong (a bug)")


def objectives_of(point: Any) -> tuple[Any, ...]:
    """The objective values of a point: ``(latency_cycles, energy_pj)`` of a mapping, else the tuple."""
    if isinstance(point, Mapping):
        return point["latency_cycles"], point["energy_pj"]
    return tuple(point)


def dominated_by(a: Any, b: Any) -> bool:
    """Whether point ``a`` is dominated by point ``b``: ``b`` is no worse in every objective and
    better in one (all minimised).  Points as :func:`objectives_of` reads them."""
    va, vb = objectives_of(a), objectives_of(b)
    pairs = list(zip(va, vb, strict=True))
    return all(y <= x for x, y in pairs) and any(y < x for x, y in pairs)


def non_dominated(points: Iterable[P], key: Callable[[P], Seq[float]] = objectives_of, *,
                  keep_equal: bool = True) -> list[P]:
    """The points no other point dominates (:func:`dominated_by`), sorted by their objectives.

    Parameters
    ----------
    points
        Any objects; ``key`` gives their objective values (all minimised).  By default
        mappings with ``latency_cycles`` and ``energy_pj`` (the points of a Pareto
        file), or tuples of values.
    key
        The objective values of a point.
    keep_equal
        Whether points equal to a front point are all kept (equal points do not
        dominate each other), or only the first of them in ``points``' order.

    Returns
    -------
    list
        The same objects, unchanged, sorted by ``key`` (a stable sort: equal points
        keep their order).
    """
    front: list[P] = []
    kept: list[tuple[Any, ...]] = []
    # In objective order, a point's dominators (and its equals) all come before it.
    for p in sorted(points, key=lambda p: tuple(key(p))):
        values = tuple(key(p))
        if any(dominated_by(values, q) or (not keep_equal and q == values) for q in kept):
            continue
        front.append(p)
        kept.append(values)
    return front


def hint_or_unknown(instance: Instance, schedule: Schedule | Sequence | None, name: str, reason: str,
                    bound: int | float | None, stats: dict[str, Any]) -> BackendResult:
    """What a backend returns when its solver has no schedule of its own (out of time, ...).

    ``schedule`` (a hint or baseline called ``name``) as FEASIBLE, ``source``
    ``hint:<name>``, if the evaluator accepts it, else UNKNOWN.  ``bound`` must hold for
    every schedule, the hint's included (a hint may lie outside the backend's class); a
    bound over the class alone goes in ``stats`` (``class_bound``), where it is not
    compared with the hint.  ``reason`` starts the message.
    """
    metrics = verified(instance, schedule)
    if metrics is None:
        return BackendResult(Status.UNKNOWN, bound=bound, stats=stats, message=f"{reason}; no schedule found")
    value = metrics.objective_value
    stats.update(solution=name, recomputations=metrics.recomputations, transfers=metrics.transfers,
                 bound_class="every schedule (BD.C2: the hint may lie outside the model's class)")
    return BackendResult(Status.FEASIBLE, schedule, value, bound,
                         f"{reason}; returning the {name} schedule", stats, source=f"hint:{name}")
