"""P3 large-neighbourhood search (``lns`` on P3): steps on the CP-SAT model, every schedule verified.

A step fixes the decisions of the ops outside its neighbourhood and re-solves the rest;
its schedule replaces the incumbent only when the evaluator says it is better.
"""

from __future__ import annotations

import pytest

from monet_ilp.engines.cpsat import configured_solver
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.decisions import Decisions, decode
from monet_ilp.heuristics.decoder import plan_of
from monet_ilp.make import make_instance
from monet_ilp.problems.p3.auto import (
    CPSAT_SHARE,
    DESCENT_SHARE,
    ENERGY_DESCENT_SHARE,
    FLOOR_SHARE,
    LNS_MIN_OPS,
)
from monet_ilp.problems.p3.bounds import combinatorial_bound
from monet_ilp.problems.p3.cpsat import solve_p3_cpsat
from monet_ilp.problems.p3.data import baseline_schedules
from monet_ilp.problems.p3.descent import descend
from monet_ilp.problems.p3.lns import retime
from monet_ilp.solve import Status, solve
from tests.clock import recorded_deadlines
from tests.conftest import verified


def mlp4():
    return make_instance(zoo.mlp(depth=4), preset("hetero_quad"), problem="P3", objective="energy")


def deterministic_steps(monkeypatch, seconds: float) -> None:
    """Each CP-SAT solve of the LNS stops after ``seconds`` of CP-SAT's deterministic time
    instead of its wall-clock step time: on one worker and without a time limit, the
    steps and what they find are the same on every machine, however loaded."""

    def configured(*, time_limit=None, **options):
        options["params"] = {**(options.get("params") or {}), "max_deterministic_time": seconds}
        return configured_solver(**options)

    monkeypatch.setattr("monet_ilp.problems.p3.lns.configured_solver", configured)


@pytest.mark.slow  # 8-14 s: the slow tier (CI runs it after the default one)
def test_steps_improve_the_start_and_every_schedule_is_verified(monkeypatch):
    inst = mlp4()
    start = baseline_schedules(inst)[0]
    deterministic_steps(monkeypatch, 0.2)
    result = solve(inst, "lns", time_limit=None, workers=1, steps=6)
    assert verified(inst, result) is not None and result.status is Status.FEASIBLE
    stats = result.stats
    assert stats["steps"] == 6 and stats["start_objective"] == start[1]
    assert result.objective < start[1] and stats["improving_steps"] >= 1
    # The trajectory only goes down, and ends at the returned objective.
    values = [v for _, v in stats["trajectory"]]
    assert values == sorted(values, reverse=True) and values[-1] == result.objective
    # The bound holds for every schedule: the closed forms and the pivot relaxation (BD.E).
    assert result.bound == combinatorial_bound(inst, relaxation_limit=60) <= result.objective
    assert result.bound > combinatorial_bound(inst)


def test_a_hint_is_the_start_and_the_result_is_never_worse():
    inst = mlp4()
    hint = solve(inst, "cpsat", time_limit=4, workers=1).schedule
    value = evaluate(inst, hint).objective_value
    result = solve(inst, "lns", time_limit=20, workers=1, hint=hint, steps=3, step_time=0.5)
    assert verified(inst, result) is not None
    assert result.stats["hint"] == "given" and result.stats["start_objective"] == value
    assert result.objective <= value


@pytest.mark.slow  # 8-14 s: the slow tier (CI runs it after the default one)
def test_a_start_outside_the_class_is_first_brought_into_it(monkeypatch):
    """P3L.N0: a start the model cannot hold (recomputations, with at most one run per op)
    fixes decisions no solution has; CP-SAT finds one first (its runs and pins kept, or
    on the whole model)."""
    inst = mlp4()
    deterministic_steps(monkeypatch, 0.2)
    plan = plan_of(inst)
    rerun = {t: "recompute" for t in plan.saved if t in plan.recomputable}
    start = decode(inst, Decisions(rerun, {}))
    value = evaluate(inst, start).objective_value
    assert evaluate(inst, start).recomputations > 0
    result = solve(inst, "lns", time_limit=None, workers=1, hint=start, steps=4, max_computes=1)
    assert verified(inst, result) is not None
    stats = result.stats
    assert stats["check_status"] == "INFEASIBLE"
    assert stats.get("moves_status") in ("FEASIBLE", "OPTIMAL") or stats["repair_status"] in ("FEASIBLE", "OPTIMAL")
    assert stats["improving_steps"] >= 1 and result.objective < value
    assert evaluate(inst, result.schedule).recomputations == 0


