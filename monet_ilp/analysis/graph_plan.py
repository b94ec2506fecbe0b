"""P4 for a training graph: stages cut from its forward order, each stage's work scheduled by P3.

``formulations/p4_problem.md`` P4.G1-G9.  A plan runs ``d`` data-parallel replicas of a
pipeline of ``p`` stages on ``n = d p`` devices of a cluster (``n`` one or every device;
tensor degree 1); each replica takes micro-batches of ``b`` samples, ``m`` of them per
iteration.  A stage is a contiguous run of the graph's *units* (its forward layers, in
the graph's order, P4.G1), cut only where no weight is shared across the cut.  Each
stage's forward, backward and optimizer step on one micro-batch is a P3 schedule of that
part's subgraph on the device's hardware (P4.G3; the whole graph is one P3 schedule when
the plan is one device and one micro-batch: P4 with one device is P3), verified by the
P3 evaluator; the pipeline is then run step by step by P4's simulator (P4.V3), with the
activations and gradients that cross each cut sent over the cluster's links.

The bound (P4.G7) holds for every plan of the class: each part at its ops' least work
spread over the device's cores, the pipeline's bubble as in P4.P5, and the cuts chosen
three times over, each time the cheapest for one term.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind, TensorKind, TrainingGraph
from monet_ilp.hardware import Hardware, load_hardware, preset
from monet_ilp.hardware.presets import PRESETS, parse_set
from monet_ilp.make import make_instance
from monet_ilp.problems.p3.bounds import combinatorial_bound
from monet_ilp.problems.p4.evaluate import simulate_pipeline, stage_orders
from monet_ilp.problems.p4.plan import SCHEDULES
from monet_ilp.results import Status, bound_error
from monet_ilp.solve import solve

if TYPE_CHECKING:
    from monet_ilp.hardware.cluster import ClusterSpec
    from monet_ilp.instance import Instance

__all__ = ["GRAPH_CLASS", "GraphPlan", "GraphPlanResult", "GraphUnits", "PartRun", "graph_batch",
           "graph_plan_search", "graph_units", "hardware_of", "measure_plan", "plan_bound", "stage_parts"]

#: The class of plans the search is exact over (P4.G2); the bound holds for all of it.
GRAPH_CLASS = ("plans on one device or every device ({devices}): data x pipeline degrees, tensor degree 1, "
               "micro-batches of {sizes}, GPipe or 1F1B, stages contiguous in the graph's forward order at "
               "cuts no weight spans, every activation kept from a stage's forward to its backward, each "
               "stage's forward, backward and optimizer step one P3 schedule on one device (one schedule of "
               "the whole graph for one device and one micro-batch)")

#: The relative tolerance of a bound against a plan's value (seconds from integer ns).
TOLERANCE = 1e-9

#: Seconds a P3 part solve may run past its limit (``formulations/time_limits.md``: at
#: least two), kept back from the search's time limit; a part gets at least MIN_PART_S.
MARGIN_S = 2.0
MIN_PART_S = 0.5
#: The P3 schedule a part takes when its backend finds none in time (a verified list schedule, P4.G3).
FALLBACK = "heuristic:memory_aware"

#: A part of a stage (P4.G3): ``F`` forward (and the loss), ``B`` backward, ``O`` the
#: optimizer step, ``FB`` forward and backward as one schedule (one stage), ``all`` the
#: whole iteration as one schedule (one device, one micro-batch).
PART_KINDS = ("F", "B", "O", "FB", "all")


@dataclass(frozen=True)
class GraphUnits:
    """The graph's units (P4.G1): its forward layers in order, and where a stage may be cut."""

    names: tuple[str, ...]
    unit_of: dict[str, int]  # op id -> unit
    blocked: dict[int, str]  # cut k (before unit k) -> why it is not allowed

    @property
    def count(self) -> int:
        return len(self.names)

    def allowed_cuts(self) -> list[int]:
        return [k for k in range(1, self.count) if k not in self.blocked]


