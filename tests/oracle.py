"""A brute-force oracle outside every model's class, for tiny instances (``formulations/oracle.md``).

Test support, not a backend: it enumerates schedules by exhaustive search and lets the
evaluator (:func:`monet_ilp.evaluate.evaluate`) judge its best one, so a test can hold
every bound and every backend's optimum against it on instances of a few ops.

* :func:`sequence_optimum` (OR.S1-S4): the cheapest P1 :class:`~monet_ilp.schedule.Sequence`
  of a one-core instance (compute cycles), over every sequence the evaluator accepts
  or over a stated restriction (:class:`SequenceClass`: P1's own class, the stage form
  with its passes, the interval class); :func:`sequence_min_peak` the least peak.
* :func:`timed_optimum` (OR.T1-T6): the best timed :class:`~monet_ilp.schedule.Schedule`
  (latency or energy) of a P2 or P3 instance, over every event order, core, pin and
  transfer up to the depth of :class:`TimedClass` (three runs per op and two transfers
  of a tensor into each memory by default, more than any model allows), or over a
  model's class (:data:`K3`, :func:`p2_cpsat_class`).

Each returns ``None`` when no schedule of the class exists, else ``(value, schedule)``
with the schedule already checked by the evaluator at that value (an assertion: a
disagreement is a bug in this module, not in the instance).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from monet_ilp.evaluate import evaluate
from monet_ilp.instance import Objective, pj_of
from monet_ilp.schedule import Compute, Free, OpRun, Release, Schedule, Sequence, Transfer

if TYPE_CHECKING:
    from monet_ilp.instance import Instance

# =============================================================== P1: sequences (OR.S1-S4)


@dataclass(frozen=True)
class SequenceClass:
    """Which P1 sequences the search enumerates (OR.S2).

    The default is every sequence the evaluator accepts (EV.E3): releases of single
    tensors, first computations in any order, any number of recomputations of any op at
    any point.  Each field restricts it.
    """

    node_values: bool = False  # a run of releases frees all of an op's resident outputs or none
    fixed_order: bool = False  # first computations in the instance's order of ops
    optimizers_last: bool = False  # free order, but optimizer ops last, in graph order
    optimizer_rule: bool = False  # no recomputation once an optimizer op has run (P1)
    max_computes: int | None = None  # computations per op, first included
    passes: int | None = None  # stage form: per stage, `passes` sweeps in op order, each op once


#: OR.S2a: every sequence the evaluator accepts.
EVERY_SEQUENCE = SequenceClass()
#: OR.S2b: P1 of p1_problem.md, what relax.HOLDS_FOR names.
P1_SEQUENCES = SequenceClass(node_values=True, fixed_order=True, optimizer_rule=True)


def stage_class(passes: int = 1) -> SequenceClass:
    """OR.S2c: the stage form of the milp and cpsat backends (fixed order, ``passes`` sweeps)."""
    return replace(P1_SEQUENCES, passes=passes)


def interval_class(max_computes: int = 2, *, fixed_order: bool = True) -> SequenceClass:
    """OR.S2d: the interval model's class K(C, order) (p1_interval.md §1)."""
    if fixed_order:
        return replace(P1_SEQUENCES, max_computes=max_computes)
    return replace(P1_SEQUENCES, fixed_order=False, optimizers_last=True, max_computes=max_computes)


class _P1View:
    """What the search reads of a one-core instance, by index (EV.E3's rules)."""

    def __init__(self, instance: Instance):
        graph = instance.graph
        core = instance.cores[0].id
        memory = instance.cores[0].memory
        self.instance = instance
        self.ops = [op.id for op in graph.ops]
        self.n = len(self.ops)
        op_index = {op: i for i, op in enumerate(self.ops)}
        live = [t for t in graph.tensors if not t.persistent]
        self.tensors = [t.id for t in live]
        tindex = {t: i for i, t in enumerate(self.tensors)}
        self.size = [t.bytes for t in live]
        self.inputs_mask = sum(1 << tindex[t.id] for t in live if t.producer is None)
        self.reads = []
        self.writes = []
        self.needs = []  # producers of persistent inputs (weight gradients)
        self.reads_persistent = []
        self.updates = []
        self.cycles = []
        for op in graph.ops:
            ins = list(dict.fromkeys(op.inputs))
            self.reads.append(sum(1 << tindex[t] for t in ins if t in tindex))
            self.writes.append(sum(1 << tindex[t] for t in dict.fromkeys(op.outputs) if t in tindex))
            self.reads_persistent.append(frozenset(t for t in ins if t not in tindex))
            self.needs.append(tuple(op_index[p] for t in ins if t not in tindex
                                    and (p := graph.tensor(t).producer) is not None and p != op.id))
            self.updates.append(frozenset(op.updates))
            cost = instance.costs[op.id].get(core)
            self.cycles.append(cost.cycles if cost is not None else 0)
        self.optimizer = [bool(u) for u in self.updates]
        # node-level values: the tensors of each producer (graph inputs are their own value)
        self.groups = [self.writes[i] for i in range(self.n) if self.writes[i]]
        self.groups += [1 << tindex[t.id] for t in live if t.producer is None]
        self.capacity = instance.memory(memory).capacity_bytes
        self.base = (sum(t.bytes for t in graph.tensors if t.persistent)
                     if instance.persistent_home == memory else 0)

    def held(self, mask: int) -> int:
        return sum(self.size[i] for i in range(len(self.size)) if mask >> i & 1)


