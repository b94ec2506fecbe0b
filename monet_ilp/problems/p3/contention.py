"""BD.B13, the contention relaxation: a latency bound over every schedule, on CP-SAT.

BD.B12 (``latency.py``) packs the work of each SRAM's ops into its cores only in total
(BD.B12.9, B12.10): two ops on the critical path may overlap on one core, and the
optimizer steps that wait for the last backward ops may run beside them for free.  This
model gives each op's earliest-ending run ``R_v`` an interval on one core, with its
pinned or unpinned length, and keeps the intervals of each core apart in time, next to
BD.B12's pins, capacities and crossings.  A run of an op in another SRAM than ``R_v``'s
(a duplicate, which spares a reader there the crossing) has an interval on a core of
that SRAM too, anywhere before the makespan.  Its optimum is a makespan that every
schedule's latency is at least; CP-SAT's bound on it holds at any time, and is above
the floor it is given only once the search has closed the gap (the model has no bound
of its own in between).  Rows and the argument: ``formulations/bounds.md`` (BD.B13).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from monet_ilp.engines.cpsat import configured_solver

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.problems.p3.data import P3Data

__all__ = ["CONTENTION_WORKERS", "ContentionBound", "contention_bound"]

#: CP-SAT's workers when the caller names none: the proof comes from the search with the
#: LP (``default_lp``) finishing, and on gpt2-tiny (2 blocks) on hetero_quad it did in
#: 17-30 s with two workers on a 2-core machine and not in 30 s with one, three or four.
CONTENTION_WORKERS = 2


@dataclass(frozen=True)
class ContentionBound:
    """BD.B13's outcome: ``value`` (a lower bound on every schedule's latency, never below
    the floor given; ``None`` when CP-SAT found the model infeasible or had no time),
    ``method`` (``"optimal"`` when CP-SAT proved the model's optimum, ``"bound"`` for its
    bound at the time limit), the model's best makespan found (``relaxed``, an upper
    bound on its optimum), the seconds and the model's variables."""

    value: int | None
    method: str
    relaxed: int | None
    seconds: float
    variables: int


def contention_bound(data: P3Data, deadline: Deadline, *, floor: int = 0, workers: int | None = None,
                     seed: int = 0) -> ContentionBound:
    """BD.B13 by ``deadline``: CP-SAT on the contention relaxation, its makespan at least
    ``floor`` (a bound over every schedule already known, e.g. BD.B12's)."""
    began = time.perf_counter()
    model = _model(data, floor)
    variables = len(model.proto.variables)
    limit = deadline.solver_limit()
    if deadline.passed():
        return ContentionBound(None, "none", None, round(time.perf_counter() - began, 3), variables)
    solver = configured_solver(time_limit=limit, workers=workers or CONTENTION_WORKERS, seed=seed)
    with deadline.on_cancel(solver.stop_search):
        status = solver.solve(model)
    seconds = round(time.perf_counter() - began, 3)
    if status == cp_model.INFEASIBLE or status == cp_model.MODEL_INVALID:
        # A relaxation with no solution would mean no schedule; BD.B4 says so on its own
        # terms, and the horizon here is only generous, so nothing is claimed.
        return ContentionBound(None, "none", None, seconds, variables)
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    bound = max(floor, int(solver.best_objective_bound))
    return ContentionBound(bound, "optimal" if status == cp_model.OPTIMAL else "bound",
                           int(solver.objective_value) if found else None, seconds, variables)


