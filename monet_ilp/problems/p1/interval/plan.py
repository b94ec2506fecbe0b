"""Schedules of the interval class as plain data: a :class:`Plan` and its conversions.

A plan is the list of computations in order (position ``k`` holds the ``k``-th
computation), put in the canonical form of ``formulations/p1_interval.md`` §5: useless
recomputations dropped (P1I.C9), each copy held from its computation to its last reader
(the tight ends of P1I.C10), inputs until their last reader.  Both directions of the
backend go through it: a hint :class:`~monet_ilp.schedule.Sequence` becomes a plan
(:func:`plan_of_sequence`) and then a full assignment of the model; a solver's
positions become a plan (:func:`canonical_plan`) and then a Sequence
(:func:`sequence_of_plan`).  Solver-free, so the LNS uses it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monet_ilp.schedule import Compute, Release, Schedule, Sequence

if TYPE_CHECKING:
    from monet_ilp.problems.p1.data import P1Data

__all__ = ["OutsideClass", "Plan", "canonical_form", "canonical_plan", "computations_of", "memory_of",
           "plan_of_sequence", "sequence_of_plan"]


class OutsideClass(ValueError):
    """A schedule the interval model cannot represent; the message says why."""


@dataclass(frozen=True)
class Plan:
    """A schedule of the interval class in canonical form (``p1_interval.md`` §5).

    Attributes
    ----------
    nodes
        The node computed at each position ``0 .. K-1``.
    copy
        The copy number of each computation (0: the node's first computation).
    end
        The last position at which each computation's value is held: its last reader
        before the node's next computation, or its own position (P1I.V3, tight).
    input_end
        The last position at which each read graph input is held: its last reader.
    cost
        The compute cycles (P1I.O1): the evaluator's ``compute_cycles``.
    peak
        The largest memory at a position, in units of ``P1Data.scale`` (EV.E3's sum).
    """

    nodes: tuple[int, ...]
    copy: tuple[int, ...]
    end: tuple[int, ...]
    input_end: tuple[int, ...]
    cost: int
    peak: int

    def __len__(self) -> int:
        return len(self.nodes)

    def counts(self, n: int) -> list[int]:
        """Computations of each node ``0 .. n-1``."""
        counts = [0] * n
        for v in self.nodes:
            counts[v] += 1
        return counts

    def fits(self, data: P1Data) -> bool:
        return self.peak <= data.budget

    def memory(self, data: P1Data) -> list[int]:
        """The memory at each position (§2, units of ``data.scale``); its maximum is ``peak``."""
        return memory_of(data, self.nodes, self.end, self.input_end)

    def overflow(self, data: P1Data) -> tuple[int, int]:
        """How far the plan is over the budget: its peak (at least the budget) and the
        memory above the budget summed over positions (P1I.L5's measure, ``(B, 0)`` when it fits)."""
        memory = self.memory(data)
        return max(data.budget, self.peak), sum(max(0, m - data.budget) for m in memory)

    def starts(self) -> dict[tuple[int, int], int]:
        """Position of copy ``j`` of node ``v``, keyed ``(v, j)``."""
        return {(v, j): k for k, (v, j) in enumerate(zip(self.nodes, self.copy, strict=True))}


def computations_of(data: P1Data, schedule: Schedule | Sequence) -> list[int]:
    """The node of each computation of ``schedule`` (a timed one by start time).

    Raises
    ------
    OutsideClass
        An op is not a node of ``data``.
    """
    if isinstance(schedule, Schedule):
        ops = [r.op for r in sorted(schedule.ops, key=lambda r: (r.start, r.end))]
    else:
        ops = list(schedule.computations)
    index = {op: i for i, op in enumerate(data.ops)}
    nodes = []
    for op in ops:
        v = index.get(op)
        if v is None:
            raise OutsideClass(f"op {op!r} is not in the graph")
        nodes.append(v)
    return nodes


def plan_of_sequence(data: P1Data, schedule: Schedule | Sequence) -> Plan:
    """The canonical plan of a schedule's computations (its own releases are not used).

    Raises
    ------
    OutsideClass
        The schedule breaks the order of first computations, recomputes after the
        first optimizer op, reads a value before computing it, or leaves a node out.
    """
    return canonical_plan(data, computations_of(data, schedule))


def canonical_plan(data: P1Data, nodes: Iterable[int]) -> Plan:
    """The canonical form (``p1_interval.md`` §5) of a list of computations.

    Useless recomputations (no reader between them and the node's next computation)
    are dropped until none is left, which never raises cost or memory; ends are the
    tight ones.  The result is checked against the class's order rules.

    Raises
    ------
    OutsideClass
        As :func:`plan_of_sequence`.
    """
    order = list(nodes)
    _check_order(data, order)
    order, end, input_end, _ = canonical_form(data, order)
    count = [0] * data.n
    copy = []
    for v in order:
        copy.append(count[v])
        count[v] += 1
    peak = max(memory_of(data, order, end, input_end), default=0)
    return Plan(tuple(order), tuple(copy), tuple(end), tuple(input_end),
                sum(data.cost[v] for v in order), peak)


def canonical_form(data: P1Data, order: list[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """``order`` without its useless recomputations (no reader before the node is computed
    again, P1I.C9; dropped until none is left), each computation's tight end (its last
    reader, or its own position), each read input's end, and each node's first position.
    The order's rules are not checked (:func:`canonical_plan` does)."""
    n, preds, node_inputs = data.n, data.preds, data.node_inputs
    while True:
        latest = [-1] * n
        first = [-1] * n
        end = list(range(len(order)))
        input_end = [-1] * len(data.input_ids)
        for k, v in enumerate(order):
            for u in preds[v]:
                end[latest[u]] = k
            for g in node_inputs[v]:
                input_end[g] = k
            latest[v] = k
            if first[v] < 0:
                first[v] = k
        useless = {k for k, v in enumerate(order) if end[k] == k and first[v] != k}
        if not useless:
            return order, end, input_end, first
        order = [v for k, v in enumerate(order) if k not in useless]


# ------------------------------------------------------------------ the checks
def _check_order(data: P1Data, order: list[int]) -> None:
    """P1I.C4 (order of first computations), P1I.C6 (no recomputation after the first
    update), every read preceded by a computation of what it reads."""
    n = data.n
    seen = [False] * n
    firsts: list[int] = []
    update_at: int | None = None
    for k, v in enumerate(order):
        if seen[v]:
            if update_at is not None:
                raise OutsideClass(f"it recomputes {data.ops[v]!r} after the first optimizer op "
                                   f"{data.ops[data.first_update]!r} (position {k})")
        else:
            missing = [u for u in data.preds[v] + data.after[v] if not seen[u]]
            if missing:
                raise OutsideClass(f"{data.ops[v]!r} runs before {data.ops[missing[0]]!r}, "
                                   "which it reads")
            if data.fixed_order and v != len(firsts):
                raise OutsideClass(f"its first computations leave the graph order ({data.ops[v]!r} "
                                   f"comes {len(firsts) + 1}th, it is op {v + 1})")
            if v >= data.first_update and v != data.first_update + sum(f >= data.first_update for f in firsts):
                raise OutsideClass(f"optimizer op {data.ops[v]!r} runs out of order")
            if v < data.first_update and update_at is not None:
                raise OutsideClass(f"{data.ops[v]!r} runs after the first optimizer op")
            if v == data.first_update:
                update_at = k
            seen[v] = True
            firsts.append(v)
    if len(firsts) != n:
        left = next(v for v in range(n) if not seen[v])
        raise OutsideClass(f"it never computes {data.ops[left]!r}")


Positions = list[int] | tuple[int, ...]


def memory_of(data: P1Data, order: Positions, end: Positions, input_end: Positions) -> list[int]:
    """EV.E3 at each position ``t``: every copy with start <= t <= end, every input with end >= t."""
    delta = [0] * (len(order) + 1)
    for k, v in enumerate(order):
        delta[k] += data.size[v]
        delta[end[k] + 1] -= data.size[v]
    for g, last in enumerate(input_end):
        delta[0] += data.input_size[g]
        delta[last + 1] -= data.input_size[g]
    held, out = 0, []
    for k in range(len(order)):
        held += delta[k]
        out.append(held)
    return out


# ------------------------------------------------------------------ back to a Sequence
def sequence_of_plan(data: P1Data, plan: Plan, meta: Mapping[str, Any] | None = None) -> Sequence:
    """The Sequence of a plan (``p1_interval.md`` §5): unread inputs released first, then
    each computation followed by the release of every value whose copy ends there."""
    release_after: dict[int, list[str]] = {}
    for k, v in enumerate(plan.nodes):
        release_after.setdefault(plan.end[k], []).extend(data.outputs[v])
    for g, last in enumerate(plan.input_end):
        release_after.setdefault(last, []).append(data.input_ids[g])
    steps: list[Compute | Release] = [Release(t) for t in data.unread_inputs]
    for k, v in enumerate(plan.nodes):
        steps.append(Compute(data.ops[v]))
        steps.extend(Release(t) for t in release_after.get(k, ()))
    return Sequence(tuple(steps), meta=dict(meta or {}))
