"""P3: joint allocation, recomputation and offload under SRAM capacities (``formulations/p3_problem.md``).

:mod:`.data` is what both backends share; :mod:`.cpsat` and :mod:`.milp` are the models.
"""
