"""lns, large-neighbourhood search on the interval model (formulations/p1_interval.md §9):
anytime, never worse than its start, deterministic per seed, exact on a whole-plan window."""

from __future__ import annotations

import random

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, random_layered_literature
from monet_ilp.heuristics.evict import evict_sequence
from monet_ilp.heuristics.repair import repair_sequence
from monet_ilp.heuristics.starts import feasible_first
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1 import lns as lns_module
from monet_ilp.problems.p1.cpsat import min_budget_cpsat
from monet_ilp.problems.p1.data import p1_data
from monet_ilp.problems.p1.interval import plan_of_sequence, solve_interval
from monet_ilp.problems.p1.lns import Offers, _unsettled, _window, lowest_peak, solve_lns
from monet_ilp.problems.p1.relax import all_schedules_bound
from monet_ilp.solve import Status, solve
from tests.conftest import verified


@pytest.fixture(scope="module")
def medium():
    return p1_instance(random_layered_literature(100, seed=0), 0.8)


def test_lns_improves_its_start_and_every_step_is_verified(medium):
    start = evict_sequence(medium)
    assert start is not None
    start_cost = verified(medium, solve(medium, "heuristic:evict")).objective_value
    result = solve(medium, "lns", time_limit=20, workers=1, steps=8, window=20, seed=0)
    verified(medium, result)
    assert result.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert result.objective <= start_cost
    assert result.stats["steps"] == 8
    assert result.bound <= result.objective
    assert "computations per op" in result.stats["bound_class"]


def test_lns_is_deterministic_per_seed(medium):
    runs = [solve_lns(medium, time_limit=None, steps=3, window=20, seed=3) for _ in range(2)]
    assert runs[0].objective == runs[1].objective
    assert runs[0].schedule.steps == runs[1].schedule.steps


