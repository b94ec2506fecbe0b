"""Columns of the P1 stage MILP (Checkmate): the model container and R/S/FREE/U.

Part of the ``milp`` backend (Instance -> MILP -> Sequence).  The data of
``formulations/p1_milp.md`` §1, with the domain of §4, is the shared
:class:`~monet_ilp.problems.p1.data.P1Data`; :func:`add_variables` creates the
columns of §2, and fixes to constants every variable that §4 settles, so that no
column exists without a decision behind it.  :class:`LinearModel` is a
solver-neutral sparse model that :mod:`.solve` hands to HiGHS or CBC and writes as
MPS/LP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monet_ilp.problems.p1.data import P1Data

__all__ = [
    "Col",
    "Lin",
    "LinearModel",
    "StageVariables",
    "add_variables",
]


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

    def add(self, term: Term, scale: float = 1.0) -> Lin:
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

    def value_of(self, expr: Lin, values: Sequence[float]) -> float:
        return expr.const + sum(v * values[c] for c, v in expr.coef.items())


# =============================================================== the variables (§2)
@dataclass
class StageVariables:
    """The columns (or fixed constants) of R, S, FREE and U.

    ``R[t][i]``, ``S[t][e]`` hold a :class:`Col` or a constant; absent keys are 0.
    ``FREE[t]`` maps ``(e, k)`` to a column (free value ``e`` right after computing
    ``v_k`` in stage ``t``); ``later[(t, e, k)]`` lists the readers of ``e`` that
    stage ``t`` may still compute after ``v_k`` (P1M.C5).  ``U[t]`` maps ``k`` to the
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
        def n_cols(tables: Iterable[Mapping[Any, Term]]) -> int:
            return sum(isinstance(v, Col) for table in tables for v in table.values())

        return {
            "R": n_cols(self.R),
            "S": n_cols(self.S),
            "FREE": sum(len(f) for f in self.FREE),
            "U": sum(len(u) for u in self.U),
        }


def add_variables(model: LinearModel, data: P1Data, *, relax: bool = False) -> StageVariables:
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
    capacity = max(data.budget_bytes, 0) // data.scale  # P1M.C7, in units of g
    for t in range(n):
        ks = tuple(sorted(R[t]))
        positions.append(ks)
        decided = not any(isinstance(v, Col) for v in (*R[t].values(), *S[t].values()))
        # A stage without decisions is checked as a constant by P1M.C7; no U needed.
        U.append({} if decided else {
            k: model.add_column(f"U_{t}_{k}", 0.0, float(capacity), False) for k in ks})
    return StageVariables(R=R, S=S, FREE=FREE, later=later, U=U, positions=positions)

