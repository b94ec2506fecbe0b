"""The decoder of :mod:`monet_ilp.heuristics.decisions`: decisions in, a timed schedule out.

The rules it follows are in that module's docstring.  This module holds the decoder's
per-instance tables (:class:`DecoderPlan`) and its one pass over the ops (``_Decoder``),
and nothing else, so that it can be compiled: ``setup.py`` compiles it with mypyc when
the package is installed (the GA decodes thousands of schedules a second; the compiled
module runs the same code about twice as fast, ``scripts/bench_ga.py``), and
:mod:`monet_ilp._native` falls back to this source when the compiled module is missing or
older than it.  Hence the annotations on every attribute: mypyc turns them into typed
fields.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind
from monet_ilp.instance import per_instance
from monet_ilp.schedule import Free, OpRun, Schedule, Transfer

if TYPE_CHECKING:
    import weakref

    from monet_ilp.instance import Instance, LinkSpec

_T = TypeVar("_T")

__all__ = ["READS_CACHE", "DecoderPlan", "RawSchedule", "ReadsByCore", "decode_genes", "decode_placed",
           "decode_placed_raw", "decode_raw", "list_schedule", "plan_of"]


# ================================================================= per instance
class DecoderPlan:
    """Everything the decoder needs of an instance, computed once (:func:`plan_of` caches it).

    Public attributes the GA reads: ``saved`` (saved activations, in graph order),
    ``recomputable`` (those with a forward producer to rerun), ``layers`` (in order of
    first appearance) and ``layer_cores`` (layer -> the cores that run its first op).
    """

    # Every attribute typed: the compiled module (setup.py) keeps them as typed fields.
    order: tuple[str, ...]
    size: dict[str, int]
    unread_inputs: tuple[str, ...]
    backward: list[bool]
    costs: list[dict[str, int]]
    layer_of: list[str]
    saved: tuple[str, ...]
    saved_index: dict[str, int]
    layer_index: dict[str, int]
    layer_cores: dict[str, tuple[str, ...]]
    core_ids: tuple[str, ...]
    input_home: str
    inputs_in_sram: bool
    sequence_form: bool
    links: dict[str, LinkSpec]
    pins_modelled: bool
    lazy_cross: bool
    noc_first: bool
    work: list[int]
    layer_persistent: dict[str, tuple[str, ...]]
    first_core: list[str]
    # Tensors, cores, memories and links by number: what the decoder runs on.
    tensor_ids: list[str]
    tensor_index: dict[str, int]
    tsize: list[int]
    rank: list[int]
    mem_ids: list[str]
    mem_index: dict[str, int]
    core_index: dict[str, int]
    imemory_of: list[int]
    core_mems: list[int]
    icapacity: list[int]
    inin: list[tuple[int, ...]]
    inout: list[tuple[int, ...]]
    itouched: list[tuple[int, ...]]
    ireads_persistent: list[tuple[int, ...]]
    ireaders: list[tuple[int, ...]]
    iproducer_pos: list[int]
    ilast_read: list[int]
    irecomputable: list[bool]
    isaved: list[int]
    igraph_inputs: list[int]
    iunread_inputs: set[int]
    icosts: list[list[int]]
    ipinned_cycles: list[list[int]]
    ipersistent_io: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None]
    ipersistent_readers: dict[int, list[int]]
    link_ids: list[str]
    iroutes: list[list[tuple[int, ...]]]
    icycles_cache: dict[int, tuple[tuple[int, int], ...]]
    ishared: int

    def __init__(self, instance: Instance):
        graph = instance.graph
        self.order = tuple(op.id for op in graph.ops)
        self.size = {t.id: t.bytes for t in graph.tensors}
        persistent = {t.id for t in graph.tensors if t.persistent}
        graph_inputs = tuple(t.id for t in graph.tensors
                                  if not t.persistent and t.producer is None)
        self.unread_inputs = tuple(t.id for t in graph.tensors
                                   if not t.persistent and t.producer is None and not t.consumers)
        updaters: dict[str, int] = {}  # persistent tensor -> position of its first in-place update
        for k, op in enumerate(graph.ops):
            for t in op.updates:
                updaters.setdefault(t, k)
        hazard = set(updaters)
        nin, nout, wait_made, hazard_reads, made = [], [], [], [], []
        updates, self.backward, self.costs, self.layer_of, touched = [], [], [], [], []
        producer_pos: dict[str, int] = {}
        self.producer_op: dict[str, str] = {}
        self.graph_outputs: dict[str, tuple[str, ...]] = {}
        for k, op in enumerate(graph.ops):
            inputs = tuple(dict.fromkeys(op.inputs))
            nin.append(tuple(t for t in inputs if t not in persistent))
            nout.append(tuple(t for t in dict.fromkeys(op.outputs) if t not in persistent))
            self.graph_outputs[op.id] = nout[-1]
            # Weight gradients: no copy witnesses them, so wait for the run that makes them.
            wait_made.append(tuple(t for t in inputs if t in persistent
                                        and graph.tensor(t).producer not in (None, op.id)))
            hazard_reads.append(tuple(t for t in inputs if t in hazard))
            made.append(tuple(t for t in op.outputs if t in persistent))
            updates.append(tuple(dict.fromkeys(op.updates)))
            self.backward.append(op.kind in (OpKind.BACKWARD_DATA, OpKind.BACKWARD_WEIGHT,
                                             OpKind.OPTIMIZER))
            self.costs.append({c.id: instance.costs[op.id][c.id].cycles
                               for c in instance.cores if c.id in instance.costs.get(op.id, {})})
            self.layer_of.append(op.layer)
            touched.append(tuple(dict.fromkeys(nin[-1] + nout[-1])))
            for t in nout[-1]:
                producer_pos[t] = k
                self.producer_op[t] = op.id
        # A tensor can be recomputed if a forward (or loss) op that makes nothing
        # persistent produces it; the rerun must come before any update of its weights.
        self.recomputable: set[str] = set()
        self.rerun_deadline: dict[int, int] = {}
        for k, op in enumerate(graph.ops):
            if op.kind in (OpKind.FORWARD, OpKind.LOSS) and not made[k] and not op.updates:
                self.recomputable.update(nout[k])
                self.rerun_deadline[k] = min((updaters[t] for t in op.inputs if t in updaters),
                                             default=len(self.order))
        # Positions of the ops that read each non-persistent tensor, in order.
        readers: dict[str, list[int]] = {}
        for k, ins in enumerate(nin):
            for t in ins:
                readers.setdefault(t, []).append(k)
        last_read = {t: v[-1] for t, v in readers.items()}
        self.saved = tuple(t.id for t in graph.saved_tensors())
        self.saved_index = {t: i for i, t in enumerate(self.saved)}
        self.layers: list[str] = []
        self.ops_of_layer: dict[str, list[int]] = {}
        self.lead_op: dict[str, str] = {}
        for k, op in enumerate(graph.ops):
            if op.layer:
                if op.layer not in self.ops_of_layer:
                    self.layers.append(op.layer)
                self.ops_of_layer.setdefault(op.layer, []).append(k)
                if op.kind in (OpKind.FORWARD, OpKind.LOSS):
                    self.lead_op.setdefault(op.layer, op.id)
        for layer in self.layers:
            self.lead_op.setdefault(layer, self.order[self.ops_of_layer[layer][0]])
        self.layer_index = {layer: i for i, layer in enumerate(self.layers)}
        # The cores a layer's gene ranges over: those that run its lead op.
        self.layer_cores = {layer: tuple(self.costs[self.order.index(self.lead_op[layer])])
                            for layer in self.layers}
        self.core_ids = tuple(c.id for c in instance.cores)
        memory_of = {c.id: c.memory for c in instance.cores}
        capacity = {m.id: m.capacity_bytes for m in instance.memories}
        # The shared memory data crosses and is offloaded to: the inputs' home (DRAM, P3),
        # or, when the inputs start in the one core's SRAM (P2), the memory it offloads to.
        self.input_home = instance.input_home
        self.inputs_in_sram = instance.memory(self.input_home).kind == "sram"
        self.shared: str | None = None if self.inputs_in_sram else self.input_home
        if self.inputs_in_sram and len(instance.cores) == 1 and instance.cores[0].memory == self.input_home:
            self.shared = next((m.id for m in instance.memories if m.id != self.input_home and any(
                link.connects(self.input_home, m.id) for link in instance.links)), None)
        # P1: one core, its SRAM holds everything, nothing to offload to: the decisions
        # are keep / recompute, and a decoding is a Sequence (:func:`decode_sequence`).
        self.sequence_form = self.shared is None and len(instance.cores) == 1 and \
            instance.cores[0].memory == self.input_home
        self.links = {l.id: l for l in instance.links}
        # On energy, a kept tensor read on another core goes there over a link that joins
        # the two SRAMs, and to DRAM only when its SRAM evicts it (module docstring).
        self.lazy_cross = instance.objective == "energy"
        # On energy, the NoC before DRAM: a recomputation reruns on its producer's core
        # (where its weights may be pinned) and its output crosses a link to the reader,
        # and an evicted tensor waits in another SRAM with room (module docstring).
        self.noc_first = instance.objective == "energy"
        routes: dict[tuple[str, str], tuple[str, ...]] = {}
        for a in capacity:
            for b in capacity:
                if a != b:
                    routes[(a, b)] = tuple(l.id for l in instance.links if l.connects(a, b))
        # Pinning (EV.E1.5): the ops that read each persistent tensor, the persistent
        # tensors each op reads, its cycles per core when all of them are pinned there,
        # and the persistent tensors each layer's ops read (the GA's pin genes).
        self.pins_modelled = instance.persistent_home is not None
        reads_persistent: list[tuple[str, ...]] = []
        self.persistent_readers: dict[str, list[int]] = {}
        pinned_cycles: list[dict[str, int]] = []
        for k, op in enumerate(graph.ops):
            reads = tuple(t for t in dict.fromkeys(op.inputs) if t in persistent)
            reads_persistent.append(reads)
            for t in reads:
                self.persistent_readers.setdefault(t, []).append(k)
            pinned_cycles.append({c: cost.cycles for c, cost in instance.pinned_costs.get(op.id, {}).items()}
                                      if reads else {})
        self.work = [sum(self.size[t] for t in ts) for ts in touched]  # an op's bytes at once
        self.layer_persistent = {layer: tuple(dict.fromkeys(t for k in self.ops_of_layer[layer]
                                                            for t in reads_persistent[k]))
                                 for layer in self.layers}
        self.reads_cache: dict[tuple[int, ...], ReadsByCore] = {}
        self.first_core = [next(iter(row)) for row in self.costs]
        # The decoder's own tables: tensors, cores, memories and links by number; it
        # runs on these (list indexing costs less than a dictionary lookup by name), and
        # names come back only in what it records.  Belady's ties go by name (``rank``).
        self.tensor_ids = [t.id for t in graph.tensors]
        tid = {t: i for i, t in enumerate(self.tensor_ids)}
        self.tensor_index = tid

        def ids(names: tuple[str, ...]) -> tuple[int, ...]:
            return tuple(tid[t] for t in names)

        self.tsize = [t.bytes for t in graph.tensors]
        self.rank = [0] * len(self.tensor_ids)
        for r, t in enumerate(sorted(self.tensor_ids)):
            self.rank[tid[t]] = r
        self.mem_ids = [m.id for m in instance.memories]
        mid = {m: i for i, m in enumerate(self.mem_ids)}
        self.mem_index = mid
        self.core_index = {c: i for i, c in enumerate(self.core_ids)}
        self.imemory_of = [mid[memory_of[c]] for c in self.core_ids]
        self.core_mems = [mid[m] for m in dict.fromkeys(memory_of[c] for c in self.core_ids)]
        self.icapacity = [capacity[m] for m in self.mem_ids]
        self.inin = [ids(ts) for ts in nin]
        self.inout = [ids(ts) for ts in nout]
        self.itouched = [ids(ts) for ts in touched]
        self.ireads_persistent = [ids(ts) for ts in reads_persistent]
        self.ireaders = [tuple(readers.get(t, ())) for t in self.tensor_ids]
        self.iproducer_pos = [producer_pos.get(t, -1) for t in self.tensor_ids]
        self.ilast_read = [last_read.get(t, 0) for t in self.tensor_ids]
        self.irecomputable = [t in self.recomputable for t in self.tensor_ids]
        self.isaved = [tid[t] for t in self.saved]
        self.igraph_inputs = [tid[t] for t in graph_inputs]
        self.iunread_inputs = {tid[t] for t in self.unread_inputs}
        self.icosts = [[row.get(c, -1) for c in self.core_ids] for row in self.costs]
        self.ipinned_cycles = [[row.get(c, -1) for c in self.core_ids] for row in pinned_cycles]
        # Per op: (wait_made, updates, hazard_reads, made), or None when all four are empty.
        self.ipersistent_io = [None if not (w or u or h or m) else (ids(w), ids(u), ids(h), ids(m))
                               for w, u, h, m in zip(wait_made, updates, hazard_reads, made, strict=True)]
        self.ipersistent_readers = {tid[t]: ks for t, ks in self.persistent_readers.items()}
        self.link_ids = list(self.links)
        lid = {l: i for i, l in enumerate(self.link_ids)}
        self.iroutes = [[tuple(lid[l] for l in routes.get((a, b), ())) for b in self.mem_ids]
                        for a in self.mem_ids]
        self.icycles_cache: dict[int, tuple[tuple[int, int], ...]] = {}
        self.ishared = -1 if self.shared is None else mid[self.shared]

    def route_cycles(self, src: int, dst: int, tensor: int) -> tuple[tuple[int, int], ...]:
        """Each link from memory ``src`` to ``dst`` with the cycles it takes to move ``tensor`` (by number)."""
        m = len(self.mem_ids)
        key = (src * m + dst) * len(self.tensor_ids) + tensor
        found = self.icycles_cache.get(key)
        if found is None:
            nbytes = self.tsize[tensor]
            found = self.icycles_cache[key] = tuple((link, self.links[self.link_ids[link]].transfer_cycles(nbytes))
                                                   for link in self.iroutes[src][dst])
        return found

    def reads_by_core(self, core_of: list[int]) -> ReadsByCore:
        """Where each tensor is read with op ``k`` on core number ``core_of[k]`` (cached: it
        depends on nothing else)."""
        key = tuple(core_of)
        found = self.reads_cache.get(key)
        if found is not None:
            return found
        backward, producer_pos = self.backward, self.iproducer_pos
        last_on: list[dict[int, int]] = [{} for _ in self.core_ids]
        last_forward_on: list[dict[int, int]] = [{} for _ in self.core_ids]
        cross: set[int] = set()
        cross_forward: set[int] = set()
        remote_last: dict[int, int] = {}
        memory_of = self.imemory_of
        for t, readers in enumerate(self.ireaders):
            k = producer_pos[t]
            home = -1 if k < 0 else core_of[k]
            for q in readers:
                core = core_of[q]
                last_on[core][t] = q
                forward = not backward[q]
                if forward:
                    last_forward_on[core][t] = q
                if home >= 0 and core != home:
                    cross.add(t)
                    if forward:
                        cross_forward.add(t)
                    if memory_of[core] != memory_of[home]:
                        remote_last[t] = q  # readers come in order: the last one stays
        room = list(self.icapacity)
        for k, core in enumerate(core_of):
            mem = self.imemory_of[core]
            left = self.icapacity[mem] - self.work[k]
            if left < room[mem]:
                room[mem] = left
        if len(self.reads_cache) >= READS_CACHE:
            self.reads_cache.clear()
        found = self.reads_cache[key] = ReadsByCore(last_on, last_forward_on, frozenset(cross),
                                                    frozenset(cross_forward), room, remote_last)
        return found

    def core_of_ops(self, cores: Mapping[str, str]) -> list[str]:
        """The core of every op (by position) under a layer -> core map."""
        out = []
        for layer, row, first in zip(self.layer_of, self.costs, self.first_core, strict=True):
            core = cores.get(layer) if layer else None
            out.append(core if core in row else first)
        return out


@dataclass(frozen=True)
class ReadsByCore:
    """Where a tensor is read under one op-to-core map (:meth:`DecoderPlan.reads_by_core`).

    Cores, tensors and memories by number.  ``last_on[core][t]``
    and ``last_forward_on[core][t]``: the position of the last op on ``core`` that reads
    ``t``, and of the last forward-phase one; ``cross`` and ``cross_forward``: the tensors
    (with a producer) that an op, or a forward-phase op, reads on another core than their
    producer's.
    """

    last_on: list[dict[int, int]]
    last_forward_on: list[dict[int, int]]
    cross: frozenset[int]
    cross_forward: frozenset[int]
    #: Per memory: its capacity less the most bytes one of its ops touches at once (what
    #: is left for pins).
    room: list[int]
    #: Per tensor read in another SRAM than its producer's: the position of the last such read.
    remote_last: dict[int, int]


#: How many op-to-core maps :meth:`DecoderPlan.reads_by_core` remembers (a GA's
#: population shares few allocations; the cache starts again when full).
READS_CACHE = 1024


_PLANS: dict[int, tuple[weakref.ref[Instance], DecoderPlan]] = {}


def plan_of(instance: Instance) -> DecoderPlan:
    """The decoder's tables for ``instance``, built once per instance object."""
    return per_instance(_PLANS, instance, DecoderPlan)


