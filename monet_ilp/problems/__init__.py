"""One package per problem class (``p1``, ``p2``, ``p3``): its data and its backends.

Each class has one data module (``data.py``) that all its backends use, and its
backends beside it (``cpsat``, ``milp``, and the chain DP for P1).  The registry
(:mod:`monet_ilp.problems.registry`) says which backend solves which class, with which
objectives and options, exactly over which class of schedules.  The mathematics is in
the top-level ``formulations/`` folder, and the code cites its labels.
"""
