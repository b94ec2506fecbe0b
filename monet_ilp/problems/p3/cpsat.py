"""P3 on CP-SAT: joint layer-to-core allocation, rematerialisation, offload and pinning.

The production backend of P3 (``formulations/p3_problem.md``, class P3.K3); the
mathematics, with the labels cited below (V, C, O), is ``formulations/p3_cpsat.md``.
Every run is an alternative of optional intervals, one per (core, cost variant);
every copy of an item in a memory is a residence interval in that memory's
cumulative; transfers are alternatives of optional intervals, one per (route,
source copy), on the links' no-overlaps; reads choose the copy they use.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ortools.sat.python import cp_model

from monet_ilp.engines.cpsat import Hints, integer_bound, run_cpsat
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.instance import Instance, Objective
from monet_ilp.problems.p3.bounds import backend_floor
from monet_ilp.problems.p3.data import (
    DEFAULT_MAX_COMPUTES,
    DEFAULT_MAX_TRANSFERS,
    P3Data,
    P3Route,
    RunValue,
    TransferValue,
    assemble_p3_schedule,
    baseline_schedules,
    p3_data,
    weighted_coefficients,
    weighted_scale,
)
from monet_ilp.problems.p3.milp.symmetry import (
    Symmetry,
    canonical,
    core_automorphisms,
    first_core_excluded,
)
from monet_ilp.results import BackendResult, Status, hint_or_unknown
from monet_ilp.schedule import Schedule, Sequence

if TYPE_CHECKING:
    from monet_ilp.schedule import OpRun, Transfer

__all__ = ["DEFAULT_PARAMS", "SMALL_OPS", "SMALL_PARAMS", "P3CpModel", "solve_p3_cpsat"]

#: CP-SAT's objective lower-bound search joins the portfolio (as for P1): on mlp depth 8
#: it raised the 45 s bound from 367 464 to 384 660 cycles on 2 cores, and on hetero_quad
#: it found 173 175 instead of 229 067 with a bound of 141 257 instead of 126 635.
DEFAULT_PARAMS: dict[str, Any] = {"extra_subsolvers": ["objective_lb_search"]}
#: Up to this many ops (the graphs ``auto`` leaves to CP-SAT alone, P3A.1) the full-problem
#: worker is CP-SAT's search without LP instead (:data:`SMALL_PARAMS`, ``p3_cpsat.md``
#: "Search"): there optima are proven by closing the search under the incumbent, which the
#: lower-bound search does not use.  mlp depth 4 on hetero_quad, latency, 2 workers, 60 s:
#: proven in 16-56 s in 6 runs of 6, where the lower-bound search proved 0 of 6
#: (bounds 89,434-90,618 against 91,255).  From mlp depth 8 (47 ops) on, the lower-bound
#: search's bound is the higher one (edge_tpu 2x1, 45 s: 388,988 against 367,465).
SMALL_OPS = 40
SMALL_PARAMS: dict[str, Any] = {"extra_subsolvers": ["no_lp"]}

#: A literal of the model, or the constant 1 where the model fixes it (a first run, a
#: run with one way to run, a mandatory copy).
Lit = cp_model.IntVar | Literal[1]
#: A linear expression over the model's variables (an int where it is a constant).
Expr = cp_model.LinearExpr | cp_model.IntVar | int

_OPTIONS = ("max_computes", "max_transfers", "colocate", "allow_recompute", "allow_offload",
            "allow_pin", "use_baseline_hint", "log", "seed", "params")


@dataclass
class _Alt:
    """P3C.V1: one way to run a run: on ``core``, with the pinned cost or not."""

    core: str
    pinned: bool
    cycles: int
    energy_pj: int
    lit: Lit
    interval: cp_model.IntervalVar


@dataclass
class _Run:
    """P3C.V1: run ``number`` of op ``op`` (0 = first computation, mandatory)."""

    op: int
    number: int
    start: cp_model.IntVar
    end: Expr
    present: Lit
    alts: list[_Alt]
    on_core: dict[str, Lit] = field(default_factory=dict)  # core -> literal (or 1)


@dataclass
class _Move:
    """P3C.V3: one way to make a transfer: a route and the copy it reads in the route's source."""

    route: P3Route
    source: int  # index of the source copy in copies[(item, route.src)]
    lit: cp_model.IntVar
    interval: cp_model.IntervalVar


@dataclass
class _Transfer:
    """P3C.V3: transfer ``number`` of an item into memory ``dst``."""

    item: int
    dst: str
    number: int
    start: cp_model.IntVar
    end: Expr  # the start until the moves are made
    present: cp_model.IntVar
    moves: list[_Move]
    sources: list[tuple[_Move, list[tuple[int, cp_model.IntVar]]]] = field(default_factory=list)


@dataclass
class _Copy:
    """P3C.V2: a copy of an item in a memory: made by a run, a transfer, or there at time 0."""

    item: int
    memory: str
    kind: str  # "run" | "transfer" | "input"
    present: Lit
    alloc: Expr
    ready: Expr
    free: cp_model.IntVar
    interval: cp_model.IntervalVar
    run: tuple[int, int, str] | None = None  # a run's copy: (op, run number, core)
    transfer: int | None = None  # a transfer's copy: the transfer's index