def test_retime_keeps_the_decisions_and_times_them_in_the_model():
    """P3L.T1: a decoder's schedule retimed: the same runs on the same cores and the same
    pins, at no more than its value, and a solution of the model (the LNS's check finds it
    at once); outside the class (recomputations under max_computes=1) there is none."""
    inst = mlp4()
    plan = plan_of(inst)
    rerun = {t: "recompute" for t in plan.saved if t in plan.recomputable}
    start = decode(inst, Decisions(rerun, {}))
    value = evaluate(inst, start).objective_value
    timed = retime(inst, start, time_limit=20, workers=1)
    assert timed is not None
    schedule, retimed = timed
    metrics = evaluate(inst, schedule)
    assert metrics.feasible and metrics.objective_value == retimed <= value
    assert sorted((r.op, r.core) for r in schedule.ops) == sorted((r.op, r.core) for r in start.ops)
    assert schedule.pinned == start.pinned
    check = solve(inst, "lns", time_limit=20, workers=1, hint=schedule, steps=0)
    assert check.stats["check_status"] in ("OPTIMAL", "FEASIBLE")
    assert retime(inst, start, time_limit=20, workers=1, max_computes=1) is None


def test_bad_options_and_infeasible_starts():
    inst = mlp4()
    with pytest.raises(MonetError, match="no option 'window'"):
        solve(inst, "lns", time_limit=5, window=3)
    with pytest.raises(MonetError, match="step_time"):
        solve(inst, "lns", time_limit=5, step_time=0)
    tight = make_instance(zoo.mlp(depth=2, width=64, batch=8, in_features=64), preset("edge_tpu", n_pe_x=2, n_pe_y=1),
                          problem="P3", sram_budget=9 * 1024)
    over = baseline_schedules(tight)[-1][2]  # store-all breaks the 9 KiB SRAMs
    assert not evaluate(tight, over).feasible
    result = solve(tight, "lns", time_limit=10, hint=over)
    assert result.status is Status.UNKNOWN and "feasible schedule" in result.message


def watched_auto(monkeypatch):
    """What ``auto`` hands its phases, read as each begins: the seconds the floor and the
    descent are given, and CP-SAT's limit and floor, each beside what was left of the
    call's time then (the call's deadline is the first ``auto`` makes).  The shares are
    asserted on these, so no assertion depends on how fast the machine is."""
    made = recorded_deadlines(monkeypatch, "monet_ilp.problems.p3.auto")
    seen: dict = {}

    def floor(instance, *, relaxation_limit):
        seen["floor"] = relaxation_limit
        return combinatorial_bound(instance, relaxation_limit=relaxation_limit)

    def descent(instance, starts, *, deadline, **options):
        seen["descent"] = (deadline.at - deadline.started, made[0].left())
        found = descend(instance, starts, deadline=deadline, **options)
        seen["after_descent"] = made[0].left()
        return found

    def cpsat(instance, *, time_limit, **options):
        seen["cpsat"] = (time_limit, made[0].left(), options.get("_floor"))
        return solve_p3_cpsat(instance, time_limit=time_limit, **options)

    monkeypatch.setattr("monet_ilp.problems.p3.auto.combinatorial_bound", floor)
    monkeypatch.setattr("monet_ilp.problems.p3.auto.descend", descent)
    monkeypatch.setattr("monet_ilp.problems.p3.auto.solve_p3_cpsat", cpsat)
    return made, seen