def decode_raw(instance: Instance, policy: list[int], layer_core: list[str],
               pins: Iterable[str] = ()) -> RawSchedule:
    """:func:`decode_genes` without building the schedule's objects (the GA's fast path,
    :mod:`monet_ilp.heuristics.fast`)."""
    return _placed_genes(instance, policy, layer_core, pins)[1]


def decode_genes(instance: Instance, policy: list[int], layer_core: list[str], pins: Iterable[str] = (), *,
                 tidy: bool = True) -> Schedule:
    """:func:`decode` from the GA's genes: a policy index (into :data:`POLICIES`) per saved
    tensor, a core per layer (both in the instance's order), the persistent tensors to
    pin; no validation.  ``tidy=False`` leaves the schedule's lists in the order they
    were made (faster; same evaluation)."""
    return _placed_genes(instance, policy, layer_core, pins)[0].run(tidy=tidy)


def decode_placed(instance: Instance, core_of: list[str], policy: list[int], pins: Iterable[str]) -> Schedule:
    """The timed schedule of ``policy`` (a policy index per saved tensor) with the ops on
    ``core_of`` (by position) and ``pins``, less the pins a recomputation contradicts."""
    return _placed(instance, plan_of(instance), core_of, policy, pins)[0].run()


def decode_placed_raw(instance: Instance, core_of: list[str], policy: list[int], pins: Iterable[str]) -> RawSchedule:
    """:func:`decode_placed` without building the schedule's objects (a search's fast path,
    :mod:`monet_ilp.heuristics.fast`)."""
    return _placed(instance, plan_of(instance), core_of, policy, pins)[1]


