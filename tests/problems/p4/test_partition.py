"""The partition MILP against brute force: its bound is below every plan of the candidate.

On a six-layer model whose devices are small enough that recomputation matters, every
split into stages and every choice of recomputation counts per stage is evaluated; the
MILP's bound must not exceed the best of them, its plan must fit, and it must say
``infeasible`` exactly when no plan fits.  The layers may recompute or offload (the DGX
preset has a host link), and at the tightest memories offloading is what fits.
"""

from __future__ import annotations

import itertools

import pytest

from monet_ilp.hardware.cluster import dgx_a100, with_device
from monet_ilp.problems.p4.costs import plan_costs
from monet_ilp.problems.p4.evaluate import evaluate_plan
from monet_ilp.problems.p4.model import TransformerConfig
from monet_ilp.problems.p4.partition import solve_partition
from monet_ilp.problems.p4.plan import Plan

MODEL = TransformerConfig("tiny", layers=6, hidden=1024, heads=16, seq=1024, vocab=32000, ffn=4096)


def compositions(total, parts):
    for cut in itertools.combinations(range(1, total), parts - 1):
        bounds = (0, *cut, total)
        yield tuple(bounds[i + 1] - bounds[i] for i in range(parts))


def stage_options(size, options):
    """Every multiset of ``size`` layer options (the order inside a stage does not matter)."""
    yield from itertools.combinations_with_replacement(options, size)


def brute_force(cluster, d, p, t, m, schedule, objective):
    costs = plan_costs(MODEL, cluster, data=d, pipeline=p, tensor=t, sequence_parallel=False, micro_batch=1)
    best = None
    for stages in compositions(MODEL.layers, p):
        for choice in itertools.product(*(list(stage_options(n, list(costs.layer))) for n in stages)):
            plan = Plan(d, p, t, False, 1, m, schedule, stages, tuple(r for part in choice for r in part))
            metrics = evaluate_plan(MODEL, cluster, plan, costs=costs)
            if metrics.feasible:
                value = metrics.time_s if objective == "time" else metrics.energy_j
                best = value if best is None else min(best, value)
    return costs, best


@pytest.mark.parametrize("memory_gib", [80, 1.2, 1.0, 0.8, 0.6])
@pytest.mark.parametrize(("p", "schedule"), [(1, "1f1b"), (2, "1f1b"), (3, "1f1b"), (3, "gpipe")])
@pytest.mark.parametrize("objective", ["time", "energy"])
def test_bound_is_below_every_plan_and_infeasible_means_none_fits(memory_gib, p, schedule, objective):
    cluster = with_device(dgx_a100(nodes=1), memory_bytes=int(memory_gib * 2**30))
    d, t, m = 1, 2, 6
    costs, best = brute_force(cluster, d, p, t, m, schedule, objective)
    part = solve_partition(costs, cluster, layers=MODEL.layers, pipeline=p, micro_batches=m, schedule=schedule,
                           devices_per_stage=d * t, objective=objective, time_limit=30)
    if best is None:
        assert part.status == "infeasible"
        return
    assert part.status == "optimal"
    assert part.bound <= best * (1 + 1e-9)  # seconds, or joules
    plan = Plan(d, p, t, False, 1, m, schedule, part.stages, part.recompute)
    metrics = evaluate_plan(MODEL, cluster, plan, costs=costs)
    assert metrics.feasible
    value = metrics.time_s if objective == "time" else metrics.energy_j
    assert part.objective <= value * (1 + 1e-9)
    assert value <= best * 1.10  # the MILP's plan is near the best one (here within 10 %)
