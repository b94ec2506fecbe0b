"""P3 as a disjunctive MILP (PuLP, solved by HiGHS or CBC), for small instances.

The MILP backend of P3 (``formulations/p3_problem.md``, the class P3.K3); the mathematics,
with the labels cited below (X, W, M, O), is ``formulations/p3_milp.md``.  Runs are
optional (op, run number, core, variant) choices with integer starts; every copy of an
item in a memory has a free time; reads and transfers choose the copy they use; cores
and links are disjunctive resources (big-M, from time windows), and each memory's
capacity is checked at every copy's allocation with pairwise order binaries.  Each
better schedule found shortens the horizon, and the model is rebuilt with the tighter
big-Ms that follow (P3M.S1).  The data step and the schedule assembly are shared with the
CP-SAT model (:mod:`monet_ilp.problems.p3.data`).

One module per job: :mod:`.records` (run, transfer and copy slots, a solution),
:mod:`.model` (:class:`P3Milp`: columns, rows, objective, reading values back),
:mod:`.symmetry` (interchangeable cores, P3M.M15), :mod:`.start` (warm starts) and
:mod:`.solve` (the backend, :func:`solve_p3_milp`).  The solvers and the export are
the engines every MILP shares (:mod:`monet_ilp.engines`).
"""

from monet_ilp.problems.p3.milp.model import P3Milp
from monet_ilp.problems.p3.milp.solve import solve_p3_milp
from monet_ilp.problems.p3.milp.start import start_values
from monet_ilp.problems.p3.milp.symmetry import core_automorphisms

__all__ = ["P3Milp", "core_automorphisms", "solve_p3_milp", "start_values"]
