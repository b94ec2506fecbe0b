"""The baselines as backends of :func:`monet_ilp.solve.solve` (``heuristic:<name>``).

They prove nothing: their schedule goes to the evaluator like any other, and one that
breaks the instance is reported ``infeasible``.  They take no options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monet_ilp.heuristics import HEURISTICS, memory_aware_schedule
from monet_ilp.heuristics.evict import evict_sequence
from monet_ilp.heuristics.repair import repair_sequence
from monet_ilp.results import BackendResult, Status

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["evict", "greedy", "memory_aware", "repair", "sqrt", "store_all"]


def _run(name: str, schedule: Schedule | Sequence) -> BackendResult:
    return BackendResult(Status.FEASIBLE, schedule, message=f"heuristic {name}", source=f"heuristic:{name}")


def store_all(instance: Instance, **_: Any) -> BackendResult:
    """Keep every activation (``time_limit``, ``workers`` and ``hint`` do not apply)."""
    return _run("store_all", HEURISTICS["store_all"](instance))


def sqrt(instance: Instance, **_: Any) -> BackendResult:
    """Chen's sqrt(n) checkpointing (a P1 sequence)."""
    return _run("sqrt", HEURISTICS["sqrt"](instance))


def greedy(instance: Instance, **_: Any) -> BackendResult:
    """Chen's greedy checkpointing under the budget (a P1 sequence)."""
    return _run("greedy", HEURISTICS["greedy"](instance))


def memory_aware(instance: Instance, **_: Any) -> BackendResult:
    """The multi-core list scheduler that keeps to the SRAM (P3)."""
    return _run("memory_aware", memory_aware_schedule(instance))


def evict(instance: Instance, **_: Any) -> BackendResult:
    """Feasible first on P1: eviction and recomputation on demand (``heuristics/evict.py``)."""
    sequence = evict_sequence(instance)
    if sequence is None:
        return BackendResult(Status.UNKNOWN, message="no eviction rule found a schedule within the budget "
                             "(try `monet-ilp min-budget`)", source="heuristic:evict")
    return _run("evict", sequence)


def repair(instance: Instance, **_: Any) -> BackendResult:
    """Feasible first on P1: store-all repaired by drops and recomputations (``heuristics/repair.py``)."""
    sequence = repair_sequence(instance)
    if sequence is None:
        return BackendResult(Status.UNKNOWN, message="no rule of the repair made the sequence fit "
                             "the budget (try heuristic:evict, or `monet-ilp min-budget`)",
                             source="heuristic:repair")
    return _run("repair", sequence)
