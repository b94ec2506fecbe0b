"""What every MILP engine shares: the solver names, the model they take, what a run returns.

A problem class builds its MILP in whatever form suits it (P1 a sparse matrix of its
own, P2 and P3 a PuLP model, :mod:`.pulp_models`) and hands the engines a
:class:`SparseMilp`; :func:`~monet_ilp.engines.highs.run_highs` and
:func:`~monet_ilp.engines.cbc.run_cbc` solve it and return a :class:`SolverRun`,
:func:`~monet_ilp.engines.export.write_model` writes it as MPS or LP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from monet_ilp.errors import MonetError

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline

__all__ = ["INTEGER_GAP", "SOLVERS", "RowModel", "SolverRun", "SparseMilp", "check_solver", "finite_or_none",
           "safe_ceil", "trivial_run"]

#: The MILP solvers every MILP backend offers (option ``milp_solver``).
SOLVERS = ("highs", "cbc")

#: With integer costs an optimum is proven once the bound is within this of it: the
#: absolute gap the engines are asked to close on such objectives.
INTEGER_GAP = 0.5

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]


def check_solver(name: Any) -> str:
    """``name`` as a solver of :data:`SOLVERS` (case does not matter), else a user error."""
    solver = str(name).lower()
    if solver not in SOLVERS:
        raise MonetError(f"unknown MILP solver {name!r}", field="milp_solver",
                         fix=f"use one of: {', '.join(SOLVERS)}")
    return solver


def safe_ceil(value: float) -> int:
    """The least integer at least ``value`` less the solver's tolerance.

    HiGHS returns optima within feasibility tolerances (1e-7 on scaled rows):
    ``1e-6 + 1e-7 * |value|`` is taken off before rounding up, so that an integer optimum
    computed as ``5039.0000001`` gives 5039, never 5040 (on values near 1e12 cycles the
    bound gives up about 1e5 cycles, and stays a bound).
    """
    return math.ceil(value - 1e-6 - 1e-7 * abs(value))


def bound_ceil(value: float) -> int:
    """A HiGHS bound on an integer objective rounded up: to the nearest integer within a
    relative 1e-9 of it (float noise, either side), else up after 1e-6.

    Unlike :func:`safe_ceil` it gives up nothing on large values (1.6e9 cycles: safe_ceil
    loses about 160), and an overshoot such as ``1430462988.000001`` still gives the
    integer below.
    """
    nearest = round(value)
    if abs(value - nearest) <= 1e-9 * max(1.0, abs(value)):
        return int(nearest)
    return math.ceil(value - 1e-6)


@dataclass(eq=False)
class SparseMilp:
    """``min cost·x + offset  s.t.  row_lb <= A x <= row_ub,  col_lb <= x <= col_ub``,
    ``x_j`` integer where ``integer[j]``; ``A`` row-wise (``start``, ``index``, ``value``).

    Infinite bounds are ``±inf``.  Names (``col_names``, ``row_names``) are needed to
    write the model to a file (CBC's input, an export) and to read CBC's solution back;
    there the constant ``offset`` becomes a column named ``offset_name`` fixed at 1 (not
    every reader of MPS files takes an objective constant).  Solving needs no names.
    """

    cost: FloatArray
    col_lb: FloatArray
    col_ub: FloatArray
    row_lb: FloatArray
    row_ub: FloatArray
    start: IntArray
    index: IntArray
    value: FloatArray
    integer: BoolArray
    offset: float = 0.0
    col_names: list[str] | None = None
    row_names: list[str] | None = None
    offset_name: str = "objective_constant"
    #: Rows whose every variable is fixed and which cannot hold (what each says): the
    #: model is infeasible whatever the solver; a file keeps it so (a column fixed at 0
    #: that a row requires to be at least 1).
    contradictions: list[str] = field(default_factory=list)
    #: Files an engine wrote for this model (CBC's MPS file, shared by the LP and the
    #: MILP run); engines own the entries, and they go with the model.
    files: dict[str, Any] = field(default_factory=dict, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["files"] = {}  # open temporary folders stay with this process
        return state

    @classmethod
    def of(cls, *, cost: Any, col_lb: Any, col_ub: Any, row_lb: Any, row_ub: Any, start: Any,
           index: Any, value: Any, integer: Any, offset: float = 0.0,
           col_names: list[str] | None = None, row_names: list[str] | None = None,
           offset_name: str = "objective_constant",
           contradictions: list[str] | None = None) -> SparseMilp:
        """A model from sequences (lists, arrays), converted to the arrays the engines take."""
        return cls(np.asarray(cost, dtype=np.float64), np.asarray(col_lb, dtype=np.float64),
                   np.asarray(col_ub, dtype=np.float64), np.asarray(row_lb, dtype=np.float64),
                   np.asarray(row_ub, dtype=np.float64), np.asarray(start, dtype=np.int32),
                   np.asarray(index, dtype=np.int32), np.asarray(value, dtype=np.float64),
                   np.asarray(integer, dtype=bool), float(offset), col_names, row_names,
                   offset_name, list(contradictions or []))

    def file_col_names(self) -> list[str]:
        """The column names of :meth:`for_file`'s model."""
        if self.col_names is None:
            raise ValueError("a model written to a file needs column names")
        return (list(self.col_names) + ([self.offset_name] if self.offset else [])
                + (["contradiction"] if self.contradictions else []))

    def for_file(self) -> SparseMilp:
        """The model as a file holds it: the constant a column fixed at 1 (named
        :attr:`offset_name`), each contradiction a column fixed at 0 that a row requires to
        be at least 1, so that the file means the same wherever it is solved."""
        if self.col_names is None or self.row_names is None:
            raise ValueError("a model written to a file needs column and row names")
        cost, col_lb, col_ub = self.cost.tolist(), self.col_lb.tolist(), self.col_ub.tolist()
        integer, names = self.integer.tolist(), list(self.col_names)
        start, index, value = self.start.tolist(), self.index.tolist(), self.value.tolist()
        row_lb, row_ub, row_names = self.row_lb.tolist(), self.row_ub.tolist(), list(self.row_names)
        extra = [(self.offset, 1.0, self.offset_name)] if self.offset else []
        if self.contradictions:
            extra.append((0.0, 0.0, "contradiction"))
        for c, fixed, name in extra:
            cost.append(c)
            col_lb.append(fixed)
            col_ub.append(fixed)
            integer.append(False)
            names.append(name)
        if self.contradictions:  # contradiction >= 1
            index.append(len(cost) - 1)
            value.append(1.0)
            start.append(len(index))
            row_lb.append(1.0)
            row_ub.append(math.inf)
            row_names.append("contradiction")
        return SparseMilp.of(cost=cost, col_lb=col_lb, col_ub=col_ub, row_lb=row_lb,
                             row_ub=row_ub, start=start, index=index, value=value,
                             integer=integer, col_names=names, row_names=row_names)

    @property
    def num_cols(self) -> int:
        return len(self.cost)

    @property
    def num_rows(self) -> int:
        return len(self.row_lb)

    @property
    def num_nonzeros(self) -> int:
        return len(self.index)

    def integral_objective(self) -> bool:
        """Whether every cost and the constant are integers (then :data:`INTEGER_GAP` proves)."""
        return bool(np.all(np.mod(self.cost, 1) == 0)) and float(self.offset).is_integer()

    def objective_of(self, values: list[float]) -> float:
        """``cost·values + offset``."""
        return float(self.offset + sum(c * v for c, v in zip(self.cost.tolist(), values,
                                                             strict=True) if c))


@dataclass
class SolverRun:
    """What an engine returned.

    ``status``: ``optimal``; ``infeasible``; ``feasible`` (stopped with a solution:
    ``values``, ``objective``); ``limit`` (stopped without one); ``error`` (the solver
    failed; ``detail`` says how).  ``bound`` is the best proven bound on the objective
    (``None`` when the solver has none), ``values`` the column values (``None`` without
    a solution), ``stopped`` whether ``stop_at`` interrupted it at a solution it accepted.
    """

    status: str
    values: list[float] | None = None
    objective: float | None = None
    bound: float | None = None
    seconds: float = 0.0
    detail: str = ""
    stopped: bool = False

    @property
    def has_solution(self) -> bool:
        return self.values is not None


class RowModel:
    """A MILP written column by column and row by row, then handed over as a :class:`SparseMilp`.

    Columns are ``0 <= x <= upper``, integer or not, with a cost; a row is its
    coefficients by column (terms of one column add up), a lower and an upper side.
    """

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.integer: list[bool] = []
        self.rows: list[tuple[dict[int, float], float, float]] = []

    def col(self, cost: float = 0.0, *, integer: bool = True, upper: float = 1.0) -> int:
        self.cost.append(float(cost))
        self.upper.append(upper)
        self.integer.append(integer)
        return len(self.cost) - 1

    def row(self, terms: Mapping[int, float] | Iterable[tuple[int, float]], lo: float, hi: float) -> None:
        merged: dict[int, float] = {}
        for j, a in (terms.items() if isinstance(terms, Mapping) else terms):
            merged[j] = merged.get(j, 0.0) + a
        self.rows.append((merged, lo, hi))

    def milp(self, offset: float = 0.0) -> SparseMilp:
        start: list[int] = [0]
        index: list[int] = []
        value: list[float] = []
        lo: list[float] = []
        hi: list[float] = []
        for terms, row_lo, row_hi in self.rows:
            index.extend(terms)
            value.extend(terms.values())
            start.append(len(index))
            lo.append(row_lo)
            hi.append(row_hi)
        return SparseMilp.of(cost=self.cost, col_lb=[0.0] * len(self.cost), col_ub=self.upper, row_lb=lo,
                             row_ub=hi, start=start, index=index, value=value, integer=self.integer,
                             offset=offset)


def trivial_run(milp: SparseMilp, deadline: Deadline) -> SolverRun | None:
    """The run an engine returns without starting its solver, if any: a model whose every
    variable is fixed is solved; with no time left the solver does not start."""
    if milp.contradictions:
        return SolverRun("infeasible", detail="; ".join(milp.contradictions[:3]))
    if milp.num_cols == 0:
        return SolverRun("optimal", [], milp.offset, milp.offset, 0.0, "no free variable")
    if deadline.passed():
        return SolverRun("limit", detail="no time left to start the solver")
    return None


def finite_or_none(value: float) -> float | None:
    """``value`` if finite, else ``None`` (solvers report a missing bound as ``±inf``)."""
    return value if math.isfinite(value) else None
