"""The CP-SAT backend of P1 (rematerialisation): two encodings of one staged model.

``formulations/p1_cpsat.md`` holds the mathematics; the modules follow its steps:
the shared :mod:`monet_ilp.problems.p1.data` (data and domains P1C.D0-D3),
:mod:`.variables`, :mod:`.constraints` (P1C.C1-C12),
:mod:`.objectives` (P1C.O1, P1C.O2), :mod:`.encodings` (``stages``, ``intervals``),
:mod:`.hints` (schedules to and from cells), :mod:`.repair` (a hint heuristic) and
:mod:`.solve`.
"""

from monet_ilp.problems.p1.cpsat.encodings import DEFAULT_ENCODING, MEMORY_ENCODINGS, build_model
from monet_ilp.problems.p1.cpsat.solve import min_budget, min_budget_cpsat, solve_cpsat

ENCODINGS = tuple(MEMORY_ENCODINGS)

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "build_model",
    "min_budget",
    "min_budget_cpsat",
    "solve_cpsat",
]