def _placed_genes(instance: Instance, policy: list[int], layer_core: list[str],
                  pins: Iterable[str]) -> tuple[_Decoder, RawSchedule]:
    plan = plan_of(instance)
    return _placed(instance, plan, plan.core_of_ops(dict(zip(plan.layers, layer_core, strict=True))), policy, pins)


def _placed(instance: Instance, plan: DecoderPlan, core_of: list[str], policy: list[int],
            pins: Iterable[str]) -> tuple[_Decoder, RawSchedule]:
    """A decoder that has placed every op under ``pins`` less those a recomputation
    contradicts: a rerun on another core than a pinned input's (EV.E1.5 would find the
    input missing there).  Each such pin is dropped and the decoding starts again."""
    pins = list(pins)
    dropped: list[str] = []
    while True:
        decoder = _Decoder(instance, plan, core_of, policy, strict=False, heuristic="decisions", pins=pins)
        raw = decoder.place()
        if not decoder.conflicts:
            decoder.unpinned += dropped
            return decoder, raw
        dropped += [t for t in pins if t in decoder.conflicts]
        pins = [t for t in pins if t not in decoder.conflicts]


def list_schedule(instance: Instance, core_of_op: list[str], *, heuristic: str) -> Schedule:
    """Every saved tensor kept, ops on the given cores (by position), an error if an op does not fit."""
    plan = plan_of(instance)
    return _Decoder(instance, plan, core_of_op, [0] * len(plan.saved), strict=True,
                    heuristic=heuristic).run()