def _is_true(lit: Lit | int) -> bool:
    return isinstance(lit, int) and lit == 1


def _only_if(constraint: cp_model.Constraint, lit: Lit) -> None:
    if not _is_true(lit):
        constraint.only_enforce_if(lit)


class P3CpModel:
    """The P3 interval model of ``formulations/p3_cpsat.md`` for one :class:`P3Data`."""

    def __init__(self, data: P3Data, *, deadline: Deadline | None = None):
        self.data = data
        self.deadline = deadline
        self._phase = "variables"
        self.model = cp_model.CpModel()
        self.horizon = data.horizon()
        self.makespan = self.model.new_int_var(0, self.horizon, "makespan")
        self.runs: list[list[_Run]] = []
        self.transfers: list[_Transfer] = []
        self.copies: dict[tuple[int, str], list[_Copy]] = {}
        self.reads: dict[tuple[int, int, str, int], list[tuple[int, cp_model.IntVar]]] = {}
        self.pins: dict[tuple[int, str], cp_model.IntVar] = {}
        self.pin_intervals: list[tuple[int, str, cp_model.IntervalVar]] = []
        self.static: cp_model.IntVar | None = None
        self.energy: Expr | None = None
        self.symmetries: list[Symmetry] = []
        steps = [("run variables (V1)", self._run_variables),
                 ("pin variables (V4)", self._pin_variables),
                 ("copy variables (V2, V3)", self._copy_variables),
                 ("core rows (C1-C4)", self._core_constraints),
                 ("read rows (C5, C6)", self._read_constraints),
                 ("copy rows (C7, C8)", self._copy_constraints),
                 ("transfer rows (C9, C10)", self._transfer_constraints),
                 ("memory rows (C11)", self._memory_constraints),
                 ("makespan rows (C12, C13)", self._makespan_constraints)]
        if data.colocate == "layer":
            steps.append(("colocation rows (C14)", self._colocate))
        steps.append(("symmetry rows (C17)", self._symmetry_constraints))
        steps.append(("objective (O1-O3)", self._objective))
        for phase, step in steps:
            self._phase = phase
            self._check()
            step()

    def _check(self, done: int = 0, total: int = 0) -> None:
        """Stop building (``OutOfTime``) once the deadline has passed; report progress."""
        if self.deadline is not None:
            self.deadline.check("building the P3 CP-SAT model",
                                f"{self._phase} {done:,} of {total:,}" if total else self._phase)

    # ------------------------------------------------------------ variables
    def _run_variables(self) -> None:
        """P3C.V1: a start, a presence and one optional interval per (core, variant) per run."""
        m, H = self.model, self.horizon
        for op in self.data.ops:
            self._check(op.index, len(self.data.ops))
            runs = []
            for k in range(op.max_runs):
                start = m.new_int_var(0, H, f"s[{op.index},{k}]")
                present: Lit = 1 if k == 0 else m.new_bool_var(f"p[{op.index},{k}]")
                variants = [(c, False, op.cycles[c], op.energy_pj[c]) for c in op.cores]
                variants += [(c, True, op.pinned_cycles[c], op.pinned_energy_pj[c])
                             for c in op.pinned_cycles]
                alts = []
                for c, pinned, cycles, energy in variants:
                    lit: Lit
                    if len(variants) == 1 and k == 0:
                        lit = 1
                        interval = m.new_fixed_size_interval_var(start, cycles, f"run[{op.index},{k},{c}]")
                    else:
                        lit = m.new_bool_var(f"a[{op.index},{k},{c},{int(pinned)}]")
                        interval = m.new_optional_fixed_size_interval_var(
                            start, cycles, lit, f"run[{op.index},{k},{c},{int(pinned)}]")
                    alts.append(_Alt(c, pinned, cycles, energy, lit, interval))
                if not (len(alts) == 1 and k == 0):
                    lits = [a.lit for a in alts]
                    if k == 0:
                        m.add_exactly_one(lits)
                    else:
                        m.add(sum(lits) == present)
                        m.add(start == 0).only_enforce_if(~present)
                end = start + sum(a.cycles * a.lit for a in alts)
                run = _Run(op.index, k, start, end, present, alts)
                for c in op.cores:
                    mine = [a.lit for a in alts if a.core == c]
                    if len(mine) == 1:
                        run.on_core[c] = mine[0]
                    else:
                        on = m.new_bool_var(f"on[{op.index},{k},{c}]")
                        m.add(sum(mine) == on)
                        run.on_core[c] = on
                runs.append(run)
            self.runs.append(runs)

    def _pin_variables(self) -> None:
        """P3C.V4: pin each persistent tensor in at most one SRAM (P3.K4)."""
        m, data = self.model, self.data
        if data.persistent_home is None:
            return
        for p in data.persistent:
            lits = []
            for mem in p.pin_memories:
                lit = m.new_bool_var(f"pin[{p.index},{mem}]")
                self.pins[(p.index, mem)] = lit
                lits.append(lit)
            if len(lits) > 1:
                m.add_at_most_one(lits)

    def _copy_variables(self) -> None:
        """P3C.V2 copies (runs, the input copy, transfers) and P3C.V3 transfers with their moves."""
        m, H, data = self.model, self.horizon, self.data
        for item in data.items:
            self._check(item.index, len(data.items))
            i = item.index
            for mem in data.memories:
                copies = []
                if item.producer is None and mem == data.input_home:
                    copies.append(self._new_copy(i, mem, None, None, 1, 0, 0))
                if item.producer is not None:
                    for run in self.runs[item.producer]:
                        for c, on in run.on_core.items():
                            if data.memory_of[c] == mem:
                                copies.append(self._new_copy(i, mem, (run.op, run.number, c), None, on,
                                                             run.start, run.end))
                self.copies[(i, mem)] = copies
        # Transfers are made after every memory has its run and input copies, so that
        # a transfer may read a copy made by another transfer (the lists grow below).
        for item in data.items:
            self._check(item.index, len(data.items))
            i = item.index
            for mem in data.memories:
                routes = [r for r in data.routes_into(i, mem) if r.cycles > 0]
                for j in range(data.max_transfers if routes else 0):
                    q = m.new_bool_var(f"q[{i},{mem},{j}]")
                    start = m.new_int_var(0, H, f"x[{i},{mem},{j}]")
                    m.add(start == 0).only_enforce_if(~q)
                    self.transfers.append(_Transfer(i, mem, j, start, start, q, []))
        for t, x in enumerate(self.transfers):
            ends: list[Expr] = []
            for route in data.routes_into(x.item, x.dst):
                if route.cycles <= 0:
                    continue
                z = m.new_bool_var(f"z[{t},{route.link},{route.src}]")
                interval = m.new_optional_fixed_size_interval_var(x.start, route.cycles, z,
                                                                   f"move[{t},{route.link},{route.src}]")
                x.moves.append(_Move(route, -1, z, interval))
                ends.append(route.cycles * z)
            m.add(sum(mv.lit for mv in x.moves) == x.present)
            x.end = x.start + sum(ends)
            self.copies[(x.item, x.dst)].append(
                self._new_copy(x.item, x.dst, None, t, x.present, x.start, x.end))

    def _new_copy(self, i: int, mem: str, run: tuple[int, int, str] | None, transfer: int | None,
                  present: Lit, alloc: Expr, ready: Expr) -> _Copy:
        """The copy of item ``i`` in ``mem`` made by ``run``, ``transfer``, or neither (an input)."""
        m, H = self.model, self.horizon
        kind = "run" if run is not None else "transfer" if transfer is not None else "input"
        tag = f"{i},{mem},{kind},{run if run is not None else transfer}"
        free = m.new_int_var(0, H, f"f[{tag}]")
        if _is_true(present):
            size = m.new_int_var(0, H, f"len[{tag}]")
            interval = m.new_interval_var(alloc, size, free, f"res[{tag}]")
        else:
            size = m.new_int_var(0, H, f"len[{tag}]")
            interval = m.new_optional_interval_var(alloc, size, free, present, f"res[{tag}]")
            m.add(free == 0).only_enforce_if(~present)
        return _Copy(i, mem, kind, present, alloc, ready, free, interval, run, transfer)

    # ---------------------------------------------------------- constraints
    def _core_constraints(self) -> None:
        """P3C.C1 one run per core at a time; P3C.C2 recomputations after the first; P3C.C3 gradients; P3C.C4 updates."""
        m, data = self.model, self.data
        per_core: dict[str, list[Any]] = {c: [] for c in data.cores}
        for runs in self.runs:
            for run in runs:
                for a in run.alts:
                    per_core[a.core].append(a.interval)
        for intervals in per_core.values():  # P3C.C1
            if len(intervals) > 1:
                m.add_no_overlap(intervals)
        for runs in self.runs:  # P3C.C2
            for k in range(1, len(runs)):
                if k >= 2:
                    m.add_implication(runs[k].present, runs[k - 1].present)
                m.add(runs[k].start >= runs[k - 1].end).only_enforce_if(runs[k].present)
        for op in data.ops:  # P3C.C3: a weight gradient is read after its producer's first run
            for u in op.after:
                for run in self.runs[op.index]:
                    _only_if(m.add(run.start >= self.runs[u][0].end), run.present)
        readers: dict[int, list[int]] = {}
        for op in data.ops:
            for p in op.persistent_reads:
                readers.setdefault(p, []).append(op.index)
        for op in data.ops:  # P3C.C4: in-place updates after every reader (EV.E2 update_hazard)
            if not op.updates:
                continue
            update_start = self.runs[op.index][0].start
            for v in sorted({v for p in op.updates for v in readers.get(p, ()) if v != op.index}):
                for run in self.runs[v]:
                    _only_if(m.add(run.end <= update_start), run.present)

    def _read_constraints(self) -> None:
        """P3C.C5 item reads from a copy in the core's memory; P3C.C6 persistent reads and pins."""
        m, data = self.model, self.data
        for op in data.ops:
            self._check(op.index, len(self.data.ops))
            for run in self.runs[op.index]:
                for c, on in run.on_core.items():
                    mem = data.memory_of[c]
                    for i in op.reads:  # P3C.C5
                        choice = []
                        for n, copy in enumerate(self.copies[(i, mem)]):
                            y = m.new_bool_var(f"y[{op.index},{run.number},{c},{i},{n}]")
                            if not _is_true(copy.present):
                                m.add_implication(y, copy.present)
                            m.add(copy.ready <= run.start).only_enforce_if(y)
                            m.add(copy.free >= run.end).only_enforce_if(y)
                            choice.append((n, y))
                        if not choice:  # no copy can reach this memory: not on this core
                            m.add_bool_or([] if _is_true(on) else [~on])
                            continue
                        if _is_true(on):
                            m.add_exactly_one(y for _, y in choice)
                        else:
                            m.add(sum(y for _, y in choice) == on)
                        self.reads[(op.index, run.number, c, i)] = choice
                for a in run.alts:  # P3C.C6: the pinned variant iff all its persistent reads are pinned
                    mem = data.memory_of[a.core]
                    if not op.persistent_reads or data.persistent_home is None:
                        continue
                    here = [self.pins.get((p, mem)) for p in op.persistent_reads]
                    pinned_here = [lit for lit in here if lit is not None]
                    if a.pinned:  # needs every read pinned here (each has a pin literal here)
                        for lit in pinned_here:
                            m.add_implication(a.lit, lit)
                    elif len(pinned_here) == len(here):
                        clause = [~lit for lit in pinned_here]
                        m.add_bool_or(clause if _is_true(a.lit) else clause + [~a.lit])
                    for p in op.persistent_reads:  # read from DRAM or from this SRAM only
                        for (q, other), lit in self.pins.items():
                            if q == p and other != mem:
                                if _is_true(a.lit):
                                    m.add(lit == 0)
                                else:
                                    m.add_implication(a.lit, ~lit)

    def _copy_constraints(self) -> None:
        """P3C.C7 a copy lives from ready to at most the makespan; P3C.C8 one copy of an item per memory."""
        m, data = self.model, self.data
        for copies in self.copies.values():
            for copy in copies:
                _only_if(m.add(copy.free >= copy.ready), copy.present)
                if copy.run is not None and data.ops[copy.run[0]].cycles[copy.run[2]] == 0:
                    _only_if(m.add(copy.free >= copy.alloc + 1), copy.present)
                m.add(copy.free <= self.makespan)
            if len(copies) > 1:
                m.add_no_overlap([c.interval for c in copies])

    def _transfer_constraints(self) -> None:
        """P3C.C9 a transfer reads a copy in its source, ready at its start and kept to its end; P3C.C10 links."""
        m = self.model
        per_link: dict[str, list[Any]] = {}
        for t, x in enumerate(self.transfers):
            moves = []
            for mv in x.moves:
                sources = []
                for n, copy in enumerate(self.copies[(x.item, mv.route.src)]):
                    if copy.transfer == t:
                        continue
                    sigma = m.new_bool_var(f"src[{t},{mv.route.link},{mv.route.src},{n}]")
                    if not _is_true(copy.present):
                        m.add_implication(sigma, copy.present)
                    m.add(copy.ready <= x.start).only_enforce_if(sigma)
                    m.add(copy.free >= x.start + mv.route.cycles).only_enforce_if(sigma)
                    sources.append((n, sigma))
                m.add(sum(s for _, s in sources) == mv.lit)
                moves.append((mv, sources))
                per_link.setdefault(mv.route.link, []).append(mv.interval)
            x.sources = moves
            if x.number > 0:  # symmetry: transfers into one memory in order
                prev = next(p for p in self.transfers if p.item == x.item and p.dst == x.dst
                            and p.number == x.number - 1)
                m.add_implication(x.present, prev.present)
                m.add(x.start >= prev.end).only_enforce_if(x.present)
        for intervals in per_link.values():  # P3C.C10
            if len(intervals) > 1:
                m.add_no_overlap(intervals)

    def _memory_constraints(self) -> None:
        """P3C.C11: the capacity of every memory, copies and persistent tensors (EV.E1.5)."""
        m, data = self.model, self.data
        for mem in data.memories:
            intervals, demands, total = [], [], 0
            for (i, where), copies in self.copies.items():
                if where != mem:
                    continue
                for copy in copies:
                    intervals.append(copy.interval)
                    demands.append(data.items[i].bytes)
                    total += data.items[i].bytes
            fixed = 0
            if mem == data.persistent_home:
                for tensor in data.persistent:
                    lits = [lit for (q, _), lit in self.pins.items() if q == tensor.index]
                    if not lits:
                        fixed += tensor.bytes
                        continue
                    home = m.new_bool_var(f"home[{tensor.index}]")
                    m.add(sum(lits) + home == 1)
                    intervals.append(m.new_optional_interval_var(0, self.makespan, self.makespan, home,
                                                                 f"persist[{tensor.index}]"))
                    demands.append(tensor.bytes)
                    total += tensor.bytes
            else:
                for (p, where), lit in self.pins.items():
                    if where == mem:
                        intervals.append(m.new_optional_interval_var(0, self.makespan, self.makespan, lit,
                                                                     f"pinned[{p},{mem}]"))
                        demands.append(data.persistent[p].bytes)
                        total += data.persistent[p].bytes
            capacity = data.capacity[mem] - fixed
            if capacity < 0:
                m.add_bool_or([])  # the persistent tensors alone do not fit
            elif total > capacity:
                m.add_cumulative(intervals, demands, capacity)
        self._pin_knapsacks()

    def _pin_knapsacks(self) -> None:
        """P3C.C16 (redundant): pinned tensors and a run's inputs and outputs share the SRAM.

        While the first run of ``v`` on ``c`` runs, ``M(c)`` holds every tensor pinned
        there and ``v``'s inputs and outputs; a linear row per (op, core) shows the LP
        relaxation the capacity that the cumulative hides from it.
        """
        m, data = self.model, self.data
        pinned_in: dict[str, list[tuple[int, cp_model.IntVar]]] = {}
        for (p, mem), lit in self.pins.items():
            pinned_in.setdefault(mem, []).append((data.persistent[p].bytes, lit))
        for mem, terms in pinned_in.items():
            pinned = sum(b * lit for b, lit in terms)
            if sum(b for b, _ in terms) > data.capacity[mem]:
                m.add(pinned <= data.capacity[mem])
            for op in data.ops:
                need = sum(data.items[i].bytes for i in op.reads) + sum(data.items[i].bytes for i in op.writes)
                for c, on in self.runs[op.index][0].on_core.items():
                    if data.memory_of[c] != mem or need + sum(b for b, _ in terms) <= data.capacity[mem]:
                        continue
                    if _is_true(on):
                        m.add(pinned + need <= data.capacity[mem])
                    else:
                        m.add(pinned + need * on <= data.capacity[mem])

    def _symmetry_constraints(self) -> None:
        """P3C.C17: interchangeable cores (P3M.M15 of ``p3_milp.md``): the first op's first
        run goes to the first core of its orbit.  Hints are mapped there (:meth:`add_hint`)."""
        self.symmetries = core_automorphisms(self.data)
        first = self.runs[0][0]
        for c in first_core_excluded(self.data, self.symmetries):
            lit = first.on_core.get(c)
            if lit is not None and not isinstance(lit, int):
                self.model.add(lit == 0)

    def _makespan_constraints(self) -> None:
        """P3C.C12 the makespan covers every run and transfer (with redundant load bounds); P3C.C13 the runtime limit."""
        m, data = self.model, self.data
        for runs in self.runs:
            for run in runs:
                _only_if(m.add(self.makespan >= run.end), run.present)
        for x in self.transfers:
            m.add(self.makespan >= x.end).only_enforce_if(x.present)
        for c in data.cores:
            load = [a.cycles * a.lit for runs in self.runs for run in runs for a in run.alts if a.core == c]
            if load:
                m.add(self.makespan >= sum(load))
        m.add(self.makespan >= data.critical_path_cycles())
        for op in data.ops:  # P3C.C15 (redundant): every run starts after what it reads first exists
            self._check(op.index, len(self.data.ops))
            for i in op.reads:
                item = data.items[i]
                for run in self.runs[op.index]:
                    if item.producer is not None:
                        _only_if(m.add(run.start >= self.runs[item.producer][0].end), run.present)
                    else:
                        _only_if(m.add(run.start >= data.input_arrival_cycles(i, op.index)), run.present)
        cheapest = sum(min(list(op.cycles.values()) + list(op.pinned_cycles.values())) for op in data.ops)
        m.add(len(data.cores) * self.makespan >= cheapest)
        for link in {mv.route.link for x in self.transfers for mv in x.moves}:
            busy = [mv.route.cycles * mv.lit for x in self.transfers for mv in x.moves
                    if mv.route.link == link]
            m.add(self.makespan >= sum(busy))
        if data.runtime_limit_cycles is not None:  # P3C.C13
            m.add(self.makespan <= data.runtime_limit_cycles)

    def _colocate(self) -> None:
        """P3C.C14 (``colocate="layer"``): a layer's first computations share one core."""
        m, data = self.model, self.data
        layers: dict[str, list[int]] = {}
        for op in data.ops:
            if op.layer:
                layers.setdefault(op.layer, []).append(op.index)
        for members in layers.values():
            lead = self.runs[members[0]][0]
            for v in members[1:]:
                run = self.runs[v][0]
                for c in set(lead.on_core) | set(run.on_core):
                    a, b = lead.on_core.get(c, 0), run.on_core.get(c, 0)
                    if isinstance(a, int) and isinstance(b, int):
                        if a != b:
                            m.add_bool_or([])
                    else:
                        m.add(a == b)

    # ------------------------------------------------------------ objective
    def _objective(self) -> None:
        """P3C.O1 latency, P3C.O2 energy (the static term floored exactly), P3C.O3 weighted."""
        m, data = self.model, self.data
        energy = sum(a.energy_pj * a.lit for runs in self.runs for run in runs for a in run.alts)
        energy += sum(mv.route.energy_pj * mv.lit for x in self.transfers for mv in x.moves)
        if data.static_fj_per_cycle:
            phi = data.static_fj_per_cycle
            static = m.new_int_var(0, phi * self.horizon // 1000, "static_pj")
            self.static = static
            m.add(1000 * static <= phi * self.makespan)
            m.add(phi * self.makespan <= 1000 * static + 999)
            energy += static
        self.energy = energy
        if data.objective is Objective.LATENCY:
            m.minimize(self.makespan)
        elif data.objective is Objective.ENERGY:
            m.minimize(energy)
        else:
            wl, we = weighted_coefficients(data)
            m.minimize(wl * self.makespan + we * energy)

    # ---------------------------------------------------------------- hints
    def add_hint(self, schedule: Schedule) -> int:
        """Hint run starts, cores and variants, transfers and pins from a timed schedule.

        Runs are matched by op and start order; transfers by tensor, destination and
        order; each copy's free is the tensor's first free after the copy's allocation,
        and each read and transfer source is the copy holding the tensor over it.
        Returns the number of hinted variables.
        """
        m, data = self.model, self.data
        schedule = canonical(data, self.symmetries, schedule)  # C17: the same cost
        index = {op.id: op.index for op in data.ops}
        pinned_mems = {(t, mem) for t, mem in schedule.pinned}
        hint = Hints(m)

        starts: dict[int, list[OpRun]] = {}
        for op_run in sorted(schedule.ops):
            if op_run.op in index:
                starts.setdefault(index[op_run.op], []).append(op_run)
        for op in data.ops:
            given = starts.get(op.index, [])
            for run in self.runs[op.index]:
                r = given[run.number] if run.number < len(given) else None
                hint(run.start, r.start if r else 0)
                if not _is_true(run.present):
                    hint(run.present, r is not None)
                pinned = r is not None and bool(op.persistent_reads) and all(
                    (data.persistent[p].id, data.memory_of[r.core]) in pinned_mems for p in op.persistent_reads)
                for a in run.alts:
                    hint(a.lit, r is not None and a.core == r.core and a.pinned == pinned)
        for (p, mem), lit in self.pins.items():
            hint(lit, (data.persistent[p].id, mem) in pinned_mems)
        first_tensor = {it.tensors[0]: it.index for it in data.items}
        moved: dict[tuple[int, str], list[Transfer]] = {}
        for sent in sorted(schedule.transfers):
            if sent.tensor in first_tensor:
                moved.setdefault((first_tensor[sent.tensor], sent.dst), []).append(sent)
        span = schedule.makespan
        frees: dict[tuple[str, str], list[int]] = {}
        for f in schedule.frees:
            frees.setdefault((f.tensor, f.memory), []).append(f.time)

        def freed(item: int, memory: str, alloc: int, *, at_start: bool = False) -> int:
            # The copy allocated at ``alloc`` goes at the first free after it; a free at
            # ``alloc`` itself belongs to the copy it replaces (frees come first, EV.E1.6),
            # except for a graph input's copy, there from time 0.
            return max(min((t for t in frees.get((tensor, memory), ()) if t > alloc or (at_start and t == alloc)),
                           default=span)
                       for tensor in data.items[item].tensors)

        life: dict[int, tuple[int, int, int]] = {}  # id(copy) -> (alloc, ready, free) in the hint
        for (i, mem), copies in self.copies.items():
            for copy in copies:
                if copy.kind == "input":
                    life[id(copy)] = (0, 0, freed(i, mem, 0, at_start=True))
                elif copy.run is not None:
                    v, k, c = copy.run
                    given = starts.get(v, [])
                    if k < len(given) and given[k].core == c:
                        r = given[k]
                        life[id(copy)] = (r.start, r.end, freed(i, mem, r.start))
                elif copy.transfer is not None:
                    x = self.transfers[copy.transfer]
                    sends = moved.get((x.item, x.dst), [])
                    if x.number < len(sends):
                        sent = sends[x.number]
                        route = next((mv.route for mv in x.moves if mv.route.link == sent.link
                                      and mv.route.src == sent.src), None)
                        if route is not None:
                            life[id(copy)] = (sent.start, sent.start + route.cycles,
                                              freed(i, mem, sent.start))
                hint(copy.free, life[id(copy)][2] if id(copy) in life else 0)

        def holding(i: int, mem: str, start: int, end: int) -> int | None:
            for n, copy in enumerate(self.copies[(i, mem)]):
                a = life.get(id(copy))
                if a is not None and a[1] <= start and a[2] >= end:
                    return n
            return None

        for x in self.transfers:
            sends = moved.get((x.item, x.dst), [])
            tr = sends[x.number] if x.number < len(sends) else None
            hint(x.present, tr is not None)
            hint(x.start, tr.start if tr else 0)
            for mv, sources in x.sources:
                chosen = tr is not None and mv.route.link == tr.link and mv.route.src == tr.src
                hint(mv.lit, chosen)
                n_src = (holding(x.item, mv.route.src, tr.start, tr.start + mv.route.cycles)
                         if tr is not None and chosen else None)
                for n, sigma in sources:
                    hint(sigma, n == n_src)
        for (v, k, c, i), choice in self.reads.items():
            given = starts.get(v, [])
            r = given[k] if k < len(given) and given[k].core == c else None
            n_read = holding(i, data.memory_of[c], r.start, r.end) if r is not None else None
            for n, y in choice:
                hint(y, n == n_read)
        hint(self.makespan, span)
        return hint.count

    # ------------------------------------------------------------ solutions
    def schedule(self, solver: cp_model.CpSolver, meta: dict[str, Any]) -> tuple[Schedule, dict[str, Any]]:
        """The timed schedule of the solver's solution and its claimed value.

        Parts that serve nothing (a transfer whose copy nobody reads or moves on, a
        recomputation whose copies serve nothing) are left out: the schedule then
        holds less and ends no later.
        """
        data, value = self.data, solver.value

        def on(lit: Lit) -> bool:
            return _is_true(lit) or (not isinstance(lit, int) and solver.boolean_value(lit))

        runs_on = {(r.op, r.number) for runs in self.runs for r in runs if on(r.present)}
        xfer_on = {t for t, x in enumerate(self.transfers) if on(x.present)}

        def copy_alive(copy: _Copy) -> bool:
            if copy.kind == "input":
                return True
            if copy.run is not None:
                return (copy.run[0], copy.run[1]) in runs_on and on(copy.present)
            return copy.transfer in xfer_on

        while True:
            used: set[tuple[int, str, int]] = set()
            for (v, k, c, i), choice in self.reads.items():
                if (v, k) in runs_on and on(self.runs[v][k].on_core[c]):
                    used.update((i, data.memory_of[c], n) for n, y in choice if on(y))
            for t in xfer_on:
                x = self.transfers[t]
                for mv, sources in x.sources:
                    if on(mv.lit):
                        used.update((x.item, mv.route.src, n) for n, s in sources if on(s))
            keep_x = {t for t in xfer_on if any(
                (self.transfers[t].item, self.transfers[t].dst, n) in used
                for n, cp in enumerate(self.copies[(self.transfers[t].item, self.transfers[t].dst)])
                if cp.transfer == t)}
            keep_runs = set()
            for (v, k) in runs_on:
                if k == 0 or any((item, mem, n) in used for item in data.ops[v].writes
                                 for mem in data.memories
                                 for n, cp in enumerate(self.copies[(item, mem)])
                                 if cp.run is not None and cp.run[:2] == (v, k)):
                    keep_runs.add((v, k))
            if (keep_x, keep_runs) == (xfer_on, runs_on):
                break
            xfer_on, runs_on = keep_x, keep_runs
        runs = []
        for rs in self.runs:
            for r in rs:
                if (r.op, r.number) in runs_on:
                    a = next(a for a in r.alts if on(a.lit))
                    runs.append(RunValue(r.op, a.core, value(r.start), a.pinned))
        transfers = []
        for t in sorted(xfer_on):
            x = self.transfers[t]
            mv = next(mv for mv in x.moves if on(mv.lit))
            transfers.append(TransferValue(x.item, mv.route, value(x.start)))
        ends = [value(r.start) + (data.ops[r.op].pinned_cycles if r.pinned else data.ops[r.op].cycles)[r.core]
                for r in runs]
        ends += [x.start + x.route.cycles for x in transfers]
        makespan = max(ends, default=0)
        frees = []
        for (i, mem), copies in self.copies.items():
            for copy in copies:
                if copy_alive(copy) and value(copy.free) < makespan:
                    frees.append((i, mem, value(copy.free)))
        pins = [(p, mem) for (p, mem), lit in self.pins.items() if on(lit)]
        return assemble_p3_schedule(data, runs, transfers, frees, pins, meta)


def solve_p3_cpsat(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    max_computes: int | None = DEFAULT_MAX_COMPUTES,
    max_transfers: int | None = DEFAULT_MAX_TRANSFERS,
    colocate: str = "none",
    allow_recompute: bool = True,
    allow_offload: bool = True,
    allow_pin: bool = True,
    use_baseline_hint: bool = True,
    log: bool = False,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    **options: Any,
) -> BackendResult:
    """Solve a P3 instance (joint allocation, remat, offload, pinning) with CP-SAT.

    Parameters
    ----------
    instance
        A P3 instance; objective ``latency``, ``energy`` (with ``runtime_limit_cycles``
        as the ε-constraint) or ``weighted``.
    time_limit
        Seconds for CP-SAT (``None``: until proven).
    workers
        CP-SAT workers (default: the machine's cores, at most 8).
    hint
        A timed schedule to start from.  Default (``use_baseline_hint``): the store-all
        list-scheduling baseline (``heuristics.store_all_schedule``), layer and op
        allocation, whichever is better.
    max_computes, max_transfers, colocate, allow_recompute, allow_offload, allow_pin
        The class P3.K3 and its restrictions (``formulations/p3_problem.md``); ``None``
        means the default.
    log, seed, params
        CP-SAT's search log, random seed, and extra ``SatParameters`` fields.

    Returns
    -------
    BackendResult
        ``optimal`` over P3.K3 (proven), ``feasible`` (with CP-SAT's bound),
        ``infeasible`` (proven over P3.K3; the message gives the minimum SRAM when the
        capacity is the reason) or ``unknown``.
    """
    deadline = Deadline(time_limit)  # everything below counts (time_limits.md)
    # The bound over every schedule when the caller (auto, P3A.2) has computed it already.
    floor: int | float | None = options.pop("_floor", None)
    began = deadline.started
    if options:
        raise MonetError(f"unknown option(s) {', '.join(sorted(options))} for the P3 CP-SAT backend",
                         field="options", fix=f"use: {', '.join(_OPTIONS)}")
    data = p3_data(instance,
                   max_computes=DEFAULT_MAX_COMPUTES if max_computes is None else max_computes,
                   max_transfers=DEFAULT_MAX_TRANSFERS if max_transfers is None else max_transfers,
                   colocate=colocate, allow_recompute=allow_recompute, allow_offload=allow_offload,
                   allow_pin=allow_pin)
    stats: dict[str, Any] = {"model": "p3_cpsat", **data.options, "hint": "none"}
    quick = data.min_capacity_proof()
    if quick:
        return BackendResult(Status.INFEASIBLE, message=quick, stats=stats)
    limits = (f"class K3: max_computes={data.options['max_computes']}, "
              f"max_transfers={data.max_transfers}, colocate={data.colocate}")
    # The hint first: it is also what is returned if the time runs out while building.
    start = hint
    if start is None and use_baseline_hint:
        start = _baseline(instance)
        if start is not None:
            stats["hint"] = f"{start.meta.get('heuristic', 'baseline')} ({start.meta.get('allocate', 'given')})"
    elif start is not None:
        stats["hint"] = "given"
    if isinstance(start, Sequence):
        start = evaluate(instance, start).schedule
    if floor is None:  # BD.B1-B6, BD.B9, BD.B12 and BD.E of bounds.md hold for every schedule
        floor = backend_floor(instance, deadline)
    try:
        built = P3CpModel(data, deadline=deadline)
        if start is not None:
            stats["hinted_variables"] = built.add_hint(start)
        if deadline.passed():
            raise OutOfTime("building the P3 CP-SAT model", "no time left to run CP-SAT")
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return hint_or_unknown(instance, start, stats["hint"], f"{stop} ({limits})", floor, stats)
    proto = built.model.proto
    stats.update(variables=len(proto.variables), constraints=len(proto.constraints))

    defaults = SMALL_PARAMS if len(instance.graph.ops) <= SMALL_OPS else DEFAULT_PARAMS
    run = run_cpsat(built.model, deadline=deadline, workers=workers, seed=seed, log=log,
                    params=params, defaults=defaults)
    solver, code = run.solver, run.status
    # The extra full-problem search, as the solver was set up (the caller's params win).
    stats["search"] = ", ".join(solver.parameters.extra_subsolvers)
    stats.update(solver_status=run.status_name, solve_seconds=round(solver.wall_time, 3),
                 build_seconds=round(time.perf_counter() - began - solver.wall_time, 3))
    if code == cp_model.INFEASIBLE:
        return BackendResult(Status.INFEASIBLE, stats=stats,
                             message=f"CP-SAT proved infeasibility ({limits}); every op fits from an "
                                     f"SRAM of {data.min_sram_bytes()} bytes on")
    if code == cp_model.MODEL_INVALID:
        return BackendResult(Status.ERROR, stats=stats, message=f"model bug: {built.model.validate()}")
    bound = _bound(data, solver.best_objective_bound)
    stats["solver_bound"] = bound
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # The hint may lie outside class K3: it gets the floor over every schedule, and
        # CP-SAT's bound over K3 stays in stats (BD.C1).
        stats["class_bound"] = _max(bound, floor)
        return hint_or_unknown(instance, start, stats["hint"],
                               f"CP-SAT found no schedule of its own in the time limit "
                               f"({solver.status_name(code)})", floor, stats)
    if floor is not None and (bound is None or floor > bound):
        bound, stats["bound_source"] = floor, "combinatorial"
    schedule, value = built.schedule(solver, {"backend": "cpsat", "model": "p3_cpsat"})
    stats.update(recomputations=value["recomputations"], transfers=value["transfers"],
                 pins=len(schedule.pinned))
    if code == cp_model.OPTIMAL:
        return BackendResult(Status.OPTIMAL, schedule, value["objective"], value["objective"],
                             f"optimal ({limits})", stats)
    return BackendResult(Status.FEASIBLE, schedule, value["objective"], bound,
                         f"time limit ({limits})", stats)


def _max(a: int | float | None, b: int | float | None) -> int | float | None:
    return b if a is None else a if b is None else max(a, b)


def _bound(data: P3Data, bound: float) -> int | float | None:
    """CP-SAT's bound in the objective's units (the weighted objective is rescaled)."""
    if not math.isfinite(bound):
        return None
    if data.objective is Objective.WEIGHTED:
        return bound / weighted_scale(data) * (1 - 1e-12)
    return integer_bound(bound)


def _baseline(instance: Instance) -> Schedule | None:
    """The best list schedule as a hint (``p3_data.baseline_schedules``): feasible first, then by objective."""
    candidates = baseline_schedules(instance)
    return candidates[0][2] if candidates else None
