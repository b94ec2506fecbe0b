"""Lower bounds that hold for every P1 schedule, not only for one model's class.

The exact P1 backends search a restriction of P1: Checkmate's stage form
(``formulations/p1_milp.md`` P1M.A1), the CP-SAT model's passes, a ``max_computes``
limit.  Their bounds hold over that class only.  The bounds here hold for *every*
P1 sequence of the instance (``formulations/p1_problem.md``: node-level values, first
computations in the instance's order, any number of recomputations of any node, in
any order between them, the optimizer rule), so they bound P1's optimum itself
(``formulations/bounds.md``, "P1: bounds over every schedule", BD.R0-R6, BD.B7, BD.B8,
BD.B10, BD.B11):

* ``every-op-once``: ``Σ_v c_v`` (every op runs at least once);
* ``cut`` (BD.B7): at each first computation, what memory forces out must come back at
  least once, at the price of a fractional min-cost cover; no solver, time linear in
  the sizes of the value ranges (plus a sort);
* ``closure`` (BD.B10): the same cuts, each an exact small ILP that also brings back
  what a recomputation reads (a value dropped at the cut, or recomputed after it); then
  BD.B11, chains of those ILPs linked by what stays resident between their cuts, where
  cuts apart each force recomputations of their own;
* ``lp`` and ``milp`` (BD.R0-R6): the *boundary relaxation*, which looks at the
  resident set only at the first computations and at whether each value is computed
  at least once between two of them; solved by HiGHS, its LP optimum or its MILP's
  dual bound.

:func:`all_schedules_bound` runs them within a time limit and returns the best as a
:class:`P1Bound`; BD.B8 (some first computation cannot fit) proves the instance
infeasible for every schedule.  The MILP's solution, read as a plan
(:func:`relaxation_sequence`, BD.R7), is often a P1 schedule at the relaxation's own
optimum: then that schedule is optimal over every P1 schedule.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.engines.highs import run_highs
from monet_ilp.engines.milp import INTEGER_GAP, SparseMilp, safe_ceil
from monet_ilp.errors import MonetError
from monet_ilp.heuristics.liveness import place_releases
from monet_ilp.problems.p1.data import p1_data
from monet_ilp.schedule import Release, Sequence

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.instance import Instance
    from monet_ilp.problems.p1.data import P1Data

__all__ = [
    "COLUMNS_PER_SECOND",
    "FULL_REACH_MAX_COLS",
    "HOLDS_FOR",
    "METHODS",
    "MILP_MAX_COLS",
    "MILP_MAX_COLS_UNLIMITED",
    "MIN_AUTO_COLS",
    "REACHES",
    "Boundary",
    "CutBound",
    "P1Bound",
    "all_schedules_bound",
    "auto_reach",
    "boundary_relaxation",
    "chain_bound",
    "chain_model",
    "closure_bound",
    "closure_model",
    "cut_bound",
    "every_op_once",
    "frees_node_values",
    "in_p1_class",
    "last_reader",
    "model_columns",
    "reach_top",
    "relaxation_sequence",
    "safe_ceil",
    "span_of",
]

#: The class every bound of this module holds for (BD.R0).
HOLDS_FOR = ("every P1 schedule of the instance (p1_problem.md: node-level values, first "
             "computations in the instance's order, any number of recomputations of any node "
             "in any order, the optimizer rule), so a lower bound on P1's optimum, not only "
             "on the stage form the milp and cpsat backends search")


def in_p1_class(graph: TrainingGraph, sequence: Sequence) -> bool:
    """Whether ``sequence`` lies in the class :data:`HOLDS_FOR` names (PF.B3).

    Its first computations follow the graph's op order, and it frees each op's outputs
    together (:func:`frees_node_values`).  The evaluator accepts more (any topological
    order, an op's outputs freed apart); a bound of this module holds for those only
    where it is every op once.
    """
    order = {op.id: k for k, op in enumerate(graph.ops)}
    seen: set[str] = set()
    firsts: list[int] = []
    for step in sequence.steps:
        if isinstance(step, Release) or step.op in seen:
            continue
        seen.add(step.op)
        firsts.append(order[step.op])
    return firsts == sorted(firsts) and frees_node_values(graph, sequence)


def frees_node_values(graph: TrainingGraph, sequence: Sequence) -> bool:
    """Whether ``sequence`` frees the non-persistent outputs of each op together (PF.B3).

    P1's values are node-level: PF.B2 holds for sequences whose every run of releases
    frees either all of an op's outputs that are resident or none of them.
    """
    resident: set[str] = set()
    released: list[str] = []

    def together() -> bool:
        producers = {graph.tensor(t).producer for t in released}
        apart = any(set(graph.op(p).outputs) & (resident - set(released))
                    for p in producers if p is not None)
        resident.difference_update(released)
        released.clear()
        return not apart

    for step in sequence.steps:
        if isinstance(step, Release):
            released.append(step.tensor)
            continue
        if released and not together():
            return False
        resident.update(t for t in graph.op(step.op).outputs if not graph.tensor(t).persistent)
    return together()


#: What :func:`all_schedules_bound` may be asked for; ``auto`` runs them all in turn.
METHODS = ("auto", "milp", "lp", "closure", "cut", "every-op-once")

#: Named ranges of the relaxation's values (BD.R0, the reach ``H``): ``full`` up to the
#: horizon ``h`` (P1M.D1), ``direct`` up to the last direct reader; an integer ``d`` goes
#: ``d`` cuts past the last direct reader (at most to ``h``); ``auto`` chooses ``d``.
REACHES = ("auto", "full", "direct")

#: ``reach="auto"`` takes the largest reach whose model has at most this many columns
#: (random layered DAGs, full reach: n = 250 62 000 columns, n = 500 250 000, n = 1000
#: a million), and fewer when time is short (:data:`COLUMNS_PER_SECOND`).
FULL_REACH_MAX_COLS = 120_000

#: ... at most this many columns per second left (HiGHS's LP on these models, measured on
#: random layered DAGs: 62 000 columns in 1.4-2.4 s, 250 000 in 20 s), and at least
#: :data:`MIN_AUTO_COLS`.
COLUMNS_PER_SECOND = 5_000
MIN_AUTO_COLS = 10_000

#: ``method="auto"`` solves the MILP after the LP, for its dual bound, up to this many
#: columns under a time limit, and up to :data:`MILP_MAX_COLS_UNLIMITED` without one
#: (where it runs to its optimum).
MILP_MAX_COLS = 250_000
MILP_MAX_COLS_UNLIMITED = 40_000

#: Rows built between two deadline checks.
CHECK_EVERY = 4096

#: MILPs with at least this many nonzeros run in a watched child process under a time
#: limit (as the milp backend's, ``p1_milp.md`` §8).
WATCHED_NONZEROS = 200_000

_ONE = -1  # a term fixed to 1
_ZERO = -2  # a term outside the value's range: 0 in the relaxation (BD.R0)


@dataclass(frozen=True)
class P1Bound:
    """A lower bound on the compute cycles of every P1 schedule of an instance.

    Attributes
    ----------
    value
        The bound (cycles; an integer: all costs are integers, fractional bounds are
        rounded up).  When :attr:`infeasible` no schedule exists and the value is only
        the largest bound computed before that was found.
    method
        What gave it: ``milp`` (the MILP's optimum or dual bound), ``lp`` (the LP
        optimum), ``closure`` (BD.B10), ``cut`` (BD.B7) or ``every-op-once``; a tie goes
        to the stronger one.
    proven_optimal_relaxation
        Whether ``value`` is the proven optimum of the relaxation named by ``method``
        (always for ``cut`` and ``every-op-once``; for ``milp``, when HiGHS closed the
        gap; for ``lp``, when the LP was solved; for ``closure``, when every cut was
        solved to optimality).
    seconds
        Wall time of the call.
    stats
        What each step gave and took: ``every_op_once``, ``cut``, ``cut_k``,
        ``closure``, ``closure_k``, ``closure_cuts`` (solved of those with an excess), ``lp``,
        ``milp``, their seconds and statuses, the model's size and reach, and why a
        step did not run.
    holds_for
        The class of schedules the bound holds for (:data:`HOLDS_FOR`).
    infeasible
        No P1 schedule of the instance exists (BD.B8, or the relaxation is infeasible).
    schedule
        The MILP's best solution read as a plan (BD.R7, :func:`relaxation_sequence`), or
        ``None`` when the MILP did not run or found no solution.  Not checked here: the
        evaluator decides whether it is a schedule.
    solver_optimum
        The MILP's optimum as HiGHS proved it (status optimal: its dual bound within
        ``INTEGER_GAP`` of an integer solution), rounded up after ``1e-6`` only, the
        tolerance the ``milp`` backend's own optimum has; ``None`` otherwise.  A schedule
        the evaluator accepts at this cost is optimal over every P1 schedule (BD.R7).
        :attr:`value` stays the more cautious ``safe_ceil`` of the same bound.
    """

    value: int
    method: str
    proven_optimal_relaxation: bool
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)
    holds_for: str = HOLDS_FOR
    infeasible: bool = False
    schedule: Sequence | None = None
    solver_optimum: int | None = None


# ================================================================= ranges of the values
def last_reader(data: P1Data, e: int) -> int:
    """``L(e)``: the last node reading value ``e`` directly (``e`` itself for a node nobody reads)."""
    users = data.users[e]
    if users:
        return users[-1]
    return e  # an input always has a reader (unread inputs are not values)


def span_of(reach: str | int) -> int | None:
    """The reach as a span: ``None`` for ``full``, 0 for ``direct``, an integer as it is."""
    if reach == "full":
        return None
    if reach == "direct":
        return 0
    if isinstance(reach, bool) or not isinstance(reach, int) or reach < 0:
        raise MonetError(f"unknown reach {reach!r}", field="reach",
                         fix="use 'auto', 'full', 'direct' or a number of cuts >= 0")
    return reach


def reach_top(data: P1Data, e: int, span: int | None) -> int:
    """``top(e)``: the last cut in value ``e``'s range (BD.R0).

    The reach is ``H(e) = min(h(e), L(e) + span)`` (``span=None``: the horizon ``h(e)``);
    after the first optimizer op ``t_u`` the range goes on only while a direct reader is
    left (no recomputation, BD.R6), so ``top(e) = min(H(e), max(t_u, L(e)))``.
    """
    last = last_reader(data, e)
    horizon = data.horizon[e] if span is None else min(data.horizon[e], last + span)
    return min(horizon, max(data.first_update, last))


def _range_start(data: P1Data, e: int) -> int:
    """The first cut of value ``e``'s range: the node itself (``s[e,e] = 1``), or 0 for an input."""
    return e if e < data.n else 0


