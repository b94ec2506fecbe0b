"""Instance: a training graph with integer costs, memory budgets and an objective.

This is what every formulation solves and what the evaluator checks against.  All
quantities are integers: cycles (of the hardware's reference clock), bytes and
picojoules.  Fractional inputs are scaled once, here, at creation:

* node-link compute costs that are not integers are multiplied by
  ``meta["cost_scale"]`` (1000) and rounded;
* link bandwidths are kept as exact fractions ``bandwidth_num / bandwidth_den``
  bytes per cycle, so a transfer of ``b`` bytes takes
  ``latency_cycles + ceil(b * den / num)`` cycles;
* per-byte energies are integers in femtojoules (``*_fj_per_byte``), and an energy
  of ``b`` bytes is ``(b * fj + 500) // 1000`` picojoules (rounded half up);
* static power is ``static_fj_per_cycle``; static energy is
  ``static_fj_per_cycle * latency // 1000`` picojoules.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.graph.ir import TrainingGraph, read_json
from monet_ilp.hardware.model import OpCost

FORMAT_NAME = "monet-ilp/instance"
FORMAT_VERSION = 1
COST_SCALE = 1000


class Problem(StrEnum):
    """Problem classes (``formulations/p1_problem.md`` to ``p3_problem.md``); each contains the previous."""

    P1 = "P1"  # remat: one core, one budgeted memory, fixed order of first computations
    P2 = "P2"  # remat + offload to a second memory over a link
    P3 = "P3"  # joint allocation, remat and offload on several cores


class Objective(StrEnum):
    COMPUTE = "compute"  # total compute cycles, recomputation included (P1)
    LATENCY = "latency"  # makespan
    ENERGY = "energy"  # total energy, static included
    WEIGHTED = "weighted"  # alpha * latency / ref + (1 - alpha) * energy / ref


@dataclass(frozen=True)
class CoreSpec:
    """A core of the instance and the memory its ops read and write."""

    id: str
    memory: str


@dataclass(frozen=True)
class MemorySpec:
    """A memory; ``capacity_bytes`` is the budget the schedule must respect."""

    id: str
    kind: str
    capacity_bytes: int
    read_fj_per_byte: int = 0
    write_fj_per_byte: int = 0


@dataclass(frozen=True)
class LinkSpec:
    """A link; one transfer at a time.  See the module docstring for the integer formulas."""

    id: str
    endpoints: tuple[str, ...]
    bandwidth_num: int
    bandwidth_den: int = 1
    latency_cycles: int = 0
    fj_per_byte: int = 0

    def transfer_cycles(self, nbytes: int) -> int:
        return self.latency_cycles + -(-nbytes * self.bandwidth_den // self.bandwidth_num)

    def transfer_pj(self, nbytes: int) -> int:
        return (nbytes * self.fj_per_byte + 500) // 1000

    def connects(self, a: str, b: str) -> bool:
        return a != b and a in self.endpoints and b in self.endpoints


def pj_of(nbytes: int, fj_per_byte: int) -> int:
    """Picojoules of moving ``nbytes`` at ``fj_per_byte`` femtojoules per byte (half up)."""
    return (nbytes * fj_per_byte + 500) // 1000


@dataclass(frozen=True)
class Instance:
    """Graph + cores + memories (with budgets) + links + integer costs + objective.

    ``costs[op][core]`` is the cost of running ``op`` on ``core``; an op may run
    only on the cores listed.  ``pinned_costs[op][core]`` is its cost when every
    persistent tensor it reads is pinned in that core's memory (P3 only).
    Graph inputs start in ``input_home`` at time 0.  Persistent tensors (weights,
    gradients, optimizer state) live in ``persistent_home`` for the whole
    iteration, or are not modelled at all when it is ``None`` (P1, P2).
    """

    name: str
    problem: Problem
    objective: Objective
    graph: TrainingGraph
    cores: tuple[CoreSpec, ...]
    memories: tuple[MemorySpec, ...]
    links: tuple[LinkSpec, ...]
    costs: Mapping[str, Mapping[str, OpCost]]
    input_home: str
    persistent_home: str | None = None
    pinned_costs: Mapping[str, Mapping[str, OpCost]] = field(default_factory=dict)
    static_fj_per_cycle: int = 0
    alpha: float = 0.5
    runtime_limit_cycles: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        freeze = lambda table: MappingProxyType({k: MappingProxyType(dict(v)) for k, v in table.items()})
        object.__setattr__(self, "costs", freeze(self.costs))
        object.__setattr__(self, "pinned_costs", freeze(self.pinned_costs))
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))
        object.__setattr__(self, "_cores", {c.id: c for c in self.cores})
        object.__setattr__(self, "_memories", {m.id: m for m in self.memories})
        object.__setattr__(self, "_links", {l.id: l for l in self.links})
        _validate(self)

    # -------------------------------------------------------------- access
    def core(self, core_id: str) -> CoreSpec:
        return self._cores[core_id]  # type: ignore[attr-defined]

    def memory(self, memory_id: str) -> MemorySpec:
        return self._memories[memory_id]  # type: ignore[attr-defined]

    def link(self, link_id: str) -> LinkSpec:
        return self._links[link_id]  # type: ignore[attr-defined]

    def has_core(self, core_id: str) -> bool:
        return core_id in self._cores  # type: ignore[attr-defined]

    def has_memory(self, memory_id: str) -> bool:
        return memory_id in self._memories  # type: ignore[attr-defined]

    def has_link(self, link_id: str) -> bool:
        return link_id in self._links  # type: ignore[attr-defined]

    def cost(self, op: str, core: str, *, pinned: bool = False) -> OpCost:
        if pinned and core in self.pinned_costs.get(op, {}):
            return self.pinned_costs[op][core]
        return self.costs[op][core]

    def cores_for(self, op: str) -> tuple[str, ...]:
        return tuple(self.costs[op])

    def links_between(self, a: str, b: str) -> tuple[LinkSpec, ...]:
        return tuple(l for l in self.links if l.connects(a, b))

    @cached_property
    def fingerprint(self) -> str:
        """What a schedule depends on, hashed: graph, cores, memories, links and costs.

        Capacities, the objective, its weights and limits, the name and ``meta`` are
        left out: a schedule made for this graph on this hardware stays meaningful
        input under another budget or objective (the evaluator then reports what it
        breaks), while one made for another graph or hardware does not.
        """
        data = self.to_dict()
        for key in ("name", "objective", "alpha", "runtime_limit_cycles", "meta", "format", "version"):
            data.pop(key)
        for key in ("name", "meta"):  # the same graph read from a file of another name
            data["graph"].pop(key, None)
        for memory in data["memories"]:
            memory.pop("capacity_bytes")
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def budget_bytes(self) -> int:
        """Capacity of the first core's memory: the budget of P1 and P2."""
        return self.memory(self.cores[0].memory).capacity_bytes

    # ---------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        def table(t):
            return {op: {c: [x.cycles, x.compute_pj, x.sram_pj, x.dram_pj] for c, x in row.items()}
                    for op, row in t.items()}

        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "name": self.name,
            "problem": str(self.problem),
            "objective": str(self.objective),
            "cores": [{"id": c.id, "memory": c.memory} for c in self.cores],
            "memories": [dict(m.__dict__) for m in self.memories],
            "links": [{**l.__dict__, "endpoints": list(l.endpoints)} for l in self.links],
            "input_home": self.input_home,
            "persistent_home": self.persistent_home,
            "static_fj_per_cycle": self.static_fj_per_cycle,
            "alpha": self.alpha,
            "runtime_limit_cycles": self.runtime_limit_cycles,
            "meta": dict(self.meta),
            "costs": table(self.costs),
            "pinned_costs": table(self.pinned_costs),
            "graph": self.graph.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> "Instance":
        try:
            if not isinstance(data, Mapping) or data.get("format") != FORMAT_NAME:
                raise InputFormatError(
                    f'not a monet-ilp instance (expected "format": "{FORMAT_NAME}")',
                    field="format",
                    fix="pass a file written by `monet-ilp instance make`",
                )
            if data.get("version") != FORMAT_VERSION:
                raise InputFormatError(f"unsupported instance version {data.get('version')!r}",
                                       field="version", fix="regenerate the instance")

            def table(key):
                rows = data.get(key, {})
                return {op: {c: OpCost(*map(int, v)) for c, v in row.items()} for op, row in rows.items()}

            return cls(
                name=str(data["name"]),
                problem=Problem(data["problem"]),
                objective=Objective(data["objective"]),
                graph=TrainingGraph.from_dict(data["graph"], source=source),
                cores=tuple(CoreSpec(**c) for c in data["cores"]),
                memories=tuple(MemorySpec(**m) for m in data["memories"]),
                links=tuple(LinkSpec(**{**l, "endpoints": tuple(l["endpoints"])}) for l in data["links"]),
                costs=table("costs"),
                pinned_costs=table("pinned_costs"),
                input_home=data["input_home"],
                persistent_home=data.get("persistent_home"),
                static_fj_per_cycle=int(data.get("static_fj_per_cycle", 0)),
                alpha=float(data.get("alpha", 0.5)),
                runtime_limit_cycles=data.get("runtime_limit_cycles"),
                meta=data.get("meta", {}),
            )
        except MonetError as err:
            raise err.with_file(source) if source else err
        except (KeyError, TypeError, ValueError) as err:
            raise InputFormatError(
                f"malformed instance ({type(err).__name__}: {err})",
                file=source,
                field=str(err.args[0]) if isinstance(err, KeyError) else None,
                fix="regenerate the instance with `monet-ilp instance make`",
            ) from None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict()) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "Instance":
        return cls.from_dict(read_json(path), source=str(path))


