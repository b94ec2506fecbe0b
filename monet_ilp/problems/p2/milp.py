"""P2 as a POET-like stage MILP (PuLP, solved by HiGHS or CBC), for small instances.

The MILP backend of P2 (``formulations/p2_problem.md``); the mathematics, with the
labels cited below (X, M), is ``formulations/p2_milp.md``.  Stage ``k`` ends with the
first computation of op ``k``; per stage, binaries say what is computed, what is kept
in S, and what is paged out to D or in from D (POET's R, S_RAM, M_out, M_in), with
Checkmate's frees inside a stage.  Transfers are aligned to stages, a restriction of
P2 that ``p2_milp.md`` states and that the CP-SAT backend reproduces with
``staged=True``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulp

from monet_ilp.engines import default_workers
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.engines.export import export_path
from monet_ilp.engines.milp import bound_ceil, check_solver
from monet_ilp.engines.pulp_models import export_problem, solve_pulp
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
    from pathlib import Path

    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["P2StageMilp", "solve_p2_milp"]

_OPTIONS = ("max_computes", "max_prefetches", "fixed_order", "offload_inputs", "allow_offload",
            "allow_recompute", "use_baseline_hint", "log", "export")


@dataclass
class _Plan:
    """A point of the stage class: what each stage computes, keeps and moves (P2M.X1-X5)."""

    R: dict[tuple[int, int], int] = field(default_factory=dict)
    S: dict[tuple[int, int], int] = field(default_factory=dict)
    Min: dict[tuple[int, int], int] = field(default_factory=dict)
    Mout: dict[tuple[int, int], int] = field(default_factory=dict)


def _read_in(readers: tuple[int, ...], k: int, ran: Mapping[tuple[int, int], int]) -> bool:
    """Whether a reader of an item runs in stage k (op k, or a recomputation in ``ran``)."""
    return any(k == u or ran.get((k, u), 0) for u in readers if u <= k)


def _runs_in(plan: _Plan, k: int, v: int) -> int:
    """R[k, v] of a plan: 1 for op k's first computation, else the plan's value."""
    return 1 if k == v else plan.R.get((k, v), 0)


class P2StageMilp:
    """The stage MILP of ``formulations/p2_milp.md`` for one :class:`P2Data`."""

    def __init__(self, data: P2Data, *, deadline: Deadline | None = None):
        self.data = data
        self.deadline = deadline
        self.problem = pulp.LpProblem("p2_stage", pulp.LpMinimize)
        self.R: dict[tuple[int, int], pulp.LpVariable] = {}
        self.S: dict[tuple[int, int], pulp.LpVariable] = {}
        self.Min: dict[tuple[int, int], pulp.LpVariable] = {}
        self.Mout: dict[tuple[int, int], pulp.LpVariable] = {}
        self.FREE: dict[tuple[int, int, int], pulp.LpVariable] = {}
        self.L: list[pulp.LpVariable] = []
        self.makespan: pulp.LpVariable  # M, made by _variables
        self.static: pulp.LpVariable | None = None
        self._windows()
        self._variables()
        self._constraints()
        self._objective()

    # ------------------------------------------------------------- windows
    def _windows(self) -> None:
        """Stages in which each variable can be 1 (pruning that loses no schedule)."""
        data = self.data
        last = data.last_recompute_stage
        self.run_stages = {op.index: ([op.index] + ([k for k in range(op.index + 1, last + 1)]
                                                   if op.max_runs > 1 else []))
                           for op in data.ops}
        self.birth: dict[int, int] = {}
        self.last_read: dict[int, int] = {}
        for item in data.items:
            self.birth[item.index] = 0 if item.producer is None else item.producer + 1
            self.last_read[item.index] = max((max(self.run_stages[u]) for u in item.readers),
                                             default=-1)

    def _add(self, constraint: pulp.LpConstraint, name: str) -> None:
        """``addConstraint``, checking the deadline first (:class:`OutOfTime` past it)."""
        if self.deadline is not None:
            self.deadline.check("building the P2 stage MILP",
                                lambda: f"{self.problem.numConstraints():,} rows")
        self.problem.addConstraint(constraint, name)

    def _can_run(self, k: int, v: int | None) -> bool:
        return v is not None and (k == v or (k, v) in self.R)

    def _R(self, k: int, v: int | None) -> pulp.LpVariable | int:
        """R[k, v] as a term: 1, a variable, or 0 (also for graph inputs, v = None)."""
        if v is None:
            return 0
        if k == v:
            return 1
        return self.R.get((k, v), 0)

    # ----------------------------------------------------------- variables
    def _variables(self) -> None:
        """P2M.X1 R, P2M.X2 S, P2M.X3 M_out, P2M.X4 M_in, P2M.X5 FREE, P2M.X6 L, M and the static energy."""
        data, binary = self.data, pulp.LpBinary
        for op in data.ops:
            for k in self.run_stages[op.index][1:]:
                self.R[(k, op.index)] = self.problem.add_variable(f"R_{k}_{op.index}", cat=binary)
        for item in data.items:
            i, b, r = item.index, self.birth[item.index], self.last_read[item.index]
            for k in range(b, r + 1):
                self.S[(k, i)] = self.problem.add_variable(f"S_{k}_{i}", cat=binary)
            if item.max_offloads:
                for k in range(b, r - 1):
                    self.Mout[(k, i)] = self.problem.add_variable(f"Mout_{k}_{i}", cat=binary)
                if item.max_prefetches:
                    for k in range(b + 1, r):
                        self.Min[(k, i)] = self.problem.add_variable(f"Min_{k}_{i}", cat=binary)
        for k in range(data.n):
            if self.deadline is not None:
                self.deadline.check("building the P2 stage MILP",
                                    f"FREE columns, stage {k:,} of {data.n:,}")
            for u in self._positions(k):
                for i in data.ops[u].reads:
                    if (k, i) in self.S or self._can_run(k, data.items[i].producer):
                        self.FREE[(k, i, u)] = self.problem.add_variable(f"FREE_{k}_{i}_{u}",
                                                                         cat=binary)
        horizon = data.horizon()
        self.L = [self.problem.add_variable(f"L_{k}", lowBound=0, upBound=horizon)
                  for k in range(data.n)]
        limit = data.runtime_limit_cycles if data.runtime_limit_cycles is not None else horizon
        self.makespan = self.problem.add_variable("M", lowBound=0, upBound=max(limit, 0),
                                                  cat=pulp.LpInteger)
        if data.objective is Objective.ENERGY and data.static_fj_per_cycle:
            self.static = self.problem.add_variable("static_pj", lowBound=0, cat=pulp.LpInteger)

    def _positions(self, k: int) -> list[int]:
        """Ops that may run in stage k, in the order they run (op order, op k last)."""
        return sorted(v for v in range(k + 1) if k in self.run_stages[v])

    # --------------------------------------------------------- constraints
    def _constraints(self) -> None:
        data, add = self.data, self._add
        S, Min, Mout, R = self.S, self.Min, self.Mout, self._R
        items = data.items
        for k in range(data.n):
            for u in self._positions(k):  # P2M.M1: a run finds its inputs in S
                for i in data.ops[u].reads:
                    add(R(k, u) <= R(k, items[i].producer) + S.get((k, i), 0), f"M1_{k}_{u}_{i}")
        for item in items:
            i, p = item.index, item.producer
            for k in range(self.birth[i], self.last_read[i] + 1):
                if (k + 1, i) in S:  # P2M.M2: a copy is kept, made by a run or paged in
                    add(S[(k + 1, i)] <= S[(k, i)] + R(k, p) + Min.get((k, i), 0), f"M2_{k}_{i}")
                # P2M.M3: one copy of an item in S at a time
                if (k, p) in self.R:
                    add(S[(k, i)] + R(k, p) <= 1, f"M3a_{k}_{i}")
                if (k, i) in Min:
                    add(S[(k, i)] + Min[(k, i)] <= 1, f"M3b_{k}_{i}")
                    if (k, p) in self.R:
                        add(Min[(k, i)] + R(k, p) <= 1, f"M3c_{k}_{i}")
                if (k, i) in Mout:  # P2M.M5: page out a copy held in S
                    add(Mout[(k, i)] <= S[(k, i)], f"M5_{k}_{i}")
                if (k, i) in Min:  # P2M.M6: page in from a copy paged out in an earlier stage
                    add(Min[(k, i)] <= pulp.lpSum(Mout[(q, i)] for q in range(k) if (q, i) in Mout),
                        f"M6_{k}_{i}")
            if item.producer is None:
                add(S[(0, i)] == 1, f"M2_input_{i}")
            outs = [Mout[key] for key in Mout if key[1] == i]
            if outs:  # P2M.M4: at most one page-out, P page-ins
                add(pulp.lpSum(outs) <= item.max_offloads, f"M4_out_{i}")
            ins = [Min[key] for key in Min if key[1] == i]
            if ins:
                add(pulp.lpSum(ins) <= item.max_prefetches, f"M4_in_{i}")
        for op in data.ops:  # P2M.M4: C_v runs
            if len(self.run_stages[op.index]) > op.max_runs:
                add(1 + pulp.lpSum(self.R[(k, op.index)] for k in self.run_stages[op.index][1:])
                    <= op.max_runs, f"M4_runs_{op.index}")
        self._free_constraints()
        self._memory_constraints()
        self._time_constraints()

    def _free_constraints(self) -> None:
        """P2M.M7: FREE[k,i,u] = 1 only if u runs in stage k and is the last use of i there."""
        add, data = self._add, self.data
        for (k, i, u), free in self.FREE.items():
            add(free <= self._R(k, u), f"M7a_{k}_{i}_{u}")
            if (k + 1, i) in self.S:
                add(free <= 1 - self.S[(k + 1, i)], f"M7b_{k}_{i}_{u}")
            if (k, i) in self.Mout:
                add(free <= 1 - self.Mout[(k, i)], f"M7c_{k}_{i}_{u}")
            for later in data.items[i].readers:
                if u < later <= k and k in self.run_stages[later]:
                    add(free <= 1 - self._R(k, later), f"M7d_{k}_{i}_{u}_{later}")

    def _memory_constraints(self) -> None:
        """P2M.M8 capacity of S while each run of a stage runs; P2M.M9 capacity of D."""
        data, add = self.data, self._add
        size = [item.bytes for item in data.items]
        for k in range(data.n):
            base = [(size[i], self.S[(k, i)]) for (q, i) in self.S if q == k]
            base += [(size[i], self.Min[(k, i)]) for (q, i) in self.Min if q == k]
            made: list[tuple[int, pulp.LpVariable | int]] = []
            freed: list[tuple[int, pulp.LpVariable]] = []
            for j in self._positions(k):
                item = data.ops[j].item
                if item is not None:
                    made.append((size[item], self._R(k, j)))
                terms = base + made
                expr = pulp.lpSum(c * x for c, x in terms) - pulp.lpSum(c * x for c, x in freed)
                if sum(c for c, _ in terms) > data.budget_bytes:
                    add(expr <= data.budget_bytes, f"M8_{k}_{j}")
                freed += [(size[i], self.FREE[(k, i, j)]) for i in data.ops[j].reads
                          if (k, i, j) in self.FREE]
        if self.Mout:
            total = pulp.lpSum(size[i] * x for (_, i), x in self.Mout.items())
            if sum(size[i] for (_, i) in self.Mout) > data.offload_capacity_bytes:
                add(total <= data.offload_capacity_bytes, "M9")

    def _time_constraints(self) -> None:
        """P2M.M10 a stage lasts as long as its runs and its transfers; P2M.M12 static (P2M.M11: M's bound)."""
        data, add = self.data, self._add
        for k in range(data.n):
            compute = pulp.lpSum(data.ops[v].cycles * self._R(k, v) for v in self._positions(k))
            add(self.L[k] >= compute, f"M10a_{k}")
            moves = [(data.items[i].transfer_cycles, x) for (q, i), x in
                     list(self.Mout.items()) + list(self.Min.items()) if q == k]
            if moves:
                add(self.L[k] >= pulp.lpSum(c * x for c, x in moves), f"M10b_{k}")
        add(self.makespan >= pulp.lpSum(self.L), "M10c")
        if self.static is not None:  # P2M.M12 (P2M.M11 is the makespan's upper bound)
            add(1000 * self.static >= data.static_fj_per_cycle * self.makespan - 999, "M12")

    def _objective(self) -> None:
        """P2M.O1 latency, P2M.O2 energy, P2M.O3 compute; with latency and compute, fewest moves on ties.

        Transfers cost nothing under P2M.O1 and P2M.O3 (and recomputations nothing under P2M.O1), so
        the solver may keep useless ones.  The objective is then ``W * primary + moves``
        with ``W = 2 (s + 1)``, ``s`` the number of move variables, and the solver stops
        at an absolute gap below ``W - s``, which proves the primary optimum (P2M.O4 of p2_milp.md).
        """
        data = self.data
        runs = [(v, k) for op in data.ops for v, k in ((op.index, k) for k in
                                                       self.run_stages[op.index])]
        if data.objective is Objective.LATENCY:
            self.primary = 1 * self.makespan
            moves = list(self.Mout.values()) + list(self.Min.values()) + list(self.R.values())
        elif data.objective is Objective.COMPUTE:
            self.primary = pulp.lpSum(data.ops[v].cycles * self._R(k, v) for v, k in runs)
            moves = list(self.Mout.values()) + list(self.Min.values())
        else:
            energy = pulp.lpSum(data.ops[v].energy_pj * self._R(k, v) for v, k in runs)
            energy += pulp.lpSum(data.items[i].offload_pj * x for (_, i), x in self.Mout.items())
            energy += pulp.lpSum(data.items[i].prefetch_pj * x for (_, i), x in self.Min.items())
            if self.static is not None:
                energy += self.static
            self.primary = energy
            moves = []
        self.moves_max = len(moves)
        self.weight = 2 * (self.moves_max + 1) if moves else 1
        self.gap_abs = self.weight - self.moves_max - 0.5
        self.problem.setObjective(self.weight * self.primary + pulp.lpSum(moves))

    def primary_bound(self, bound: float | None) -> int | None:
        """A bound on the primary objective from one on the solver's objective."""
        if bound is None:
            return None
        return bound_ceil((bound - self.moves_max) / self.weight)

    # ------------------------------------------------------------ solutions
    def plan(self) -> _Plan:
        """The solver's values, rounded to 0/1."""
        def get(table: dict[tuple[int, int], pulp.LpVariable]) -> dict[tuple[int, int], int]:
            return {key: round(x.value() or 0) for key, x in table.items()}

        return _Plan(get(self.R), get(self.S), get(self.Min), get(self.Mout))

    def prune(self, plan: _Plan) -> _Plan:
        """Drop what serves nothing: page-ins nobody reads, page-outs never paged in, kept
        copies nobody needs, recomputations nobody reads.

        Ties in the objective let the solver keep them; without them every stage holds
        less and lasts no longer, so the plan stays in the class and is no worse.
        """
        data = self.data
        R, S, Min, Mout = dict(plan.R), dict(plan.S), dict(plan.Min), dict(plan.Mout)
        changed = True
        while changed:
            changed = False
            for item in data.items:
                i, p = item.index, item.producer
                for (k, j), x in list(Min.items()):
                    if j != i or not x:
                        continue
                    q, useful = k + 1, False
                    while S.get((q, i)) and not useful:
                        useful = _read_in(item.readers, q, R)
                        q += 1
                    if not useful:
                        Min[(k, i)] = 0
                        changed = True
                for (k, j), x in list(Mout.items()):
                    if j == i and x and not any(Min.get((q, i)) for q in range(k + 1, data.n)):
                        Mout[(k, i)] = 0
                        changed = True
                for k in range(data.n - 1, -1, -1):  # P2M.M3: S[k] excludes a new copy in stage k
                    if S.get((k, i)) and not (_read_in(item.readers, k, R) or S.get((k + 1, i))
                                              or Mout.get((k, i))):
                        S[(k, i)] = 0
                        changed = True
                    if p is not None and k != p and R.get((k, p)):
                        read_later = any(k == u or R.get((k, u), 0)
                                         for u in item.readers if p < u <= k)
                        if not (read_later or S.get((k + 1, i))):
                            R[(k, p)] = 0
                            changed = True
        return _Plan(R, S, Min, Mout)

    def schedule(self, plan: _Plan, meta: dict[str, Any]) -> Schedule:
        """X -> a timed schedule (section 'From a plan to a schedule' of p2_milp.md).

        Stage k starts at T_k; its transfers run back to back from T_k (page-outs, then
        page-ins); its runs run back to back in op order and end at T_{k+1}, where
        T_{k+1} - T_k = max(its runs, its transfers).  A copy is freed after its last
        reader in the stage, at T_{k+1} when it was moved in the stage, at T_k when it
        was carried in for nothing, and not at all when it is kept.
        """
        data = self.data
        T = 0
        runs: list[tuple[int, int]] = []
        offloads: list[tuple[int, int]] = []
        prefetches: list[tuple[int, int]] = []
        frees: list[tuple[int, str, int]] = []
        for k in range(data.n):
            ran = [v for v in self._positions(k) if _runs_in(plan, k, v)]
            outs = sorted(i for (q, i), x in plan.Mout.items() if q == k and x)
            ins = sorted(i for (q, i), x in plan.Min.items() if q == k and x)
            compute = sum(data.ops[v].cycles for v in ran)
            moved = sum(data.items[i].transfer_cycles for i in outs + ins)
            end = T + max(compute, moved)
            at = end - compute
            finish: dict[int, int] = {}
            for v in ran:
                runs.append((v, at))
                at += data.ops[v].cycles
                finish[v] = at
            at = T
            for i in outs:
                offloads.append((i, at))
                at += data.items[i].transfer_cycles
            for i in ins:
                prefetches.append((i, at))
                at += data.items[i].transfer_cycles
            for item in data.items:
                i, p = item.index, item.producer
                held = plan.S.get((k, i), 0)
                # the end of the run that made a new copy in this stage, if one did
                made_at = finish.get(p) if p is not None and _runs_in(plan, k, p) else None
                paged_in = plan.Min.get((k, i), 0)
                if not (held or made_at is not None or paged_in) or plan.S.get((k + 1, i), 0):
                    continue
                if paged_in or plan.Mout.get((k, i), 0):
                    frees.append((i, data.sram, end))
                    continue
                times = [T] if held else []
                if made_at is not None:
                    times.append(made_at)
                times += [finish[u] for u in item.readers if u in finish]
                frees.append((i, data.sram, max(times)))
            T = end
        return assemble_schedule(data, runs, offloads, prefetches, frees, meta)

    def start_values(self, trace: ScheduleTrace) -> dict[str, float] | None:
        """A warm start from a schedule in the stage class (None when it is not in it)."""
        data = self.data
        ends = []
        for op in data.ops:
            starts = trace.runs.get(op.index)
            if not starts:
                return None
            ends.append(starts[0] + op.cycles)
        T = [0] + ends

        def stage_of(start: int, end: int) -> int | None:
            for k in range(data.n):
                if T[k] <= start and end <= T[k + 1]:
                    return k
            return None

        plan = _Plan()
        for v, starts in trace.runs.items():
            for s in starts[1:]:
                k = stage_of(s, s + data.ops[v].cycles)
                if k is None or (k, v) not in self.R or plan.R.get((k, v)):
                    return None
                plan.R[(k, v)] = 1
        for i, (start, _) in trace.offload.items():
            k = stage_of(start, start + data.items[i].transfer_cycles)
            if k is None or (k, i) not in self.Mout:
                return None
            plan.Mout[(k, i)] = 1
        for i, starts in trace.prefetches.items():
            for s in starts:
                k = stage_of(s, s + data.items[i].transfer_cycles)
                if k is None or (k, i) not in self.Min:
                    return None
                plan.Min[(k, i)] = 1
        for (k, i) in self.S:
            def alive(q: int, i: int = i) -> bool:
                return any((c.kind == "input" or c.alloc < T[q]) and c.ready <= T[q] < c.free
                           for c in trace.copies.get(i, ()))

            if not alive(k):
                continue
            used = any((k, u) in plan.R or k == u for u in data.items[i].readers)
            if used or (k + 1 <= data.n - 1 and alive(k + 1)) or plan.Mout.get((k, i)):
                plan.S[(k, i)] = 1
        values: dict[str, float] = {}
        for table, chosen in ((self.R, plan.R), (self.S, plan.S), (self.Min, plan.Min),
                              (self.Mout, plan.Mout)):
            for key, x in table.items():
                values[x.name] = float(chosen.get(key, 0))
        for (k, i, u), x in self.FREE.items():
            later = any(_runs_in(plan, k, w) for w in data.items[i].readers if u < w <= k)
            values[x.name] = float(_runs_in(plan, k, u) and not plan.S.get((k + 1, i))
                                   and not plan.Mout.get((k, i)) and not later)
        total = 0
        for k in range(data.n):
            compute = sum(data.ops[v].cycles for v in self._positions(k) if _runs_in(plan, k, v))
            moved = sum(data.items[i].transfer_cycles for (q, i), x in plan.Mout.items() if q == k)
            moved += sum(data.items[i].transfer_cycles for (q, i), x in plan.Min.items() if q == k)
            values[self.L[k].name] = float(max(compute, moved))
            total += max(compute, moved)
        values[self.makespan.name] = float(total)
        if self.static is not None:
            values[self.static.name] = float(data.static_pj(total))
        return values


# ====================================================================== solving
def solve_p2_milp(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    milp_solver: str = "highs",
    max_computes: int | None = DEFAULT_MAX_COMPUTES,
    max_prefetches: int | None = DEFAULT_MAX_PREFETCHES,
    fixed_order: bool = True,
    offload_inputs: bool = False,
    allow_offload: bool = True,
    allow_recompute: bool = True,
    use_baseline_hint: bool = True,
    log: bool = False,
    export: str | Path | None = None,
    **options: Any,
) -> BackendResult:
    """Solve a P2 instance over the stage class with a MILP (``formulations/p2_milp.md``).

    Parameters
    ----------
    instance
        A P2 instance (one core, its memory S holding the graph inputs, one link to
        the offload memory D); objective ``latency``, ``energy`` or ``compute``.
    time_limit
        Seconds for the whole run: data, baseline, model, solver (``None``: until
        proven; ``formulations/time_limits.md``).  When the time runs out before the
        solver has a schedule, the hint (or baseline) is returned if the evaluator
        accepts it (``source`` ``hint:<name>``).
    workers
        Solver threads (default: the machine's cores, at most 8).
    hint
        A schedule to warm-start from; used when it lies in the stage class.
        Default: the best P1 baseline that fits (``use_baseline_hint``).
    milp_solver
        ``"highs"`` (default) or ``"cbc"``.
    max_computes, max_prefetches, fixed_order, offload_inputs, allow_offload, allow_recompute
        As for :func:`~monet_ilp.problems.p2.cpsat.solve_p2_cpsat`.
    log
        Print the solver's log.
    export
        Also write the model to this ``.mps`` or ``.lp`` file (objective constant
        included; ``stats["export"]``).

    Returns
    -------
    BackendResult
        Optimal / infeasible *over the stage class* (transfers aligned to stages, see
        ``p2_milp.md``); the objective is that of the schedule built from the
        solution, which the evaluator recomputes.
    """
    if options:
        raise MonetError(f"unknown option(s) {', '.join(sorted(options))} for the P2 MILP backend",
                         field="options", fix=f"use: milp_solver, {', '.join(_OPTIONS)}")
    solver_name = check_solver(milp_solver)
    if export is not None:
        export = export_path(export)
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
    stats: dict[str, Any] = {"model": "p2_milp_stages", "milp_solver": solver_name, **data.options}
    quick = data.infeasibility_proof()
    if quick:
        return BackendResult(Status.INFEASIBLE, message=quick, stats=stats)
    limits = (f"stage class, max_computes={data.options['max_computes']}, "
              f"max_prefetches={data.options['max_prefetches']}, one offload per item")
    # The start first: it is also what is returned if the time runs out.
    start_schedule = hint
    if start_schedule is None and use_baseline_hint:
        start_schedule = baseline_schedule(instance)
    name = "given" if hint is not None else "baseline"

    def fallback(reason: str, bound: int | None) -> BackendResult:
        # The start may lie outside the model's class: its result carries the bound over
        # every schedule, the model's own (over its class) goes in stats (BD.C1).
        stats["seconds"] = round(time.perf_counter() - began, 3)
        stats["class_bound"] = bound
        return hint_or_unknown(instance, start_schedule, name, f"{reason} ({limits})",
                               data.every_op_once_bound(), stats)

    try:
        built = P2StageMilp(data, deadline=deadline)
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return fallback(str(stop), None)
    stats.update(variables=built.problem.numVariables(), constraints=built.problem.numConstraints())
    if export is not None:
        stats["export"] = str(export_problem(built.problem, export))
    start = None
    if start_schedule is not None:
        start = built.start_values(trace_schedule(data, timed_schedule(instance, start_schedule)))
        stats["warm_start"] = start is not None
    try:
        run = solve_pulp(built.problem, solver_name, threads=default_workers(workers),
                         deadline=deadline, start=start, log=log, gap_abs=built.gap_abs)
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return fallback(str(stop), None)
    outcome = "limit" if run.status == "error" else run.status  # no schedule either way
    bound = built.primary_bound(run.bound)
    stats.update(solver_status=outcome, seconds=round(time.perf_counter() - began, 3))
    if outcome == "infeasible":
        return BackendResult(Status.INFEASIBLE, stats=stats,
                             message=f"{solver_name} proved infeasibility ({limits})")
    if outcome == "limit":
        return fallback("time limit reached before the solver found a schedule", bound)
    plan = built.prune(built.plan())
    schedule = built.schedule(plan, {"backend": "milp", "model": stats["model"]})
    value = schedule_value(data, schedule)
    stats.update(recomputations=value["recomputations"], transfers=value["transfers"],
                 milp_objective=pulp.value(built.primary))
    if outcome == "optimal":
        milp_value = round(stats["milp_objective"])
        if value["objective"] != milp_value:
            return BackendResult(Status.ERROR, schedule, value["objective"], bound,
                                 f"model bug: the MILP optimum {milp_value} differs from its "
                                 f"schedule's {value['objective']}", stats)
        return BackendResult(Status.OPTIMAL, schedule, value["objective"], value["objective"],
                             f"optimal ({limits})", stats)
    return BackendResult(Status.FEASIBLE, schedule, value["objective"], bound,
                         f"time limit ({limits})", stats)
