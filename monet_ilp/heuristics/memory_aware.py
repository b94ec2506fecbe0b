"""A memory-aware list scheduler for several cores: Belady eviction to DRAM.

The multi-core baseline that respects every SRAM capacity (the store-all list
scheduler, :func:`~monet_ilp.heuristics.store_all.store_all_schedule`, ignores them).
Ops run once, in the instance's order, each on its core (``core_of_layer``, or the
store-all allocation).  Data moves through the shared memory (``input_home``, DRAM):

* an output that a later op on another core reads is written to DRAM right after it
  is produced; that reader fetches it from DRAM;
* when an op's inputs and outputs do not fit in its core's SRAM, the resident
  tensors it does not read are evicted, the one whose next read on that core is
  farthest first (Belady's rule); a tensor with no copy in DRAM is written there
  before it is freed;
* a copy is freed after its last reader on that core.

Each SRAM's events happen in its core's order, and a free of a copy still being read
by a transfer waits for it, so the capacity holds at every instant whenever every op
fits (its inputs and outputs at once).  Links are shared: a transfer takes the
earliest gap on the link that delivers first.  Weights stay in DRAM (no pinning) and
nothing is recomputed.
"""

from __future__ import annotations

import bisect
from typing import Mapping

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind
from monet_ilp.instance import Instance
from monet_ilp.schedule import Free, OpRun, Schedule, Transfer

__all__ = ["memory_aware_schedule"]


class _Links:
    """Busy intervals per link; the earliest gap of a given length."""

    def __init__(self, instance: Instance):
        self.instance = instance
        self.busy: dict[str, list[tuple[int, int]]] = {l.id: [] for l in instance.links}

    def earliest(self, link: str, ready: int, cycles: int) -> int:
        t = ready
        for s, e in self.busy[link]:
            if e <= t:
                continue
            if s >= t + cycles:
                break
            t = max(t, e)
        return t

    def book(self, link: str, start: int, end: int) -> None:
        if end > start:
            bisect.insort(self.busy[link], (start, end))

    def best(self, src: str, dst: str, ready: int, nbytes: int) -> tuple[str, int, int]:
        """The link from ``src`` to ``dst`` that delivers first: (link, start, end)."""
        options = []
        for link in self.instance.links:
            if link.connects(src, dst):
                cycles = link.transfer_cycles(nbytes)
                start = self.earliest(link.id, ready, cycles)
                options.append((start + cycles, start, link.id))
        if not options:
            raise MonetError(f"no link joins {src!r} and {dst!r}", field="links",
                             fix="add a link between every core's SRAM and the shared memory")
        end, start, link = min(options)
        return link, start, end


