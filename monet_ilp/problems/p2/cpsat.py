"""P2 on CP-SAT: an interval model of rematerialisation and offload on one core.

The CP-SAT backend of P2 (``formulations/p2_problem.md``); the mathematics, with the
labels cited below (V, C, S, O), is ``formulations/p2_cpsat.md``.  Runs and transfers
are (optional) intervals on the core and on the link; every copy of an item in S or D
is a residence interval in a cumulative; reads choose the copy they use.  With
``staged=True`` the same model is restricted to the stage class of the MILP
(``formulations/p2_milp.md``), so that the two backends can be cross-checked.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from monet_ilp.engines.cpsat import Hints, integer_bound, run_cpsat
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.errors import MonetError
from monet_ilp.instance import Instance, Objective
from monet_ilp.problems.p2.data import (
    DEFAULT_MAX_COMPUTES,
    DEFAULT_MAX_PREFETCHES,
    P2Data,
    ScheduleTrace,
    assemble_schedule,
    baseline_schedule,
    p2_data,
    schedule_value,
    timed_schedule,
    trace_schedule,
)
from monet_ilp.results import BackendResult, Status, hint_or_unknown

if TYPE_CHECKING:
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["P2CpModel", "solve_p2_cpsat"]

#: A linear expression of the model, or a constant (the time 0 of a graph input's copy).
_Expr = cp_model.LinearExpr | int

_OPTIONS = ("max_computes", "max_prefetches", "fixed_order", "staged", "offload_inputs",
            "allow_offload", "allow_recompute", "use_baseline_hint", "log", "seed", "params")


@dataclass
class _Run:
    """P2C.V1: run ``number`` of op ``op`` (0 = first computation, mandatory)."""

    op: int
    number: int
    cycles: int
    start: cp_model.IntVar
    present: cp_model.IntVar | None  # None: mandatory
    interval: cp_model.IntervalVar
    stage_lits: dict[int, cp_model.IntVar] = field(default_factory=dict)  # P2C.S2

    @property
    def end(self) -> cp_model.LinearExpr:
        return self.start + self.cycles

    @property
    def presence(self) -> cp_model.IntVar | int:
        """The presence as a term of a sum: 1 for the mandatory run."""
        return 1 if self.present is None else self.present

    @property
    def lit(self) -> cp_model.IntVar:
        """The presence literal of a recomputation (run 0 has none)."""
        if self.present is None:
            raise ValueError(f"run 0 of op {self.op} is mandatory: it has no presence literal")
        return self.present


@dataclass
class _Transfer:
    """P2C.V3/P2C.V4: the offload or a prefetch of an item on the link."""

    item: int
    kind: str  # "offload" | "prefetch"
    number: int
    cycles: int
    start: cp_model.IntVar
    present: cp_model.IntVar
    interval: cp_model.IntervalVar
    stage_start: cp_model.IntVar | None = None  # P2C.S2: T of its stage, and of the next one
    stage_end: cp_model.IntVar | None = None
    stage_lits: dict[int, cp_model.IntVar] = field(default_factory=dict)

    @property
    def end(self) -> cp_model.LinearExpr:
        return self.start + self.cycles

    def stage_bounds(self) -> tuple[cp_model.IntVar, cp_model.IntVar]:
        """P2C.S2: (T of its stage, T of the next one); only the staged model has them."""
        if self.stage_start is None or self.stage_end is None:
            raise ValueError(f"the {self.kind} of item {self.item} has no stage (staged=False)")
        return self.stage_start, self.stage_end


@dataclass
class _Copy:
    """P2C.V2: a copy of an item in S, made by a run, a prefetch, or present at time 0."""

    item: int
    kind: str  # "run" | "prefetch" | "input"
    number: int
    present: cp_model.IntVar | None
    alloc: _Expr
    ready: _Expr
    free: cp_model.IntVar
    interval: cp_model.IntervalVar


def _only_if(constraint: cp_model.Constraint, *lits: cp_model.IntVar | None) -> None:
    """Enforce ``constraint`` only if every given literal holds (``None``: always true)."""
    present: list[cp_model.BoolVarT] = [lit for lit in lits if lit is not None]
    if present:
        constraint.only_enforce_if(present)


class P2CpModel:
    """The P2 interval model of ``formulations/p2_cpsat.md`` for one :class:`P2Data`."""

    def __init__(self, data: P2Data, *, staged: bool = False, liveness_cuts: bool = True,
                 deadline: Deadline | None = None):
        self.data = data
        self.deadline = deadline
        self.staged = staged
        self.model = cp_model.CpModel()
        self.horizon = data.horizon()
        m = self.model
        self.makespan = m.new_int_var(0, self.horizon, "makespan")
        self.runs: list[list[_Run]] = []
        self.offloads: dict[int, _Transfer] = {}
        self.d_free: dict[int, cp_model.IntVar] = {}
        self.prefetches: dict[int, list[_Transfer]] = {}
        self.copies: dict[int, list[_Copy]] = {}
        self.reads: dict[tuple[int, int, int], list[tuple[int, cp_model.IntVar]]] = {}
        self.sources: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
        self.static: cp_model.IntVar | None = None
        steps = [self._run_variables, self._transfer_variables]
        steps += [self._stage_variables] if staged else []
        steps += [self._copy_variables, self._core_constraints, self._read_constraints,
                  self._copy_constraints, self._transfer_constraints, self._memory_constraints,
                  self._makespan_constraints]
        steps += [self._liveness_cuts] if liveness_cuts else []
        steps += [self._stage_constraints] if staged else []
        for step in steps + [self._objective]:
            if deadline is not None:  # each step is linear in the graph: checks between them
                deadline.check("building the P2 CP-SAT model",
                               step.__name__.strip("_").replace("_", " "))
            step()

    # ------------------------------------------------------------ variables
    def _run_variables(self) -> None:
        """P2C.V1: a start and a presence per run; run 0 of every op is mandatory."""
        m, H = self.model, self.horizon
        for op in self.data.ops:
            runs = []
            for k in range(op.max_runs):
                start = m.new_int_var(0, H, f"s[{op.index},{k}]")
                if k == 0:
                    interval = m.new_fixed_size_interval_var(start, op.cycles, f"run[{op.index},0]")
                    present = None
                else:
                    present = m.new_bool_var(f"p[{op.index},{k}]")
                    interval = m.new_optional_fixed_size_interval_var(start, op.cycles, present,
                                                                       f"run[{op.index},{k}]")
                    m.add(start == 0).only_enforce_if(~present)
                runs.append(_Run(op.index, k, op.cycles, start, present, interval))
            self.runs.append(runs)

    def _transfer_variables(self) -> None:
        """P2C.V3, P2C.V4: the optional offload and prefetches of each item, and its D copy's free."""
        m, H = self.model, self.horizon
        for item in self.data.items:
            if not item.max_offloads:
                continue
            i, delta = item.index, item.transfer_cycles
            w = m.new_bool_var(f"w[{i}]")
            o = m.new_int_var(0, H, f"o[{i}]")
            m.add(o == 0).only_enforce_if(~w)
            interval = m.new_optional_fixed_size_interval_var(o, delta, w, f"out[{i}]")
            self.offloads[i] = _Transfer(i, "offload", 0, delta, o, w, interval)
            f_d = m.new_int_var(0, H, f"fD[{i}]")
            m.add(f_d == 0).only_enforce_if(~w)
            self.d_free[i] = f_d
            pre = []
            for j in range(item.max_prefetches):
                q = m.new_bool_var(f"q[{i},{j}]")
                x = m.new_int_var(0, H, f"x[{i},{j}]")
                m.add(x == 0).only_enforce_if(~q)
                interval = m.new_optional_fixed_size_interval_var(x, delta, q, f"in[{i},{j}]")
                pre.append(_Transfer(i, "prefetch", j, delta, x, q, interval))
            self.prefetches[i] = pre

    def _copy_variables(self) -> None:
        """P2C.V2: the copies of each item in S, each with a free time and a residence interval."""
        m, H = self.model, self.horizon
        for item in self.data.items:
            i = item.index
            copies = []
            if item.producer is None:
                free = m.new_int_var(0, H, f"f[{i},in]")
                copies.append(_Copy(i, "input", 0, None, 0, 0, free,
                                    m.new_interval_var(0, free, free, f"res[{i},in]")))
            else:
                for run in self.runs[item.producer]:
                    free = m.new_int_var(0, H, f"f[{i},r{run.number}]")
                    size = m.new_int_var(0, H, f"len[{i},r{run.number}]")
                    name = f"res[{i},r{run.number}]"
                    if run.present is None:
                        interval = m.new_interval_var(run.start, size, free, name)
                    else:
                        interval = m.new_optional_interval_var(run.start, size, free, run.present,
                                                               name)
                        m.add(free == 0).only_enforce_if(~run.present)
                    copies.append(_Copy(i, "run", run.number, run.present, run.start, run.end, free,
                                        interval))
            for x in self.prefetches.get(i, ()):
                free = m.new_int_var(0, H, f"f[{i},p{x.number}]")
                size = m.new_int_var(0, H, f"len[{i},p{x.number}]")
                m.add(free == 0).only_enforce_if(~x.present)
                # P2C.S6: in the stage class the copy counts from its stage's start and is
                # readable from the next stage on.
                alloc, ready = x.stage_bounds() if self.staged else (x.start, x.end)
                interval = m.new_optional_interval_var(alloc, size, free, x.present,
                                                       f"res[{i},p{x.number}]")
                copies.append(_Copy(i, "prefetch", x.number, x.present, alloc, ready, free,
                                    interval))
            self.copies[i] = copies

    # ---------------------------------------------------------- constraints
    def _core_constraints(self) -> None:
        """P2C.C1 one run at a time; P2C.C2 fixed order; P2C.C3 recomputations after the first; P2C.C4 optimizer."""
        m, data = self.model, self.data
        m.add_no_overlap([r.interval for runs in self.runs for r in runs])  # P2C.C1
        for v in range(data.n - 1):  # P2C.C2
            m.add(self.runs[v + 1][0].start >= self.runs[v][0].end)
        for runs in self.runs:  # P2C.C3
            for k in range(1, len(runs)):
                if k >= 2:
                    m.add_implication(runs[k].lit, runs[k - 1].lit)
                m.add(runs[k].start >= runs[k - 1].end).only_enforce_if(runs[k].present)
        o_star = data.first_optimizer
        if o_star is not None:  # P2C.C4
            for op in data.ops:
                if not op.optimizer:
                    for r in self.runs[op.index][1:]:
                        m.add(r.end <= self.runs[o_star][0].start).only_enforce_if(r.present)

    def _read_constraints(self) -> None:
        """P2C.C5: a run reads each input item from one copy, ready at its start, kept to its end."""
        m = self.model
        for op in self.data.ops:
            for run in self.runs[op.index]:
                for i in op.reads:
                    choice = []
                    for c, copy in enumerate(self.copies[i]):
                        y = m.new_bool_var(f"y[{op.index},{run.number},{i},{c}]")
                        if copy.present is not None:
                            m.add_implication(y, copy.present)
                        m.add(copy.ready <= run.start).only_enforce_if(y)
                        m.add(copy.free >= run.end).only_enforce_if(y)
                        choice.append((c, y))
                    lits = [y for _, y in choice]
                    if run.present is None:
                        m.add_exactly_one(lits)
                    else:
                        m.add(sum(lits) == run.present)
                    self.reads[(op.index, run.number, i)] = choice

    def _copy_constraints(self) -> None:
        """P2C.C6 a copy lives from ready to at most the makespan; P2C.C7 one copy of an item in S."""
        m = self.model
        for i, copies in self.copies.items():
            producer = self.data.items[i].producer  # None only for a graph input: no "run" copy
            for copy in copies:
                _only_if(m.add(copy.free >= copy.ready), copy.present)
                if (copy.kind == "run" and producer is not None
                        and self.data.ops[producer].cycles == 0):
                    _only_if(m.add(copy.free >= copy.alloc + 1), copy.present)
                m.add(copy.free <= self.makespan)
            if len(copies) > 1:
                m.add_no_overlap([c.interval for c in copies])

    def _transfer_constraints(self) -> None:
        """P2C.C8 offload from a ready S copy; P2C.C9 prefetches after it; P2C.C10 one transfer at a time."""
        m = self.model
        for i, out in self.offloads.items():
            choice = []
            for c, copy in enumerate(self.copies[i]):
                if copy.kind == "prefetch":
                    continue
                sigma = m.new_bool_var(f"src[{i},{c}]")
                if copy.present is not None:
                    m.add_implication(sigma, copy.present)
                m.add(copy.ready <= out.start).only_enforce_if(sigma)
                m.add(copy.free >= out.end).only_enforce_if(sigma)
                choice.append((c, sigma))
            m.add(sum(s for _, s in choice) == out.present)
            self.sources[i] = choice
            m.add(self.d_free[i] >= out.end).only_enforce_if(out.present)
            m.add(self.d_free[i] <= self.makespan)
            previous = None
            for x in self.prefetches[i]:  # P2C.C9
                m.add_implication(x.present, out.present)
                m.add(x.start >= out.end).only_enforce_if(x.present)
                m.add(self.d_free[i] >= x.end).only_enforce_if(x.present)
                if previous is not None:
                    m.add_implication(x.present, previous.present)
                    m.add(x.start >= previous.end).only_enforce_if(x.present)
                previous = x
        transfers = self._all_transfers()
        if len(transfers) > 1:  # P2C.C10
            m.add_no_overlap([x.interval for x in transfers])

    def _memory_constraints(self) -> None:
        """P2C.C11 capacity of S; P2C.C12 capacity of D (left out when everything fits)."""
        m, data = self.model, self.data
        intervals = [c.interval for copies in self.copies.values() for c in copies]
        demands = [data.items[c.item].bytes for copies in self.copies.values() for c in copies]
        if sum(data.items[i].bytes for i in self.copies) > data.budget_bytes:
            m.add_cumulative(intervals, demands, data.budget_bytes)
        offloadable = sum(data.items[i].bytes for i in self.offloads)
        if offloadable > data.offload_capacity_bytes:
            d_intervals, d_demands = [], []
            for i, out in self.offloads.items():
                size = m.new_int_var(0, self.horizon, f"lenD[{i}]")
                d_intervals.append(m.new_optional_interval_var(out.start, size, self.d_free[i],
                                                               out.present, f"resD[{i}]"))
                d_demands.append(data.items[i].bytes)
            m.add_cumulative(d_intervals, d_demands, data.offload_capacity_bytes)

    def _makespan_constraints(self) -> None:
        """P2C.C13 the makespan covers every run and transfer; P2C.C14 the runtime limit."""
        m, data = self.model, self.data
        m.add(self.makespan >= self.runs[-1][0].end)
        for runs in self.runs:
            for r in runs[1:]:
                m.add(self.makespan >= r.end).only_enforce_if(r.present)
        for x in self._all_transfers():
            m.add(self.makespan >= x.end).only_enforce_if(x.present)
        # Redundant: the core and the link each do their work one piece at a time.
        m.add(self.makespan >= sum(r.cycles * r.presence for runs in self.runs for r in runs))
        transfers = self._all_transfers()
        if transfers:
            m.add(self.makespan >= sum(x.cycles * x.present for x in transfers))
        if data.runtime_limit_cycles is not None:  # P2C.C14
            m.add(self.makespan <= data.runtime_limit_cycles)

    def _liveness_cuts(self) -> None:
        """P2C.C16 (redundant): S holds, when op k starts, what later first computations read.

        An item read by the first computation of a later op u is resident at s_k unless
        u reads a copy allocated after s_k (a recomputation or a page-in, which cost
        time and energy).  A linear capacity row per op k gives the LP relaxation
        Checkmate's view of memory, which the cumulative alone does not.
        """
        m, data = self.model, self.data
        for op in data.ops:
            k = op.index
            if op.cycles == 0:
                continue
            start = self.runs[k][0].start
            fixed = sum(data.items[i].bytes for i in op.reads)
            fixed += data.items[op.item].bytes if op.item is not None else 0
            terms = []
            for item in data.items:
                i = item.index
                if i in op.reads or not (item.producer is None or item.producer < k):
                    continue
                later = [u for u in item.readers if u > k]
                # S: a copy paged in during stage k, or the source of a page-out during stage
                # k, is resident over the whole stage.
                moved = [x.stage_lits[k] for x in self._item_transfers(i) if k in x.stage_lits]
                if not later and not moved:
                    continue
                alive = m.new_bool_var(f"alive[{i},{k}]")
                for b in moved:
                    m.add_implication(b, alive)
                before: dict[int, cp_model.IntVar] = {}
                for u in later:
                    for c, y in self.reads[(u, 0, i)]:
                        copy = self.copies[i][c]
                        if copy.kind == "input" or (copy.kind == "run" and copy.number == 0):
                            m.add_implication(y, alive)
                            continue
                        if c not in before:
                            b = m.new_bool_var(f"before[{i},{c},{k}]")
                            m.add(copy.alloc <= start).only_enforce_if(b)
                            m.add(copy.alloc >= start + 1).only_enforce_if(~b)
                            before[c] = b
                        m.add_bool_or([~y, ~before[c], alive])
                terms.append((item.bytes, alive))
            if terms and fixed + sum(b for b, _ in terms) > data.budget_bytes:
                m.add(sum(b * x for b, x in terms) <= data.budget_bytes - fixed)

    # ------------------------------------------------------ stage class (S)
    def _stage_variables(self) -> None:
        """P2C.S2 (transfers): each transfer lies in one stage; T of that stage and of the next."""
        m, H, data = self.model, self.horizon, self.data
        for x in self._all_transfers():
            producer = data.items[x.item].producer
            first = (0 if producer is None else producer + 1) + (1 if x.kind == "prefetch" else 0)
            x.stage_start = m.new_int_var(0, H, f"Ts[{x.kind},{x.item},{x.number}]")
            x.stage_end = m.new_int_var(0, H, f"Te[{x.kind},{x.item},{x.number}]")
            m.add(x.stage_start == 0).only_enforce_if(~x.present)
            m.add(x.stage_end == 0).only_enforce_if(~x.present)
            x.stage_lits = {k: m.new_bool_var(f"b[{x.kind},{x.item},{x.number},{k}]")
                            for k in range(first, data.n)}
            m.add(sum(x.stage_lits.values()) == x.present)

    def _stage_boundary(self, k: int) -> _Expr:
        """P2C.S1: T_0 = 0 and T_{k+1} = the end of the first computation of op k."""
        return 0 if k == 0 else self.runs[k - 1][0].end

    def _stage_constraints(self) -> None:
        """P2C.S1-S7: the restriction of the model to the MILP's stage class."""
        m, data = self.model, self.data
        T = self._stage_boundary
        last = data.last_recompute_stage
        recomputes = [r for runs in self.runs for r in runs[1:]]
        for r in recomputes:  # P2C.S2 (runs)
            r.stage_lits = {k: m.new_bool_var(f"b[run,{r.op},{r.number},{k}]")
                            for k in range(r.op + 1, last + 1)}
            m.add(sum(r.stage_lits.values()) == r.present)
            for k, lit in r.stage_lits.items():
                m.add(r.start >= T(k)).only_enforce_if(lit)
                m.add(r.end <= self.runs[k][0].start).only_enforce_if(lit)
        for runs in self.runs:  # P2C.S3: one recomputation of a node per stage
            if len(runs) > 2:
                for k in range(runs[0].op + 1, last + 1):
                    m.add(sum(r.stage_lits[k] for r in runs[1:]) <= 1)
        for a in recomputes:  # P2C.S4: in a stage, recomputations in op order
            for b in recomputes:
                if a.op < b.op:
                    for k in set(a.stage_lits) & set(b.stage_lits):
                        m.add(a.end <= b.start).only_enforce_if([a.stage_lits[k], b.stage_lits[k]])
        for x in self._all_transfers():  # P2C.S2 (transfers)
            x_start, x_end = x.stage_bounds()
            for k, lit in x.stage_lits.items():
                m.add(x_start == T(k)).only_enforce_if(lit)
                m.add(x_end == T(k + 1)).only_enforce_if(lit)
            m.add(x.start >= x_start).only_enforce_if(x.present)
            m.add(x.end <= x_end).only_enforce_if(x.present)
        for i, out in self.offloads.items():
            out_start, out_end = out.stage_bounds()
            for c, sigma in self.sources[i]:  # P2C.S5: page out a copy carried into the stage
                copy = self.copies[i][c]
                m.add(copy.ready <= out_start).only_enforce_if(sigma)
                m.add(copy.free >= out_end).only_enforce_if(sigma)
            for x in self.prefetches[i]:  # P2C.S6: page in from a D copy of an earlier stage
                m.add(out_end <= x.stage_bounds()[0]).only_enforce_if(x.present)
            m.add(self.d_free[i] == self.makespan).only_enforce_if(out.present)  # P2C.S7

    # ------------------------------------------------------------ objective
    def _objective(self) -> None:
        """P2C.O1 latency, P2C.O2 energy (P2C.C15: the static term floored exactly), P2C.O3 compute."""
        m, data = self.model, self.data
        if data.objective is Objective.LATENCY:
            m.minimize(self.makespan)
        elif data.objective is Objective.COMPUTE:
            m.minimize(sum(r.cycles * r.presence for runs in self.runs for r in runs))
        else:
            energy: _Expr = sum(data.ops[r.op].energy_pj * r.presence
                                for runs in self.runs for r in runs)
            energy += sum(data.items[x.item].offload_pj * x.present for x in self.offloads.values())
            energy += sum(data.items[x.item].prefetch_pj * x.present
                          for pre in self.prefetches.values() for x in pre)
            if data.static_fj_per_cycle:
                phi = data.static_fj_per_cycle
                self.static = m.new_int_var(0, phi * self.horizon // 1000, "static_pj")
                m.add(1000 * self.static <= phi * self.makespan)  # P2C.C15
                m.add(phi * self.makespan <= 1000 * self.static + 999)
                energy += self.static
            m.minimize(energy)

    def _item_transfers(self, i: int) -> list[_Transfer]:
        return ([self.offloads[i]] if i in self.offloads else []) + list(self.prefetches.get(i, ()))

    def _all_transfers(self) -> list[_Transfer]:
        return list(self.offloads.values()) + [x for pre in self.prefetches.values() for x in pre]

    # ---------------------------------------------------------------- hints
    def add_hint(self, trace: ScheduleTrace) -> int:
        """Hint the solver with a schedule read as a :class:`ScheduleTrace`; returns #hints.

        What the model cannot express (more runs or page-ins than it has) is left out.
        """
        m, data = self.model, self.data
        hint = Hints(m)

        for op in data.ops:
            starts = trace.runs.get(op.index, [])
            for r in self.runs[op.index]:
                on = r.number < len(starts)
                hint(r.start, starts[r.number] if on else 0)
                hint(r.present, on)
        for i, out in self.offloads.items():
            on = i in trace.offload
            hint(out.present, on)
            hint(out.start, trace.offload[i][0] if on else 0)
            hint(self.d_free[i], trace.offload[i][1] if on else 0)
            starts = trace.prefetches.get(i, [])
            for x in self.prefetches[i]:
                on_x = x.number < len(starts)
                hint(x.present, on_x)
                hint(x.start, starts[x.number] if on_x else 0)
        for i, copies in self.copies.items():
            traced = trace.copies.get(i, [])
            for copy in copies:
                match = next((t for t in traced
                              if t.kind == copy.kind and t.ordinal == copy.number), None)
                hint(copy.free, match.free if match else 0)
        for (v, k, i), choice in self.reads.items():
            starts = trace.runs.get(v, [])
            if k >= len(starts):
                for _, y in choice:
                    hint(y, 0)
                continue
            c = trace.copy_at(i, starts[k], starts[k] + data.ops[v].cycles)
            chosen = trace.copies[i][c] if c is not None else None
            for c_model, y in choice:
                copy = self.copies[i][c_model]
                hint(y, chosen is not None and chosen.kind == copy.kind
                     and chosen.ordinal == copy.number)
        hint(self.makespan, trace.makespan)
        if self.static is not None:
            hint(self.static, data.static_pj(trace.makespan))
        return hint.count

    # ------------------------------------------------------------ solutions
    def schedule(self, solver: cp_model.CpSolver, meta: dict[str, Any]) -> Schedule:
        """The timed schedule of the solver's current solution (frees at the copies' free times).

        Parts that serve nothing (a page-in nobody reads, an offload never paged in, a
        recomputation nobody reads) are left out: ties in the objective let the solver
        keep them, and without them the schedule only holds less and ends no later.
        """
        value, data = solver.value, self.data

        def on(lit: cp_model.IntVar | None) -> bool:
            return lit is None or solver.boolean_value(lit)

        runs_on = {(r.op, r.number) for runs in self.runs for r in runs if on(r.present)}
        out_on = {i for i, x in self.offloads.items() if on(x.present)}
        pre_on = {(x.item, x.number) for pre in self.prefetches.values() for x in pre
                  if on(x.present)}
        while True:
            read = {(i, c) for (v, k, i), choice in self.reads.items() if (v, k) in runs_on
                    for c, y in choice if on(y)}
            sourced = {(i, c) for i in out_on for c, sigma in self.sources[i] if on(sigma)}
            used = read | sourced  # (item, copy) pairs that a kept run or offload reads
            keep_pre = {(i, j) for (i, j) in pre_on
                        if any((i, c) in used for c, cp in enumerate(self.copies[i])
                               if cp.kind == "prefetch" and cp.number == j)}
            keep_out = {i for i in out_on if any(p[0] == i for p in keep_pre)}
            keep_runs: set[tuple[int, int]] = set()
            for (v, k) in runs_on:
                item = data.ops[v].item  # not None for an op with recomputations (k > 0)
                if k == 0 or (item is not None and any(
                        (item, c) in used for c, cp in enumerate(self.copies[item])
                        if cp.kind == "run" and cp.number == k)):
                    keep_runs.add((v, k))
            if (keep_pre, keep_out, keep_runs) == (pre_on, out_on, runs_on):
                break
            pre_on, out_on, runs_on = keep_pre, keep_out, keep_runs
        runs = [(r.op, value(r.start)) for rs in self.runs for r in rs
                if (r.op, r.number) in runs_on]
        offloads = [(i, value(self.offloads[i].start)) for i in sorted(out_on)]
        prefetches = [(x.item, value(x.start)) for pre in self.prefetches.values() for x in pre
                      if (x.item, x.number) in pre_on]
        ends = [s + data.ops[v].cycles for v, s in runs]
        ends += [s + data.items[i].transfer_cycles for i, s in offloads + prefetches]
        makespan = max(ends, default=0)
        frees: list[tuple[int, str, int]] = []
        for i, copies in self.copies.items():
            for copy in copies:
                kept = (copy.kind == "input" or (copy.kind == "run" and (data.items[i].producer,
                                                                          copy.number) in runs_on)
                        or (copy.kind == "prefetch" and (i, copy.number) in pre_on))
                if kept and value(copy.free) < makespan:
                    frees.append((i, data.sram, value(copy.free)))
        if out_on:
            _, d_memory = data.offload_path()
            for i in out_on:
                if value(self.d_free[i]) < makespan:
                    frees.append((i, d_memory, value(self.d_free[i])))
        return assemble_schedule(data, runs, offloads, prefetches, frees, meta)


def solve_p2_cpsat(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    max_computes: int | None = DEFAULT_MAX_COMPUTES,
    max_prefetches: int | None = DEFAULT_MAX_PREFETCHES,
    fixed_order: bool = True,
    staged: bool = False,
    offload_inputs: bool = False,
    allow_offload: bool = True,
    allow_recompute: bool = True,
    use_baseline_hint: bool = True,
    log: bool = False,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    **options: Any,
) -> BackendResult:
    """Solve a P2 instance (remat + offload on one core) with CP-SAT (``formulations/p2_cpsat.md``).

    Parameters
    ----------
    instance
        A P2 instance (one core, its memory S holding the graph inputs, one link to
        the offload memory D); objective ``latency``, ``energy`` or ``compute``.
    time_limit
        Seconds for CP-SAT (``None``: until proven).
    workers
        CP-SAT workers (default: the machine's cores, at most 8).
    hint
        A schedule (timed, or a P1 Sequence timed back to back) to start from.
        Default (``use_baseline_hint``): the best baseline the evaluator accepts among
        store-all, Chen greedy, Chen sqrt and the paging baseline of ``p2_data``.
    max_computes
        Runs per node, first computation included (default 2; ``None`` means the
        default, not "unlimited" as in P1: the timed model grows with every run).
    max_prefetches
        Page-ins per offloaded item (default 1; ``None``: the default).  Each item is
        offloaded at most once.
    fixed_order
        Must be true: first computations follow the graph's order.
    staged
        Restrict to the stage class of the MILP (``p2_milp.md``): for cross-checks.
    offload_inputs
        Let graph inputs be offloaded too (``p2_problem.md`` offloads node outputs).
    allow_offload, allow_recompute
        Switch off paging or rematerialisation.
    log, seed, params
        CP-SAT's search log, random seed, and extra ``SatParameters`` fields.

    Returns
    -------
    BackendResult
        ``optimal`` (proven within the limits above), ``feasible`` (with CP-SAT's
        bound), ``infeasible`` (proven; the message says whether the limits above
        matter) or ``unknown``.  ``stats`` holds the model's size and options.
    """
    if options:
        raise MonetError(f"unknown option(s) {', '.join(sorted(options))} for the P2 CP-SAT "
                         "backend", field="options", fix=f"use: {', '.join(_OPTIONS)}")
    if not fixed_order:
        raise MonetError("the P2 backends keep the first computations in the graph's order",
                         field="fixed_order", fix="drop fixed_order=False")
    deadline = Deadline(time_limit)  # everything below counts (time_limits.md)
    began = deadline.started
    data = p2_data(instance,
                   max_computes=DEFAULT_MAX_COMPUTES if max_computes is None else max_computes,
                   max_prefetches=(DEFAULT_MAX_PREFETCHES if max_prefetches is None
                                   else max_prefetches),
                   offload_inputs=offload_inputs, allow_offload=allow_offload,
                   allow_recompute=allow_recompute)
    stats: dict[str, Any] = {"model": "p2_cpsat_staged" if staged else "p2_cpsat", **data.options,
                             "staged": staged, "hint": "none"}
    quick = data.infeasibility_proof()
    if quick:
        return BackendResult(Status.INFEASIBLE, message=quick, stats=stats)
    limits = (f"max_computes={data.options['max_computes']}, max_prefetches="
              f"{data.options['max_prefetches']}, one offload per item"
              + (", stage class" if staged else ""))
    # The hint first: it is also what is returned if the time runs out.
    start = hint
    if start is None and use_baseline_hint:
        start = baseline_schedule(instance, data)
        stats["hint"] = "baseline" if start is not None else "none"
    elif start is not None:
        stats["hint"] = "given"

    def fallback(reason: str, bound: int | None) -> BackendResult:
        # The hint may lie outside the model's class: its result carries the bound over
        # every schedule, the model's own (over its class) goes in stats (BD.C1).
        stats["class_bound"] = bound
        return hint_or_unknown(instance, start, stats["hint"], f"{reason} ({limits})",
                               data.every_op_once_bound(), stats)

    try:
        built = P2CpModel(data, staged=staged, deadline=deadline)
        if start is not None:
            trace = trace_schedule(data, timed_schedule(instance, start))
            stats["hinted_variables"] = built.add_hint(trace)
        if deadline.passed():
            raise OutOfTime("building the P2 CP-SAT model", "no time left to run CP-SAT")
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return fallback(str(stop), None)
    proto = built.model.proto
    stats.update(variables=len(proto.variables), constraints=len(proto.constraints))

    run = run_cpsat(built.model, deadline=deadline, workers=workers, seed=seed, log=log,
                    params=params)
    solver, code = run.solver, run.status
    stats.update(solver_status=run.status_name, solve_seconds=round(solver.wall_time, 3),
                 build_seconds=round(time.perf_counter() - began - solver.wall_time, 3))
    if code == cp_model.INFEASIBLE:
        return BackendResult(Status.INFEASIBLE, message=f"CP-SAT proved infeasibility ({limits})",
                             stats=stats)
    if code == cp_model.MODEL_INVALID:
        return BackendResult(Status.ERROR, stats=stats,
                             message=f"model bug: {built.model.validate()}")
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        bound = solver.best_objective_bound
        return fallback(f"CP-SAT found no schedule in the time limit ({solver.status_name(code)})",
                        integer_bound(bound) if math.isfinite(bound) else None)
    schedule = built.schedule(solver, {"backend": "cpsat", "model": stats["model"]})
    value = schedule_value(data, schedule)
    stats.update(recomputations=value["recomputations"], transfers=value["transfers"])
    solver_value = round(solver.objective_value)
    bound = integer_bound(solver.best_objective_bound)
    if code == cp_model.OPTIMAL:
        if value["objective"] != solver_value:
            return BackendResult(Status.ERROR, schedule, value["objective"], bound,
                                 f"model bug: CP-SAT's optimum {solver_value} differs from its "
                                 f"schedule's {value['objective']}", stats)
        return BackendResult(Status.OPTIMAL, schedule, value["objective"], value["objective"],
                             f"optimal ({limits})", stats)
    return BackendResult(Status.FEASIBLE, schedule, value["objective"], bound,
                         f"time limit ({limits})", stats)