def test_a_window_proven_for_the_plan_settles_its_recomputations(medium):
    """P1I.L1: a recomputation inside a window proven optimal for the plan, at least as
    long as the next one, is not drawn again; with every one settled the draw falls back
    on all of them (the LNS then lengthens its windows first)."""
    data = p1_data(medium)
    plan = plan_of_sequence(data, repair_sequence(medium))
    recomputed = [k for k, j in enumerate(plan.copy) if j > 0]
    k = recomputed[len(recomputed) // 2]
    settled = [(k - 10, k + 10)]
    assert k not in _unsettled(plan, settled, 21) and k in _unsettled(plan, settled, 22)
    rng = random.Random(0)
    for _ in range(50):
        first, last = _window(plan, data, 16, rng, settled)
        assert last - first + 1 == 16
        assert any(plan.copy[i] > 0 and not k - 10 <= i <= k + 10 for i in range(first, last + 1))
    everything = [(0, len(plan) - 1)]
    assert _unsettled(plan, everything, 16) == []
    first, last = _window(plan, data, 16, rng, everything)
    assert any(plan.copy[i] > 0 for i in range(first, last + 1))


def test_with_every_recomputation_settled_at_the_longest_window_the_steps_go_on(medium, monkeypatch):
    """P1I.L1/L4: windows stop growing at MAX_WINDOW; once every recomputation is settled
    there, the draw falls back on all of them and the run still takes its steps."""
    monkeypatch.setattr(lns_module, "MAX_WINDOW", 10)
    result = solve_lns(medium, time_limit=120, steps=60, window=8, seed=0)
    verified(medium, result)
    assert result.stats["steps"] == 60 and result.stats["last_window"] <= 10


@pytest.mark.slow  # the interval model's proof and three 30-s steps; the steps themselves are tested above
def test_a_window_over_the_whole_plan_proves_the_class_optimum():
    inst = p1_instance(random_layered_literature(20, seed=0), 0.9)
    exact = solve_interval(inst, time_limit=None, max_computes=2)
    assert exact.status is Status.OPTIMAL
    lns = solve_lns(inst, time_limit=None, window=400, slack=40, step_time=30.0, steps=3, max_computes=2)
    verified(inst, lns)
    assert lns.objective <= exact.objective or "copies_raised" in lns.stats
    if "copies_raised" not in lns.stats:
        assert lns.status is Status.OPTIMAL and lns.objective == exact.objective


def test_store_all_within_the_budget_is_optimal_at_once():
    inst = p1_instance(random_layered(20, seed=1), 1.0)
    result = solve(inst, "lns", time_limit=10)
    assert result.status is Status.OPTIMAL
    assert result.stats["start"]["cost"] == result.objective == result.bound  # every op once


def test_bad_options_are_user_errors(medium):
    with pytest.raises(MonetError, match="window"):
        solve_lns(medium, window=0)
    with pytest.raises(MonetError, match="no option"):
        solve(medium, "lns", time_limit=5, windw=3)


def _no_start_fits(inst):
    return not any(s is not None and s.meta["peak_bytes"] <= inst.budget_bytes
                   for _, s in feasible_first(inst))


@pytest.mark.parametrize(("n", "seed", "budget"), [(16, 1, 0.8), (20, 4, 0.85)])
def test_the_descent_reaches_the_budget_where_no_heuristic_does(n, seed, budget):
    """P1I.L5: no feasible-first heuristic fits, the descent brings the repair's plan down
    to the budget, and the LNS then reaches the optimum the stage MILP proves (in two
    steps of deterministic time: the same on every machine)."""
    inst = p1_instance(random_layered_literature(n, seed=seed), budget)
    assert _no_start_fits(inst)
    over = repair_sequence(inst, best_effort=True)
    assert over is not None and not over.meta["fits"] and over.meta["peak_bytes"] > inst.budget_bytes
    result = solve(inst, "lns", time_limit=30, workers=1, steps=2)
    verified(inst, result)
    assert result.stats["descent"]["peak_bytes"] <= inst.budget_bytes
    milp = solve(inst, "milp", time_limit=None, workers=1)
    assert milp.status is Status.OPTIMAL
    assert result.objective == milp.objective


def test_a_descent_that_stops_over_the_budget_returns_no_schedule():
    # The stage MILP's optimum computes some ops four times: with C = 2 the class has
    # no schedule within the budget, and the descent stops above it.
    inst = p1_instance(random_layered_literature(16, seed=5), 0.7)
    result = solve(inst, "lns", time_limit=3, workers=1)
    assert result.status is Status.UNKNOWN and result.schedule is None
    assert result.stats["descent"]["peak_bytes"] > inst.budget_bytes
    assert "descent" in result.message


def test_lowest_peak_meets_the_floor_where_the_one_pass_stage_model_cannot():
    """lowest_peak (P1I.L5 with the budget at the floor no schedule beats) finds the least
    budget of every schedule here; the stage model's one pass proves a larger one over
    its class, and two passes agree with the descent."""
    inst = p1_instance(random_layered_literature(16, seed=1), 0.8)
    found = lowest_peak(inst, time_limit=None, workers=1)
    assert found.proven and found.peak_bytes == found.floor_bytes == 214
    at_peak = p1_instance(inst.graph, found.peak_bytes)
    metrics = evaluate(at_peak, found.schedule)
    assert metrics.feasible and metrics.peak_bytes["core0.sram"] == found.peak_bytes
    assert min_budget_cpsat(inst, time_limit=None) == (218, True)  # over the stage form, one pass
    assert min_budget_cpsat(inst, time_limit=None, passes=2) == (214, True)


def test_a_detour_through_a_cheap_start_over_the_budget():
    """P1I.L5's detour: the repair stops just over the budget at a third of the cost of
    the best start within it (the eviction heuristic's); the descent from it is taken."""
    inst = p1_instance(random_layered_literature(30, seed=0), 0.9)
    starts = dict(feasible_first(inst))
    assert not starts["repair"].meta["fits"]  # its lowest peak, over the budget
    within = min(s.meta["compute_cycles"] for s in starts.values()
                 if s is not None and s.meta["peak_bytes"] <= inst.budget_bytes)
    result = solve(inst, "lns", time_limit=30, workers=1, steps=2)
    verified(inst, result)
    descent = result.stats["descent"]
    assert descent["detour"] and descent["taken"] and descent["from"].startswith("heuristic:repair")
    assert result.objective <= descent["cost"] < within / 2


@pytest.mark.slow  # 8-14 s: the slow tier (CI runs it after the default one)
def test_a_plan_offered_during_the_run_is_brought_to_the_budget_and_taken():
    """P1I.L6: the boundary relaxation's plan (BD.R7) is over the budget but cheaper than
    every start within it (the heuristics' own, not pruned by P1I.L0); offered to the
    running search, it gets its own model and P1I.L5's descent, and the search goes on
    from it."""
    inst = p1_instance(random_layered_literature(30, seed=2), 0.8)
    plan = all_schedules_bound(inst, time_limit=10, method="milp").schedule
    over = evaluate(inst, plan)
    assert not over.feasible and over.peak_bytes["core0.sram"] > inst.budget_bytes
    offers = Offers()
    offers.put("relaxation", plan)
    result = solve_lns(inst, time_limit=30, workers=1, steps=2, _offers=offers, _starts=feasible_first(inst))
    verified(inst, result)
    assert not offers.ready()
    [record] = result.stats["offers"]
    assert record["taken"] is True and record["cost"] == over.compute_cycles
    assert record["descent_peak_bytes"] <= inst.budget_bytes
    assert result.objective <= record["descent_cost"] < record["best_cost"]


def test_an_offer_no_cheaper_than_the_current_plan_is_left():
    inst = p1_instance(random_layered_literature(30, seed=2), 0.8)
    offers = Offers()
    offers.put("repair", solve(inst, "heuristic:repair", time_limit=5).schedule)  # the start itself
    result = solve_lns(inst, time_limit=30, workers=1, steps=1, _offers=offers)
    verified(inst, result)
    [record] = result.stats["offers"]
    assert record["taken"] == "no: not cheaper"


@pytest.mark.slow  # 8-14 s: the slow tier (CI runs it after the default one)
def test_while_no_schedule_fits_an_offer_that_peaks_higher_is_left():
    """P1I.L6: with no plan within the budget yet, the budget comes first: an offer that
    costs less than the plan being brought down but peaks higher is left."""
    inst = p1_instance(random_layered_literature(30, seed=0), 0.9)
    over = dict(feasible_first(inst))["repair"]
    assert over is not None and over.meta["peak_bytes"] > inst.budget_bytes
    offers = Offers()
    offers.put("hint", solve(inst, "heuristic:store_all", time_limit=5).schedule)
    result = solve_lns(inst, time_limit=20, workers=1, steps=1, _offers=offers, _starts=[("repair", over)])
    verified(inst, result)
    [record] = result.stats["offers"]
    assert record["cost"] < record["best_cost"] and record["peak_bytes"] > record["best_peak_bytes"]
    assert record["taken"] == "no: no lower peak than the plan being brought down to the budget"


def test_offers_keep_the_latest_plan_of_each_source_once():
    inst = p1_instance(random_layered_literature(30, seed=2), 0.8)
    repair = solve(inst, "heuristic:repair", time_limit=5).schedule
    store_all = solve(inst, "heuristic:store_all", time_limit=5).schedule
    offers = Offers()
    offers.put("relaxation", repair)
    offers.put("relaxation", store_all)  # a better incumbent replaces the one not yet taken
    offers.put("hint", repair)
    assert [(name, s.steps) for name, s in offers.take()] == [("relaxation", store_all.steps),
                                                              ("hint", repair.steps)]
    assert not offers.ready()
    offers.put("relaxation", store_all)  # the same plan again is no new offer
    assert not offers.ready()
