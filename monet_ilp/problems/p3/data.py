"""P3 data shared by the CP-SAT and MILP backends: ops per core, items, routes, pins.

The solver-agnostic step between an :class:`~monet_ilp.instance.Instance` of problem
P3 (``formulations/p3_problem.md``, class P3.K3) and the two P3 models
(``formulations/p3_cpsat.md``, ``formulations/p3_milp.md``).  Everything is priced in
the instance's integer units (cycles, bytes, picojoules); schedules are assembled
from model values here, so that both backends emit the same kind of schedule and
claim the same objective for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from math import gcd
from types import MappingProxyType
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.heuristics.memory_aware import memory_aware_schedule
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.instance import Instance, Objective, Problem, pj_of
from monet_ilp.schedule import Free, OpRun, Schedule, Transfer

__all__ = [
    "DEFAULT_MAX_COMPUTES",
    "DEFAULT_MAX_TRANSFERS",
    "P3Data",
    "P3Item",
    "P3Op",
    "P3Route",
    "RunValue",
    "TransferValue",
    "assemble_p3_schedule",
    "baseline_schedules",
    "p3_data",
    "weighted_coefficients",
    "weighted_scale",
]

#: Runs per op, first computation included (P3.K1).
DEFAULT_MAX_COMPUTES = 2
#: Transfers of an item into one memory (P3.K2, P3.L1).
DEFAULT_MAX_TRANSFERS = 1


@dataclass(frozen=True)
class P3Op:
    """An op of P3.K1: where it may run, at what cost, what it reads and writes."""

    index: int
    id: str
    layer: str
    cycles: Mapping[str, int]  # core -> d_{v,c}
    energy_pj: Mapping[str, int]  # core -> e_{v,c}
    pinned_cycles: Mapping[str, int]  # core -> d^pi_{v,c} (ops reading persistent tensors)
    pinned_energy_pj: Mapping[str, int]
    reads: tuple[int, ...]  # item indices
    writes: tuple[int, ...]  # the items it writes (one per non-persistent output tensor)
    persistent_reads: tuple[int, ...]  # persistent tensor indices read
    after: tuple[int, ...]  # ops whose first run must end before any run starts (gradients)
    updates: tuple[int, ...]  # persistent tensor indices updated in place (optimizer)
    max_runs: int  # C_v

    @property
    def cores(self) -> tuple[str, ...]:
        return tuple(self.cycles)


@dataclass(frozen=True)
class P3Route:
    """A way to move an item from memory ``src`` to ``dst``: one link, its cycles and energy."""

    src: str
    dst: str
    link: str
    cycles: int
    energy_pj: int


@dataclass(frozen=True)
class P3Item:
    """An item (P3.K2): one non-persistent tensor, an op's output or a graph input that is read.

    A run of the producer makes a copy of each of its items in its core's memory.
    """

    index: int
    name: str
    tensors: tuple[str, ...]
    sizes: tuple[int, ...]
    bytes: int
    producer: int | None
    readers: tuple[int, ...]
    routes: tuple[P3Route, ...]  # every (src, dst, link) the item may take


@dataclass(frozen=True)
class P3Persistent:
    """A persistent tensor: its bytes, and the memories it may be pinned in (P3.K4)."""

    index: int
    id: str
    bytes: int
    pin_memories: tuple[str, ...]


@dataclass(frozen=True)
class P3Data:
    """Everything both P3 models read (``formulations/p3_problem.md``)."""

    instance: Instance
    cores: tuple[str, ...]
    memory_of: Mapping[str, str]  # core -> its SRAM
    memories: tuple[str, ...]  # every memory id, SRAMs first
    capacity: Mapping[str, int]
    input_home: str
    persistent_home: str | None
    ops: tuple[P3Op, ...]
    items: tuple[P3Item, ...]
    persistent: tuple[P3Persistent, ...]
    unread_inputs: tuple[str, ...]
    objective: Objective
    runtime_limit_cycles: int | None
    static_fj_per_cycle: int
    max_transfers: int
    colocate: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    @property
    def n(self) -> int:
        return len(self.ops)

    def routes_into(self, item: int, dst: str) -> tuple[P3Route, ...]:
        return tuple(r for r in self.items[item].routes if r.dst == dst)

    def horizon(self) -> int:
        """An upper bound on the makespan of any schedule of P3.K3 the models allow."""
        total = sum(max(max(op.cycles.values()), max(op.pinned_cycles.values(), default=0))
                    * op.max_runs for op in self.ops)
        for item in self.items:
            longest = max((r.cycles for r in item.routes), default=0)
            total += longest * self.max_transfers * len(self.memories)
        if self.runtime_limit_cycles is not None:
            total = min(total, self.runtime_limit_cycles)
        return max(total, 1)

    def static_pj(self, latency: int) -> int:
        return self.static_fj_per_cycle * latency // 1000

    def min_capacity_proof(self) -> str:
        """Why no schedule exists, found without a solver; '' when none is found.

        A run on core ``c`` holds its input items and its output item in ``M(c)``; if
        no core of an op can hold them, nothing runs that op.
        """
        for op in self.ops:
            need = sum(self.items[i].bytes for i in op.reads)
            need += sum(self.items[i].bytes for i in op.writes)
            if all(need > self.capacity[self.memory_of[c]] for c in op.cores):
                best = max(self.capacity[self.memory_of[c]] for c in op.cores)
                return (f"infeasible: op {op.id!r} reads and writes {need} bytes, more than the "
                        f"largest SRAM it may run in ({best} bytes); the SRAM budget must be at "
                        f"least {self.min_sram_bytes()} bytes")
        home = self.input_home
        at_start = sum(it.bytes for it in self.items if it.producer is None)
        persistent = sum(p.bytes for p in self.persistent) if home == self.persistent_home else 0
        if at_start + persistent > self.capacity[home]:
            return (f"infeasible: the graph inputs and persistent tensors ({at_start + persistent} "
                    f"bytes) exceed {home!r} ({self.capacity[home]} bytes)")
        limit = self.runtime_limit_cycles
        if limit is not None:
            chain = self.critical_path_cycles()
            if limit < chain:
                return (f"infeasible: the runtime limit of {limit} cycles is below {chain}, the "
                        "critical path of the graph on the fastest cores")
        return ""

    def min_sram_bytes(self) -> int:
        """The smallest SRAM capacity (the same on every core) at which each op fits somewhere."""
        need = 0
        for op in self.ops:
            b = sum(self.items[i].bytes for i in op.reads)
            b += sum(self.items[i].bytes for i in op.writes)
            need = max(need, b)
        return need

    def input_arrival_cycles(self, item: int, op: int) -> int:
        """The earliest time graph input ``item`` can be in the memory of a core of ``op``.

        Zero if it starts there; otherwise the quickest route into one of them.
        """
        mems = {self.memory_of[c] for c in self.ops[op].cores}
        if self.input_home in mems:
            return 0
        return min((r.cycles for r in self.items[item].routes if r.dst in mems), default=0)

    def ancestry(self) -> tuple[list[int], list[int]]:
        """Strict ancestors and descendants of each op over reads and ``after`` (bitsets)."""
        anc = [0] * self.n
        for op in self.ops:  # the instance order is topological
            mask = 0
            for i in op.reads:
                f = self.items[i].producer
                if f is not None:
                    mask |= anc[f] | (1 << f)
            for u in op.after:
                mask |= anc[u] | (1 << u)
            anc[op.index] = mask
        desc = [0] * self.n
        for v in range(self.n):
            mask = anc[v]
            while mask:
                low = mask & -mask
                desc[low.bit_length() - 1] |= 1 << v
                mask ^= low
        return anc, desc

    def critical_path_cycles(self) -> int:
        """The longest path of first computations, each op on its fastest core (a lower bound).

        A graph input is ready when it can first reach the reader's memory.
        """
        finish: dict[int, int] = {}
        for op in self.ops:  # the instance order is topological
            fastest = min(list(op.cycles.values()) + list(op.pinned_cycles.values()))
            arrivals = []
            for i in op.reads:
                producer = self.items[i].producer
                arrivals.append(finish[producer] if producer is not None
                                else self.input_arrival_cycles(i, op.index))
            ready = max(arrivals, default=0)
            ready = max([ready] + [finish[u] for u in op.after])
            finish[op.index] = ready + fastest
        return max(finish.values(), default=0)

    def claimed_objective(self, latency: int, energy: int) -> int | float:
        """The objective of a schedule with this latency and energy (EV.E4), as the evaluator computes it."""
        if self.objective is Objective.LATENCY:
            return latency
        if self.objective is Objective.ENERGY:
            return energy
        if self.objective is Objective.COMPUTE:
            raise MonetError("P3 has no compute objective", field="objective",
                             fix="use latency, energy or weighted")
        meta, alpha = self.instance.meta, self.instance.alpha
        latency_ref: float = meta["latency_ref_cycles"]  # meta is JSON: numbers read as Any
        energy_ref: float = meta["energy_ref_pj"]
        return alpha * latency / latency_ref + (1 - alpha) * energy / energy_ref


#: The largest denominator of the weighted objective's alpha the P3 models weigh exactly.
ALPHA_DENOMINATOR = 1000


def weighted_coefficients(data: P3Data) -> tuple[int, int]:
    """Integer weights ``(w_latency, w_energy)`` ordering schedules as the weighted objective does.

    With ``α = a / (a + b)``: ``a · energy_ref · latency + b · latency_ref · energy`` is
    ``(a + b) · latency_ref · energy_ref`` times the weighted objective.
    """
    meta = data.instance.meta
    alpha = Fraction(data.instance.alpha).limit_denominator(ALPHA_DENOMINATOR)
    a, b = alpha.numerator, alpha.denominator - alpha.numerator
    wl, we = a * int(meta["energy_ref_pj"]), b * int(meta["latency_ref_cycles"])
    g = gcd(wl, we) or 1
    return wl // g, we // g


def weighted_scale(data: P3Data) -> float:
    """``k`` with ``w_latency · latency + w_energy · energy = k · weighted objective``."""
    meta = data.instance.meta
    alpha = Fraction(data.instance.alpha).limit_denominator(ALPHA_DENOMINATOR)
    a, b = alpha.numerator, alpha.denominator - alpha.numerator
    lref, eref = int(meta["latency_ref_cycles"]), int(meta["energy_ref_pj"])
    g = gcd(a * eref, b * lref) or 1
    return (a + b) * lref * eref / g


def p3_data(
    instance: Instance,
    *,
    max_computes: int = DEFAULT_MAX_COMPUTES,
    max_transfers: int = DEFAULT_MAX_TRANSFERS,
    colocate: str = "none",
    allow_recompute: bool = True,
    allow_offload: bool = True,
    allow_pin: bool = True,
) -> P3Data:
    """Group a P3 instance into ops, items, routes and persistent tensors (P3.K1-K6).

    Parameters
    ----------
    instance
        A P3 instance (``make_instance(..., problem="P3")``), objective latency,
        energy or weighted (weighted needs ``latency_ref_cycles`` and
        ``energy_ref_pj`` in its meta).
    max_computes
        ``C``: runs per op, first computation included.
    max_transfers
        ``T``: transfers of an item into one memory.
    colocate
        ``"layer"``: first computations of one layer on one core; ``"none"``.
    allow_recompute, allow_offload, allow_pin
        Switch off recomputation, transfers into shared memories (except for what
        no schedule can do without), or pinning.
    """
    graph = instance.graph
    if instance.problem is not Problem.P3:
        raise MonetError(f"instance {instance.name!r} is {instance.problem}, not P3", field="problem",
                         fix="build it with make_instance(..., problem='P3')")
    if instance.objective is Objective.COMPUTE:
        raise MonetError("P3 has no compute objective", field="objective",
                         fix="use latency, energy or weighted")
    if instance.objective is Objective.WEIGHTED and not (
            "latency_ref_cycles" in instance.meta and "energy_ref_pj" in instance.meta):
        raise MonetError("the weighted objective needs reference values", field="meta",
                         fix="build the instance with make_instance (it sets latency_ref_cycles and "
                             "energy_ref_pj from the store-all baseline)")
    if instance.objective is Objective.WEIGHTED and abs(
            float(Fraction(instance.alpha).limit_denominator(ALPHA_DENOMINATOR)) - instance.alpha) > 1e-12:
        # The models weigh with alpha as a fraction of denominator at most 1000; the evaluator
        # with alpha itself: any other alpha would make their objectives differ (BD.C1).
        raise MonetError(f"alpha = {instance.alpha!r} is not a multiple of 1/{ALPHA_DENOMINATOR}, "
                         "which the P3 models weigh exactly", field="alpha",
                         fix=f"give alpha as a fraction with denominator at most {ALPHA_DENOMINATOR}, "
                             "e.g. 0.001, 0.25 or 0.5")
    for name, value, low in (("max_computes", max_computes, 1), ("max_transfers", max_transfers, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise MonetError(f"{name} = {value!r}", field=name, fix=f"give an integer >= {low}")
    if colocate not in ("none", "layer"):
        raise MonetError(f"colocate = {colocate!r}", field="colocate", fix="use 'none' or 'layer'")
    cores = tuple(c.id for c in instance.cores)
    memory_of = {c.id: c.memory for c in instance.cores}
    srams = tuple(dict.fromkeys(memory_of.values()))
    memories = srams + tuple(m.id for m in instance.memories if m.id not in srams)
    mem = {m.id: m for m in instance.memories}
    shared = set(memories) - set(srams)

    persistent_ids = [t.id for t in graph.tensors if t.persistent]
    p_index = {t: k for k, t in enumerate(persistent_ids)}
    item_of_tensor: dict[str, int] = {}
    raw_items: list[dict[str, Any]] = []
    for tensor in graph.tensors:
        if tensor.persistent or tensor.producer is not None or not tensor.consumers:
            continue
        item_of_tensor[tensor.id] = len(raw_items)
        raw_items.append({"name": tensor.id, "tensors": (tensor.id,), "producer": None})
    unread = tuple(t.id for t in graph.tensors
                   if not t.persistent and t.producer is None and not t.consumers)
    for k, op in enumerate(graph.ops):
        for t in dict.fromkeys(op.outputs):  # one item per tensor: readers move what they read
            if t not in p_index:
                item_of_tensor[t] = len(raw_items)
                raw_items.append({"name": t, "tensors": (t,), "producer": k})
    readers: list[set[int]] = [set() for _ in raw_items]
    reads_of = []
    for k, op in enumerate(graph.ops):
        reads = sorted({item_of_tensor[t] for t in op.inputs if t not in p_index})
        for i in reads:
            readers[i].add(k)
        reads_of.append(tuple(reads))

    index = {op.id: k for k, op in enumerate(graph.ops)}
    items = []
    for i, raw in enumerate(raw_items):
        sizes = tuple(graph.tensor(t).bytes for t in raw["tensors"])
        routes = []
        for link in instance.links:
            for src in link.endpoints:
                for dst in link.endpoints:
                    if src == dst or dst not in mem or src not in mem:
                        continue
                    if dst in shared and not allow_offload and raw["producer"] is not None:
                        continue
                    if dst == instance.input_home and raw["producer"] is None:
                        continue  # the input's copy is there from the start
                    cycles = sum(link.transfer_cycles(b) for b in sizes)
                    energy = sum(link.transfer_pj(b) + pj_of(b, mem[src].read_fj_per_byte)
                                 + pj_of(b, mem[dst].write_fj_per_byte) for b in sizes)
                    routes.append(P3Route(src, dst, link.id, cycles, energy))
        items.append(P3Item(i, raw["name"], raw["tensors"], sizes, sum(sizes), raw["producer"],
                            tuple(sorted(readers[i])), tuple(routes)))

    ops = []
    pin_cores: dict[int, set[str]] = {}
    for k, op in enumerate(graph.ops):
        table = instance.costs.get(op.id, {})
        usable = [c for c in cores if c in table]
        if not usable:
            raise MonetError(f"op {op.id!r} is costed on no core of the instance", field=f"costs.{op.id}",
                             fix="cost every op on at least one core")
        pinned_table = instance.pinned_costs.get(op.id, {}) if allow_pin else {}
        p_reads = tuple(sorted({p_index[t] for t in op.inputs if t in p_index}))
        producers = (graph.tensor(persistent_ids[p]).producer for p in p_reads)
        after = tuple(sorted({index[u] for u in producers if u is not None}))
        updates = tuple(sorted(p_index[t] for t in op.updates)) if op.updates else ()
        writes = tuple(i for i, raw in enumerate(raw_items) if raw["producer"] == k)
        useful = any(readers[i] for i in writes)
        runs = max_computes if (allow_recompute and useful and not updates) else 1
        pinned = {c: pinned_table[c] for c in usable if c in pinned_table and p_reads}
        for c in pinned:
            for p in p_reads:
                pin_cores.setdefault(p, set()).add(c)
        ops.append(P3Op(
            index=k, id=op.id, layer=op.layer,
            cycles={c: table[c].cycles for c in usable},
            energy_pj={c: table[c].energy_pj for c in usable},
            pinned_cycles={c: pinned[c].cycles for c in pinned},
            pinned_energy_pj={c: pinned[c].energy_pj for c in pinned},
            reads=reads_of[k], writes=writes, persistent_reads=p_reads, after=after,
            updates=updates, max_runs=runs,
        ))
    persistent = []
    modelled = instance.persistent_home is not None
    for k, t in enumerate(persistent_ids):
        where = tuple(memory_of[c] for c in cores if c in pin_cores.get(k, ())) if modelled else ()
        persistent.append(P3Persistent(k, t, graph.tensor(t).bytes, tuple(dict.fromkeys(where))))
    return P3Data(
        instance=instance, cores=cores, memory_of=MappingProxyType(memory_of), memories=memories,
        capacity=MappingProxyType({m: mem[m].capacity_bytes for m in memories}),
        input_home=instance.input_home, persistent_home=instance.persistent_home,
        ops=tuple(ops), items=tuple(items), persistent=tuple(persistent), unread_inputs=unread,
        objective=instance.objective, runtime_limit_cycles=instance.runtime_limit_cycles,
        static_fj_per_cycle=instance.static_fj_per_cycle, max_transfers=max_transfers,
        colocate=colocate,
        options={"max_computes": max_computes, "max_transfers": max_transfers, "colocate": colocate,
                 "allow_recompute": allow_recompute, "allow_offload": allow_offload,
                 "allow_pin": allow_pin},
    )


# ====================================================================== schedules
@dataclass(frozen=True)
class RunValue:
    """A run in a solution: op index, core, start, and whether it uses the pinned cost."""

    op: int
    core: str
    start: int
    pinned: bool = False


@dataclass(frozen=True)
class TransferValue:
    """A transfer in a solution: item index, its route, and its start."""

    item: int
    route: P3Route
    start: int


def run_cost(data: P3Data, run: RunValue) -> tuple[int, int]:
    op = data.ops[run.op]
    if run.pinned:
        return op.pinned_cycles[run.core], op.pinned_energy_pj[run.core]
    return op.cycles[run.core], op.energy_pj[run.core]


def assemble_p3_schedule(
    data: P3Data,
    runs: Iterable[RunValue],
    transfers: Iterable[TransferValue] = (),
    frees: Iterable[tuple[int, str, int]] = (),
    pins: Iterable[tuple[int, str]] = (),
    meta: Mapping[str, Any] | None = None,
) -> tuple[Schedule, dict[str, Any]]:
    """A timed :class:`Schedule` from model values, and its claimed value (EV.E4).

    ``frees`` are ``(item, memory, time)`` and free every tensor of the item; ``pins``
    ``(persistent index, memory)``.  An item's tensors move back to back on the
    route's link.  Graph inputs nobody reads are freed at time 0.  Returns the
    schedule and ``{latency_cycles, energy_pj, objective, recomputations,
    transfers}``, the backend's own count from the cost tables.
    """
    runs = sorted(runs, key=lambda r: (r.start, r.op))
    out_runs: list[OpRun] = []
    count: dict[int, int] = {}
    energy, ends = 0, [0]
    for r in runs:
        number = count.get(r.op, 0)
        count[r.op] = number + 1
        cycles, pj = run_cost(data, r)
        out_runs.append(OpRun(r.start, r.start + cycles, data.ops[r.op].id, number, r.core))
        energy += pj
        ends.append(r.start + cycles)
    links = {l.id: l for l in data.instance.links}
    out_transfers = []
    moved = list(transfers)
    for x in moved:
        item, link = data.items[x.item], links[x.route.link]
        at = x.start
        for t, b in zip(item.tensors, item.sizes, strict=True):
            end = at + link.transfer_cycles(b)
            out_transfers.append(Transfer(at, end, t, x.route.src, x.route.dst, link.id))
            at = end
        ends.append(at)
        energy += x.route.energy_pj
    out_frees = [Free(0, t, data.input_home) for t in data.unread_inputs]
    for i, memory, time in frees:
        out_frees.extend(Free(time, t, memory) for t in data.items[i].tensors)
    latency = max(ends)
    energy += data.static_pj(latency)
    schedule = Schedule(tuple(sorted(out_runs)), tuple(sorted(out_transfers)), tuple(sorted(out_frees)),
                        tuple(sorted((data.persistent[p].id, m) for p, m in pins)), dict(meta or {}))
    value = {"latency_cycles": latency, "energy_pj": energy,
             "objective": data.claimed_objective(latency, energy),
             "recomputations": len(runs) - data.n, "transfers": len(moved)}
    return schedule, value


def baseline_schedules(instance: Instance) -> list[tuple[bool, int | float, Schedule]]:
    """The list schedules both P3 backends start from, best first.

    Store-all and the memory-aware scheduler (Belady eviction to DRAM), each with
    layer and op allocation, as ``(feasible, objective, schedule)`` sorted with the
    evaluator's feasible ones first, then by the instance's objective.
    """
    found: list[tuple[bool, int | float, int, Schedule]] = []
    for build in (memory_aware_schedule, store_all_schedule):
        for allocate in ("layer", "op"):
            try:
                schedule = build(instance, allocate=allocate)
            except MonetError:
                continue
            metrics = evaluate(instance, schedule)
            found.append((metrics.feasible, metrics.objective_value, len(found), schedule))
    found.sort(key=lambda t: (not t[0], t[1], t[2]))
    return [(ok, value, schedule) for ok, value, _, schedule in found]
