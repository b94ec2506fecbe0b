"""P1I.L0: the recomputations the budget does not need, removed from a plan."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, random_layered_literature
from monet_ilp.heuristics.evict import evict_sequence
from monet_ilp.heuristics.repair import RULES, repair_sequence
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1.data import p1_data
from monet_ilp.problems.p1.interval import canonical_plan, plan_of_sequence, sequence_of_plan
from monet_ilp.problems.p1.prune import prune, pruner


def test_the_repair_of_n250_at_0_8_loses_a_fifth_of_its_cost_and_stays_within_the_budget():
    inst = p1_instance(random_layered_literature(250, seed=0), 0.8)
    data = p1_data(inst)
    start = repair_sequence(inst)  # the only rule that fits here: span 1.5, 23,164 cycles
    plan = plan_of_sequence(data, start)
    pruned = prune(data, plan)
    assert pruned.cost <= 0.8 * plan.cost and pruned.fits(data)
    metrics = evaluate(inst, sequence_of_plan(data, pruned))
    assert metrics.feasible and metrics.compute_cycles == pruned.cost
    # Nothing is left to remove: every recomputation is needed for the budget.
    for k in range(len(pruned)):
        if pruned.copy[k] > 0:
            without = canonical_plan(data, pruned.nodes[:k] + pruned.nodes[k + 1:])
            assert not without.fits(data) or without.cost >= pruned.cost


def test_a_plan_over_the_budget_is_left_as_it_is():
    inst = p1_instance(random_layered_literature(250, seed=0), 0.8)
    data = p1_data(inst)
    over = plan_of_sequence(data, repair_sequence(inst, rules=RULES[:1], best_effort=True))
    assert not over.fits(data)
    assert prune(data, over) is over


@settings(max_examples=15, deadline=None)
@given(n=st.integers(10, 50), seed=st.integers(0, 10_000), budget=st.sampled_from([0.9, 0.8, 0.7]))
def test_the_polished_heuristics_are_no_dearer_and_pass_the_evaluator(n, seed, budget):
    inst = p1_instance(random_layered(n, seed=seed), budget)
    polish = pruner(inst)
    for sequence in (repair_sequence(inst), evict_sequence(inst)):
        if sequence is None:
            continue
        polished = polish(sequence)
        metrics = evaluate(inst, polished)
        assert metrics.feasible
        assert metrics.compute_cycles == polished.meta["compute_cycles"] <= sequence.meta["compute_cycles"]
        assert metrics.peak_bytes["core0.sram"] == polished.meta["peak_bytes"]


def test_the_repair_compares_its_rules_after_the_polish():
    """On n = 1000 at 0.9 the first rule is the dearest before the pruning (53,118 cycles
    against 52,845-52,937) and the cheapest after it (52,188)."""
    inst = p1_instance(random_layered_literature(1000, seed=0), 0.9)
    plain = repair_sequence(inst)
    polished = repair_sequence(inst, polish=pruner(inst))
    assert plain.meta["rule"] != "span 0" and polished.meta["rule"] == "span 0"
    assert polished.meta["pruned_from"] > plain.meta["compute_cycles"] > polished.meta["compute_cycles"]
    assert evaluate(inst, polished).compute_cycles == polished.meta["compute_cycles"]