class RawSchedule(NamedTuple):
    """A decoded schedule before its objects are built: the fields of each
    :class:`~monet_ilp.schedule.OpRun` (start, end, op, instance, core) and each
    :class:`~monet_ilp.schedule.Transfer` (start, end, tensor, src, dst, link) in the
    order they were made, the makespan, and the copies (EV.E1) they make: a run's output
    from the run's start, a transfer's from the transfer's start, graph inputs in their
    home memory from 0."""

    runs: list[tuple[int, int, str, int, str]]
    transfers: list[tuple[int, int, str, str, str, str]]
    latency: int
    #: The copies the decoder freed, as (memory, allocation time, free time, tensor), in
    #: the order of the frees.
    freed: list[tuple[str, int, int, str]]
    #: The copies it never freed, as (memory, allocation time, tensor).
    held: list[tuple[str, int, str]]
    #: Graph inputs nobody reads, freed from their home memory at time 0.
    unread: tuple[str, ...]
    input_home: str
    #: Persistent tensor -> the SRAM it is pinned in (EV.E1.5).
    pinned: dict[str, str]
    #: Indices (in ``runs``) of the runs at their pinned cost.
    pinned_runs: list[int]

    def frees(self) -> list[tuple[int, str, str]]:
        """The fields of each :class:`~monet_ilp.schedule.Free` (time, tensor, memory), in order.

        A free after the makespan is left out (EV.E1.4 keeps the copy until then)."""
        latency, home = self.latency, self.input_home
        return [(0, t, home) for t in self.unread] + [(f, t, m) for m, _, f, t in self.freed if f <= latency]