def _sequence_search(instance: Instance, cls: SequenceClass, peak: bool) -> tuple[int, Sequence] | None:
    """Dijkstra over OR.S1's states; ``peak``: minimise the largest step total instead (OR.S4)."""
    view = _P1View(instance)
    n = view.n
    all_done = (1 << n) - 1
    capacity = None if peak else view.capacity
    limit = cls.max_computes
    held_cache: dict[int, int] = {}

    def held(mask: int) -> int:
        if mask not in held_cache:
            held_cache[mask] = view.base + view.held(mask)
        return held_cache[mask]

    # state: (done mask, resident mask, counts, (sweep, last, ran in stage))
    start = (0, view.inputs_mask, (0,) * n if limit else (), (0, -1, 0))
    dist: dict[Any, int] = {start: 0}
    parent: dict[Any, Any] = {start: None}
    tie = itertools.count()
    heap = [(dist[start], next(tie), start)]
    while heap:
        d, _, state = heapq.heappop(heap)
        if d > dist[state]:
            continue
        done, resident, counts, stage = state
        if done == all_done:
            steps: list[Compute | Release] = []
            while parent[state] is not None:
                state, move = parent[state]
                steps[:0] = move
            sequence = Sequence(tuple(steps))
            metrics = evaluate(instance, sequence)
            assert metrics.feasible or peak, [v.message for v in metrics.violations[:3]]
            assert peak or metrics.compute_cycles == d, (metrics.compute_cycles, d)
            return d, sequence
        moves: list[tuple[Any, int, list[Compute | Release]]] = []
        groups = view.groups if cls.node_values else [1 << i for i in range(len(view.size))]
        for g in groups:
            if resident & g:
                gone = resident & g
                steps = [Release(view.tensors[i]) for i in range(len(view.size)) if gone >> i & 1]
                moves.append(((done, resident & ~g, counts, stage), 0, steps))
        optimizer_ran = any(done >> i & 1 and view.optimizer[i] for i in range(n))
        next_first = next(i for i in range(n) if not done >> i & 1)
        updated = set().union(*(view.updates[i] for i in range(n) if done >> i & 1))
        for i in range(n):
            again = bool(done >> i & 1)
            if again and cls.optimizer_rule and optimizer_ran:
                continue
            if not again and cls.fixed_order and i != next_first:
                continue
            if not again and cls.optimizers_last:
                if view.optimizer[i]:
                    if any(not done >> j & 1 for j in range(i)):
                        continue
                elif optimizer_ran:
                    continue
            if limit and counts[i] >= limit:
                continue
            sweep, last, ran = stage
            if again and cls.passes is not None:
                if ran >> i & 1:
                    continue
                if i <= last:
                    if sweep + 1 >= cls.passes:
                        continue
                    sweep += 1
                last = i
                ran |= 1 << i
            # the evaluator's rules (EV.E3)
            if view.reads[i] & ~resident:
                continue
            if any(not done >> p & 1 for p in view.needs[i]):
                continue
            if any(t in updated and t not in view.updates[i] for t in view.reads_persistent[i]):
                continue
            if view.optimizer[i] and again:
                continue
            after = resident | view.writes[i]
            total = held(after)
            if capacity is not None and total > capacity:
                continue
            counts2 = counts[:i] + (counts[i] + 1,) + counts[i + 1:] if limit else ()
            stage2 = (sweep, last, ran) if again else (0, -1, 0)
            step = max(d, total) - d if peak else view.cycles[i]
            moves.append(((done | 1 << i, after, counts2, stage2), step, [Compute(view.ops[i])]))
        for nxt, cost, steps in moves:
            if d + cost < dist.get(nxt, d + cost + 1):
                dist[nxt] = d + cost
                parent[nxt] = (state, steps)
                heapq.heappush(heap, (d + cost, next(tie), nxt))
    return None


def sequence_optimum(instance: Instance, cls: SequenceClass = EVERY_SEQUENCE) -> tuple[int, Sequence] | None:
    """OR.S3: the least compute cycles over the sequences of ``cls`` that fit, with a witness."""
    return _sequence_search(instance, cls, peak=False)


def sequence_min_peak(instance: Instance, cls: SequenceClass = EVERY_SEQUENCE) -> int:
    """OR.S4: the least peak (EV.E3's largest step total) over the sequences of ``cls``."""
    found = _sequence_search(instance, cls, peak=True)
    assert found is not None  # store-all is a sequence of every class
    return found[0]


# =============================================================== P2, P3: timed schedules (OR.T1-T6)


@dataclass(frozen=True)
class TimedClass:
    """Which timed schedules the search enumerates (OR.T6).

    The default is every schedule the evaluator accepts with at most ``max_runs`` runs
    of each op and ``max_transfers`` transfers of each tensor into each memory; the
    other fields restrict it to a model's class.
    """

    max_runs: int = 3
    max_transfers: int = 2
    fixed_order: bool = False  # first computations in the instance's order
    optimizer_rule: bool = False  # recomputations end before the first optimizer op starts (P2C.C4)
    recompute_after_previous: bool = False  # P3.L4
    move_inputs: bool = True  # graph inputs may be transferred
    rewrites: bool = True  # a run may rewrite a copy of one of its outputs in place (EV.E1.2)


