"""The descent over the ops' cores, the pins and the activation policies
(``formulations/p3_cpsat.md`` P3D.1-P3D.5)."""

from __future__ import annotations

from monet_ilp.engines.deadline import Deadline
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.decisions import POLICIES, decisions_from_schedule
from monet_ilp.heuristics.decoder import decode_placed, plan_of
from monet_ilp.make import make_instance
from monet_ilp.problems.p3.data import baseline_schedules
from monet_ilp.problems.p3.descent import _pin_groups, descend, in_order
from monet_ilp.problems.p3.lns import retime
from monet_ilp.solve import solve
from tests.clock import ticking


def mlp4(objective):
    return make_instance(zoo.mlp(depth=4), preset("hetero_quad"), problem="P3", objective=objective)


def test_the_descent_lowers_its_start_within_the_class_and_the_evaluator_agrees():
    """P3D.3: every move taken lowers the objective and stays in class P3.K3 (the LNS's
    check, all decisions fixed to the descent's, finds a solution of the model)."""
    for objective in ("latency", "energy"):
        inst = mlp4(objective)
        start = baseline_schedules(inst)[0][2]
        found = descend(inst, [start], deadline=Deadline(60), rounds=3, seed=1)
        assert found is not None and found.rounds == 3
        metrics = evaluate(inst, found.schedule)
        assert metrics.feasible and metrics.objective_value == found.value
        assert found.taken >= 1 and found.decoded[0] is not None and found.value < found.decoded[0]
        assert found.value <= evaluate(inst, start).objective_value
        result = solve(inst, "lns", time_limit=30, workers=1, hint=found.schedule, steps=1, step_time=1.0)
        assert result.stats["check_status"] in ("OPTIMAL", "FEASIBLE")
        assert result.objective <= found.value


def test_on_energy_the_descent_pins_what_the_baseline_leaves_in_dram():
    """P3D.2: the list-scheduling baseline pins nothing; pins (with their readers gathered)
    are what lowers its energy."""
    inst = mlp4("energy")
    start = baseline_schedules(inst)[0][2]
    assert not start.pinned
    found = descend(inst, [start], deadline=Deadline(60), rounds=2, seed=0)
    assert found is not None and found.schedule.pinned
    assert found.value < 0.8 * evaluate(inst, start).objective_value


def test_the_descent_runs_from_each_start_and_depends_on_its_seed_alone():
    inst = mlp4("latency")
    starts = [schedule for _, _, schedule in baseline_schedules(inst)[:2]]
    runs = [descend(inst, starts, deadline=Deadline(60), rounds=3, seed=3) for _ in range(2)]
    assert runs[0] is not None and runs[1] is not None
    assert len(runs[0].decoded) == 2 and runs[0].rounds == 3
    assert runs[0].value <= min(v for v in runs[0].decoded if v is not None)
    assert (runs[0].value, runs[0].tried, runs[0].taken) == (runs[1].value, runs[1].tried, runs[1].taken)


def test_each_start_is_decoded_in_the_order_of_its_first_runs():
    """P3D.1: ``in_order`` makes the start's order of first runs topological, stable with
    respect to it, and the descent decodes the start in that order."""
    inst = mlp4("latency")
    plan = plan_of(inst)
    assert in_order(inst, plan.order).graph.ops == inst.graph.ops
    backwards = in_order(inst, list(reversed(plan.order)))  # every op after what it reads
    seen = {t.id for t in inst.graph.tensors if t.producer is None}
    for op in backwards.graph.ops:
        assert set(op.inputs) <= seen
        seen.update(op.outputs)
    timed = retime(inst, baseline_schedules(inst)[0][2], time_limit=30, workers=1)  # deterministic
    assert timed is not None
    start = timed[0]
    first: dict[str, tuple[int, str]] = {}
    for run in sorted(start.ops, key=lambda r: (r.start, r.end)):
        first.setdefault(run.op, (run.start, run.core))
    assert sorted(plan.order, key=lambda op: first[op][0]) != list(plan.order)
    ordered = in_order(inst, sorted(plan.order, key=lambda op: first[op][0]))
    decisions = decisions_from_schedule(inst, start)
    own = decode_placed(ordered, [first[op][1] for op in plan_of(ordered).order],
                        [POLICIES.index(decisions.tensors.get(t, "keep")) for t in plan_of(ordered).saved],
                        [p for p, _ in start.pinned])
    found = descend(inst, [start], deadline=Deadline(60), rounds=0)
    assert found is not None and found.decoded[0] is not None
    assert found.decoded[0] == evaluate(inst, own).objective_value


def test_the_annealing_takes_uphill_moves_and_the_descents_start_from_its_best():
    """P3D.4-P3D.5: the Metropolis rule takes moves that raise the objective; the best state
    it reaches is no worse than its start, the descents after it lower it further or keep
    it, and with ``anneal`` and ``rounds`` given the result depends on the seed alone."""
    inst = mlp4("latency")
    starts = [schedule for _, _, schedule in baseline_schedules(inst)[:2]]
    runs = [descend(inst, starts, deadline=Deadline(120), rounds=2, anneal=3000, seed=5) for _ in range(2)]
    found = runs[0]
    assert found is not None and found.annealed is not None
    count, uphill, value = found.annealed
    assert count == 3000 and uphill > 0
    assert value <= min(v for v in found.decoded if v is not None)
    assert found.value <= value
    assert evaluate(inst, found.schedule).objective_value == found.value
    assert runs[1] is not None and (runs[1].value, runs[1].annealed) == (found.value, found.annealed)
    without = descend(inst, starts, deadline=Deadline(120), rounds=2, seed=5)
    assert without is not None and without.annealed is None


def test_under_a_time_limit_the_annealing_gets_its_share_first(monkeypatch):
    """P3D.4 under a time limit: the annealing first, for its share, then the descents from
    its best.  The time is a clock that moves only when read (tests/clock.py), so the run
    does the same moves on any machine, and two runs with one seed agree."""
    inst = mlp4("latency")
    starts = [schedule for _, _, schedule in baseline_schedules(inst)[:2]]
    runs = []
    for _ in range(2):
        ticking(monkeypatch, "monet_ilp.engines.deadline", "monet_ilp.problems.p3.descent", step=0.02)
        runs.append(descend(inst, starts, deadline=Deadline(3.0), seed=0))
    found = runs[0]
    assert found is not None and found.annealed is not None and found.annealed[0] > 100
    assert found.value <= found.annealed[2]
    assert runs[1] is not None and (runs[1].value, runs[1].annealed) == (found.value, found.annealed)


def test_pin_groups_join_the_tensors_an_op_reads_together():
    """P3D.2's group move pins what an op needs pinned all at once for its pinned cost:
    the tensors joined by their readers (a layer's weight, bias and their gradients)."""
    inst = mlp4("energy")
    readers = plan_of(inst).persistent_readers
    groups = _pin_groups(readers)
    assert sorted(p for g in groups for p in g) == sorted(readers)
    group_of = {p: i for i, g in enumerate(groups) for p in g}
    by_op: dict[int, set[int]] = {}
    for p, ks in readers.items():
        for k in ks:
            by_op.setdefault(k, set()).add(group_of[p])
    assert all(len(found) == 1 for found in by_op.values())
    layer = next(g for g in groups if "fc1.weight" in g)
    assert set(layer) == {"fc1.weight", "fc1.bias", "grad(fc1.weight)", "grad(fc1.bias)"}
