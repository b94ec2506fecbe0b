"""BD.C1 outside solve(): grade, lower_bounds and P4's search check every bound against the
verified values it claims to hold for, and say which schedules each bound holds for."""

from __future__ import annotations

import pytest

from monet_ilp.analysis.bounds import lower_bounds
from monet_ilp.analysis.grade import grade
from monet_ilp.errors import MonetError
from monet_ilp.graph import zoo
from monet_ilp.hardware.cluster import edge_tpu_mesh
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.liveness import place_releases
from monet_ilp.heuristics.store_all import store_all_sequence
from monet_ilp.make import make_instance
from monet_ilp.problems.p1.relax import HOLDS_FOR, frees_node_values, in_p1_class
from monet_ilp.problems.p4 import search
from monet_ilp.problems.p4.model import model_config
from monet_ilp.results import Status, bound_error
from monet_ilp.schedule import Compute, Release, Sequence
from monet_ilp.solve import solve


def test_bound_error_names_the_family_the_class_and_both_values():
    assert bound_error(100, 100, "x", "every schedule") is None
    assert bound_error(100, 99.5, "x", "every schedule") is None
    assert bound_error(None, 5, "x", "every schedule") is None and bound_error(5, None, "x", "y") is None
    wrong = bound_error(100, 101, "placement_path", "every schedule")
    assert wrong is not None and "placement_path" in wrong and "every schedule" in wrong
    assert "101" in wrong and "100" in wrong
    # A looser tolerance (P4's seconds) lets solver noise through, not a real excess.
    assert bound_error(1.0, 1.0 + 1e-7, "p4", "plans", tolerance=1e-6) is None
    assert bound_error(1.0, 1.0 + 1e-5, "p4", "plans", tolerance=1e-6) is not None


def test_grade_on_p1_uses_the_bound_over_every_p1_schedule(p1_small):
    """BD.G4: not the stage form's CP-SAT bound; a node-level point gets PF.B2, and the bound
    holds for it (no error)."""
    point = solve(p1_small, "heuristic:sqrt").schedule
    assert isinstance(point, Sequence) and frees_node_values(p1_small.graph, point)
    report = grade(p1_small, [("sqrt", point)], time_limit=10, workers=1)
    (row,) = report["points"]
    assert report["bound_holds_for"] == HOLDS_FOR == row["bound_holds_for"]
    assert report["bound_source"] in ("milp", "lp", "closure", "cut", "every-op-once")
    assert report["errors"] == [] and row["bound"] <= row["objective"] and row["gap"] >= 0


def test_a_point_that_frees_one_ops_outputs_apart_gets_every_op_once(p1_small):
    """PF.B3: a sequence that frees part of an op's resident outputs is outside PF.B2's class;
    freeing one of them one computation later is enough to tell."""
    graph = p1_small.graph
    base = store_all_sequence(p1_small)
    assert frees_node_values(graph, base)
    steps = list(base.steps)
    for k, step in enumerate(steps):
        if not isinstance(step, Release) or graph.tensor(step.tensor).producer is None:
            continue
        producer = graph.tensor(step.tensor).producer
        end = next((j for j in range(k, len(steps)) if isinstance(steps[j], Compute)), None)
        together = [j for j in range(k, end or len(steps)) if isinstance(steps[j], Release)
                    and graph.tensor(steps[j].tensor).producer == producer]
        if len(together) >= 2 and end is not None:
            moved = steps.pop(together[-1])
            steps.insert(end, moved)  # after the next computation: one output outlives the other
            break
    else:
        pytest.skip("no op of the fixture frees two outputs at once")
    apart = Sequence(tuple(steps))
    assert not frees_node_values(graph, apart)
    report = grade(p1_small, [("apart", apart)], time_limit=10, workers=1)
    (row,) = report["points"]
    assert row["bound_holds_for"] == "every schedule (every op once)" and report["errors"] == []


def test_lower_bounds_say_which_hold_for_every_schedule_and_check_them(p3_small):
    report = lower_bounds(p3_small, time_limit=10, workers=1)
    assert report["errors"] == []
    assert report["best_all"] is not None and report["best_all"] <= report["best"]
    assert report["best_holds_for"]
    assert report["incumbent"] is None or report["best"] <= report["incumbent"]


def test_p4_search_reports_a_planted_wrong_floor_as_an_error(monkeypatch):
    """BD.C1 in P4: a work bound above the best plan's time makes the search say error, with
    both values; before, the bound was capped at the plan's value and read as optimal."""
    model = model_config("gpt2", preset="small")
    cluster = edge_tpu_mesh(chips=4)
    right = search.plan_search(model, cluster, global_batch=8, time_limit=20)
    assert right.status in ("optimal", "feasible") and right.bound <= right.value
    monkeypatch.setattr(search, "work_bound", lambda *args: 10 * right.value)
    wrong = search.plan_search(model, cluster, global_batch=8, time_limit=20)
    assert wrong.status == "error" and wrong.bound > wrong.value
    assert "exceeds" in wrong.stats["error"] and wrong.gap is not None and wrong.gap < 0


def test_a_sequence_in_another_first_computation_order_is_outside_pf_b2s_class(p1_small):
    """PF.B3: the evaluator accepts any topological order of first computations; PF.B2
    holds for the graph's order only, so such a point gets every op once."""
    graph = p1_small.graph
    base = store_all_sequence(p1_small)
    assert in_p1_class(graph, base)
    ops = [s.op for s in base.steps if isinstance(s, Compute)]
    reads = {op.id: {graph.tensor(t).producer for t in op.inputs} for op in graph.ops}
    k = next(k for k in range(len(ops) - 1) if ops[k] not in reads[ops[k + 1]])
    ops[k], ops[k + 1] = ops[k + 1], ops[k]  # two independent ops, swapped: still topological
    swapped = Sequence(place_releases(graph, ops))
    assert frees_node_values(graph, swapped) and not in_p1_class(graph, swapped)
    report = grade(p1_small, [("swapped", swapped)], time_limit=10, workers=1)
    (row,) = report["points"]
    assert row["bound_holds_for"] == "every schedule (every op once)" and report["errors"] == []


def test_the_p3_models_refuse_an_alpha_they_cannot_weigh_exactly():
    """An alpha the models would round (to a multiple of 1/1000) is a clear input error, not a
    bound that holds for another objective (BD.C1)."""
    graph = zoo.mlp(depth=2, width=16, batch=4, in_features=16)
    hw = preset("edge_tpu", n_pe_x=2, n_pe_y=1)
    inst = make_instance(graph, hw, problem="P3", objective="weighted", alpha=0.0007)
    with pytest.raises(MonetError, match="alpha") as err:
        solve(inst, "cpsat", time_limit=10, workers=1)
    assert err.value.field == "alpha"
    fine = make_instance(graph, hw, problem="P3", objective="weighted", alpha=0.25)
    assert solve(fine, "cpsat", time_limit=10, workers=1, seed=0).status is not Status.ERROR
