"""The P1 feasible-first starts, made once per solve and shared (``formulations/p1_portfolio.md`` PF.S1).

``auto`` runs them before its members and hands the same sequences to the ``milp`` and
``lns`` members (their ``_starts``), which otherwise make them themselves.  Nothing here
is verified: each caller checks a start against what it needs (the evaluator, the
budget, its class).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monet_ilp.errors import MonetError
from monet_ilp.heuristics.checkpointing import chen_greedy_sequence
from monet_ilp.heuristics.evict import evict_sequence
from monet_ilp.heuristics.repair import repair_sequence
from monet_ilp.heuristics.store_all import store_all_sequence

if TYPE_CHECKING:
    from collections.abc import Callable

    from monet_ilp.heuristics.clock import Clock
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Sequence

__all__ = ["FEASIBLE_FIRST", "Starts", "feasible_first"]

#: The heuristics, in the order they are made (and preferred among equals).
FEASIBLE_FIRST = ("repair", "evict", "greedy", "store_all")

#: ``(name, sequence)`` per heuristic; ``None`` where it made none.  A sequence may be
#: over the budget: store-all, Chen's greedy, and the repair's lowest peak when no rule fits.
Starts = list[tuple[str, "Sequence | None"]]


def feasible_first(instance: Instance, *, deadline: Clock | None = None,
                   polish: Callable[[Sequence], Sequence] | None = None) -> Starts:
    """Each feasible-first heuristic's P1 sequence, in :data:`FEASIBLE_FIRST` order.

    Once one has been made, the rest are skipped when ``deadline`` has passed (Chen's
    greedy also cuts its own search short then).  A heuristic that refuses the
    instance (a :class:`MonetError`) gives ``None``.  ``polish`` goes to the repair
    (each rule's sequence within the budget, :func:`repair_sequence`).
    """
    makers: dict[str, Callable[[], Sequence | None]] = {
        # Over the budget when no rule fits: the lowest peak a rule reached (P1I.L5's start).
        "repair": lambda: repair_sequence(instance, best_effort=True, deadline=deadline, polish=polish),
        "evict": lambda: evict_sequence(instance),
        "greedy": lambda: chen_greedy_sequence(instance, deadline=deadline),
        "store_all": lambda: store_all_sequence(instance),
    }
    found: Starts = []
    for name in FEASIBLE_FIRST:
        if found and deadline is not None and deadline.passed():
            break
        try:
            found.append((name, makers[name]()))
        except MonetError:
            found.append((name, None))
    return found
