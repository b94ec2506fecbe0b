"""Recomputations the budget does not need, removed (``p1_interval.md`` P1I.L0).

A constructive heuristic adds recomputations one at a time, each chosen for the peak of
its moment; by the end, later ones have often freed enough memory that an earlier one
is no longer needed.  :func:`prune` removes them: it tries the recomputations of a plan
in turn, the dearest first, and keeps each removal whose canonical plan (the copy before
it held until the readers it served, the recomputations of its inputs that then serve
nobody dropped too) stays within the budget; passes repeat until one removes nothing.

On the literature's random DAGs at 0.8 of the topological peak, it takes the repair's
sequence of n = 250 from 23,164 cycles to 17,811 (0.16 s) and that of n = 1000 from
67,094 to 61,018 (1.7 s; ``p1_interval.md`` P1I.L0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monet_ilp.heuristics.liveness import replay
from monet_ilp.heuristics.starts import Starts, feasible_first
from monet_ilp.problems.p1.data import p1_data
from monet_ilp.problems.p1.interval import (
    OutsideClass,
    Plan,
    canonical_plan,
    plan_of_sequence,
    sequence_of_plan,
)
from monet_ilp.schedule import Sequence

if TYPE_CHECKING:
    from collections.abc import Callable

    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.instance import Instance
    from monet_ilp.problems.p1.data import P1Data

__all__ = ["prune", "pruned_starts", "pruner"]


def prune(data: P1Data, plan: Plan, *, deadline: Deadline | None = None) -> Plan:
    """``plan`` without the recomputations the budget does not need (P1I.L0).

    In each pass every recomputation is tried once, in decreasing order of its op's cost
    (then of its position); a removal is kept when the canonical plan without it costs
    less and its peak is within the budget.  Passes repeat until one removes nothing.  A
    plan over the budget is returned as it is.  Stops at ``deadline`` with what it has.
    """
    if not plan.fits(data):
        return plan
    while True:
        before = plan.cost
        plan = _pass(data, plan, deadline)
        if plan.cost == before or (deadline is not None and deadline.passed()):
            return plan


def _pass(data: P1Data, plan: Plan, deadline: Deadline | None) -> Plan:
    """One pass of :func:`prune`: each recomputation tried once (a removal kept moves the
    positions, so the candidates are listed again, less those already tried)."""
    # A recomputation is known by its node and its copy number; removing copy c of v
    # renumbers v's later copies.
    tried: set[tuple[int, int]] = set()
    while True:
        order = sorted((k for k in range(len(plan)) if plan.copy[k] > 0 and (plan.nodes[k], plan.copy[k]) not in tried),
                       key=lambda k: (-data.cost[plan.nodes[k]], -k))
        for k in order:
            if deadline is not None and deadline.passed():
                return plan
            v, c = plan.nodes[k], plan.copy[k]
            tried.add((v, c))
            try:
                trial = canonical_plan(data, plan.nodes[:k] + plan.nodes[k + 1:])
            except OutsideClass:
                continue
            if trial.peak <= data.budget and trial.cost < plan.cost:
                plan = trial
                tried = {(u, j - 1 if u == v and j > c else j) for u, j in tried if (u, j) != (v, c)}
                break
        else:
            return plan


def pruner(instance: Instance, *, deadline: Deadline | None = None) -> Callable[[Sequence], Sequence]:
    """:func:`prune` for a heuristic's sequences of ``instance`` (the ``polish`` of
    :func:`~monet_ilp.heuristics.repair.repair_sequence`): the sequence of the pruned
    plan, its ``meta`` the heuristic's with the figures measured again (``pruned_from``:
    the cycles before), or the sequence as it was when nothing was removed."""
    data = p1_data(instance)

    def polish(sequence: Sequence) -> Sequence:
        try:
            plan = plan_of_sequence(data, sequence)
        except OutsideClass:
            return sequence
        pruned = prune(data, plan, deadline=deadline)
        if pruned.cost >= plan.cost:
            return sequence
        steps = sequence_of_plan(data, pruned).steps
        claimed = replay(instance, steps)
        return Sequence(steps, meta={**sequence.meta, "compute_cycles": claimed.compute_cycles,
                                     "peak_bytes": claimed.peak_bytes, "recomputations": claimed.recomputations,
                                     "pruned_from": sequence.meta.get("compute_cycles")})

    return polish


def pruned_starts(instance: Instance, *, deadline: Deadline | None = None) -> Starts:
    """PF.S1's feasible-first sequences (:func:`~monet_ilp.heuristics.starts.feasible_first`)
    with the repair's rules pruned before they are compared (P1I.L0), within ``deadline``."""
    return feasible_first(instance, deadline=deadline, polish=pruner(instance, deadline=deadline))
