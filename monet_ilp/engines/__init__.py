"""Solver engines shared by every problem class: CP-SAT, HiGHS, CBC, model export, deadlines.

A problem class builds its model; an engine runs it.  Nothing here knows P1, P2 or P3.

- :mod:`.deadline`: one time limit for a whole backend call;
- :mod:`.cpsat`: the CP-SAT runner (parameters, workers, time limit, log, hints);
- :mod:`.milp`: what the MILP engines share: the solver names, the sparse model they
  take (:class:`~.milp.SparseMilp`), the outcome of a run (:class:`~.milp.SolverRun`);
- :mod:`.highs`, :mod:`.cbc`: the HiGHS and CBC runners (HiGHS optionally in a child
  process killed at the deadline; CBC always a killable process);
- :mod:`.pulp_models`: a PuLP model as a :class:`~.milp.SparseMilp`, run by either;
- :mod:`.export`: a model written as MPS or LP.
"""

from __future__ import annotations

import os

__all__ = ["MAX_DEFAULT_WORKERS", "default_workers"]

#: Solver threads when the caller gives none: the machine's cores, at most this many.
MAX_DEFAULT_WORKERS = 8


def default_workers(workers: int | None) -> int:
    """``workers`` if given (and not 0), else the machine's cores, at most :data:`MAX_DEFAULT_WORKERS`."""
    return int(workers) if workers else min(MAX_DEFAULT_WORKERS, os.cpu_count() or 1)
