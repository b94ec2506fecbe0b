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
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

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


def _frozen_costs(table: Mapping[str, Mapping[str, OpCost]]) -> Mapping[str, Mapping[str, OpCost]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in table.items()})


_T = TypeVar("_T")


def per_instance(cache: dict[int, tuple[weakref.ref[Instance], _T]], instance: Instance,
                 build: Callable[[Instance], _T]) -> _T:
    """``build(instance)``, once per instance object, remembered in ``cache``.

    Instances hold mappings, so they cannot be hashed: the cache is keyed by identity,
    and an entry goes when its instance does (so an id is never confused with a later
    object's).  The evaluator's, the decoder's and the fast path's tables are kept so.
    """
    key = id(instance)
    found = cache.get(key)
    if found is not None and found[0]() is instance:
        return found[1]
    value = build(instance)
    cache[key] = (weakref.ref(instance), value)
    weakref.finalize(instance, cache.pop, key, None)
    return value


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
    _cores: Mapping[str, CoreSpec] = field(init=False, repr=False, compare=False)
    _memories: Mapping[str, MemorySpec] = field(init=False, repr=False, compare=False)
    _links: Mapping[str, LinkSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "costs", _frozen_costs(self.costs))
        object.__setattr__(self, "pinned_costs", _frozen_costs(self.pinned_costs))
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))
        cores = {c.id: c for c in self.cores}
        memories = {m.id: m for m in self.memories}
        object.__setattr__(self, "_cores", cores)
        object.__setattr__(self, "_memories", memories)
        object.__setattr__(self, "_links", {link.id: link for link in self.links})
        _validate(self, cores, memories)

    # -------------------------------------------------------------- access
    def core(self, core_id: str) -> CoreSpec:
        return self._cores[core_id]

    def memory(self, memory_id: str) -> MemorySpec:
        return self._memories[memory_id]

    def link(self, link_id: str) -> LinkSpec:
        return self._links[link_id]

    def has_core(self, core_id: str) -> bool:
        return core_id in self._cores

    def has_memory(self, memory_id: str) -> bool:
        return memory_id in self._memories

    def has_link(self, link_id: str) -> bool:
        return link_id in self._links

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
        def table(t: Mapping[str, Mapping[str, OpCost]]) -> dict[str, dict[str, list[int]]]:
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
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> Instance:
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

            def table(key: str) -> dict[str, dict[str, OpCost]]:
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
            if source:
                err.with_file(source)
            raise
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
    def load(cls, path: str | Path) -> Instance:
        return cls.from_dict(read_json(path), source=str(path))


def link_spec(link_id: str, endpoints: Iterable[str], bandwidth_bytes_per_cycle: float, pj_per_byte: float,
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


def _validate(inst: Instance, cores: Mapping[str, CoreSpec], memories: Mapping[str, MemorySpec]) -> None:
    def bad(problem: str, field_name: str, fix: str) -> MonetError:
        return MonetError(problem, field=field_name, fix=fix)

    if len(cores) != len(inst.cores) or len(memories) != len(inst.memories):
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
