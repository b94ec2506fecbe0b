"""CP-SAT variables of the P1 models: compute, first, retain, free, memory and retention pieces.

Second step of the backend: :func:`add_schedule_variables` creates the variables both
encodings share (R, F, S, S^in of ``formulations/p1_cpsat.md``); the stage encoding adds
:func:`add_free_variables` and :func:`add_memory_variables` (FREE, U), the interval
encoding :func:`add_retention_pieces`.  Every variable is also stored under a key
(``("R", t, i)``, ...), the form hints and solutions are exchanged in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.problems.p1.data import P1Data

#: A memory item: ``("node", i)`` (the outputs of node i) or ``("input", g)``.
Item = tuple[str, int]
#: The key of a variable: its family, then stage, pass, node or item (``("R", t, r, i)``, ...).
Key = tuple[Any, ...]  # element types depend on the family (the first element)
#: A literal of the model, or a constant where the domain settles it.
Lit = cp_model.IntVar | int
#: A linear expression over the model's variables (a sum of literals, one, or a constant).
Expr = cp_model.LinearExpr | cp_model.IntVar | int


@dataclass
class Piece:
    """The retention interval of one item within one stage (``p1_cpsat.md``, P1C.C10)."""

    item: Item
    stage: int
    demand: int
    start: Lit
    end: cp_model.IntVar
    present: Lit
    interval: cp_model.IntervalVar


@dataclass
class P1Vars:
    """The model and its variables; absent cells read as the constant 0.

    ``budget`` is the memory capacity in scaled units: an int, or an ``IntVar`` when
    the peak itself is minimised (:func:`~monet_ilp.problems.p1.cpsat.solve.min_budget_cpsat`).
    """

    model: cp_model.CpModel
    grid: P1Data
    budget: int | cp_model.IntVar
    budget_upper: int
    var: dict[Key, cp_model.IntVar] = field(default_factory=dict)
    pieces: list[Piece] = field(default_factory=list)
    #: Stage offsets on the time axis of the interval encoding: stage t is [offset[t], offset[t+1]).
    offset: list[int] = field(default_factory=list)
    #: The backend call's :class:`~monet_ilp.engines.deadline.Deadline`, checked by the
    #: builders' loops (:meth:`check`); ``None``: no limit.
    deadline: Deadline | None = None

    def check(self, family: str, done: int, total: int) -> None:
        """Stop building (``OutOfTime``) once the deadline has passed; report progress."""
        if self.deadline is not None:
            self.deadline.check("building the P1 CP-SAT model",
                                lambda: f"{family}, {done:,} of {total:,}")

    def R(self, t: int, i: int) -> Expr:
        """``R[t,i] = sum_r R[t,r,i]``: node i is computed in stage t (in some pass)."""
        slots = [self.var[key] for r in range(self.grid.passes) if (key := ("R", t, r, i)) in self.var]
        if not slots:
            return 0
        return slots[0] if len(slots) == 1 else sum(slots)

    def Rs(self, t: int, r: int, i: int) -> Lit:
        """``R[t,r,i]``: node i is computed in pass r of stage t (a literal, or 0)."""
        return self.var.get(("R", t, r, i), 0)

    def F(self, t: int, i: int) -> Lit:
        """``F[t,i]``: node i is computed for the first time in stage t."""
        if self.grid.first[i] == (t, t):
            return 1
        return self.var.get(("F", t, i), 0)

    def S(self, t: int, i: int) -> Lit:
        """``S[t,i]``: node i's outputs are resident at the start of stage t."""
        return self.var.get(("S", t, i), 0)

    def S_in(self, t: int, g: int) -> Lit:
        """``S^in[t,g]``: graph input g is resident at the start of stage t."""
        return self.var.get(("Sin", t, g), 0)

    def resident_at_start(self, t: int, item: Item) -> Lit:
        kind, x = item
        return self.S(t, x) if kind == "node" else self.S_in(t, x)

    def position(self, t: int, r: int, k: int) -> int:
        """``tau(t,r,k)``: the time of slot (r, k) of stage t on the interval encoding's axis."""
        return self.offset[t] + self.grid.slot_rank[t][(r, k)]


def _bool(v: P1Vars, key: Key, fixed: int | None = None) -> cp_model.IntVar:
    x = v.model.new_bool_var("_".join(map(str, key)))
    if fixed is not None:
        v.model.add(x == fixed)
    v.var[key] = x
    return x