def _model(data: P3Data, floor: int) -> cp_model.CpModel:
    """BD.B13's rows (cited below) for ``data``."""
    m = cp_model.CpModel()
    horizon = _horizon(data)
    makespan = m.new_int_var(min(floor, horizon), horizon, "L")
    srams = list(dict.fromkeys(data.memory_of[c] for c in data.cores))
    pin: dict[tuple[int, str], cp_model.IntVar] = {}
    for tensor in data.persistent:
        for mem in tensor.pin_memories:
            pin[tensor.index, mem] = m.new_bool_var(f"pin_{tensor.index}_{mem}")
        if len(tensor.pin_memories) > 1:
            m.add_at_most_one(pin[tensor.index, mem] for mem in tensor.pin_memories)  # BD.B13.1
    start: list[cp_model.IntVar] = []
    end: list[cp_model.IntVar] = []
    on: list[dict[str, cp_model.IntVar]] = []  # R_v on a core of the SRAM
    duplicate: dict[tuple[int, str], cp_model.IntVar] = {}  # another run of v on the SRAM
    intervals: dict[str, list[cp_model.IntervalVar]] = {c: [] for c in data.cores}
    for op in data.ops:
        v = op.index
        s = m.new_int_var(0, horizon, f"s_{v}")
        e = m.new_int_var(0, horizon, f"e_{v}")
        start.append(s)
        end.append(e)
        ways: list[cp_model.IntVar] = []
        per_sram: dict[str, list[cp_model.IntVar]] = {}
        for c, cycles in op.cycles.items():
            mem = data.memory_of[c]
            lengths: list[tuple[int, list[cp_model.IntVar]]] = [(cycles, [])]
            pinned = op.pinned_cycles.get(c)
            if (pinned is not None and pinned < cycles and op.persistent_reads
                    and all((p, mem) in pin for p in op.persistent_reads)):
                lengths.append((pinned, [pin[p, mem] for p in op.persistent_reads]))
            for length, needs in lengths:
                way = m.new_bool_var(f"r_{v}_{c}_{length}")
                for needed in needs:  # BD.B13.2 the pinned length needs every read pinned there
                    m.add_implication(way, needed)
                intervals[c].append(m.new_optional_interval_var(s, length, e, way, f"R_{v}_{c}"))
                ways.append(way)
                per_sram.setdefault(mem, []).append(way)
        m.add_exactly_one(ways)  # BD.B13.2 R_v: one core, one length
        on.append({})
        for mem, here in per_sram.items():
            flag = m.new_bool_var(f"on_{v}_{mem}")
            m.add(sum(here) == flag)
            on[v][mem] = flag
            copies = []
            for c in (c for c in op.cycles if data.memory_of[c] == mem):  # BD.B13.3 a duplicate
                length = min(op.cycles[c], op.pinned_cycles.get(c, op.cycles[c]))
                lit = m.new_bool_var(f"d_{v}_{c}")
                at = m.new_int_var(0, horizon, f"ds_{v}_{c}")
                intervals[c].append(m.new_optional_interval_var(at, length, at + length, lit, f"D_{v}_{c}"))
                m.add(at + length <= makespan).only_enforce_if(lit)
                copies.append(lit)
            other = m.new_bool_var(f"dup_{v}_{mem}")
            m.add(sum(copies) == other)
            m.add_implication(other, ~flag)
            duplicate[v, mem] = other
        m.add(makespan >= e)  # BD.B13.7
    for op in data.ops:  # BD.B13.4 a pinned tensor's readers run in its SRAM, every run
        v = op.index
        for p in op.persistent_reads:
            for home in data.persistent[p].pin_memories:
                if home not in on[v]:
                    m.add(pin[p, home] == 0)
                    continue
                m.add_implication(pin[p, home], on[v][home])
                for mem in on[v]:
                    if mem != home:
                        m.add_implication(pin[p, home], ~duplicate[v, mem])
    footprints = [sum(data.items[i].bytes for i in set(op.reads) | set(op.writes)) for op in data.ops]
    for mem in srams:  # BD.B13.5 the pins beside each run's inputs and outputs
        held = sum(data.persistent[p].bytes * lit for (p, where), lit in pin.items() if where == mem)
        m.add(held <= data.capacity[mem])
        for op, footprint in zip(data.ops, footprints, strict=True):
            if footprint and mem in on[op.index]:
                m.add(held + footprint <= data.capacity[mem]).only_enforce_if(on[op.index][mem])
                m.add(held + footprint <= data.capacity[mem]).only_enforce_if(duplicate[op.index, mem])
    for core_intervals in intervals.values():  # BD.B13.6 one run at a time on a core
        m.add_no_overlap(core_intervals)
    for op in data.ops:  # BD.B13.8 R_v after its producers' earliest runs, and the crossings
        v = op.index
        for i in op.reads:
            item = data.items[i]
            w = item.producer
            if w is None:
                m.add(start[v] >= data.input_arrival_cycles(i, v))
                continue
            m.add(start[v] >= end[w])
            for mem, reads_here in on[v].items():
                crossing = min((r.cycles for r in item.routes if r.dst == mem), default=0)
                if not crossing:
                    continue
                # No run of w in that SRAM (neither R_w nor a duplicate): the item crossed.
                crossed = [reads_here] + ([~on[w][mem], ~duplicate[w, mem]] if mem in on[w] else [])
                m.add(start[v] >= end[w] + crossing).only_enforce_if(crossed)
        for w in op.after:
            m.add(start[v] >= end[w])
    m.minimize(makespan)
    return m


def _horizon(data: P3Data) -> int:
    """A makespan every optimum of the relaxation stays below: every op at its slowest,
    one after the other, each read after the slowest crossing of its item."""
    total = 0
    for op in data.ops:
        total += max(op.cycles.values(), default=0)
        for i in op.reads:
            total += max((r.cycles for r in data.items[i].routes), default=0)
    return max(1, total)