def memory_aware_schedule(instance: Instance, *, core_of_op: Mapping[str, str] | None = None,
                          allocate: str = "layer") -> Schedule:
    """List-schedule ``instance`` within its SRAM capacities (see the module docstring).

    Parameters
    ----------
    instance
        An instance whose graph inputs start in a shared (non-SRAM) memory (P3).
    core_of_op
        The core of every op; default: the store-all list scheduler's allocation.
    allocate
        The store-all allocation to take when ``core_of_op`` is not given
        (``"layer"`` or ``"op"``).

    Raises
    ------
    MonetError
        The graph inputs start in an SRAM, or an op's inputs and outputs do not fit
        in its core's SRAM (the message gives the bytes needed).
    """
    from monet_ilp.heuristics.store_all import store_all_schedule

    graph = instance.graph
    shared = instance.input_home
    if instance.memory(shared).kind == "sram":
        raise MonetError("the memory-aware scheduler moves data through a shared memory; this "
                         f"instance starts its inputs in SRAM {shared!r}", field="input_home",
                         fix="use a P3 instance (inputs in DRAM)")
    core_of_op_given = core_of_op
    if core_of_op is None:
        base = store_all_schedule(instance, allocate=allocate)
        core_of_op = {}
        for run in sorted(base.ops):
            core_of_op.setdefault(run.op, run.core)
    order = [op.id for op in graph.ops]
    position = {v: k for k, v in enumerate(order)}
    persistent = {t.id for t in graph.tensors if t.persistent}
    size = {t.id: t.bytes for t in graph.tensors}
    # For each tensor: the positions of its readers, per core.
    readers: dict[str, dict[str, list[int]]] = {}
    for op in graph.ops:
        for t in dict.fromkeys(op.inputs):
            if t not in persistent:
                readers.setdefault(t, {}).setdefault(core_of_op[op.id], []).append(position[op.id])

    links = _Links(instance)
    memory_of = {c.id: c.memory for c in instance.cores}
    capacity = {m.id: m.capacity_bytes for m in instance.memories}
    cursor = {c.id: 0 for c in instance.cores}  # events on M(c) happen from here on
    core_free = {c.id: 0 for c in instance.cores}
    resident: dict[str, dict[str, int]] = {m: {} for m in memory_of.values()}  # tensor -> ready
    used = {m: 0 for m in memory_of.values()}
    read_until: dict[tuple[str, str], int] = {}  # (tensor, SRAM) -> end of transfers reading it
    in_shared: dict[str, int] = {t.id: 0 for t in graph.tensors
                                 if not t.persistent and t.producer is None}
    made_at: dict[str, int] = {}
    read_end: dict[str, int] = {}
    runs, transfers, frees = [], [], []
    for t in graph.tensors:
        if not t.persistent and t.producer is None and not t.consumers:
            frees.append(Free(0, t.id, shared))

    def move(tensor: str, src: str, dst: str, ready: int) -> tuple[int, int]:
        link, start, end = links.best(src, dst, ready, size[tensor])
        links.book(link, start, end)
        transfers.append(Transfer(start, end, tensor, src, dst, link))
        return start, end

    def release(tensor: str, memory: str, core: str) -> None:
        at = max(cursor[core], read_until.get((tensor, memory), 0), resident[memory][tensor])
        frees.append(Free(at, tensor, memory))
        del resident[memory][tensor]
        used[memory] -= size[tensor]
        cursor[core] = at

    def next_read(tensor: str, core: str, after: int) -> int | None:
        mine = readers.get(tensor, {}).get(core, [])
        k = bisect.bisect_right(mine, after)
        return mine[k] if k < len(mine) else None

    for op in graph.ops:
        core = core_of_op[op.id]
        if core not in instance.costs.get(op.id, {}):
            raise MonetError(f"op {op.id!r} is not costed on core {core!r}", field=f"core_of_op.{op.id}",
                             fix="allocate it to a core it can run on")
        mem, here = memory_of[core], position[op.id]
        inputs = [t for t in dict.fromkeys(op.inputs) if t not in persistent]
        outputs = [t for t in dict.fromkeys(op.outputs) if t not in persistent]
        fetch = [t for t in inputs if t not in resident[mem]]
        need = sum(size[t] for t in fetch) + sum(size[t] for t in outputs if t not in resident[mem])
        held = sum(size[t] for t in inputs if t in resident[mem])
        if held + need > capacity[mem]:
            raise MonetError(f"op {op.id!r} needs {held + need} bytes at once, more than {mem!r} holds "
                             f"({capacity[mem]} bytes)", field=f"memories.{mem}.capacity",
                             fix="give the core more SRAM, or allocate the op elsewhere")
        while used[mem] + need > capacity[mem]:  # Belady: evict the farthest next read
            victims = [t for t in resident[mem] if t not in inputs]
            victim = max(victims, key=lambda t: (next_read(t, core, here) or len(order) + 1, t))
            if victim not in in_shared and next_read_anywhere(readers, victim, here):
                _, end = move(victim, mem, shared, max(cursor[core], resident[mem][victim]))
                in_shared[victim] = end
                read_until[(victim, mem)] = max(read_until.get((victim, mem), 0), end)
            release(victim, mem, core)
        ready = 0
        for t in fetch:
            if t not in in_shared:
                raise MonetError(f"tensor {t!r} has no copy that {core!r} can fetch", field="schedule",
                                 fix="this is a bug in the memory-aware scheduler")
            start, end = move(t, shared, mem, max(cursor[core], in_shared[t]))
            resident[mem][t] = end
            used[mem] += size[t]
            cursor[core] = max(cursor[core], start)
            ready = max(ready, end)
        start = max([core_free[core], cursor[core], ready]
                    + [resident[mem][t] for t in inputs]
                    + [made_at.get(t, 0) for t in op.inputs if t in persistent])
        if op.kind is OpKind.OPTIMIZER:
            start = max([start] + [read_end.get(t, 0) for t in op.updates])
        end = start + instance.cost(op.id, core).cycles
        runs.append(OpRun(start, end, op.id, 0, core))
        core_free[core] = end
        cursor[core] = max(cursor[core], start)
        for t in op.inputs:
            if t in persistent:
                read_end[t] = max(read_end.get(t, 0), end)
        for t in op.outputs:
            if t in persistent:
                made_at[t] = end
        for t in outputs:
            if t not in resident[mem]:
                resident[mem][t] = end
                used[mem] += size[t]
        cursor[core] = max(cursor[core], end)
        for t in outputs:  # other cores read it from the shared memory
            if any(c != core for c in readers.get(t, {})):
                _, done = move(t, mem, shared, end)
                in_shared[t] = done
                read_until[(t, mem)] = done
        for t in inputs + outputs:
            if t in resident[mem] and next_read(t, core, here) is None:
                release(t, mem, core)
    latency = max([r.end for r in runs] + [x.end for x in transfers], default=0)
    frees = [f for f in frees if f.time <= latency]
    return Schedule(tuple(sorted(runs)), tuple(sorted(transfers)), tuple(sorted(frees)),
                    meta={"heuristic": "memory_aware", "allocate": allocate if core_of_op_given is None else "given",
                          "latency_cycles": latency,
                          "core_of_op": dict(core_of_op)})


def next_read_anywhere(readers: dict[str, dict[str, list[int]]], tensor: str, after: int) -> bool:
    """Whether some op after position ``after`` reads ``tensor`` (on any core)."""
    return any(p > after for positions in readers.get(tensor, {}).values() for p in positions)