#: OR.T6a: the oracle's own class (3 runs per op, 2 transfers per tensor and memory).
EVERY_SCHEDULE = TimedClass()
#: OR.T6b: class P3.K3 with its defaults (p3_problem.md).
K3 = TimedClass(max_runs=2, max_transfers=1, recompute_after_previous=True, rewrites=False)


def p2_cpsat_class(max_computes: int = 2, max_prefetches: int = 1) -> TimedClass:
    """OR.T6c: the P2 CP-SAT model's class (p2_cpsat.md, not staged, offload_inputs off)."""
    assert max_prefetches == 1  # one offload, one prefetch: one transfer into each memory
    return TimedClass(max_runs=max_computes, max_transfers=1, fixed_order=True, optimizer_rule=True,
                      recompute_after_previous=True, move_inputs=False, rewrites=False)


#: No completion: an estimate at least this large prunes the node.
DEAD = 1 << 60


class _TimedView:
    """The instance by index: tensors, memories, copies (tensor, memory), ops, cores, routes."""

    def __init__(self, instance: Instance):
        graph = instance.graph
        self.instance = instance
        self.memories = [m.id for m in instance.memories]
        nm = self.nm = len(self.memories)
        mindex = {m: i for i, m in enumerate(self.memories)}
        live = [t for t in graph.tensors if not t.persistent]
        self.tensors = [t.id for t in live]
        tindex = {t: i for i, t in enumerate(self.tensors)}
        self.size = [t.bytes for t in live]
        self.is_input = [t.producer is None for t in live]
        self.persistent = [t for t in graph.tensors if t.persistent]
        self.modelled = instance.persistent_home is not None
        self.capacity = [m.capacity_bytes for m in instance.memories]
        self.cores = [c.id for c in instance.cores]
        self.core_memory = [mindex[c.memory] for c in instance.cores]
        self.ops = [op.id for op in graph.ops]
        n = self.n = len(self.ops)
        op_index = {op: i for i, op in enumerate(self.ops)}
        self.reads: list[tuple[int, ...]] = []
        self.writes: list[tuple[int, ...]] = []
        self.reads_persistent: list[tuple[str, ...]] = []
        self.needs: list[tuple[int, ...]] = []
        self.updates: list[frozenset[str]] = []
        for op in graph.ops:
            ins = list(dict.fromkeys(op.inputs))
            self.reads.append(tuple(tindex[t] for t in ins if t in tindex))
            self.writes.append(tuple(tindex[t] for t in dict.fromkeys(op.outputs) if t in tindex))
            self.reads_persistent.append(tuple(t for t in ins if t not in tindex))
            self.needs.append(tuple(sorted({op_index[p] for t in ins if t not in tindex
                                            and (p := graph.tensor(t).producer) is not None and p != op.id})))
            self.updates.append(frozenset(op.updates))
        self.optimizer = [bool(u) for u in self.updates]
        # ops that read a tensor op v updates: they run before v, never after (update_hazard)
        self.hazard_readers = [tuple(sorted({op_index[r] for t in self.updates[v]
                                             for r in graph.tensor(t).consumers if r != self.ops[v]}))
                               for v in range(n)]
        self.blocked_by = [tuple(u for u in range(n) if v in self.hazard_readers[u]) for v in range(n)]
        # runs: (core index, cycles, energy) unpinned and pinned
        self.runs: list[list[tuple[int, int, int, int, int] | None]] = []
        for op in graph.ops:
            row: list[tuple[int, int, int, int, int] | None] = []
            for c in instance.cores:
                cost = instance.costs[op.id].get(c.id)
                if cost is None:
                    row.append(None)
                    continue
                pinned = instance.pinned_costs.get(op.id, {}).get(c.id, cost)
                row.append((cost.cycles, cost.compute_pj + cost.sram_pj + cost.dram_pj,
                            pinned.cycles, pinned.compute_pj + pinned.sram_pj + pinned.dram_pj,
                            int(op.id in instance.pinned_costs and c.id in instance.pinned_costs[op.id])))
            self.runs.append(row)
        # routes[t][src][dst]: (link index, cycles, energy) per link joining them
        self.links = list(instance.links)
        self.routes = [[[[(k, l.transfer_cycles(b), l.transfer_pj(b)
                           + pj_of(b, instance.memories[s].read_fj_per_byte)
                           + pj_of(b, instance.memories[d].write_fj_per_byte))
                          for k, l in enumerate(self.links)
                          if l.connects(self.memories[s], self.memories[d])]
                         for d in range(nm)] for s in range(nm)] for b in self.size]
        self.readers = [[v for v in range(n) if t in self.reads[v]] for t in range(len(self.tensors))]
        self.input_home = mindex[instance.input_home]
        self.home = None if instance.persistent_home is None else mindex[instance.persistent_home]
        # tails for the A* estimate: the quickest run of v and everything that must follow it
        quickest = [min(min(r[0], r[2]) for r in row if r is not None) for row in self.runs]
        cheapest = [min(min(r[1], r[3]) for r in row if r is not None) for row in self.runs]
        succ: list[set[int]] = [set() for _ in range(n)]
        for v in range(n):
            for t in self.reads[v]:
                p = graph.tensor(self.tensors[t]).producer
                if p is not None:
                    succ[op_index[p]].add(v)
            for p in self.needs[v]:
                succ[p].add(v)
            for r in self.hazard_readers[v]:
                succ[r].add(v)
        self.tail = [0] * n
        for v in reversed(range(n)):  # graph order is topological, updates come last
            self.tail[v] = quickest[v] + max((self.tail[w] for w in succ[v]), default=0)
        self.cheapest = cheapest
        self.quickest = quickest
        self.producer = [None if t.producer is None else op_index[t.producer] for t in live]
        # hops[t][a][b]: the fewest cycles to move t from a to b over any chain of links
        self.hops = []
        for t in range(len(self.tensors)):
            far = [[0 if a == b else min((r[1] for r in self.routes[t][a][b]), default=DEAD)
                    for b in range(nm)] for a in range(nm)]
            for k, a, b in itertools.product(range(nm), repeat=3):
                far[a][b] = min(far[a][b], far[a][k] + far[k][b])
            self.hops.append(far)


