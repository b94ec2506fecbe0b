"""A MONET-style genetic algorithm: NSGA-II (pymoo) over keep/offload/recompute and core genes.

A heuristic backend of P1-P3 (Instance -> verified Schedules on a latency/energy
front).  The genome, its decoding and its scoring are :mod:`.genome`; this module is
the search and the file it writes (:data:`FORMAT_NAME`, documented by :func:`run_ga`).

The evolutionary machinery is pymoo's NSGA-II with uniform crossover and a
random-reset mutation (each gene redrawn with probability 1 / genes).  NSGA-II's
constrained domination ranks every feasible individual above every infeasible one,
and infeasible ones by their violation ``G`` (:func:`.genome.violation`).

The result's ``points`` are the non-dominated feasible schedules among every
individual evaluated and every seed schedule the evaluator accepts
(:func:`monet_ilp.results.non_dominated`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from collections.abc import Sequence as Seq
from typing import TYPE_CHECKING, Any

import numpy as np

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import Metrics, evaluate
from monet_ilp.ga.genome import OBJECTIVES, Genes, Genome, Score, Scorer, violation
from monet_ilp.heuristics.checkpointing import chen_greedy_sequence, chen_sqrt_sequence
from monet_ilp.heuristics.decisions import decisions_from_schedule, default_decisions
from monet_ilp.results import GA_FORMAT, non_dominated

if TYPE_CHECKING:
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "POINT_KEYS", "front_file", "point_of", "reset_mutation", "run_ga"]

#: The key of each objective in a point of the front file.
POINT_KEYS = {"latency": "latency_cycles", "energy": "energy_pj"}

FORMAT_NAME = GA_FORMAT
FORMAT_VERSION = 1

Progress = Callable[[int, int, str], None]


def run_ga(
    instance: Instance,
    objectives: Seq[str] = ("latency", "energy"),
    generations: int = 100,
    population: int = 64,
    seed: int = 1,
    seed_schedules: Iterable[Schedule | Sequence] = (),
    progress: Progress | None = None,
    *,
    time_limit: float | None = None,
    workers: int = 1,
    fast: bool = True,
    pins: bool = True,
) -> dict[str, Any]:
    """Search keep/offload/recompute and layer-to-core decisions with NSGA-II.

    Parameters
    ----------
    instance
        A P1, P2 or P3 instance (the genes of each: :mod:`.genome`).
    objectives
        One or both of ``"latency"`` and ``"energy"`` (the evaluator's values).
    generations, population
        NSGA-II's generations (after the initial population) and population size.
    seed
        pymoo's random seed; the same seed gives the same result.
    seed_schedules
        Schedules (e.g. a solver's) whose decisions join the initial population
        (:func:`~monet_ilp.heuristics.decisions.decisions_from_schedule`); each one
        the evaluator accepts is also a candidate point as it is.
    progress
        Called as ``progress(done, total, message)`` after each generation.
    time_limit
        Seconds; the search stops after the generation that exceeds it.
    workers
        Processes that decode and evaluate (1: in this process).  The result does
        not depend on it.  More than 1 spawns processes, so a script that calls this
        needs the usual ``if __name__ == "__main__":`` guard.
    fast
        Score individuals on the fast path (:mod:`.fast`, the default) or with the
        reference evaluator.  The returned points are evaluated by the reference
        either way, and a point whose fast score differs from the reference's raises
        (a bug).
    pins
        Give the GA its pin genes (one per layer whose ops read weights; ``False``: the
        weights stay in ``persistent_home``, as in MONET's GA).

    Returns
    -------
    dict
        JSON-ready: ``format`` (``"monet-ilp/ga"``), ``instance``, ``objectives``,
        ``generations``, ``population``, ``seed``, ``evaluations``, ``cache_hits``,
        ``seconds``, ``evaluations_per_second``, ``stopped`` (``"generations"`` or
        ``"time_limit"``) and ``points``: the non-dominated feasible points, by
        latency, each with ``latency_cycles``, ``energy_pj``, ``objective_value``
        (the instance's objective), ``feasible``, ``source`` (``"ga"`` or
        ``"seed"``), ``decisions`` and the inline ``schedule``.  With no feasible
        individual, ``points`` holds the least infeasible one (``feasible``: false).

    Raises
    ------
    MonetError
        An unknown objective, a population below 2, or an instance the decoder
        cannot schedule (inputs in SRAM).
    """
    # pymoo takes most of a second to import: only a GA run pays for it.
    from pymoo.algorithms.moo.nsga2 import NSGA2
    from pymoo.core.problem import Problem
    from pymoo.operators.crossover.ux import UniformCrossover

    objectives = tuple(objectives)
    unknown = [o for o in objectives if o not in OBJECTIVES]
    if not objectives or unknown or len(set(objectives)) != len(objectives):
        raise MonetError(f"objectives {','.join(objectives) or '(none)'} are not a list of distinct "
                         f"known objectives", field="objectives",
                         fix=f"use one or both of: {', '.join(OBJECTIVES)}")
    if population < 2 or generations < 0:
        raise MonetError(f"population {population} and generations {generations}", field="population",
                         fix="use a population of at least 2 and generations >= 0")
    if workers < 1:
        raise MonetError(f"workers {workers}", field="workers", fix="use 1 or more processes")
    began = time.perf_counter()
    genome = Genome(instance, pins=pins)
    scorer = Scorer(instance, genome, objectives, workers, fast=fast)

    class _Problem(Problem):  # type: ignore[misc]  # pymoo is untyped
        def __init__(self) -> None:
            super().__init__(n_var=genome.size, n_obj=len(objectives), n_ieq_constr=1,
                             xl=genome.lower, xu=genome.upper, vtype=int)

        # pymoo's own (untyped) hook: X a population matrix, out the dict it reads F and G from.
        def _evaluate(self, X: Genes, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            scored = scorer.score(X)
            out["F"] = np.array([f for f, _, _ in scored], dtype=float)
            out["G"] = np.array([[g] for _, g, _ in scored], dtype=float)

    seeds = [evaluate(instance, s) for s in seed_schedules]
    start_rows = _initial_rows(instance, genome, [m.schedule for m in seeds], population, seed)
    algorithm = NSGA2(pop_size=population, sampling=start_rows, crossover=UniformCrossover(),
                      mutation=reset_mutation(), eliminate_duplicates=True, seed=seed)
    algorithm.setup(_Problem(), termination=("n_gen", generations + 1), verbose=False)
    stopped, done = "generations", -1
    try:
        while algorithm.has_next():
            algorithm.next()  # the first call evaluates the initial population (generation 0)
            done += 1
            if progress is not None:
                progress(done, generations, f"generation {done}/{generations}, "
                                            f"{scorer.evaluations} evaluations")
            late = time_limit is not None and time.perf_counter() - began > time_limit
            if late and algorithm.has_next():
                stopped = "time_limit"
                break
    finally:
        scorer.close()
    searched = time.perf_counter() - began
    return front_file(
        instance, objectives, _front(instance, genome, objectives, scorer.cache, seeds),
        generations=done, population=population, seed=seed, stopped=stopped, workers=workers,
        evaluations=scorer.evaluations, cache_hits=scorer.hits, seconds=round(searched, 3),
        evaluations_per_second=round(scorer.evaluations / searched, 1) if searched > 0 else None,
        scoring="fast" if fast and not genome.sequence_form else "reference", pin_genes=len(genome.pin_layers))


def front_file(instance: Instance, objectives: Seq[str], points: list[dict[str, Any]],
               **fields: Any) -> dict[str, Any]:
    """A front file (:data:`FORMAT_NAME`): what it is of, the run's ``fields``, then ``points``."""
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "instance": instance.name,
            "instance_fingerprint": instance.fingerprint, "instance_objective": str(instance.objective),
            "objectives": list(objectives), **fields, "points": points}


def _initial_rows(instance: Instance, genome: Genome, seed_schedules: list[Schedule], population: int,
                  seed: int) -> np.ndarray:
    """Seeds first (solver schedules; on P1 Chen's greedy and sqrt(n) checkpointing; then
    all-keep / all-offload / all-recompute on the store-all allocation, each also with every
    layer's weights pinned), the rest uniformly random."""
    rows = [genome.genes(decisions_from_schedule(instance, s)) for s in seed_schedules]
    if genome.sequence_form:  # P1: Chen's checkpointing decisions too (greedy, then sqrt(n))
        for make in (chen_greedy_sequence, chen_sqrt_sequence):
            try:
                timed = evaluate(instance, make(instance)).schedule
            except MonetError:
                continue
            rows.append(genome.genes(decisions_from_schedule(instance, timed)))
    base = genome.genes(default_decisions(instance))
    rows.append(base)
    n = genome.n_saved
    for policy in (1, 2):
        row = base.copy()
        row[:n] = np.minimum(policy, genome.upper[:n])
        rows.append(row)
    if genome.pin_layers:  # every layer's weights pinned, each policy
        for row in rows[-3:]:
            pinned = row.copy()
            pinned[genome.size - len(genome.pin_layers):] = 1
            rows.append(pinned)
    rng = np.random.default_rng(seed)
    while len(rows) < population:
        rows.append(rng.integers(genome.lower, genome.upper + 1))
    unique = list({r.tobytes(): r for r in rows[:population]}.values())
    while len(unique) < population:  # duplicates (tiny genomes): fill with fresh random rows
        unique.append(rng.integers(genome.lower, genome.upper + 1))
    return np.array(unique[:population], dtype=int)


def _front(instance: Instance, genome: Genome, objectives: tuple[str, ...],
           cache: dict[bytes, Score], seeds: list[Metrics]) -> list[dict[str, Any]]:
    """The non-dominated feasible points among the evaluated genomes and the seed schedules."""
    # (objective values, kind, payload: the genome's cache key, or the seed's index)
    candidates: list[tuple[tuple[int, ...], str, bytes | int]] = []
    for key, (f, g, _) in cache.items():
        if g == 0:
            candidates.append((f, "ga", key))
    for k, metrics in enumerate(seeds):
        if metrics.feasible:
            candidates.append((tuple(OBJECTIVES[o](metrics) for o in objectives), "seed", k))
    if not candidates:
        if not cache:
            return []
        key = min(cache, key=lambda k: (cache[k][1], cache[k][0]))
        return [_point(instance, genome, objectives, "ga", key, seeds, cache)]
    candidates.sort(key=lambda c: (c[0], c[1] != "seed"))  # a seed wins ties: it is the original
    front = [_point(instance, genome, objectives, kind, payload, seeds, cache)
             for _, kind, payload in non_dominated(candidates, key=lambda c: c[0], keep_equal=False)]
    return sorted(front, key=lambda p: (p["latency_cycles"], p["energy_pj"]))


def _point(instance: Instance, genome: Genome, objectives: tuple[str, ...], kind: str, payload: bytes | int,
           seeds: list[Metrics], cache: dict[bytes, Score]) -> dict[str, Any]:
    """A returned point, evaluated by the reference evaluator (the witness)."""
    if isinstance(payload, int):  # a seed schedule
        metrics = seeds[payload]
        decisions = decisions_from_schedule(instance, metrics.schedule)
    else:
        x = np.frombuffer(payload, dtype=np.int8).astype(int)
        decisions = genome.decisions(x)
        metrics = evaluate(instance, genome.decode(x))
        witnessed = (tuple(OBJECTIVES[o](metrics) for o in objectives), violation(instance, metrics),
                     metrics.objective_value)
        if witnessed != cache[payload]:
            raise AssertionError(f"the GA scored an individual {cache[payload]} (objectives, violation, "
                                 f"objective) and the evaluator says {witnessed}; this is a bug")
    return point_of(instance, metrics, kind, decisions.to_dict())


def point_of(instance: Instance, metrics: Metrics, source: str,
             decisions: dict[str, Any] | None = None) -> dict[str, Any]:
    """A point of the front file: a schedule the evaluator has checked (``metrics``), its
    decisions (read from the schedule unless given) and where it came from."""
    if decisions is None:
        decisions = decisions_from_schedule(instance, metrics.schedule).to_dict()
    return {
        "latency_cycles": metrics.latency_cycles,
        "energy_pj": metrics.energy.total_pj,
        "objective_value": metrics.objective_value,
        "feasible": metrics.feasible,
        "source": source,
        "recomputations": metrics.recomputations,
        "transfers": metrics.transfers,
        "decisions": decisions,
        # Stamped like solve()'s schedules: where it came from, and for which instance.
        "schedule": {**metrics.schedule.to_dict(),
                     "meta": {**metrics.schedule.meta, "source": f"ga:{source}",
                              "instance": instance.fingerprint}},
    }


def reset_mutation() -> Any:  # a pymoo Mutation: pymoo is untyped
    """pymoo's mutation for categorical integer genes (pymoo is imported only when the GA runs)."""
    # pymoo takes most of a second to import: only a GA run pays for it.
    from pymoo.core.mutation import Mutation

    class ResetMutation(Mutation):  # type: ignore[misc]  # pymoo is untyped
        """Random reset: each gene is redrawn uniformly in its bounds with probability ``prob_var``."""

        # pymoo's own (untyped) hook: problem a pymoo Problem, random_state a numpy Generator.
        def _do(self, problem: Any, X: Genes, random_state: Any = None, **kwargs: Any) -> Genes:
            prob_var = self.get_prob_var(problem, size=(len(X), 1))
            redraw = random_state.random(X.shape) < prob_var
            fresh = random_state.integers(problem.xl, problem.xu + 1, size=X.shape)
            out = np.array(X, dtype=int, copy=True)
            out[redraw] = fresh[redraw]
            return out

    return ResetMutation()
