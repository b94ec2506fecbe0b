"""P2 data shared by the CP-SAT and MILP backends: items, costs, limits, schedule assembly.

The solver-agnostic step between an :class:`~monet_ilp.instance.Instance` of problem P2
(``formulations/p2_problem.md``) and the two P2 models (``formulations/p2_cpsat.md``,
``formulations/p2_milp.md``).  It groups tensors into *items* (a node's non-persistent
outputs, moved and freed together; or one graph input), prices every run and transfer
in the instance's integer units, assembles timed schedules from model values, and
reads schedules back (hints).  Notation (section D of ``p2_cpsat.md``) is used in
comments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import Metrics, evaluate
from monet_ilp.heuristics import chen_greedy_sequence, chen_sqrt_sequence, store_all_sequence
from monet_ilp.instance import Instance, LinkSpec, Objective, pj_of
from monet_ilp.schedule import Free, OpRun, Schedule, Sequence, Transfer

__all__ = [
    "DEFAULT_MAX_COMPUTES",
    "DEFAULT_MAX_PREFETCHES",
    "CopyTrace",
    "P2Data",
    "P2Item",
    "P2Op",
    "ScheduleTrace",
    "assemble_schedule",
    "baseline_schedule",
    "p2_data",
    "paging_schedule",
    "schedule_value",
    "timed_schedule",
    "trace_schedule",
]

#: Runs per node (first computation included).  Moccasin's choice: in a training graph a
#: dropped forward activation is wanted again by one backward region, so a second run
#: covers it; every extra run adds optional intervals and read choices to the timed model.
DEFAULT_MAX_COMPUTES = 2
#: Prefetches per offloaded item: forward activations are read by one backward region
#: (dX and dW of a layer run back to back), so one page-in covers it.
DEFAULT_MAX_PREFETCHES = 1


@dataclass(frozen=True)
class P2Op:
    """Op ``v`` of P2C.D1: its cost on the core, the items it reads and the item it writes."""

    index: int
    id: str
    cycles: int
    energy_pj: int
    optimizer: bool  # updates persistent tensors in place: runs once, after every reader
    reads: tuple[int, ...]  # item indices, sorted, no duplicates
    item: int | None  # the item of its non-persistent outputs, if any
    max_runs: int  # C_v


@dataclass(frozen=True)
class P2Item:
    """Item ``i`` of P2C.D2: tensors kept, moved and freed together.

    ``producer`` is the op index of the node that writes it, ``None`` for a graph
    input.  A transfer of the item moves its tensors one after the other on the link
    (``transfer_cycles`` in all, ``offload_pj`` / ``prefetch_pj`` with the memories'
    read and write energy).
    """

    index: int
    name: str
    tensors: tuple[str, ...]
    sizes: tuple[int, ...]
    bytes: int
    producer: int | None
    readers: tuple[int, ...]
    transfer_cycles: int
    offload_pj: int
    prefetch_pj: int
    max_offloads: int  # O_i (0 or 1)
    max_prefetches: int  # P_i


@dataclass(frozen=True)
class P2Data:
    """Everything both P2 models read (section D of ``formulations/p2_cpsat.md``)."""

    instance: Instance
    core: str
    sram: str
    offload_memory: str | None
    link: LinkSpec | None
    ops: tuple[P2Op, ...]
    items: tuple[P2Item, ...]
    budget_bytes: int
    offload_capacity_bytes: int
    first_optimizer: int | None
    unread_inputs: tuple[str, ...]
    objective: Objective
    runtime_limit_cycles: int | None
    static_fj_per_cycle: int
    options: Mapping[str, int | bool] = field(default_factory=dict)  # the p2_data arguments

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    @property
    def n(self) -> int:
        return len(self.ops)

    @property
    def last_recompute_stage(self) -> int:
        """Last stage in which a node may be recomputed (P1's optimizer rule)."""
        return self.first_optimizer if self.first_optimizer is not None else self.n - 1

    @property
    def min_latency_cycles(self) -> int:
        """Every op runs once on one core: no schedule is faster."""
        return sum(op.cycles for op in self.ops)

    def every_op_once_bound(self) -> int:
        """The objective of every op run once, nothing moved (P2.B0 of ``p2_problem.md``).

        A bound over every P2 schedule, in or out of the models' classes: each op runs at
        least once, one at a time on the core, and energy and static energy only grow with
        more runs, transfers and time.  The backends report it with a hint that may lie
        outside their class (BD.C1).
        """
        latency = self.min_latency_cycles
        energy = sum(op.energy_pj for op in self.ops) + self.static_pj(latency)
        return {Objective.LATENCY: latency, Objective.ENERGY: energy,
                Objective.COMPUTE: latency}[self.objective]

    def min_budget_bytes(self) -> int:
        """A lower bound on the budget of any feasible schedule (any number of runs).

        Every graph input that is read sits in S at time 0; a run holds its inputs and
        its outputs, and every graph input that cannot be offloaded and is read later
        (it cannot be recomputed either).
        """
        at_start = sum(item.bytes for item in self.items if item.producer is None)
        held = [item for item in self.items if item.producer is None and not item.max_offloads]
        per_run = 0
        for op in self.ops:
            need = sum(self.items[i].bytes for i in op.reads)
            need += self.items[op.item].bytes if op.item is not None else 0
            need += sum(item.bytes for item in held
                        if item.index not in op.reads and max(item.readers) > op.index)
            per_run = max(per_run, need)
        return max(at_start, per_run)

    def infeasibility_proof(self) -> str:
        """Why no schedule exists, found without a solver; '' when none is found."""
        need = self.min_budget_bytes()
        if self.budget_bytes < need:
            return (f"infeasible: the budget of {self.budget_bytes} bytes is below {need} bytes, "
                    "which any schedule needs (graph inputs at time 0, or one run's inputs and "
                    "outputs with the graph inputs that cannot move)")
        limit = self.runtime_limit_cycles
        if limit is not None and limit < self.min_latency_cycles:
            return (f"infeasible: the runtime limit of {limit} cycles is below "
                    f"{self.min_latency_cycles}, the time to run every op once")
        return ""

    def horizon(self) -> int:
        """An upper bound on the makespan of any schedule the models allow."""
        total = sum(op.cycles * op.max_runs for op in self.ops)
        total += sum(it.transfer_cycles * (it.max_offloads + it.max_prefetches)
                     for it in self.items)
        if self.runtime_limit_cycles is not None:
            total = min(total, self.runtime_limit_cycles)
        return max(total, 1)

    def static_pj(self, latency: int) -> int:
        return self.static_fj_per_cycle * latency // 1000

    def offload_path(self) -> tuple[LinkSpec, str]:
        """The link and the offload memory; for code that runs only when items move."""
        if self.link is None or self.offload_memory is None:
            raise ValueError(f"instance {self.instance.name!r} has no offload memory")
        return self.link, self.offload_memory


@dataclass(frozen=True)
class _RawItem:
    """An item before pricing: its name, tensors and producing op (``None``: graph input)."""

    name: str
    tensors: tuple[str, ...]
    producer: int | None


def p2_data(
    instance: Instance,
    *,
    max_computes: int = DEFAULT_MAX_COMPUTES,
    max_prefetches: int = DEFAULT_MAX_PREFETCHES,
    offload_inputs: bool = False,
    allow_offload: bool = True,
    allow_recompute: bool = True,
) -> P2Data:
    """Group the instance into ops and items, priced in integer cycles and picojoules.

    Parameters
    ----------
    instance
        A one-core instance whose core memory holds the graph inputs, with at most one
        link from that memory to one offload memory (P2; a P1 instance is accepted
        and has no offload).
    max_computes
        ``C``: runs per node, first computation included (optimizer ops, and nodes
        whose outputs nobody reads, run once).
    max_prefetches
        ``P``: page-ins per offloaded item.
    offload_inputs
        Also offload graph inputs (``p2_problem.md`` offloads node outputs only).
    allow_offload, allow_recompute
        Switch off paging or rematerialisation (POET's ablations).
    """
    graph = instance.graph
    if instance.objective is Objective.WEIGHTED:
        raise MonetError("the P2 backends do not handle the weighted objective", field="objective",
                         fix="use latency, energy or compute")
    if len(instance.cores) != 1:
        raise MonetError(f"P2 runs on one core, but instance {instance.name!r} has "
                         f"{len(instance.cores)} cores", field="cores",
                         fix="build the instance with make_instance(..., problem='P2')")
    if instance.persistent_home is not None:
        raise MonetError("P2 does not model persistent tensors (persistent_home is set)",
                         field="persistent_home", fix="use a P2 instance (persistent_home None)")
    core = instance.cores[0]
    sram = core.memory
    if instance.input_home != sram:
        raise MonetError(f"P2 starts the graph inputs in the core's memory {sram!r}, not "
                         f"{instance.input_home!r}", field="input_home",
                         fix="set input_home to " + sram)
    if isinstance(max_computes, bool) or not isinstance(max_computes, int) or max_computes < 1:
        raise MonetError(f"max_computes = {max_computes!r}", field="max_computes",
                         fix="give an integer >= 1")
    if (isinstance(max_prefetches, bool) or not isinstance(max_prefetches, int)
            or max_prefetches < 0):
        raise MonetError(f"max_prefetches = {max_prefetches!r}", field="max_prefetches",
                         fix="give an integer >= 0")
    links = [l for l in instance.links if sram in l.endpoints]
    targets = {e for l in links for e in l.endpoints if e != sram}
    if len(links) > 1 or len(targets) > 1:
        raise MonetError(f"the P2 backends model one link from {sram!r} to one offload memory; "
                         f"instance {instance.name!r} has {len(links)}", field="links",
                         fix="keep one link (make_instance(problem='P2', offload=...) does)")
    link = links[0] if links else None
    offload_memory = next(iter(targets)) if targets else None
    s_mem = instance.memory(sram)
    d_mem = instance.memory(offload_memory) if offload_memory else None

    persistent = {t.id for t in graph.tensors if t.persistent}
    item_of_tensor: dict[str, int] = {}
    raw_items: list[_RawItem] = []
    for t in graph.tensors:  # graph inputs first: P2C.D2
        if t.persistent or t.producer is not None:
            continue
        if t.consumers:
            item_of_tensor[t.id] = len(raw_items)
            raw_items.append(_RawItem(t.id, (t.id,), None))
    unread = tuple(t.id for t in graph.tensors
                   if not t.persistent and t.producer is None and not t.consumers)
    for k, op in enumerate(graph.ops):
        writes = tuple(t for t in dict.fromkeys(op.outputs) if t not in persistent)
        if writes:
            for tid in writes:
                item_of_tensor[tid] = len(raw_items)
            raw_items.append(_RawItem(op.id, writes, k))
    readers: list[set[int]] = [set() for _ in raw_items]
    reads_of: list[tuple[int, ...]] = []
    for k, op in enumerate(graph.ops):
        reads = sorted({item_of_tensor[t] for t in op.inputs if t not in persistent})
        for i in reads:
            readers[i].add(k)
        reads_of.append(tuple(reads))

    items: list[P2Item] = []
    for i, raw in enumerate(raw_items):
        sizes = tuple(graph.tensor(t).bytes for t in raw.tensors)
        can_offload = (link is not None and allow_offload and bool(readers[i])
                       and (raw.producer is not None or offload_inputs))
        if link is not None:
            # The link leads from S to the one offload memory found above.
            assert d_mem is not None
            cycles = sum(link.transfer_cycles(b) for b in sizes)
            out_pj = sum(link.transfer_pj(b) + pj_of(b, s_mem.read_fj_per_byte)
                         + pj_of(b, d_mem.write_fj_per_byte) for b in sizes)
            in_pj = sum(link.transfer_pj(b) + pj_of(b, d_mem.read_fj_per_byte)
                        + pj_of(b, s_mem.write_fj_per_byte) for b in sizes)
        else:
            cycles = out_pj = in_pj = 0
        items.append(P2Item(
            index=i, name=raw.name, tensors=raw.tensors, sizes=sizes, bytes=sum(sizes),
            producer=raw.producer, readers=tuple(sorted(readers[i])), transfer_cycles=cycles,
            offload_pj=out_pj, prefetch_pj=in_pj, max_offloads=int(can_offload),
            max_prefetches=max_prefetches if can_offload else 0,
        ))

    ops: list[P2Op] = []
    first_optimizer: int | None = None
    for k, op in enumerate(graph.ops):
        if core.id not in instance.costs.get(op.id, {}):
            raise MonetError(f"op {op.id!r} is not costed on core {core.id!r}",
                             field=f"costs.{op.id}", fix="cost every op on the core")
        cost = instance.cost(op.id, core.id)
        optimizer = bool(op.updates)
        if optimizer and first_optimizer is None:
            first_optimizer = k
        written = next((i for i, raw in enumerate(raw_items) if raw.producer == k), None)
        useful = written is not None and bool(readers[written])
        runs = max_computes if (allow_recompute and useful and not optimizer) else 1
        ops.append(P2Op(index=k, id=op.id, cycles=cost.cycles, energy_pj=cost.energy_pj,
                        optimizer=optimizer, reads=reads_of[k], item=written, max_runs=runs))
    return P2Data(
        instance=instance, core=core.id, sram=sram, offload_memory=offload_memory, link=link,
        ops=tuple(ops), items=tuple(items), budget_bytes=s_mem.capacity_bytes,
        offload_capacity_bytes=d_mem.capacity_bytes if d_mem else 0,
        first_optimizer=first_optimizer, unread_inputs=unread, objective=instance.objective,
        runtime_limit_cycles=instance.runtime_limit_cycles,
        static_fj_per_cycle=instance.static_fj_per_cycle,
        options={"max_computes": max_computes, "max_prefetches": max_prefetches,
                 "offload_inputs": offload_inputs, "allow_offload": allow_offload,
                 "allow_recompute": allow_recompute},
    )


# ====================================================================== schedules
def assemble_schedule(
    data: P2Data,
    runs: Iterable[tuple[int, int]],
    offloads: Iterable[tuple[int, int]] = (),
    prefetches: Iterable[tuple[int, int]] = (),
    frees: Iterable[tuple[int, str, int]] = (),
    meta: Mapping[str, Any] | None = None,
) -> Schedule:
    """A timed :class:`Schedule` from model values.

    ``runs`` are ``(op index, start)``; ``offloads`` and ``prefetches`` are ``(item,
    start)``: the item's tensors go one after the other on the link; ``frees`` are
    ``(item, memory id, time)`` and free every tensor of the item.  Graph inputs that
    nothing reads are freed at time 0.  Instance numbers follow start times.
    """
    ops = data.ops
    out_runs: list[OpRun] = []
    count: dict[int, int] = {}
    for v, start in sorted(runs, key=lambda r: (r[1], r[0])):
        number = count.get(v, 0)
        count[v] = number + 1
        out_runs.append(OpRun(start, start + ops[v].cycles, ops[v].id, number, data.core))
    transfers: list[Transfer] = []
    offloads, prefetches = list(offloads), list(prefetches)
    if offloads or prefetches:
        link, d = data.offload_path()
        for moves, src, dst in ((offloads, data.sram, d), (prefetches, d, data.sram)):
            for i, start in moves:
                item = data.items[i]
                at = start
                for t, b in zip(item.tensors, item.sizes, strict=True):
                    end = at + link.transfer_cycles(b)
                    transfers.append(Transfer(at, end, t, src, dst, link.id))
                    at = end
    out_frees = [Free(0, t, data.sram) for t in data.unread_inputs]
    for i, memory, time in frees:
        out_frees.extend(Free(time, t, memory) for t in data.items[i].tensors)
    return Schedule(tuple(sorted(out_runs)), tuple(sorted(transfers)), tuple(sorted(out_frees)),
                    (), dict(meta or {}))


def schedule_value(data: P2Data, schedule: Schedule) -> dict[str, int]:
    """Latency, compute cycles, energy and objective of a schedule the models built.

    The backend's own count, from the instance's cost tables (EV.E4 of
    ``formulations/evaluator.md``); :func:`monet_ilp.solve` checks it against the
    evaluator.
    """
    op_of = {op.id: op for op in data.ops}
    energy = sum(op_of[r.op].energy_pj for r in schedule.ops)
    if schedule.transfers:
        link, d = data.offload_path()
        s_mem = data.instance.memory(data.sram)
        d_mem = data.instance.memory(d)
        size = {t: b for it in data.items for t, b in zip(it.tensors, it.sizes, strict=True)}
        for tr in schedule.transfers:
            b = size[tr.tensor]
            src, dst = (s_mem, d_mem) if tr.dst == d else (d_mem, s_mem)
            energy += (link.transfer_pj(b) + pj_of(b, src.read_fj_per_byte)
                       + pj_of(b, dst.write_fj_per_byte))
    latency = schedule.makespan
    energy += data.static_pj(latency)
    compute = sum(r.end - r.start for r in schedule.ops)
    value = {Objective.LATENCY: latency, Objective.ENERGY: energy,
             Objective.COMPUTE: compute}[data.objective]
    return {"latency_cycles": latency, "energy_pj": energy, "compute_cycles": compute,
            "objective": value, "recomputations": len(schedule.ops) - data.n,
            "transfers": len(schedule.transfers)}


# ========================================================================= hints
@dataclass
class CopyTrace:
    """One copy of an item in S, read off a schedule: how it was made and its life."""

    kind: str  # "run" (ordinal = run number), "input", "prefetch" (ordinal = page-in number)
    ordinal: int
    alloc: int
    ready: int
    free: int


@dataclass
class ScheduleTrace:
    """A timed schedule in the models' terms (runs per op, copies per item, transfers)."""

    makespan: int
    runs: dict[int, list[int]]  # op -> starts, sorted
    copies: dict[int, list[CopyTrace]]  # item -> copies in S, by alloc
    offload: dict[int, tuple[int, int]]  # item -> (start, free of the copy in D)
    prefetches: dict[int, list[int]]  # item -> starts, sorted

    def copy_at(self, item: int, start: int, end: int) -> int | None:
        """Index of the copy of ``item`` ready by ``start`` and kept until ``end``."""
        for c, copy in enumerate(self.copies.get(item, ())):
            if copy.ready <= start and copy.free >= end and copy.alloc <= start:
                return c
        return None


def timed_schedule(instance: Instance, schedule: Schedule | Sequence) -> Schedule:
    """The timed form of a schedule (a Sequence is timed back to back, as in EV.E3)."""
    if isinstance(schedule, Sequence):
        return evaluate(instance, schedule).schedule
    return schedule


def trace_schedule(data: P2Data, schedule: Schedule) -> ScheduleTrace:
    """Read a timed schedule as runs, copies and transfers of items (EV.E1 of evaluator.md).

    Each item is followed through the tensor read last.  Only used to build hints:
    parts that the models cannot express are returned as they are and ignored there.
    """
    index = {op.id: op.index for op in data.ops}
    runs: dict[int, list[int]] = {}
    for r in schedule.ops:
        if r.op in index:
            runs.setdefault(index[r.op], []).append(r.start)
    for starts in runs.values():
        starts.sort()
    makespan = schedule.makespan
    copies: dict[int, list[CopyTrace]] = {}
    offload: dict[int, tuple[int, int]] = {}
    prefetches: dict[int, list[int]] = {}
    graph = data.instance.graph
    for item in data.items:
        # Baselines free a group's tensors one by one: follow the one read last.
        t0 = max(item.tensors, key=lambda t: max((index[u] for u in graph.tensor(t).consumers),
                                                  default=-1))
        # (time, phase, memory freed) or (time, phase, (kind, ordinal, ready)) of a new copy
        events: list[tuple[int, int, str | tuple[str, int, int]]] = []
        for f in schedule.frees:
            if f.tensor == t0:
                events.append((f.time, 0, f.memory))
        if item.producer is None:
            events.append((0, 1, ("input", 0, 0)))
        else:
            for k, s in enumerate(runs.get(item.producer, ())):
                events.append((s, 1, ("run", k, s + data.ops[item.producer].cycles)))
        head = item.tensors[0]  # a group's transfer starts with its first tensor
        ins = [tr for tr in schedule.transfers if tr.tensor == head and tr.dst == data.sram]
        outs = [tr for tr in schedule.transfers if tr.tensor == head and tr.dst != data.sram]
        for j, tr in enumerate(sorted(ins)):
            events.append((tr.start, 1, ("prefetch", j, tr.start + item.transfer_cycles)))
            prefetches.setdefault(item.index, []).append(tr.start)
        first_out = min(outs) if outs else None
        open_s: CopyTrace | None = None
        made: list[CopyTrace] = []
        d_free = makespan
        for time, _, what in sorted(events, key=lambda e: (e[0], e[1])):
            if isinstance(what, str):  # phase 0: a free
                if what == data.sram and open_s is not None:
                    open_s.free = time
                    open_s = None
                elif (what != data.sram and first_out is not None and time >= first_out.start
                      and d_free == makespan):
                    d_free = time
            elif open_s is None:
                kind, ordinal, ready = what
                open_s = CopyTrace(kind, ordinal, time, ready, makespan)
                made.append(open_s)
        copies[item.index] = made
        if first_out is not None:
            offload[item.index] = (first_out.start, d_free)
    return ScheduleTrace(makespan, runs, copies, offload, prefetches)


def paging_schedule(data: P2Data) -> Schedule:
    """A P2 baseline that fits any budget of at least :meth:`P2Data.min_budget_bytes`.

    Ops run once, in order, with nothing overlapped: before op k, page in what it reads
    and S lacks; after it, keep what op k+1 reads, page out (once) and free what is
    read later, free the rest.  S then never holds more than one run's inputs and
    outputs plus the graph inputs that cannot move.  Items that cannot be offloaded
    are kept until their last reader.
    """
    t = 0
    runs: list[tuple[int, int]] = []
    offloads: list[tuple[int, int]] = []
    prefetches: list[tuple[int, int]] = []
    frees: list[tuple[int, str, int]] = []
    in_s = {item.index for item in data.items if item.producer is None}
    in_d: set[int] = set()
    for op in data.ops:
        for i in op.reads:
            if i not in in_s and i in in_d:
                prefetches.append((i, t))
                t += data.items[i].transfer_cycles
                in_s.add(i)
        runs.append((op.index, t))
        t += op.cycles
        if op.item is not None:
            in_s.add(op.item)
        following = set(data.ops[op.index + 1].reads) if op.index + 1 < data.n else set()
        for i in sorted(in_s):
            item = data.items[i]
            later = any(u > op.index for u in item.readers)
            if i in following or (later and not item.max_offloads):
                continue
            if later and i not in in_d:
                offloads.append((i, t))
                t += item.transfer_cycles
                in_d.add(i)
            frees.append((i, data.sram, t))
            in_s.discard(i)
    return assemble_schedule(data, runs, offloads, prefetches, frees, {"heuristic": "paging"})


def baseline_schedule(instance: Instance, data: P2Data | None = None) -> Schedule | None:
    """The best baseline the evaluator accepts: a P1 one (store-all, Chen greedy, Chen
    sqrt; timed back to back as in EV.E3) or, with ``data``, :func:`paging_schedule`.

    ``None`` when none fits the budget or the runtime limit.
    """
    best: Metrics | None = None
    makers: list[Callable[[Instance], Schedule | Sequence]] = [
        store_all_sequence, chen_greedy_sequence, chen_sqrt_sequence]
    if data is not None and data.link is not None:
        makers.append(lambda _: paging_schedule(data))
    for make in makers:
        try:
            metrics = evaluate(instance, make(instance))
        except MonetError:
            continue
        if metrics.feasible and (best is None or metrics.objective_value < best.objective_value):
            best = metrics
    return best.schedule if best is not None else None