def model_columns(data: P1Data, reach: str | int) -> int:
    """Columns of the relaxation with ``reach``, counted without building it (an upper bound:
    the terms BD.R1 and BD.R6 fix are counted too)."""
    t_u = data.first_update
    span = span_of(reach)
    total = 0
    for e in range(data.n_values):
        top = reach_top(data, e, span)
        lo = _range_start(data, e)
        total += max(0, min(top, t_u) - lo)  # s up to t_u
        if e < data.n:
            total += max(0, min(top, t_u) - lo)  # r
    return total


# ===================================================================== every op once
def every_op_once(data: P1Data) -> int:
    """``Σ_v c_v``: every op is computed at least once (its first computation)."""
    return sum(data.cost)


# ============================================================================ BD.B7
@dataclass(frozen=True)
class CutBound:
    """The cut bound BD.B7 (and the feasibility check BD.B8) of one instance.

    ``value`` is ``Σ_v c_v + max_k cover_k`` rounded up, ``cover`` the largest cover
    (exact), ``k`` the cut that gives it (``None`` if no cut forces anything out);
    ``infeasible`` names the first cut whose mandatory set does not fit (BD.B8).
    """

    value: int
    cover: Fraction
    k: int | None
    infeasible: str | None = None
    #: The cuts with a positive excess, largest cover first (BD.B10 solves them in this order).
    cuts: tuple[int, ...] = ()


