"""What backends return and what :func:`monet_ilp.solve.solve` makes of it: statuses, results, gaps.

The layer between the evaluator and the backends: every backend returns a
:class:`BackendResult`; ``solve`` verifies it with the evaluator and returns a
:class:`Result`.  Backends import this module, never ``monet_ilp.solve``, so that the
dependency points one way (``solve`` loads the backends, not the reverse).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Mapping

from monet_ilp.evaluate import Metrics, verified
from monet_ilp.instance import Instance
from monet_ilp.schedule import Schedule, Sequence

__all__ = ["GAP_TOLERANCE", "BackendResult", "Result", "Status", "gap_of", "hint_or_unknown"]


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "stats", MappingProxyType(dict(self.stats)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "status": str(self.status),
            "source": self.source,
            "objective": self.objective,
            "bound": self.bound,
            "gap": self.gap,
            "wall_time_s": round(self.wall_time_s, 4),
            "feasible": None if self.metrics is None else self.metrics.feasible,
            "message": self.message,
            "stats": dict(self.stats),
        }


#: Gap tolerance under which a solver's claim of optimality is accepted.
GAP_TOLERANCE = 1e-9


def gap_of(objective: float | None, bound: float | None) -> float | None:
    """Relative gap ``(objective - bound) / |objective|`` (0 when both are 0)."""
    if objective is None or bound is None:
        return None
    if objective == 0:
        return 0.0 if bound >= 0 else None
    return max(0.0, (objective - bound) / abs(objective))


def hint_or_unknown(instance: Instance, schedule: Schedule | Sequence | None, name: str, reason: str,
                    bound: int | float | None, stats: dict[str, Any]) -> BackendResult:
    """What a backend returns when its solver has no schedule of its own (out of time, ...).

    ``schedule`` (a hint or baseline called ``name``) as FEASIBLE, ``source``
    ``hint:<name>``, if the evaluator accepts it, else UNKNOWN; ``bound`` is the best
    bound known, capped at the schedule's value.  ``reason`` starts the message.
    """
    metrics = verified(instance, schedule)
    if metrics is None:
        return BackendResult(Status.UNKNOWN, bound=bound, stats=stats, message=f"{reason}; no schedule found")
    value = metrics.objective_value
    stats.update(solution=name, recomputations=metrics.recomputations, transfers=metrics.transfers)
    return BackendResult(Status.FEASIBLE, schedule, value, None if bound is None else min(bound, value),
                         f"{reason}; returning the {name} schedule", stats, source=f"hint:{name}")