def link_spec(link_id: str, endpoints, bandwidth_bytes_per_cycle: float, pj_per_byte: float,
              latency_cycles: int = 0) -> LinkSpec:
    """Scale a physical link (float bandwidth and energy) to its integer form."""
    bandwidth = Fraction(bandwidth_bytes_per_cycle).limit_denominator(1_000_000)
    return LinkSpec(
        id=link_id,
        endpoints=tuple(endpoints),
        bandwidth_num=bandwidth.numerator,
        bandwidth_den=bandwidth.denominator,
        latency_cycles=int(latency_cycles),
        fj_per_byte=round(pj_per_byte * 1000),
    )


def _validate(inst: Instance) -> None:
    def bad(problem: str, field_name: str, fix: str) -> MonetError:
        return MonetError(problem, field=field_name, fix=fix)

    if len(inst._cores) != len(inst.cores) or len(inst._memories) != len(inst.memories):  # type: ignore[attr-defined]
        raise bad("duplicate core or memory id", "cores/memories", "give every core and memory a unique id")
    for c in inst.cores:
        if not inst.has_memory(c.memory):
            raise bad(f"core {c.id!r} uses unknown memory {c.memory!r}", f"cores.{c.id}.memory",
                      "declare the memory")
    for m in inst.memories:
        if not isinstance(m.capacity_bytes, int) or m.capacity_bytes <= 0:
            raise bad(f"memory {m.id!r} has capacity {m.capacity_bytes!r}", f"memories.{m.id}.capacity_bytes",
                      "give a positive byte budget")
    for l in inst.links:
        for e in l.endpoints:
            if not inst.has_memory(e):
                raise bad(f"link {l.id!r} names unknown memory {e!r}", f"links.{l.id}.endpoints",
                          "declare the memory")
        if l.bandwidth_num <= 0 or l.bandwidth_den <= 0:
            raise bad(f"link {l.id!r} has no bandwidth", f"links.{l.id}", "give a positive bandwidth")
    for home in (inst.input_home, inst.persistent_home):
        if home is not None and not inst.has_memory(home):
            raise bad(f"unknown memory {home!r}", "input_home/persistent_home", "name a declared memory")
    for op in inst.graph.ops:
        row = inst.costs.get(op.id)
        if not row:
            raise bad(f"op {op.id!r} can run on no core", f"costs.{op.id}",
                      "give every op a cost on at least one core")
        for core, cost in row.items():
            if not inst.has_core(core):
                raise bad(f"op {op.id!r} is costed on unknown core {core!r}", f"costs.{op.id}.{core}",
                          "cost ops on declared cores only")
            if min(cost.cycles, cost.compute_pj, cost.sram_pj, cost.dram_pj) < 0:
                raise bad(f"op {op.id!r} has a negative cost on {core!r}", f"costs.{op.id}.{core}",
                          "costs are non-negative integers")


