"""Constraints of the P1 stage MILP, one function per family of ``formulations/p1_milp.md`` §3.

Part of the ``milp`` backend: each function adds the rows of one family (P1M.C2-C8) to
a :class:`~.variables.LinearModel` over the columns of :func:`~.variables.add_variables`.
P1M.C1 (first computations in the fixed order) and the domain reductions P1M.D1-D4 are
already in the columns: a fixed variable is a constant that the rows fold away.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from monet_ilp.problems.p1.milp.variables import Col, Lin, LinearModel, StageVariables

if TYPE_CHECKING:
    from monet_ilp.problems.p1.data import P1Data

__all__ = [
    "add_constraints",
    "computations_per_op_limited",
    "frees_only_dead_values",
    "memory_within_budget",
    "no_recompute_of_resident_value",
    "reads_resident_values",
    "retained_values_were_present",
]

INF = math.inf
CUTS = True


def reads_resident_values(model: LinearModel, data: P1Data, x: StageVariables) -> None:
    """P1M.C2: every value ``e`` an op reads is resident (recomputed or retained) when it runs.

    ``R[t,j] <= R[t,e] + S[t,e]`` for every read ``e -> j``; a graph input is never
    recomputed, so for it ``R[t,j] <= S[t,e]``.
    """
    for t in range(data.n):
        for j in x.R[t]:
            for e in data.reads[j]:
                expr = Lin().add(x.r(t, j)).add(x.s(t, e), -1.0)
                if e < data.n:
                    expr.add(x.r(t, e), -1.0)
                model.add_row(expr, -INF, 0.0, f"C2_{t}_{data.label(e)}_{j}")


def retained_values_were_present(model: LinearModel, data: P1Data, x: StageVariables) -> None:
    """P1M.C3: a value kept into stage ``t+1``, or freed in stage ``t``, was resident in stage ``t``.

    ``S[t+1,e] + Σ_k FREE[t,e,k] <= R[t,e] + S[t,e]`` (no ``R`` for graph inputs:
    once freed, gone).  Without the FREE terms this is Checkmate's
    ``S[t+1,i] <= R[t,i] + S[t,i]``; with them it also says that a value is freed at
    most once, and only if it is there, which the relaxation would otherwise ignore
    (it frees fractions of one value at several places).
    """
    frees: list[dict[int, list[Col]]] = []
    for t in range(data.n):
        by_value: dict[int, list[Col]] = {}
        for (e, _k), column in x.FREE[t].items():
            by_value.setdefault(e, []).append(column)
        frees.append(by_value)
    for t in range(data.n):
        values = set(frees[t])
        if t + 1 < data.n:
            values.update(x.S[t + 1])
        for e in sorted(values):
            expr = Lin().add(x.s(t + 1, e)).add(x.s(t, e), -1.0)
            if e < data.n:
                expr.add(x.r(t, e), -1.0)
            for column in frees[t].get(e, ()):
                expr.add(column)
            model.add_row(expr, -INF, 0.0, f"C3_{t}_{data.label(e)}")


def no_recompute_of_resident_value(model: LinearModel, data: P1Data, x: StageVariables) -> None:
    """P1M.C4: ``R[t,i] + S[t,i] <= 1``: an op whose output is resident is not computed again.

    EV.E3 would count the output once (a rewrite), the recurrence P1M.C6 twice; recomputing a
    resident value never helps, so the row loses no schedule worth having.
    """
    for t in range(data.n):
        for i, r in x.R[t].items():
            s = x.s(t, i)
            if isinstance(r, Col) and isinstance(s, Col):
                model.add_row(Lin().add(r).add(s), -INF, 1.0, f"C4_{t}_{i}")


def frees_only_dead_values(model: LinearModel, data: P1Data, x: StageVariables) -> None:
    """P1M.C5: ``FREE[t,e,k]`` may be 1 only if ``e`` is dead right after ``v_k`` in stage ``t``.

    ``FREE <= R[t,k]`` and ``FREE <= 1 - R[t,j]`` for each later reader ``j`` of ``e``
    that stage ``t`` may compute; with P1M.C3 (``FREE <= 1 - S[t+1,e]``) these bound
    Checkmate's product from above.  No row bounds FREE from below: a smaller FREE
    only overstates memory, so the solver sets FREE to the product when memory binds.
    """
    for t in range(data.n):
        for (e, k), free in x.FREE[t].items():
            label = f"{t}_{data.label(e)}_{k}"
            model.add_row(Lin().add(free).add(x.r(t, k), -1.0), -INF, 0.0, f"C5r_{label}")
            for j in x.later[(t, e, k)]:
                model.add_row(Lin().add(free).add(x.r(t, j)), -INF, 1.0, f"C5u_{label}_{j}")


def memory_within_budget(model: LinearModel, data: P1Data, x: StageVariables) -> None:
    """P1M.C6 and P1M.C7: memory while each ``v_k`` runs in stage ``t``, at most the budget.

    ``U[t,k1] = Σ_e m_e S[t,e] + m_k1 R[t,k1]`` for the first op ``k1`` the stage may
    compute, then ``U[t,k] = U[t,k'] - Σ_e m_e FREE[t,e,k'] + m_k R[t,k]`` for
    consecutive ``k' < k``; ``U <= B`` is the columns' upper bound (P1M.C7).  Sizes count
    in ``data.scale`` (exact integers).  A stage without decisions is checked as
    a constant.
    """
    if data.budget_bytes < 0:
        model.contradictions.append(
            f"C7: the persistent tensors alone ({data.persistent_bytes} bytes) exceed the "
            f"capacity ({data.capacity_bytes} bytes)")
        return
    unit = data.scale
    for t in range(data.n):
        base = Lin()
        for e, kept in x.S[t].items():
            base.add(kept, float(data.value_bytes[e] // unit))
        if not x.U[t]:
            held = sum(data.value_bytes[e] for e, kept in x.S[t].items() if kept == 1) + data.value_bytes[t]
            if held > data.budget_bytes:
                model.contradictions.append(
                    f"C7: {data.ops[t]!r} (stage {t}) runs with {held} bytes resident, over the "
                    f"budget of {data.budget_bytes} bytes")
            continue
        freed_after: dict[int, list[int]] = {}
        for e, k in x.FREE[t]:
            freed_after.setdefault(k, []).append(e)
        previous = None
        for k in x.positions[t]:
            expr = Lin().add(x.U[t][k]).add(x.r(t, k), -float(data.value_bytes[k] // unit))
            if previous is None:
                for column, coef in base.coef.items():
                    expr.coef[column] = expr.coef.get(column, 0.0) - coef
                expr.const -= base.const
            else:
                expr.add(x.U[t][previous], -1.0)
                for e in freed_after.get(previous, ()):
                    expr.add(x.FREE[t][(e, previous)], float(data.value_bytes[e] // unit))
            model.add_row(expr, 0.0, 0.0, f"C6_{t}_{k}")
            previous = k


def computations_per_op_limited(model: LinearModel, data: P1Data, x: StageVariables) -> None:
    """P1M.C8: ``Σ_t R[t,i] <= C`` (``max_computes``), the first computation included."""
    columns: dict[int, list[Col]] = {}
    for t in range(data.n):
        for i, r in x.R[t].items():
            if isinstance(r, Col):
                columns.setdefault(i, []).append(r)
    for i, cols in columns.items():
        if len(cols) > data.max_computes - 1:
            expr = Lin()
            for c in cols:
                expr.add(c)
            model.add_row(expr, -INF, float(data.max_computes - 1), f"C8_{i}")


def recomputed_and_kept_values_are_used(model: LinearModel, data: P1Data,
                                        x: StageVariables) -> None:
    """P1M.C9: a recomputed or kept value is read later in its stage or kept into the next one.

    ``R[t,i] <= Σ_{j reads i, i < j <= t} R[t,j] + S[t+1,i]`` and
    ``S[t,e] <= Σ_{j reads e, j <= t} R[t,j] + S[t+1,e]``.  Dropping a computation or
    a retention that nothing uses lowers cost and memory, so the rows cut off no
    optimum; they remove useless recomputations from the solver's incumbents and
    tighten the relaxation.
    """
    for t in range(data.n):
        for i, r in x.R[t].items():
            if isinstance(r, Col):
                expr = Lin().add(r).add(x.s(t + 1, i), -1.0)
                for j in data.users[i]:
                    if j <= t:
                        expr.add(x.r(t, j), -1.0)
                model.add_row(expr, -INF, 0.0, f"C9r_{t}_{i}")
        for e, s in x.S[t].items():
            if isinstance(s, Col):
                expr = Lin().add(s).add(x.s(t + 1, e), -1.0)
                for j in data.users[e]:
                    if j <= t:
                        expr.add(x.r(t, j), -1.0)
                model.add_row(expr, -INF, 0.0, f"C9s_{t}_{data.label(e)}")


def add_constraints(model: LinearModel, data: P1Data, x: StageVariables) -> None:
    """Every family of §3, in order."""
    reads_resident_values(model, data, x)
    retained_values_were_present(model, data, x)
    no_recompute_of_resident_value(model, data, x)
    frees_only_dead_values(model, data, x)
    memory_within_budget(model, data, x)
    computations_per_op_limited(model, data, x)
    if CUTS:
        recomputed_and_kept_values_are_used(model, data, x)