def graph_units(graph: TrainingGraph, *, source: str | None = None) -> GraphUnits:
    """Group the graph's ops into units and find the cuts a stage boundary may take (P4.G1).

    A unit is a run of consecutive forward ops with one ``layer`` name (an op without one
    is a unit of its own); the loss joins the last unit.  A backward op belongs to the unit
    of the forward op it differentiates (else of the last unit with its layer name, else
    the last unit), an optimizer op to the unit of the first forward op that reads the
    weight it updates.  Cut ``k`` (between units ``k - 1`` and ``k``) is blocked when a
    weight is read on both sides of it (a shared or tied weight).
    """
    if not graph.has_loss or not any(op.is_backward for op in graph.ops):
        raise MonetError(f"graph {graph.name!r} is not a training graph (no loss or no backward ops)",
                         file=source, field="graph",
                         fix="give a training graph: import the model with its loss (the zoo and the ONNX importer do)")
    names: list[str] = []
    unit_of: dict[str, int] = {}
    last_label: str | None = None
    for op in graph.ops:
        if op.kind is OpKind.FORWARD:
            label = op.layer or op.id
            if label != last_label or not op.layer:
                names.append(label)
            last_label = label
            unit_of[op.id] = len(names) - 1
    if not names:
        raise MonetError(f"graph {graph.name!r} has no forward ops", file=source, field="graph",
                         fix="give a training graph with its forward ops")
    last_unit_of_layer = {}
    for i, label in enumerate(names):
        last_unit_of_layer[label] = i
    first_reader: dict[str, int] = {}
    for op in graph.ops:
        if op.kind is OpKind.FORWARD:
            for t in op.inputs:
                first_reader.setdefault(t, unit_of[op.id])
    for op in graph.ops:
        if op.id in unit_of:
            continue
        if op.kind is OpKind.LOSS:
            unit_of[op.id] = len(names) - 1
        elif op.forward_of is not None and op.forward_of in unit_of:
            unit_of[op.id] = unit_of[op.forward_of]
        elif op.kind is OpKind.OPTIMIZER and any(t in first_reader for t in op.updates):
            unit_of[op.id] = min(first_reader[t] for t in op.updates if t in first_reader)
        else:
            unit_of[op.id] = last_unit_of_layer.get(op.layer, len(names) - 1)
    # P4.G1: a weight read by the ops of several units pins every cut between them.
    blocked: dict[int, str] = {}
    for weight in graph.tensors:
        if weight.kind is not TensorKind.WEIGHT:
            continue
        units = {unit_of[c] for c in weight.consumers if graph.op(c).kind is not OpKind.OPTIMIZER}
        if len(units) > 1:
            for k in range(min(units) + 1, max(units) + 1):
                blocked.setdefault(k, f"weight {weight.id!r} is read by units {names[min(units)]!r} and "
                                      f"{names[max(units)]!r}")
    return GraphUnits(tuple(names), unit_of, blocked)


def stage_parts(graph: TrainingGraph, units: GraphUnits, first: int, last: int, kind: str) -> list[str]:
    """The op ids of part ``kind`` (:data:`PART_KINDS`) of the stage of units ``first..last``."""
    def wanted(op_kind: OpKind) -> bool:
        forward = op_kind in (OpKind.FORWARD, OpKind.LOSS)
        backward = op_kind in (OpKind.BACKWARD_DATA, OpKind.BACKWARD_WEIGHT)
        return {"F": forward, "B": backward, "O": op_kind is OpKind.OPTIMIZER, "FB": forward or backward,
                "all": True}[kind]
    return [op.id for op in graph.ops if first <= units.unit_of[op.id] <= last and wanted(op.kind)]


def subgraph(graph: TrainingGraph, op_ids: Sequence[str], name: str) -> TrainingGraph:
    """The ops ``op_ids`` as a graph of their own: what other ops made are its inputs (P4.G3)."""
    chosen = set(op_ids)
    ops = [op for op in graph.ops if op.id in chosen]
    used = {t for op in ops for t in op.inputs + op.outputs}
    tensors = [t for t in graph.tensors if t.id in used]
    return TrainingGraph.build(name, ops, tensors, {**graph.meta, "part_of": graph.name})


def hardware_of(cluster: ClusterSpec, override: str | None = None, sets: Sequence[str] = ()) -> Hardware:
    """The hardware every device of ``cluster`` is (P4.G3): ``override`` (a preset or a YAML
    file, with ``sets`` as a preset's parameters), else the cluster's ``hardware`` field."""
    text = override or cluster.hardware
    if not text:
        raise MonetError(f"cluster {cluster.name!r} names no hardware for its devices", field="hardware",
                         fix="give --hw PRESET (e.g. datacenter_gpu) or a hardware YAML file, or write "
                             "hardware: in the cluster file")
    name, *words = text.split()
    params = parse_set([*words, *sets])
    if name in PRESETS:
        return preset(name, **params)
    if params:
        raise MonetError("preset parameters apply to presets, not to YAML files", field="--hw-set",
                         fix=f"edit the file, or use a preset: {', '.join(PRESETS)}")
    if not Path(name).suffix:
        raise MonetError(f"unknown hardware {name!r}", field="hardware",
                         fix=f"use a preset ({', '.join(PRESETS)}) or a hardware YAML file")
    return load_hardware(name)