@dataclass
class _Node:
    """One prefix of a canonical event sequence (OR.T3) and the times it leaves (OR.T4)."""

    now: int
    core_free: tuple[int, ...]
    link_free: tuple[int, ...]
    live: dict[int, tuple[int, int]]  # copy slot -> (ready, kept until: the latest reader's end)
    dying: dict[int, int]  # copy slot -> free time (> now), its last reader placed
    counts: tuple[int, ...]  # runs per op
    moves: tuple[int, ...]  # transfers per copy slot (into that memory)
    min_end: tuple[int, ...]  # earliest end of a run of each op
    max_end: tuple[int, ...]  # latest end of a run of each op
    recompute_end: int  # latest end of a recomputation (optimizer_rule)
    makespan: int
    energy: int
    parent: _Node | None = None
    event: tuple[Any, ...] | None = None
    dominated: bool = False  # another prefix is no worse in every number (OR.T5)

    def key(self) -> tuple[Any, ...]:
        """What must be equal for one node to dominate another: the ops run and the copies held."""
        return (tuple(c > 0 for c in self.counts), tuple(sorted(self.live)))

    def times(self, energy: bool, slots: int) -> tuple[int, ...]:
        """What must be no larger (OR.T5): counts used, times that bind later events, the objective."""
        now = self.now

        def c(x: int) -> int:  # a lower bound at or below now binds no later event
            return max(now, x)

        out = [now, self.makespan, *self.counts, *self.moves, *map(c, self.core_free), *map(c, self.link_free)]
        for slot in range(slots):
            if slot in self.live:
                ready, kept = self.live[slot]
                out += (c(ready), c(kept))
            else:  # a copy on its way out holds its room and its place until it goes
                out.append(c(self.dying.get(slot, now)))
        out += map(c, self.min_end)
        out += map(c, self.max_end)
        out.append(c(self.recompute_end))
        if energy:
            out.append(self.energy)
        return tuple(out)


