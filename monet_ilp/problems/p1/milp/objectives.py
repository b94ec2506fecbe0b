"""Objective of the P1 stage MILP: total compute cost (``formulations/p1_milp.md`` §5).

Part of the ``milp`` backend: sets the column costs of a
:class:`~.variables.LinearModel` so that its objective is the evaluator's
``compute_cycles`` of the schedule the solution describes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monet_ilp.problems.p1.milp.variables import Col, LinearModel, StageVariables

if TYPE_CHECKING:
    from monet_ilp.problems.p1.data import P1Data

__all__ = ["total_compute_cost"]


def total_compute_cost(model: LinearModel, data: P1Data, x: StageVariables) -> None:
    """``min Σ_t Σ_i c_i R[t,i]``: recomputations are columns, first computations a constant."""
    model.offset = float(sum(data.cost))
    for t in range(data.n):
        for i, r in x.R[t].items():
            if isinstance(r, Col):
                model.col_cost[r.index] = float(data.cost[i])