@dataclass(frozen=True)
class GraphPlan:
    """How one iteration of a training graph runs on a cluster (P4.G2)."""

    data: int
    pipeline: int
    micro_batch: int
    micro_batches: int
    schedule: str
    stages: tuple[int, ...]  # units per stage

    @property
    def devices(self) -> int:
        return self.data * self.pipeline

    def stage_units(self) -> list[tuple[int, int]]:
        out, first = [], 0
        for n in self.stages:
            out.append((first, first + n - 1))
            first += n
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"data": self.data, "pipeline": self.pipeline, "tensor": 1, "micro_batch": self.micro_batch,
                "micro_batches": self.micro_batches, "schedule": self.schedule, "stages": list(self.stages)}


@dataclass(frozen=True)
class PartRun:
    """One stage part's P3 schedule, as the P3 evaluator measured it."""

    kind: str
    units: tuple[int, int]
    ops: int
    status: str
    cycles: int | None  # the verified makespan
    bound_cycles: float | None  # P3's bound over its class for this part
    energy_pj: int
    dram_peak_bytes: int
    backend: str
    message: str = ""


@dataclass(frozen=True)
class GraphPlanResult:
    """The best verified plan, its measures, and a bound over the class (P4.G8)."""

    status: str  # "optimal", "feasible", "infeasible", "unknown", "error"
    plan: GraphPlan | None
    value: float | None  # seconds per iteration
    bound: float | None  # seconds; holds for every plan of the class
    seconds: float
    holds_for: str
    units: tuple[str, ...]
    hardware: str
    one_device: float | None  # seconds of the best one-device plan evaluated: P3 on one device
    parts: tuple[PartRun, ...] = ()
    stages: tuple[dict[str, Any], ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        if self.value is None or self.bound is None or self.value <= 0:
            return None
        return (self.value - self.bound) / self.value

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "objective": "time", "value": self.value, "bound": self.bound,
                "gap": self.gap, "time_per_iteration_s": self.value,
                "plan": None if self.plan is None else self.plan.to_dict(), "units": list(self.units),
                "hardware": self.hardware, "one_device_s": self.one_device,
                "parts": [dict(p.__dict__) for p in self.parts], "stages": list(self.stages),
                "seconds": self.seconds, "holds_for": self.holds_for, "stats": self.stats}


@dataclass
class _Batch:
    """What one micro-batch size brings: its graph, units, per-op floors, message sizes."""

    b: int
    graph: TrainingGraph
    units: GraphUnits
    instance: Instance  # the whole graph on one device (its op costs and memories)
    part_work: dict[str, list[float]]  # P4.G7 per part kind and unit: its ops' least cycles over the cores
    ops_of: dict[str, list[tuple[int, int, tuple[int, ...]]]]  # per part kind: (unit, least cycles, producers)
    whole_floor: dict[str, float]  # P3's own bound (BD.B1-B6) on the whole graph ("all"), "FB" and "O"
    grad_bytes: list[int]  # per unit: the weight gradients the data-parallel group reduces
    down: list[int]  # per cut k: bytes sent from stage side k-1 to k (activations)
    up: list[int]  # per cut k: bytes sent back (gradients, and activations read upstream)
    saved: list[tuple[int, frozenset[int]]]  # bytes a micro-batch keeps for its backward, and the units reading them
    hardware: Hardware
    cores: int
    clock_hz: int
    misfit: str | None  # an op no core's memory holds (P4.G6): the micro-batch size is infeasible
    # per part kind: (the least cycles of moving it out of DRAM, the units reading it, its producer's (kind, unit))
    inputs_of: dict[str, list[tuple[float, tuple[int, ...], tuple[str, int] | None]]] = field(default_factory=dict)
    floors: dict[tuple[str, int, int], float] = field(default_factory=dict)

    def floor(self, kind: str, first: int, last: int, *, moves: bool = True) -> float:
        """P4.G7: cycles no P3 schedule of part ``kind`` of units ``first..last`` beats: its
        ops' least work spread over the cores (BD.B2), its critical path (BD.B1), or its
        inputs' moves out of DRAM over the links that leave it (``moves``: where the part
        is a schedule of its own; in one schedule of forward and backward the backward's
        inputs may already sit in a core's memory)."""
        key = (kind if moves else kind + "-", first, last)
        if key not in self.floors:
            work = sum(self.part_work[kind][first:last + 1]) / self.cores
            ends: dict[int, int] = {}
            longest = 0
            for i, (unit, cycles, producers) in enumerate(self.ops_of[kind]):
                if first <= unit <= last:
                    ends[i] = cycles + max((ends[j] for j in producers if j in ends), default=0)
                    longest = max(longest, ends[i])
            moved = moves and kind in self.inputs_of
            out = sum(cycles for cycles, readers, made in self.inputs_of.get(kind, ())
                        if any(first <= u <= last for u in readers)
                        and not (made is not None and made[0] == kind and first <= made[1] <= last)) if moved else 0.0
            self.floors[key] = max(work, float(longest), out)
        return self.floors[key]


