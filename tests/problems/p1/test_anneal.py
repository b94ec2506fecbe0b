"""P1I.L7: the annealing over P1 plans, alone and as the LNS's first phase."""

from __future__ import annotations

import sys

import pytest

from monet_ilp.engines.deadline import Deadline
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered_literature
from monet_ilp.heuristics.repair import repair_sequence
from monet_ilp.make import p1_instance
from monet_ilp.problems.p1.anneal import _measure, anneal
from monet_ilp.problems.p1.data import p1_data
from monet_ilp.problems.p1.interval import canonical_plan, plan_of_sequence, sequence_of_plan
from monet_ilp.problems.p1.lns import ANNEAL_SHARE, solve_lns
from monet_ilp.solve import Status, solve
from tests.conftest import verified


@pytest.fixture(scope="module")
def medium():
    return p1_instance(random_layered_literature(100, seed=0), 0.8)


@pytest.fixture(scope="module")
def start(medium):
    data = p1_data(medium)
    plan = plan_of_sequence(data, repair_sequence(medium))
    assert plan.fits(data) and any(plan.copy)
    return data, plan


def test_the_annealing_lowers_the_cost_within_the_budget_and_the_evaluator_agrees(medium, start):
    data, plan = start
    done = anneal(data, plan, deadline=Deadline(None), seed=0, moves=30_000)
    assert done.tried == 30_000 and done.uphill > 0  # the Metropolis rule took uphill moves
    assert done.plan.fits(data) and done.plan.cost < plan.cost
    assert canonical_plan(data, done.plan.nodes) == done.plan  # canonical, in the class's order
    metrics = evaluate(medium, sequence_of_plan(data, done.plan))
    assert metrics.feasible  # within the budget
    assert metrics.compute_cycles == done.plan.cost


def test_the_same_seed_gives_the_same_plan_and_the_switch_interval_comes_back(start):
    data, plan = start
    before = sys.getswitchinterval()
    runs = [anneal(data, plan, deadline=Deadline(None), seed=4, moves=5_000) for _ in range(2)]
    assert runs[0].plan == runs[1].plan and runs[0].taken == runs[1].taken
    assert sys.getswitchinterval() == before


def test_the_measure_is_the_canonical_form_and_its_memory(start):
    """What the moves are scored on is what :func:`canonical_plan` makes of the same list:
    the same computations (useless recomputations dropped), the same memory."""
    data, plan = start
    nodes = list(plan.nodes)
    v = nodes[plan.copy.index(1)]
    # a recomputation of v right after its first computation serves nobody: dropped
    nodes.insert(nodes.index(v) + 1, v)
    state = _measure(data, nodes)
    canonical = canonical_plan(data, nodes)
    assert tuple(state.order) == canonical.nodes
    assert state.memory == canonical.memory(data)
    assert state.excess == sum(max(0, m - data.budget) for m in state.memory)
    assert state.cost == canonical.cost


def test_a_start_over_the_budget_comes_back_when_no_plan_within_it_is_found(start):
    data, _ = start
    over = canonical_plan(data, range(data.n))  # store-all: 25 % over the budget
    assert not over.fits(data)
    done = anneal(data, over, deadline=Deadline(None), seed=0, moves=2_000)
    assert done.plan == over and done.tried == 2_000


def test_the_lns_anneals_first_with_a_number_of_moves(medium):
    # No time limit: moves, steps and each step's deterministic time fix the run.
    result = solve(medium, "lns", time_limit=None, workers=1, steps=2, anneal=20_000, seed=1)
    verified(medium, result)
    annealed = result.stats["anneal"]
    assert annealed["moves"] == 20_000
    assert annealed["to"] <= annealed["from"] == result.stats["start"]["cost"]
    assert result.objective <= annealed["to"]
    again = solve(medium, "lns", time_limit=None, workers=1, steps=2, anneal=20_000, seed=1)
    assert again.objective == result.objective and again.schedule.steps == result.schedule.steps


def test_the_lns_anneals_for_a_share_of_its_time_only_without_steps(medium, monkeypatch):
    """P1I.L7: under a time limit and without steps, the annealing gets ANNEAL_SHARE of the
    time left after the start (its deadline's seconds, read as it starts: no wall time)."""
    given = []

    def annealing(data, plan, *, deadline, **options):
        given.append((deadline.at - deadline.started, whole.left()))
        return anneal(data, plan, deadline=deadline, **options)

    monkeypatch.setattr("monet_ilp.problems.p1.lns.anneal_plan", annealing)
    whole = Deadline(6)
    timed = solve_lns(medium, _deadline=whole, workers=1, seed=0)
    assert timed.status in (Status.FEASIBLE, Status.OPTIMAL)
    ((seconds, left),) = given
    assert ANNEAL_SHARE * (left - whole.wrap_up) <= seconds <= ANNEAL_SHARE * (6 - whole.wrap_up)
    annealed = timed.stats["anneal"]
    assert annealed["to"] <= annealed["from"] and timed.objective <= annealed["to"]
    monkeypatch.undo()
    assert "anneal" not in solve_lns(medium, time_limit=6, workers=1, steps=1, seed=0).stats
    assert "anneal" not in solve_lns(medium, time_limit=6, workers=1, anneal=0, steps=1, seed=0).stats


def test_a_negative_number_of_moves_is_a_user_error(medium):
    with pytest.raises(MonetError, match="anneal"):
        solve_lns(medium, anneal=-1)
