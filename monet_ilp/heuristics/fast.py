"""The decoder's fast scoring path: metrics of a decoded schedule without building it.

The GA scores its individuals on it, and the P3 descent (``monet_ilp.problems.p3.descent``)
its moves.

The reference evaluator (:func:`monet_ilp.evaluate.evaluate`) checks everything a
schedule from anywhere could get wrong, on schedule objects.  A decoded schedule
can only get one thing wrong: an op that does not fit next to what its SRAM must hold
(the decoder's repair keeps every other rule by construction).  :func:`fast_metrics`
therefore takes the decoder's raw field tuples
(:class:`~monet_ilp.heuristics.decisions.RawSchedule`) and computes, with the
evaluator's rules (``formulations/evaluator.md``), only what the search reads:

* latency (EV.E4: the last run or transfer end), compute cycles, recomputations and
  transfers;
* the energy breakdown (EV.E4: a first run's compute, SRAM and DRAM energy, every later
  run's as recomputation energy, at the pinned cost where the run's persistent inputs
  are all pinned in its memory (EV.E1.5), each transfer's link, read and write energy, static
  energy per cycle of latency);
* each memory's peak and the capacity violations (EV.E2 ``capacity``: one per maximal
  interval over capacity) from the copies the decoder made (EV.E1: each with its
  allocation and free time, ``RawSchedule.freed`` and ``held``), and ``runtime_limit``.

It does not check residency, durations, links, overlaps, frees or hazards: the
decoder's construction guarantees them, and ``tests/heuristics/test_fast.py`` runs both paths on
thousands of random decisions and requires identical metrics.  The reference stays the
witness: every point the GA returns is decoded again into a schedule and evaluated by
it, and a difference from the fast score is reported as a bug
(:func:`monet_ilp.ga.nsga2.run_ga`).
"""

from __future__ import annotations

from collections.abc import Mapping  # at run time: the compiled dataclass (setup.py) reads it
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from monet_ilp.evaluate import EnergyBreakdown, objective_value
from monet_ilp.instance import per_instance, pj_of

if TYPE_CHECKING:
    import weakref

    from monet_ilp.heuristics.decoder import RawSchedule
    from monet_ilp.instance import Instance

__all__ = ["FastMetrics", "fast_metrics"]


@dataclass(frozen=True)
class FastMetrics:
    """What the search reads of a schedule; the same values as the evaluator's :class:`Metrics`."""

    feasible: bool
    latency_cycles: int
    compute_cycles: int
    energy: EnergyBreakdown
    peak_bytes: Mapping[str, int]
    violation_counts: Mapping[str, int]
    recomputations: int
    transfers: int
    objective_value: int | float


class _Tables:
    """Per-instance constants of the fast path (built once per instance object)."""

    def __init__(self, instance: Instance):
        graph = instance.graph
        persistent = {t.id for t in graph.tensors if t.persistent}
        self.bytes = {t.id: t.bytes for t in graph.tensors}
        # (op, core) -> (compute pJ, SRAM pJ, DRAM pJ) of a run there, and of a run whose
        # persistent inputs are all pinned in that core's memory (EV.E1.5).
        self.run_pj = {(op, core): (cost.compute_pj, cost.sram_pj, cost.dram_pj)
                       for op, row in instance.costs.items() for core, cost in row.items()}
        self.pinned_pj = {(op, core): (cost.compute_pj, cost.sram_pj, cost.dram_pj)
                          for op, row in instance.pinned_costs.items() for core, cost in row.items()}
        self.capacity = {m.id: m.capacity_bytes for m in instance.memories}
        self.is_sram = {m.id: m.kind == "sram" for m in instance.memories}
        self.read_fj = {m.id: m.read_fj_per_byte for m in instance.memories}
        self.write_fj = {m.id: m.write_fj_per_byte for m in instance.memories}
        self.links = {link.id: link for link in instance.links}
        self.persistent_home = instance.persistent_home
        self.persistent_bytes = sum(self.bytes[t] for t in persistent)
        # (tensor, src, dst, link) -> (link pJ, read pJ, write pJ)
        self.transfer_pj: dict[tuple[str, str, str, str], tuple[int, int, int]] = {}


_TABLES: dict[int, tuple[weakref.ref[Instance], _Tables]] = {}


def _tables_of(instance: Instance) -> _Tables:
    return per_instance(_TABLES, instance, _Tables)


