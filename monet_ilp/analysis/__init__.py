"""Analysis on top of :func:`monet_ilp.solve.solve`: lower bounds, grading, Pareto fronts."""