def cut_bound(data: P1Data, deadline: Deadline | None = None) -> CutBound:
    """BD.B7: at the first computation of each node ``k``, the resident values that no schedule
    can drop (BD.B8) and those it may drop at the price of one recomputation each; what does
    not fit must be dropped, at least at the fractional min-cost cover's price.

    Time: one pass over the direct ranges ``(e, L(e)]``, a sort per cut.

    Raises
    ------
    OutOfTime
        ``deadline`` passed during the sweep.
    """
    deadline = deadline or Deadline(None)
    n, t_u, budget = data.n, data.first_update, data.budget
    size = data.size + data.input_size
    base = every_op_once(data)
    # Per cut: the bytes that must be resident (mandatory), and the values that may be dropped.
    mandatory = [0] * n
    optional: list[list[int]] = [[] for _ in range(n)]
    reads = data.reads
    for e in range(data.n_values):
        if size[e] == 0:
            continue
        users = data.users[e]
        if not users:
            continue
        last = users[-1]
        if e >= n:  # BD.B8: an input read at or after k is resident at k (never recomputed)
            for k in range(last + 1):
                mandatory[k] += size[e]
            continue
        for k in range(e + 1, last + 1):
            if k >= t_u or e in reads[k]:
                mandatory[k] += size[e]  # read at k, or no recomputation left before its reader
            else:
                optional[k].append(e)
        if e % 256 == 0:
            deadline.check("the P1 cut bound", f"value {e:,} of {data.n_values:,}")
    # A value counted optional at k has a reader after k: users(e) lies beyond k, e not read at k.
    best = Fraction(0)
    best_k: int | None = None
    covers: list[tuple[Fraction, int]] = []
    for k in range(n):
        held = mandatory[k] + data.size[k]
        if held > budget:
            return CutBound(base, best, best_k, infeasible=(
                f"BD.B8: the first computation of {data.ops[k]!r} (node {k}) needs "
                f"{held * data.scale:,} bytes resident, more than the {data.budget_bytes:,} "
                "bytes available"))
        excess = held + sum(size[e] for e in optional[k]) - budget
        if excess <= 0:
            continue
        cover = _fractional_cover(excess, [(data.cost[e], size[e]) for e in optional[k]])
        covers.append((cover, k))
        if cover > best:
            best, best_k = cover, k
        if k % 256 == 0:
            deadline.check("the P1 cut bound", f"cut {k:,} of {n:,}")
    order = tuple(k for _, k in sorted(covers, key=lambda ck: (-ck[0], ck[1])))
    return CutBound(base + math.ceil(best), best, best_k, cuts=order)


def _fractional_cover(excess: int, items: list[tuple[int, int]]) -> Fraction:
    """The least ``Σ c_i x_i`` with ``Σ m_i x_i >= excess``, ``0 <= x_i <= 1`` (items ``(c, m)``,
    ``m > 0``; their total at least ``excess``): cheapest per byte first (exact)."""
    items = sorted(items, key=lambda cm: Fraction(cm[0], cm[1]))
    cost = Fraction(0)
    left = excess
    for c, m in items:
        if m >= left:
            return cost + Fraction(c * left, m)
        cost += c
        left -= m
    return cost  # not reached: the caller's mandatory check leaves enough to drop


# ================================================== rows for HiGHS (BD.B10, BD.R0-R6)
class _Rows:
    """Rows ``lb <= a·x <= ub`` in CSR form, constants folded away, a deadline checked."""

    def __init__(self, deadline: Deadline) -> None:
        self.start = [0]
        self.index: list[int] = []
        self.value: list[float] = []
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.deadline = deadline
        self.count: dict[str, int] = {}

    def add(self, family: str, terms: list[tuple[int, float]], const: float, lb: float,
            ub: float) -> bool:
        """Add ``lb <= Σ coef·col + const <= ub`` (terms with column indices only, distinct).

        Returns whether the row can hold: a row without columns is checked, not stored.
        """
        if not terms:
            return lb - 1e-9 <= const <= ub + 1e-9
        if len(self.lb) % CHECK_EVERY == 0:
            self.deadline.check("building the P1 boundary relaxation",
                                lambda: f"{len(self.lb):,} rows")
        self.index.extend(c for c, _ in terms)
        self.value.extend(v for _, v in terms)
        self.start.append(len(self.index))
        self.lb.append(lb - const)
        self.ub.append(ub - const)
        self.count[family] = self.count.get(family, 0) + 1
        return True


# ========================================================================== BD.B10
#: BD.B10's HiGHS seconds per cut at most (its dual bound is kept when a cut stops there).
CLOSURE_CUT_S = 5.0
#: The share of the time left that ``all_schedules_bound(method="auto")`` gives BD.B10
#: after the relaxation's MILP, when that MILP is small (the MILP has the rest).
CLOSURE_SHARE = 0.5
#: The share BD.B10 and BD.B11 get before the relaxation, when its MILP is large: there
#: the LP stays below BD.B10 (random DAGs at 0.9, n = 250: 12,741 against 13,008; n = 500:
#: 25,573 against 25,889) and the MILP does not solve in minutes.
CLOSURE_FIRST_SHARE = 0.8
#: BD.B11: the share of BD.B10's time kept for its chains (the single cuts stop at the rest).
CHAIN_SHARE = 0.5
#: BD.B11: HiGHS seconds per chain at most (its dual bound is kept when it stops there).
CHAIN_S = 10.0
#: BD.B11: the cuts tried as the next link of a chain, per link.
CHAIN_TRIES = 3
#: BD.B11: a new link is at least ``n / CHAIN_SPACING`` first computations from the others.
CHAIN_SPACING = 50


