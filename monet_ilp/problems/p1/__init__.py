"""P1: rematerialisation on one core (``formulations/p1_problem.md``).

:mod:`.data` holds what every backend shares: the entry rules (``check_p1``) and the
staged data both exact models are built from (``p1_data``); :mod:`.cpsat`,
:mod:`.milp` and :mod:`.dp` (chains only) are its backends.
"""