class _TimedSearch:
    """A* over canonical event sequences for one pin assignment (OR.T3-T5)."""

    def __init__(self, view: _TimedView, cls: TimedClass, pins: dict[str, int], bound: int | None):
        self.view = view
        self.cls = cls
        self.pins = pins
        self.bound = bound  # prune nodes whose estimate reaches it (a better one is known)
        inst = view.instance
        self.energy_objective = inst.objective is Objective.ENERGY
        self.limit = inst.runtime_limit_cycles
        self.static = inst.static_fj_per_cycle
        base = [0] * view.nm
        if view.modelled:
            for t in view.persistent:
                where = pins.get(t.id, view.home)
                assert where is not None
                base[where] += t.bytes
        self.base = base
        self.max_runs = [1 if (view.optimizer[v] or not view.writes[v]) else cls.max_runs
                         for v in range(view.n)]
        # per op, the memories of the cores it may run on under these pins, and its fewest
        # cycles there (the pinned cost where all its persistent inputs are pinned there)
        self.cycles_in: list[dict[int, int]] = []
        for u in range(view.n):
            where: dict[int, int] = {}
            for c, r in enumerate(view.runs[u]):
                m = view.core_memory[c]
                if r is None or (view.modelled and any(pins.get(t, m) != m for t in view.reads_persistent[u])):
                    continue
                pinned = bool(r[4]) and view.modelled and bool(view.reads_persistent[u]) and all(
                    pins.get(t) == m for t in view.reads_persistent[u])
                where[m] = min(where.get(m, DEAD), r[2] if pinned else r[0])
            self.cycles_in.append(where)

    # ------------------------------------------------------------------ helpers
    def objective(self, node: _Node) -> int:
        if self.energy_objective:
            return node.energy + self.static * node.makespan // 1000
        return node.makespan

    def estimate(self, node: _Node) -> int:
        """An A* estimate that no completion of ``node`` beats (OR.T5): the earliest end of
        every op still to run, on the memory of each of its cores, its inputs brought there
        over the quickest links; :data:`DEAD` when some op can never read one of its inputs."""
        v = self.view
        now = node.now
        counts = node.counts
        unrun = [u for u in range(v.n) if not counts[u]]
        latency = max(node.makespan, now - (-sum(v.quickest[u] for u in unrun) // len(v.cores)))
        ends: dict[int, dict[int, int]] = {}  # op still to run -> memory -> earliest end there
        first_end: dict[int, int] = {}
        for u in unrun:
            ready = now
            for p in v.needs[u]:
                ready = max(ready, node.min_end[p] if counts[p] else first_end[p])
            for r in v.hazard_readers[u]:
                ready = max(ready, node.max_end[r] if counts[r] else first_end.get(r, now))
            here: dict[int, int] = {}
            for m, cycles in self.cycles_in[u].items():
                start = ready
                for t in v.reads[u]:
                    start = max(start, self.arrival(node, t, m, ends))
                if start < DEAD:
                    here[m] = start + cycles
            if not here:
                return DEAD
            ends[u] = here
            first_end[u] = end = min(here.values())
            latency = max(latency, end - v.quickest[u] + v.tail[u])
        if not self.energy_objective:
            return latency
        rest = sum(v.cheapest[u] for u in unrun)
        return node.energy + rest + self.static * latency // 1000

    def arrival(self, node: _Node, t: int, m: int, ends: dict[int, dict[int, int]]) -> int:
        """The earliest a copy of ``t`` can be ready in ``m``: a copy held, moved over the
        quickest chain of links, or made by a run of its producer (``ends``: the earliest
        end of each op still to run, per memory)."""
        v = self.view
        nm = v.nm
        best = DEAD
        hops = v.hops[t]
        live = node.live
        for src in range(nm):
            copy = live.get(t * nm + src)
            if copy is not None:
                if src == m:
                    return copy[0]  # one copy per memory: a second cannot come sooner
                if hops[src][m] < DEAD:
                    best = min(best, max(copy[0], node.now) + hops[src][m])
        p = v.producer[t]
        if p is not None and node.counts[p] < self.max_runs[p]:
            made = ends.get(p)
            if made is None:  # a recomputation: from now, its inputs left out
                made = {src: node.now + cycles for src, cycles in self.cycles_in[p].items()}
            for src, done in made.items():
                best = min(best, done + hops[src][m])
        return best

    def can_run(self, node: _Node, u: int) -> bool:
        """Whether ``u`` may still run (a reader of a copy may come): an over-estimate."""
        if node.counts[u] >= self.max_runs[u]:
            return False
        return not any(node.counts[w] for w in self.view.blocked_by[u])

    def useful(self, node: _Node, t: int, m: int, seen: frozenset[int] = frozenset()) -> bool:
        """Whether a copy of ``t`` in memory ``m`` may still be read (an over-estimate, OR.T3)."""
        v = self.view
        for u in v.readers[t]:
            if self.can_run(node, u) and any(r is not None and v.core_memory[c] == m
                                             for c, r in enumerate(v.runs[u])):
                return True
        if v.is_input[t] and not self.cls.move_inputs:
            return False
        seen = seen | {m}
        for d in range(v.nm):
            if d not in seen and v.routes[t][m][d] and node.moves[t * v.nm + d] < self.cls.max_transfers \
                    and self.useful(node, t, d, seen):
                return True
        return False

    def fit(self, node: _Node, earliest: int, new: dict[int, int]) -> int | None:
        """OR.T4: the first time from ``earliest`` at which every memory holds what it must,
        with ``new`` (memory -> bytes) added; ``None`` if never."""
        v = self.view
        held = list(self.base)
        for slot in node.live:
            held[slot % v.nm] += v.size[slot // v.nm]
        for m, b in new.items():
            held[m] += b
        # occupancy at time tau >= earliest: live + new + dying copies with free > tau
        going = sorted((free, slot) for slot, free in node.dying.items() if free > earliest)
        for _, slot in going:
            held[slot % v.nm] += v.size[slot // v.nm]
        tau = earliest
        k = 0
        while True:
            if all(h <= cap for h, cap in zip(held, v.capacity, strict=True)):
                return tau
            if k >= len(going):
                return None
            tau = going[k][0]
            while k < len(going) and going[k][0] == tau:
                slot = going[k][1]
                held[slot % v.nm] -= v.size[slot // v.nm]
                k += 1

    # ---------------------------------------------------------------- successors
    def children(self, node: _Node) -> list[_Node]:
        out: list[_Node] = []
        v = self.view
        cls = self.cls
        for u in range(v.n):
            if not self.can_run(node, u):
                continue
            again = node.counts[u] > 0
            if cls.fixed_order and not again and any(not node.counts[w] for w in range(u)):
                continue
            optimizer_ran = any(node.counts[w] for w in range(v.n) if v.optimizer[w])
            if cls.optimizer_rule and again and optimizer_ran:
                continue
            if v.optimizer[u] and any(not node.counts[r] for r in v.hazard_readers[u]):
                continue
            if any(not node.counts[p] for p in v.needs[u]):
                continue
            for c, run in enumerate(v.runs[u]):
                if run is not None:
                    out += self.run_children(node, u, c, run, again)
        for slot in list(node.live):
            t, src = divmod(slot, v.nm)
            if v.is_input[t] and not cls.move_inputs:
                continue
            for dst in range(v.nm):
                if v.routes[t][src][dst] and node.moves[t * v.nm + dst] < cls.max_transfers:
                    out += self.transfer_children(node, t, src, dst)
        return out

    def run_children(self, node: _Node, u: int, c: int, run: tuple[int, int, int, int, int],
                     again: bool) -> list[_Node]:
        v = self.view
        cls = self.cls
        m = v.core_memory[c]
        if v.modelled and any(self.pins.get(t, m) != m for t in v.reads_persistent[u]):
            return []
        earliest = max(node.now, node.core_free[c])
        ins = []
        for t in v.reads[u]:
            slot = t * v.nm + m
            if slot not in node.live:
                return []
            earliest = max(earliest, node.live[slot][0])
            ins.append(slot)
        for p in v.needs[u]:
            earliest = max(earliest, node.min_end[p])
        for r in v.hazard_readers[u]:
            earliest = max(earliest, node.max_end[r])
        if v.optimizer[u] and cls.optimizer_rule:
            earliest = max(earliest, node.recompute_end)
        if again and cls.recompute_after_previous:
            earliest = max(earliest, node.max_end[u])
        fresh = []  # outputs with no copy in m: a new copy
        going = []  # outputs whose copy in m is on its way out: a new one after it goes, or none
        rewritten = []  # outputs whose copy in m is live: rewritten, no new one (EV.E1.2)
        for t in v.writes[u]:
            slot = t * v.nm + m
            if slot in node.dying:
                going.append(slot)
            elif slot not in node.live:
                fresh.append(slot)
            elif not cls.rewrites:
                return []  # the models keep one copy of a tensor in a memory at a time
            else:
                rewritten.append(slot)
        pinned = bool(run[4]) and v.modelled and bool(v.reads_persistent[u]) and all(
            self.pins.get(t) == m for t in v.reads_persistent[u])
        cycles, energy = (run[2], run[3]) if pinned else (run[0], run[1])
        # OR.T3: each copy read may be read for the last time; each new copy may be dropped unread
        in_choices = [(True,) if not self._useful_after(node, slot, u) else (False, True) for slot in ins]
        found = []
        for remake in itertools.product((True, False) if cls.rewrites else (True,), repeat=len(going)):
            outs = fresh + [slot for slot, r in zip(going, remake, strict=True) if r]
            kept = [node.dying[slot] for slot, r in zip(going, remake, strict=True) if not r]
            # a rewritten copy is held until the run ends (EV.E1.4: it is being written)
            held = rewritten + [slot for slot, r in zip(going, remake, strict=True) if not r]
            if again and not outs:
                continue  # a recomputation that makes nothing
            first = max([earliest] + [node.dying[slot] for slot in outs if slot in node.dying])
            out_choices = [(False, True) if self.useful(node, slot // v.nm, m) else (True,) for slot in outs]
            for drop in itertools.product(*out_choices):
                if again and all(drop):
                    continue  # a recomputation nobody reads
                new: dict[int, int] = {}
                for slot in outs:  # held from the run's start, dropped or not (EV.E1.4)
                    new[m] = new.get(m, 0) + v.size[slot // v.nm]
                start = self.fit(node, first, new)
                if start is None or any(start >= free for free in kept):
                    continue  # an old copy gone by the start is no rewrite: 'remake' covers it
                end = start + cycles
                if self.limit is not None and end > self.limit:
                    continue
                for last in itertools.product(*in_choices):
                    found.append(self._after_run(node, u, c, start, end, energy, ins, last, outs, drop,
                                                 held))
        return found

    def _useful_after(self, node: _Node, slot: int, u: int) -> bool:
        """Whether the copy ``slot`` read by a run of ``u`` may be read again after it."""
        counts = list(node.counts)
        counts[u] += 1
        probe = replace(node, counts=tuple(counts))
        t, m = divmod(slot, self.view.nm)
        return self.useful(probe, t, m)

    def _after_run(self, node: _Node, u: int, c: int, start: int, end: int, energy: int, ins: list[int],
                   last: tuple[bool, ...], outs: list[int], drop: tuple[bool, ...], held: list[int]) -> _Node:
        v = self.view
        live = dict(node.live)
        dying = {s: f for s, f in node.dying.items() if f > start}
        for slot, final in zip(ins, last, strict=True):
            ready, kept = live[slot]
            kept = max(kept, end)
            if final:
                del live[slot]
                dying[slot] = kept
            else:
                live[slot] = (ready, kept)
        for slot in held:  # rewritten: kept until the run ends
            if slot in live:
                ready, kept = live[slot]
                live[slot] = (ready, max(kept, end))
            else:
                dying[slot] = max(dying[slot], end)
        for slot, d in zip(outs, drop, strict=True):
            dying.pop(slot, None)
            if d:  # read by nobody: freed when written
                dying[slot] = end
            else:
                live[slot] = (end, end)
        counts = list(node.counts)
        again = counts[u] > 0
        counts[u] += 1
        core_free = list(node.core_free)
        core_free[c] = end
        min_end = list(node.min_end)
        max_end = list(node.max_end)
        min_end[u] = min(min_end[u], end) if again else end
        max_end[u] = max(max_end[u], end)
        return _Node(start, tuple(core_free), node.link_free, live, dying, tuple(counts), node.moves,
                     tuple(min_end), tuple(max_end),
                     max(node.recompute_end, end) if again and not v.optimizer[u] else node.recompute_end,
                     max(node.makespan, end), node.energy + energy, node,
                     ("run", u, c, start, end, tuple(ins), last, tuple(outs), drop, tuple(held)))

    def transfer_children(self, node: _Node, t: int, src: int, dst: int) -> list[_Node]:
        v = self.view
        slot_src = t * v.nm + src
        slot_dst = t * v.nm + dst
        if slot_dst in node.live:
            return []  # EV.E2 duplicate_copy
        counts = list(node.moves)
        counts[slot_dst] += 1
        probe = replace(node, moves=tuple(counts))
        if not self.useful(probe, t, dst):
            return []  # a copy nobody may read
        earliest = max(node.now, node.live[slot_src][0], node.dying.get(slot_dst, 0))
        found = []
        for link, cycles, energy in v.routes[t][src][dst]:
            start = self.fit(node, max(earliest, node.link_free[link]), {dst: v.size[t]})
            if start is None:
                continue
            end = start + cycles
            if self.limit is not None and end > self.limit:
                continue
            again = (False, True) if self.useful(probe, t, src) else (True,)
            for final in again:
                live = dict(node.live)
                dying = {s: f for s, f in node.dying.items() if f > start}
                ready, kept = live[slot_src]
                kept = max(kept, end)
                if final:
                    del live[slot_src]
                    dying[slot_src] = kept
                else:
                    live[slot_src] = (ready, kept)
                dying.pop(slot_dst, None)
                live[slot_dst] = (end, end)
                link_free = list(node.link_free)
                link_free[link] = end
                found.append(_Node(start, node.core_free, tuple(link_free), live, dying, node.counts,
                                   tuple(counts), node.min_end, node.max_end, node.recompute_end,
                                   max(node.makespan, end), node.energy + energy, node,
                                   ("move", t, src, dst, link, start, end, final)))
        return found

    # ------------------------------------------------------------------- search
    def start(self) -> _Node:
        v = self.view
        live = {}
        for t in range(len(v.tensors)):
            if v.is_input[t] and v.readers[t]:
                live[t * v.nm + v.input_home] = (0, 0)
        n = v.n
        return _Node(0, (0,) * len(v.cores), (0,) * len(v.links), live, {}, (0,) * n,
                     (0,) * (len(v.tensors) * v.nm), (0,) * n, (0,) * n, 0, 0, 0)

    def run(self) -> _Node | None:
        """The best goal (every op run), or ``None`` (none, or none below ``bound``)."""
        root = self.start()
        # per key, the times of the prefixes kept, each with its node (a node another one
        # dominates later is marked and skipped when it comes out of the heap)
        seen: dict[tuple[Any, ...], list[tuple[tuple[int, ...], _Node]]] = {}
        tie = itertools.count()
        heap = [(self.estimate(root), 0, next(tie), root)]
        energy = self.energy_objective
        slots = len(self.view.tensors) * self.view.nm
        while heap:
            f, _, _, node = heapq.heappop(heap)
            if node.dominated:
                continue
            if self.bound is not None and f >= self.bound:
                return None
            if all(node.counts):
                return node
            for child in self.children(node):
                g = self.estimate(child)
                if g >= DEAD or (self.bound is not None and g >= self.bound):
                    continue
                vec = child.times(energy, slots)
                known = seen.setdefault(child.key(), [])
                if any(all(a <= b for a, b in zip(other, vec, strict=True)) for other, _ in known):
                    continue
                kept = []
                for other, other_node in known:
                    if all(a <= b for a, b in zip(vec, other, strict=True)):
                        other_node.dominated = True
                    else:
                        kept.append((other, other_node))
                kept.append((vec, child))
                known[:] = kept
                heapq.heappush(heap, (g, -sum(c > 0 for c in child.counts), next(tie), child))
        return None


def _schedule_of(view: _TimedView, goal: _Node, pins: dict[str, int]) -> Schedule:
    """OR.T3: replay the events of ``goal`` into a timed schedule, every copy freed when its
    last reader (or its last writer: a copy read by nobody, a rewritten one) ends."""
    events = []
    node: _Node | None = goal
    while node is not None and node.event is not None:
        events.append(node.event)
        node = node.parent
    events.reverse()
    nm = view.nm
    runs: list[OpRun] = []
    transfers: list[Transfer] = []
    frees: list[Free] = []
    copies: dict[int, list[int]] = {}  # slot -> [alloc, kept]
    gone: dict[int, int] = {}  # slot -> index in frees of the last free of its copy

    def free(slot: int, when: int) -> None:
        t, m = divmod(slot, nm)
        gone[slot] = len(frees)
        frees.append(Free(when, view.tensors[t], view.memories[m]))

    for t in range(len(view.tensors)):
        if view.is_input[t]:
            slot = t * nm + view.input_home
            if view.readers[t]:
                copies[slot] = [0, 0]
            else:
                free(slot, 0)
    number: dict[int, int] = {}
    for event in events:
        if event[0] == "run":
            _, u, c, start, end, ins, last, outs, drop, held = event
            runs.append(OpRun(start, end, view.ops[u], number.get(u, 0), view.cores[c]))
            number[u] = number.get(u, 0) + 1
            for slot, final in zip(ins, last, strict=True):
                copies[slot][1] = max(copies[slot][1], end)
                if final:
                    free(slot, copies.pop(slot)[1])
            for slot in held:  # rewritten (EV.E1.2): kept until the run ends
                if slot in copies:
                    copies[slot][1] = max(copies[slot][1], end)
                else:
                    old = frees[gone[slot]]
                    frees[gone[slot]] = Free(max(old.time, end), old.tensor, old.memory)
            for slot, d in zip(outs, drop, strict=True):
                if d:
                    free(slot, end)
                else:
                    copies[slot] = [start, end]
        else:
            _, t, src, dst, link, start, end, final = event
            transfers.append(Transfer(start, end, view.tensors[t], view.memories[src], view.memories[dst],
                                      view.links[link].id))
            slot = t * nm + src
            copies[slot][1] = max(copies[slot][1], end)
            if final:
                free(slot, copies.pop(slot)[1])
            copies[t * nm + dst] = [start, end]
    for slot, (_, kept) in copies.items():
        free(slot, kept)
    pinned = tuple((t, view.memories[m]) for t, m in sorted(pins.items()))
    return Schedule(tuple(sorted(runs)), tuple(sorted(transfers)), tuple(sorted(frees)), pinned)


def _pin_assignments(view: _TimedView) -> list[dict[str, int]]:
    """The pin assignments worth searching (OR.T5): each persistent tensor in one core's memory
    or in none, leaving out every assignment with a pin that no run gains from.

    A pin of ``t`` in ``m`` only takes room in ``m`` and ties ``t``'s readers to the cores
    of ``m``, unless some reader has all its persistent inputs pinned in ``m`` and a pinned
    cost there that is quicker or cheaper: without that, dropping the pin changes no
    run's cost and loses no schedule.
    """
    if not view.modelled or not view.persistent:
        return [{}]
    graph = view.instance.graph
    srams = sorted(set(view.core_memory))
    index = {op: i for i, op in enumerate(view.ops)}
    options: list[list[int | None]] = []
    for t in view.persistent:
        readers = [index[op] for op in dict.fromkeys(graph.tensor(t.id).consumers)]
        # every reader runs on a core of m (EV.E2 not_resident), so it must have one there
        options.append([None] + [m for m in srams if all(
            any(r is not None and view.core_memory[c] == m for c, r in enumerate(view.runs[u])) for u in readers)])
    out = []
    for combo in itertools.product(*options):
        pins = {t.id: m for t, m in zip(view.persistent, combo, strict=True) if m is not None}
        if all(_pin_pays(view, graph, index, t, m, pins) for t, m in pins.items()):
            out.append(pins)
    return out


def _pin_pays(view: _TimedView, graph: Any, index: dict[str, int], tensor: str, m: int,
              pins: dict[str, int]) -> bool:
    for op in dict.fromkeys(graph.tensor(tensor).consumers):
        u = index[op]
        if not all(pins.get(t) == m for t in view.reads_persistent[u]):
            continue
        for c, r in enumerate(view.runs[u]):
            if r is not None and view.core_memory[c] == m and r[4] and (r[2] < r[0] or r[3] < r[1]):
                return True
    return False


def timed_optimum(instance: Instance, cls: TimedClass = EVERY_SCHEDULE, *, below: int | None = None
                  ) -> tuple[int, Schedule] | None:
    """OR.T1: the least latency or energy over the timed schedules of ``cls``, with a witness.

    The instance's objective decides (latency or energy; a runtime limit is kept).  With
    ``below``, only schedules of a smaller value are looked for (``None``: none exists),
    which prunes the search: pass a value already known to be reached.
    """
    assert instance.objective in (Objective.LATENCY, Objective.ENERGY), instance.objective
    view = _TimedView(instance)
    for row in view.runs:
        assert all(r is None or min(r[0], r[2]) > 0 for r in row), "OR.T4 needs runs of one cycle or more"
    assert all(route[1] > 0 for per_t in view.routes for per_src in per_t for per_dst in per_src
               for route in per_dst), "OR.T4 needs transfers of one cycle or more"
    best: tuple[int, Schedule] | None = None
    for pins in _pin_assignments(view):
        search = _TimedSearch(view, cls, pins, below if best is None else best[0])
        if any(b > cap for b, cap in zip(search.base, view.capacity, strict=True)):
            continue
        goal = search.run()
        if goal is None:
            continue
        value = search.objective(goal)
        schedule = _schedule_of(view, goal, pins)
        metrics = evaluate(instance, schedule)
        assert metrics.feasible, [x.message for x in metrics.violations[:3]]
        assert metrics.objective_value == value, (metrics.objective_value, value)
        if best is None or value < best[0]:
            best = (value, schedule)
    return best