def _batch_data(graph: TrainingGraph, hardware: Hardware, b: int, source: str | None) -> _Batch:
    units = graph_units(graph, source=source)
    inst = make_instance(graph, hardware, problem="P3", objective="latency")
    n = units.count
    work = {k: [0.0] * n for k in ("F", "B", "O")}
    ops_of: dict[str, list[tuple[int, int, tuple[int, ...]]]] = {k: [] for k in ("F", "B", "O")}
    index: dict[str, tuple[str, int]] = {}
    sram = {c.id: inst.memory(c.memory).capacity_bytes for c in inst.cores}
    misfit = None
    for op in graph.ops:
        u = units.unit_of[op.id]
        kind = "O" if op.kind is OpKind.OPTIMIZER else ("B" if op.is_backward else "F")
        # P3.K3: a run holds every non-persistent input and output in its core's memory, and
        # runs at its pinned cost only with its persistent inputs pinned there too (P3.K4).
        need = sum(graph.tensor(t).bytes for t in set(op.inputs + op.outputs) if not graph.tensor(t).persistent)
        pinned = sum(graph.tensor(t).bytes for t in set(op.inputs) if graph.tensor(t).persistent)
        options = [c.cycles for c in inst.costs[op.id].values()]
        options += [cost.cycles for core, cost in inst.pinned_costs.get(op.id, {}).items()
                    if need + pinned <= sram[core]]
        least = min(options)  # BD.B1-B2: at its fastest core and variant
        work[kind][u] += least
        producers = tuple(index[pr][1] for t in op.inputs
                          if (pr := graph.tensor(t).producer) is not None and index.get(pr, ("", 0))[0] == kind)
        index[op.id] = (kind, len(ops_of[kind]))
        ops_of[kind].append((u, least, producers))
        if misfit is None and need > max(sram[c] for c in inst.costs[op.id]):
            misfit = (f"op {op.id!r} at micro-batch {b} holds {need:,} bytes at once, more than any core's memory "
                      f"({max(sram.values()):,})")
    whole_floor: dict[str, float] = {}
    if misfit is None:  # P4.G7: P3's own bounds where the part is the whole graph (one stage)
        whole_floor["all"] = float(combinatorial_bound(inst) or 0)
        for kind, ids in (("FB", [o.id for o in graph.ops if o.kind is not OpKind.OPTIMIZER]),
                          ("O", [o.id for o in graph.ops if o.kind is OpKind.OPTIMIZER])):
            part = make_instance(subgraph(graph, ids, f"{graph.name}.{kind}"), hardware, problem="P3",
                                 objective="latency") if ids else None
            whole_floor[kind] = float(combinatorial_bound(part) or 0) if part is not None else 0.0
    # P4.G7: a part's inputs start in DRAM (P3's input_home); every read is from a core's
    # memory, so each input leaves DRAM at least once, over one of the links that leave it.
    exits = [link for link in inst.links if inst.input_home in link.endpoints]
    inputs_of: dict[str, list[tuple[float, tuple[int, ...], tuple[str, int] | None]]] = {k: [] for k in ops_of}
    for t in graph.tensors:
        if t.persistent or not exits:
            continue
        made = None if t.producer is None else (index[t.producer][0], units.unit_of[t.producer])
        move = min(link.transfer_cycles(t.bytes) for link in exits) / len(exits)
        for kind in ops_of:
            reading = tuple(sorted({units.unit_of[c] for c in t.consumers if index[c][0] == kind}))
            if reading:
                inputs_of[kind].append((move, reading, made))
    grad = [0] * n
    for t in graph.tensors:
        if t.kind is TensorKind.WEIGHT_GRAD and t.producer is not None:
            grad[units.unit_of[t.producer]] += t.bytes
    down, up = [0] * n, [0] * n
    saved: list[tuple[int, frozenset[int]]] = []
    for t in graph.tensors:
        if t.persistent:
            continue
        readers = [units.unit_of[c] for c in t.consumers]
        if t.producer is None:  # a graph input: the data loader gives each stage what it reads
            src = None
        else:
            src = units.unit_of[t.producer]
        producer_forward = t.producer is None or graph.op(t.producer).kind in (OpKind.FORWARD, OpKind.LOSS)
        backward_readers = {units.unit_of[c] for c in t.consumers if graph.op(c).is_backward}
        if producer_forward and backward_readers:
            saved.append((t.bytes, frozenset(backward_readers)))
        if src is None or not readers:
            continue
        hi, lo = max(readers), min(readers)
        for k in range(src + 1, hi + 1):  # P4.G4 it crosses every cut between its producer and a reader
            down[k] += t.bytes
        for k in range(lo + 1, src + 1):
            up[k] += t.bytes
    return _Batch(b, graph, units, inst, work, ops_of, whole_floor, grad, down, up, saved, hardware,
                  len(inst.cores), hardware.clock_hz, misfit, inputs_of)


