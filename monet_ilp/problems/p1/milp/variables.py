"""Columns of the P1 stage MILP (Checkmate): data in stage form, model container, R/S/FREE/U.

Part of the ``milp`` backend (Instance -> MILP -> Sequence).  :class:`StageData`
reads from a P1 instance what ``formulations/p1_milp.md`` §1 calls the data;
:func:`add_variables` creates the columns of §2, and fixes to constants every
variable that §4 (domain) settles, so that no column exists without a decision
behind it.  :class:`LinearModel` is a solver-neutral sparse model that
:mod:`.solve` hands to HiGHS or CBC and writes as MPS/LP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind
from monet_ilp.instance import Instance, Objective

__all__ = [
    "Col",
    "LinearModel",
    "Lin",
    "StageData",
    "StageVariables",
    "add_variables",
]


# =================================================================== the data (§1)
@dataclass(frozen=True)
class StageData:
    """P1 in stage form (``formulations/p1_milp.md`` §1), 0-based.

    *Values* are what memory holds: value ``i < n`` is the set of non-persistent
    outputs of op ``v_i`` (kept and freed together), value ``n + x`` is the x-th
    graph input that some op reads.  Stage ``t`` (``0 <= t < n``) ends with the
    first computation of ``v_t``.

    Attributes
    ----------
    ops
        Op ids ``v_0 .. v_{n-1}`` in the instance's order.
    cost
        ``c_i``: cycles of ``v_i`` on the core.
    size
        ``m_e`` of every value (ops, then read graph inputs), bytes.
    tensors
        Tensor ids of every value (what a ``Release`` names).
    reads
        For each op, the values it reads (op values and input values), sorted.
    users
        For each value, the ops that read it, sorted.
    unread_inputs
        Graph inputs no op reads: released before the first computation.
    horizon
        ``h(e)``: the largest index of an op that reads ``e`` directly or through
        a chain of ops (``i`` itself for an op nobody reads); see §4 (D1).
    first_update
        ``t_u``: index of the first optimizer op, ``n`` when there is none (D2).
    max_computes
        ``C``: computations allowed per op (D3, C8).
    capacity_bytes, persistent_bytes
        The core memory's capacity, and the persistent bytes it holds (E1.5).
    budget_bytes
        What the model allows the values: the capacity minus the persistent bytes
        (a smaller figure when the LP rounding asks for slack).
    byte_unit
        The greatest common divisor of the value sizes: U counts in this unit, so
        that every memory figure of the model is an exact integer (§2).
    """

    name: str
    core: str
    ops: tuple[str, ...]
    cost: tuple[int, ...]
    size: tuple[int, ...]
    tensors: tuple[tuple[str, ...], ...]
    reads: tuple[tuple[int, ...], ...]
    users: tuple[tuple[int, ...], ...]
    unread_inputs: tuple[str, ...]
    horizon: tuple[int, ...]
    first_update: int
    max_computes: int
    capacity_bytes: int
    persistent_bytes: int
    budget_bytes: int
    byte_unit: int = 1

    @property
    def n(self) -> int:
        return len(self.ops)

    @property
    def n_values(self) -> int:
        return len(self.size)

    def is_input(self, e: int) -> bool:
        return e >= len(self.ops)

    def label(self, e: int) -> str:
        """A short column-name label of value ``e``: the op index, or ``x<k>`` for an input."""
        return str(e) if e < self.n else f"x{e - self.n}"

    # ------------------------------------------------------------- domain (§4)
    def recompute(self, t: int, i: int) -> int | None:
        """``R[t,i]``: ``None`` for a decision variable, else its constant value."""
        if i == t:
            return 1  # C1: v_t is computed for the first time in stage t
        if i > t:
            return 0  # C1: lower triangular
        if self.max_computes <= 1 or t > self.first_update or t > self.horizon[i]:
            return 0  # D3, D2, D1
        return None

    def retain(self, t: int, e: int) -> int | None:
        """``S[t,e]`` (``e`` resident when stage ``t`` starts): ``None`` or a constant."""
        if t >= self.n or t > self.horizon[e]:
            return 0  # nothing follows the last stage; D1
        users = self.users[e]
        if e < self.n:
            if t <= e:
                return 0  # C1: not computed yet
        elif t <= users[0]:
            return 1  # D4: an input stays until its first reader has run
        if t > self.first_update:
            return int(t <= users[-1])  # D2: no recomputation any more
        return None


def stage_data(instance: Instance, *, max_computes: int | None = None) -> StageData:
    """Extract the stage data of a P1 instance (``p1_milp.md`` §1).

    Raises
    ------
    MonetError
        The instance is not a one-core sequence-form instance, its objective is not
        the compute cost (or the latency, which equals it on one core), an op is not
        costed on the core, or ``max_computes`` is not a positive integer.
    """
    if len(instance.cores) != 1 or instance.cores[0].memory != instance.input_home:
        raise MonetError(
            f"the MILP stage model solves P1 on one core whose memory holds the graph inputs; "
            f"instance {instance.name!r} has {len(instance.cores)} core(s) and inputs in "
            f"{instance.input_home!r}",
            field="instance", fix="build a P1 instance (make_instance(..., problem='P1'))")
    if instance.objective not in (Objective.COMPUTE, Objective.LATENCY):
        raise MonetError(
            f"the MILP stage model minimises the compute cost, not {instance.objective}",
            field="objective", fix="use the compute objective for P1")
    graph = instance.graph
    core = instance.cores[0]
    n = len(graph.ops)
    if max_computes is None:
        max_computes = n
    if isinstance(max_computes, bool) or not isinstance(max_computes, int) or max_computes < 1:
        raise MonetError(f"max_computes = {max_computes!r}", field="max_computes",
                         fix="give a positive integer (1 forbids recomputation)")
    index = {op.id: i for i, op in enumerate(graph.ops)}
    cost, size, tensors = [], [], []
    for op in graph.ops:
        row = instance.costs[op.id]
        if core.id not in row:
            raise MonetError(f"op {op.id!r} is not costed on core {core.id!r}",
                             field=f"costs.{op.id}", fix="cost every op on the P1 core")
        cost.append(row[core.id].cycles)
        outs = tuple(t for t in dict.fromkeys(op.outputs) if not graph.tensor(t).persistent)
        tensors.append(outs)
        size.append(sum(graph.tensor(t).bytes for t in outs))
    inputs = [t for t in graph.tensors if t.producer is None and not t.persistent]
    read_inputs = [t for t in inputs if t.consumers]
    input_value = {t.id: n + k for k, t in enumerate(read_inputs)}
    for t in read_inputs:
        tensors.append((t.id,))
        size.append(t.bytes)
    reads: list[tuple[int, ...]] = []
    users: list[list[int]] = [[] for _ in size]
    for j, op in enumerate(graph.ops):
        values = set()
        for name in op.inputs:
            tensor = graph.tensor(name)
            if tensor.persistent:
                continue
            values.add(index[tensor.producer] if tensor.producer is not None else input_value[name])
        reads.append(tuple(sorted(values)))
        for e in values:
            users[e].append(j)
    horizon = [0] * len(size)
    for i in range(n - 1, -1, -1):
        horizon[i] = max([i] + [horizon[j] for j in users[i]])
    for e in range(n, len(size)):
        horizon[e] = max(horizon[j] for j in users[e])
    first_update = next((i for i, op in enumerate(graph.ops) if op.kind is OpKind.OPTIMIZER), n)
    persistent = 0
    if instance.persistent_home == core.memory:  # E1.5: modelled and held in this memory
        persistent = sum(t.bytes for t in graph.tensors if t.persistent)
    capacity = instance.memory(core.memory).capacity_bytes
    return StageData(
        name=instance.name,
        core=core.id,
        ops=tuple(op.id for op in graph.ops),
        cost=tuple(cost),
        size=tuple(size),
        tensors=tuple(tensors),
        reads=tuple(reads),
        users=tuple(tuple(u) for u in users),
        unread_inputs=tuple(t.id for t in inputs if not t.consumers),
        horizon=tuple(horizon),
        first_update=first_update,
        max_computes=max_computes,
        capacity_bytes=capacity,
        persistent_bytes=persistent,
        budget_bytes=capacity - persistent,
        byte_unit=math.gcd(*size) or 1,
    )


# ============================================================ the model container
class Col:
    """A column (decision variable) of a :class:`LinearModel`."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"Col({self.index})"


