"""Feasible first, the other way round: repair the store-all sequence until it fits the budget.

A constructive heuristic (Instance -> Sequence) for P1 (``formulations/p1_problem.md``,
fixed order of first computations).  Store-all keeps every value from its computation
to its last reader; its memory profile is counted per *slot* (the first computation
of one node, with the recomputations placed just before it).  While the peak slot
``t`` is over the budget, one value held across ``t`` but not read there is *dropped*
over the gap between two consecutive reads ``r < t < q``: freed after ``r`` and
recomputed just before a slot ``q'`` in ``(t, q]``.  That frees its bytes on every
slot strictly between ``r`` and ``q'`` and costs one recomputation.  ``q'`` is the
latest slot at which its recomputation's inputs are held anyway (so nothing else
grows); without one, at ``q`` with the inputs that are not held kept a little longer,
or (only when no drop of the other kinds fits, unless the rule is ``mixed``) recomputed
there too: back to what is held (at most :data:`DEPTH` levels), or a few levels of them
(:data:`KEPT_DEPTHS`) with the values below those kept until ``q`` instead, when no
slot rises over the current peak.  Among the values that qualify, the one a
:class:`RepairRule` ranks first goes first: the least cost per byte freed, weighed by
the number of slots it frees to a power (ties: the longer gap).  No one rule is best on
every graph, so :func:`repair_sequence` runs each of :data:`RULES` and keeps the
cheapest sequence that fits (else, with ``best_effort``, the lowest peak).

It keeps a schedule's first computations, never recomputes from the first optimizer op
on (EV.E2), and never recomputes a graph input.  Releases are placed by liveness
(:func:`~monet_ilp.heuristics.liveness.place_releases`), so the sequence's peak is at
most the profile's.  The search stops when the profile fits (the sequence is returned)
or when no value qualifies (``None``, or with ``best_effort`` the sequence as far as
it got, over the budget).  It runs in ``O(iterations * live values)``
Python steps plus one vectorised profile update per drop.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from monet_ilp.heuristics.evict import NodeView
from monet_ilp.heuristics.liveness import place_releases, replay
from monet_ilp.schedule import Sequence

if TYPE_CHECKING:
    from collections.abc import Callable
    from collections.abc import Sequence as Sequence_

    from monet_ilp.heuristics.clock import Clock
    from monet_ilp.instance import Instance

__all__ = ["DEPTH", "KEPT_DEPTHS", "POLISH_WITHIN", "RULES", "RepairRule", "repair_sequence"]

#: Levels of inputs a drop may recompute with the dropped value, at the same slot (their
#: bytes counted as a node-order recomputation holds them, each freed after its last reader).
DEPTH = 64
#: The levels a closure cut short recomputes before it keeps the values below them.  On
#: the literature's random DAG n = 1000 at 0.8 of the topological peak, the whole
#: closures of the last drops recomputed 180-370 nodes to free under 100 bytes each; cut
#: short, the first rule's repair costs 67,094 cycles instead of 85,923.
KEPT_DEPTHS = (1, 2, 4, 8)


@dataclass(frozen=True)
class RepairRule:
    """How the repair ranks the drops that lower the peak slot.

    A drop of ``v`` that costs ``c`` cycles (its recomputation and the inputs recomputed
    with it) and frees ``v``'s ``b`` bytes on ``k`` slots ranks by ``c / (b * k**span)``:
    ``span = 0`` is the cost per byte at the peak; a larger ``span`` prefers drops that
    free more slots (memory over time), which lower the peaks still to come too.
    ``mixed`` weighs the drops that recompute inputs with the value alongside the others;
    without it they are weighed only when no other drop fits.
    """

    span: float = 0.0
    mixed: bool = False

    @property
    def name(self) -> str:
        return f"span {self.span:g}" + (", mixed" if self.mixed else "")


#: The rules :func:`repair_sequence` runs, in turn.  On the literature's random DAGs at
#: 0.8-0.9 of the topological peak (n = 150-1000), each of them gave the cheapest
#: sequence on some instance, and the cheapest of them cost 0-32 % less than the first
#: alone (``scripts/bench_remat.py``; ``formulations/p1_portfolio.md`` PF.S1).
RULES = (RepairRule(0.0), RepairRule(1.0), RepairRule(0.5), RepairRule(1.5), RepairRule(1.0, mixed=True))

#: :func:`repair_sequence` polishes a rule's sequence only when it costs at most this
#: many times the cheapest one so far.  On the literature's random DAG n = 1000 at 0.8,
#: the pruning of P1I.L0 takes the rules' 67,094-115,892 cycles to 61,018-66,470, in
#: 1.7 s for the cheapest and 3.5-7.6 s for each of the others; on n = 150-1000 at
#: 0.8-0.9 the rule that gave the cheapest polished sequence was within 1.01 times the
#: cheapest one before (n = 250 at 0.8: the only one that fits).
POLISH_WITHIN = 1.25


class _Copy:
    """One held copy of a value: the slot it is computed in and the slots that read it
    (sorted; ``end`` is the last of them, or ``start`` when there is none)."""

    __slots__ = ("end", "reads", "start")

    def __init__(self, start: int, reads: list[int] | None = None) -> None:
        self.start = start
        self.reads = reads if reads is not None else []
        self.end = self.reads[-1] if self.reads else start

    def cut(self, k: int) -> list[int]:
        """Drop the reads from the ``k``-th on and return them."""
        later = self.reads[k:]
        del self.reads[k:]
        self.end = self.reads[-1] if self.reads else self.start
        return later

    def read(self, slot: int) -> None:
        bisect.insort(self.reads, slot)
        self.end = max(self.end, slot)


#: A drop: (its rank, the copy dropped, ``r``, the recomputation's slot, the copies kept
#: longer for it, the inputs recomputed with it).
_Drop = tuple[tuple[float, int, int], _Copy, int, int, list[tuple[int, _Copy]], list[int]]


class _Repair:
    """The state of the repair: copies per value, recomputations per slot, the profile."""

    def __init__(self, instance: Instance, rule: RepairRule) -> None:
        self.rule = rule
        nodes = NodeView(instance, "repair")
        n = self.n = nodes.n
        self.ops, self.cost, self.size = nodes.ops, nodes.cost, nodes.size
        self.preds, self.first_update = nodes.preds, nodes.first_update
        #: The last first computation reading each graph input (inputs are never recomputed).
        self.input_end = [max(readers) for readers in nodes.input_readers]
        #: The last slot at which every graph input a node reads is still held (``n``
        #: when it reads none): it cannot be recomputed after that.
        self.inputs_until = [n] * n
        for g, readers in enumerate(nodes.input_readers):
            for j in readers:
                self.inputs_until[j] = min(self.inputs_until[j], self.input_end[g])
        self.room = instance.budget_bytes - nodes.persistent
        read_by: list[list[int]] = [[] for _ in range(n)]
        for j in range(n):
            for u in self.preds[j]:
                read_by[u].append(j)
        self.copies: list[list[_Copy]] = [[_Copy(v, read_by[v])] for v in range(n)]
        #: ``held[v][slot]`` is 1 when a copy of ``v`` is held at ``slot`` (:meth:`copy_at`).
        self.held: list[bytearray] = [bytearray(n) for _ in range(n)]
        for v in range(n):
            self._mark(v)
        self.recompute: dict[int, list[int]] = {}
        profile = np.zeros(n + 1, dtype=np.int64)
        for v in range(n):
            profile[v] += self.size[v]
            profile[self.copies[v][0].end + 1] -= self.size[v]
        for g, last in enumerate(self.input_end):
            profile[0] += nodes.input_size[g]
            profile[last + 1] -= nodes.input_size[g]
        self.profile = np.cumsum(profile)[:n]
        self.recomputations = 0

    # ------------------------------------------------------------ queries
    def copy_at(self, v: int, slot: int) -> _Copy | None:
        """The copy of ``v`` held at ``slot`` (computed at or before it, read at or after)."""
        if not self.held[v][slot]:
            return None
        for c in self.copies[v]:
            if c.start <= slot <= c.end:
                return c
        return None

    def drop_at(self, v: int, t: int) -> tuple[_Copy, int, int] | None:
        """The copy of ``v`` held across ``t`` and its gap ``(r, q)`` around ``t``, if any."""
        c = self.copy_at(v, t)
        if c is None or c.start == t or not c.reads:
            return None
        k = bisect.bisect_left(c.reads, t)
        if k < len(c.reads) and c.reads[k] == t:
            return None  # read at t: dropping it there frees nothing
        if k == len(c.reads):
            return None
        r = c.reads[k - 1] if k > 0 else c.start
        q = c.reads[k]
        if q >= self.first_update:
            return None
        return c, r, q

    def best_drop(self, t: int, peak: int) -> _Drop | None:
        """The drop that lowers slot ``t`` ranked first by the rule.  Drops that recompute
        inputs with the value are weighed alongside the others under a ``mixed`` rule,
        else only when no other drop fits."""
        best: _Drop | None = None
        # Each value held across ``t``, with the rank of its drop over the whole gap: no
        # drop of it ranks higher (a recomputation earlier frees fewer slots; one with
        # inputs costs more).  In that order, until no value can beat the best drop.
        gaps: list[tuple[tuple[float, int, int], int, _Copy, int, int]] = []
        for v in range(min(t, self.n)):
            if self.size[v] == 0 or not self.held[v][t]:
                continue
            gap = self.drop_at(v, t)
            if gap is not None:
                c, r, q = gap
                gaps.append((self.key(self.cost[v], v, r, q), v, c, r, q))
        gaps.sort()
        for whole, v, c, r, q in gaps:
            if best is not None and whole >= best[0]:
                break
            grow = self.extension(v, q)
            if grow is not None and (not grow or self._fits(grow, [], q, peak, v, r, t)):
                best = (whole, c, r, q, grow, [])
                continue  # nothing ranks higher than the whole gap
            early = self.latest_slot(v, t, q)
            if early is not None and early < q:
                key = self.key(self.cost[v], v, r, early)
                if best is None or key < best[0]:
                    best = (key, c, r, early, [], [])
        if best is not None and not self.rule.mixed:
            return best
        # The inputs recomputed with a value only add to its cost: in the order of the
        # rank its drop over the whole gap would have without them, until that rank is
        # no better than the best drop found.
        for low, v, c, r, q in gaps:
            if best is not None and low >= best[0]:
                break
            # Inputs costing more than this cannot make the drop rank first.
            cap = None if best is None else best[0][0] * self.freed(v, r, q) - self.cost[v]
            for part, grow in self.closures(v, q, cap):
                key = self.key(self.cost[v] + sum(self.cost[w] for w in part), v, r, q)
                if (best is None or key < best[0]) and self._fits(grow, part, q, peak, v, r, t):
                    best = (key, c, r, q, grow, part)
        return best

    def key(self, cost: int, v: int, r: int, slot: int) -> tuple[float, int, int]:
        """The rule's rank of dropping ``v`` after ``r`` until ``slot`` for ``cost`` cycles:
        cheapest per byte (and freed slot, to the rule's power); among equals the longer
        gap, then the smaller index."""
        return (cost / self.freed(v, r, slot), -(slot - r), v)

    def freed(self, v: int, r: int, slot: int) -> float:
        """What the rule counts as freed by dropping ``v`` after ``r`` until ``slot``: its
        bytes, times the slots freed to the rule's power."""
        span = self.rule.span
        return self.size[v] * (max(1, slot - r - 1) ** span if span else 1)

    def latest_slot(self, v: int, t: int, q: int) -> int | None:
        """The latest slot in ``(t, q]`` at which every input of ``v`` is held, or ``None``."""
        slot = q
        while slot > t:
            if self.inputs_until[v] < slot:
                slot = self.inputs_until[v]
                continue
            lowered = slot
            for u in self.preds[v]:
                if not self.held[u][slot]:
                    ends = [c.end for c in self.copies[u] if c.end < slot]
                    lowered = min(lowered, max(ends, default=-1))
            if lowered == slot:
                return slot
            slot = lowered
        return None

    def extension(self, v: int, q: int) -> list[tuple[int, _Copy]] | None:
        """The inputs of a recomputation of ``v`` at ``q`` that are not held there, each
        with the copy that would be kept until ``q``; ``None`` when one has no copy to keep
        (it is not computed before ``q``) or a graph input is gone by then."""
        if self.inputs_until[v] < q:
            return None
        out = []
        for u in self.preds[v]:
            if self.held[u][q]:
                continue
            before = [c for c in self.copies[u] if c.start < q]
            if not before:
                return None
            out.append((u, before[-1]))
        return out

    # ------------------------------------------------------------ the search
    def run(self, max_drops: int) -> bool:
        room = self.room
        for _ in range(max_drops):
            t = int(np.argmax(self.profile))
            peak = int(self.profile[t])
            if peak <= room:
                return True
            best = self.best_drop(t, peak)
            if best is None:
                return False
            (_, _, v), c, r, q, grow, extra = best
            self._drop(v, c, r, q, grow, extra)
        return bool(self.profile.max() <= room)

    def levels(self, v: int, q: int, cap: float | None = None
               ) -> tuple[list[list[int]], int, bool] | None:
        """The inputs of ``v`` not held at slot ``q``, level by level (their inputs not held
        in the next level, and so on, at most :data:`DEPTH` + 1 levels); how many of the
        levels could be recomputed at ``q`` (up to the first with a node computed after
        ``q``, an optimizer op, or a node whose graph input is gone by then); and whether
        the search ended (it stops once the levels found cost more than ``cap``: deeper
        ones only cost more).  ``None`` when ``v`` itself cannot be recomputed."""
        if self.inputs_until[v] < q:
            return None
        seen: set[int] = set()
        levels: list[list[int]] = []
        level = [v]
        spent = 0
        for _ in range(DEPTH + 1):
            following: list[int] = []
            for w in level:
                for u in self.preds[w]:
                    if u not in seen and not self.held[u][q]:
                        seen.add(u)
                        following.append(u)
            if not following:
                break
            levels.append(following)
            if any(u >= self.first_update or u >= q
                   or self.inputs_until[u] < q for u in following):
                return levels, len(levels) - 1, True
            spent += sum(self.cost[u] for u in following)
            if cap is not None and spent > cap:
                return levels, len(levels), False
            level = following
        return levels, len(levels), True

    def closures(self, v: int, q: int, cap: float | None = None
                 ) -> list[tuple[list[int], list[tuple[int, _Copy]]]]:
        """The ways to recompute the inputs of ``v`` that are not held at slot ``q`` with it
        there: (the inputs recomputed, in node order; the copies kept until ``q``).

        The whole closure (every level recomputed, their own inputs held there or
        recomputed in turn, at most :data:`DEPTH` + 1 levels), and the closure cut short
        at each of :data:`KEPT_DEPTHS` (the first ``depth`` levels recomputed, the next
        level's values kept until ``q`` instead, each with a copy before ``q``).  With
        ``cap``, those whose inputs recomputed cost more than ``cap`` may be left out."""
        found = self.levels(v, q, cap)
        if found is None:
            return []
        levels, good, ended = found
        out: list[tuple[list[int], list[tuple[int, _Copy]]]] = []
        if ended and good == len(levels) <= DEPTH and levels:
            out.append((sorted(u for level in levels for u in level), []))
        for depth in KEPT_DEPTHS:
            if depth > good or depth >= len(levels):
                break
            grow = []
            for u in levels[depth]:
                before = [c for c in self.copies[u] if c.start < q]
                if not before:
                    break
                grow.append((u, before[-1]))
            else:
                out.append((sorted(u for level in levels[:depth] for u in level), grow))
        return out

    def closure_bytes(self, closure: list[int], v: int) -> int:
        """The most bytes the recomputation of ``closure`` (then ``v``) holds at once, each
        value freed once its last reader in the closure has run (``v`` not counted: its
        copy is held at the slot anyway)."""
        inside = set(closure)
        uses = dict.fromkeys(closure, 0)
        for w in [*closure, v]:
            for u in self.preds[w]:
                if u in inside:
                    uses[u] += 1
        held = most = 0
        for w in [*closure, v]:
            if w != v:
                held += self.size[w]
                most = max(most, held)
            for u in self.preds[w]:
                if u in inside:
                    uses[u] -= 1
                    if uses[u] == 0:
                        held -= self.size[u]
        return most

    def _fits(self, grow: list[tuple[int, _Copy]], extra: list[int], q: int, peak: int, v: int,
              r: int, t: int) -> bool:
        """Whether the drop lowers slot ``t`` (``r < t < q``) and raises no slot above
        ``peak``: it frees ``v`` on ``(r, q)``, keeps ``grow``'s copies until ``q`` and
        holds ``extra`` at ``q``.  Only the slots from ``r`` on to ``q`` change (the others
        are at most ``peak``); slots ``t`` and ``q`` are checked first, alone."""
        size, profile = self.size, self.profile
        if profile[t] - size[v] + sum(size[u] for u, c in grow if c.end < t) >= peak:
            return False
        gained = sum(size[u] for u, _ in grow)
        at_q = profile[q] + gained
        if at_q > peak or (extra and at_q + self.closure_bytes(extra, v) > peak):
            return False
        lo = min((c.end + 1 for _, c in grow), default=q)
        if lo >= q:
            return True  # the slots before q only fall
        after = profile[lo:q].copy()
        after[max(r + 1 - lo, 0):] -= size[v]
        for u, c in grow:
            after[c.end + 1 - lo:] += size[u]
        return bool(after.max() <= peak)

    def _drop(self, v: int, c: _Copy, r: int, q: int, grow: list[tuple[int, _Copy]],
              extra: list[int]) -> None:
        """Free ``v``'s copy ``c`` after ``r`` and recompute it just before slot ``q``
        (after ``extra``, recomputed there for it)."""
        later = c.cut(bisect.bisect_left(c.reads, q))  # held[v] is set again with v's new copy
        self.profile[r + 1:q] -= self.size[v]
        kept = dict(grow)
        for u, held in grow:
            self.profile[held.end + 1:q + 1] += self.size[u]
        if extra:
            self.profile[q] += self.closure_bytes(extra, v)
        for w in extra:
            self._add_copy(w, _Copy(q))
        self._add_copy(v, _Copy(q, later))
        touched: set[int] = set()
        for w in [*extra, v]:
            for u in self.preds[w]:
                held_at_q = kept.get(u) or self.copy_at(u, q)
                if held_at_q is None:
                    raise AssertionError("a recomputation's input is not held; this is a bug")
                held_at_q.read(q)
                touched.add(u)
            self.recompute.setdefault(q, []).append(w)
            self.recomputations += 1
        for u in touched:
            self._mark(u)

    def _add_copy(self, v: int, copy: _Copy) -> None:
        self.copies[v].append(copy)
        self.copies[v].sort(key=lambda x: x.start)
        self._mark(v)

    def _mark(self, v: int) -> None:
        """Set ``held[v]`` from ``v``'s copies."""
        held = self.held[v] = bytearray(self.n)
        for c in self.copies[v]:
            held[c.start:c.end + 1] = b"\x01" * (c.end + 1 - c.start)

    def computations(self) -> list[str]:
        out: list[str] = []
        for k in range(self.n):
            out.extend(self.ops[v] for v in sorted(self.recompute.get(k, ())))
            out.append(self.ops[k])
        return out


def repair_sequence(instance: Instance, *, budget_bytes: int | None = None,
                    best_effort: bool = False, rules: Sequence_[RepairRule] = RULES,
                    deadline: Clock | None = None,
                    polish: Callable[[Sequence], Sequence] | None = None) -> Sequence | None:
    """The store-all sequence repaired to fit the budget by drops and recomputations, or ``None``.

    Parameters
    ----------
    instance
        A P1 instance (one core whose memory holds the graph inputs).
    budget_bytes
        The memory the sequence may use, persistent bytes included when the instance
        models them in the core's memory (default: the capacity of the core's memory).
    best_effort
        When no rule's drops make the profile fit, return the sequence with the lowest
        peak that a rule reached (over the budget, ``meta["fits"]`` false) instead of
        ``None``: the start of the LNS's descent to the budget (``p1_interval.md`` P1I.L5).
    rules
        The rules to run, in turn (:data:`RULES`); the cheapest sequence that fits wins
        (among equals, the earlier rule).
    deadline
        Once it has passed, the rules not yet run are skipped (the first always runs).
    polish
        Applied to each rule's sequence that fits before they are compared: a caller's
        improvement of it within the budget (P1's pruning of the recomputations the
        budget does not need, ``p1_interval.md`` P1I.L0: the rule cheapest after it is
        not always the cheapest before).  It returns a sequence with the same ``meta``
        keys (its own figures), within the instance's own budget (so ``budget_bytes``
        is not passed with it).  A rule whose sequence costs more than
        :data:`POLISH_WITHIN` times the cheapest one so far is not polished.

    Returns
    -------
    Sequence or None
        ``meta``: ``heuristic`` (``"repair"``), ``rule`` (the winning rule's name),
        ``budget_bytes``, ``fits``, the claimed ``compute_cycles``, ``peak_bytes`` and
        ``recomputations``.
    """
    if not rules:
        raise ValueError("repair_sequence needs at least one rule")
    if polish is not None and budget_bytes is not None:
        raise ValueError("a polish works to the instance's own budget: pass no budget_bytes with it")
    budget = instance.budget_bytes if budget_bytes is None else int(budget_bytes)
    best: Sequence | None = None
    cheapest: int | None = None  # the cheapest rule's cycles before ``polish``
    for rule in rules:
        if best is not None and deadline is not None and deadline.passed():
            break
        sequence = _repair(instance, budget, rule)
        if sequence.meta["fits"]:
            cycles = sequence.meta["compute_cycles"]
            if polish is not None and (cheapest is None or cycles <= POLISH_WITHIN * cheapest):
                sequence = polish(sequence)
            cheapest = cycles if cheapest is None else min(cheapest, cycles)
        if best is None or _rank(sequence) < _rank(best):
            best = sequence
    if best is None or (not best.meta["fits"] and not best_effort):
        return None
    return best


def _rank(sequence: Sequence) -> tuple[bool, int, int]:
    """Within the budget first, then the cheaper; over it, the lower peak."""
    meta = sequence.meta
    if meta["fits"]:
        return (False, meta["compute_cycles"], 0)
    return (True, meta["peak_bytes"], meta["compute_cycles"])


def _repair(instance: Instance, budget: int, rule: RepairRule) -> Sequence:
    """One rule's repair, as far as it gets (``meta["fits"]`` says whether it fits)."""
    state = _Repair(instance, rule)
    state.room += budget - instance.budget_bytes
    state.run(max_drops=20 * state.n + 100)
    steps = place_releases(instance.graph, state.computations())
    claimed = replay(instance, steps)
    return Sequence(steps, meta={"heuristic": "repair", "rule": rule.name, "budget_bytes": budget,
                                 "fits": claimed.peak_bytes <= budget,
                                 "compute_cycles": claimed.compute_cycles, "peak_bytes": claimed.peak_bytes,
                                 "recomputations": claimed.recomputations})
