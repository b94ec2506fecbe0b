"""The two P1 encodings: Checkmate-like stage booleans, and Moccasin-like retention intervals.

Both share the schedule variables and P1C.C1-C7 (``formulations/p1_cpsat.md``); they differ
in how memory is held to the budget: ``stages`` chains a linear memory sum through each
stage (FREE, U; P1C.C8-C9), ``intervals`` gives every (stage, item) an optional retention
interval and puts them in one cumulative (P1C.C10-C11).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from monet_ilp.errors import MonetError
from monet_ilp.problems.p1.cpsat import constraints as C
from monet_ilp.problems.p1.cpsat import objectives as O
from monet_ilp.problems.p1.cpsat.variables import (
    P1Vars,
    add_free_variables,
    add_memory_variables,
    add_retention_pieces,
    add_schedule_variables,
)
from monet_ilp.problems.p1.data import P1Data, check_max_computes

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline

#: The default encoding (the faster one on the benchmark in ``p1_cpsat.md``).
DEFAULT_ENCODING = "intervals"


def _stage_memory(v: P1Vars) -> None:
    add_free_variables(v)
    add_memory_variables(v)
    C.frees_after_last_reader(v)
    C.memory_within_budget_stages(v)


def _interval_memory(v: P1Vars) -> None:
    add_retention_pieces(v)
    C.retention_pieces_cover_reads(v)
    C.memory_within_budget_cumulative(v)


MEMORY_ENCODINGS: dict[str, Callable[[P1Vars], None]] = {
    "stages": _stage_memory,
    "intervals": _interval_memory,
}


def build_model(
    grid: P1Data,
    *,
    encoding: str = DEFAULT_ENCODING,
    max_computes: int | None = None,
    minimize_peak: bool = False,
    peak_bounds: tuple[int, int] | None = None,
    deadline: Deadline | None = None,
) -> P1Vars:
    """Build the CP-SAT model of ``grid``.

    Parameters
    ----------
    grid
        The data (:func:`~monet_ilp.problems.p1.data.p1_data`).
    encoding
        ``"stages"`` or ``"intervals"``.
    max_computes
        P1C.C6: at most this many computations per node (``None``: no limit).
    minimize_peak
        P1C.O2 instead of P1C.O1: the budget becomes a variable in ``peak_bounds`` (scaled
        units) and is minimised.
    deadline
        A :class:`~monet_ilp.engines.deadline.Deadline`: past it the builders raise
        :class:`~monet_ilp.engines.deadline.OutOfTime` (and report progress before).
    """
    if encoding not in MEMORY_ENCODINGS:
        raise MonetError(f"unknown encoding {encoding!r}", field="encoding",
                         fix=f"use one of: {', '.join(MEMORY_ENCODINGS)}")
    check_max_computes(max_computes)
    model = cp_model.CpModel()
    budget: int | cp_model.IntVar
    if minimize_peak:
        lo, hi = peak_bounds or (grid.peak_lower_bound, grid.peak_lower_bound)
        budget = model.new_int_var(lo, hi, "B")
        upper = hi
    else:
        budget = upper = grid.budget
    v = add_schedule_variables(model, grid, budget, upper, deadline)
    C.first_computation_once(v)
    C.inputs_resident_when_computing(v)
    C.retained_only_if_held(v)
    C.once_per_stage(v)
    C.computations_and_retentions_used(v)
    C.at_most_computes(v, max_computes)
    C.first_computations_topological(v)
    C.passes_canonical(v)
    MEMORY_ENCODINGS[encoding](v)
    if minimize_peak:
        O.peak_memory(v)
    else:
        O.total_compute_cost(v)
    return v
