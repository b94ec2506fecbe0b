"""The GA and the exact solver in one loop: ``monet-ilp ga --refine N``.

Each round runs the GA (:func:`~monet_ilp.ga.nsga2.run_ga`) with the schedules found
so far in its initial population, then gives the round's best point (by the instance's
objective) to the default backend (``auto``: CP-SAT on P2 and P3, the portfolio on P1)
as its hint (on P3, the best list schedule instead when it is better); the solver's schedule and the GA's best seed the next round.  The solver improves what the GA found and certifies a bound;
the GA spreads the solver's schedule along the latency/energy front.

The result has the GA's file format (:data:`~monet_ilp.ga.nsga2.FORMAT_NAME`): the
non-dominated feasible points of every round and of every solver schedule (``source``
``ga``, ``seed`` or ``solver``), each evaluated by the reference evaluator, plus
``refine``: one row per round (the GA's best, the solver's status, objective, bound and
gap) and ``bound``, the best bound the solver proved on the instance's objective that
holds for every schedule, the GA's included (on P1 the bound over every P1 schedule, on P3
``auto``'s floor or its bound when that holds for every schedule: CP-SAT's bound over
class P3.K3 need not hold for a decoder's schedule), checked against every point
(``errors``, BD.C1).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from collections.abc import Sequence as Seq
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.ga.nsga2 import POINT_KEYS, front_file, point_of, run_ga
from monet_ilp.instance import Problem
from monet_ilp.problems.p3.bounds import combinatorial_bound
from monet_ilp.problems.p3.data import baseline_schedules
from monet_ilp.results import bound_error, gap_of, non_dominated
from monet_ilp.schedule import schedule_from_dict
from monet_ilp.solve import solve

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.results import Result
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["refine"]

Progress = Callable[[int, int, str], None]


def refine(
    instance: Instance,
    rounds: int = 3,
    objectives: Seq[str] = ("latency", "energy"),
    *,
    generations: int = 30,
    population: int = 32,
    seed: int = 1,
    solver_time: float = 30.0,
    workers: int = 1,
    seed_schedules: Seq[Schedule | Sequence] = (),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Alternate GA rounds and solver runs hinted with the GA's best (module docstring).

    Parameters
    ----------
    instance
        A P3 instance.
    rounds
        GA + solver rounds.
    objectives
        The GA's objectives (``latency``, ``energy``).
    generations, population
        Of each GA round.
    seed
        Round ``r`` runs the GA with seed ``seed + r``.
    solver_time
        Seconds for each solver run.
    workers
        Solver workers (the GA runs in this process, on its fast path).
    seed_schedules
        Schedules for the first round's initial population.
    progress
        Called as ``progress(done, rounds, message)`` after each round.

    Returns
    -------
    dict
        The GA's JSON format plus ``refine`` (per round: ``round``, ``ga_best``,
        ``ga_evaluations``, ``ga_seconds``, ``solver_status``, ``solver_objective``,
        ``solver_bound``, ``solver_seconds``, ``best``, ``gap``), ``bound`` and ``gap``.
    """
    if rounds < 1:
        raise MonetError(f"refine rounds {rounds}", field="refine", fix="use 1 or more rounds")
    began = time.perf_counter()
    seeds: list[Schedule | Sequence] = list(seed_schedules)
    candidates: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    # The bounds over every schedule hold for the GA's points too; on P3 the closed forms and
    # relaxations (BD.B1-B6, B9, B12, BD.E) start the bound, with a solver run's time.
    bound: int | float | None = (None if instance.problem is Problem.P1
                                 else combinatorial_bound(instance, relaxation_limit=solver_time))
    best_value: int | float | None = None
    evaluations = 0
    for r in range(rounds):
        ga = run_ga(instance, objectives, generations=generations, population=population, seed=seed + r,
                    seed_schedules=seeds)  # one process: the fast path outruns spawning more
        evaluations += ga["evaluations"]
        candidates += [p for p in ga["points"] if p["feasible"]]
        top = min(ga["points"], key=lambda p: (not p["feasible"], p["objective_value"]), default=None)
        hint = None if top is None else schedule_from_dict(top["schedule"])
        solver_hint = _better_start(instance, hint, top)
        result = solve(instance, "auto", time_limit=solver_time, workers=workers, hint=solver_hint)
        seeds = [] if hint is None or top is None or not top["feasible"] else [hint]
        if result.schedule is not None and result.metrics is not None and result.metrics.feasible:
            seeds.insert(0, result.schedule)
            candidates.append(point_of(instance, evaluate(instance, result.schedule), "solver"))
        every = _every_schedule_bound(instance, result)
        if every is not None:
            bound = every if bound is None else max(bound, every)
        values = [p["objective_value"] for p in candidates]
        best_value = min(values) if values else None
        history.append({
            "round": r + 1,
            "ga_best": None if top is None or not top["feasible"] else top["objective_value"],
            "ga_evaluations": ga["evaluations"], "ga_seconds": ga["seconds"],
            "solver_status": str(result.status), "solver_objective": result.objective,
            "solver_bound": result.bound, "solver_seconds": round(result.wall_time_s, 3),
            "best": best_value, "gap": gap_of(best_value, bound),
        })
        if progress is not None:
            progress(r + 1, rounds, f"round {r + 1}/{rounds}: best {best_value}, bound {bound}")
    # BD.C1: the bound holds for every schedule, the GA's and the solver's points included.
    wrong = bound_error(best_value, bound, "auto's bound over every schedule", "every schedule")
    keys = [POINT_KEYS[o] for o in objectives]
    front = non_dominated(candidates, key=lambda p: tuple(p[k] for k in keys), keep_equal=False)
    return front_file(instance, objectives, sorted(front, key=lambda p: (p["latency_cycles"], p["energy_pj"])),
                      generations=generations, population=population, seed=seed, stopped="rounds",
                      workers=workers, evaluations=evaluations, seconds=round(time.perf_counter() - began, 3),
                      refine=history, bound=bound, gap=gap_of(best_value, bound),
                      errors=[] if wrong is None else [wrong])


def _every_schedule_bound(instance: Instance, result: Result) -> int | float | None:
    """The part of ``auto``'s bound that holds for every schedule, the GA's included.

    On P1 the bound over every P1 schedule (PF.B2, ``bound_all``); on P3 ``auto``'s bound
    when its ``bound_class`` says it holds for every schedule, else the floor it ran
    (P3A.2): CP-SAT's bound over class K3 need not hold for a decoder's schedule.
    """
    if instance.problem is Problem.P1:
        value = result.stats.get("bound_all")
        return None if value is None else int(value)
    if str(result.stats.get("bound_class", "")).startswith("every schedule"):
        return result.bound
    floor = result.stats.get("members", {}).get("floor", {}).get("bound")
    return None if floor is None else floor


def _better_start(instance: Instance, hint: Schedule | Sequence | None,
                  top: dict[str, Any] | None) -> Schedule | Sequence | None:
    """The solver's start: the GA's best, or on P3 the best list schedule when that is
    better (the GA allocates whole layers; the list scheduler may also place single ops)."""
    if instance.problem is not Problem.P3:
        return hint
    baselines = [(value, schedule) for ok, value, schedule in baseline_schedules(instance) if ok]
    if baselines and (hint is None or top is None or not top["feasible"] or baselines[0][0] < top["objective_value"]):
        return baselines[0][1]
    return hint
