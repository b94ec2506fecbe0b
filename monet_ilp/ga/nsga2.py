"""A MONET-style genetic algorithm: NSGA-II (pymoo) over keep/offload/recompute and core genes.

A heuristic backend of P3 (Instance -> verified Schedules on a latency/energy
front).  Each individual is a :class:`~monet_ilp.heuristics.decisions.Decisions`,
decoded into a timed schedule by the list scheduler of
:mod:`monet_ilp.heuristics.decisions` and scored by the evaluator
(:func:`monet_ilp.evaluate.evaluate`), the same witness every backend answers to.

Genes (integers, pymoo's ``vtype=int``):

* one per saved activation (``TrainingGraph.saved_tensors`` order): 0 keep,
  1 offload, 2 recompute (0-1 for graph inputs, which have no producer to rerun);
* one per layer (order of first appearance): an index into the cores that run the
  layer's first op.

The evolutionary machinery is pymoo's NSGA-II with uniform crossover and a
random-reset mutation (each gene redrawn with probability 1 / genes).

Constraint handling (penalty, not repair beyond the decoder's own): the decoder
already repairs what it can (Belady eviction keeps every SRAM within capacity
whenever each op fits).  An individual whose decoded schedule the evaluator still
rejects gets pymoo's constraint violation ``G = bytes over capacity (summed over
memories, at their peaks) + cycles over runtime_limit_cycles + number of other
violations``; feasible individuals have ``G = 0``.  NSGA-II's constrained
domination then ranks every feasible individual above every infeasible one, and
infeasible ones by ``G``.

Identical genomes are decoded once (a per-run cache); ``evaluations`` counts the
decode + evaluate calls actually made, ``cache_hits`` the repeats answered from the
cache.  The result's ``points`` are the non-dominated feasible schedules among every
individual evaluated and every seed schedule the evaluator accepts.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Sequence as Seq

import numpy as np

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import Metrics, evaluate
from monet_ilp.heuristics.decisions import (
    POLICIES,
    Decisions,
    decisions_from_schedule,
    decode_genes,
    default_decisions,
    plan_of,
)
from monet_ilp.instance import Instance
from monet_ilp.schedule import Schedule, Sequence

__all__ = ["FORMAT_NAME", "OBJECTIVES", "Genome", "run_ga", "score_genes", "violation"]

FORMAT_NAME = "monet-ilp/ga"
FORMAT_VERSION = 1
#: Objective name -> how to read it off the evaluator's metrics.
OBJECTIVES: dict[str, Callable[[Metrics], int]] = {
    "latency": lambda m: m.latency_cycles,
    "energy": lambda m: m.energy.total_pj,
}
_POINT_KEYS = {"latency": "latency_cycles", "energy": "energy_pj"}

Progress = Callable[[int, int, str], None]


class Genome:
    """The gene layout of one instance: bounds, and conversions to and from decisions."""

    def __init__(self, instance: Instance):
        plan = plan_of(instance)
        self.instance, self.plan = instance, plan
        self.n_saved = len(plan.saved)
        self.layer_cores = [plan.layer_cores[layer] for layer in plan.layers]
        self.upper = np.array([2 if t in plan.recomputable else 1 for t in plan.saved]
                              + [len(cores) - 1 for cores in self.layer_cores], dtype=int)
        self.lower = np.zeros_like(self.upper)

    @property
    def size(self) -> int:
        return len(self.upper)

    def split(self, x) -> tuple[list[int], list[str]]:
        """Policies (indices) and layer cores of a gene vector."""
        x = [int(v) for v in x]
        return x[:self.n_saved], [cores[i] for cores, i in zip(self.layer_cores, x[self.n_saved:])]

    def decisions(self, x) -> Decisions:
        policy, cores = self.split(x)
        return Decisions({t: POLICIES[p] for t, p in zip(self.plan.saved, policy)},
                         dict(zip(self.plan.layers, cores)), {"source": "ga"})

    def genes(self, decisions: Decisions) -> np.ndarray:
        """The gene vector of ``decisions`` (unknown entries: keep, first core)."""
        x = [min(POLICIES.index(decisions.tensors.get(t, "keep")), int(self.upper[i]))
             for i, t in enumerate(self.plan.saved)]
        for layer, cores in zip(self.plan.layers, self.layer_cores):
            core = decisions.cores.get(layer)
            x.append(cores.index(core) if core in cores else 0)
        return np.array(x, dtype=int)

    def decode(self, x, *, tidy: bool = True) -> Schedule:
        policy, cores = self.split(x)
        return decode_genes(self.instance, policy, cores, tidy=tidy)


def violation(instance: Instance, metrics: Metrics) -> float:
    """pymoo's constraint violation of a decoded schedule (module docstring); 0 if feasible."""
    if metrics.feasible:
        return 0.0
    over = sum(max(0, metrics.peak_bytes.get(m.id, 0) - m.capacity_bytes) for m in instance.memories)
    limit = instance.runtime_limit_cycles
    late = max(0, metrics.latency_cycles - limit) if limit is not None else 0
    others = sum(n for kind, n in metrics.violation_counts.items()
                 if kind not in ("capacity", "runtime_limit"))
    return float(over + late + others) or 1.0


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
) -> dict[str, Any]:
    """Search keep/offload/recompute and layer-to-core decisions with NSGA-II.

    Parameters
    ----------
    instance
        A P3 instance (graph inputs in a shared DRAM).
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
    genome = Genome(instance)
    scorer = _Scorer(instance, genome, objectives, workers)

    class _Problem(Problem):
        def __init__(self):
            super().__init__(n_var=genome.size, n_obj=len(objectives), n_ieq_constr=1,
                             xl=genome.lower, xu=genome.upper, vtype=int)

        def _evaluate(self, X, out, *args, **kwargs):
            scored = scorer.score(X)
            out["F"] = np.array([f for f, _, _ in scored], dtype=float)
            out["G"] = np.array([[g] for _, g, _ in scored], dtype=float)

    seeds = [evaluate(instance, s) for s in seed_schedules]
    start_rows = _initial_rows(instance, genome, [m.schedule for m in seeds], population, seed)
    algorithm = NSGA2(pop_size=population, sampling=start_rows, crossover=UniformCrossover(),
                      mutation=_reset_mutation(), eliminate_duplicates=True, seed=seed)
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
    points = _front(instance, genome, objectives, scorer.cache, seeds)
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "instance": instance.name,
        "instance_fingerprint": instance.fingerprint,
        "instance_objective": str(instance.objective),
        "objectives": list(objectives),
        "generations": done,
        "population": population,
        "seed": seed,
        "stopped": stopped,
        "workers": workers,
        "evaluations": scorer.evaluations,
        "cache_hits": scorer.hits,
        "seconds": round(searched, 3),
        "evaluations_per_second": round(scorer.evaluations / searched, 1) if searched > 0 else None,
        "points": points,
    }


Score = tuple[tuple[int, ...], float, "int | float"]  # objectives, violation G, instance objective


def score_genes(instance: Instance, genome: Genome, objectives: tuple[str, ...], x) -> Score:
    """Decode one gene vector and evaluate it.

    Returns the objective values, pymoo's ``G`` and the instance's own objective.
    """
    metrics = evaluate(instance, genome.decode(x, tidy=False))
    return (tuple(OBJECTIVES[o](metrics) for o in objectives), violation(instance, metrics),
            metrics.objective_value)


class _Scorer:
    """Scores gene vectors once each (a cache by genome), in this process or in a pool."""

    def __init__(self, instance: Instance, genome: Genome, objectives: tuple[str, ...], workers: int):
        self.instance, self.genome, self.objectives = instance, genome, objectives
        self.workers = workers
        self.cache: dict[bytes, Score] = {}
        self.evaluations = self.hits = 0
        self.pool = None
        if workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # Spawned, not forked: the caller may run threads (a progress bar, a solver).
            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_start_worker,
                                            initargs=(instance.to_dict(), objectives))

    def score(self, X) -> list[Score]:
        rows = np.asarray(X, dtype=int)
        keys = [row.astype(np.int8).tobytes() for row in rows]
        todo = {}
        for key, row in zip(keys, rows):
            if key in self.cache or key in todo:
                self.hits += 1
            else:
                todo[key] = row
        if todo:
            pending = list(todo.items())
            if self.pool is None:
                scores = [score_genes(self.instance, self.genome, self.objectives, row)
                          for _, row in pending]
            else:
                rows = np.array([row for _, row in pending])
                chunks = np.array_split(rows, min(len(pending), 2 * self.workers))
                scores = [s for part in self.pool.map(_score_in_worker, chunks) for s in part]
            for (key, _), found in zip(pending, scores):
                self.cache[key] = found
            self.evaluations += len(pending)
        return [self.cache[key] for key in keys]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


_WORKER: dict[str, Any] = {}


def _start_worker(instance_data: dict, objectives: tuple[str, ...]) -> None:
    instance = Instance.from_dict(instance_data)
    _WORKER.update(instance=instance, genome=Genome(instance), objectives=objectives)


def _score_in_worker(rows) -> list[Score]:
    instance, genome, objectives = _WORKER["instance"], _WORKER["genome"], _WORKER["objectives"]
    return [score_genes(instance, genome, objectives, row) for row in rows]


def _initial_rows(instance: Instance, genome: Genome, seed_schedules: list[Schedule], population: int,
                  seed: int) -> np.ndarray:
    """Seeds first (solver schedules, then all-keep / all-offload / all-recompute on the store-all
    allocation), the rest uniformly random."""
    rows = [genome.genes(decisions_from_schedule(instance, s)) for s in seed_schedules]
    base = genome.genes(default_decisions(instance))
    rows.append(base)
    n = genome.n_saved
    for policy in (1, 2):
        row = base.copy()
        row[:n] = np.minimum(policy, genome.upper[:n])
        rows.append(row)
    rng = np.random.default_rng(seed)
    while len(rows) < population:
        rows.append(rng.integers(genome.lower, genome.upper + 1))
    unique = list({r.tobytes(): r for r in rows[:population]}.values())
    while len(unique) < population:  # duplicates (tiny genomes): fill with fresh random rows
        unique.append(rng.integers(genome.lower, genome.upper + 1))
    return np.array(unique[:population], dtype=int)


def _front(instance: Instance, genome: Genome, objectives: tuple[str, ...],
           cache: dict, seeds: list[Metrics]) -> list[dict[str, Any]]:
    """The non-dominated feasible points among the evaluated genomes and the seed schedules."""
    candidates = []  # (objective tuple, kind, payload)
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
        return [_point(instance, genome, objectives, "ga", key, seeds)]
    candidates.sort(key=lambda c: (c[0], c[1] != "seed"))  # a seed wins ties: it is the original
    front, kept = [], []
    for f, kind, payload in candidates:
        if any(all(a <= b for a, b in zip(q, f)) for q in kept):
            continue  # dominated by (or equal to) a point already kept
        kept.append(f)
        front.append(_point(instance, genome, objectives, kind, payload, seeds))
    return sorted(front, key=lambda p: (p["latency_cycles"], p["energy_pj"]))


def _point(instance: Instance, genome: Genome, objectives, kind: str, payload, seeds) -> dict[str, Any]:
    if kind == "seed":
        metrics = seeds[payload]
        decisions = decisions_from_schedule(instance, metrics.schedule)
    else:
        x = np.frombuffer(payload, dtype=np.int8).astype(int)
        decisions = genome.decisions(x)
        metrics = evaluate(instance, genome.decode(x))
    return {
        "latency_cycles": metrics.latency_cycles,
        "energy_pj": metrics.energy.total_pj,
        "objective_value": metrics.objective_value,
        "feasible": metrics.feasible,
        "source": kind,
        "recomputations": metrics.recomputations,
        "transfers": metrics.transfers,
        "decisions": decisions.to_dict(),
        # Stamped like solve()'s schedules: where it came from, and for which instance.
        "schedule": {**metrics.schedule.to_dict(),
                     "meta": {**metrics.schedule.meta, "source": f"ga:{kind}",
                              "instance": instance.fingerprint}},
    }


def _reset_mutation():
    """pymoo's mutation for categorical integer genes (pymoo is imported only when the GA runs)."""
    from pymoo.core.mutation import Mutation

    class ResetMutation(Mutation):
        """Random reset: each gene is redrawn uniformly in its bounds with probability ``prob_var``."""

        def _do(self, problem, X, random_state=None, **kwargs):
            prob_var = self.get_prob_var(problem, size=(len(X), 1))
            redraw = random_state.random(X.shape) < prob_var
            fresh = random_state.integers(problem.xl, problem.xu + 1, size=X.shape)
            out = np.array(X, dtype=int, copy=True)
            out[redraw] = fresh[redraw]
            return out

    return ResetMutation()
