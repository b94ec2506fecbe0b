"""Hardware description: cores, memories and links (second input of the pipeline).

These immutable records are what a hardware YAML file or a preset becomes; the cost
model turns them, with a training graph, into the integer costs of an Instance.
Physical quantities keep their units in their names (``_bytes``, ``_pj``,
``_per_cycle``, ``_hz``, ``_mw``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class MemoryKind(StrEnum):
    SRAM = "sram"
    DRAM = "dram"
    HOST = "host"


@dataclass(frozen=True)
class Core:
    """A compute core: a U x L MAC array (weight-stationary), a vector unit and its SRAM.

    The array unrolls output channels over ``simd_units`` (U) and input channels
    (the reduction) over ``lanes`` (L), as in the PE of MONET's Edge TPU.
    ``utilisation`` maps an op type (``Conv``, ``MatMul``, ... or ``default``) to a
    factor in (0, 1] applied on top of the spatial utilisation; ``op_types`` lists
    the op types the core can run (empty: all).
    """

    id: str
    simd_units: int
    lanes: int
    sram_bytes: int
    sram_bandwidth_bytes_per_cycle: float
    sram_read_pj_per_byte: float
    sram_write_pj_per_byte: float
    mac_pj: float
    vector_ops_per_cycle: int
    vector_op_pj: float
    clock_hz: int = 1_000_000_000
    rf_bytes: int = 0
    static_mw: float = 0.0
    utilisation: Mapping[str, float] = field(default_factory=lambda: {"default": 1.0})
    op_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "utilisation", MappingProxyType(dict(self.utilisation)))

    @property
    def macs_per_cycle(self) -> int:
        return self.simd_units * self.lanes

    @property
    def sram(self) -> str:
        """Id of this core's SRAM in :attr:`Hardware.memories`."""
        return f"{self.id}.sram"

    def utilisation_of(self, op_type: str) -> float:
        return self.utilisation.get(op_type, self.utilisation.get("default", 1.0))

    def runs(self, op_type: str) -> bool:
        return not self.op_types or op_type in self.op_types


@dataclass(frozen=True)
class Memory:
    """A memory with a capacity, a bandwidth and an energy per byte read and written."""

    id: str
    kind: MemoryKind
    capacity_bytes: int
    bandwidth_bytes_per_cycle: float
    read_pj_per_byte: float
    write_pj_per_byte: float
    static_mw: float = 0.0


@dataclass(frozen=True)
class Link:
    """A data path between memories; with more than two endpoints it is a shared bus.

    A transfer of ``b`` bytes takes ``latency_cycles + ceil(b / bandwidth)`` cycles
    and ``b * pj_per_byte`` picojoules; a link carries one transfer at a time.
    """

    id: str
    endpoints: tuple[str, ...]
    bandwidth_bytes_per_cycle: float
    pj_per_byte: float
    latency_cycles: int = 0

    def connects(self, a: str, b: str) -> bool:
        return a in self.endpoints and b in self.endpoints and a != b


@dataclass(frozen=True)
class Hardware:
    """An accelerator: cores (each with its SRAM), shared memories and links.

    ``memories`` lists every memory, the cores' SRAMs included (``<core>.sram``);
    ``clock_hz`` is the reference clock in which every cycle count is expressed.
    """

    name: str
    clock_hz: int
    cores: tuple[Core, ...]
    memories: tuple[Memory, ...]
    links: tuple[Link, ...]
    params: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def core(self, core_id: str) -> Core:
        return next(c for c in self.cores if c.id == core_id)

    def memory(self, memory_id: str) -> Memory:
        return next(m for m in self.memories if m.id == memory_id)

    def link(self, link_id: str) -> Link:
        return next(l for l in self.links if l.id == link_id)

    def memories_of_kind(self, kind: MemoryKind) -> tuple[Memory, ...]:
        return tuple(m for m in self.memories if m.kind is kind)

    @property
    def dram(self) -> Memory | None:
        found = self.memories_of_kind(MemoryKind.DRAM)
        return found[0] if found else None

    @property
    def host(self) -> Memory | None:
        found = self.memories_of_kind(MemoryKind.HOST)
        return found[0] if found else None

    def links_between(self, a: str, b: str) -> tuple[Link, ...]:
        return tuple(l for l in self.links if l.connects(a, b))


@dataclass(frozen=True)
class OpCost:
    """Integer cost of one op on one core: cycles, and picojoules split by where they go.

    ``compute_pj`` is MAC-array and vector-unit energy, ``sram_pj`` the core's SRAM
    accesses, ``dram_pj`` the DRAM traffic of persistent tensors streamed by the op.
    """

    cycles: int
    compute_pj: int = 0
    sram_pj: int = 0
    dram_pj: int = 0

    @property
    def energy_pj(self) -> int:
        return self.compute_pj + self.sram_pj + self.dram_pj