class _Decoder:
    """One decoding: the state of cores, memories and links while ops are placed in order.

    Tensors, cores, memories and links are numbers; runs,
    transfers and frees are collected as tuples of names in their dataclasses' field
    order, and built into schedule objects once, at the end (the GA decodes thousands).
    """

    def __init__(self, instance: Instance, plan: DecoderPlan, core_of: list[str], policy: list[int], *,
                 strict: bool, heuristic: str, pins: Iterable[str] = ()):
        if plan.shared is None:
            raise MonetError("the decoder moves data through a shared memory (DRAM, or the memory one core "
                             f"offloads to); this instance starts its inputs in SRAM {plan.input_home!r} "
                             "and has no memory to offload to", field="input_home",
                             fix="use a P2 or P3 instance (a P1 instance has keep / recompute decisions only)")
        self.shared: int = plan.ishared
        self.plan, self.strict, self.heuristic = plan, strict, heuristic
        self.core_names = core_of
        index = plan.core_index
        self.core_of: list[int] = [index[c] for c in core_of]
        n_tensors = len(plan.tensor_ids)
        # Per tensor: its policy (0 keep, 1 offload, 2 recompute; POLICIES).
        self.policy: list[int] = [0] * n_tensors
        for i, t in enumerate(plan.isaved):
            self.policy[t] = policy[i]
        # Recompute decisions whose rerun would follow an update of its weights become offloads.
        self.offloaded_instead: list[str] = []
        for t in plan.isaved:
            if self.policy[t] == 2 and plan.ilast_read[t] >= plan.rerun_deadline[plan.iproducer_pos[t]]:
                self.policy[t] = 1
                self.offloaded_instead.append(plan.tensor_ids[t])
        # Outputs written to DRAM right after they are made: offloads, and tensors that
        # a reader on another core fetches from there (not a recompute's backward readers).
        where = plan.reads_by_core(self.core_of)
        self.last_on, self.last_forward_on = where.last_on, where.last_forward_on
        chosen = self.policy
        self.to_shared: list[bool] = [p == 1 and plan.iproducer_pos[t] >= 0 for t, p in enumerate(chosen)]
        # A kept tensor read in another SRAM is written to DRAM as before, and its copy stays
        # in its producer's SRAM until the last such read (``pull``: its position), which
        # takes whichever copy arrives first: often the producer's, one NoC hop away,
        # before the round trip through DRAM is over (unless the SRAM evicts it first).
        self.pull: dict[int, int] = {t: last for t, last in where.remote_last.items() if not chosen[t]}
        for t in where.cross:
            if not chosen[t] and not (plan.lazy_cross and self._linked(t, where.remote_last.get(t, -1))):
                self.to_shared[t] = True
        for t in where.cross_forward:
            if chosen[t] == 2:
                self.to_shared[t] = True
        self.size = plan.tsize
        n_mems = len(plan.mem_ids)
        self.cursor = [0] * n_mems
        self.core_free = [0] * len(plan.core_ids)
        self.resident: list[dict[int, int]] = [{} for _ in range(n_mems)]
        self.used = [0] * n_mems
        # Pins (EV.E1.5): a persistent tensor whose readers, reruns included, all run on
        # one core is held in that core's SRAM all iteration; otherwise it stays in
        # persistent_home.
        self.pinned: dict[str, str] = {}
        self.pinned_at: dict[int, int] = {}  # the same by number
        self.unpinned: list[str] = []
        self.conflicts: set[str] = set()  # pinned inputs of a rerun on another core
        self.parked: dict[int, int] = {}  # tensor -> its last read, for one parked in another SRAM
        # The protected inputs of each op whose run waits on a rerun (_recompute): a copy
        # that one of them holds is not released by a read inside the rerun.
        self.waiting: list[set[int]] = []
        self.placed: RawSchedule | None = None
        pins = list(pins)
        reruns = self._rerun_cores() if pins else {}
        room = list(where.room)  # per SRAM: what is left for pins next to its largest op
        for name in pins:
            t = plan.tensor_index[name]
            readers = plan.ipersistent_readers.get(t, [])
            on = {self.core_of[q] for q in readers}
            for q in readers:
                on.update(reruns.get(q, ()))
            mem = plan.imemory_of[next(iter(on))] if len(on) == 1 and plan.pins_modelled else -1
            if mem >= 0 and plan.tsize[t] <= room[mem]:
                self.pinned[name] = plan.mem_ids[mem]
                self.pinned_at[t] = mem
                self.used[mem] += plan.tsize[t]
                room[mem] -= plan.tsize[t]
            else:
                self.unpinned.append(name)
        # Per op: the memory its persistent inputs are all pinned in (its pinned cost
        # there), or -1; the runs placed at their pinned cost (by index in ``runs``).
        self.pinned_in: list[int] | None = None
        self.pinned_runs: list[int] = []
        if self.pinned_at:
            self.pinned_in = [-1] * len(plan.order)
            for k in {q for t in self.pinned_at for q in plan.ipersistent_readers[t]}:
                held = {self.pinned_at.get(t, -1) for t in plan.ireads_persistent[k]}
                if len(held) == 1:
                    self.pinned_in[k] = held.pop()
        # Per memory: tensor -> when a transfer out of it ends (its copy stays until then).
        self.read_until: list[dict[int, int]] = [{} for _ in range(n_mems)]
        # Per tensor: when its copy in the shared memory is ready, or -1 (none).
        self.in_shared: list[int] = [-1] * n_tensors
        if not plan.inputs_in_sram:
            for t in plan.igraph_inputs:
                self.in_shared[t] = 0
        self.made_at: dict[int, int] = {}
        self.read_end: dict[int, int] = {}
        self.runs_of = [0] * len(plan.order)
        self.runs: list[tuple[int, int, str, int, str]] = []  # the fields of an OpRun (_RUN_FIELDS)
        self.transfers: list[tuple[int, int, str, str, str, str]] = []  # of a Transfer
        self.busy_starts: list[list[int]] = [[] for _ in plan.link_ids]
        self.busy_ends: list[list[int]] = [[] for _ in plan.link_ids]
        self.evicted: list[list[str]] = []
        self.over: list[list[str | int]] = []  # [op, memory, bytes needed]
        # EV.E1 copies as they are made and freed: per memory, the allocation time of each
        # resident copy, and the (time, bytes) changes of the copies' lifetimes (RawSchedule).
        self.alloc: list[dict[int, int]] = [{} for _ in range(n_mems)]
        # The shared memory's copies (never freed): read graph inputs, and what is written there.
        read_inputs = [t for t in plan.igraph_inputs if t not in plan.iunread_inputs]
        self.shared_copies: list[tuple[str, int, str]] = []
        if plan.inputs_in_sram:  # they start resident in the one core's SRAM (P2)
            home = plan.mem_index[plan.input_home]
            for t in read_inputs:
                self.resident[home][t] = 0
                self.alloc[home][t] = 0
                self.used[home] += plan.tsize[t]
        else:
            shared = plan.mem_ids[self.shared]
            self.shared_copies = [(shared, 0, plan.tensor_ids[t]) for t in read_inputs]
        self.lifetimes: list[tuple[str, int, int, str]] = []  # (memory, allocation, free, tensor)

    def _rerun_on(self, t: int, core: int) -> int:
        """The core that reruns ``t``'s producer for a read on ``core``: on an energy instance
        (``DecoderPlan.noc_first``), the producer's own core when a link joins its SRAM to
        ``core``'s (the SRAM where its persistent inputs may be pinned; the output then
        crosses one link), otherwise ``core``."""
        plan = self.plan
        own = self.core_of[plan.iproducer_pos[t]]
        if not plan.noc_first or own == core:
            return core
        home, mem = plan.imemory_of[own], plan.imemory_of[core]
        return own if home == mem or plan.route_cycles(home, mem, t) else core

    def _rerun_cores(self) -> dict[int, set[int]]:
        """The cores each op may be rerun on (a superset): the cores that read a
        ``recompute`` output of it, and, down the chain, a rerun's cores for the producers
        of its inputs that it may have to recompute (a ``recompute`` one, or one with no
        copy written to DRAM)."""
        plan, core_of, policy = self.plan, self.core_of, self.policy
        producer_pos, recomputable = plan.iproducer_pos, plan.irecomputable
        reruns: dict[int, set[int]] = {}
        rerun_on = self._rerun_on
        for t in plan.isaved:
            if policy[t] == 2 and producer_pos[t] >= 0:
                reruns.setdefault(producer_pos[t], set()).update(rerun_on(t, core_of[q]) for q in plan.ireaders[t])
        for k in range(max(reruns, default=-1), -1, -1):  # producers come before their readers
            cores = reruns.get(k)
            if not cores:
                continue
            for u in plan.inin[k]:
                if recomputable[u] and (policy[u] == 2 or not self.to_shared[u]):
                    reruns.setdefault(producer_pos[u], set()).update(rerun_on(u, c) for c in cores)
        return reruns

    # ------------------------------------------------------------------ links
    def _move(self, tensor: int, src: int, dst: int, ready: int) -> tuple[int, int]:
        """Book the link from ``src`` to ``dst`` that delivers ``tensor`` first, from ``ready`` on."""
        best_start, best_end, best_link = self._earliest(tensor, src, dst, ready)
        plan = self.plan
        if best_link < 0:
            raise MonetError(f"no link joins {plan.mem_ids[src]!r} and {plan.mem_ids[dst]!r}", field="links",
                             fix="add a link between every core's SRAM and the shared memory")
        if best_end > best_start:
            starts = self.busy_starts[best_link]
            i = bisect_right(starts, best_start)
            starts.insert(i, best_start)
            self.busy_ends[best_link].insert(i, best_end)
        self.transfers.append((best_start, best_end, plan.tensor_ids[tensor], plan.mem_ids[src], plan.mem_ids[dst],
                               plan.link_ids[best_link]))
        return best_start, best_end

    def _earliest(self, tensor: int, src: int, dst: int, ready: int) -> tuple[int, int, int]:
        """(start, end, link) of the link from ``src`` to ``dst`` that would deliver ``tensor``
        first from ``ready`` on, without booking it (link ``-1``: none joins them)."""
        best_end = best_start = best_link = -1
        for link, cycles in self.plan.route_cycles(src, dst, tensor):
            starts, ends = self.busy_starts[link], self.busy_ends[link]
            t = ready
            i = bisect_right(ends, t)  # intervals are disjoint: ends are sorted too
            n = len(starts)
            while i < n and starts[i] < t + cycles:
                if ends[i] > t:
                    t = ends[i]
                i += 1
            if best_link < 0 or t + cycles < best_end:
                best_end, best_start, best_link = t + cycles, t, link
        return best_start, best_end, best_link

    def _linked(self, tensor: int, last: int) -> bool:
        """Whether a link joins the SRAM of ``tensor``'s producer to that of every reader
        elsewhere (up to position ``last``): then those readers can take it straight from there."""
        plan = self.plan
        home = plan.imemory_of[self.core_of[plan.iproducer_pos[tensor]]]
        for q in plan.ireaders[tensor]:
            if q > last:
                break
            mem = plan.imemory_of[self.core_of[q]]
            if mem != home and not plan.route_cycles(home, mem, tensor):
                return False
        return last >= 0

    def _write_shared(self, tensor: int, mem: int, ready: int) -> None:
        """Copy ``tensor`` from ``mem`` to the shared memory (where it then stays); the copy in
        ``mem`` is kept until the transfer ends."""
        begin, end = self._move(tensor, mem, self.shared, ready)
        self.in_shared[tensor] = end
        plan = self.plan
        self.shared_copies.append((plan.mem_ids[self.shared], begin, plan.tensor_ids[tensor]))
        self._keep_until(tensor, mem, end)

    def _keep_until(self, tensor: int, mem: int, end: int) -> None:
        """Keep ``tensor``'s copy in ``mem`` until ``end`` at least (a transfer out of it)."""
        until = self.read_until[mem]
        if until.get(tensor, 0) < end:
            until[tensor] = end

    def _allocate(self, tensor: int, mem: int, start: int, end: int) -> None:
        """A copy of ``tensor`` in ``mem``, charged from ``start``, ready at ``end``."""
        self.resident[mem][tensor] = end
        self.alloc[mem][tensor] = start
        self.used[mem] += self.size[tensor]
        if start > self.cursor[mem]:
            self.cursor[mem] = start

    # ---------------------------------------------------------------- memories
    def _next_read(self, tensor: int, core: int, after: int) -> int:
        """The position of the next op after ``after`` that reads ``tensor`` on ``core`` (or
        one past the last op: never)."""
        core_of = self.core_of
        for q in self.plan.ireaders[tensor]:
            if q > after and core_of[q] == core:
                return q
        return len(core_of)

    def _release(self, tensor: int, mem: int) -> None:
        at = self.resident[mem].pop(tensor)
        cursor = self.cursor[mem]
        if cursor > at:
            at = cursor
        until = self.read_until[mem].get(tensor, 0)
        if until > at:
            at = until
        plan = self.plan
        self.lifetimes.append((plan.mem_ids[mem], self.alloc[mem].pop(tensor), at,
                               plan.tensor_ids[tensor]))  # a free, and its copy
        self.used[mem] -= self.size[tensor]
        self.cursor[mem] = at

    def _make_room(self, mem: int, need: int, protected: set[int], core: int, here: int,
                   op: str) -> None:
        """Evict (Belady) until ``need`` more bytes fit in ``mem``; never a protected tensor.

        The victim is read again last (ties: the greater name)."""
        plan = self.plan
        capacity = plan.icapacity[mem]
        resident = self.resident[mem]
        never = len(self.core_of)
        rank = plan.rank
        while self.used[mem] + need > capacity:
            victim = -1
            key = (-1, -1)
            for t in resident:
                if t in protected:
                    continue
                k = (self._next_read(t, core, here), rank[t])
                if k > key:
                    victim, key = t, k
            if victim < 0:
                self.over.append([op, plan.mem_ids[mem], self.used[mem] + need])
                return
            # Read again here or elsewhere (a parked one: unless another SRAM holds it too),
            # with no copy in DRAM and not to be recomputed: it goes to DRAM, or is parked.
            needed = ((key[0] != never or self.pull.get(victim, -1) > here
                       or (self.parked.get(victim, -1) > here
                           and not any(victim in self.resident[m] for m in plan.core_mems if m != mem)))
                      and self.in_shared[victim] < 0 and self.policy[victim] != 2)
            if needed and not (plan.noc_first and self._park(victim, mem)):
                self._write_shared(victim, mem, resident[victim])
            self.evicted.append([plan.tensor_ids[victim], plan.mem_ids[mem], op])
            self._release(victim, mem)

    def _park(self, tensor: int, mem: int) -> bool:
        """On an energy instance, move an evicted ``tensor`` still to be read over a link
        into the SRAM with the most room for it now, instead of writing it to DRAM; whether
        one had room.  That SRAM evicts it first when it needs the room (none of its ops
        reads it), writing it to DRAM then if it is still to be read."""
        plan = self.plan
        size = self.size[tensor]
        best, room = -1, -1
        for m in plan.core_mems:
            if m == mem or tensor in self.resident[m] or not plan.route_cycles(mem, m, tensor):
                continue
            free = plan.icapacity[m] - self.used[m] - size
            if free >= 0 and free > room:
                best, room = m, free
        if best < 0:
            return False
        start, end = self._move(tensor, mem, best, max(self.resident[mem][tensor], self.cursor[best]))
        self._keep_until(tensor, mem, end)
        self._allocate(tensor, best, start, end)
        self.parked[tensor] = plan.ilast_read[tensor]
        return True

    def _recomputes(self, t: int, backward: bool) -> bool:
        """Whether a read of ``t`` that finds no copy in its SRAM reruns its producer."""
        return self.plan.irecomputable[t] and (
            self.in_shared[t] < 0 or (backward and self.policy[t] == 2))

    def _materialize(self, t: int, core: int, here: int, protected: set[int], backward: bool) -> None:
        """Make ``t`` resident in ``core``'s SRAM for a read at position ``here``."""
        plan = self.plan
        mem = plan.imemory_of[core]
        if t in self.resident[mem]:  # e.g. made by the rerun for an earlier input
            protected.add(t)
            return
        holders = [other for other in plan.core_mems if other != mem and t in self.resident[other]]
        rerun_at = -1  # the core of a rerun made elsewhere for this read
        if self._recomputes(t, backward) and (not holders or (backward and self.policy[t] == 2)):
            where = self._rerun_on(t, core)
            made_in = plan.imemory_of[where]
            if made_in == mem:
                self._recompute(t, where, here, protected)
                protected.add(t)
                return
            if t not in self.resident[made_in]:  # (there already for the op at ``here``: moved as it is)
                self._recompute(t, where, here, protected)
                rerun_at = where
            holders = [made_in]  # it comes over the link below
        shared_ready = self.in_shared[t]
        size = self.size[t]
        if self.used[mem] + size > plan.icapacity[mem]:
            self._make_room(mem, size, protected, core, here, plan.order[here])
        cursor = self.cursor[mem]
        # The copy that arrives first: the shared memory's, or one still resident in
        # another core's SRAM, moved straight over a link that joins the two (a NoC hop
        # instead of a round trip through DRAM); that copy is then kept until the move ends.
        source, best_end = self.shared, -1
        if shared_ready >= 0 and rerun_at < 0:
            best_end = self._earliest(t, source, mem, max(shared_ready, cursor))[1]
        for other in holders:  # _make_room evicts from ``mem`` only: they still hold it
            _, end, link = self._earliest(t, other, mem, max(self.resident[other][t], cursor))
            if link >= 0 and (best_end < 0 or end < best_end):
                source, best_end = other, end
        if best_end < 0:
            raise MonetError(f"tensor {plan.tensor_ids[t]!r} has no copy that {plan.core_ids[core]!r} can fetch",
                             field="schedule", fix="this is a bug in the decoder")
        if source == self.shared:
            start, end = self._move(t, source, mem, max(shared_ready, cursor))
        else:
            start, end = self._move(t, source, mem, max(self.resident[source][t], cursor))
            self._keep_until(t, source, end)
        # (after a rerun elsewhere the source is that SRAM: DRAM is not among the sources)
        held = self._held(t)
        if (rerun_at >= 0 and not held and self.last_on[rerun_at].get(t, -1) <= here
                and not self._read_here(t, source, here)):
            self._release(t, source)  # the rerun's copy, once moved, unless read there later
        if not held and here >= self.pull.get(t, len(self.core_of)):
            producer = self.core_of[plan.iproducer_pos[t]]
            home = plan.imemory_of[producer]
            if (t in self.resident[home] and self.last_on[producer].get(t, -1) <= here
                    and not self._read_here(t, home, here)):
                self._release(t, home)  # the last read in another SRAM has it: its home copy goes
        self._allocate(t, mem, start, end)
        protected.add(t)

    def _held(self, t: int) -> bool:
        """Whether an op that waits on the rerun now being placed holds ``t`` as an input:
        a copy of ``t`` may then be the one it reads, and stays."""
        for inputs in self.waiting:
            if t in inputs:
                return True
        return False

    def _read_here(self, t: int, mem: int, here: int) -> bool:
        """Whether the op at position ``here`` reads ``t`` in ``mem`` (a rerun on another
        core, :meth:`_rerun_on`, fetches for it meanwhile)."""
        plan = self.plan
        return plan.imemory_of[self.core_of[here]] == mem and t in plan.inin[here]

    def _recompute(self, t: int, core: int, here: int, protected: set[int]) -> None:
        """Rerun the producer of ``t`` on ``core`` for a read at position ``here``."""
        plan = self.plan
        k = plan.iproducer_pos[t]
        if here >= plan.rerun_deadline[k]:
            raise MonetError(f"tensor {plan.tensor_ids[t]!r} would be recomputed after its weights are updated",
                             field=f"tensors.{plan.tensor_ids[t]}", fix='use "offload" or "keep" for it')
        if plan.icosts[k][core] < 0:
            raise MonetError(f"op {plan.order[k]!r} cannot be recomputed on {plan.core_ids[core]!r}",
                             field=f"tensors.{plan.tensor_ids[t]}", fix='use "offload" or "keep" for it')
        self.waiting.append(protected)
        self._run(k, core, here, set(protected), recompute=True)
        self.waiting.pop()
        # The outer op's inputs stay protected; what else the rerun touched goes if unread.
        mem = plan.imemory_of[core]
        resident = self.resident[mem]
        last_here = self.last_on[core]
        for x in plan.itouched[k]:
            if (x != t and x not in protected and x in resident
                    and last_here.get(x, -1) < here):  # no read from here on
                self._release(x, mem)

    def _run(self, k: int, core: int, here: int, protected: set[int], *, recompute: bool) -> int:
        """Place a run of the op at position ``k`` on ``core`` (for position ``here``); its end.

        The decoder's inner loop: ``if`` rather than ``max``, and the persistent-tensor
        bookkeeping only for the ops that have some (``DecoderPlan.ipersistent_io``).
        """
        plan = self.plan
        mem = plan.imemory_of[core]
        resident = self.resident[mem]
        ins = plan.inin[k]
        missing = []
        for t in ins:
            if t in resident:
                protected.add(t)
            else:
                missing.append(t)
        if missing:
            if plan.noc_first:  # a rerun elsewhere (_rerun_on) must not evict what this op still fetches
                protected.update(missing)
            backward = recompute or plan.backward[k]
            if len(missing) > 1:  # reruns first, while fewer fetched inputs are protected
                missing.sort(key=lambda t: not self._recomputes(t, backward))
            for t in missing:
                self._materialize(t, core, here, protected, backward)
        size = self.size
        outs = plan.inout[k]
        need = 0
        for t in outs:
            if t not in resident:
                need += size[t]
        op = plan.order[k]
        if need and self.used[mem] + need > plan.icapacity[mem]:
            self._make_room(mem, need, protected, core, here, op)
        # The earliest start: the core free, the memory's cursor, the inputs arrived.
        start = self.core_free[core]
        at = self.cursor[mem]
        if at > start:
            start = at
        for t in ins:
            at = resident[t]
            if at > start:
                start = at
        if recompute:
            for t in outs:  # a rerun rewrites a resident copy (EV.E1.2) once it has arrived
                at = resident.get(t, 0)
                if at > start:
                    start = at
        io = plan.ipersistent_io[k]
        if io is not None:
            wait_made, updates, hazard_reads, made = io
            for t in wait_made:
                at = self.made_at.get(t, 0)
                if at > start:
                    start = at
            for t in updates:
                at = self.read_end.get(t, 0)
                if at > start:
                    start = at
        cycles = plan.icosts[k][core]
        if self.pinned_in is not None:  # EV.E1.5: every persistent input pinned here, the pinned cost
            if self.pinned_in[k] == mem and plan.ipinned_cycles[k][core] >= 0:
                cycles = plan.ipinned_cycles[k][core]
                self.pinned_runs.append(len(self.runs))
            elif recompute:
                self.conflicts.update(plan.tensor_ids[t] for t in plan.ireads_persistent[k]
                                      if self.pinned_at.get(t, mem) != mem)
        end = start + cycles
        number = self.runs_of[k]
        self.runs_of[k] = number + 1
        self.runs.append((start, end, op, number, plan.core_ids[core]))
        self.core_free[core] = end
        if io is not None:
            read_end = self.read_end
            for t in hazard_reads:
                if read_end.get(t, 0) < end:
                    read_end[t] = end
            for t in made:
                self.made_at[t] = end
        alloc = self.alloc[mem]
        for t in outs:
            if t not in resident:
                resident[t] = end
                alloc[t] = start
                self.used[mem] += size[t]
            protected.add(t)
        if end > self.cursor[mem]:
            self.cursor[mem] = end
        return end

    # ------------------------------------------------------------------ driver
    def run(self, *, tidy: bool = True) -> Schedule:
        """Decode; ``tidy`` sorts the schedule's lists (the evaluator does not need it)."""
        raw = self.placed or self.place()
        runs, transfers, frees = raw.runs, raw.transfers, raw.frees()
        if tidy:
            runs.sort()
            transfers.sort()
            frees.sort()
        meta = {"heuristic": self.heuristic, "latency_cycles": raw.latency,
                "recomputations": len(runs) - len(self.plan.order),
                "repairs": {"evicted": self.evicted, "over_capacity": self.over,
                            "offloaded_instead": self.offloaded_instead, "unpinned": self.unpinned}}
        return Schedule(_build(OpRun, _RUN_FIELDS, runs), _build(Transfer, _TRANSFER_FIELDS, transfers),
                        _build(Free, _FREE_FIELDS, frees), pinned=tuple(sorted(self.pinned.items())), meta=meta)

    def place(self) -> RawSchedule:
        """Place every op in order; the schedule as the field tuples of its runs, transfers and frees."""
        plan = self.plan
        if self.strict:
            self._check_fit()
        policy, to_shared, in_shared = self.policy, self.to_shared, self.in_shared
        pull, core_of = self.pull, self.core_of
        backward, touched, memory_of = plan.backward, plan.itouched, plan.imemory_of
        last_on, last_forward_on = self.last_on, self.last_forward_on
        if plan.inputs_in_sram:  # offloaded graph inputs are written to the shared memory first
            home = plan.mem_index[plan.input_home]
            for t in plan.igraph_inputs:
                if policy[t] == 1 and t in self.resident[home]:
                    self._write_shared(t, home, 0)
        for k, core in enumerate(core_of):
            mem = memory_of[core]
            end = self._run(k, core, k, set(), recompute=False)
            for t in plan.inout[k]:  # other cores, or the offload policy, read it from DRAM
                if to_shared[t] and in_shared[t] < 0:
                    self._write_shared(t, mem, end)
            forward = not backward[k]
            resident = self.resident[mem]
            last_here, last_forward_here = last_on[core], last_forward_on[core]
            for t in touched[k]:
                if t not in resident:
                    continue
                if last_here.get(t, -1) <= k:  # no later read on this core
                    if pull.get(t, -1) > k and memory_of[core_of[plan.iproducer_pos[t]]] == mem:
                        continue  # another SRAM pulls it from here later
                    self._release(t, mem)
                elif forward and policy[t] and last_forward_here.get(t, -1) <= k:
                    self._release(t, mem)  # offload / recompute: gone after the forward phase
        runs, transfers = self.runs, self.transfers
        latency = 0
        for r in runs:
            if r[1] > latency:
                latency = r[1]
        for x in transfers:
            if x[1] > latency:
                latency = x[1]
        names, mems = plan.tensor_ids, plan.mem_ids
        held = [(mems[m], a, names[t]) for m in plan.core_mems for t, a in self.alloc[m].items()]
        held += self.shared_copies
        self.placed = RawSchedule(runs, transfers, latency, self.lifetimes, held, plan.unread_inputs,
                                  plan.input_home, self.pinned, self.pinned_runs)
        return self.placed

    def _check_fit(self) -> None:
        plan = self.plan
        for k, op in enumerate(plan.order):
            core = self.core_of[k]
            mem = plan.imemory_of[core]
            need = sum(self.size[t] for t in plan.itouched[k])
            if need > plan.icapacity[mem]:
                name = plan.mem_ids[mem]
                raise MonetError(f"op {op!r} needs {need} bytes at once, more than {name!r} holds "
                                 f"({plan.icapacity[mem]} bytes)", field=f"memories.{name}.capacity",
                                 fix="give the core more SRAM, or allocate the op elsewhere")


_RUN_FIELDS = ("start", "end", "op", "instance", "core")
_TRANSFER_FIELDS = ("start", "end", "tensor", "src", "dst", "link")
_FREE_FIELDS = ("time", "tensor", "memory")


def _build(cls: type[_T], names: tuple[str, ...], rows: Seq[tuple[object, ...]]) -> tuple[_T, ...]:
    """Frozen dataclass instances from field tuples, without the per-field ``__setattr__`` of
    their ``__init__`` (2-3x faster; equal, hashable and ordered like any other instance)."""
    new = object.__new__
    out = []
    for row in rows:
        obj = new(cls)
        obj.__dict__.update(zip(names, row, strict=True))
        out.append(obj)
    return tuple(out)
