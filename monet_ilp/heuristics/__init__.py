"""Baseline schedulers (a heuristic backend): store-all and Chen's checkpointing.

Each takes an :class:`~monet_ilp.instance.Instance` and returns a schedule for the
evaluator: a P1 :class:`~monet_ilp.schedule.Sequence` (``HEURISTICS``) or, for
several cores, a timed :class:`~monet_ilp.schedule.Schedule`
(:func:`store_all_schedule`).  They give reference points and solver hints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from monet_ilp.heuristics.checkpointing import (
    chen_greedy_sequence,
    chen_sqrt_sequence,
    keep_across_segments,
    plan_order,
    rematerialize,
)
from monet_ilp.heuristics.liveness import (
    SequenceCost,
    place_releases,
    replay,
    require_sequence_form,
    sequence_form_applies,
)
from monet_ilp.heuristics.memory_aware import memory_aware_schedule
from monet_ilp.heuristics.store_all import store_all, store_all_schedule, store_all_sequence

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule, Sequence

#: The baselines by name.  ``store_all`` gives a :class:`Sequence` when the instance
#: allows one (one core holding the graph inputs) and a timed :class:`Schedule`
#: otherwise; ``sqrt`` and ``greedy`` give P1 sequences only.
HEURISTICS: dict[str, Callable[[Instance], Sequence | Schedule]] = {
    "store_all": store_all,
    "sqrt": chen_sqrt_sequence,
    "greedy": chen_greedy_sequence,
}

__all__ = [
    "HEURISTICS",
    "SequenceCost",
    "chen_greedy_sequence",
    "chen_sqrt_sequence",
    "keep_across_segments",
    "memory_aware_schedule",
    "place_releases",
    "plan_order",
    "rematerialize",
    "replay",
    "require_sequence_form",
    "sequence_form_applies",
    "store_all",
    "store_all_schedule",
    "store_all_sequence",
]
