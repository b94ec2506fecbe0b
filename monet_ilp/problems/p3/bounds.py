"""The combinatorial lower bounds (BD.B1-B6, B9 of ``formulations/bounds.md``), from the P3 data,
and the relaxations solved within a time limit (BD.E on energy, BD.B12 and BD.B13 on latency).

Valid for every schedule the evaluator accepts, so any backend may report them (also
when it stops before its own solver has a bound, ``formulations/time_limits.md``),
and :mod:`monet_ilp.analysis.bounds` adds the solver bounds on top.  A P2 instance is
bounded through its P3 view.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import Deadline
from monet_ilp.errors import MonetError
from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.problems.p3.contention import ContentionBound, contention_bound
from monet_ilp.problems.p3.data import P3Data, p3_data
from monet_ilp.problems.p3.latency import (
    pin_room,
    pinned_path_bound,
    placement_path_bound,
    work_bound,
)
from monet_ilp.problems.p3.relax import Recent, energy_relaxation

if TYPE_CHECKING:
    from monet_ilp.problems.p3.latency import PlacementBound
    from monet_ilp.problems.p3.relax import EnergyRelaxation

__all__ = ["CONTENTION_SHARE", "PLACEMENT_SHARE", "RELAXATION_AT_MOST", "RELAXATION_SHARE", "Bound", "backend_floor", "combinatorial_bound",
           "combinatorial_bounds"]

#: Share of a backend's time (and at most this many seconds) for the pivot relaxation
#: (BD.E) on energy and weighted objectives, and for the placement MILP (BD.B12) on
#: latency, before its own model runs.
RELAXATION_SHARE = 0.1
RELAXATION_AT_MOST = 20.0
#: On the weighted objective, BD.B12 (its latency term) gets the time the relaxation BD.E
#: (its energy term) left of the limit, and at least this share of it.
PLACEMENT_SHARE = 0.25
#: With ``contention`` on latency, the contention relaxation (BD.B13) gets the time BD.B12
#: left of the limit, and at least this share of it (BD.B12 gets the rest).
CONTENTION_SHARE = 0.5


@dataclasses.dataclass(frozen=True)
class Bound:
    """One lower bound: its family and name, value, the class it holds for, and its cost."""

    name: str
    family: str  # "combinatorial" | "relaxation" | "solver"
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


def combinatorial_bounds(instance: Instance, objective: Objective | None = None, *,
                         relaxation_limit: float | None = None, contention: bool = False,
                         workers: int | None = None) -> list[Bound]:
    """The closed-form bounds (BD.B1-B6, B9 of ``formulations/bounds.md``) for a P3 (or P2) instance.

    With ``relaxation_limit`` (seconds) and an energy or weighted objective, also the
    pivot relaxation (BD.E, :func:`~monet_ilp.problems.p3.relax.energy_relaxation`),
    which holds for every schedule as well: ``energy_relaxation`` (energy), or
    ``latency_and_energy_relaxation`` (weighted, its energy term from the relaxation);
    on latency, the placement MILP ``placement_path`` (BD.B12,
    :func:`~monet_ilp.problems.p3.latency.placement_path_bound`) and, with
    ``contention``, the contention relaxation ``contention`` after it (BD.B13,
    :func:`~monet_ilp.problems.p3.contention.contention_bound`: CP-SAT with ``workers``,
    by default two, in the time BD.B12 left and at least :data:`CONTENTION_SHARE` of the
    limit).  The backends' floor leaves BD.B13 out: its CP-SAT search proves its value
    only when it ends, which on the target graphs takes longer than a floor's share.
    """
    objective = objective or instance.objective
    began = time.perf_counter()
    p3 = dataclasses.replace(instance, problem=Problem.P3, objective=Objective.LATENCY,
                             runtime_limit_cycles=None)
    data = p3_data(p3)
    path = data.critical_path_cycles()
    cores = len(data.cores)
    work = work_bound(data)
    pinned = pinned_path_bound(data)
    latency = max(path, work, pinned or 0)
    out = []
    every = "every schedule"
    if objective is Objective.LATENCY:
        out.append(Bound("critical_path", "combinatorial", path, every, detail="fastest core per op"))
        out.append(Bound("work", "combinatorial", work, every, detail=f"cheapest work over {cores} cores"))
        if pinned is not None:
            out.append(Bound("pinned_path", "combinatorial", pinned, every,
                             detail=f"critical path and work with the pins sharing {pin_room(data)} bytes "
                                    "of SRAM (the LP BD.B9)"))
    if objective in (Objective.ENERGY, Objective.WEIGHTED):
        runs = sum(min(list(op.energy_pj.values()) + list(op.pinned_energy_pj.values())) for op in data.ops)
        runs = max(runs, _pinning_knapsack(data))
        moves = 0
        for item in data.items:
            # A graph input leaves its home only for a reader that runs elsewhere: one whose
            # cores all have another memory (P2 starts the inputs in the core's own SRAM).
            if item.producer is None and any(
                    all(data.memory_of[c] != data.input_home for c in data.ops[r].cores) for r in item.readers):
                out_of_home = [r.energy_pj for r in item.routes if r.src == data.input_home]
                moves += min(out_of_home, default=0)
        static = data.static_pj(latency)
        limit = instance.runtime_limit_cycles
        if limit is not None and limit < latency:  # BD.B6: no schedule, the optimum is +infinity
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
    if relaxation_limit is not None and objective in (Objective.ENERGY, Objective.WEIGHTED):
        relaxed = energy_relaxation(instance, time_limit=relaxation_limit)
        placed = None
        if objective is Objective.WEIGHTED:
            # The energy term from BD.E (the whole limit), the latency term from BD.B12 in
            # the time BD.E left, and at least PLACEMENT_SHARE of the limit.
            left = max(relaxation_limit - relaxed.seconds, PLACEMENT_SHARE * relaxation_limit)
            placed = _placement(p3, data, left)
            latency = max(latency, placed.value or 0)
        out += _relaxation_bounds(instance, objective, relaxed, latency, every, placed)
    if relaxation_limit is not None and objective is Objective.LATENCY:
        placing = time.perf_counter()
        placed = _placement(p3, data, relaxation_limit * (1 - CONTENTION_SHARE if contention else 1.0))
        if placed.value is not None:
            out.append(Bound("placement_path", "relaxation", placed.value, every, placed.seconds,
                             f"{placed.method}: the pins and each op's runs placed per SRAM, with the "
                             f"crossings they force and what runs after each op packed on the cores "
                             f"(the MILP BD.B12, {placed.columns} columns, {placed.rows} rows)"))
        if contention:
            left = max(relaxation_limit - (time.perf_counter() - placing), CONTENTION_SHARE * relaxation_limit)
            floor = max(latency, placed.value or 0)
            contended = _contention(p3, data, left, floor, workers)
            if contended.value is not None:
                proven = ("optimal: CP-SAT proved the model's optimum" if contended.method == "optimal" else
                          f"bound: CP-SAT did not close the model in time (its best makespan {contended.relaxed}), "
                          f"so the value is the floor it was given")
                out.append(Bound("contention", "relaxation", max(floor, contended.value), every, contended.seconds,
                                 f"{proven}; each op's earliest run on one core, the runs of a core apart in "
                                 f"time, with the pins, crossings and capacities of BD.B12 (the CP-SAT model "
                                 f"BD.B13, {contended.variables} variables)"))
    # BD.B4: an op that fits none of its cores (or inputs that overflow their home): no
    # schedule at all, so the optimum is +infinity, which the bound then says.
    reason = data.min_capacity_proof()
    out.append(Bound("memory", "combinatorial", math.inf if reason else None, every,
                     detail=reason.removeprefix("infeasible: ") if reason else
                     f"every op fits somewhere (an SRAM of {data.min_sram_bytes()} bytes on every core holds any op)"))
    seconds = time.perf_counter() - began - sum(b.seconds for b in out)
    return [b if b.family == "relaxation" else dataclasses.replace(b, seconds=round(seconds / max(1, len(out)), 4))
            for b in out]


def _relaxation_bounds(instance: Instance, objective: Objective, relaxed: EnergyRelaxation, latency: int,
                       every: str, placed: PlacementBound | None = None) -> list[Bound]:
    """BD.E's result as the energy bound, or the weighted bound built on it (its latency
    term ``latency``, BD.B12's ``placed`` among what gave it)."""
    if relaxed.value is None:
        return []
    detail = f"{relaxed.method}: {relaxed.detail}"
    if objective is Objective.ENERGY:
        return [Bound("energy_relaxation", "relaxation", relaxed.value, every, relaxed.seconds, detail)]
    meta, alpha = instance.meta, instance.alpha
    value = alpha * latency / meta["latency_ref_cycles"] + (1 - alpha) * relaxed.value / meta["energy_ref_pj"]
    seconds = relaxed.seconds + (placed.seconds if placed is not None else 0.0)
    if placed is not None and placed.value is not None:
        detail += f"; latency from BD.B12 ({placed.method}) when higher than the closed forms: {placed.value}"
    return [Bound("latency_and_energy_relaxation", "relaxation", value, every, seconds,
                  f"latency >= {latency} cycles, energy >= {relaxed.value} pJ ({detail})")]