def _ns(cycles: float, clock_hz: int, *, up: bool) -> int:
    value = cycles * 1e9 / clock_hz
    return math.ceil(value - 1e-9) if up else math.floor(value + 1e-9)


def _hop_ns(cluster: ClusterSpec, nbytes: int, stride: int) -> int:
    """P4.G4: a message of ``nbytes`` to the next stage's device, ``stride`` devices away."""
    if nbytes == 0:
        return 0
    bandwidth, latency = cluster.link(2, stride)
    return math.ceil((latency + nbytes / bandwidth) * 1e9)


def _allreduce_ns(cluster: ClusterSpec, nbytes: int, d: int) -> int:
    """P4.G5: a ring all-reduce of ``nbytes`` over the ``d`` replicas of a stage (adjacent devices)."""
    if d == 1 or nbytes == 0:
        return 0
    bandwidth, latency = cluster.link(d, 1)
    return math.ceil((2 * (d - 1) * latency + 2 * (d - 1) / d * nbytes / bandwidth) * 1e9)


def _bottleneck(n: int, p: int, allowed: set[int], cost: Callable[[int, int, int], float]) -> tuple[float, list[int]]:
    """The least, over cuts of units ``0..n-1`` into ``p`` stages at ``allowed`` cuts, of the
    largest ``cost(s, first, last)`` (P4.G7), and a cut reaching it (units per stage)."""
    inf = math.inf
    best = [[inf] * (n + 1) for _ in range(p + 1)]
    back = [[0] * (n + 1) for _ in range(p + 1)]
    best[0][0] = -inf
    for s in range(1, p + 1):
        for k in range(s, n + 1):  # stage s-1 ends before unit k
            if k < n and k not in allowed:
                continue
            for j in range(s - 1, k):  # ... and starts at unit j
                if best[s - 1][j] == inf or (j > 0 and j not in allowed):
                    continue
                value = max(best[s - 1][j], cost(s - 1, j, k - 1))
                if value < best[s][k]:
                    best[s][k], back[s][k] = value, j
    if best[p][n] == inf:
        return inf, []
    sizes, k = [], n
    for s in range(p, 0, -1):
        j = back[s][k]
        sizes.append(k - j)
        k = j
    return best[p][n], sizes[::-1]