# ------------------------------------------------------------------ builders
#: A budget written as a bare integer below this many bytes is refused as ambiguous:
#: ``--budget 2`` is far more likely a slip for ``2x`` or ``0.2`` than two bytes.
MIN_PLAIN_BUDGET_BYTES = 1024


def parse_budget(value: Any, *, field: str = "--budget", file: str | None = None) -> float | int | None:
    """A budget as written by a user: a ``float`` multiple of the store-all peak, or ``int`` bytes.

    * ``0.8`` or ``80%``: a fraction of the store-all activation peak, in (0, 1];
    * ``1.5x``: an explicit multiple of the peak (any positive number);
    * ``2MiB``, ``300kB``, ``4096B``: bytes, with a unit;
    * ``300000``: bytes, as a bare integer of at least :data:`MIN_PLAIN_BUDGET_BYTES`.

    Anything else (``2``, ``2.0``, ``-1``, ``abc``) raises :class:`MonetError` naming
    ``field`` and the spellings above, so that no budget is read in a unit the user
    did not mean.
    """
    from monet_ilp.hardware.schema import parse_size

    fix = ("write a fraction of the store-all peak in (0, 1] (0.8 or 80%), a multiple with an x "
           f"(1.5x), or bytes with a unit (2MiB, 4096B) or as an integer of at least "
           f"{MIN_PLAIN_BUDGET_BYTES}")

    def bad(problem: str) -> MonetError:
        return MonetError(problem, file=file, field=field, fix=fix)

    if value is None:
        return None
    if isinstance(value, bool):
        raise bad(f"budget {value!r} is not a size or a fraction")
    if isinstance(value, int):
        if value < MIN_PLAIN_BUDGET_BYTES:
            raise bad(f"budget {value} is ambiguous (bytes? a multiple of the peak?)")
        return value
    if isinstance(value, float):
        if not 0 < value <= 1:
            raise bad(f"budget {value!r} is not a fraction in (0, 1]")
        return value
    text = str(value).strip().replace("_", "")
    try:
        if text.lower().endswith("x"):
            multiple = float(text[:-1])
            if not 0 < multiple < float("inf"):
                raise bad(f"budget {text!r} is not a positive multiple of the peak")
            return multiple
        if text.endswith("%"):
            return parse_budget(float(text[:-1]) / 100, field=field, file=file)
        if text.isdigit():
            return parse_budget(int(text), field=field, file=file)
        return parse_budget(float(text), field=field, file=file)
    except ValueError:
        pass
    try:
        size = parse_size(text, field=field, file=file)
    except MonetError:
        raise bad(f"cannot read budget {text[:40]!r}") from None
    if size < 1:
        raise bad(f"budget {text!r} is not a positive number of bytes")
    return size


