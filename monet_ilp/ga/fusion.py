"""The GA with fusion genes (``formulations/fusion.md`` FU.G): NSGA-II over the fusion
plan and the decisions of the layers, decoded by the same decoder on the tiled instance.

Genes: the genome of the untiled instance (:class:`~monet_ilp.ga.genome.Genome`: a policy
per saved activation, a core per layer, a pin per layer), then per chain of fusable ops
(:func:`~monet_ilp.graph.fusion.chains`) a *cut gene* per boundary between neighbouring
ops (1: the two are in one stack) and a *tile gene* per op (an index into the tile counts;
a stack takes its first op's). A gene vector decodes into a plan (FU.G1), the plan into
its tiled instance (made once per plan), and the decisions into that instance's decisions
by name (FU.G2): each tile of a saved activation takes the activation's policy, each tile
op its layer's core (tiles of a layer share it, so a stack spreads over cores layer by
layer: Stream's layer-fused pipelining), each pin its layer's pin. The fast path
(:mod:`monet_ilp.heuristics.fast`) scores the decoded raw schedule on the tiled instance,
equal to the evaluator's metrics; the returned points are evaluated again by the evaluator.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import Metrics, evaluate
from monet_ilp.ga.genome import OBJECTIVES, Genes, Genome, violation
from monet_ilp.ga.nsga2 import reset_mutation
from monet_ilp.graph.fusion import TILE_SEP, Axis, FusionPlan, Stack, chain_parts, chains, op_rows
from monet_ilp.heuristics.decisions import Decisions
from monet_ilp.heuristics.fast import FastMetrics, fast_metrics
from monet_ilp.make import make_instance
from monet_ilp.results import non_dominated

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.hardware.model import Hardware
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule

__all__ = ["UNSCHEDULABLE", "FusionGenome", "FusionScore", "run_fusion_ga"]

#: pymoo's constraint violation of a plan the decoder cannot schedule at all (an op,
#: staged weights included, larger than every SRAM): larger than any byte excess.
UNSCHEDULABLE = 1e15

#: The tile counts a tile gene chooses from (FU.G1; 1 is layer by layer).
TILES = (1, 2, 4, 8)


@dataclass(frozen=True)
class FusionScore:
    """A scored gene vector: its plan, objective values, violation and instance objective."""

    plan: FusionPlan
    objectives: tuple[int, ...]
    violation: float
    objective_value: int | float | None


class FusionGenome:
    """The gene layout of a graph on a hardware: decisions and fusion genes (module docstring)."""

    def __init__(self, graph: TrainingGraph, hardware: Hardware, make_options: Mapping[str, Any], *,
                 axis: Axis | str = Axis.ROWS, tiles: Sequence[int] = TILES, pins: bool = True) -> None:
        self.graph, self.hardware, self.options = graph, hardware, dict(make_options)
        self.axis, self.tiles, self.pins = Axis(axis), tuple(tiles), pins
        self.base = make_instance(graph, hardware, **self.options)
        self.genome = Genome(self.base, pins=pins)
        self.runs = chains(graph, self.axis)
        self.rows = {op: op_rows(graph, op, self.axis) for run in self.runs for op in run}
        cuts = [1] * sum(len(r) - 1 for r in self.runs)
        tile_genes = [len(self.tiles) - 1] * sum(len(r) for r in self.runs)
        self.upper = np.concatenate([self.genome.upper, np.array(cuts + tile_genes, dtype=int)]).astype(int)
        self.lower = np.zeros_like(self.upper)
        self._tiled: dict[FusionPlan, tuple[Instance, Genome] | MonetError] = {}

    @property
    def size(self) -> int:
        return len(self.upper)

    def plan(self, x: Genes) -> FusionPlan:
        """FU.G1: the stacks the cut genes join, each with its first op's tile count, cut to
        the fewest rows of its ops (FU.S3); stacks of one op or one tile are left out."""
        genes = [int(v) for v in x[self.genome.size:]]
        n_cuts = sum(len(r) - 1 for r in self.runs)
        cuts, tile_genes = genes[:n_cuts], genes[n_cuts:]
        stacks: list[Stack] = []
        c = t = 0
        for run in self.runs:
            current = [run[0]]
            counts = tile_genes[t:t + len(run)]
            first = 0
            for k in range(1, len(run) + 1):
                joined = k < len(run) and cuts[c + k - 1] == 1
                if joined:
                    current.append(run[k])
                    continue
                tiles = min(self.tiles[counts[first]], *(self.rows[o] for o in current))
                if len(current) > 1 and tiles > 1:
                    stacks += [Stack(tuple(part), tiles, self.axis)
                               for part in chain_parts(self.graph, current) if len(part) > 1]
                if k < len(run):
                    current, first = [run[k]], k
            c += len(run) - 1
            t += len(run)
        return FusionPlan(tuple(stacks))

    def tiled(self, plan: FusionPlan) -> tuple[Instance, Genome] | MonetError:
        """The tiled instance of ``plan`` and its genome (made once per plan), or why the
        decoder cannot schedule it."""
        if plan not in self._tiled:
            if not plan.fused:
                self._tiled[plan] = (self.base, self.genome)
            else:
                try:
                    inst = make_instance(self.graph, self.hardware, fusion=plan, **self.options)
                    self._tiled[plan] = (inst, Genome(inst, pins=self.pins))
                except MonetError as exc:
                    self._tiled[plan] = exc
        return self._tiled[plan]

    def decisions(self, x: Genes) -> Decisions:
        """The untiled instance's decisions of ``x`` (its first genes)."""
        return self.genome.decisions(x[:self.genome.size])

    def tiled_genes(self, x: Genes, genome: Genome) -> Genes:
        """FU.G2: the decisions of ``x`` on a tiled instance's genome, by name."""
        base = self.decisions(x)
        tensors = {t: base.tensors.get(t.split(TILE_SEP, 1)[0], "keep") for t in genome.plan.saved}
        return genome.genes(Decisions(tensors, dict(base.cores), dict(base.meta), base.pinned))

    def score(self, x: Genes, objectives: tuple[str, ...], *, fast: bool = True) -> FusionScore:
        plan = self.plan(x)
        tiled = self.tiled(plan)
        if isinstance(tiled, MonetError):
            return FusionScore(plan, tuple(2**62 for _ in objectives), UNSCHEDULABLE, None)
        inst, genome = tiled
        xt = self.tiled_genes(x, genome)
        metrics: Metrics | FastMetrics
        try:
            metrics = fast_metrics(inst, genome.decode_raw(xt)) if fast else evaluate(inst, genome.decode(xt))
        except MonetError:  # an op that fits no SRAM beside its inputs (a staged weight too large)
            self._tiled[plan] = MonetError("unschedulable")
            return FusionScore(plan, tuple(2**62 for _ in objectives), UNSCHEDULABLE, None)
        return FusionScore(plan, tuple(OBJECTIVES[o](metrics) for o in objectives), violation(inst, metrics),
                           metrics.objective_value)

    def evaluated(self, x: Genes) -> tuple[Instance, Metrics]:
        """The tiled instance of ``x`` and the evaluator's metrics of its decoded schedule."""
        tiled = self.tiled(self.plan(x))
        if isinstance(tiled, MonetError):
            raise tiled
        inst, genome = tiled
        return inst, evaluate(inst, genome.decode(self.tiled_genes(x, genome)))