def graph_plan_search(graph_at: Callable[[int], TrainingGraph], cluster: ClusterSpec, hardware: Hardware, *,
                      global_batch: int, micro_batches: Sequence[int], schedules: Sequence[str] = SCHEDULES,
                      pipeline: int | None = None, time_limit: float = 60.0, part_limit: float | None = None,
                      backend: str = "auto", workers: int | None = None, source: str | None = None,
                      hardware_name: str = "") -> GraphPlanResult:
    """Search the plans of a training graph on ``cluster`` (P4.G2-G8).

    ``graph_at(b)`` is the graph of one micro-batch of ``b`` samples; ``micro_batches``
    the sizes to try (each dividing ``global_batch``).  Every device is ``hardware``; each
    part of each stage is solved by P3 backend ``backend`` within ``part_limit`` seconds
    (default: a thirtieth of ``time_limit``, at least half a second) and verified by the evaluator.
    ``pipeline`` fixes the pipeline degree.
    """
    start = time.perf_counter()
    deadline = start + time_limit
    part_limit = part_limit if part_limit is not None else max(MIN_PART_S, time_limit / 30)
    N = cluster.devices
    sizes = sorted({b for b in micro_batches if b >= 1 and global_batch % b == 0})
    if not sizes:
        raise MonetError(f"no micro-batch size divides the global batch {global_batch}", field="--global-batch",
                         fix="give a global batch that a micro-batch size divides")
    device_counts = sorted({1, N})
    holds_for = GRAPH_CLASS.format(devices=", ".join(map(str, device_counts)), sizes=", ".join(map(str, sizes)))
    batches: dict[int, _Batch] = {}
    for b in sizes:
        batches[b] = _batch_data(graph_at(b), hardware, b, source)
    first = batches[sizes[0]]
    if pipeline is not None:
        allowed = first.units.allowed_cuts()
        if pipeline > 1 and len(allowed) < pipeline - 1:
            why = "; ".join(sorted(set(first.units.blocked.values()))[:2]) or "too few units"
            raise MonetError(f"graph {first.graph.name!r} has {first.units.count} units and {len(allowed)} allowed "
                             f"cuts: no cut into {pipeline} stages ({why})", file=source, field="--pipeline",
                             fix=f"use at most {len(allowed) + 1} stages, or untie the shared weights")
    candidates: list[tuple[float, dict[str, Any]]] = []
    infeasible: list[str] = []
    for b in sizes:
        bd = batches[b]
        if bd.misfit:
            infeasible.append(bd.misfit)
            continue
        for n in device_counts:
            for p in range(1, n + 1):
                if n % p or p > bd.units.count or (pipeline is not None and p != pipeline):
                    continue
                d = n // p
                if global_batch % (d * b):
                    continue
                m = global_batch // (d * b)
                for schedule in (schedules if p > 1 else ("1f1b",)):
                    bound, cut = _candidate_bound(bd, cluster, d, p, m, schedule)
                    if bound < math.inf:
                        candidates.append((bound, {"b": b, "d": d, "p": p, "m": m, "schedule": schedule,
                                                   "cut": cut}))
    candidates.sort(key=lambda c: (c[0], c[1]["d"] * c[1]["p"], c[1]["p"]))
    cache: dict[tuple[int, str, int, int], PartRun] = {}
    best: tuple[float, GraphPlan, list[PartRun], list[dict[str, Any]]] | None = None
    one_device: float | None = None
    evaluated = pruned = 0
    unresolved: list[float] = []
    errors: list[str] = []
    # P4.G8: the one-device plans first (P3 on one device), so that no plan is worse than them.
    order = sorted(range(len(candidates)), key=lambda i: (candidates[i][1]["d"] * candidates[i][1]["p"] != 1, i))
    for i in order:
        bound, cand = candidates[i]
        if best is not None and bound >= best[0] * (1 - TOLERANCE):
            pruned += 1
            continue
        if best is not None and time.perf_counter() >= deadline:
            unresolved.append(bound)
            continue
        # P4.G8: the first plan is measured whatever the clock says, so that a plan comes back
        outcome = _evaluate(batches[cand["b"]], cluster, cand, cache, backend=backend, workers=workers,
                            part_limit=part_limit, deadline=deadline if best is not None else math.inf)
        evaluated += 1
        if outcome is None:
            unresolved.append(bound)
            continue
        value, plan, parts, stages = outcome
        wrong = bound_error(value, bound, "P4.G7", holds_for, tolerance=TOLERANCE)
        if wrong is not None:  # BD.C1: reported, never hidden
            errors.append(wrong)
        if plan.devices == 1 and (one_device is None or value < one_device):
            one_device = value
        if best is None or value < best[0]:
            best = (value, plan, parts, stages)
    seconds = time.perf_counter() - start
    units = first.units.names
    class_bound = min((c[0] for c in candidates), default=None)
    stats = {"candidates": len(candidates), "evaluated": evaluated, "pruned": pruned,
             "unresolved": len(unresolved), "micro_batch_infeasible": infeasible, "part_limit_s": part_limit,
             "backend": backend, "p3_solves": len(cache), "errors": errors}
    if not candidates:
        status = "infeasible" if infeasible else "unknown"
        return GraphPlanResult(status, None, None, None if infeasible else class_bound, seconds, holds_for, units,
                               hardware_name or hardware.name, None, stats=stats)
    if best is None:
        return GraphPlanResult("unknown", None, None, class_bound, seconds, holds_for, units,
                               hardware_name or hardware.name, None, stats=stats)
    value, plan, parts, stages = best
    assert class_bound is not None
    status = "optimal" if (value - class_bound) <= TOLERANCE * value else "feasible"
    if errors:
        status = "error"
    return GraphPlanResult(status, plan, value, class_bound, seconds, holds_for, units,
                           hardware_name or hardware.name, one_device, tuple(parts), tuple(stages), stats)


def plan_bound(graph: TrainingGraph, cluster: ClusterSpec, hardware: Hardware, *, data: int, pipeline: int,
               micro_batches: int, schedule: str = "1f1b") -> float:
    """P4.G7 for one candidate: seconds no plan with these degrees beats, whatever its cut;
    ``graph`` is one micro-batch's."""
    return _candidate_bound(_batch_data(graph, hardware, graph_batch(graph), None), cluster, data, pipeline,
                            micro_batches, schedule)[0]


def measure_plan(graph: TrainingGraph, cluster: ClusterSpec, hardware: Hardware, plan: GraphPlan, *,
                 backend: str = "auto", part_limit: float = 10.0, workers: int | None = None
                 ) -> tuple[float, tuple[PartRun, ...], tuple[dict[str, Any], ...]] | None:
    """P4.G3-G6 for one plan: its seconds per iteration from verified P3 schedules of its
    parts, the parts and the stages; ``None`` when a part has no schedule or a stage does
    not fit.  ``graph`` is one micro-batch's."""
    bd = _batch_data(graph, hardware, plan.micro_batch, None)
    cand = {"b": plan.micro_batch, "d": plan.data, "p": plan.pipeline, "m": plan.micro_batches,
            "schedule": plan.schedule, "cut": list(plan.stages)}
    if sum(plan.stages) != bd.units.count or any(k in bd.units.blocked for k in _cuts(plan.stages)):
        raise MonetError(f"plan stages {list(plan.stages)} do not cut the {bd.units.count} units at allowed cuts",
                         field="stages", fix="give units per stage summing to the units, cut where allowed")
    outcome = _evaluate(bd, cluster, cand, {}, backend=backend, workers=workers, part_limit=part_limit)
    return None if outcome is None else (outcome[0], tuple(outcome[2]), tuple(outcome[3]))