@dataclass(frozen=True)
class ClosureBound:
    """The closure bound BD.B10 (with BD.B11's chains) of one instance.

    ``value`` is ``Σ_v c_v`` plus the largest proven restore cost over the cuts solved
    and the chains of cuts tried (``chain``: the one that gives it, if any), ``k`` the
    best single cut, ``solved`` how many cuts were solved (to optimality, or to their time
    limit with HiGHS's dual bound) out of ``cuts`` (those with an excess, largest BD.B7
    cover first), ``proven`` whether every cut was solved to
    optimality and no chain gives more (then ``value`` is BD.B10 itself, not a lower
    bound on it), ``infeasible``
    the cut whose restore problem has no solution (no P1 schedule exists).
    """

    value: int
    k: int | None
    solved: int
    cuts: int
    proven: bool
    infeasible: str | None = None
    #: BD.B11: the chain of cuts that gives ``value`` (empty when one cut gives it).
    chain: tuple[int, ...] = ()


def closure_model(data: P1Data, k: int) -> SparseMilp:
    """BD.B10's restore problem at cut ``k`` (``formulations/bounds.md``): the chain of
    one cut (:func:`chain_model`).

    Columns ``x[e]`` (value ``e`` resident at the first computation of ``k``) for the
    node values ``e < k`` and the read inputs, and ``y[e]`` (node ``e < k`` computed
    again after it) for ``k < t_u``; objective ``Σ c_e y[e]``.
    """
    return chain_model(data, (k,))


def chain_model(data: P1Data, cuts: Iterable[int]) -> SparseMilp:
    """BD.B11's restore problem over the cuts ``k_1 < … < k_m`` (``formulations/bounds.md``).

    Per cut ``k_i``: ``x_i[e]`` (value ``e`` resident at the first computation of ``k_i``)
    for the node values ``e < k_i`` and the read inputs, and ``y_i[e]`` (node ``e < k_i``
    computed again between cut ``k_i`` and cut ``k_{i+1}``, or after ``k_m``) for
    ``k_i < t_u``; objective ``Σ_i Σ_e c_e y_i[e]``.  One cut is BD.B10.
    """
    n, t_u = data.n, data.first_update
    size = data.size + data.input_size
    reads = data.reads
    ks = sorted(set(cuts))
    cost: list[float] = []
    col_lb: list[float] = []
    names: list[str] = []
    rows = _Rows(Deadline(None))

    def column(c: float, lb: float, name: str) -> int:
        cost.append(c)
        col_lb.append(lb)
        names.append(name)
        return len(cost) - 1

    x_before: dict[int, int] = {}
    y_before: dict[int, int] = {}
    for i, k in enumerate(ks):
        last = i + 1 == len(ks)
        values = [*range(k), *range(n, data.n_values)]
        read_now = set(reads[k])
        at = "" if len(ks) == 1 else f"@{data.label(k)}"
        x: dict[int, int] = {}
        y: dict[int, int] = {}
        for e in values:
            # BD.B10.1: what k reads is resident; BD.B10.2: so is an input read at or after k.
            forced = e in read_now or (e >= n and last_reader(data, e) >= k)
            x[e] = column(0.0, 1.0 if forced else 0.0, f"x_{data.label(e)}{at}")
            if e < n and k < t_u:
                y[e] = column(float(data.cost[e]), 0.0, f"y_{data.label(e)}{at}")
        # BD.B10.3 (the last cut) and BD.B11.1: read later (before the next cut), so resident
        # at k or computed after it (before the next cut).
        later = (values if last else
                 dict.fromkeys(w for v in range(k + 1, ks[i + 1]) for w in reads[v] if w in x))
        for e in later:
            if e not in read_now and (not last or last_reader(data, e) > k):
                rows.add("B10.3", [(x[e], 1.0)] + ([(y[e], 1.0)] if e in y else []), 0.0, 1.0, math.inf)
        for u, yu in y.items():  # BD.B10.4: a computation after k reads values resident or computed then
            for w in reads[u]:
                rows.add("B10.4", [(yu, 1.0), (x[w], -1.0)] + ([(y[w], -1.0)] if w in y else []), 0.0,
                         -math.inf, 0.0)
        # BD.B10.5: memory at cut k
        rows.add("B10.5", [(x[e], float(size[e])) for e in values if size[e] > 0], 0.0, -math.inf,
                 float(data.budget - data.size[k]))
        for e, xe in x.items():  # BD.B11.2: resident at k, so at the cut before, or computed since
            if e in x_before:
                rows.add("B11.2", [(xe, 1.0), (x_before[e], -1.0)]
                         + ([(y_before[e], -1.0)] if e in y_before else []), 0.0, -math.inf, 0.0)
        x_before, y_before = x, y
    return SparseMilp.of(
        cost=cost, col_lb=col_lb, col_ub=[1.0] * len(cost), row_lb=rows.lb, row_ub=rows.ub,
        start=rows.start, index=rows.index, value=rows.value, integer=[True] * len(cost),
        col_names=names)


