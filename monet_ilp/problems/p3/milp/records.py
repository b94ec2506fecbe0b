"""The parts of the P3 MILP (``formulations/p3_milp.md``): run, transfer and copy slots and a solution.

A slot is a possible run (P3M.X1, P3M.X2), transfer (P3M.X4) or copy of an item in a memory
(P3M.X5), holding its solver columns; :class:`Solution` is the solver's values, rounded.
Slots are compared by identity (their fields hold solver columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, final

import pulp

if TYPE_CHECKING:
    from monet_ilp.problems.p3.data import P3Route

__all__ = ["CopyKind", "CopySlot", "RunSlot", "Solution", "TransferSlot", "is_on", "value_of"]

# PuLP ships no type information: mypy reads ``pulp.LpVariable`` (a column) and
# ``pulp.LpAffineExpression`` (a linear expression) as untyped; the annotations say which.

#: What made a copy: a graph input (in its home memory), a run, or a transfer.
CopyKind = Literal["input", "run", "transfer"]


@final
@dataclass(eq=False)  # compared by identity: fields hold solver columns
class RunSlot:
    """P3M.X1, P3M.X2: run ``number`` of op ``op``; ``z[(core, pinned)]`` chooses core and variant."""

    index: int
    op: int
    number: int
    start: pulp.LpVariable
    z: dict[tuple[str, bool], pulp.LpVariable]
    cycles: dict[tuple[str, bool], int]
    energy: dict[tuple[str, bool], int]
    memory_of: dict[str, str]
    est: int = 0  # P3M.W1: earliest start when present
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
    def present(self) -> pulp.LpAffineExpression:
        return pulp.lpSum(self.z.values())

    @property
    def duration(self) -> pulp.LpAffineExpression:
        return pulp.lpSum(self.cycles[key] * z for key, z in self.z.items())

    @property
    def end(self) -> pulp.LpAffineExpression:
        return self.start + self.duration

    def on(self, core: str) -> pulp.LpAffineExpression:
        return pulp.lpSum(z for (c, _), z in self.z.items() if c == core)

    def in_memory(self, memory: str) -> pulp.LpAffineExpression:
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


@final
@dataclass(eq=False)  # compared by identity: fields hold solver columns
class TransferSlot:
    """P3M.X4: transfer ``number`` of item ``item`` into ``dst``; ``w[r]`` chooses route ``r``."""

    index: int
    item: int
    dst: str
    number: int
    start: pulp.LpVariable
    w: dict[int, pulp.LpVariable]
    routes: dict[int, P3Route]  # route index -> route
    est: int = 0
    lst: int = 0

    mandatory = False

    @property
    def present(self) -> pulp.LpAffineExpression:
        return pulp.lpSum(self.w.values())

    @property
    def duration(self) -> pulp.LpAffineExpression:
        return pulp.lpSum(self.routes[r].cycles * w for r, w in self.w.items())

    @property
    def end(self) -> pulp.LpAffineExpression:
        return self.start + self.duration

    @property
    def links(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(route.link for route in self.routes.values()))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(route.src for route in self.routes.values()))

    def on_link(self, link: str) -> pulp.LpAffineExpression:
        return pulp.lpSum(w for r, w in self.w.items() if self.routes[r].link == link)

    def from_memory(self, memory: str) -> pulp.LpAffineExpression:
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
    """P3M.X5: a copy of an item (graph input, run copy or transfer copy) and its free time.

    Exactly one of ``home`` (an input's), ``run`` and ``transfer`` is set, as ``kind`` says.
    """

    index: int
    item: int
    kind: CopyKind
    memories: tuple[str, ...]
    free: pulp.LpVariable
    run: RunSlot | None = None
    transfer: TransferSlot | None = None
    home: str | None = None  # the input's memory

    def __post_init__(self) -> None:
        made_by = {"input": self.home, "run": self.run, "transfer": self.transfer}
        if [k for k, v in made_by.items() if v is not None] != [self.kind]:
            raise ValueError(f"a copy of kind {self.kind!r} needs exactly its own origin")

    @property
    def owner(self) -> RunSlot | TransferSlot | None:
        """The run or transfer that makes the copy (None: a graph input's)."""
        return self.run if self.run is not None else self.transfer

    def present_in(self, memory: str) -> pulp.LpAffineExpression | int:
        if self.run is not None:
            return self.run.in_memory(memory)
        if self.transfer is not None:
            return self.transfer.present if memory == self.transfer.dst else 0
        return 1 if memory == self.home else 0

    @property
    def present(self) -> pulp.LpAffineExpression | int:
        owner = self.owner
        return 1 if owner is None else owner.present

    @property
    def alloc(self) -> pulp.LpVariable | int:
        owner = self.owner
        return 0 if owner is None else owner.start

    @property
    def ready(self) -> pulp.LpAffineExpression | int:
        owner = self.owner
        return 0 if owner is None else owner.end

    @property
    def fixed_memory(self) -> bool:
        return len(self.memories) == 1

    @property
    def alloc_low(self) -> int:  # the least alloc, present or not
        owner = self.owner
        return 0 if owner is None else owner.low

    @property
    def alloc_high(self) -> int:
        owner = self.owner
        return 0 if owner is None else owner.lst

    @property
    def ready_high(self) -> int:
        owner = self.owner
        return 0 if owner is None else owner.lft


@dataclass
class Solution:
    """The solver's values, rounded: what runs where, what moves, who reads what."""

    runs: dict[int, tuple[str, bool, int]] = field(default_factory=dict)  # core, pinned, start
    transfers: dict[int, tuple[int, int]] = field(default_factory=dict)  # transfer -> route, start
    frees: dict[int, int] = field(default_factory=dict)  # copy -> free time
    reads: dict[tuple[int, int], int] = field(default_factory=dict)  # (run, item) -> copy
    sources: dict[int, int] = field(default_factory=dict)  # transfer -> copy
    pins: list[tuple[int, str]] = field(default_factory=list)


def value_of(x: pulp.LpVariable | pulp.LpAffineExpression | float) -> float:
    """The solver's value of a column or expression (0 when it has none)."""
    v = pulp.value(x)
    return 0.0 if v is None else float(v)


def is_on(x: pulp.LpVariable | pulp.LpAffineExpression | float) -> bool:
    """Whether a binary is 1 in the solver's values."""
    return value_of(x) > 0.5
