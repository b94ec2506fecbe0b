"""The MILP backend for P1: Checkmate's stage formulation on HiGHS (default) or CBC.

``formulations/p1_milp.md`` holds the mathematics; the code cites its labels.
:func:`solve_milp` is the ``milp`` backend of :func:`monet_ilp.solve`,
:func:`solve_lp_rounding` the ``heuristic:lp-round`` one; :func:`lp_bound` gives the
LP relaxation's bound and :func:`export_model` writes the model as MPS or LP.
"""

from monet_ilp.problems.p1.milp.lp_round import solve_lp_rounding
from monet_ilp.problems.p1.milp.solve import build_model, export_model, lp_bound, solve_milp

__all__ = ["build_model", "export_model", "lp_bound", "solve_lp_rounding", "solve_milp"]