def _placement(instance: Instance, data: P3Data, limit: float) -> PlacementBound:
    """BD.B12 within ``limit`` seconds, remembered per instance (the backends of a portfolio,
    a Pareto sweep and grading share it)."""
    cached = _PLACED.get(instance)
    if cached is not None and (cached.method == "milp" or cached.seconds >= limit):
        return cached
    placed = placement_path_bound(data, Deadline(limit))
    _PLACED.put(instance, placed)
    return placed


#: BD.B12's recent results, by instance.
_PLACED: Recent[PlacementBound] = Recent()


def _contention(instance: Instance, data: P3Data, limit: float, floor: int,
                workers: int | None) -> ContentionBound:
    """BD.B13 within ``limit`` seconds above ``floor``, remembered per instance (as BD.B12):
    a proven optimum, or a run at least as long, is reused."""
    cached = _CONTENDED.get(instance)
    if cached is not None and (cached.method == "optimal" or cached.seconds >= limit):
        return cached
    contended = contention_bound(data, Deadline(limit), floor=floor, workers=workers)
    _CONTENDED.put(instance, contended)
    return contended


#: BD.B13's recent results, by instance.
_CONTENDED: Recent[ContentionBound] = Recent()


def _pinning_knapsack(data: P3Data) -> int:
    """BD.B5: run energy when not every persistent tensor fits in the SRAMs at once.

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
    room: float = pin_room(data)
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


def combinatorial_bound(instance: Instance, *, relaxation_limit: float | None = None) -> int | float | None:
    """The best closed-form lower bound on the instance's objective (``formulations/bounds.md``).

    BD.B1-B5 hold for every schedule, so any backend may report it, also when it stops
    before its own solver has a bound (``formulations/time_limits.md``).  With
    ``relaxation_limit`` seconds, the pivot relaxation (BD.E) on energy and weighted
    objectives too.
    """
    try:
        values = [b.value for b in combinatorial_bounds(instance, relaxation_limit=relaxation_limit)
                  if b.value is not None]
    except MonetError:  # a runtime limit below the latency bound: the solver proves it too
        return None
    return max(values, default=None)


def backend_floor(instance: Instance, deadline: Deadline) -> int | float | None:
    """The bound a P3 backend reports when its own is weaker: BD.B1-B6, B9, BD.E on energy, BD.B12 on latency.

    The pivot relaxation (energy and weighted objectives) or the placement MILP BD.B12
    (latency) gets :data:`RELAXATION_SHARE` of the time left, at most
    :data:`RELAXATION_AT_MOST` seconds.
    """
    limit = deadline.solver_limit(RELAXATION_SHARE, at_most=RELAXATION_AT_MOST)
    return combinatorial_bound(instance, relaxation_limit=limit)
