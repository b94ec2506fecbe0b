"""The GA's genome and its scoring: genes <-> decisions, decoding, pymoo's constraint violation.

Each individual is a :class:`~monet_ilp.heuristics.decisions.Decisions`, decoded into
a timed schedule by the list scheduler of :mod:`monet_ilp.heuristics.decisions` (P2,
P3), or into a Sequence by on-demand rematerialisation (P1,
:func:`~monet_ilp.heuristics.decisions.decode_sequence`), and scored by the evaluator
(:func:`monet_ilp.evaluate.evaluate`), the same witness every backend answers to.

Genes (integers, pymoo's ``vtype=int``):

* one per saved activation (``TrainingGraph.saved_tensors`` order): 0 keep,
  1 offload, 2 recompute (0-1 for graph inputs, which have no producer to rerun); on
  P1, with no memory to offload to, 0 keep and 1 recompute (0 for graph inputs);
* one per layer (order of first appearance): an index into the cores that run the
  layer's first op;
* one per layer whose ops read persistent tensors, when the instance models them
  (``persistent_home``) and the GA is asked for them (``pins``, the default): 1 pins them (weights, gradients, optimizer state) in the SRAM
  of the layer's core, so that its ops run at their pinned cost; the decoder leaves a
  pin out when the tensor's readers run on several cores (``Decisions.pinned``).

Constraint handling (penalty, not repair beyond the decoder's own): the decoder
already repairs what it can (Belady eviction keeps every SRAM within capacity
whenever each op fits).  An individual whose decoded schedule the evaluator still
rejects gets pymoo's constraint violation ``G = bytes over capacity (summed over
memories, at their peaks) + cycles over runtime_limit_cycles + number of other
violations`` (:func:`violation`); feasible individuals have ``G = 0``.

Scoring takes the fast path by default (:mod:`.fast`: the decoder's raw output and
only the metrics the search reads, equal to the evaluator's); ``fast=False`` decodes
into a schedule and runs the reference evaluator on it.  Either way the points the GA
returns are evaluated again by the reference (:func:`~monet_ilp.ga.nsga2.run_ga`).

Identical genomes are decoded once (:class:`Scorer`, a per-run cache);
``evaluations`` counts the decode + evaluate calls actually made, ``cache_hits`` the
repeats answered from the cache.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from monet_ilp.evaluate import Metrics, evaluate
from monet_ilp.heuristics.decisions import (
    POLICIES,
    Decisions,
    RawSchedule,
    decode_genes,
    decode_raw,
    decode_sequence,
    plan_of,
)
from monet_ilp.heuristics.fast import FastMetrics, fast_metrics
from monet_ilp.instance import Instance

if TYPE_CHECKING:
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["OBJECTIVES", "Genes", "Genome", "Score", "Scorer", "score_genes", "violation"]

#: A gene vector (or a matrix of them, one per row), as pymoo hands them over.
Genes = npt.NDArray[np.int_]

#: Objective name -> how to read it off the evaluator's metrics (or the fast path's).
OBJECTIVES: dict[str, Callable[[Metrics | FastMetrics], int]] = {
    "latency": lambda m: m.latency_cycles,
    "energy": lambda m: m.energy.total_pj,
}


class Genome:
    """The gene layout of one instance: bounds, and conversions to and from decisions."""

    def __init__(self, instance: Instance, *, pins: bool = True):
        plan = plan_of(instance)
        self.instance, self.plan = instance, plan
        self.n_saved = len(plan.saved)
        self.sequence_form = plan.sequence_form
        # The policies (indices into POLICIES) each saved activation's gene ranges over.
        offload = () if plan.sequence_form else (POLICIES.index("offload"),)
        self.choices = [(0, *offload, *((POLICIES.index("recompute"),) if t in plan.recomputable else ()))
                        for t in plan.saved]
        self.layer_cores = [plan.layer_cores[layer] for layer in plan.layers]
        self.pin_layers = [layer for layer in plan.layers if plan.layer_persistent[layer]] \
            if plan.pins_modelled and pins else []
        self.upper = np.array([len(c) - 1 for c in self.choices]
                              + [len(cores) - 1 for cores in self.layer_cores]
                              + [1] * len(self.pin_layers), dtype=int)
        self.lower = np.zeros_like(self.upper)

    @property
    def size(self) -> int:
        return len(self.upper)

    def split(self, x: Iterable[int]) -> tuple[list[int], list[str], list[str]]:
        """Policies (indices), layer cores and pinned tensors of a gene vector."""
        genes = [int(v) for v in x]
        n, m = self.n_saved, self.n_saved + len(self.layer_cores)
        chosen = [cores[i] for cores, i in zip(self.layer_cores, genes[n:m], strict=True)]
        layer_persistent = self.plan.layer_persistent
        pins = [t for layer, g in zip(self.pin_layers, genes[m:], strict=True) if g
                for t in layer_persistent[layer]]
        return [c[g] for c, g in zip(self.choices, genes[:n], strict=True)], chosen, pins

    def decisions(self, x: Iterable[int]) -> Decisions:
        policy, cores, pins = self.split(x)
        return Decisions({t: POLICIES[p] for t, p in zip(self.plan.saved, policy, strict=True)},
                         dict(zip(self.plan.layers, cores, strict=True)), {"source": "ga"}, tuple(pins))

    def genes(self, decisions: Decisions) -> Genes:
        """The gene vector of ``decisions`` (unknown entries, or a policy the gene lacks: keep,
        first core)."""
        wanted = [POLICIES.index(decisions.tensors.get(t, "keep")) for t in self.plan.saved]
        x = [c.index(p) if p in c else 0 for c, p in zip(self.choices, wanted, strict=True)]
        for layer, cores in zip(self.plan.layers, self.layer_cores, strict=True):
            core = decisions.cores.get(layer)
            x.append(cores.index(core) if core in cores else 0)
        pinned = set(decisions.pinned)
        x.extend(int(all(t in pinned for t in self.plan.layer_persistent[layer])) for layer in self.pin_layers)
        return np.array(x, dtype=int)

    def decode(self, x: Iterable[int], *, tidy: bool = True) -> Schedule | Sequence:
        """The schedule of a gene vector: timed (P2, P3), or a Sequence (P1)."""
        if self.sequence_form:
            return decode_sequence(self.instance, self.decisions(x))
        policy, cores, pins = self.split(x)
        return decode_genes(self.instance, policy, cores, pins, tidy=tidy)

    def decode_raw(self, x: Iterable[int]) -> RawSchedule:
        """The decoded schedule as field tuples (the fast path, :mod:`.fast`; P2 and P3)."""
        if self.sequence_form:
            raise ValueError("a P1 genome decodes into a Sequence: use decode()")
        policy, cores, pins = self.split(x)
        return decode_raw(self.instance, policy, cores, pins)


def violation(instance: Instance, metrics: Metrics | FastMetrics) -> float:
    """pymoo's constraint violation of a decoded schedule (module docstring); 0 if feasible."""
    if metrics.feasible:
        return 0.0
    over = sum(max(0, metrics.peak_bytes.get(m.id, 0) - m.capacity_bytes) for m in instance.memories)
    limit = instance.runtime_limit_cycles
    late = max(0, metrics.latency_cycles - limit) if limit is not None else 0
    others = sum(n for kind, n in metrics.violation_counts.items()
                 if kind not in ("capacity", "runtime_limit"))
    return float(over + late + others) or 1.0


