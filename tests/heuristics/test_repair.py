"""heuristic:repair, store-all repaired to fit the budget: within budget, verified, cheaper than
the eviction heuristic at high budgets, and honest (None) when it finds no drop."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, random_layered_literature, zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.repair import repair_sequence
from monet_ilp.make import make_instance, p1_instance
from monet_ilp.solve import Status, solve


def test_store_all_is_returned_when_it_fits():
    inst = p1_instance(random_layered(30, seed=0), 1.0)
    sequence = repair_sequence(inst)
    assert sequence is not None and sequence.meta["recomputations"] == 0


@pytest.mark.parametrize("n, budget", [(100, 0.9), (100, 0.8), (250, 0.9), (1000, 0.9)])
def test_literature_dags_at_high_budgets_fit_and_pass_the_evaluator(n, budget):
    inst = p1_instance(random_layered_literature(n, seed=0), budget)
    sequence = repair_sequence(inst)
    assert sequence is not None
    metrics = evaluate(inst, sequence)
    assert metrics.feasible and metrics.peak_bytes["core0.sram"] <= inst.budget_bytes
    assert metrics.compute_cycles == sequence.meta["compute_cycles"]
    assert sequence.meta["recomputations"] > 0  # store-all does not fit at these budgets


def test_a_zoo_model_with_an_optimizer_never_recomputes_after_the_first_update():
    inst = make_instance(zoo.build("resnet18"), preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P1",
                         budget=0.9)
    result = solve(inst, "heuristic:repair")
    assert result.status is Status.FEASIBLE
    assert result.metrics.feasible  # solve ran the evaluator, EV.E2's update hazard included


@settings(max_examples=15, deadline=None)
@given(n=st.integers(8, 40), seed=st.integers(0, 10_000), budget=st.sampled_from([0.95, 0.9, 0.85, 0.8]))
def test_whatever_it_returns_is_within_budget(n, seed, budget):
    inst = p1_instance(random_layered(n, seed=seed), budget)
    sequence = repair_sequence(inst)
    if sequence is not None:
        assert evaluate(inst, sequence).feasible


def test_an_impossible_budget_gives_none_and_the_backend_says_so():
    inst = p1_instance(random_layered(20, seed=1), 0.05)
    assert repair_sequence(inst) is None
    result = solve(inst, "heuristic:repair")
    assert result.status is Status.UNKNOWN and "min-budget" in result.message