Term = Col | int  # a column, or a variable the domain fixed to a constant


class Lin:
    """A linear expression over columns plus a constant (constants come from fixed variables)."""

    __slots__ = ("coef", "const")

    def __init__(self, const: float = 0.0):
        self.coef: dict[int, float] = {}
        self.const = const

    def add(self, term: Term, scale: float = 1.0) -> "Lin":
        if isinstance(term, Col):
            self.coef[term.index] = self.coef.get(term.index, 0.0) + scale
        else:
            self.const += scale * term
        return self

    @property
    def constant(self) -> bool:
        return not any(self.coef.values())

#: Rows (and columns) added between two deadline checks of a :class:`LinearModel`.
CHECK_EVERY = 1024


@dataclass
class LinearModel:
    """A sparse MILP ``min c·x + offset  s.t.  row_lb <= A x <= row_ub,  col_lb <= x <= col_ub``.

    Rows whose every variable is fixed are not stored: a violated one is recorded in
    :attr:`contradictions` (the instance is infeasible, whatever the solver).
    """

    name: str
    col_name: list[str] = field(default_factory=list)
    col_lb: list[float] = field(default_factory=list)
    col_ub: list[float] = field(default_factory=list)
    col_integer: list[bool] = field(default_factory=list)
    col_cost: list[float] = field(default_factory=list)
    offset: float = 0.0
    row_start: list[int] = field(default_factory=lambda: [0])
    row_index: list[int] = field(default_factory=list)
    row_value: list[float] = field(default_factory=list)
    row_lb: list[float] = field(default_factory=list)
    row_ub: list[float] = field(default_factory=list)
    row_name: list[str] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)
    #: Checked every :data:`CHECK_EVERY` rows and columns while the model is built: past
    #: it, :class:`~monet_ilp.engines.deadline.OutOfTime` stops the build.
    deadline: Any = field(default=None, repr=False, compare=False)

    @property
    def num_cols(self) -> int:
        return len(self.col_name)

    @property
    def num_rows(self) -> int:
        return len(self.row_name)

    @property
    def num_nonzeros(self) -> int:
        return len(self.row_index)

    @property
    def num_integer(self) -> int:
        return sum(self.col_integer)

    def _check(self) -> None:
        self.deadline.check("building the P1 stage MILP",
                            lambda: f"{self.num_rows:,} rows, {self.num_cols:,} columns")

    def add_column(self, name: str, lb: float, ub: float, integer: bool) -> Col:
        if self.deadline is not None and len(self.col_name) % CHECK_EVERY == 0:
            self._check()
        self.col_name.append(name)
        self.col_lb.append(lb)
        self.col_ub.append(ub)
        self.col_integer.append(integer)
        self.col_cost.append(0.0)
        return Col(len(self.col_name) - 1)

    def add_row(self, expr: Lin, lb: float, ub: float, name: str) -> None:
        """Add ``lb <= expr <= ub`` (``±math.inf`` for a missing side)."""
        if self.deadline is not None and len(self.row_lb) % CHECK_EVERY == 0:
            self._check()
        lb -= expr.const
        ub -= expr.const
        items = [(c, v) for c, v in expr.coef.items() if v]
        if not items:
            if lb > 1e-9 or ub < -1e-9:
                self.contradictions.append(f"{name}: {lb + expr.const} <= {expr.const} <= "
                                           f"{ub + expr.const} cannot hold")
            return
        items.sort()
        self.row_index.extend(c for c, _ in items)
        self.row_value.extend(v for _, v in items)
        self.row_start.append(len(self.row_index))
        self.row_lb.append(lb)
        self.row_ub.append(ub)
        self.row_name.append(name)

    def value_of(self, expr: Lin, values) -> float:
        return expr.const + sum(v * values[c] for c, v in expr.coef.items())


