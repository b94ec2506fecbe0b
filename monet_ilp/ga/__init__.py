"""The genetic algorithm: NSGA-II over recompute, offload and allocation decisions.

The decoder from decisions to schedules is :mod:`monet_ilp.heuristics.decisions`
(grading uses it too); :mod:`.genome` maps genes to decisions and scores them with
the evaluator; :mod:`.nsga2` is the search and its front file.
"""
