"""A CP-SAT solver set up the same way for every interval model (P2, P3), and its bound."""

from __future__ import annotations

import math
import os
from typing import Any

from ortools.sat.python import cp_model

__all__ = ["configured_solver", "integer_bound"]


def configured_solver(time_limit: float | None, workers: int | None, seed: int, log: bool,
                      params: dict[str, Any] | None) -> cp_model.CpSolver:
    """A solver with the time limit, workers (default: the cores, at most 8), seed, log and extra parameters."""
    solver = cp_model.CpSolver()
    p = solver.parameters
    if time_limit is not None:
        p.max_time_in_seconds = float(time_limit)
    p.num_workers = int(workers) if workers else min(8, os.cpu_count() or 1)
    p.random_seed = int(seed)
    p.log_search_progress = bool(log)
    for key, value in (params or {}).items():
        if isinstance(value, (list, tuple)):  # repeated fields (e.g. extra_subsolvers) are extended
            getattr(p, key).extend(value)
        else:
            setattr(p, key, value)
    return solver


def integer_bound(bound: float) -> int:
    """A solver's bound on an integer objective, rounded up (with a margin for float noise)."""
    return math.ceil(bound - 1e-6)