def _cuts(stages: Sequence[int]) -> list[int]:
    out, first = [], 0
    for n in stages[:-1]:
        first += n
        out.append(first)
    return out


def graph_batch(graph: TrainingGraph) -> int:
    """The samples one copy of a graph trains on: its first input activation's first dimension (else 1)."""
    for t in graph.tensors:
        if t.kind is TensorKind.ACTIVATION and t.producer is None and t.shape:
            return t.shape[0]
    return 1


def _candidate_bound(bd: _Batch, cluster: ClusterSpec, d: int, p: int, m: int, schedule: str
                     ) -> tuple[float, list[int]]:
    """P4.G7: seconds no plan of this candidate beats, and the cut its bubble term picks."""
    n = bd.units.count
    clock = bd.clock_hz

    def ns(cycles: float) -> int:
        return _ns(cycles, clock, up=False)

    if p == 1:
        sync = _allreduce_ns(cluster, sum(bd.grad_bytes), d)
        if d == 1 and m == 1:  # one schedule of the whole graph: P3's bound
            return ns(bd.whole_floor["all"]) / 1e9, [n]
        # every backward op waits for the loss, which waits for every forward op: FB >= F + B
        fb = max(ns(bd.whole_floor["FB"]), ns(bd.floor("F", 0, n - 1)) + ns(bd.floor("B", 0, n - 1, moves=False)))
        opt = max(ns(bd.whole_floor["O"]), ns(bd.floor("O", 0, n - 1)))
        return (m * fb + sync + opt) / 1e9, [n]
    allowed = set(bd.units.allowed_cuts())
    if len(allowed) < p - 1:
        return math.inf, []
    stride = d  # data groups innermost: a stage's replicas are neighbours, the next stage d devices on
    hop = {k: _hop_ns(cluster, bd.down[k], stride) + _hop_ns(cluster, bd.up[k], stride) for k in allowed}

    def work(j: int, k: int) -> int:
        return ns(bd.floor("F", j, k)) + ns(bd.floor("B", j, k))

    def overlap(s: int) -> int:
        return 0 if schedule == "gpipe" or s == p - 1 else min(m, p - s) - 1

    def bubble(s: int, j: int, k: int) -> float:  # P4.P5: (m - 1) W_s - o_s F_s
        return (m - 1) * work(j, k) - overlap(s) * ns(bd.floor("F", j, k))

    def step(s: int, j: int, k: int) -> float:  # P4.P6: the stage's all-reduce and optimizer step
        return _allreduce_ns(cluster, sum(bd.grad_bytes[j:k + 1]), d) + ns(bd.floor("O", j, k))

    through = _cheapest(n, p, allowed, lambda s, j, k: work(j, k) + (hop[j] if j else 0))
    worst_bubble, cut = _bottleneck(n, p, allowed, bubble)
    worst_step, _ = _bottleneck(n, p, allowed, step)
    return (through + worst_bubble + worst_step) / 1e9, cut


def _cheapest(n: int, p: int, allowed: set[int], cost: Callable[[int, int, int], float]) -> float:
    """The least, over cuts of units ``0..n-1`` into ``p`` stages at ``allowed`` cuts, of the
    sum of ``cost(s, first, last)`` over the stages (P4.G7)."""
    inf = math.inf
    best = [[inf] * (n + 1) for _ in range(p + 1)]
    best[0][0] = 0.0
    for s in range(1, p + 1):
        for k in range(s, n + 1):
            if k < n and k not in allowed:
                continue
            for j in range(s - 1, k):
                if best[s - 1][j] == inf or (j > 0 and j not in allowed):
                    continue
                best[s][k] = min(best[s][k], best[s - 1][j] + cost(s - 1, j, k - 1))
    return best[p][n]


