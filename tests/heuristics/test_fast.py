"""The GA's fast scoring path against the reference evaluator: identical metrics.

The fast path (:mod:`monet_ilp.heuristics.fast`) trusts the decoder's construction and computes
only what the search reads; the reference evaluator checks everything.  On thousands of
random decisions, over instances that fit, that break their SRAM, that recompute,
offload and cross cores, both must give the same latency, compute cycles, energy (part
by part), peaks, violation counts, recomputations, transfers and objective.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monet_ilp.evaluate import evaluate
from monet_ilp.ga.genome import Genome, score_genes
from monet_ilp.ga.nsga2 import run_ga
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.fast import fast_metrics
from monet_ilp.make import make_instance

CASES = {
    # ResNet-18 (CIFAR) on a 2x2 Edge TPU at 3 MiB per core: the GA benchmark's instance.
    "resnet18_2x2_3MiB": lambda: make_instance(zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=2, n_pe_y=2),
                                               problem="P3", objective="latency", sram_budget=3 * 2**20),
    # The same at 1 MiB: most decisions break an SRAM (capacity violations to count).
    "resnet18_2x2_1MiB": lambda: make_instance(zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=2, n_pe_y=2),
                                               problem="P3", objective="energy", sram_budget=2**20),
    # Four heterogeneous cores: per-core costs and energies.
    "mlp4_hetero_quad": lambda: make_instance(zoo.mlp(depth=4), preset("hetero_quad"), problem="P3",
                                              objective="energy"),
    # P2: one core whose SRAM starts with the inputs, offloading to DRAM.
    "resnet18_P2": lambda: make_instance(zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=1, n_pe_y=1),
                                         problem="P2", objective="energy", budget=0.5),
    # A transformer on two cores, with a runtime limit that some decisions break.
    "gpt2_tiny_2x1": lambda: make_instance(zoo.gpt2(preset="tiny"), preset("edge_tpu", n_pe_x=2, n_pe_y=1),
                                           problem="P3", objective="latency", runtime_limit_cycles=2_000_000),
}


def same(instance, genome, x):
    """Both paths on one gene vector; the pair of metric tuples."""
    fast = fast_metrics(instance, genome.decode_raw(x))
    ref = evaluate(instance, genome.decode(x, tidy=False))
    as_tuple = (lambda m: (m.feasible, m.latency_cycles, m.compute_cycles, m.energy, dict(m.peak_bytes),
                           dict(m.violation_counts), m.recomputations, m.transfers, m.objective_value))
    return as_tuple(fast), as_tuple(ref)


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_decisions_score_the_same(name):
    instance, genome = _built(name)
    rng = np.random.default_rng(7)
    feasible = 0
    for _ in range(500):
        x = rng.integers(genome.lower, genome.upper + 1)
        fast, ref = same(instance, genome, x)
        assert fast == ref
        feasible += ref[0]
    if name == "resnet18_2x2_1MiB":
        assert feasible == 0  # every one breaks an SRAM: the violation counts were compared


def test_the_cases_cover_violations_recomputation_offload_and_cores():
    """Across the cases the random decisions hit every behaviour the fast path must match."""
    seen = {"infeasible": 0, "runtime_limit": 0, "recomputations": 0, "transfers": 0, "cores": 0,
            "pinned": 0, "unpinned": 0}
    for build in CASES.values():
        instance = build()
        genome = Genome(instance)
        rng = np.random.default_rng(3)
        for _ in range(40):
            x = rng.integers(genome.lower, genome.upper + 1)
            raw = genome.decode_raw(x)
            m = fast_metrics(instance, raw)
            seen["pinned"] += bool(raw.pinned)
            seen["unpinned"] += len(raw.pinned) < len(genome.split(x)[2])
            seen["infeasible"] += not m.feasible
            seen["runtime_limit"] += m.violation_counts.get("runtime_limit", 0)
            seen["recomputations"] += m.recomputations > 0
            seen["transfers"] += m.transfers > 0
            seen["cores"] += len(set(genome.split(x)[1])) > 1
    assert all(seen.values()), seen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(CASES)))
def test_property_fast_equals_reference(data, name):
    instance, genome = _built(name)
    x = np.array([data.draw(st.integers(int(lo), int(hi))) for lo, hi in zip(genome.lower, genome.upper,
                                                                             strict=True)])
    fast, ref = same(instance, genome, x)
    assert fast == ref


_BUILT: dict[str, tuple] = {}


def _built(name):
    if name not in _BUILT:
        instance = CASES[name]()
        _BUILT[name] = (instance, Genome(instance))
    return _BUILT[name]


def test_score_genes_fast_and_reference_agree():
    instance, genome = _built("mlp4_hetero_quad")
    rng = np.random.default_rng(11)
    for _ in range(50):
        x = rng.integers(genome.lower, genome.upper + 1)
        objectives = ("latency", "energy")
        assert (score_genes(instance, genome, objectives, x, fast=True)
                == score_genes(instance, genome, objectives, x, fast=False))


def test_ga_finds_the_same_front_with_either_scoring():
    """The fast path changes the speed, not the search: same seed, same front."""
    instance, _ = _built("mlp4_hetero_quad")
    fast = run_ga(instance, generations=4, population=12, seed=5, fast=True)
    ref = run_ga(instance, generations=4, population=12, seed=5, fast=False)
    assert fast["scoring"] == "fast" and ref["scoring"] == "reference"
    assert fast["evaluations"] == ref["evaluations"]
    assert [(p["latency_cycles"], p["energy_pj"], p["decisions"]) for p in fast["points"]] == \
        [(p["latency_cycles"], p["energy_pj"], p["decisions"]) for p in ref["points"]]
    for p in fast["points"]:  # the returned points went through the reference evaluator
        assert p["feasible"]