Score = tuple[tuple[int, ...], float, "int | float"]  # objectives, violation G, instance objective


def score_genes(instance: Instance, genome: Genome, objectives: tuple[str, ...],
                x: Iterable[int], *, fast: bool = True) -> Score:
    """Decode one gene vector and evaluate it (the fast path, or the reference evaluator).

    Returns the objective values, pymoo's ``G`` and the instance's own objective.
    """
    metrics: Metrics | FastMetrics
    if fast and not genome.sequence_form:  # P1's Sequences go to the evaluator
        metrics = fast_metrics(instance, genome.decode_raw(x))
    else:
        metrics = evaluate(instance, genome.decode(x, tidy=False))
    return (tuple(OBJECTIVES[o](metrics) for o in objectives), violation(instance, metrics),
            metrics.objective_value)


class Scorer:
    """Scores gene vectors once each (a cache by genome), in this process or in a pool."""

    def __init__(self, instance: Instance, genome: Genome, objectives: tuple[str, ...],
                 workers: int, *, fast: bool = True) -> None:
        self.instance, self.genome, self.objectives = instance, genome, objectives
        self.workers, self.fast = workers, fast
        self.cache: dict[bytes, Score] = {}
        self.evaluations = self.hits = 0
        self.pool: ProcessPoolExecutor | None = None
        if workers > 1:
            # Spawned, not forked: the caller may run threads (a progress bar, a solver).
            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_start_worker,
                                            initargs=(instance.to_dict(), objectives, fast,
                                                      bool(genome.pin_layers)))

    def score(self, X: npt.ArrayLike) -> list[Score]:
        """The scores of the rows of ``X`` (pymoo's population matrix), in order."""
        rows = np.asarray(X, dtype=int)
        keys = [row.astype(np.int8).tobytes() for row in rows]
        todo: dict[bytes, Genes] = {}
        for key, row in zip(keys, rows, strict=True):
            if key in self.cache or key in todo:
                self.hits += 1
            else:
                todo[key] = row
        if todo:
            pending = list(todo.items())
            if self.pool is None:
                scores = [score_genes(self.instance, self.genome, self.objectives, row, fast=self.fast)
                          for _, row in pending]
            else:
                chunks = np.array_split(np.array([row for _, row in pending]),
                                        min(len(pending), 2 * self.workers))
                scores = [s for part in self.pool.map(_score_in_worker, chunks) for s in part]
            for (key, _), found in zip(pending, scores, strict=True):
                self.cache[key] = found
            self.evaluations += len(pending)
        return [self.cache[key] for key in keys]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


_WORKER: dict[str, Any] = {}


def _start_worker(instance_data: dict[str, Any], objectives: tuple[str, ...], fast: bool, pins: bool) -> None:
    instance = Instance.from_dict(instance_data)
    _WORKER.update(instance=instance, genome=Genome(instance, pins=pins), objectives=objectives, fast=fast)


def _score_in_worker(rows: Genes) -> list[Score]:
    instance, genome, objectives = _WORKER["instance"], _WORKER["genome"], _WORKER["objectives"]
    return [score_genes(instance, genome, objectives, row, fast=_WORKER["fast"]) for row in rows]
