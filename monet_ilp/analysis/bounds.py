"""Certified lower bounds on an instance's latency or energy, and where each comes from.

Families (``formulations/bounds.md`` states each and why it holds):

* **combinatorial**, valid for every schedule the evaluator accepts:
  - ``critical_path``: the longest chain of first computations, each op on its
    fastest core and variant, each graph input arriving over the quickest link
    (latency);
  - ``work``: the cheapest work of all ops spread over all cores (latency);
  - ``cheapest_energy``: every op once on its cheapest core and variant, every graph
    input moved out of its home once at the cheapest price, plus the static energy of
    the latency bound (energy);
  - ``memory``: the smallest SRAM each op needs (its inputs and outputs at once);
    below it no schedule exists;
* **solver**: the best bound of the CP-SAT model after a time limit, and the LP
  relaxation of the MILP (P1: Checkmate's; P3: small instances).  These are bounds
  over the model's class of schedules (``p3_problem.md``, K3 with its limits C and T),
  which the message says.

The best bound is the largest value among those computed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any

from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.problems.p1.milp import lp_bound
from monet_ilp.problems.p3.data import P3Data, p3_data
from monet_ilp.solve import solve

if TYPE_CHECKING:
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["Bound", "combinatorial_bounds", "lower_bounds"]


@dataclasses.dataclass(frozen=True)
class Bound:
    """One lower bound: its family and name, value, the class it holds for, and its cost."""

    name: str
    family: str  # "combinatorial" | "solver"
    value: int | float | None
    holds_for: str
    seconds: float = 0.0
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def rank(self) -> float:
        """What bounds are compared by: the value, or minus infinity without one."""
        return -math.inf if self.value is None else self.value


def combinatorial_bounds(instance: Instance, objective: Objective | None = None) -> list[Bound]:
    """The closed-form bounds (B1-B6 of ``formulations/bounds.md``) for a P3 (or P2) instance."""
    objective = objective or instance.objective
    began = time.perf_counter()
    p3 = dataclasses.replace(instance, problem=Problem.P3, objective=Objective.LATENCY,
                             runtime_limit_cycles=None)
    data = p3_data(p3)
    path = data.critical_path_cycles()
    cheapest = [min(list(op.cycles.values()) + list(op.pinned_cycles.values())) for op in data.ops]
    cores = len(data.cores)
    work = -(-sum(cheapest) // cores)
    latency = max(path, work)
    out = []
    every = "every schedule"
    if objective is Objective.LATENCY:
        out.append(Bound("critical_path", "combinatorial", path, every, detail="fastest core per op"))
        out.append(Bound("work", "combinatorial", work, every, detail=f"cheapest work over {cores} cores"))
    if objective in (Objective.ENERGY, Objective.WEIGHTED):
        runs = sum(min(list(op.energy_pj.values()) + list(op.pinned_energy_pj.values())) for op in data.ops)
        runs = max(runs, _pinning_knapsack(data))
        moves = 0
        for item in data.items:
            if item.producer is None:
                out_of_home = [r.energy_pj for r in item.routes if r.src == data.input_home]
                moves += min(out_of_home, default=0)
        static = data.static_pj(latency)
        limit = instance.runtime_limit_cycles
        if limit is not None and limit < latency:  # B6: no schedule, the optimum is +infinity
            out.append(Bound("runtime_limit", "combinatorial", math.inf, every,
                             detail=f"the runtime limit {limit} is below the latency bound {latency}: "
                                    "no schedule exists"))
        energy = runs + moves + static
        if objective is Objective.ENERGY:
            out.append(Bound("cheapest_energy", "combinatorial", energy, every,
                             detail=f"runs {runs} + input moves {moves} + static {static} pJ"))
        else:  # each term of the weighted sum bounded on its own
            meta, alpha = instance.meta, instance.alpha
            value = alpha * latency / meta["latency_ref_cycles"] + (1 - alpha) * energy / meta["energy_ref_pj"]
            out.append(Bound("latency_and_energy", "combinatorial", value, every,
                             detail=f"latency >= {latency} cycles, energy >= {energy} pJ"))
    # B4: an op that fits none of its cores (or inputs that overflow their home): no
    # schedule at all, so the optimum is +infinity, which the bound then says.
    reason = data.min_capacity_proof()
    out.append(Bound("memory", "combinatorial", math.inf if reason else None, every,
                     detail=reason.removeprefix("infeasible: ") if reason else
                     f"every op fits somewhere (an SRAM of {data.min_sram_bytes()} bytes on every core holds any op)"))
    seconds = time.perf_counter() - began
    return [dataclasses.replace(b, seconds=round(seconds / max(1, len(out)), 4)) for b in out]


def _pinning_knapsack(data: P3Data) -> int:
    """B5: run energy when not every persistent tensor fits in the SRAMs at once.

    Every op costs at least its cheapest unpinned energy minus what pinning could
    save.  The saving ``σ_v`` of op ``v`` (cheapest unpinned minus cheapest pinned
    energy) needs *all* its persistent reads pinned, so it is credited to them pro
    rata to their bytes: the saving of any pin set is at most the credits of its
    tensors.  The tensors pinned at once weigh at most the SRAMs' total capacity minus
    the largest footprint of one op; the fractional knapsack over that room bounds the
    total saving from above, so the result bounds the run energy from below.
    """
    base = 0
    value: list[float] = [0] * len(data.persistent)
    for op in data.ops:
        unpinned = min(op.energy_pj.values())
        base += unpinned
        if op.pinned_energy_pj:
            saving = max(0, unpinned - min(op.pinned_energy_pj.values()))
            total = sum(data.persistent[p].bytes for p in op.persistent_reads)
            for p in op.persistent_reads:  # pro rata: the saving needs all of them pinned
                value[p] += saving * data.persistent[p].bytes / total if total else saving
    srams = {data.memory_of[c] for c in data.cores}
    room: float = max(sum(data.capacity[m] for m in srams) - data.min_sram_bytes(), 0)
    items = sorted(((value[p.index], p.bytes) for p in data.persistent if p.pin_memories and value[p.index] > 0),
                   key=lambda vb: vb[0] / max(vb[1], 1), reverse=True)
    saved = 0.0
    for v, b in items:
        if room <= 0:
            break
        take = min(1.0, room / b) if b > 0 else 1.0
        saved += v * take
        room -= b * take
    return base - int(saved) - (1 if saved != int(saved) else 0)


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
        For the solver bounds.
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
        ``objective``, ``bounds`` (each a :meth:`Bound.to_dict`), ``best`` and
        ``best_source``, and ``incumbent`` (the best schedule value CP-SAT found, if any).
    """
    objective = instance.objective
    bounds: list[Bound] = []
    if instance.problem is not Problem.P1 and objective is not Objective.COMPUTE:
        bounds += combinatorial_bounds(instance)
    incumbent = None
    if solver:
        options: dict[str, Any] = {}
        if instance.problem is Problem.P3:
            options = {k: v for k, v in (("max_computes", max_computes), ("max_transfers", max_transfers))
                       if v is not None}
        result = solve(instance, "cpsat", time_limit=time_limit, workers=workers, hint=hint, **options)
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
    return {
        "instance": instance.name,
        "objective": str(objective),
        "runtime_limit_cycles": instance.runtime_limit_cycles,
        "bounds": [b.to_dict() for b in bounds],
        "best": None if best is None else best.value,
        "best_source": None if best is None else best.name,
        "incumbent": incumbent,
    }


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