def run_fusion_ga(graph: TrainingGraph, hardware: Hardware, make_options: Mapping[str, Any], *,
                  objectives: Sequence[str] = ("latency", "energy"), generations: int = 50,
                  population: int = 48, seed: int = 1, time_limit: float | None = None,
                  axis: Axis | str = Axis.ROWS, tiles: Sequence[int] = TILES, pins: bool = True,
                  fast: bool = True) -> dict[str, Any]:
    """NSGA-II over fusion plans and decisions (module docstring); in this process.

    Returns a front file (``monet-ilp/ga``): ``points`` are the non-dominated feasible
    points, each with its ``fusion`` plan, the fingerprint of its tiled instance, its
    decisions (of the untiled instance) and its schedule, evaluated by the evaluator; a
    point whose fast score differs from the evaluator's raises (a bug).
    """
    from pymoo.algorithms.moo.nsga2 import NSGA2  # pymoo takes most of a second to import
    from pymoo.core.problem import Problem
    from pymoo.operators.crossover.ux import UniformCrossover

    objectives = tuple(objectives)
    if not objectives or any(o not in OBJECTIVES for o in objectives):
        raise MonetError(f"objectives {','.join(objectives)}", field="objectives",
                         fix=f"use one or both of: {', '.join(OBJECTIVES)}")
    if population < 2 or generations < 0:
        raise MonetError(f"population {population} and generations {generations}", field="population",
                         fix="use a population of at least 2 and generations >= 0")
    began = time.perf_counter()
    genome = FusionGenome(graph, hardware, make_options, axis=axis, tiles=tiles, pins=pins)
    cache: dict[bytes, FusionScore] = {}
    counts = {"evaluations": 0, "hits": 0}

    def scored(x: Genes) -> FusionScore:
        key = np.asarray(x, dtype=np.int8).tobytes()
        if key in cache:
            counts["hits"] += 1
        else:
            counts["evaluations"] += 1
            cache[key] = genome.score(np.asarray(x, dtype=int), objectives, fast=fast)
        return cache[key]

    class _Problem(Problem):  # type: ignore[misc]  # pymoo is untyped
        def __init__(self) -> None:
            super().__init__(n_var=genome.size, n_obj=len(objectives), n_ieq_constr=1,
                             xl=genome.lower, xu=genome.upper, vtype=int)

        # pymoo's own (untyped) hook: X a population matrix, out the dict it reads F and G from.
        def _evaluate(self, X: Genes, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            scores = [scored(row) for row in np.asarray(X, dtype=int)]
            out["F"] = np.array([s.objectives for s in scores], dtype=float)
            out["G"] = np.array([[s.violation] for s in scores], dtype=float)

    rng = np.random.default_rng(seed)
    rows = _starts(genome)
    while len(rows) < population:
        rows.append(rng.integers(genome.lower, genome.upper + 1))
    start = np.array(list({r.tobytes(): r for r in rows}.values())[:population], dtype=int)
    while len(start) < population:
        start = np.vstack([start, rng.integers(genome.lower, genome.upper + 1)])
    algorithm = NSGA2(pop_size=population, sampling=start, crossover=UniformCrossover(),
                      mutation=reset_mutation(), eliminate_duplicates=True, seed=seed)
    algorithm.setup(_Problem(), termination=("n_gen", generations + 1), verbose=False)
    stopped, done = "generations", -1
    while algorithm.has_next():
        algorithm.next()
        done += 1
        if time_limit is not None and time.perf_counter() - began > time_limit and algorithm.has_next():
            stopped = "time_limit"
            break
    searched = time.perf_counter() - began
    return {"format": "monet-ilp/ga", "version": 1, "instance": genome.base.name,
            "instance_fingerprint": genome.base.fingerprint, "instance_objective": str(genome.base.objective),
            "objectives": list(objectives), "fusion_genes": genome.size - genome.genome.size,
            "generations": done, "population": population, "seed": seed, "stopped": stopped,
            "evaluations": counts["evaluations"], "cache_hits": counts["hits"], "seconds": round(searched, 3),
            "scoring": "fast" if fast else "reference", "plans": len(genome._tiled),  # noqa: SLF001
            "points": _front(genome, objectives, cache)}


def _starts(genome: FusionGenome) -> list[Genes]:
    """Layer by layer (every cut gene 0, one tile), then each chain fused whole at each tile
    count, on the default decisions (keep, first core, no pin)."""
    base = np.zeros(genome.size, dtype=int)
    rows = [base]
    n_cuts = sum(len(r) - 1 for r in genome.runs)
    for t in range(1, len(genome.tiles)):
        row = base.copy()
        row[genome.genome.size:genome.genome.size + n_cuts] = 1
        row[genome.genome.size + n_cuts:] = t
        rows.append(row)
    return rows


def _front(genome: FusionGenome, objectives: tuple[str, ...],
           cache: Mapping[bytes, FusionScore]) -> list[dict[str, Any]]:
    feasible = [(s.objectives, key) for key, s in cache.items() if s.violation == 0]
    if not feasible:
        return []
    points = []
    for values, key in non_dominated(sorted(feasible), key=lambda c: c[0], keep_equal=False):
        x = np.frombuffer(key, dtype=np.int8).astype(int)
        inst, metrics = genome.evaluated(x)
        witnessed = tuple(OBJECTIVES[o](metrics) for o in objectives)
        if witnessed != values or not metrics.feasible:
            raise AssertionError(f"the fusion GA scored {values} and the evaluator says {witnessed} "
                                 f"(feasible: {metrics.feasible}); this is a bug")
        schedule: Schedule = metrics.schedule
        points.append({
            "latency_cycles": metrics.latency_cycles, "energy_pj": metrics.energy.total_pj,
            "objective_value": metrics.objective_value, "feasible": True, "source": "ga",
            "fusion": genome.plan(x).to_dict(), "instance_fingerprint": inst.fingerprint,
            "recomputations": metrics.recomputations, "transfers": metrics.transfers,
            "decisions": genome.decisions(x).to_dict(),
            "schedule": {**schedule.to_dict(), "meta": {**schedule.meta, "source": "ga:fusion",
                                                        "instance": inst.fingerprint}},
        })
    return sorted(points, key=lambda p: (p["latency_cycles"], p["energy_pj"]))
