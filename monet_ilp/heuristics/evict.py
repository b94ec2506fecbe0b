"""Feasible first: a P1 schedule within the budget by eviction and recomputation on demand.

A constructive heuristic (Instance -> Sequence) in the spirit of dynamic tensor
rematerialisation (M. Kirisame, S. Lyubomirsky, A. Haan, J. Brennan, M. He, J. Roesch,
T. Chen, Z. Tatlock, "Dynamic Tensor Rematerialization", ICLR 2021): the sequence is
simulated in the P1 fixed order of first computations (``formulations/p1_problem.md``),
with the node-level values of P1 (a node's non-persistent outputs are computed, kept
and freed together).

* Before an op runs, every value it reads is made resident, recomputing the missing
  ones on demand, depth first (a recomputation needs its own inputs first).
* Before any computation, while the resident values plus the op's outputs exceed the
  budget (the capacity less the persistent bytes the core memory holds, EV.E1.5), a
  resident value that no pending computation needs is evicted, the one with the
  lowest score of the eviction *rule* (:data:`EVICTION_RULES`).
* A value that no later first computation reads is freed at once (it can still be
  recomputed from its predecessors if a recomputation needs it).
* Graph inputs are never recomputed: each one stays until the last stage in which a
  reader may still be computed (P1C.D3 of ``formulations/p1_cpsat.md``), then goes.
* P1 allows no recomputation after the first optimizer op (EV.E2 ``update_hazard``):
  when its stage starts, every value a later first computation reads is made
  resident, recomputing what is missing, and is never evicted again.

Each rule is simulated in up to three modes (:data:`MODES`), each a deterministic pass:

* ``strict``: evicting a value that is still to be read keeps its predecessors (they
  are not freed when their last first reader has run, and are evicted only when
  nothing else can be), so that its recomputation needs nothing but itself.  Without
  this, evictions cascade: a value whose predecessors are gone is recomputed from the
  closure of everything missing below it, which at a tight budget no longer fits;
* ``plain``: the policy above alone (predecessors freed after their last first read);
* ``retry``, only when no other pass fits: ``strict`` again, each time keeping (evicting
  last) the values the stage that got stuck had to recompute, at most :data:`RETRIES`
  times, within a shared budget of computations (:data:`FALLBACK_WORK` per node).

:func:`evict_sequence` replays the candidates
(:func:`~monet_ilp.heuristics.liveness.replay`) and returns the cheapest within the
budget; a pass stops as soon as it costs more than the best one so far, or once it has
made :data:`MAX_COMPUTATIONS` computations per node.  :func:`min_budget_estimate`
brackets the least budget: a peak bound no schedule can beat, and the least budget at
which the heuristic found a schedule.

Everything is incremental: next-use pointers, a recompute-cost estimate updated when a
predecessor comes or goes, and one vectorised scan of the scores per eviction, so a
rule costs ``O((n + recomputations) * n)`` numpy work and ``O(edges)`` Python work
per pass over the graph.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind
from monet_ilp.heuristics.liveness import replay, require_sequence_form
from monet_ilp.heuristics.store_all import store_all_sequence
from monet_ilp.schedule import Compute, Release, Sequence

if TYPE_CHECKING:
    from monet_ilp.instance import Instance

__all__ = [
    "EVICTION_RULES",
    "BudgetEstimate",
    "NodeView",
    "evict_sequence",
    "min_budget_estimate",
]

#: The eviction rules, in the order they are tried.  Each scores the evictable values
#: (resident, not read by a pending computation, before the first optimizer op); the
#: lowest score goes first.  With ``r`` the estimated recompute cost (the node's
#: cycles plus the estimate of every predecessor that is not resident), ``m`` the
#: bytes, ``d`` the stages until the next first computation that reads the value and
#: ``s`` the computations since it was last touched:
#:
#: * ``"future"``: ``r / (m * d)``, DTR's cost-per-byte-and-time with the known next
#:   use in place of the staleness;
#: * ``"dtr"``: ``r / (m * s)``, DTR's ``h`` (its neighbourhood cost approximated by
#:   the evicted predecessors);
#: * ``"belady"``: the farthest next use first (Belady's rule), larger values first
#:   among equals;
#: * ``"cost_per_byte"``: ``r / m``.
EVICTION_RULES: tuple[str, ...] = ("future", "dtr", "belady", "cost_per_byte")


@dataclass(frozen=True)
class BudgetEstimate:
    """Where the least budget of a P1 instance lies (bytes, persistent bytes included).

    Attributes
    ----------
    lower
        No schedule exists with a smaller budget (P1C.O2's peak bound, and the memory
        the stages after the first optimizer op are forced to hold), tensor by tensor:
        it holds for every sequence the evaluator accepts, those that free a node's
        outputs one by one included, so it is at most the store-all peak.
    lower_reason
        Which step forces ``lower``, in words.
    upper
        The least budget at which :func:`evict_sequence` found a schedule (searched by
        bisection between ``lower`` and the store-all peak).
    sequence
        The schedule found at ``upper`` (its peak is at most ``upper``).
    proven
        ``lower == upper``: the least budget is known exactly.
    """

    lower: int
    lower_reason: str
    upper: int
    sequence: Sequence

    @property
    def proven(self) -> bool:
        return self.lower == self.upper


# ====================================================================== node view
class NodeView:
    """The node-level view of a P1 instance that the P1 heuristics read (fixed order).

    Node ``i`` is the ``i``-th op of the graph; its value is its non-persistent
    outputs (``m_i`` bytes).  Inputs are the graph inputs some op reads.
    """

    def __init__(self, instance: Instance, heuristic: str = "evict") -> None:
        require_sequence_form(instance, heuristic)
        graph = instance.graph
        core = instance.cores[0]
        ops = list(graph.ops)
        index = {op.id: i for i, op in enumerate(ops)}
        n = len(ops)
        self.n = n
        self.ops = tuple(op.id for op in ops)
        self.cost = [instance.cost(op.id, core.id).cycles for op in ops]
        self.outputs: list[tuple[str, ...]] = [
            tuple(t for t in dict.fromkeys(op.outputs) if not graph.tensor(t).persistent) for op in ops]
        self.size = [sum(graph.tensor(t).bytes for t in outs) for outs in self.outputs]
        preds: list[list[int]] = [[] for _ in range(n)]
        inputs: dict[str, list[int]] = {}  # read graph input -> readers, in node order
        #: Bytes of the node outputs each node reads (tensor by tensor: EV.E3 may free a
        #: node's other outputs), and each such tensor's producer, last reader and bytes.
        self.read_bytes = [0] * n
        last_read: dict[str, tuple[int, int, int]] = {}
        for j, op in enumerate(ops):
            for t in dict.fromkeys(op.inputs):
                tensor = graph.tensor(t)
                if tensor.persistent:
                    continue
                if tensor.producer is None:
                    inputs.setdefault(t, []).append(j)
                    continue
                i = index[tensor.producer]
                self.read_bytes[j] += tensor.bytes
                last_read[t] = (i, j, tensor.bytes)
                if i >= j:
                    raise MonetError(
                        f"op {op.id!r} reads {t!r} from {tensor.producer!r}, which comes later in the "
                        "order of first computations",
                        field=f"ops.{op.id}",
                        fix="list ops in a topological order with optimizer ops last",
                    )
                if i not in preds[j]:
                    preds[j].append(i)
        self.preds = [sorted(p) for p in preds]
        self.consumers: list[list[int]] = [[] for _ in range(n)]
        for j in range(n):
            for i in self.preds[j]:
                self.consumers[i].append(j)
        optimizer = [i for i, op in enumerate(ops) if op.kind is OpKind.OPTIMIZER]
        #: First optimizer op (``n`` when none): no recomputation after its stage's start.
        self.first_update = optimizer[0] if optimizer else n
        recompute_last = min(self.first_update, n - 1)
        # P1C.D1: the last stage in which node i may usefully be computed.
        hi = [0] * n
        for i in reversed(range(n)):
            last_use = max((hi[j] for j in self.consumers[i]), default=-1)
            hi[i] = max(i, min(last_use, recompute_last))
        self.input_ids = tuple(inputs)
        self.input_size = [graph.tensor(t).bytes for t in self.input_ids]
        self.input_readers = [inputs[t] for t in self.input_ids]
        #: P1C.D3: input g is released right after the first computation of this node.
        self.input_free_at = [max(hi[j] for j in readers) for readers in self.input_readers]
        self.read_spans = list(last_read.values())
        self.unread_inputs = tuple(t.id for t in graph.tensors
                                   if t.producer is None and not t.persistent and t.id not in inputs)
        self.persistent = (sum(t.bytes for t in graph.tensors if t.persistent)
                           if instance.persistent_home == core.memory else 0)
        #: Every op once: the least compute cost of any schedule.
        self.every_op_once = sum(self.cost)
        self.size_f = np.array([max(s, 1) for s in self.size], dtype=float)

    def peak_bound(self) -> tuple[int, str]:
        """The largest memory some step forces on every schedule (bytes, persistent included).

        For stage ``k`` before the first optimizer op: P1C.O2, ``m_k`` plus the tensors
        ``v_k`` reads plus every input read at or after ``k`` (inputs are never
        recomputed).  From the first optimizer op on nothing may be recomputed, so
        every tensor made before ``k`` and read at or after ``k`` is resident while
        ``v_k`` runs.  Read tensors are counted one by one, not as their producers'
        values: EV.E3 lets a schedule free a node's outputs separately (a caller's hint
        may), and the bound holds for every sequence the evaluator accepts, so it is
        never above the store-all peak.
        """
        n = self.n
        best, reason = 0, "no op"
        # Inputs still to be read at stage k: a difference array over their spans.
        inputs_at = [0] * (n + 1)
        for s, readers in zip(self.input_size, self.input_readers, strict=True):
            inputs_at[0] += s
            inputs_at[max(readers) + 1] -= s
        live_after = [0] * (n + 1)  # tensors made before k and read at or after k (from first_update)
        for i, last, size in self.read_spans:
            live_after[i + 1] += size
            live_after[last + 1] -= size
        held_inputs = held_values = 0
        for k in range(n):
            held_inputs += inputs_at[k]
            held_values += live_after[k]
            if k < self.first_update:
                values = self.read_bytes[k]
                why = "the tensors it reads"
            else:
                values = held_values
                why = "every tensor read from then on (no recomputation after the first optimizer op)"
            step = self.persistent + self.size[k] + values + held_inputs
            if step > best:
                best = step
                reason = (f"while op {self.ops[k]!r} first runs, memory holds its outputs ({self.size[k]} B), "
                          f"{why} ({values} B), the graph inputs still to be read ({held_inputs} B)"
                          + (f" and the persistent tensors ({self.persistent} B)" if self.persistent else ""))
        return best, reason


# ====================================================================== the simulation
#: Passes of the fallback (:func:`_simulate`'s ``retries``): after a pass gets stuck, the
#: values its last stage had to recompute are kept resident as long as possible.
RETRIES = 5

#: A pass stops after this many computations per node (a schedule that recomputes
#: every op ten times over is no incumbent worth the time).
MAX_COMPUTATIONS = 10

#: The retrying passes of :func:`_best` share this many computations per node.
FALLBACK_WORK = 20


class _Fail(Exception):
    """The rule found no schedule within the budget (or none under the cost cut-off)."""


@dataclass(frozen=True)
class _Plan:
    steps: tuple[Compute | Release, ...]
    cost: int
    recomputations: int


def _simulate(nodes: NodeView, budget: int, rule: str, *, strict: bool = False, retries: int = 0,
              cutoff: int | None = None, work: list[int] | None = None) -> _Plan | None:
    """A pass of the eviction heuristic with ``rule``; ``None`` when it gets stuck.

    With ``retries``, a pass that gets stuck is run again (at most ``retries`` times),
    keeping the values that its failing stage found missing (the *kept* values are
    evicted only when nothing else can be), as long as each retry adds some.  A pass
    whose cost passes ``cutoff`` stops (it cannot beat a schedule already found).
    """
    keep: set[int] = set()
    for _ in range(retries + 1):
        limit = MAX_COMPUTATIONS * nodes.n if work is None else min(MAX_COMPUTATIONS * nodes.n, work[0])
        if limit < nodes.n:
            return None
        sim = _Simulation(nodes, budget, rule, strict=strict, keep=keep, cutoff=cutoff,
                          max_computations=limit)
        try:
            return sim.run()
        except _Fail:
            new = set(sim.missing) - keep
            if sim.over_cutoff or not new:
                return None
            keep |= new
        finally:
            if work is not None:
                work[0] -= sim.computations
    return None


class _Simulation:
    """State of one pass (see the module docstring for the policy)."""

    def __init__(self, nodes: NodeView, budget: int, rule: str, *, strict: bool = False,
                 keep: Iterable[int] = (), cutoff: int | None = None,
                 max_computations: int | None = None) -> None:
        if rule not in EVICTION_RULES:
            raise MonetError(f"unknown eviction rule {rule!r}", field="rules",
                             fix=f"use some of {', '.join(EVICTION_RULES)}")
        n = nodes.n
        self.nodes = nodes
        self.rule = rule
        self.strict = strict
        # strict: needers[e] counts the evicted values that are still to be read and read
        # e (their recomputation needs e); counted[e] says whether e is counted so.
        self.needers = [0] * n
        self.counted = [False] * n
        self.source = np.zeros(n, dtype=bool)  # needers > 0: evicted only as a last resort
        self.keep = np.zeros(n, dtype=bool)  # evicted after everything else
        self.keep[list(keep)] = True
        self.missing: list[int] = []  # the values the current stage had to recompute
        self.cutoff = math.inf if cutoff is None else cutoff
        self.max_computations = MAX_COMPUTATIONS * n if max_computations is None else max_computations
        self.over_cutoff = False
        self.room = budget - nodes.persistent  # what the values may hold
        self.resident = [False] * n
        self.lock = [0] * n  # pending computations that read the value
        self.pinned = [False] * n  # from the first optimizer op on: never evicted
        self.ptr = [0] * n  # next first reader: consumers[i][ptr[i]]
        self.rc = [0] * n  # recompute estimate recorded when the value went
        self.pot = list(nodes.cost)  # recompute estimate if evicted now
        self.cap = max(nodes.every_op_once, 1)
        self.held = sum(nodes.input_size)
        self.steps: list[Compute | Release] = [Release(t) for t in nodes.unread_inputs]
        self.cost = 0
        self.computations = 0
        self.stage = 0
        self.recompute_allowed = True
        # numpy mirrors for the vectorised choice of a victim
        self.evictable = np.zeros(n, dtype=bool)
        self.pot_f = np.array(nodes.cost, dtype=float)
        self.next_use = np.full(n, float(n + 1))
        self.touched = np.zeros(n)
        self.free_inputs_at: dict[int, list[int]] = {}
        for g, k in enumerate(nodes.input_free_at):
            self.free_inputs_at.setdefault(k, []).append(g)

    # ------------------------------------------------------------ bookkeeping
    def _sync(self, e: int) -> None:
        self.evictable[e] = (self.resident[e] and self.lock[e] == 0 and not self.pinned[e]
                             and self.nodes.size[e] > 0)

    def _drop(self, e: int) -> None:
        """``e`` leaves memory (evicted, or freed after its last first read)."""
        nodes = self.nodes
        if self.strict and not self._dead(e):
            self.counted[e] = True
            for p in nodes.preds[e]:
                self._need(p, +1)
        self.resident[e] = False
        self.held -= nodes.size[e]
        self.steps.extend(Release(t) for t in nodes.outputs[e])
        rc = self.rc[e] = min(self.pot[e], self.cap)
        pot, pot_f = self.pot, self.pot_f
        for k in nodes.consumers[e]:
            pot[k] += rc
            pot_f[k] = pot[k]
        self._sync(e)

    def _need(self, p: int, delta: int) -> None:
        self.needers[p] += delta
        self.source[p] = self.needers[p] > 0

    def _read_done(self, e: int) -> bool:
        """No first computation reads ``e`` any more."""
        return self.ptr[e] >= len(self.nodes.consumers[e])

    def _dead(self, e: int) -> bool:
        """Nothing will read ``e`` (strict: not even the recomputation of an evicted value)."""
        return self._read_done(e) and self.needers[e] == 0

    def _release_if_dead(self, e: int) -> None:
        if self.resident[e] and self.lock[e] == 0 and self._dead(e) and self.nodes.size[e] > 0:
            self._drop(e)

    def _victim(self) -> int:
        """The evictable value with the lowest score of the rule."""
        if not self.evictable.any():
            raise _Fail
        rule = self.rule
        size = self.nodes.size_f
        if rule == "future":
            # A value read at this stage is locked; the floor only keeps the division finite.
            score = self.pot_f / (size * np.maximum(self.next_use - self.stage, 1.0))
        elif rule == "dtr":
            score = self.pot_f / (size * (self.computations - self.touched + 1.0))
        elif rule == "belady":
            score = -(self.next_use + size / (size.max() + 1.0))
        else:  # cost_per_byte
            score = self.pot_f / size
        # Tiers: plain values, then sources of evicted values (strict), then kept values.
        tier = np.where(self.evictable, self.source + 2 * self.keep.astype(int), 4)
        score = np.where(tier == tier.min(), score, math.inf)
        return int(np.argmin(score))

    def _make_room(self, need: int) -> None:
        while self.held + need > self.room:
            self._drop(self._victim())

    def _compute(self, u: int) -> None:
        nodes = self.nodes
        self._make_room(nodes.size[u])
        self.steps.append(Compute(nodes.ops[u]))
        self.cost += nodes.cost[u]
        self.computations += 1
        if self.cost > self.cutoff:
            self.over_cutoff = True
            raise _Fail
        if self.computations > self.max_computations:
            raise _Fail
        self.resident[u] = True
        self.held += nodes.size[u]
        if self.counted[u]:
            self.counted[u] = False
            for p in nodes.preds[u]:
                self._need(p, -1)
        rc = self.rc[u]
        if rc:
            pot, pot_f = self.pot, self.pot_f
            for k in nodes.consumers[u]:
                pot[k] -= rc
                pot_f[k] = pot[k]
        self.rc[u] = 0
        if self.stage >= nodes.first_update:
            self.pinned[u] = True
        c = nodes.consumers[u]
        self.next_use[u] = c[self.ptr[u]] if self.ptr[u] < len(c) else nodes.n + 1
        self.touched[u] = self.computations
        for p in nodes.preds[u]:
            self.touched[p] = self.computations
        self._sync(u)

    def _lock(self, values: Iterable[int], delta: int) -> None:
        lock, resident, pinned, size, evictable = (self.lock, self.resident, self.pinned,
                                                   self.nodes.size, self.evictable)
        for p in values:
            lock[p] += delta
            evictable[p] = resident[p] and lock[p] == 0 and not pinned[p] and size[p] > 0

    def _ensure(self, targets: list[int]) -> None:
        """Make ``targets`` (locked by the caller) resident, recomputing what is missing.

        The missing values and every missing value they need (the recompute closure) are
        computed once each, in node order (a topological order), each one locked until
        its last reader in the closure has run: a value that no first computation reads
        any more is still needed by the recomputations after it, and dropping it early
        would make them derive it again, exponentially in the depth of the closure.
        """
        nodes = self.nodes
        closure: set[int] = set()
        stack = [p for p in targets if not self.resident[p]]
        while stack:
            u = stack.pop()
            if u in closure:
                continue
            if not self.recompute_allowed:
                raise _Fail
            closure.add(u)
            stack.extend(p for p in nodes.preds[u] if not self.resident[p] and p not in closure)
        order = sorted(closure)
        for u in order:
            self._lock(nodes.preds[u], +1)
        for u in order:
            self._compute(u)
            self._lock(nodes.preds[u], -1)
            for p in nodes.preds[u]:
                self._release_if_dead(p)

    # ------------------------------------------------------------ the pass
    def run(self) -> _Plan:
        nodes = self.nodes
        n = nodes.n
        for k in range(n):
            self.stage = k
            if k == nodes.first_update:
                # P1: no recomputation from here on; hold every value still to be read.
                needed = [e for e in range(k) if not self._read_done(e) and nodes.size[e] > 0]
                self.missing = [e for e in needed if not self.resident[e]]
                self._lock(needed, +1)
                self._ensure(needed)
                for e in needed:
                    self.pinned[e] = True
                self._lock(needed, -1)
            if k > nodes.first_update:
                self.recompute_allowed = False
            preds = nodes.preds[k]
            self.missing = [p for p in preds if not self.resident[p]]
            self._lock(preds, +1)
            self._ensure(preds)
            self._compute(k)
            for p in preds:  # first reads: advance the next-use pointers
                self.ptr[p] += 1
                c = nodes.consumers[p]
                self.next_use[p] = c[self.ptr[p]] if self.ptr[p] < len(c) else n + 1
            self._lock(preds, -1)
            for p in preds:
                self._release_if_dead(p)
            self._release_if_dead(k)
            for g in self.free_inputs_at.get(k, ()):
                self.held -= nodes.input_size[g]
                self.steps.append(Release(nodes.input_ids[g]))
        return _Plan(tuple(self.steps), self.cost, self.computations - n)


# ====================================================================== public API
def evict_sequence(
    instance: Instance, *, budget_bytes: int | None = None, rules: Iterable[str] | None = None,
) -> Sequence | None:
    """The cheapest P1 sequence within the budget that an eviction rule finds, or ``None``.

    Store-all is returned when its peak fits (every op once: no schedule is cheaper),
    and ``None`` when the budget is below the peak bound of :class:`BudgetEstimate`
    (no schedule fits).  Otherwise each rule of ``rules`` is simulated in the modes of
    the module docstring; each candidate is replayed (EV.E3,
    :func:`~monet_ilp.heuristics.liveness.replay`) and kept only if its peak is within
    the budget; the cheapest is returned (ties: the lower peak, then the pass tried
    first: ``strict`` rules in the order given, then ``plain``, then ``retry``).

    Parameters
    ----------
    instance
        A P1 instance (one core whose memory holds the graph inputs).
    budget_bytes
        The memory the sequence may use, persistent bytes included when the instance
        models them in the core's memory (what EV.E3 compares with the capacity);
        default the capacity of the core's memory.
    rules
        Names from :data:`EVICTION_RULES` (default: all of them).

    Returns
    -------
    Sequence or None
        ``meta``: ``heuristic`` (``"evict"``), ``rule`` (the winning rule, or
        ``"store_all"``), ``mode`` (its mode: ``strict``, ``plain``, ``retry`` or
        ``store_all``), ``budget_bytes``, ``candidates`` (the passes that gave a
        schedule, ``"<rule>:<mode>"``; a pass that got dearer than the best one so far
        stopped and is not listed), the claimed ``compute_cycles``, ``peak_bytes`` and
        ``recomputations``.  ``None`` when no pass fits the budget.

    Raises
    ------
    MonetError
        The instance has no P1 sequence form, an op reads from a later op, or a rule
        is unknown.
    """
    nodes = NodeView(instance)
    budget = instance.budget_bytes if budget_bytes is None else int(budget_bytes)
    chosen = list(EVICTION_RULES if rules is None else rules)
    for rule in chosen:
        if rule not in EVICTION_RULES:
            raise MonetError(f"unknown eviction rule {rule!r}", field="rules",
                             fix=f"use some of {', '.join(EVICTION_RULES)}")
    return _best(instance, nodes, budget, chosen, first_fit=False)


#: The passes of :func:`_best`, in order: ``(mode, strict, retries)``.  The retrying
#: pass runs only when no other pass fits.
MODES: tuple[tuple[str, bool, int], ...] = (("strict", True, 0), ("plain", False, 0),
                                            ("retry", True, RETRIES))


def _best(instance: Instance, nodes: NodeView, budget: int, rules: list[str], *,
          first_fit: bool) -> Sequence | None:
    """The cheapest fitting candidate (store-all first), or the first that fits."""
    base = store_all_sequence(instance)
    if base.meta["peak_bytes"] <= budget:
        return Sequence(base.steps, meta={**base.meta, "heuristic": "evict", "rule": "store_all",
                                          "mode": "store_all", "budget_bytes": budget,
                                          "candidates": ["store_all"]})
    if nodes.peak_bound()[0] > budget:
        return None  # no schedule fits (BudgetEstimate.lower)
    best: tuple[tuple[int, int, int], str, str, _Plan, int] | None = None
    fitting: list[str] = []
    k = 0
    work = [FALLBACK_WORK * nodes.n]
    for mode, strict, retries in MODES:
        if retries and best is not None:
            break
        for rule in rules:
            k += 1
            cutoff = None if best is None else best[0][0]
            plan = _simulate(nodes, budget, rule, strict=strict, retries=retries, cutoff=cutoff,
                             work=work if retries else None)
            if plan is None:
                continue
            claimed = replay(instance, plan.steps)
            if claimed.peak_bytes > budget or claimed.compute_cycles != plan.cost:
                continue  # never return what breaks the budget
            fitting.append(f"{rule}:{mode}")
            rank = (plan.cost, claimed.peak_bytes, k)
            if best is None or rank < best[0]:
                best = (rank, rule, mode, plan, claimed.peak_bytes)
            if first_fit or plan.cost == nodes.every_op_once:
                break
        if best is not None and (first_fit or best[3].cost == nodes.every_op_once):
            break
    if best is None:
        return None
    _, rule, mode, plan, peak = best
    return Sequence(plan.steps, meta={
        "heuristic": "evict", "rule": rule, "mode": mode, "budget_bytes": budget, "candidates": fitting,
        "compute_cycles": plan.cost, "peak_bytes": peak, "recomputations": plan.recomputations,
    })


def min_budget_estimate(instance: Instance, *, time_limit: float | None = None,
                        rules: Iterable[str] | None = None) -> BudgetEstimate:
    """Bracket the least budget of a P1 instance: a proven floor and a found schedule.

    ``lower`` is the largest memory a single step forces (:class:`BudgetEstimate`):
    below it no schedule exists.  ``upper`` is found by bisection over budgets between
    ``lower`` and the store-all peak (which always fits), in steps of the gcd of the
    sizes: a budget is accepted when some rule fits it, and the peak of that schedule
    becomes the new upper end.  Rules may fit a budget and miss a larger one, so
    ``upper`` is the least budget *found*, not a proven minimum unless it equals
    ``lower``.

    Parameters
    ----------
    instance
        A P1 instance.
    time_limit
        Seconds for the bisection (``None``: until the interval closes); the best
        budget found so far is returned when it runs out.
    rules
        Names from :data:`EVICTION_RULES` (default: all).

    Returns
    -------
    BudgetEstimate
        Bytes with the persistent bytes the core memory holds (EV.E1.5), as a
        capacity is given.
    """
    start = time.perf_counter()
    nodes = NodeView(instance)
    chosen = list(EVICTION_RULES if rules is None else rules)
    lower, reason = nodes.peak_bound()
    base = store_all_sequence(instance)
    top = int(base.meta["peak_bytes"])
    found = _best(instance, nodes, top, chosen, first_fit=False)
    assert found is not None  # store-all fits its own peak
    upper, sequence = top, found
    sizes = [s for s in nodes.size + nodes.input_size if s > 0]
    step = math.gcd(*sizes) if sizes else 1
    lo = lower  # every budget below lo fails (proven) or was tried
    while upper - lo >= step:
        if time_limit is not None and time.perf_counter() - start > time_limit:
            break
        mid = lo + (upper - lo) // 2
        fit = _best(instance, nodes, mid, chosen, first_fit=True)
        if fit is None:
            lo = mid + 1
        else:
            upper = int(fit.meta["peak_bytes"])
            sequence = fit
    # The cheapest schedule at ``upper`` (a rule that fitted a larger budget may miss it).
    cheapest = _best(instance, nodes, upper, chosen, first_fit=False)
    if cheapest is not None:
        sequence = cheapest
    return BudgetEstimate(lower=lower, lower_reason=reason, upper=upper, sequence=sequence)