def test_auto_on_a_larger_graph_runs_the_descent_cpsat_then_the_lns(monkeypatch):
    """P3A.2-A4 (p3_cpsat.md): above LNS_MIN_OPS ops the floor over every schedule is
    computed once (a fifth of the time, beside the descent), the descent gets a tenth of
    the time, CP-SAT hinted with its schedule half the rest, then the LNS starts from the
    better of the two; the result is verified, never worse than either, and keeps
    CP-SAT's bound over the class (all three search within it) and the floor."""
    inst = make_instance(zoo.mlp(depth=8), preset("hetero_quad"), problem="P3", objective="latency")
    assert len(inst.graph.ops) > LNS_MIN_OPS
    made, seen = watched_auto(monkeypatch)
    result = solve(inst, "auto", time_limit=8, workers=2)
    assert verified(inst, result) is not None
    wrap = made[0].wrap_up
    given, left = seen["descent"]
    assert DESCENT_SHARE * (left - wrap) <= given <= DESCENT_SHARE * (8 - wrap)
    # The floor's share was set before the descent began: it runs beside it.
    assert FLOOR_SHARE * (left - wrap) <= seen["floor"] <= FLOOR_SHARE * (8 - wrap)
    limit, left_then, floor_given = seen["cpsat"]
    assert CPSAT_SHARE * left_then <= limit <= CPSAT_SHARE * seen["after_descent"]
    members = result.stats["members"]
    floor, descent, cpsat = members["floor"], members["descent"], members["cpsat"]
    assert floor_given == floor["bound"]  # CP-SAT began once the floor was done
    assert {"floor", "descent", "cpsat"} <= set(members) <= {"floor", "descent", "cpsat", "lns"}
    if result.status is Status.OPTIMAL and "lns" not in members:
        return  # CP-SAT proved it in its share: nothing for the LNS to do
    # With the LNS, or without it when CP-SAT left it under a second (P3A.3): the best of all.
    assert result.objective <= min(v for v in (cpsat["objective"], descent["objective"]) if v is not None)
    assert floor["bound"] <= result.bound <= result.objective
    if result.stats.get("bound_class") is None:
        assert cpsat["bound"] <= result.bound
    assert result.source in ("lns", "descent", cpsat["source"])
    # P3A.5: the best schedule retimed at the end; the result is never above the retiming.
    retimed = result.stats.get("retimed")
    assert retimed is None or result.objective <= retimed


def test_auto_on_energy_gives_the_descent_half_and_cpsat_the_rest(monkeypatch):
    """P3A.2-A3 on energy: the descent gets ENERGY_DESCENT_SHARE of the time, CP-SAT hinted
    with its schedule all that is left; the result is the best schedule, verified, with
    the floor (BD.E) as the bound when it is the descent's."""
    inst = make_instance(zoo.mlp(depth=8), preset("hetero_quad"), problem="P3", objective="energy")
    made, seen = watched_auto(monkeypatch)
    result = solve(inst, "auto", time_limit=8, workers=2)
    assert verified(inst, result) is not None
    wrap = made[0].wrap_up
    given, left = seen["descent"]
    assert ENERGY_DESCENT_SHARE * (left - wrap) <= given <= ENERGY_DESCENT_SHARE * (8 - wrap)
    limit, left_then, _ = seen["cpsat"]
    assert left_then <= limit <= seen["after_descent"]  # all that is left
    members = result.stats["members"]
    # The LNS runs only if CP-SAT hands back more than a second early (not asserted either way).
    assert {"floor", "descent", "cpsat"} <= set(members) <= {"floor", "descent", "cpsat", "lns"}
    assert result.objective <= min(v for v in (members["cpsat"]["objective"], members["descent"]["objective"])
                                   if v is not None)
    assert members["floor"]["bound"] <= result.bound <= result.objective
    if result.source == "descent" and "lns" not in members:
        assert result.bound == members["floor"]["bound"]


def test_auto_on_a_small_graph_or_a_narrowed_class_is_cpsat_alone():
    """P3A.1: mlp depth 4 (27 ops) has the whole time; so has a class the LNS does not take."""
    inst = mlp4()
    assert len(inst.graph.ops) <= LNS_MIN_OPS
    small = solve(inst, "auto", time_limit=3, workers=2)
    assert verified(inst, small) is not None and set(small.stats["members"]) == {"cpsat"}
    larger = make_instance(zoo.mlp(depth=8), preset("hetero_quad"), problem="P3", objective="energy")
    narrowed = solve(larger, "auto", time_limit=3, workers=2, allow_pin=False)
    assert verified(larger, narrowed) is not None and set(narrowed.stats["members"]) == {"cpsat"}
