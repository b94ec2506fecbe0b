"""Latency/energy Pareto fronts by the ε-constraint method, every point verified.

``pareto_front(instance, points=8)`` solves the latency optimum, the energy optimum,
then the energy optimum under ``points - 2`` runtime limits spread evenly between the
two latencies (``runtime_limit_cycles``, constraint P3C.C13 of ``formulations/p3_cpsat.md``
and P2C.C14 of ``p2_cpsat.md``).  Each point carries the solver's bound: for a capped
energy solve, a certified lower bound on the energy of any schedule (of the model's
class) whose latency is at most the cap.  The result is the front file of
:mod:`monet_ilp.plot` (its docstring gives the format).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import MonetError
from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.results import Result, Status, non_dominated
from monet_ilp.schedule import save_schedule
from monet_ilp.solve import solve

if TYPE_CHECKING:
    from monet_ilp.evaluate import Metrics

__all__ = ["pareto_front"]


def pareto_front(
    instance: Instance,
    *,
    points: int = 8,
    backend: str = "cpsat",
    time_limit: float | None = 60.0,
    workers: int | None = None,
    schedule_dir: str | Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The non-dominated verified (latency, energy) schedules of ``instance``, with bounds.

    Parameters
    ----------
    instance
        A P2 or P3 instance (any objective: the sweep sets its own).
    points
        Solves in the sweep (at least 2: the two extreme optima).
    backend, time_limit, workers, options
        Passed to :func:`monet_ilp.solve` for every point (``time_limit`` per point).
    schedule_dir
        Where to save each point's schedule (``point_<k>.json``); not saved if ``None``.
    progress
        Called as ``progress(done, total, message)`` after each solve.

    Returns
    -------
    dict
        The front file: ``instance``, ``objective_x``, ``objective_y``, ``points``
        (non-dominated, by latency) and ``sweep`` (every solve, dominated or not).
    """
    if instance.problem is Problem.P1:
        raise MonetError("a P1 instance has no energy/latency trade-off to sweep", field="problem",
                         fix="build a P2 or P3 instance (instance make --problem P3)")
    if points < 2:
        raise MonetError(f"--points {points}", field="points", fix="ask for at least 2 points")
    total = points
    sweep: list[dict[str, Any]] = []
    where = Path(schedule_dir) if schedule_dir is not None else None
    if where is not None:
        where.mkdir(parents=True, exist_ok=True)

    def run(label: str, objective: Objective, limit: int | None) -> Result:
        inst = dataclasses.replace(instance, objective=objective, runtime_limit_cycles=limit)
        result = solve(inst, backend, time_limit=time_limit, workers=workers, **options)
        entry: dict[str, Any] = {
            "label": label, "objective": str(objective), "runtime_limit_cycles": limit,
            "status": str(result.status), "source": result.source,
            "seconds": round(result.wall_time_s, 3),
            "latency_cycles": None, "energy_pj": None,
            "latency_bound_cycles": None, "energy_bound_pj": None, "schedule": None,
            "message": result.message,
        }
        metrics = _verified(result)
        if metrics is not None:
            entry["latency_cycles"] = metrics.latency_cycles
            entry["energy_pj"] = metrics.energy.total_pj
            if where is not None and result.schedule is not None:
                path = where / f"point_{len(sweep)}.json"
                save_schedule(result.schedule, path)
                entry["schedule"] = str(path)
        if result.bound is not None:
            key = "latency_bound_cycles" if objective is Objective.LATENCY else "energy_bound_pj"
            entry[key] = result.bound
        sweep.append(entry)
        if progress is not None:
            progress(len(sweep), total, f"{label}: {result.status}")
        return result

    fast = run("latency optimum", Objective.LATENCY, instance.runtime_limit_cycles)
    frugal = run("energy optimum", Objective.ENERGY, instance.runtime_limit_cycles)
    front_file = {"instance": instance.name, "objective_x": "latency", "objective_y": "energy",
                  "backend": backend, "time_limit_s": time_limit, "points": [], "sweep": sweep}
    fastest, cheapest = _verified(fast), _verified(frugal)
    if fastest is None or cheapest is None:
        # No extreme point, no range to sweep: an empty front, with each solve's reason.
        return front_file
    low, high = fastest.latency_cycles, cheapest.latency_cycles
    caps = sorted({low + (high - low) * k // (points - 1) for k in range(points - 1)}) if high > low else []
    for cap in caps:
        run(f"energy, latency <= {cap}", Objective.ENERGY, cap)
    done = [p for p in sweep if p["latency_cycles"] is not None]
    front = non_dominated(done, keep_equal=False)  # of equal points, the first solved
    # A point's energy bound holds for latencies up to its cap: a point found under a
    # larger cap (or none) may only claim the bound of the smallest cap above its latency.
    for p in front:
        p["energy_bound_pj"] = _energy_bound_at(p["latency_cycles"], sweep)
    return {**front_file, "points": front}


def _verified(result: Result) -> Metrics | None:
    """The evaluator's metrics of ``result``'s schedule if the evaluator accepts it, else ``None``."""
    ok = result.metrics is not None and result.metrics.feasible and result.status in (
        Status.OPTIMAL, Status.FEASIBLE)
    return result.metrics if ok else None


def _energy_bound_at(latency: int, sweep: list[dict[str, Any]]) -> int | float | None:
    """The best certified energy bound valid for schedules of at most ``latency`` cycles.

    An energy solve capped at ``L`` bounds every schedule with latency ``<= L``; an
    uncapped one bounds all.  A schedule of latency ``ℓ`` is covered by every cap
    ``L >= ℓ``; the largest of their bounds is the best.
    """
    best = None
    for s in sweep:
        if s["objective"] != "energy" or s["energy_bound_pj"] is None:
            continue
        cap = s["runtime_limit_cycles"]
        if (cap is None or cap >= latency) and (best is None or s["energy_bound_pj"] > best):
            best = s["energy_bound_pj"]
    return best
