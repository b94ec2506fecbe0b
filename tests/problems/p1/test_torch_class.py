"""Class TC (formulations/torch_checkpoint.md): the regions, the sequence of a plan, the
0-1 search against brute force, and the least budget of an infeasible one."""

from __future__ import annotations

import pytest

from monet_ilp.evaluate import evaluate
from monet_ilp.graph import zoo
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1.torch_class import region_sequence, regions_of
from monet_ilp.results import Status
from monet_ilp.solve import solve


@pytest.fixture(scope="module")
def graph():  # type: ignore[no-untyped-def]
    return zoo.build("mlp", batch=16, depth=3, width=64, in_features=64, granularity="op")


def test_regions_are_modules_and_runs_of_children(graph) -> None:  # type: ignore[no-untyped-def]
    paths = {r.path for r in regions_of(graph)}
    forward = [op for op in graph.ops if op.kind.value == "forward"]
    assert all(len(r.ops) < len(forward) for r in regions_of(graph))  # never the whole model
    assert any("[" in p for p in paths)  # runs of consecutive children
    for r in regions_of(graph):  # contiguous in the forward order
        index = [forward.index(graph.op(o)) for o in r.ops]
        assert index == list(range(index[0], index[-1] + 1))


def test_a_plans_sequence_is_valid_and_frees_each_tensor_on_its_own(graph) -> None:  # type: ignore[no-untyped-def]
    inst = p1_instance(graph, 1.0)
    for chosen in ([], regions_of(graph)[:1], [r for r in regions_of(graph) if "[" in r.path][:1]):
        seq = region_sequence(inst, chosen)
        metrics = evaluate(inst, seq)
        assert metrics.feasible, metrics.violations[:1]
        assert metrics.compute_cycles == seq.meta["compute_cycles"]
        assert max(metrics.peak_bytes.values()) == seq.meta["peak_bytes"]


def _brute_force(inst, regions):  # type: ignore[no-untyped-def]
    """The least cost over every set of disjoint regions that fits (a depth-first enumeration)."""
    best = None

    def visit(start, chosen, used):  # type: ignore[no-untyped-def]
        nonlocal best
        seq = region_sequence(inst, chosen)
        if seq.meta["peak_bytes"] <= inst.budget_bytes and (best is None or seq.meta["compute_cycles"] < best):
            best = seq.meta["compute_cycles"]
        for k in range(start, len(regions)):
            if not used & set(regions[k].ops):
                visit(k + 1, [*chosen, regions[k]], used | set(regions[k].ops))

    visit(0, [], set())
    return best


@pytest.mark.parametrize("share", [0.95, 0.85, 0.75, 0.65, 0.55, 0.45])
def test_the_search_matches_brute_force(graph, share: float) -> None:  # type: ignore[no-untyped-def]
    base = region_sequence(p1_instance(graph, 1.0), [])
    inst = p1_instance(graph, int(share * base.meta["peak_bytes"]))
    useful = [r for r in regions_of(graph) if region_sequence(inst, [r]).steps != base.steps]
    result = solve(inst, "torch_checkpoint", workers=1)
    expected = _brute_force(inst, useful)
    if expected is None:
        assert result.status is Status.INFEASIBLE
    else:
        assert result.status is Status.OPTIMAL
        assert result.objective == expected == result.bound


def test_an_infeasible_budget_names_the_least_one_and_that_one_fits(graph) -> None:  # type: ignore[no-untyped-def]
    inst = p1_instance(graph, 1)
    result = solve(inst, "torch_checkpoint", workers=1)
    assert result.status is Status.INFEASIBLE
    least = result.stats["least_peak_bytes"]
    assert f"{least} bytes" in result.message
    assert solve(p1_instance(graph, least), "torch_checkpoint", workers=1).status is Status.OPTIMAL