# =============================================================== the variables (§2)
@dataclass
class StageVariables:
    """The columns (or fixed constants) of R, S, FREE and U.

    ``R[t][i]``, ``S[t][e]`` hold a :class:`Col` or a constant; absent keys are 0.
    ``FREE[t]`` maps ``(e, k)`` to a column (free value ``e`` right after computing
    ``v_k`` in stage ``t``); ``later[(t, e, k)]`` lists the readers of ``e`` that
    stage ``t`` may still compute after ``v_k`` (C5).  ``U[t]`` maps ``k`` to the
    column of the memory while ``v_k`` runs in stage ``t``, for the ``k`` the stage
    may compute (``positions[t]``).
    """

    R: list[dict[int, Term]]
    S: list[dict[int, Term]]
    FREE: list[dict[tuple[int, int], Col]]
    later: dict[tuple[int, int, int], tuple[int, ...]]
    U: list[dict[int, Col]]
    positions: list[tuple[int, ...]]

    def r(self, t: int, i: int) -> Term:
        return self.R[t].get(i, 0)

    def s(self, t: int, e: int) -> Term:
        return self.S[t].get(e, 0) if t < len(self.S) else 0

    def counts(self) -> dict[str, int]:
        def n_cols(tables: Iterable[Mapping]) -> int:
            return sum(isinstance(v, Col) for table in tables for v in table.values())

        return {
            "R": n_cols(self.R),
            "S": n_cols(self.S),
            "FREE": sum(len(f) for f in self.FREE),
            "U": sum(len(u) for u in self.U),
        }


