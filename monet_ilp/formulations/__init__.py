"""Exact models (CP-SAT, MILP) and the chain DP; each backend in its own subpackage or module.

The mathematics of every model is in the top-level ``formulations/`` folder, and the
code cites its constraint labels.  Backends are reached through :func:`monet_ilp.solve`.
"""
