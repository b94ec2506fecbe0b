"""Certified lower bounds on an instance's latency or energy, and where each comes from.

Families (``formulations/bounds.md`` states each and why it holds):

* **combinatorial**, valid for every schedule the evaluator accepts:
  - ``critical_path``: the longest chain of first computations, each op on its
    fastest core and variant, each graph input arriving over the quickest link
    (latency);
  - ``work``: the cheapest work of all ops spread over all cores (latency);
  - ``pinned_path``: the LP BD.B9, the critical path and the work with the pins
    sharing the SRAMs' room (latency);
  - ``cheapest_energy``: every op once on its cheapest core and variant, every graph
    input moved out of its home once at the cheapest price, plus the static energy of
    the latency bound (energy);
  - ``memory``: the smallest SRAM each op needs (its inputs and outputs at once);
    below it no schedule exists;
* **relaxation**, valid for every schedule as well, solved by HiGHS with the solver
  bounds' time limit: ``energy_relaxation``, the pivot relaxation's MILP (BD.E:
  first-run cores, pins per SRAM, transfers between cores, and what each SRAM holds when
  each op first starts); ``placement_path`` on latency, the placement MILP (BD.B12: the
  pins and each op's runs per SRAM, the crossings they force, the work on each SRAM's
  cores, and after each op's earliest end, BD.B12.10);
* **P1, every schedule** (``formulations/bounds.md``, "P1: bounds over every schedule"):
  ``every_op_once`` and ``cut`` (BD.B7), and with the solvers ``closure`` (BD.B10 with
  its chains, BD.B11) and the boundary relaxation's ``boundary_lp`` and
  ``boundary_milp`` (BD.R0-R6);
* **solver**: the best bound of the CP-SAT model after a time limit, and the LP
  relaxation of the MILP (P1: Checkmate's; P3: small instances).  These are bounds
  over the model's class of schedules (``p3_problem.md``, P3.K3 with its limits C and T),
  which the message says.

The best bound is the largest value among those computed.  The combinatorial
family lives with the P3 data (:mod:`monet_ilp.problems.p3.bounds`), where the
backends use it too; it is re-exported here.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.milp import safe_ceil
from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.problems.p1.milp import lp_bound
from monet_ilp.problems.p1.relax import all_schedules_bound
from monet_ilp.problems.p3.bounds import Bound, combinatorial_bounds
from monet_ilp.results import bound_error
from monet_ilp.solve import solve

if TYPE_CHECKING:
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["EVERY_P1_SCHEDULE", "Bound", "combinatorial_bounds", "lower_bounds"]

#: What P1's bounds over every schedule hold for, in a table's width (in full:
#: :data:`monet_ilp.problems.p1.relax.HOLDS_FOR`).
EVERY_P1_SCHEDULE = "every P1 schedule (first computations in order, any recomputations)"


def lower_bounds(
    instance: Instance,
    *,
    time_limit: float | None = 60.0,
    workers: int | None = None,
    solver: bool = True,
    max_computes: int | None = None,
    max_transfers: int | None = None,
    hint: Schedule | Sequence | None = None,
) -> dict[str, Any]:
    """Every lower bound family on the instance's objective, and the best.

    Parameters
    ----------
    instance
        A P1, P2 or P3 instance; its objective (and runtime limit, for energy) is
        the one bounded.
    time_limit, workers
        For the solver bounds (P1: half for the bounds over every schedule, the rest for
        CP-SAT).
    solver
        Also run CP-SAT (and, where the instance is small enough, the MILP's LP
        relaxation).
    max_computes, max_transfers
        The model class of the solver bound (P3); pass at least what the schedules
        being graded use.
    hint
        A schedule to warm-start CP-SAT with (its value is then an upper bound too).

    Returns
    -------
    dict
        ``objective``, ``bounds`` (each a :meth:`Bound.to_dict`), ``best``, ``best_source``
        and ``best_holds_for`` (the largest bound, and the class it holds for),
        ``best_all`` and ``best_all_source`` (the largest that holds for every schedule),
        ``incumbent`` (the best schedule value CP-SAT found, if any), and ``errors``: every
        bound above that incumbent, which lies in each bound's class (BD.C1; a bug).
    """
    objective = instance.objective
    bounds: list[Bound] = []
    if instance.problem is not Problem.P1 and objective is not Objective.COMPUTE:
        # With the solvers: the pivot relaxation (BD.E) too, on energy and weighted objectives,
        # and on latency the placement MILP (BD.B12), then the contention relaxation (BD.B13).
        bounds += combinatorial_bounds(instance, relaxation_limit=time_limit if solver else None, contention=True,
                                       workers=workers)
    began = time.perf_counter()
    if instance.problem is Problem.P1:
        # Half of the time for the bounds over every schedule, the rest for CP-SAT.
        share = None if time_limit is None else time_limit / 2
        bounds += _every_p1_schedule(instance, share if solver else None, workers, solver)
    incumbent = None
    if solver:
        options: dict[str, Any] = {}
        if instance.problem is Problem.P3:
            options = {k: v for k, v in (("max_computes", max_computes), ("max_transfers", max_transfers))
                       if v is not None}
        left = time_limit
        if time_limit is not None and instance.problem is Problem.P1:
            left = max(1.0, time_limit - (time.perf_counter() - began))
        result = solve(instance, "cpsat", time_limit=left, workers=workers, hint=hint, **options)
        holds = ("the model's class" if instance.problem is not Problem.P3 else
                 f"class K3 (max_computes={result.stats.get('max_computes')}, "
                 f"max_transfers={result.stats.get('max_transfers')})")
        if result.status.value == "infeasible":
            bounds.append(Bound("cpsat", "solver", float("inf"), holds, result.wall_time_s, result.message))
        else:
            bounds.append(Bound("cpsat", "solver", result.bound, holds, round(result.wall_time_s, 3),
                                f"{result.status}; incumbent {result.objective}"))
        if result.objective is not None and result.metrics is not None and result.metrics.feasible:
            incumbent = result.objective
        lp = _lp_bound(instance, time_limit)
        if lp is not None:
            bounds.append(lp)
    valued = [b for b in bounds if b.value is not None]
    best = max(valued, key=lambda b: b.rank, default=None)
    # Only the solver family is a class bound; the best of the others holds for every schedule.
    best_all = max((b for b in valued if b.family != "solver"), key=lambda b: b.rank, default=None)
    # BD.C1: CP-SAT's incumbent lies in every class named here, so no bound may exceed it.
    errors = [wrong for b in valued
              if (wrong := bound_error(incumbent, b.value, b.name, b.holds_for)) is not None]
    return {
        "instance": instance.name,
        "objective": str(objective),
        "runtime_limit_cycles": instance.runtime_limit_cycles,
        "bounds": [b.to_dict() for b in bounds],
        "best": None if best is None else best.value,
        "best_source": None if best is None else best.name,
        "best_holds_for": None if best is None else best.holds_for,
        "best_all": None if best_all is None else best_all.value,
        "best_all_source": None if best_all is None else best_all.name,
        "incumbent": incumbent,
        "errors": errors,
    }


def _every_p1_schedule(instance: Instance, time_limit: float | None, workers: int | None,
                       solver: bool) -> list[Bound]:
    """P1's bounds over every schedule (``formulations/bounds.md``, "P1: bounds over every
    schedule"): every op once and BD.B7 always; with the solvers BD.B10-B11 and the boundary
    relaxation's LP and MILP (BD.R0-R6) too, within ``time_limit``."""
    found = all_schedules_bound(instance, time_limit=time_limit, workers=workers,
                                method="auto" if solver else "cut")
    stats = found.stats
    rows = [
        ("every_op_once", "combinatorial", stats.get("every_op_once"), None, "every op computed once"),
        ("cut", "combinatorial", stats.get("cut"), stats.get("cut_s"),
         f"BD.B7, the fractional cover at the first computation of node {stats.get('cut_k')}"),
        ("closure", "relaxation", stats.get("closure"), stats.get("closure_s"),
         (f"BD.B10, the exact restore problem of {stats.get('closure_cuts')} cuts (worst: node "
          f"{stats.get('closure_k')})" + (f"; BD.B11, chained over nodes {stats['closure_chain']}"
                                          if stats.get("closure_chain") else ""))),
        ("boundary_lp", "relaxation", None if stats.get("lp") is None else safe_ceil(stats["lp"]),
         stats.get("lp_s"), f"BD.R0-R6, the LP (reach {stats.get('reach')})"),
        ("boundary_milp", "relaxation", None if stats.get("milp") is None else safe_ceil(stats["milp"]),
         stats.get("milp_s"), f"BD.R0-R6, the MILP ({stats.get('milp_status')})"),
    ]
    out = [Bound(name, family, value, EVERY_P1_SCHEDULE, seconds or 0.0, detail)
           for name, family, value, seconds, detail in rows if value is not None]
    if found.infeasible:
        out.append(Bound("p1_infeasible", "relaxation", float("inf"), EVERY_P1_SCHEDULE, round(found.seconds, 3),
                         str(stats.get("infeasible"))))
    return out


def _lp_bound(instance: Instance, time_limit: float | None) -> Bound | None:
    """The LP relaxation bound of the instance's MILP, when there is one for its class and size."""
    began = time.perf_counter()
    if instance.problem is Problem.P1:
        value = lp_bound(instance, time_limit=time_limit)
        if math.isnan(value):  # nan: the LP was not solved to optimality in time
            return None
        return Bound("lp_relaxation", "solver", value, "every schedule of Checkmate's stage class",
                     round(time.perf_counter() - began, 3), "Checkmate MILP, LP relaxation")
    return None
