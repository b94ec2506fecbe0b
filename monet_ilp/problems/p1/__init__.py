"""P1: rematerialisation on one core (``formulations/p1_problem.md``).

:mod:`.data` is the staged grid both exact models share; :mod:`.cpsat`, :mod:`.milp`
and :mod:`.dp` (chains only) are its backends.
"""
