"""The parts of the P3 MILP (``formulations/p3_milp.md``): run, transfer and copy slots and a solution.

A slot is a possible run (X1, X2), transfer (X4) or copy of an item in a memory
(X5), holding its solver columns; :class:`Solution` is the solver's values, rounded.
Slots are compared by identity (their fields hold solver columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulp

__all__ = ["CopySlot", "RunSlot", "Solution", "TransferSlot", "is_on", "value_of"]


@dataclass(eq=False)  # compared by identity: fields hold solver columns
class RunSlot:
    """X1, X2: run ``number`` of op ``op``; ``z[(core, pinned)]`` chooses core and variant."""

    index: int
    op: int
    number: int
    start: Any
    z: dict[tuple[str, bool], Any]
    cycles: dict[tuple[str, bool], int]
    energy: dict[tuple[str, bool], int]
    memory_of: dict[str, str]
    est: int = 0  # W1: earliest start when present
    lst: int = 0  # latest start

    @property
    def mandatory(self) -> bool:
        return self.number == 0

    @property
    def cores(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for c, _ in self.z))

    @property
    def memories(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.memory_of[c] for c in self.cores))

    @property
    def present(self):
        return pulp.lpSum(self.z.values())

    @property
    def duration(self):
        return pulp.lpSum(self.cycles[key] * z for key, z in self.z.items())

    @property
    def end(self):
        return self.start + self.duration

    def on(self, core: str):
        return pulp.lpSum(z for (c, _), z in self.z.items() if c == core)

    def in_memory(self, memory: str):
        return pulp.lpSum(z for (c, _), z in self.z.items() if self.memory_of[c] == memory)

    @property
    def dmin(self) -> int:
        return min(self.cycles.values())

    @property
    def lft(self) -> int:  # latest finish
        return self.lst + max(self.cycles.values())

    @property
    def low(self) -> int:  # the least start, present or not (an absent run starts at 0)
        return self.est if self.mandatory else 0


@dataclass(eq=False)  # compared by identity: fields hold solver columns
class TransferSlot:
    """X4: transfer ``number`` of item ``item`` into ``dst``; ``w[r]`` chooses route ``r``."""

    index: int
    item: int
    dst: str
    number: int
    start: Any
    w: dict[int, Any]
    routes: dict[int, Any]  # route index -> P3Route
    est: int = 0
    lst: int = 0

    mandatory = False

    @property
    def present(self):
        return pulp.lpSum(self.w.values())

    @property
    def duration(self):
        return pulp.lpSum(self.routes[r].cycles * w for r, w in self.w.items())

    @property
    def end(self):
        return self.start + self.duration

    @property
    def links(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(route.link for route in self.routes.values()))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(route.src for route in self.routes.values()))

    def on_link(self, link: str):
        return pulp.lpSum(w for r, w in self.w.items() if self.routes[r].link == link)

    def from_memory(self, memory: str):
        return pulp.lpSum(w for r, w in self.w.items() if self.routes[r].src == memory)

    @property
    def dmin(self) -> int:
        return min(route.cycles for route in self.routes.values())

    @property
    def lft(self) -> int:
        return self.lst + max(route.cycles for route in self.routes.values())

    @property
    def low(self) -> int:
        return 0


@dataclass(eq=False)  # compared by identity: fields hold solver columns
class CopySlot:
    """X5: a copy of an item (graph input, run copy or transfer copy) and its free time."""

    index: int
    item: int
    kind: str  # "input" | "run" | "transfer"
    memories: tuple[str, ...]
    free: Any
    run: RunSlot | None = None
    transfer: TransferSlot | None = None
    home: str | None = None  # the input's memory

    @property
    def owner(self):
        return self.run if self.kind == "run" else self.transfer

    def present_in(self, memory: str):
        if self.kind == "input":
            return 1 if memory == self.home else 0
        if self.kind == "run":
            return self.run.in_memory(memory)
        return self.transfer.present if memory == self.transfer.dst else 0

    @property
    def present(self):
        return 1 if self.kind == "input" else self.owner.present

    @property
    def alloc(self):
        return 0 if self.kind == "input" else self.owner.start

    @property
    def ready(self):
        return 0 if self.kind == "input" else self.owner.end

    @property
    def fixed_memory(self) -> bool:
        return len(self.memories) == 1

    @property
    def alloc_low(self) -> int:  # the least alloc, present or not
        return 0 if self.kind == "input" else self.owner.low

    @property
    def alloc_high(self) -> int:
        return 0 if self.kind == "input" else self.owner.lst

    @property
    def ready_high(self) -> int:
        return 0 if self.kind == "input" else self.owner.lft


@dataclass
class Solution:
    """The solver's values, rounded: what runs where, what moves, who reads what."""

    runs: dict[int, tuple[str, bool, int]] = field(default_factory=dict)  # core, pinned, start
    transfers: dict[int, tuple[int, int]] = field(default_factory=dict)  # transfer -> route, start
    frees: dict[int, int] = field(default_factory=dict)  # copy -> free time
    reads: dict[tuple[int, int], int] = field(default_factory=dict)  # (run, item) -> copy
    sources: dict[int, int] = field(default_factory=dict)  # transfer -> copy
    pins: list[tuple[int, str]] = field(default_factory=list)


def value_of(x) -> float:
    v = pulp.value(x)
    return 0.0 if v is None else float(v)


def is_on(x) -> bool:
    return value_of(x) > 0.5