def closure_bound(data: P1Data, cuts: Iterable[int], deadline: Deadline | None = None
                  ) -> ClosureBound:
    """BD.B10: at the first computation of node ``k``, the least cost of bringing back
    every value read after it, with what a recomputation reads; then BD.B11, the same
    over chains of cuts (``formulations/bounds.md``).

    Each cut is an exact restore problem (:func:`closure_model`, HiGHS, at most
    :data:`CLOSURE_CUT_S` seconds, its dual bound kept), in the order of ``cuts``
    (``CutBound.cuts``: the others cannot force anything out), with at most
    ``1 - CHAIN_SHARE`` of the time.  What is left grows a chain from the best cut
    (:func:`chain_bound`).  The bound is ``Σ_v c_v`` plus the largest; at the deadline
    what was solved so far gives it.
    """
    deadline = deadline or Deadline(None)
    base = every_op_once(data)
    order = list(cuts)
    singles = deadline.sub(1 - CHAIN_SHARE)
    values: dict[int, int] = {}
    proven = True
    for k in order:
        if singles.passed() or deadline.passed():
            break
        run = run_highs(closure_model(data, k), threads=1, gap_abs=INTEGER_GAP,
                        deadline=singles.sub(at_most=CLOSURE_CUT_S))
        if run.status == "infeasible":
            why = (f"BD.B10: at the first computation of {data.ops[k]!r} (node {k}), no set of "
                   f"values within the {data.budget_bytes:,} bytes available can bring back "
                   "every value read later")
            return ClosureBound(base + max(values.values(), default=0), None, len(values), len(order),
                                False, why)
        proven = proven and run.status == "optimal"
        values[k] = safe_ceil(run.bound) if run.bound is not None else 0
    # The first of the largest in the order solved (``values`` keeps that order).
    best_k = max(values, key=values.__getitem__, default=None)
    best = values[best_k] if best_k is not None else 0
    chain: tuple[int, ...] = ()
    if best_k is not None and best > 0 and not deadline.passed():
        chain, linked = chain_bound(data, values, best_k, deadline)
        if linked > best:
            best = linked
        else:
            chain = ()
    return ClosureBound(base + best, best_k, len(values), len(order),
                        proven and len(values) == len(order) and not chain, chain=chain)


