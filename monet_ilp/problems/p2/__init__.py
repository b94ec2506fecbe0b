"""P2: layer-to-core allocation with transfers (``formulations/p2_problem.md``).

:mod:`.data` is what both backends share; :mod:`.cpsat` and :mod:`.milp` are the models.
"""
