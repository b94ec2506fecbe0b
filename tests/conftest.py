"""Fixtures and the one check shared by every test directory.

* ``p1_small``, ``p2_small``, ``p3_small``: one small instance of each problem class,
  built once per session (a 2-layer MLP training step, 17 ops; the P2 and P3 ones on
  the Edge TPU preset).
* :func:`verified`: the evaluator's verdict on a result, the way every test states it:
  the status is no ``error``, a schedule is feasible when re-evaluated, the
  backend's objective is the evaluator's, and its bound holds.
* :func:`random_latencies`: the latencies of the random GA decodings the evaluator
  accepts, which every latency bound over every schedule must stay below.
* Hypothesis profiles: ``ci`` (the default) draws the same examples on every run and
  machine and times nothing (no deadline, no too-slow health check); ``dev`` draws new
  ones each run.  ``HYPOTHESIS_PROFILE=dev python -m pytest`` selects it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from monet_ilp.evaluate import Metrics, evaluate
from monet_ilp.ga.genome import Genome
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance, p1_instance
from monet_ilp.results import BackendResult, Result, Status
from monet_ilp.schedule import Compute, Release, Sequence

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.instance import Instance

# Loaded before the test modules are imported, so every @settings(...) there inherits it.
settings.register_profile("ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          print_blob=True)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def random_latencies(instance: Instance, draws: int, seed: int) -> list[int]:
    """The latency of each of ``draws`` random GA genomes of ``instance`` (pins,
    recomputations, offloads, layers on any core), decoded and kept when the evaluator
    accepts the schedule."""
    genome = Genome(instance)
    rng = np.random.default_rng(seed)
    latencies = []
    for _ in range(draws):
        metrics = evaluate(instance, genome.decode(rng.integers(genome.lower, genome.upper + 1)))
        if metrics.feasible:
            latencies.append(metrics.latency_cycles)
    return latencies


def verified(instance: Instance, result: Result | BackendResult, *, feasible: bool = True) -> Metrics | None:
    """Re-evaluate ``result``'s schedule on ``instance`` and check what the backend claims.

    Returns the metrics (``None`` when there is no schedule).  With ``feasible`` (the
    default) a schedule must keep to the instance.  The bound of a feasible schedule is
    at most its objective, and a result that claims optimality has its bound equal to
    its objective.  Both are compared exactly: backends round a solver's bound on an
    integer objective up and report it as proved, never capped (BD.C1), so a wrong bound
    fails here as it makes ``solve`` return ``error``.
    """
    assert result.status is not Status.ERROR, result.message
    if result.schedule is None:
        assert result.objective is None or isinstance(result, Result), result
        return None
    metrics = evaluate(instance, result.schedule)
    if feasible:
        assert metrics.feasible, (dict(metrics.violation_counts),
                                  [v.message for v in metrics.violations[:3]])
    if result.objective is not None and metrics.feasible:
        assert result.objective == metrics.objective_value, (result.objective, metrics.objective_value)
    if result.bound is not None and result.objective is not None and metrics.feasible:
        assert result.bound <= result.objective, (result.bound, result.objective)
    if result.status is Status.OPTIMAL:
        assert result.bound == result.objective, (result.status, result.bound, result.objective)
    return metrics


def _mlp():
    return zoo.mlp(depth=2, width=16, batch=4, in_features=16)


@pytest.fixture(scope="session")
def p1_small() -> Instance:
    """P1: the MLP's own costs on one memory, 90 % of the store-all peak (one recomputation)."""
    return p1_instance(_mlp(), budget=0.9)


@pytest.fixture(scope="session")
def p2_small() -> Instance:
    """P2: the MLP on one Edge TPU PE, SRAM at 90 % of the peak, DRAM over a link."""
    return make_instance(_mlp(), preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P2", budget=0.9)


@pytest.fixture(scope="session")
def p3_small() -> Instance:
    """P3: the MLP on a 2x1 Edge TPU mesh, the latency objective."""
    return make_instance(_mlp(), preset("edge_tpu", n_pe_x=2, n_pe_y=1), problem="P3")


def freed_tensor_by_tensor(graph: TrainingGraph, computations: list[str]) -> Sequence:
    """A sequence that frees each output of an op apart, right after the last reader of
    its copy: EV.E3 accepts it, P1 (node-level values, p1_problem.md) does not contain it."""
    live = [t.id for t in graph.tensors if not t.persistent]
    after: list[list[str]] = [[] for _ in computations]
    last: dict[str, int] = {}
    born = {t: -1 for t in live if graph.tensor(t).producer is None}

    def close(t: str) -> None:
        after[max(last.pop(t, born[t]), 0)].append(t)

    for k, op_id in enumerate(computations):
        op = graph.op(op_id)
        for t in op.inputs:
            if not graph.tensor(t).persistent:
                last[t] = k
        for t in op.outputs:
            if not graph.tensor(t).persistent:
                if t in born:
                    close(t)
                born[t] = k
    for t in list(born):
        close(t)
    steps: list[Compute | Release] = []
    for k, op_id in enumerate(computations):
        steps.append(Compute(op_id))
        steps.extend(Release(t) for t in after[k])
    return Sequence(tuple(steps))


def cli_code(args: list[str]) -> int:
    """The exit status of ``monet-ilp ARGS`` run in-process (0 when it returns)."""
    from monet_ilp.cli import main

    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