def budget_bytes_of(graph: TrainingGraph, budget: float | int, *, field_name: str = "budget") -> int:
    """A budget in bytes: an ``int`` is bytes, a ``float`` a multiple of the store-all peak.

    Text as users write it goes through :func:`parse_budget` first.

    The peak is that of non-persistent tensors in the graph's op order
    (``formulations/training_graph.md``, M1); persistent tensors are outside the budget.
    """
    from monet_ilp.graph.analysis import store_all_peak

    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0:
        raise MonetError(f"budget {budget!r} must be positive", field=field_name,
                         fix="give a multiple of the store-all peak (a float, e.g. 0.8) or bytes (an int)")
    if isinstance(budget, float):
        return max(1, int(budget * store_all_peak(graph).activation_bytes))
    return budget


def graph_costs(graph: TrainingGraph) -> tuple[dict[str, int], int]:
    """Per-op integer costs from the graph itself, and the scale applied.

    Node-link graphs carry ``cost``; integer costs are kept, fractional ones are
    multiplied by :data:`COST_SCALE` and rounded.  Ops without a cost (ONNX graphs
    used without hardware) cost their FLOPs.
    """
    given = [op.cost for op in graph.ops if op.cost is not None]
    fractional = any(float(c) != int(c) for c in given)
    scale = COST_SCALE if fractional else 1
    costs = {
        op.id: (round(op.cost * scale) if op.cost is not None else op.flops * scale) for op in graph.ops
    }
    return costs, scale


