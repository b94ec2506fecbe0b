"""heuristic:repair, store-all repaired to fit the budget: within budget, verified, cheaper than
the eviction heuristic at high budgets, and honest (None) when it finds no drop."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, random_layered_literature, zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics import repair
from monet_ilp.heuristics.repair import RULES, RepairRule, repair_sequence
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
    """Every draw asserts: the best effort's claims are the evaluator's, and the repair
    returns a sequence exactly when the best effort fits, a sequence within the budget."""
    inst = p1_instance(random_layered(n, seed=seed), budget)
    effort = repair_sequence(inst, best_effort=True)
    assert effort is not None
    metrics = evaluate(inst, effort)
    assert metrics.feasible == effort.meta["fits"]
    assert metrics.peak_bytes["core0.sram"] == effort.meta["peak_bytes"]
    sequence = repair_sequence(inst)
    assert (sequence is not None) is effort.meta["fits"]
    if sequence is not None:
        assert evaluate(inst, sequence).feasible


def test_an_impossible_budget_gives_none_and_the_backend_says_so():
    inst = p1_instance(random_layered(20, seed=1), 0.05)
    assert repair_sequence(inst) is None
    result = solve(inst, "heuristic:repair")
    assert result.status is Status.UNKNOWN and "min-budget" in result.message


def test_each_rule_repairs_its_own_way_and_the_cheapest_that_fits_wins():
    """RULES: on the literature's random DAG n = 100 at 0.8, the cost-per-byte rule stops
    over the budget while the rules that weigh the slots freed fit; the sequence returned
    is the cheapest of them, and what each claims is what the evaluator measures."""
    inst = p1_instance(random_layered_literature(100, seed=0), 0.8)
    each = {rule: repair_sequence(inst, rules=(rule,), best_effort=True) for rule in RULES}
    for rule, sequence in each.items():
        assert sequence is not None and sequence.meta["rule"] == rule.name
        metrics = evaluate(inst, sequence)
        assert metrics.compute_cycles == sequence.meta["compute_cycles"]
        assert metrics.peak_bytes["core0.sram"] == sequence.meta["peak_bytes"]
        assert metrics.feasible == sequence.meta["fits"]
    assert not each[RepairRule(0.0)].meta["fits"]
    assert repair_sequence(inst, rules=(RepairRule(0.0),)) is None
    fitting = [s.meta["compute_cycles"] for s in each.values() if s.meta["fits"]]
    assert len(fitting) >= 2
    best = repair_sequence(inst)
    assert best is not None and best.meta["compute_cycles"] == min(fitting)


def test_over_the_budget_the_lowest_peak_of_the_rules_is_returned():
    """No rule fits here, and they stop at different peaks; the lowest is the start the
    LNS's descent gets (P1I.L5)."""
    inst = p1_instance(random_layered_literature(60, seed=2), 0.8)
    peaks = [repair_sequence(inst, rules=(rule,), best_effort=True).meta["peak_bytes"] for rule in RULES]
    assert min(peaks) < max(peaks) and min(peaks) > inst.budget_bytes
    found = repair_sequence(inst, best_effort=True)
    assert not found.meta["fits"] and found.meta["peak_bytes"] == min(peaks)
    assert evaluate(inst, found).peak_bytes["core0.sram"] == min(peaks)
    assert repair_sequence(inst) is None


def test_a_passed_deadline_runs_the_first_rule_only():
    class Passed:
        def passed(self) -> bool:
            return True

    inst = p1_instance(random_layered_literature(100, seed=0), 0.9)
    sequence = repair_sequence(inst, deadline=Passed())
    assert sequence is not None and sequence.meta["rule"] == RULES[0].name


def test_closures_cut_short_keep_values_instead_of_recomputing_long_chains(monkeypatch):
    """A drop whose inputs are gone may recompute a few levels of them and keep the values
    below (KEPT_DEPTHS) instead of recomputing every ancestor back to what is held: on the
    literature's random DAG n = 250 at 0.8 that repair is cheaper, and still verified."""
    inst = p1_instance(random_layered_literature(250, seed=0), 0.8)
    rule = (RepairRule(1.5),)
    cut = repair_sequence(inst, rules=rule)
    monkeypatch.setattr(repair, "KEPT_DEPTHS", ())
    whole = repair_sequence(inst, rules=rule)
    assert cut is not None and whole is not None
    assert cut.meta["compute_cycles"] < whole.meta["compute_cycles"]
    metrics = evaluate(inst, cut)
    assert metrics.feasible and metrics.compute_cycles == cut.meta["compute_cycles"]
