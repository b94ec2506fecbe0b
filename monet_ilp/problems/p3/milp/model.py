"""The disjunctive MILP of P3 (``formulations/p3_milp.md``): columns, rows, objective, values.

:class:`P3Milp` builds the model of one :class:`~monet_ilp.problems.p3.data.P3Data`
(P3M.X1-X8, P3M.W1, P3M.M1-M15, P3M.O1-O3), checking the deadline at every column, row and pair
considered, and reads a solution back as a timed schedule.  It is a PuLP model, solved
by the engines (:mod:`monet_ilp.engines.pulp_models`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from graphlib import TopologicalSorter
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import pulp

from monet_ilp.instance import Objective
from monet_ilp.problems.p3.data import (
    P3Data,
    RunValue,
    TransferValue,
    assemble_p3_schedule,
    weighted_coefficients,
)
from monet_ilp.problems.p3.milp.records import (
    CopyKind,
    CopySlot,
    RunSlot,
    Solution,
    TransferSlot,
    is_on,
    value_of,
)
from monet_ilp.problems.p3.milp.symmetry import (
    Symmetry,
    canonical,
    core_automorphisms,
    first_core_excluded,
)

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.problems.p3.data import P3Item, P3Op
    from monet_ilp.schedule import Schedule

__all__ = ["P3Milp"]

#: A run or a transfer: what a core (P3M.M9) or a link (P3M.M10) holds, one at a time.
Slot = TypeVar("Slot", RunSlot, TransferSlot)

#: A linear term of a row: a column, an expression, or a constant (PuLP is untyped).
Term: TypeAlias = "pulp.LpVariable | pulp.LpAffineExpression | int"


class P3Milp:
    """The disjunctive MILP of ``formulations/p3_milp.md`` for one :class:`P3Data`.

    ``horizon`` replaces ``data.horizon()`` as the bound on every time (P3M.W1): a model
    with horizon ``H`` holds every schedule of P3.K3 whose makespan is at most ``H``.
    ``recompute_after_first`` starts a recomputation only once the previous run has
    ended (P3M.M1c'), the reading of P3.K1 the CP-SAT model takes (its P3C.C2); by default runs are
    only ordered by start, as the evaluator numbers them.
    """

    def __init__(self, data: P3Data, *, horizon: int | None = None, symmetry: bool = True,
                 recompute_after_first: bool = True, deadline: Deadline | None = None):
        began = time.perf_counter()
        self.data = data
        self.deadline = deadline
        self._phase, self._pos = "variables", (0, 0)
        self.recompute_after_first = recompute_after_first
        self.H = data.horizon() if horizon is None else max(1, min(int(horizon), data.horizon()))
        self.problem = pulp.LpProblem("p3_milp", pulp.LpMinimize)
        self.runs: list[RunSlot] = []
        self.runs_of: list[list[RunSlot]] = []
        self.transfers: list[TransferSlot] = []
        self.copies: list[CopySlot] = []
        self.copies_of: dict[int, list[CopySlot]] = {}
        self.run_copies: dict[int, list[CopySlot]] = {}
        self.transfer_copy: dict[int, CopySlot] = {}
        self.pin: dict[tuple[int, str], pulp.LpVariable] = {}
        self.reads: dict[tuple[int, int], dict[tuple[int, str], pulp.LpVariable]] = {}
        self.sources: dict[int, dict[tuple[int, str], pulp.LpVariable]] = {}
        self.binding: tuple[str, ...] = ()
        # (run a, run b) -> "a before b": an order binary, or 0 / 1 when the order is fixed
        self.core_order: dict[tuple[int, int], pulp.LpVariable | int] = {}
        # (lam, expr): lam >= expr (P3M.M11f)
        self.lambdas: list[tuple[pulp.LpVariable, pulp.LpAffineExpression]] = []
        self.symmetries: list[Symmetry] = []
        self.impossible: list[RunSlot | TransferSlot] = []
        self.static: pulp.LpVariable | None = None
        self.contradiction = ""
        self.makespan = self.problem.add_variable("makespan", 0, self.H, pulp.LpInteger)
        self._hazards: dict[int, set[int]] = {v.index: set() for v in data.ops}
        for o in data.ops:
            for u in self._hazard_readers(o):
                self._hazards[u].add(o.index)
        steps = [("run columns (X1, X2)", self._run_variables),
                 ("pin columns (X3)", self._pin_variables),
                 ("transfer columns (X4)", self._transfer_variables),
                 ("copy columns (X5)", self._copy_variables), ("windows (W1)", self._windows),
                 ("run rows (M1)", self._run_constraints), ("pin rows (M2)", self._pin_constraints),
                 ("copy rows (M3)", self._copy_constraints),
                 ("transfer rows (M4)", self._transfer_constraints),
                 ("one-copy rows (M5)", self._one_copy_constraints),
                 ("read rows (M6)", self._read_constraints),
                 ("source rows (M7)", self._source_constraints),
                 ("dependency rows (M8)", self._persistent_dependencies),
                 ("core rows (M9), runs", self._core_constraints),
                 ("link rows (M10), transfers", self._link_constraints),
                 ("memory rows (M11), copies", self._memory_constraints),
                 ("makespan rows (M12)", self._makespan_constraints),
                 ("colocation rows (M14)", self._colocate_constraints)]
        if symmetry:
            steps.append(("symmetry rows (M15)", self._symmetry_constraints))
        steps.append(("objective", self._objective))
        for phase, step in steps:
            self._phase, self._pos = phase, (0, 0)
            self._check()
            step()
        self.build_seconds = time.perf_counter() - began

    # ------------------------------------------------------------- helpers
    def _check(self) -> None:
        """Stop building (:class:`OutOfTime`) once the deadline has passed; report progress.

        Called for every column, row and pair considered: the pair loops (P3M.M5, P3M.M9-M11)
        are quadratic, and a large model takes minutes (time_limits.md).
        """
        if self.deadline is not None:
            self.deadline.check("building the P3 MILP", self._progress)

    def _progress(self) -> str:
        done, total = self._pos
        where = f"{self._phase} {done:,} of {total:,}" if total else self._phase
        return (f"{where}; {self.problem.numConstraints():,} rows, "
                f"{self.problem.numVariables():,} columns")

    def _binary(self, name: str) -> pulp.LpVariable:
        self._check()
        return self.problem.add_variable(name, cat=pulp.LpBinary)

    def _add(self, constraint: pulp.LpConstraint | bool, name: str) -> None:
        self._check()
        if isinstance(constraint, bool):  # every term is constant
            if not constraint:
                self.contradiction = self.contradiction or f"row {name} cannot hold"
            return
        self.problem.addConstraint(constraint, name)

    def _hazard_readers(self, op: P3Op) -> list[int]:
        """P3.K6: the ops other than ``op`` that read a persistent tensor ``op`` updates."""
        if not op.updates:
            return []
        return [u.index for u in self.data.ops
                if u.index != op.index and set(u.persistent_reads) & set(op.updates)]

    # ----------------------------------------------------------- variables
    def _run_variables(self) -> None:
        """P3M.X1 z (core and variant of each run), P3M.X2 its start."""
        data, H = self.data, self.H
        for op in data.ops:
            runs = []
            for k in range(op.max_runs):
                z, cycles, energy = {}, {}, {}
                for c in op.cores:
                    for pinned in [False] + ([True] if c in op.pinned_cycles else []):
                        z[(c, pinned)] = self._binary(
                            f"z_{op.index}_{k}_{data.cores.index(c)}_{int(pinned)}")
                        cycles[(c, pinned)] = op.pinned_cycles[c] if pinned else op.cycles[c]
                        energy[(c, pinned)] = op.pinned_energy_pj[c] if pinned else op.energy_pj[c]
                start = self.problem.add_variable(f"s_{op.index}_{k}", 0, H, pulp.LpInteger)
                run = RunSlot(len(self.runs), op.index, k, start, z, cycles, energy,
                           dict(data.memory_of))
                self.runs.append(run)
                runs.append(run)
            self.runs_of.append(runs)

    def _pin_variables(self) -> None:
        """P3M.X3: pin[p, m], persistent tensor p pinned in SRAM m for the whole iteration."""
        for p in self.data.persistent:
            for m in p.pin_memories:
                mi = self.data.memories.index(m)
                self.pin[(p.index, m)] = self._binary(f"pin_{p.index}_{mi}")

    def _transfer_variables(self) -> None:
        """P3M.X4: up to T transfers of each item into each memory, each on one route.

        An item nobody reads is never moved (such a move serves nothing).
        """
        data, H = self.data, self.H
        for item in data.items:
            if not item.readers:
                continue
            for m in data.memories:
                routes = {r: route for r, route in enumerate(item.routes)
                          if route.dst == m and route.cycles > 0}
                if not routes:
                    continue
                mi = data.memories.index(m)
                for t in range(data.max_transfers):
                    w = {r: self._binary(f"w_{item.index}_{mi}_{t}_{r}") for r in routes}
                    start = self.problem.add_variable(f"x_{item.index}_{mi}_{t}", 0, H,
                                                      pulp.LpInteger)
                    self.transfers.append(TransferSlot(len(self.transfers), item.index, m, t, start, w,
                                                    routes))

    def _copy_variables(self) -> None:
        """P3M.X5: the copies of each item (input, one per run of its producer, one per transfer)."""
        data = self.data
        for item in data.items:
            copies: list[CopySlot] = []
            if item.producer is None:
                self._add_copy(item, copies, "input", (data.input_home,), home=data.input_home)
            else:
                for run in self.runs_of[item.producer]:
                    copy = self._add_copy(item, copies, "run", run.memories, run=run)
                    self.run_copies.setdefault(run.index, []).append(copy)
            for x in self.transfers:
                if x.item == item.index:
                    self.transfer_copy[x.index] = self._add_copy(item, copies, "transfer",
                                                                 (x.dst,), transfer=x)
            self.copies_of[item.index] = copies

    def _add_copy(self, item: P3Item, copies: list[CopySlot], kind: CopyKind,
                  memories: Iterable[str], *, run: RunSlot | None = None,
                  transfer: TransferSlot | None = None, home: str | None = None) -> CopySlot:
        """A new copy of ``item`` (its free time a column), added to the model and ``copies``."""
        q = len(self.copies)
        free = self.problem.add_variable(f"f_{q}", 0, self.H, pulp.LpInteger)
        copy = CopySlot(q, item.index, kind, tuple(memories), free, run=run, transfer=transfer,
                        home=home)
        self.copies.append(copy)
        copies.append(copy)
        return copy

    def _windows(self) -> None:
        """P3M.W1: earliest and latest starts of runs and transfers, and the strict orders they imply.

        First runs: ``head`` (a reader starts at least ``dmin`` after its producer's
        first run, P3M.M12c; gradients, P3M.M8a; in-place updates, P3M.M8b; graph inputs arrive
        at the earliest over the quickest route) and the longest ``dmin`` path to the
        end.  A recomputation or a transfer serves a later run of a reader (else it is
        dropped, which loses nothing), so it ends ``min dmin`` of its item's readers
        before ``H``.
        """
        data, H = self.data, self.H
        self.dmin = [min(list(op.cycles.values()) + list(op.pinned_cycles.values()))
                     for op in data.ops]
        edges: dict[int, set[int]] = {op.index: set() for op in data.ops}
        release = [0] * data.n
        for op in data.ops:
            for i in op.reads:
                p = data.items[i].producer
                if p is None:
                    arrival = data.input_arrival_cycles(i, op.index)
                    release[op.index] = max(release[op.index], arrival)
                else:
                    edges[p].add(op.index)
            for p in op.after:
                edges[p].add(op.index)
            for u in self._hazard_readers(op):
                edges[u].add(op.index)
        order = list(TopologicalSorter({v: [u for u in edges if v in edges[u]]
                                        for v in edges}).static_order())
        head = list(release)
        for v in order:
            for w in edges[v]:
                head[w] = max(head[w], head[v] + self.dmin[v])
        to_end = [0] * data.n  # longest dmin path from v's first start to the makespan
        for v in reversed(order):
            to_end[v] = self.dmin[v] + max((to_end[w] for w in edges[v]), default=0)
        self.head = head
        # Strict orders of first runs: a path of at least one cycle (P3M.W2).
        self.strict: set[tuple[int, int]] = set()
        for a in data.ops:
            self._check()
            longest = {a.index: 0}
            for v in order:
                if v in longest:
                    for w in edges[v]:
                        longest[w] = max(longest.get(w, -1), longest[v] + self.dmin[v])
            self.strict.update((a.index, b) for b, d in longest.items() if b != a.index and d >= 1)
        reader_min = {item.index: min((self.dmin[u] for u in item.readers), default=0)
                      for item in data.items}
        for runs in self.runs_of:
            for run in runs:
                v = run.op
                if run.mandatory:
                    run.est, run.lst = head[v], H - to_end[v]
                else:
                    serve = min((reader_min[i] for i in data.ops[v].writes
                                 if data.items[i].readers), default=0)
                    run.est, run.lst = head[v], H - run.dmin - serve
        for x in self.transfers:
            p = data.items[x.item].producer
            x.est = 0 if p is None else head[p] + self.dmin[p]
            x.lst = H - x.dmin - reader_min[x.item]
        self.impossible = []  # optional parts whose window is empty: never present
        things: list[RunSlot | TransferSlot] = [*self.runs, *self.transfers]
        for thing in things:
            if thing.lst < thing.est:
                if isinstance(thing, RunSlot) and thing.mandatory:  # a transfer never is
                    self.contradiction = (f"op {data.ops[thing.op].id!r} cannot run within the "
                                          f"horizon of {H} cycles")
                else:
                    self.impossible.append(thing)
                thing.lst = thing.est

    # --------------------------------------------------------- constraints
    def _run_constraints(self) -> None:
        """P3M.M1: a first computation per op; recomputations optional, numbered by start; P3M.W1."""
        for runs in self.runs_of:
            first = runs[0]
            self._add(first.present == 1, f"M1a_{first.op}")
            first.start.lowBound, first.start.upBound = first.est, first.lst
            for prev, run in itertools.pairwise(runs):
                self._add(run.present <= prev.present, f"M1b_{run.op}_{run.number}")
                if self.recompute_after_first:  # P3M.M1c'
                    self._add(run.start >= prev.end - prev.lft * (1 - run.present),
                              f"M1c_{run.op}_{run.number}")
                else:
                    self._add(run.start >= prev.start - prev.lst * (1 - run.present),
                              f"M1c_{run.op}_{run.number}")
                    # P3M.M1g: runs that start together are numbered by end, as the evaluator does
                    big = prev.lft
                    self._add(prev.end <= run.end + big * (run.start - prev.start)
                              + (big + big * prev.lst) * (1 - run.present),
                              f"M1g_{run.op}_{run.number}")
            for run in runs[1:]:
                if run in self.impossible:
                    self._add(run.present == 0, f"M1f_{run.op}_{run.number}")
                self._add(run.start <= run.lst * run.present, f"M1d_{run.op}_{run.number}")
                if run.est:
                    self._add(run.start >= run.est * run.present, f"M1e_{run.op}_{run.number}")

    def _pin_constraints(self) -> None:
        """P3M.M2: one SRAM per pin; the variant a run uses is the one its pins imply (EV.E2 duration)."""
        data = self.data
        for tensor in data.persistent:
            pins = [self.pin[(tensor.index, m)] for m in tensor.pin_memories]
            if len(pins) > 1:
                self._add(pulp.lpSum(pins) <= 1, f"M2a_{tensor.index}")
        for run in self.runs:
            op = data.ops[run.op]
            if not op.persistent_reads or data.persistent_home is None:
                continue
            reads = op.persistent_reads
            for c in run.cores:
                m, ci = data.memory_of[c], data.cores.index(c)
                here = [self.pin[(p, m)] for p in reads if (p, m) in self.pin]
                if (c, True) in run.z:
                    for p in reads:  # P3M.M2b: the pinned cost needs every input pinned here
                        self._add(run.z[(c, True)] <= self.pin[(p, m)], f"M2b_{run.index}_{ci}_{p}")
                if len(here) == len(reads):  # P3M.M2c: the plain cost only if some input is not
                    self._add(run.z[(c, False)] + pulp.lpSum(here) <= len(reads),
                              f"M2c_{run.index}_{ci}")
            for m in run.memories:  # P3M.M2d: a persistent input pinned elsewhere cannot be read
                for p in reads:
                    elsewhere = [self.pin[(p, m2)] for m2 in data.persistent[p].pin_memories
                                 if m2 != m]
                    if elsewhere:
                        self._add(run.in_memory(m) + pulp.lpSum(elsewhere) <= 1,
                                  f"M2d_{run.index}_{data.memories.index(m)}_{p}")

    def _copy_constraints(self) -> None:
        """P3M.M3: a copy is freed once ready (at least a cycle after it appears), by the makespan."""
        for q in self.copies:
            self._add(q.free >= q.ready, f"M3a_{q.index}")
            self._add(q.free <= self.makespan, f"M3b_{q.index}")
            if q.kind != "input":
                self._add(q.free >= q.alloc + q.present, f"M3c_{q.index}")
                self._add(q.free <= self.H * q.present, f"M3d_{q.index}")

    def _transfer_constraints(self) -> None:
        """P3M.M4: one route per transfer; an item's transfers into a memory numbered by start (P3.L1)."""
        previous: dict[tuple[int, str], TransferSlot] = {}
        for x in self.transfers:
            if len(x.w) > 1:
                self._add(x.present <= 1, f"M4a_{x.index}")
            if x in self.impossible:
                self._add(x.present == 0, f"M4f_{x.index}")
            self._add(x.start <= x.lst * x.present, f"M4b_{x.index}")
            if x.est:
                self._add(x.start >= x.est * x.present, f"M4e_{x.index}")
            prev = previous.get((x.item, x.dst))
            if prev is not None:
                self._add(x.present <= prev.present, f"M4c_{x.index}")
                self._add(x.start >= prev.start - prev.lst * (1 - x.present), f"M4d_{x.index}")
            previous[(x.item, x.dst)] = x

    def _one_copy_constraints(self) -> None:
        """P3M.M5 (P3.L2): the copies of an item in one memory do not overlap ([alloc, free) intervals)."""
        H = self.H
        for done, copies in enumerate(self.copies_of.values()):
            self._pos = (done, len(self.copies_of))
            for a_pos, a in enumerate(copies):
                for b in copies[a_pos + 1:]:
                    for m in [m for m in a.memories if m in b.memories]:
                        name = f"{a.index}_{b.index}_{self.data.memories.index(m)}"
                        big_a = H - b.alloc_low  # a.free - b.alloc <= big_a
                        big_b = H - a.alloc_low
                        if a.kind == "run" and b.kind == "run":
                            # P3M.M5a: runs are numbered by start, so a's copy goes first
                            both = 2 - a.present_in(m) - b.present_in(m)
                            self._add(a.free <= b.alloc + big_a * both, f"M5a_{name}")
                        elif a.kind == "transfer" and b.kind == "transfer":
                            self._add(a.free <= b.alloc + big_a * (1 - b.present), f"M5b_{name}")
                        else:  # P3M.M5c: a run copy and a transfer copy, in either order
                            o = self._binary(f"oq_{name}")
                            self._add(a.free <= b.alloc + big_a * (1 - o)
                                      + big_a * (1 - a.present_in(m)), f"M5c_{name}")
                            self._add(b.free <= a.alloc + big_b * o + big_b * (1 - b.present_in(m)),
                                      f"M5d_{name}")

    def _read_constraints(self) -> None:
        """P3M.M6 (P3.K3): a run reads each input item from a copy in its core's memory, ready and kept."""
        data = self.data
        for run in self.runs:
            op = data.ops[run.op]
            for i in op.reads:
                choice = {}
                for m in run.memories:
                    candidates = [q for q in self.copies_of[i] if m in q.memories]
                    mi = data.memories.index(m)
                    for q in candidates:
                        y = self._binary(f"rd_{run.index}_{i}_{q.index}_{mi}")
                        choice[(q.index, m)] = y
                        name = f"{run.index}_{q.index}_{mi}"
                        self._add(y <= q.present_in(m), f"M6b_{name}")
                        self._add(q.ready <= run.start + max(0, q.ready_high - run.low) * (1 - y),
                                  f"M6c_{name}")
                        self._add(q.free >= run.end - run.lft * (1 - y), f"M6d_{name}")
                    chosen = pulp.lpSum(choice[(q.index, m)] for q in candidates)
                    self._add(chosen == run.in_memory(m), f"M6a_{run.index}_{i}_{mi}")
                self.reads[(run.index, i)] = choice

    def _source_constraints(self) -> None:
        """P3M.M7 (P3.K2): a transfer reads a copy in its route's source memory, ready and kept."""
        data = self.data
        for x in self.transfers:
            choice = {}
            for src in x.sources:
                candidates = [q for q in self.copies_of[x.item] if src in q.memories]
                si = data.memories.index(src)
                for q in candidates:
                    y = self._binary(f"src_{x.index}_{q.index}_{si}")
                    choice[(q.index, src)] = y
                    name = f"{x.index}_{q.index}_{si}"
                    self._add(y <= q.present_in(src), f"M7b_{name}")
                    self._add(q.ready <= x.start + q.ready_high * (1 - y), f"M7c_{name}")
                    self._add(q.free >= x.end - x.lft * (1 - y), f"M7d_{name}")
                chosen = pulp.lpSum(choice[(q.index, src)] for q in candidates)
                self._add(chosen == x.from_memory(src), f"M7a_{x.index}_{si}")
            self.sources[x.index] = choice

    def _persistent_dependencies(self) -> None:
        """P3M.M8: gradients read after their producer's first run; in-place updates last (P3.K6)."""
        for op in self.data.ops:
            first = self.runs_of[op.index][0]
            for p in op.after:
                self._add(first.start >= self.runs_of[p][0].end, f"M8a_{op.index}_{p}")
            for u in self._hazard_readers(op):
                for run in self.runs_of[u]:  # an absent run ends at 0 (P3M.M1d)
                    self._add(first.start >= run.end, f"M8b_{op.index}_{run.index}")

    def _fixed_order(self, a: Slot, b: Slot) -> bool:
        """P3M.W2: True when a starts strictly before b whenever both use one resource."""
        if isinstance(a, TransferSlot):
            return (a.item, a.dst) == (b.item, b.dst) and a.number < b.number and b.dmin >= 1
        if a.op == b.op:
            return a.number < b.number and b.dmin >= 1
        if a.mandatory and (a.op, b.op) in self.strict:
            return True
        if a.mandatory and b.mandatory and a.lst < b.est:
            return True
        return b.op in self._hazards[a.op]  # P3M.M8b: an in-place update waits for every reader

    def _disjunctive(self, a: Slot, b: Slot, shared: list[str],
                     on: Callable[[Slot, str], pulp.LpAffineExpression], tag: str) -> None:
        """P3M.M9/P3M.M10: a and b do not overlap on any resource both use (an order binary)."""
        if a.mandatory and b.mandatory and (a.lft <= b.est or b.lft <= a.est):
            if tag == "9":
                self.core_order[(a.index, b.index)] = int(a.lft <= b.est)
            return  # their windows do not meet
        fixed: tuple[Slot, Slot] | None = None  # (first, second) when the order is fixed
        if self._fixed_order(a, b):
            fixed = (a, b)
        elif self._fixed_order(b, a):
            fixed = (b, a)
        if fixed is not None:
            first, second = fixed
            if tag == "9":  # "a before b" on a shared core, for P3M.M11's run pairs
                self.core_order[(a.index, b.index)] = int(first is a)
            big = max(0, first.lft - second.low)
            for r in shared:
                both = 2 - on(a, r) - on(b, r)
                if big:
                    self._add(second.start >= first.end - big * both,
                              f"M{tag}a_{a.index}_{b.index}_{r}")
            return
        o = self._binary(f"o{tag}_{a.index}_{b.index}")
        if tag == "9":
            self.core_order[(a.index, b.index)] = o
        for r in shared:
            both = 2 - on(a, r) - on(b, r)
            name = f"{a.index}_{b.index}_{r}"
            big_ab, big_ba = max(0, a.lft - b.low), max(0, b.lft - a.low)
            self._add(b.start >= a.end - big_ab * (1 - o) - big_ab * both, f"M{tag}b_{name}")
            self._add(a.start >= b.end - big_ba * o - big_ba * both, f"M{tag}c_{name}")

    def _core_constraints(self) -> None:
        """P3M.M9 (P3.K5): runs on one core do not overlap."""
        for a_pos, a in enumerate(self.runs):
            self._pos = (a_pos, len(self.runs))
            for b in self.runs[a_pos + 1:]:
                self._check()
                shared = [c for c in a.cores if c in b.cores]
                if shared:
                    self._disjunctive(a, b, shared, RunSlot.on, "9")

    def _link_constraints(self) -> None:
        """P3M.M10 (P3.K5): transfers on one link do not overlap."""
        for a_pos, a in enumerate(self.transfers):
            self._pos = (a_pos, len(self.transfers))
            for b in self.transfers[a_pos + 1:]:
                self._check()
                shared = [link for link in a.links if link in b.links]
                if shared:
                    self._disjunctive(a, b, shared, TransferSlot.on_link, "10")

    def _pinned_bytes(self, m: str) -> tuple[pulp.LpAffineExpression | int, int]:
        """What persistent tensors hold in memory m all iteration (EV.E1.5): expression, most."""
        data = self.data
        if data.persistent_home is None:
            return 0, 0
        if m == data.persistent_home:
            total = sum(p.bytes for p in data.persistent)
            pinned = pulp.lpSum(data.persistent[p].bytes * x for (p, _), x in self.pin.items())
            return total - pinned, total
        terms = [(data.persistent[p].bytes, x) for (p, mm), x in self.pin.items() if mm == m]
        return pulp.lpSum(b * x for b, x in terms), sum(b for b, _ in terms)

    def _memory_constraints(self) -> None:
        """P3M.M11 (P3.K5): each memory's capacity, checked when each copy is allocated.

        For copies q1 < q2 (of different items) that may share a memory, binaries say
        q1 is gone before q2 arrives (B12), q2 before q1 (B21), they overlap with q1
        first (C12), or, when all three are 0, with q2 strictly first (D21).  The copy
        that arrives last counts the other.  Left out for memories that cannot overflow.
        """
        data = self.data
        binding = []
        for m in data.memories:
            items = {q.item for q in self.copies if m in q.memories}
            held, pinned_most = self._pinned_bytes(m)
            if pinned_most > data.capacity[m]:  # P3M.M11h: the pins alone
                self._add(held <= data.capacity[m], f"M11h_{data.memories.index(m)}")
            if sum(data.items[i].bytes for i in items) + pinned_most > data.capacity[m]:
                binding.append(m)
        self.binding = tuple(binding)
        if not binding:
            return
        counted: dict[tuple[int, str], list[tuple[int, Term]]] = {}  # (event copy, m) -> terms
        for a_pos, q1 in enumerate(self.copies):
            self._pos = (a_pos, len(self.copies))
            for q2 in self.copies[a_pos + 1:]:
                self._check()
                if q1.item == q2.item:
                    continue  # P3M.M5 keeps them apart
                shared = [m for m in q1.memories if m in q2.memories and m in binding]
                if not shared:
                    continue
                if q1.kind == "run" and q2.kind == "run" and q1.run is q2.run:
                    for m in shared:  # one run's outputs appear together: q2 counts q1
                        counted.setdefault((q2.index, m), []).append((data.items[q1.item].bytes, 1))
                    continue
                name = f"{q1.index}_{q2.index}"
                order = self._run_order(q1, q2, shared)
                if order is not None:
                    self._run_pair(q1, q2, shared, order, counted)
                    continue
                b12, b21, c12 = (self._binary(f"{tag}_{name}") for tag in ("mB12", "mB21", "mC12"))
                self._add(b12 + b21 + c12 <= 1, f"M11a_{name}")
                self._add(q1.free <= q2.alloc + (self.H - q2.alloc_low) * (1 - b12), f"M11b_{name}")
                self._add(q2.free <= q1.alloc + (self.H - q1.alloc_low) * (1 - b21), f"M11c_{name}")
                self._add(q1.alloc <= q2.alloc + max(0, q1.alloc_high - q2.alloc_low) * (1 - c12),
                          f"M11d_{name}")
                self._add(q2.alloc + 1 <= q1.alloc + (q2.alloc_high + 1 - q1.alloc_low)
                          * (b12 + b21 + c12), f"M11e_{name}")
                d21 = 1 - b12 - b21 - c12
                for m in shared:
                    mi = data.memories.index(m)
                    # q2's allocation counts q1 when C12; q1's counts q2 when D21.
                    for event, other, flag, tag in ((q2, q1, c12, "c"), (q1, q2, d21, "d")):
                        counted.setdefault((event.index, m), []).append(
                            (data.items[other.item].bytes, self._term(other, m, flag,
                                                                      f"{tag}_{name}_{mi}")))
        for m in binding:
            held, pinned_most = self._pinned_bytes(m)
            cap, mi = data.capacity[m], data.memories.index(m)
            for q in self.copies:
                if m not in q.memories:
                    continue
                terms = counted.get((q.index, m), [])
                size = data.items[q.item].bytes
                most = size + pinned_most + sum(b for b, _ in terms)
                if most <= cap:
                    continue
                # P3M.M11g: at q's allocation, m holds q, the pins and what arrived before
                self._add(size * q.present_in(m) + held + pulp.lpSum(b * t for b, t in terms)
                          <= cap + (most - cap) * (1 - q.present_in(m)), f"M11g_{q.index}_{mi}")

    def _term(self, other: CopySlot, m: str, flag: Term, name: str) -> Term:
        """``flag`` if ``other`` can only be in m, else a variable that is 1 when ``flag`` and
        ``other`` is in m (P3M.M11f); an absent copy can always be put 'gone before'."""
        if other.fixed_memory:
            return flag
        lam = self.problem.add_variable(f"lam{name}", 0, 1)
        expr = flag + other.present_in(m) - 1
        self._add(lam >= expr, f"M11f{name}")
        self.lambdas.append((lam, expr))
        return lam

    def _run_order(self, q1: CopySlot, q2: CopySlot, shared: list[str]) -> Term | None:
        """"q1's run before q2's" from the core order (P3M.M9) when both are run copies, every
        shared memory belongs to one core, and no run is empty (else None)."""
        if q1.run is None or q2.run is None or q1.run.dmin < 1 or q2.run.dmin < 1:
            return None
        cores_of = {m: [c for c in self.data.cores if self.data.memory_of[c] == m] for m in shared}
        if any(len(cores) != 1 for cores in cores_of.values()):
            return None
        a, b = q1.run.index, q2.run.index
        if (a, b) in self.core_order:
            return self.core_order[(a, b)]
        if (b, a) in self.core_order:
            return 1 - self.core_order[(b, a)]
        return None

    def _run_pair(self, q1: CopySlot, q2: CopySlot, shared: list[str], order: Term,
                  counted: dict[tuple[int, str], list[tuple[int, Term]]]) -> None:
        """P3M.M11 for two run copies on one core: the core order (P3M.M9) says which arrives first,
        so only 'gone before the other arrives' needs a binary per direction (G12, G21)."""
        data, H = self.data, self.H
        name = f"{q1.index}_{q2.index}"
        g12, g21 = self._binary(f"mG12_{name}"), self._binary(f"mG21_{name}")
        self._add(q1.free <= q2.alloc + (H - q2.alloc_low) * (1 - g12), f"M11i_{name}")
        self._add(q2.free <= q1.alloc + (H - q1.alloc_low) * (1 - g21), f"M11j_{name}")
        # P3M.M11k: 'gone before' only in the order's direction, so the flags below are 0 or 1.
        # An absent copy (alloc = free = 0) meets M11i and M11j either way: without these
        # rows a flag of -1 took its bytes off what the other copy's allocation counts.
        self._add(g12 <= order, f"M11k12_{name}")
        self._add(g21 <= 1 - order, f"M11k21_{name}")
        for m in shared:
            mi = data.memories.index(m)
            for event, other, flag, tag in ((q2, q1, order - g12, "c"),
                                            (q1, q2, 1 - order - g21, "d")):
                term = self._term(other, m, flag, f"{tag}_{name}_{mi}")
                size = data.items[other.item].bytes
                counted.setdefault((event.index, m), []).append((size, term))

    def _makespan_constraints(self) -> None:
        """P3M.M12: the makespan covers every run and transfer (at most the runtime limit, its
        bound); redundant rows for the LP: core and link loads, starts after producers."""
        data = self.data
        M = self.makespan
        for run in self.runs:
            self._add(M >= run.end, f"M12a_{run.index}")
        for x in self.transfers:
            self._add(M >= x.end, f"M12b_{x.index}")
        for op in data.ops:  # P3M.M12c: some run of the producer ends before a reader starts
            for p in sorted({maker for i in op.reads
                             if (maker := data.items[i].producer) is not None}):
                first, producer = self.runs_of[op.index][0], self.runs_of[p][0]
                self._add(first.start >= producer.start + self.dmin[p], f"M12c_{op.index}_{p}")
        for c in data.cores:  # P3M.M12d: one run at a time on each core
            work = [(run.cycles[key], z) for run in self.runs for key, z in run.z.items()
                    if key[0] == c]
            if work:
                self._add(M >= pulp.lpSum(d * z for d, z in work), f"M12d_{data.cores.index(c)}")
        for link in data.instance.links:  # P3M.M12e: one transfer at a time on each link
            work = [(x.routes[r].cycles, w) for x in self.transfers for r, w in x.w.items()
                    if x.routes[r].link == link.id]
            if work:
                self._add(M >= pulp.lpSum(d * w for d, w in work), f"M12e_{link.id}")
        M.lowBound = max(data.critical_path_cycles(),
                         -(-sum(self.dmin) // max(1, len(data.cores))))

    def _colocate_constraints(self) -> None:
        """P3M.M14: with colocate="layer", a layer's first computations share one core."""
        data = self.data
        if data.colocate != "layer":
            return
        layers: dict[str, list[int]] = {}
        for op in data.ops:
            if op.layer:
                layers.setdefault(op.layer, []).append(op.index)
        for li, (layer, ops) in enumerate(sorted(layers.items())):
            if len(ops) < 2:
                continue
            common = [c for c in data.cores if all(c in data.ops[v].cycles for v in ops)]
            if not common:
                self.contradiction = (f"colocate='layer': no core can run every op of layer "
                                      f"{layer!r}")
                continue
            y = {c: self._binary(f"layer_{li}_{data.cores.index(c)}") for c in common}
            self._add(pulp.lpSum(y.values()) == 1, f"M14a_{li}")
            for v in ops:
                first = self.runs_of[v][0]
                for c in common:
                    self._add(first.on(c) == y[c], f"M14b_{li}_{v}_{data.cores.index(c)}")

    def _symmetry_constraints(self) -> None:
        """P3M.M15: interchangeable cores (a permutation that maps every cost, memory, link and
        pin onto itself): the first op's first run goes to the first core of its orbit."""
        self.symmetries = core_automorphisms(self.data)
        first = self.runs_of[0][0]
        order = {c: k for k, c in enumerate(self.data.cores)}
        for c in first_core_excluded(self.data, self.symmetries):
            if c in first.cores:
                self._add(first.on(c) == 0, f"M15_{order[c]}")

    def canonical(self, schedule: Schedule) -> Schedule:
        """The image of a schedule under the symmetry that puts the first op's first run on
        the first core of its orbit (P3M.M15), so that it can be a warm start."""
        return canonical(self.data, self.symmetries, schedule)

    def _objective(self) -> None:
        """P3M.O1 latency, P3M.O2 energy (P3M.M13: the static term floored exactly), P3M.O3 weighted."""
        data = self.data
        energy = pulp.lpSum(run.energy[key] * z for run in self.runs for key, z in run.z.items())
        energy += pulp.lpSum(x.routes[r].energy_pj * w for x in self.transfers
                             for r, w in x.w.items())
        if data.objective is not Objective.LATENCY and data.static_fj_per_cycle:
            phi = data.static_fj_per_cycle
            self.static = self.problem.add_variable("static_pj", 0, phi * self.H // 1000,
                                                    pulp.LpInteger)
            self._add(1000 * self.static <= phi * self.makespan, "M13a")
            self._add(phi * self.makespan <= 1000 * self.static + 999, "M13b")
            energy += self.static
        self.energy = energy
        if data.objective is Objective.LATENCY:
            self.weights = (1, 0)
            self.primary = 1 * self.makespan
        elif data.objective is Objective.ENERGY:
            self.weights = (0, 1)
            self.primary = energy
        else:
            self.weights = weighted_coefficients(data)
            self.primary = self.weights[0] * self.makespan + self.weights[1] * energy
        self.problem.setObjective(self.primary)

    # ----------------------------------------------------------------- size
    def size(self) -> dict[str, int]:
        variables = self.problem.variables()
        return {
            "variables": len(variables),
            "binaries": sum(v.cat == pulp.LpInteger and v.lowBound == 0 and v.upBound == 1
                            for v in variables),
            "integers": sum(v.cat == pulp.LpInteger for v in variables),
            "constraints": self.problem.numConstraints(),
            "run_slots": len(self.runs),
            "transfer_slots": len(self.transfers),
            "copy_slots": len(self.copies),
            "horizon": self.H,
            "core_symmetries": len(self.symmetries),
        }

    # ------------------------------------------------------------ solutions
    def solution(self) -> Solution:
        """The solver's values, rounded (P3M.X1-X6)."""
        sol = Solution()
        for run in self.runs:
            variants = [key for key, z in run.z.items() if is_on(z)]
            if variants:
                c, pinned = variants[0]
                sol.runs[run.index] = (c, pinned, round(value_of(run.start)))
        for x in self.transfers:
            routes = [r for r, w in x.w.items() if is_on(w)]
            if routes:
                sol.transfers[x.index] = (routes[0], round(value_of(x.start)))
        for q in self.copies:
            sol.frees[q.index] = round(value_of(q.free))
        for (r, i), choice in self.reads.items():
            for (copy, _), y in choice.items():
                if is_on(y):
                    sol.reads[(r, i)] = copy
        for t, choice in self.sources.items():
            for (copy, _), y in choice.items():
                if is_on(y):
                    sol.sources[t] = copy
        sol.pins = [(p, m) for (p, m), x in self.pin.items() if is_on(x)]
        return sol

    def prune(self, sol: Solution) -> Solution:
        """Drop what serves nothing: transfers and recomputations none of whose copies is used.

        Ties in the objective (latency makes moves free) let the solver keep them;
        without them every memory holds less and every resource is busy less, so the
        schedule stays in P3.K3 and is no worse.
        """
        runs, transfers = dict(sol.runs), dict(sol.transfers)
        while True:
            used = {q for (r, _), q in sol.reads.items() if r in runs}
            used |= {q for x, q in sol.sources.items() if x in transfers}
            drop_x = [x for x in transfers if self.transfer_copy[x].index not in used]
            drop_r = [r for r in runs if not self.runs[r].mandatory
                      and not any(q.index in used for q in self.run_copies.get(r, ()))]
            if not drop_x and not drop_r:
                break
            for x in drop_x:
                del transfers[x]
            for r in drop_r:
                del runs[r]
        return Solution(runs, transfers, sol.frees,
                         {k: q for k, q in sol.reads.items() if k[0] in runs},
                         {x: q for x, q in sol.sources.items() if x in transfers}, sol.pins)

    def _copy_memory(self, q: CopySlot, sol: Solution) -> str | None:
        """Where copy q is in the solution (None: it does not exist)."""
        if q.run is not None:
            got = sol.runs.get(q.run.index)
            return None if got is None else self.data.memory_of[got[0]]
        if q.transfer is not None:
            return q.transfer.dst if q.transfer.index in sol.transfers else None
        return q.home

    def schedule(self, sol: Solution, meta: dict[str, Any]) -> tuple[Schedule, dict[str, Any]]:
        """The timed schedule of a (pruned) solution; every copy is freed at its free time,
        or at the makespan if that comes first."""
        data = self.data
        runs = [RunValue(self.runs[r].op, c, start, pinned)
                for r, (c, pinned, start) in sol.runs.items()]
        transfers = [TransferValue(self.transfers[x].item, self.transfers[x].routes[route], start)
                     for x, (route, start) in sol.transfers.items()]
        ends = [v.start + (data.ops[v.op].pinned_cycles if v.pinned
                           else data.ops[v.op].cycles)[v.core] for v in runs]
        ends += [v.start + v.route.cycles for v in transfers]
        makespan = max(ends, default=0)
        frees = []
        for q in self.copies:
            memory = self._copy_memory(q, sol)
            if memory is not None:
                frees.append((q.item, memory, min(sol.frees[q.index], makespan)))
        return assemble_p3_schedule(data, runs, transfers, frees, sol.pins, meta)

    # ---------------------------------------------------------------- hints
    def accepts(self, values: dict[str, float]) -> bool:
        """Whether column values (a warm start, :func:`.start.start_values`) meet every row
        and bound.

        The values are set on the columns first, with every ``λ`` at the least value P3M.M11f
        allows and the static energy of the makespan (both also written to ``values``).
        """
        for var in self.problem.variables():
            var.varValue = values.get(var.name, 0.0)
        for lam, expr in self.lambdas:  # the least value P3M.M11f allows
            lam.varValue = values[lam.name] = max(0.0, float(pulp.value(expr)))
        if self.static is not None:
            self.static.varValue = values[self.static.name] = float(
                self.data.static_pj(int(self.makespan.varValue)))
        constraints = self.problem.constraints()
        self._phase = "checking the warm start: rows"
        ok = True
        for done, c in enumerate(constraints):
            if done % 256 == 0:
                self._pos = (done, len(constraints))
                self._check()
            if not c.valid(1e-6):
                ok = False
                break
        return ok and all((v.lowBound is None or v.varValue >= v.lowBound - 1e-9)
                          and (v.upBound is None or v.varValue <= v.upBound + 1e-9)
                          for v in self.problem.variables())