def _evaluate(bd: _Batch, cluster: ClusterSpec, cand: dict[str, Any], cache: dict[tuple[int, str, int, int], PartRun],
              *, backend: str, workers: int | None, part_limit: float, deadline: float = math.inf
              ) -> tuple[float, GraphPlan, list[PartRun], list[dict[str, Any]]] | None:
    """P4.G3-G6: schedule each part of each stage with P3, then run the pipeline; None if a part has no schedule."""
    b, d, p, m, schedule, cut = cand["b"], cand["d"], cand["p"], cand["m"], cand["schedule"], cand["cut"]
    plan = GraphPlan(d, p, b, m, schedule, tuple(cut))
    clock = bd.clock_hz
    ranges = plan.stage_units()
    kinds = (("all",) if d == 1 and m == 1 else ("FB", "O")) if p == 1 else ("F", "B", "O")
    parts: list[PartRun] = []
    for first, last in ranges:
        for kind in kinds:
            key = (b, kind, first, last)
            if key not in cache:
                left = deadline - time.perf_counter() - MARGIN_S  # P4.G8: no part starts past the time limit
                if left < MIN_PART_S and deadline != math.inf:
                    return None
                cache[key] = _solve_part(bd, kind, first, last, backend=backend, workers=workers,
                                         limit=min(part_limit, max(MIN_PART_S, left)))
            run = cache[key]
            if run.cycles is None:
                return None
            parts.append(run)
    by = {(r.units, r.kind): r for r in parts}

    def part_ns(first: int, last: int, kind: str) -> int:
        run = by.get(((first, last), kind))
        return 0 if run is None or run.cycles is None else _ns(run.cycles, clock, up=True)

    stages: list[dict[str, Any]] = []
    steps = []
    capacity = bd.instance.memory("dram").capacity_bytes if _has(bd.instance, "dram") else None
    for s, (first, last) in enumerate(ranges):
        sync = _allreduce_ns(cluster, sum(bd.grad_bytes[first:last + 1]), d)
        steps.append(sync + part_ns(first, last, "O"))
        in_flight = m if schedule == "gpipe" else min(m, p - s)
        peak = max((r.dram_peak_bytes for r in parts if r.units == (first, last)), default=0)
        # P4.G6: the largest part's peak, and the activations the other micro-batches in flight keep.
        saved = sum(size for size, readers in bd.saved if any(first <= u <= last for u in readers))
        memory = peak + (in_flight - 1) * saved
        stages.append({"units": [first, last], "first": bd.units.names[first], "last": bd.units.names[last],
                       "forward_ns": part_ns(first, last, "F"), "backward_ns": part_ns(first, last, "B"),
                       "optimizer_ns": part_ns(first, last, "O"), "allreduce_ns": sync, "in_flight": in_flight,
                       "memory_bytes": memory, "saved_bytes_per_micro_batch": saved})
        if capacity is not None and memory > capacity:
            return None
    if p == 1:
        if kinds == ("all",):
            pipeline_ns = part_ns(0, bd.units.count - 1, "all")
        else:
            pipeline_ns = m * part_ns(0, bd.units.count - 1, "FB")
        stages[0]["forward_backward_ns"] = part_ns(0, bd.units.count - 1, "FB" if kinds != ("all",) else "all")
    else:
        forward = [part_ns(f, l, "F") for f, l in ranges]
        backward = [part_ns(f, l, "B") for f, l in ranges]
        cuts = [f for f, _ in ranges[1:]]
        down = [_hop_ns(cluster, bd.down[k], d) for k in cuts]
        up = [_hop_ns(cluster, bd.up[k], d) for k in cuts]
        for s, k in enumerate(cuts):
            stages[s]["sends_bytes"] = bd.down[k]
            stages[s + 1]["sends_back_bytes"] = bd.up[k]
        pipeline_ns = simulate_pipeline(stage_orders(schedule, p, m), forward, backward, down, up)
    time_ns = pipeline_ns + max(steps)
    return time_ns / 1e9, plan, parts, stages


def _has(inst: Instance, memory: str) -> bool:
    return any(mem.id == memory for mem in inst.memories)


def _solve_part(bd: _Batch, kind: str, first: int, last: int, *, backend: str, workers: int | None,
                limit: float) -> PartRun:
    """P4.G3: one part of one stage as a P3 instance, solved and verified."""
    ops = stage_parts(bd.graph, bd.units, first, last, kind)
    if not ops:
        return PartRun(kind, (first, last), 0, "optimal", 0, 0, 0, 0, "none")
    name = f"{bd.graph.name}.{kind}.{bd.units.names[first]}-{bd.units.names[last]}.b{bd.b}"
    sub = subgraph(bd.graph, ops, name)
    inst = make_instance(sub, bd.hardware, problem="P3", objective="latency")
    result = solve(inst, backend, time_limit=limit, workers=workers)
    if result.status is Status.UNKNOWN and backend != FALLBACK:  # no schedule in time: the list scheduler's
        fallback = solve(inst, FALLBACK)
        if fallback.status is Status.FEASIBLE:
            result = fallback
    if result.status not in (Status.OPTIMAL, Status.FEASIBLE) or result.metrics is None:
        return PartRun(kind, (first, last), len(ops), str(result.status), None, result.bound, 0, 0, backend,
                       result.message)
    metrics = result.metrics
    dram = metrics.peak_bytes.get("dram", 0)
    assert isinstance(result.objective, int)
    return PartRun(kind, (first, last), len(ops), str(result.status), result.objective,
                   None if result.bound is None else float(result.bound), metrics.energy.total_pj, dram,
                   result.source or backend)
