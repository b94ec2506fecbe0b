"""Grade schedules from any source (a GA, an outside tool) against certified lower bounds.

For every point: the evaluator's verdict, latency and energy; a lower bound on the
latency of any schedule; and, for latency/energy fronts, a lower bound on the energy
of any schedule *at most as slow as the point* (an ε-constraint solve with the point's
latency as the runtime limit, warm-started with the point itself).  The gap between a
point and that bound is its certified distance to the true Pareto front.  The gaps use
only bounds that hold for every schedule: on P1 the bound over every P1 schedule (PF.B2),
on P2/P3 the combinatorial and relaxation bounds (``monet_ilp.analysis.bounds``).  CP-SAT's
bounds hold over its class (P3.K3, sized to the runs per op and transfers per tensor and
memory the points use, but not containing every decoder schedule), so they are reported
beside the certified ones (``*_class_*``), never mixed into a gap.  Every bound is checked
against every feasible point it claims to hold for (BD.C1): one above a point's value is
listed in ``errors``, naming the bound and both values.

Inputs: a GA result (``"format": "monet-ilp/ga"``, points with inline schedules or
decisions), a decisions file (``"format": "monet-ilp/decisions"``, decoded by the
list scheduler), or a schedule file.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from monet_ilp.analysis.bounds import combinatorial_bounds
from monet_ilp.errors import InputFormatError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph.ir import read_json
from monet_ilp.heuristics.decisions import FORMAT_NAME as DECISIONS_FORMAT
from monet_ilp.heuristics.decisions import decisions_from_dict, decode
from monet_ilp.instance import Instance, Objective, Problem
from monet_ilp.problems.p1.relax import HOLDS_FOR, all_schedules_bound, in_p1_class
from monet_ilp.results import GA_FORMAT, bound_error, gap_of
from monet_ilp.schedule import Schedule, Sequence, check_made_for, schedule_from_dict
from monet_ilp.solve import solve

__all__ = ["grade", "load_points"]


def load_points(path: str | Path, instance: Instance) -> list[tuple[str, Schedule | Sequence]]:
    """The schedules to grade in ``path``, each with a label."""
    data = read_json(path)
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt == GA_FORMAT:
        points = data.get("points")
        if not isinstance(points, list) or not points:
            raise InputFormatError("a GA result with no points", file=str(path), field="points",
                                   fix="run `monet-ilp ga` again, or grade a schedule file")
        out = []
        for k, p in enumerate(points):
            if isinstance(p, dict) and p.get("fusion", {}).get("stacks"):
                raise InputFormatError(
                    "a point of a fusion GA: its schedule is of its plan's tiled instance "
                    "(formulations/fusion.md FU.G3), not of this one", file=str(path), field=f"points[{k}].fusion",
                    fix="grade the front with `monet-ilp fusion ga --grade SECONDS`, or make the tiled instance "
                        "(`monet-ilp instance make --fusion PLAN`) and grade the point's schedule against it")
            if isinstance(p.get("schedule"), dict):
                schedule = schedule_from_dict(p["schedule"], source=str(path))
                check_made_for(schedule, instance, source=f"{path}: points[{k}]")
                out.append((f"ga[{k}]", schedule))
            elif isinstance(p.get("decisions"), dict):
                out.append((f"ga[{k}]", _decode(p["decisions"], instance, str(path))))
            else:
                raise InputFormatError(f"GA point {k} has neither a schedule nor decisions", file=str(path),
                                       field=f"points[{k}]", fix="keep the schedule or decisions of every point")
        return out
    if fmt == DECISIONS_FORMAT:
        return [("decisions", _decode(data, instance, str(path)))]
    schedule = schedule_from_dict(data, source=str(path))
    check_made_for(schedule, instance, source=str(path))
    return [(Path(path).stem, schedule)]


def _decode(decisions: dict[str, Any], instance: Instance, source: str) -> Schedule | Sequence:
    data = dict(decisions)
    data.setdefault("format", DECISIONS_FORMAT)
    return decode(instance, decisions_from_dict(data, source=source, instance=instance))


def _class_limits(schedules: list[Schedule]) -> tuple[int, int]:
    """Runs per op and transfers per (tensor, memory) that a model class must allow."""
    runs, moves = 2, 1
    for s in schedules:
        if s.ops:
            runs = max(runs, max(Counter(r.op for r in s.ops).values()))
        if s.transfers:
            moves = max(moves, max(Counter((t.tensor, t.dst) for t in s.transfers).values()))
    return runs, moves


def grade(
    instance: Instance,
    points: list[tuple[str, Schedule | Sequence]],
    *,
    time_limit: float | None = 30.0,
    workers: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Grade ``points`` on ``instance``: values, certified bounds and gaps (module docstring).

    For a P1 instance (or any single-objective use) each point is graded on the
    instance's objective.  For P2/P3 each point gets a latency bound (one for all)
    and an energy bound at its latency.  Gaps are :func:`monet_ilp.results.gap_of`.
    """
    rows: list[dict[str, Any]] = []
    timed = []
    for label, sched in points:
        metrics = evaluate(instance, sched)
        timed.append(metrics.schedule if isinstance(sched, Sequence) else sched)
        rows.append({"label": label, "feasible": metrics.feasible,
                     "violations": dict(metrics.violation_counts),
                     "latency_cycles": metrics.latency_cycles, "energy_pj": metrics.energy.total_pj,
                     "objective": metrics.objective_value})
    total = len(rows) + 1
    done = 0

    def tick(msg: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, msg)

    errors: list[str] = []  # BD.C1: every bound above a feasible point it claims to hold for
    if instance.problem is Problem.P1:
        # PF.B2, the bound over every P1 schedule (a class bound, the stage form's, would not
        # hold for points outside that class); a point in another first-computation order or that
        # frees one op's outputs apart lies outside it too (PF.B3), and gets every op once.
        found = all_schedules_bound(instance, time_limit=time_limit, workers=workers)
        every_op_once = int(found.stats.get("every_op_once", 0))
        for (label, sched), row in zip(points, rows, strict=True):
            inside = isinstance(sched, Sequence) and in_p1_class(instance.graph, sched)
            bound = found.value if inside else every_op_once
            row["bound"] = bound
            row["bound_holds_for"] = HOLDS_FOR if inside else "every schedule (every op once)"
            row["gap"] = gap_of(row["objective"], bound) if row["feasible"] else None
            wrong = bound_error(row["objective"] if row["feasible"] else None, bound,
                                f"P1 {found.method if inside else 'every-op-once'}", row["bound_holds_for"])
            if wrong is not None:
                row["bound_error"] = wrong
                errors.append(f"{label}: {wrong}")
        tick("bound")
        return {"instance": instance.name, "objective": str(instance.objective), "points": rows,
                "bound_source": found.method, "bound_holds_for": HOLDS_FOR, "errors": errors}

    limits = _class_limits(timed)
    options = {"max_computes": limits[0], "max_transfers": limits[1]} if instance.problem is Problem.P3 else {}
    fast_inst = dataclasses.replace(instance, objective=Objective.LATENCY, runtime_limit_cycles=None)
    # BD.B12 and BD.B13 run once: CP-SAT's floor below finds BD.B12 in the cache.
    latency_bounds = combinatorial_bounds(fast_inst, Objective.LATENCY, relaxation_limit=time_limit,
                                          contention=True, workers=workers)
    fast = solve(fast_inst, "cpsat", time_limit=time_limit, workers=workers,
                 hint=_best(points, rows, "latency_cycles"), **options)
    closed_latency = max((b for b in latency_bounds if b.value is not None), key=lambda b: b.rank)
    # The gaps are certified by the bounds over every schedule; CP-SAT's, over class K3 (which
    # need not hold a decoder's schedule), is shown beside them, never mixed in (BD.C1).
    latency_lb = closed_latency.rank
    source = closed_latency.name
    k3 = (f"class K3 (max_computes={limits[0]}, max_transfers={limits[1]})"
          if instance.problem is Problem.P3 else "the P2 model's class")

    def check(label: str, value: float, bound: float | None, family: str, holds_for: str) -> None:
        wrong = bound_error(value, bound, family, holds_for)
        if wrong is not None:
            errors.append(f"{label}: {wrong}")

    tick("latency bound")
    improved = 0
    for (label, sched), row in zip(points, rows, strict=True):
        row["latency_bound_cycles"] = latency_lb
        row["latency_bound_holds_for"] = closed_latency.holds_for
        row["latency_bound_class_cycles"] = fast.bound
        row["latency_gap"] = gap_of(row["latency_cycles"], latency_lb) if row["feasible"] else None
        if not row["feasible"]:
            row.update(energy_bound_pj=None, energy_gap=None, energy_bound_source=None)
            tick(f"{label}: infeasible")
            continue
        check(label, row["latency_cycles"], latency_lb, closed_latency.name, closed_latency.holds_for)
        capped = dataclasses.replace(instance, objective=Objective.ENERGY,
                                     runtime_limit_cycles=row["latency_cycles"])
        # BD.E runs once: it ignores the runtime limit, and its result is cached per instance.
        energy_bounds = combinatorial_bounds(capped, Objective.ENERGY, relaxation_limit=time_limit)
        result = solve(capped, "cpsat", time_limit=time_limit, workers=workers, hint=sched, **options)
        closed = max((b for b in energy_bounds if b.value is not None), key=lambda b: b.rank)
        closed_value = closed.value if closed.value is not None else 0
        row["energy_bound_pj"] = closed_value
        row["energy_bound_source"] = closed.name
        row["energy_bound_holds_for"] = f"{closed.holds_for}, at most as slow as the point"
        row["energy_bound_class_pj"] = result.bound
        row["energy_gap"] = gap_of(row["energy_pj"], closed_value)
        check(label, row["energy_pj"], closed_value, closed.name, row["energy_bound_holds_for"])
        row["solver_energy_pj"] = result.objective if result.metrics is not None and result.metrics.feasible \
            else None
        row["solver_improves"] = (row["solver_energy_pj"] is not None
                                  and row["solver_energy_pj"] < row["energy_pj"])
        improved += bool(row["solver_improves"])
        tick(f"{label}: energy bound")
    return {"instance": instance.name, "objective": "latency,energy", "points": rows,
            "latency_bound_source": source, "latency_incumbent": fast.objective,
            "class": {"max_computes": limits[0], "max_transfers": limits[1]}, "class_holds_for": k3,
            "solver_improves": improved, "errors": errors}


def _best(points: list[tuple[str, Schedule | Sequence]], rows: list[dict[str, Any]],
          key: str) -> Schedule | Sequence | None:
    """The schedule of the feasible point with the least ``key`` (the first of equals)."""
    feasible = [(row[key], k) for k, row in enumerate(rows) if row["feasible"]]
    if not feasible:
        return None
    return points[min(feasible)[1]][1]
