"""Objectives of the P1 models: total compute cost (P1C.O1) and the memory peak (P1C.O2).

Fourth step of the backend, see ``formulations/p1_cpsat.md``.  Both are integer:
P1C.O1 is exactly the evaluator's ``compute_cycles`` of the extracted sequence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monet_ilp.problems.p1.cpsat.variables import Expr, P1Vars


def total_compute_cost(v: P1Vars) -> Expr:
    """P1C.O1: ``min sum_{t,r,i} c_i R[t,r,i]`` (first computations included)."""
    grid = v.grid
    cost = sum(grid.cost[key[3]] * x for key, x in v.var.items() if key[0] == "R" and grid.cost[key[3]])
    v.model.minimize(cost)
    return cost


def peak_memory(v: P1Vars) -> Expr:
    """P1C.O2: ``min B`` with ``B`` a variable capacity (the minimum feasible budget)."""
    v.model.minimize(v.budget)
    return v.budget