def fast_metrics(instance: Instance, raw: RawSchedule) -> FastMetrics:
    """The metrics of a decoded schedule, from its field tuples (module docstring)."""
    tb = _tables_of(instance)
    latency = raw.latency
    counts: dict[str, int] = {}

    # Runs: a first computation's energy by part, a recomputation's as recompute energy.
    # The decoder numbers an op's runs in the order it places them; the evaluator ranks
    # them by start (EV.E2), so an op whose first-placed run is not its earliest one
    # moves between the parts.
    compute_cycles = compute_pj = recompute_pj = sram_pj = dram_pj = link_pj = 0
    runs, run_pj, pinned_pj = raw.runs, tb.run_pj, tb.pinned_pj
    at_pinned_cost = set(raw.pinned_runs)  # EV.E1.5, as the decoder applied it
    pj_of_run: list[tuple[int, int, int]] = []  # (compute, SRAM, DRAM) pJ of each run
    rerun: dict[str, list[int]] = {}  # op -> indices of its runs placed after the first
    for i, run in enumerate(runs):
        start, end, op, number, core = run
        compute_cycles += end - start
        c, s, d = (pinned_pj if i in at_pinned_cost else run_pj)[(op, core)]
        pj_of_run.append((c, s, d))
        if number:
            recompute_pj += c + s + d
            rerun.setdefault(op, []).append(i)
        else:
            compute_pj += c
            sram_pj += s
            dram_pj += d
    if rerun:
        placed_first = {run[2]: i for i, run in enumerate(runs) if not run[3] and run[2] in rerun}
        for op, later in rerun.items():
            placed = placed_first[op]
            earliest = min([placed, *later], key=lambda i: (runs[i][0], runs[i][1], runs[i][3]))
            if earliest != placed:
                for i, sign in ((placed, -1), (earliest, 1)):
                    c, s, d = pj_of_run[i]
                    compute_pj += sign * c
                    sram_pj += sign * s
                    dram_pj += sign * d
                    recompute_pj -= sign * (c + s + d)
    recomputations = sum(len(later) for later in rerun.values())

    # Transfers: link, read and write energy.
    transfer_pj = tb.transfer_pj
    is_sram = tb.is_sram
    for tr in raw.transfers:
        key = (tr[2], tr[3], tr[4], tr[5])
        parts = transfer_pj.get(key)
        if parts is None:
            size = tb.bytes[tr[2]]
            parts = transfer_pj[key] = (tb.links[tr[5]].transfer_pj(size), pj_of(size, tb.read_fj[tr[3]]),
                                        pj_of(size, tb.write_fj[tr[4]]))
        link_pj += parts[0]
        if is_sram[tr[3]]:
            sram_pj += parts[1]
        else:
            dram_pj += parts[1]
        if is_sram[tr[4]]:
            sram_pj += parts[2]
        else:
            dram_pj += parts[2]

    deltas = _deltas(tb, raw, latency)
    peaks: dict[str, int] = {}
    for memory, delta in deltas.items():
        peaks[memory] = _sweep(delta, tb.capacity[memory], counts)
    limit = instance.runtime_limit_cycles
    if limit is not None and latency > limit:
        counts["runtime_limit"] = 1
    energy = EnergyBreakdown(compute_pj=compute_pj, recompute_pj=recompute_pj, sram_pj=sram_pj,
                             dram_pj=dram_pj, link_pj=link_pj,
                             static_pj=instance.static_fj_per_cycle * latency // 1000)
    return FastMetrics(
        feasible=not counts, latency_cycles=latency, compute_cycles=compute_cycles, energy=energy,
        peak_bytes=MappingProxyType(peaks), violation_counts=MappingProxyType(counts),
        recomputations=recomputations, transfers=len(raw.transfers),
        objective_value=objective_value(instance, latency, compute_cycles, energy))


def _deltas(tb: _Tables, raw: RawSchedule, latency: int) -> dict[str, dict[int, int]]:
    """EV.E2's byte changes per memory and instant, from the decoder's copies (EV.E1).

    A copy freed after the makespan, or never, is kept until the makespan (EV.E1.4).
    """
    size = tb.bytes
    deltas: dict[str, dict[int, int]] = {m: {} for m in tb.capacity}
    for memory, alloc, free, t in raw.freed:
        if free > latency:
            free = max(latency, alloc)
        if alloc < free:
            d = deltas[memory]
            n = size[t]
            d[alloc] = d.get(alloc, 0) + n
            d[free] = d.get(free, 0) - n
    for memory, alloc, t in raw.held:
        if alloc < latency:
            d = deltas[memory]
            n = size[t]
            d[alloc] = d.get(alloc, 0) + n
            d[latency] = d.get(latency, 0) - n
    home = tb.persistent_home
    if home is not None and latency > 0:
        held = {home: tb.persistent_bytes}  # persistent tensors: pinned, or at home (EV.E1.5)
        for t, memory in raw.pinned.items():
            held[home] -= size[t]
            held[memory] = held.get(memory, 0) + size[t]
        for memory, n in held.items():
            if n:
                d = deltas[memory]
                d[0] = d.get(0, 0) + n
                d[latency] = d.get(latency, 0) - n
    return deltas


def _sweep(delta: dict[int, int], capacity: int, counts: dict[str, int]) -> int:
    """A memory's peak; one ``capacity`` violation per maximal interval over capacity (EV.E2)."""
    total = peak = 0
    over = False
    for when in sorted(delta):
        change = delta[when]
        if not change:
            continue
        total += change
        if total > peak:
            peak = total
        if total > capacity:
            over = True
        elif over:
            counts["capacity"] = counts.get("capacity", 0) + 1
            over = False
    if over:
        counts["capacity"] = counts.get("capacity", 0) + 1
    return peak