def p1_instance(graph: TrainingGraph, budget: float | int = 0.8, *, name: str | None = None) -> Instance:
    """P1 (remat) on one core, with costs taken from the graph (no hardware).

    The one memory, ``core0.sram``, has the budget as capacity; the objective is the
    total compute cost, recomputation included.
    """
    from monet_ilp.graph.analysis import store_all_peak

    costs, scale = graph_costs(graph)
    capacity = budget_bytes_of(graph, budget)
    return Instance(
        name=name or f"{graph.name}_p1_b{budget}",
        problem=Problem.P1,
        objective=Objective.COMPUTE,
        graph=graph,
        cores=(CoreSpec("core0", "core0.sram"),),
        memories=(MemorySpec("core0.sram", "sram", capacity),),
        links=(),
        costs={op: {"core0": OpCost(cycles=c)} for op, c in costs.items()},
        input_home="core0.sram",
        meta={
            "budget": budget,
            "budget_bytes": capacity,
            "store_all_peak_bytes": store_all_peak(graph).activation_bytes,
            "cost_source": "graph",
            "cost_scale": scale,
        },
    )


def make_instance(
    graph: TrainingGraph,
    hardware=None,
    *,
    problem: str | Problem = Problem.P1,
    budget: float | int | None = None,
    sram_budget: int | None = None,
    objective: str | Objective | None = None,
    core: str | None = None,
    offload: str = "dram",
    alpha: float = 0.5,
    runtime_limit_cycles: int | None = None,
    name: str | None = None,
) -> Instance:
    """Build an instance of problem class P1, P2 or P3.

    Parameters
    ----------
    graph
        The training graph.
    hardware
        A :class:`~monet_ilp.hardware.Hardware`; ``None`` (P1 only) takes costs from
        the graph (:func:`p1_instance`).
    problem
        ``P1`` (remat on one core), ``P2`` (remat + offload to ``offload``, the
        ``dram`` or ``host`` memory, over the links that reach it) or ``P3`` (every
        core, shared DRAM, every link).
    budget
        P1/P2: the budget of the core's memory, bytes (int) or a fraction of the
        store-all activation peak (float; default 0.8).  P3: every core's SRAM
        capacity as such a fraction or byte count, unless ``sram_budget`` is given.
    sram_budget
        P3: each core's SRAM capacity in bytes (default: the hardware's).
    objective
        ``compute`` (default for P1), ``latency`` (default otherwise), ``energy``
        or ``weighted``.
    core
        P1/P2: the core to use (default: the first).
    runtime_limit_cycles
        With the energy objective: the latency limit (POET's runtime constraint).
    """
    problem = _enum_arg(Problem, problem, "problem")
    default_objective = Objective.COMPUTE if problem is Problem.P1 else Objective.LATENCY
    objective = _enum_arg(Objective, objective or default_objective, "objective")
    if hardware is None:
        if problem is not Problem.P1:
            raise MonetError(f"{problem} needs a hardware description", field="hardware",
                             fix="pass --hw PRESET or a YAML file")
        inst = p1_instance(graph, 0.8 if budget is None else budget, name=name)
        return _replace(inst, objective=objective, runtime_limit_cycles=runtime_limit_cycles, alpha=alpha)
    from monet_ilp.graph.analysis import store_all_peak
    from monet_ilp.hardware.cost import can_run, op_cost

    if any(op.cost is not None for op in graph.ops):  # only node-link ops carry a supplied cost
        raise MonetError("this graph carries its own costs (a node-link graph); the cost model cannot "
                         "cost its ops", field="hardware", fix="build a P1 instance without --hw")
    fpj = lambda pj: round(pj * 1000)  # noqa: E731  (pJ per byte -> integer fJ per byte)
    if problem is Problem.P3:
        chosen = list(hardware.cores)
    else:
        core_id = core or hardware.cores[0].id
        if core_id not in {c.id for c in hardware.cores}:
            raise MonetError(f"unknown core {core_id!r}", field="core",
                             fix=f"use one of: {', '.join(c.id for c in hardware.cores)}")
        chosen = [hardware.core(core_id)]
    memories: list[MemorySpec] = []
    for c in chosen:
        if problem is Problem.P3:
            if sram_budget is not None:
                capacity = int(sram_budget)
            elif budget is not None:
                capacity = budget_bytes_of(graph, budget)
            else:
                capacity = c.sram_bytes
        else:
            capacity = budget_bytes_of(graph, 0.8 if budget is None else budget)
        memories.append(MemorySpec(c.sram, "sram", capacity, fpj(c.sram_read_pj_per_byte),
                                   fpj(c.sram_write_pj_per_byte)))
    shared = []
    if problem is Problem.P2:
        target = {"dram": hardware.dram, "host": hardware.host}.get(offload)
        if target is None:
            raise MonetError(f"the hardware has no {offload!r} memory to offload to", field="offload",
                             fix="use --offload dram or host, with a hardware that has it")
        shared = [target]
    elif problem is Problem.P3:
        shared = [m for m in (hardware.dram, hardware.host) if m is not None]
    for m in shared:
        memories.append(MemorySpec(m.id, str(m.kind), m.capacity_bytes, fpj(m.read_pj_per_byte),
                                   fpj(m.write_pj_per_byte)))
    known = {m.id for m in memories}
    links = [
        link_spec(l.id, [e for e in l.endpoints if e in known], l.bandwidth_bytes_per_cycle, l.pj_per_byte,
                  l.latency_cycles)
        for l in hardware.links
        if sum(e in known for e in l.endpoints) >= 2
    ]
    if problem is Problem.P2 and not links:
        raise MonetError(f"no link joins {chosen[0].sram} and {offload}", field="links",
                         fix="describe a link between the core's SRAM and the offload memory")
    costs: dict[str, dict[str, OpCost]] = {}
    pinned: dict[str, dict[str, OpCost]] = {}
    for op in graph.ops:
        reads_persistent = any(graph.tensor(t).persistent for t in op.inputs)
        for c in chosen:
            if can_run(op, c):
                costs.setdefault(op.id, {})[c.id] = op_cost(op, graph, c, hardware)
                if problem is Problem.P3 and reads_persistent:
                    pinned.setdefault(op.id, {})[c.id] = op_cost(op, graph, c, hardware, pinned=True)
    static_mw = sum(c.static_mw for c in chosen) + sum(m.static_mw for m in shared)
    peak = store_all_peak(graph)
    inst = Instance(
        name=name or f"{graph.name}_{hardware.name}_{problem}",
        problem=problem,
        objective=Objective.LATENCY if objective is Objective.WEIGHTED else objective,
        graph=graph,
        cores=tuple(CoreSpec(c.id, c.sram) for c in chosen),
        memories=tuple(memories),
        links=tuple(links),
        costs=costs,
        pinned_costs=pinned,
        input_home=memories[0].id if problem is not Problem.P3 else (hardware.dram.id if hardware.dram else memories[0].id),
        persistent_home=(hardware.dram.id if problem is Problem.P3 and hardware.dram else None),
        static_fj_per_cycle=round(static_mw * 1e12 / hardware.clock_hz),
        alpha=alpha,
        runtime_limit_cycles=runtime_limit_cycles,
        meta={
            "hardware": hardware.name,
            "hardware_params": dict(hardware.params),
            "clock_hz": hardware.clock_hz,
            "budget": budget,
            "sram_budget": sram_budget,
            "store_all_peak_bytes": peak.activation_bytes,
            "persistent_bytes": peak.persistent_bytes,
            "cost_source": "cost_model",
            "cost_scale": 1,
        },
    )
    if objective is Objective.WEIGHTED:
        inst = with_weighted_references(inst)
    return inst


def with_weighted_references(inst: Instance) -> Instance:
    """The instance with the ``weighted`` objective, normalised by its store-all baseline.

    ``meta.latency_ref_cycles`` and ``meta.energy_ref_pj`` are the latency and the
    energy of the store-all schedule (``heuristics.store_all``; capacities are not
    checked), so that ``α · latency / latency_ref + (1 − α) · energy / energy_ref``
    is 1 for the baseline.
    """
    from monet_ilp.evaluate import evaluate
    from monet_ilp.heuristics.store_all import store_all

    base = _replace(inst, objective=Objective.LATENCY)
    metrics = evaluate(base, store_all(base))
    meta = dict(inst.meta, latency_ref_cycles=max(1, metrics.latency_cycles),
                energy_ref_pj=max(1, metrics.energy.total_pj))
    return _replace(inst, objective=Objective.WEIGHTED, meta=meta)


def _enum_arg(enum, value, field_name):
    try:
        return enum(value)
    except ValueError:
        raise MonetError(f"unknown {field_name} {value!r}", field=field_name,
                         fix=f"use one of: {', '.join(e.value for e in enum)}") from None


def _replace(inst: Instance, **changes) -> Instance:
    import dataclasses

    return dataclasses.replace(inst, **changes)