def add_schedule_variables(model: cp_model.CpModel, grid: P1Data, budget: int | cp_model.IntVar,
                           budget_upper: int, deadline: Deadline | None = None) -> P1Vars:
    """R, F, S and S^in over their domains (``p1_cpsat.md``, P1C.D0-D3).

    ``budget`` is the capacity (scaled units, an int or an IntVar) and
    ``budget_upper`` an int at least as large; ``deadline`` goes to :attr:`P1Vars.deadline`.
    """
    v = P1Vars(model, grid, budget, budget_upper, deadline=deadline)
    for t, slots in enumerate(grid.stage_slots):
        v.check("compute variables (R)", t, grid.n)
        forced: dict[int, list[cp_model.IntVar]] = {}
        for r, i in slots:
            x = _bool(v, ("R", t, r, i))
            if grid.first[i] == (t, t):
                forced.setdefault(i, []).append(x)
        for xs in forced.values():
            model.add_exactly_one(xs)  # P1C.C1: the one first computation of a forced node
    for i, (lo, hi) in enumerate(grid.first):
        if lo < hi:
            for t in range(lo, hi + 1):
                _bool(v, ("F", t, i))
    for i, (lo, hi) in enumerate(grid.retain_stages):
        if grid.size[i] == 0:
            continue
        for t in range(lo, hi + 1):
            _bool(v, ("S", t, i))
    for g, last in enumerate(grid.input_retain_last):
        for t in range(last + 1):
            _bool(v, ("Sin", t, g), 1 if t == 0 else None)
    return v


def items_read(grid: P1Data, k: int) -> list[Item]:
    """The items computing node k reads: its predecessors' outputs and its graph inputs."""
    return [("node", p) for p in grid.preds[k]] + [("input", g) for g in grid.node_inputs[k]]


def items_read_or_made(grid: P1Data, k: int) -> list[Item]:
    """``D(k)``: the items computing node k reads or writes (with a positive size)."""
    items: list[Item] = [("node", k)] if grid.size[k] > 0 else []
    items += [("node", p) for p in grid.preds[k]]
    items += [("input", g) for g in grid.node_inputs[k]]
    return items


def readers_of(grid: P1Data, item: Item) -> tuple[int, ...]:
    kind, x = item
    return grid.consumers[x] if kind == "node" else grid.input_readers[x]


def add_free_variables(v: P1Vars) -> None:
    """``FREE[t,i,r,k]``: item i is released right after slot (r, k) of stage t."""
    for t, slots in enumerate(v.grid.stage_slots):
        v.check("free variables (FREE)", t, v.grid.n)
        for r, k in slots:
            for item in items_read_or_made(v.grid, k):
                _bool(v, ("FREE", t, item, r, k))


def add_memory_variables(v: P1Vars) -> None:
    """``U[t,r,k]``: memory held while slot (r, k) of stage t is (or would be) computed."""
    for t, slots in enumerate(v.grid.stage_slots):
        for r, k in slots:
            v.var[("U", t, r, k)] = v.model.new_int_var(0, v.budget_upper, f"U_{t}_{r}_{k}")


def add_retention_pieces(v: P1Vars) -> None:
    """One optional interval per (stage, item) that may be resident in the stage (P1C.C10).

    The time axis gives each stage ``t`` the slots ``[offset[t], offset[t+1])``, one
    per slot of the stage.  A piece starts at the stage's first slot when the item is
    retained into the stage, at the slot where it is computed otherwise, and ends
    (exclusive) after its last reader in the stage, or at the stage's end when it is
    retained into the next stage.
    """
    grid, model = v.grid, v.model
    v.offset = [0]
    for slots in grid.stage_slots:
        v.offset.append(v.offset[-1] + len(slots))
    for t, slots in enumerate(grid.stage_slots):
        v.check("retention pieces (C10)", t, grid.n)
        stage_start, stage_end = v.offset[t], v.offset[t + 1]
        own: dict[int, list[int]] = {}
        for r, k in slots:
            own.setdefault(k, []).append(r)
        items: list[tuple[Item, int]] = []
        for i in range(grid.n):
            if grid.size[i] > 0 and (i in own or ("S", t, i) in v.var):
                items.append((("node", i), grid.size[i]))
        for g in range(len(grid.input_ids)):
            if ("Sin", t, g) in v.var:
                items.append((("input", g), grid.input_size[g]))
        for item, demand in items:
            kind, x = item
            retained = v.var.get(("S", t, x) if kind == "node" else ("Sin", t, x))
            computed = [(v.Rs(t, r, x), v.position(t, r, x)) for r in own.get(x, ())] if kind == "node" else []
            starts = ([stage_start] if retained is not None else []) + [tau for _, tau in computed]
            lits = ([retained] if retained is not None else []) + [lit for lit, _ in computed]
            name = f"{kind}{x}_{t}"
            start: Lit
            present: Lit
            if len(starts) == 1:
                start, present = starts[0], lits[0]
            else:
                start = v.var[("start", t, item)] = model.new_int_var_from_domain(
                    cp_model.Domain.from_values(starts), f"start_{name}")
                present = v.var[("present", t, item)] = model.new_bool_var(f"present_{name}")
                model.add(present == sum(lits))
            end = model.new_int_var(min(starts) + 1, stage_end, f"end_{name}")
            size = model.new_int_var(1, stage_end - min(starts), f"size_{name}")
            v.var[("end", t, item)] = end
            interval = model.new_optional_interval_var(start, size, end, present, f"piece_{name}")
            v.pieces.append(Piece(item, t, demand, start, end, present, interval))