def add_variables(model: LinearModel, data: StageData, *, relax: bool = False) -> StageVariables:
    """Create R and S (binary), FREE and U (continuous) for ``data`` in ``model``.

    Only the variables the domain (§4) leaves open become columns; the others are
    stored as constants so that constraints fold them away.  ``relax`` makes R and S
    continuous (the LP relaxation).
    """
    n = data.n
    R: list[dict[int, Term]] = []
    S: list[dict[int, Term]] = []
    for t in range(n):
        row: dict[int, Term] = {}
        for i in range(t + 1):
            state = data.recompute(t, i)
            if state is None:
                row[i] = model.add_column(f"R_{t}_{i}", 0.0, 1.0, not relax)
            elif state:
                row[i] = 1
        R.append(row)
        kept: dict[int, Term] = {}
        for e in list(range(t)) + list(range(n, data.n_values)):
            state = data.retain(t, e)
            if state is None:
                kept[e] = model.add_column(f"S_{t}_{data.label(e)}", 0.0, 1.0, not relax)
            elif state:
                kept[e] = 1
        S.append(kept)

    FREE: list[dict[tuple[int, int], Col]] = []
    later: dict[tuple[int, int, int], tuple[int, ...]] = {}
    for t in range(n):
        frees: dict[tuple[int, int], Col] = {}
        present = [e for e in S[t] if S[t][e] != 0] + [i for i in R[t] if i < t]
        for e in sorted(set(present)):
            if t in data.users[e] or data.retain(t + 1, e) == 1:
                continue  # read by v_t or kept for the next stage: never freed inside stage t
            candidates = data.users[e] if e >= n else (e,) + data.users[e]
            for k in candidates:
                if k >= t or not isinstance(R[t].get(k), Col):
                    continue  # frees after v_t change no U of stage t; k not computable
                frees[(e, k)] = model.add_column(f"F_{t}_{data.label(e)}_{k}", 0.0, 1.0, False)
                later[(t, e, k)] = tuple(j for j in data.users[e] if k < j < t
                                         and isinstance(R[t].get(j), Col))
        FREE.append(frees)

    U: list[dict[int, Col]] = []
    positions: list[tuple[int, ...]] = []
    capacity = max(data.budget_bytes, 0) // data.byte_unit  # C7, in units of g
    for t in range(n):
        ks = tuple(sorted(R[t]))
        positions.append(ks)
        decided = not any(isinstance(v, Col) for v in (*R[t].values(), *S[t].values()))
        # A stage without decisions is checked as a constant by C7; no U needed.
        U.append({} if decided else {
            k: model.add_column(f"U_{t}_{k}", 0.0, float(capacity), False) for k in ks})
    return StageVariables(R=R, S=S, FREE=FREE, later=later, U=U, positions=positions)