def chain_bound(data: P1Data, values: dict[int, int], start: int, deadline: Deadline
                ) -> tuple[tuple[int, ...], int]:
    """BD.B11, greedily: from the cut ``start``, add the cut that raises the chain's bound
    most among :data:`CHAIN_TRIES` tries, the cuts with the largest BD.B10 value
    (``values``) at least ``n / CHAIN_SPACING`` first computations from every cut of the
    chain and from each other; at the deadline, or when no try raises it and every try
    was solved to optimality, stop.

    Each chain is solved by HiGHS with at most :data:`CHAIN_S` seconds at first, its
    dual bound kept.  When no try raises the bound but some stopped at that limit, the
    limit doubles and the round runs again, with the chain itself first (twice the
    limit) when its value is such a cut-short bound: proven, a chain is often worth
    more, and a longer one may prove above it.  Returns the best chain and its bound
    (``values[start]`` for the chain of one cut).
    """
    chain: tuple[int, ...] = (start,)
    best = values[start]
    spacing = max(1, data.n // CHAIN_SPACING)
    limit = CHAIN_S
    proven = True  # the chain's value is its optimum, not a dual bound cut at the limit

    def solved(cuts: tuple[int, ...], seconds: float) -> tuple[int | None, bool]:
        """HiGHS on the chain of ``cuts`` for at most ``seconds``: its dual bound rounded
        up (``None`` without one), and whether it is proven."""
        run = run_highs(chain_model(data, cuts), threads=1, gap_abs=INTEGER_GAP,
                        deadline=deadline.sub(at_most=seconds))
        return (None if run.bound is None else safe_ceil(run.bound)), run.status == "optimal"

    # Within its wrap-up HiGHS gets no time: a round there would only spin.
    margin = deadline.wrap_up + 0.1
    while not deadline.passed(margin=margin):
        near: list[int] = []  # the best cuts apart from the chain and from each other
        for k in sorted(values, key=lambda k: (-values[k], k)):
            if len(near) == CHAIN_TRIES or values[k] <= 0:
                break
            if all(abs(k - c) >= spacing for c in (*chain, *near)):
                near.append(k)
        if not proven:  # linked on a bound cut short at ``limit``: the chain again, with twice that
            value, proven = solved(chain, 2 * limit)
            best = max(best, value or 0)
        found: int | None = None
        found_proven = cut_short = False
        for k in near:
            if deadline.passed(margin=margin):
                break
            value, optimal = solved((*chain, k), limit)
            cut_short = cut_short or not optimal
            if value is not None and value > best:
                best, found, found_proven = value, k, optimal
        if found is None:
            if not cut_short:
                # Every try proven: each is at least the chain's optimum, so nothing is left.
                break
            limit *= 2
            continue
        chain = tuple(sorted((*chain, found)))
        proven = found_proven
    return chain, best


# ======================================================================== BD.R0-R6
@dataclass
class Boundary:
    """The boundary relaxation (BD.R0-R6) of one instance, built for HiGHS.

    ``milp`` is the model (binaries; the LP is its relaxation), ``reach`` the ranges
    used (``full`` or ``direct``), ``counts`` its size by family, ``infeasible`` a
    constant row that cannot hold (BD.R4 at a cut where nothing is left to decide).
    """

    milp: SparseMilp
    reach: str | int
    counts: dict[str, int]
    infeasible: str | None = None
    #: ``r_columns[e][k - e - 1]``: the column of ``r[e,k]`` (what :func:`relaxation_sequence` reads).
    r_columns: list[list[int]] = field(default_factory=list)


def boundary_relaxation(data: P1Data, *, reach: str | int = "full",
                        deadline: Deadline | None = None) -> Boundary:
    """Build the boundary relaxation BD.R0-R6 of ``data`` (``formulations/bounds.md``).

    Columns: ``s[e,k]`` (value ``e`` resident at the first computation of node ``k``) for
    the cuts of ``e``'s range that BD.R1 and BD.R6 leave open, and ``r[e,k]`` (node ``e``
    computed at least once between the first computations of ``k-1`` and ``k``) for
    ``e < k <= min(top(e), t_u)``.  Objective ``Σ c_v + Σ c_e r[e,k]``.

    Parameters
    ----------
    data
        The instance's P1 data (fixed order).
    reach
        ``full`` (ranges up to the horizon), ``direct`` (up to the last direct reader:
        fewer columns, a weaker relaxation, still valid, BD.R0), or a number of cuts past
        the last direct reader.
    deadline
        Checked every :data:`CHECK_EVERY` rows.

    Raises
    ------
    OutOfTime
        The deadline passed while building.
    """
    span = span_of(reach)
    deadline = deadline or Deadline(None)
    n, t_u, budget = data.n, data.first_update, data.budget
    size = data.size + data.input_size
    cost: list[float] = []
    names: list[str] = []

    # ---- columns: s and r per value, over its range (BD.R0), fixed terms folded (BD.R1, R6)
    top = [reach_top(data, e, span) for e in range(data.n_values)]
    lo = [_range_start(data, e) for e in range(data.n_values)]
    s_term: list[list[int]] = []  # s_term[e][k - lo[e]]: a column, _ONE
    r_col: list[list[int]] = []  # r_col[e][k - e - 1]: a column (nodes, e < k <= min(top, t_u))
    for e in range(data.n_values):
        last = last_reader(data, e)
        users = set(data.users[e])
        fixed: list[int] = []
        for k in range(lo[e], top[e] + 1):
            if (k == lo[e] or k in users  # s[e,e] = 1; an input at the start; BD.R1
                    or (e >= n and k <= last)  # BD.R3: an input stays until its last reader
                    or (k >= t_u and k <= last)):  # BD.R6: nothing comes back after t_u
                fixed.append(_ONE)
            else:
                fixed.append(len(cost))
                cost.append(0.0)
                names.append(f"s_{data.label(e)}_{k}")
        s_term.append(fixed)
        rs: list[int] = []
        if e < n:
            for k in range(e + 1, min(top[e], t_u) + 1):
                rs.append(len(cost))
                cost.append(float(data.cost[e]))
                names.append(f"r_{e}_{k}")
        r_col.append(rs)
        if e % 256 == 0:
            deadline.check("building the P1 boundary relaxation",
                           lambda: f"{len(cost):,} columns")

    def s_at(e: int, k: int) -> int:
        """The term of ``s[e,k]``: a column, _ONE, or _ZERO outside the range."""
        if k < lo[e] or k > top[e]:
            return _ZERO
        return s_term[e][k - lo[e]]

    def r_at(e: int, k: int) -> int:
        if e >= n or k <= e or k > min(top[e], t_u):
            return _ZERO
        return r_col[e][k - e - 1]

    rows = _Rows(deadline)
    contradiction: str | None = None

    def gather(pairs: list[tuple[int, float]]) -> tuple[list[tuple[int, float]], float]:
        terms: list[tuple[int, float]] = []
        const = 0.0
        for term, coef in pairs:
            if term >= 0:
                terms.append((term, coef))
            elif term == _ONE:
                const += coef
        return terms, const

    # ---- BD.R2 (nodes), BD.R3 (inputs): presence comes from somewhere
    for e in range(data.n_values):
        if e % 256 == 0:
            deadline.check("building the P1 boundary relaxation", f"R2, value {e:,}")
        for k in range(lo[e] + 1, top[e] + 1):
            here, before = s_at(e, k), s_at(e, k - 1)
            if here == _ONE and before == _ONE:
                continue
            terms, const = gather([(here, 1.0), (before, -1.0), (r_at(e, k), -1.0)])
            if not rows.add("R2", terms, const, -math.inf, 0.0) and contradiction is None:
                contradiction = (f"BD.R2: {data.label(e)} must be resident at cut {k} and "
                                 "cannot come back")
    # ---- BD.R4: a recomputation needs its inputs (rows only where every term is in range)
    for u in range(n):
        if u % 64 == 0:
            deadline.check("building the P1 boundary relaxation", f"R4, node {u:,}")
        for k in range(u + 1, min(top[u], t_u) + 1):
            ru = r_at(u, k)
            for w in data.reads[u]:
                if (k > top[w]) if w < n else (k - 1 > top[w]):
                    continue  # a term outside w's range: the row is dropped (BD.R0)
                before = s_at(w, k - 1)
                if before == _ONE:
                    continue
                terms, const = gather([(ru, 1.0), (before, -1.0), (r_at(w, k), -1.0)])
                rows.add("R4", terms, const, -math.inf, 0.0)
    # ---- BD.R5: memory at every first computation (values of positive size)
    per_cut_terms: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    per_cut_const = [0.0] * n
    for e in range(data.n_values):
        if size[e] == 0:
            continue
        for k in range(lo[e] if e >= n else e + 1, min(top[e], n - 1) + 1):
            term = s_at(e, k)
            if term >= 0:
                per_cut_terms[k].append((term, float(size[e])))
            elif term == _ONE:
                per_cut_const[k] += size[e]
    for k in range(n):
        const = per_cut_const[k] + data.size[k]
        if not rows.add("R5", per_cut_terms[k], const, -math.inf, float(budget)) \
                and contradiction is None:
            contradiction = (f"BD.R5: the first computation of {data.ops[k]!r} (node {k}) needs "
                             f"{int(const) * data.scale:,} bytes resident, more than the "
                             f"{data.budget_bytes:,} bytes available")
    milp = SparseMilp.of(
        cost=cost, col_lb=[0.0] * len(cost), col_ub=[1.0] * len(cost), row_lb=rows.lb,
        row_ub=rows.ub, start=rows.start, index=rows.index, value=rows.value,
        integer=[True] * len(cost), offset=float(every_op_once(data)), col_names=names,
        row_names=None, offset_name="first_computations",
        contradictions=[contradiction] if contradiction else [])
    counts = {"columns": milp.num_cols, "rows": milp.num_rows, "nonzeros": milp.num_nonzeros,
              "s": milp.num_cols - sum(len(rs) for rs in r_col), "r": sum(len(rs) for rs in r_col),
              **rows.count}
    return Boundary(milp, reach, counts, contradiction, r_col)


def relaxation_sequence(instance: Instance, data: P1Data, model: Boundary,
                        values: list[float]) -> Sequence:
    """BD.R7: a solution of the boundary relaxation read as a plan.

    Stage ``k`` computes the nodes ``e`` with ``r[e,k] = 1`` in node order, then node ``k``
    for the first time; every copy is freed right after its last reader
    (:func:`~monet_ilp.heuristics.liveness.place_releases`).  Every read follows a
    computation of its producer (node order is topological), so the plan is a P1
    sequence whose compute cycles are the solution's objective.  Its memory inside a
    stage is what the relaxation does not see: the evaluator decides whether it fits.
    """
    stages: dict[int, list[int]] = {}
    for e, columns in enumerate(model.r_columns):
        for offset, column in enumerate(columns):
            if values[column] > 0.5:
                stages.setdefault(e + 1 + offset, []).append(e)
    plan: list[str] = []
    for k in range(data.n):
        plan.extend(data.ops[e] for e in sorted(stages.get(k, ())))
        plan.append(data.ops[k])
    return Sequence(place_releases(instance.graph, plan),
                    meta={"backend": "relaxation", "model": "p1_boundary_relaxation (BD.R7)"})


# ================================================================= the public bound
def all_schedules_bound(instance: Instance, *, time_limit: float | None = None,
                        workers: int | None = None, method: str = "auto",
                        reach: str | int = "auto",
                        deadline: Deadline | None = None,
                        on_plan: Callable[[Sequence], None] | None = None) -> P1Bound:
    """A lower bound on the compute cycles of every P1 schedule of ``instance``.

    Holds for every P1 sequence with first computations in the instance's order, any
    number and order of recomputations (:data:`HOLDS_FOR`; ``formulations/bounds.md``
    BD.R0-R6, BD.B7, BD.B8, BD.B10, BD.B11); so a gap against it is a gap to P1's optimum, not
    only to the optimum of a backend's class.

    Parameters
    ----------
    instance
        A P1 instance.
    time_limit
        Seconds for the whole call (``None``: no limit).  The cut bound always runs (it
        is linear); with ``method="auto"`` the closure bound gets
        :data:`CLOSURE_FIRST_SHARE` of the time left before the relaxation, or, when the
        relaxation's MILP is small (at most :data:`MILP_MAX_COLS_UNLIMITED` columns at
        full reach), what its MILP leaves after it; the relaxation is built and solved
        in what is left, and stops cleanly at the limit with the best bound so far.
    workers
        HiGHS threads (default 1).
    method
        ``auto``: every-op-once, the cut bound, the closure bound, then the LP, then
        (models up to :data:`MILP_MAX_COLS` columns) the MILP, best of all; ``milp`` or
        ``lp``: the cut bound and that relaxation; ``closure``: the cut and closure
        bounds; ``cut``; ``every-op-once``.
    reach
        The relaxation's ranges (:data:`REACHES`): ``auto`` takes ``full`` up to
        :data:`FULL_REACH_MAX_COLS` columns, ``direct`` above.
    deadline
        A caller's deadline (it replaces ``time_limit``; cancelling it stops the call).
    on_plan
        Called with each improving solution of the relaxation's MILP read as a plan
        (BD.R7), as HiGHS finds it (a portfolio offers it to its search, PF.S5).

    Returns
    -------
    P1Bound
        The best bound, what gave it, and ``stats`` with every step.

    Raises
    ------
    MonetError
        Not a P1 instance, or an unknown ``method`` or ``reach``.
    """
    if method not in METHODS:
        raise MonetError(f"unknown bound method {method!r}", field="method",
                         fix=f"use one of: {', '.join(METHODS)}")
    if reach != "auto":
        span_of(reach)  # refuses an unknown reach
    began = time.perf_counter()
    deadline = deadline or Deadline(time_limit)
    data = p1_data(instance)
    base = every_op_once(data)
    stats: dict[str, Any] = {"n": data.n, "every_op_once": base}
    best = (base, "every-op-once", True)
    infeasible = False
    schedule: Sequence | None = None
    solver_optimum: int | None = None

    def result() -> P1Bound:
        value, how, proven = best
        stats["seconds"] = round(time.perf_counter() - began, 3)
        return P1Bound(value, how, proven, time.perf_counter() - began, stats, HOLDS_FOR,
                       infeasible, schedule, solver_optimum)

    if method == "every-op-once":
        return result()

    # ---- BD.B7 and BD.B8
    step = time.perf_counter()
    try:
        cut = cut_bound(data, deadline)
    except OutOfTime as stop:
        stats["cut_skipped"] = str(stop)
        return result()
    stats["cut"] = cut.value
    stats["cut_k"] = cut.k
    stats["cut_s"] = round(time.perf_counter() - step, 3)
    best = max(best, (cut.value, "cut", True), key=_rank)
    if cut.infeasible:
        stats["infeasible"] = cut.infeasible
        infeasible = True
        return result()
    if method == "cut":
        return result()

    # ---- BD.B10: each cut's restore problem, exactly.  Before the relaxation, with a share
    # of the time; after it when the relaxation's MILP is small (it often proves the
    # optimum at once there, which ends a portfolio), and only if the MILP was not solved.
    def closure_step(within: Deadline) -> None:
        nonlocal best, infeasible
        step = time.perf_counter()
        closure = closure_bound(data, cut.cuts, within)
        stats["closure"] = closure.value
        stats["closure_k"] = closure.k
        stats["closure_cuts"] = f"{closure.solved} of {closure.cuts}"
        if closure.chain:
            stats["closure_chain"] = list(closure.chain)
        stats["closure_s"] = round(time.perf_counter() - step, 3)
        best = max(best, (closure.value, "closure", closure.proven), key=_rank)
        if closure.infeasible:
            stats["infeasible"] = closure.infeasible
            infeasible = True

    closure_last = (method == "auto" and reach in ("auto", "full")
                    and model_columns(data, "full") <= MILP_MAX_COLS_UNLIMITED)
    if method == "closure" or (method == "auto" and not closure_last):
        closure_step(deadline if method == "closure" else deadline.sub(CLOSURE_FIRST_SHARE))
        if infeasible or method == "closure":
            return result()

    # ---- BD.R0-R6
    chosen = auto_reach(data, deadline.left()) if reach == "auto" else reach
    step = time.perf_counter()
    try:
        model = boundary_relaxation(data, reach=chosen, deadline=deadline)
    except OutOfTime as stop:
        stats["relaxation_skipped"] = str(stop)
        return result()
    stats["reach"] = chosen
    stats["model"] = model.counts
    stats["build_s"] = round(time.perf_counter() - step, 3)
    if model.infeasible:
        stats["infeasible"] = model.infeasible
        infeasible = True
        return result()
    threads = int(workers) if workers else 1
    cap = MILP_MAX_COLS if deadline.limited else MILP_MAX_COLS_UNLIMITED
    milp_too = method == "milp" or (method == "auto" and model.milp.num_cols <= cap)

    # The LP: all the time left without a MILP after it, half of it with one.
    if method in ("auto", "lp"):
        if deadline.passed():
            stats["lp_skipped"] = "no time left"
            return result()
        step = time.perf_counter()
        run = run_highs(model.milp, relax=True, threads=threads,
                        deadline=deadline.sub(0.5) if milp_too else deadline)
        stats["lp_s"] = round(time.perf_counter() - step, 3)
        stats["lp_status"] = run.status
        if run.status == "infeasible":
            stats["infeasible"] = "BD.R0-R6: the LP relaxation is infeasible"
            infeasible = True
            return result()
        if run.status == "optimal" and run.objective is not None:
            stats["lp"] = run.objective
            best = max(best, (max(base, safe_ceil(run.objective)), "lp", True), key=_rank)
    if milp_too:
        if deadline.passed():
            stats["milp_skipped"] = "no time left"
            return result()
        step = time.perf_counter()
        watch = deadline.limited and model.milp.num_nonzeros >= WATCHED_NONZEROS
        def report(kind: str, payload: Any) -> None:
            if on_plan is not None and kind == "incumbent":
                on_plan(relaxation_sequence(instance, data, model, payload[0]))

        run = run_highs(model.milp, threads=threads, gap_abs=INTEGER_GAP, watch=watch,
                        deadline=deadline.sub(1 - CLOSURE_SHARE / 2) if closure_last else deadline,
                        report=None if on_plan is None else report)
        stats["milp_s"] = round(time.perf_counter() - step, 3)
        stats["milp_status"] = run.status
        if run.status == "infeasible":
            stats["infeasible"] = "BD.R0-R6: the relaxation has no integer solution"
            infeasible = True
            return result()
        if run.bound is not None:  # HiGHS's dual bound: within INTEGER_GAP of a proven optimum
            value = max(base, safe_ceil(run.bound))
            stats["milp"] = run.bound
            stats["milp_objective"] = run.objective
            proven = (run.status == "optimal" and run.objective is not None
                      and value >= round(run.objective))
            best = max(best, (value, "milp", proven), key=_rank)
            if run.status == "optimal":
                solver_optimum = max(base, math.ceil(run.bound - 1e-6))
        if run.values is not None:  # BD.R7: the solution as a plan, for the evaluator
            schedule = relaxation_sequence(instance, data, model, run.values)
            if on_plan is not None:  # the last incumbent, which a watched run may not have reported
                on_plan(schedule)
    if closure_last and stats.get("milp_status") != "optimal" and not deadline.passed():
        closure_step(deadline)
    return result()


def auto_reach(data: P1Data, seconds_left: float | None) -> str | int:
    """The reach ``reach="auto"`` takes: ``full`` when its model is small enough, else the
    largest span whose model is, else ``direct``.

    Small enough: at most :data:`FULL_REACH_MAX_COLS` columns, and at most
    :data:`COLUMNS_PER_SECOND` per second left (at least :data:`MIN_AUTO_COLS`).
    """
    cap = FULL_REACH_MAX_COLS
    if seconds_left is not None:
        cap = min(cap, max(MIN_AUTO_COLS, int(COLUMNS_PER_SECOND * seconds_left)))
    if model_columns(data, "full") <= cap:
        return "full"
    low, high = 0, max(data.n, 1)  # model_columns(low) may exceed cap; (high) does
    if model_columns(data, 0) > cap:
        return "direct"
    while high - low > 1:  # the columns grow with the span
        middle = (low + high) // 2
        if model_columns(data, middle) <= cap:
            low = middle
        else:
            high = middle
    return "direct" if low == 0 else low


#: Ties go to the stronger method (it says more: a proven relaxation optimum).
_STRENGTH = {"every-op-once": 0, "cut": 1, "closure": 2, "lp": 3, "milp": 4}


def _rank(entry: tuple[int, str, bool]) -> tuple[int, int]:
    return entry[0], _STRENGTH[entry[1]]
