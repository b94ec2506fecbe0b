"""Interchangeable cores of a P3 instance (P3M.M15 of ``formulations/p3_milp.md``).

A permutation of the cores that maps every cost, memory, link and pin set onto itself
leaves the problem unchanged; the model breaks the symmetry (the first op's first run
goes to the first core of its orbit) and maps a warm start through it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from monet_ilp.schedule import Free, OpRun, Schedule, Transfer

if TYPE_CHECKING:
    from monet_ilp.instance import LinkSpec
    from monet_ilp.problems.p3.data import P3Data

__all__ = ["Symmetry", "canonical", "core_automorphisms", "first_core_excluded"]


@dataclass(frozen=True)
class Symmetry:
    """A permutation of the cores mapping the instance onto itself, with its memories and links."""

    core: dict[str, str]
    memory: dict[str, str]
    link: dict[str, str]

    def mem(self, memory: str) -> str:
        """The image of a memory (a memory no core owns maps onto itself)."""
        return self.memory.get(memory, memory)

    def apply(self, schedule: Schedule) -> Schedule:
        mem = self.mem
        return Schedule(
            tuple(sorted(OpRun(r.start, r.end, r.op, r.instance, self.core[r.core])
                         for r in schedule.ops)),
            tuple(sorted(Transfer(t.start, t.end, t.tensor, mem(t.src), mem(t.dst),
                                  self.link[t.link]) for t in schedule.transfers)),
            tuple(sorted(Free(f.time, f.tensor, mem(f.memory)) for f in schedule.frees)),
            tuple(sorted((t, mem(m)) for t, m in schedule.pinned)), schedule.meta)


def core_automorphisms(data: P3Data) -> list[Symmetry]:
    """Permutations of the cores under which the instance is the same (identity included).

    Up to 6 cores, each with its own SRAM: costs, SRAMs, links (endpoints and
    parameters) and the memories each tensor may be pinned in must map onto themselves.
    """
    cores = data.cores
    if len(cores) > 6 or len(set(data.memory_of.values())) != len(cores):
        return []
    inst = data.instance
    mem = {m.id: m for m in inst.memories}

    def sig_mem(m: str) -> tuple[int, int, int, str]:
        return (mem[m].capacity_bytes, mem[m].read_fj_per_byte, mem[m].write_fj_per_byte,
                mem[m].kind)

    def sig_link(k: LinkSpec) -> tuple[int, int, int, int]:
        return (k.bandwidth_num, k.bandwidth_den, k.latency_cycles, k.fj_per_byte)

    tables = [(op.cycles, op.energy_pj, op.pinned_cycles, op.pinned_energy_pj) for op in data.ops]
    found = []
    for perm in itertools.permutations(cores):
        g = dict(zip(cores, perm, strict=True))
        mu = {data.memory_of[c]: data.memory_of[g[c]] for c in cores}
        if any(sig_mem(a) != sig_mem(b) for a, b in mu.items()):
            continue
        if any(table.get(c) != table.get(g[c])
               for group in tables for table in group for c in cores):
            continue
        candidate = Symmetry(g, mu, {})
        if any(sorted(map(candidate.mem, p.pin_memories)) != sorted(p.pin_memories)
               for p in data.persistent):
            continue
        links: dict[str, str] = {}
        free = list(inst.links)
        for link in inst.links:
            ends = sorted(map(candidate.mem, link.endpoints))
            match = next((k for k in free if sorted(k.endpoints) == ends
                          and sig_link(k) == sig_link(link)), None)
            if match is None:
                break
            links[link.id] = match.id
            free.remove(match)
        if len(links) == len(inst.links) and candidate.mem(data.input_home) == data.input_home:
            found.append(Symmetry(g, mu, links))
    return found


def first_core_excluded(data: P3Data, symmetries: list[Symmetry]) -> list[str]:
    """The cores the first op's first run may not use when the symmetry is broken (P3M.M15,
    P3C.C17): those some automorphism maps onto an earlier core of the instance."""
    order = {c: k for k, c in enumerate(data.cores)}
    if len(symmetries) <= 1:
        return []
    return [c for c in data.ops[0].cores if any(order[g.core[c]] < order[c] for g in symmetries)]


def canonical(data: P3Data, symmetries: list[Symmetry], schedule: Schedule) -> Schedule:
    """The image of a schedule under the automorphism that puts the first op's first run on
    the first core of its orbit (P3M.M15, P3C.C17), so that it can start a model that
    breaks the symmetry.  The image costs the same: the automorphism maps every cost,
    memory and link onto itself."""
    if len(symmetries) <= 1:
        return schedule
    op = data.ops[0].id
    runs = sorted((r for r in schedule.ops if r.op == op), key=lambda r: (r.start, r.end))
    if not runs:
        return schedule
    order = {c: k for k, c in enumerate(data.cores)}

    def rank(g: Symmetry) -> int:  # the place of the first run's core's image
        image = g.core.get(runs[0].core)
        return 0 if image is None else order.get(image, 0)

    return min(symmetries, key=rank).apply(schedule)
