"""The plan evaluator: its schedule orders, its step-by-step pipeline, memory, MFU."""

from __future__ import annotations

import dataclasses

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.hardware.cluster import dgx_a100, with_device
from monet_ilp.problems.p4.costs import plan_costs
from monet_ilp.problems.p4.evaluate import evaluate_plan, stage_orders
from monet_ilp.problems.p4.model import model_config
from monet_ilp.problems.p4.plan import Plan, plan_from_dict


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize(("p", "m"), [(1, 3), (4, 8), (4, 2), (3, 3)])
def test_orders_run_every_task_once(schedule, p, m):
    for s, order in enumerate(stage_orders(schedule, p, m)):
        assert sorted(order) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
        # a backward never comes before its own forward
        assert all(order.index(("F", i)) < order.index(("B", i)) for i in range(m))
        if schedule == "1f1b":  # at most p - s micro-batches in flight
            flying = peak = 0
            for kind, _ in order:
                flying += 1 if kind == "F" else -1
                peak = max(peak, flying)
            assert peak == min(m, p - s)


def uniform_plan(model, p, m, schedule, recompute="none", **kw):
    per = [model.layers // p + (1 if i < model.layers % p else 0) for i in range(p)]
    return Plan(kw.get("data", 1), p, kw.get("tensor", 1), kw.get("sequence_parallel", False), kw.get("b", 1), m,
                schedule, tuple(per), tuple([recompute] * model.layers), kw.get("zero", 0))


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_pipeline_time_of_balanced_stages(schedule):
    """Equal stages and a free network: (m + p - 1) times one stage's forward and backward."""
    model = model_config("gpt2", preset="medium")
    cluster = dgx_a100(nodes=1)
    plan = uniform_plan(model, 4, 16, schedule)
    costs = plan_costs(model, cluster, data=1, pipeline=4, tensor=1, sequence_parallel=False, micro_batch=1)
    # Take the ends and the hops out so that the four stages are equal.
    flat = dataclasses.replace(costs, first=dataclasses.replace(costs.first, forward_ns=0, backward_ns=0),
                               last=dataclasses.replace(costs.last, forward_ns=0, backward_ns=0), p2p_ns=0)
    metrics = evaluate_plan(model, cluster, plan, costs=flat)
    lc = flat.layer["none"]
    stage = 6 * (lc.forward_ns + lc.backward_ns)
    assert metrics.pipeline_ns == (16 + 4 - 1) * stage


def test_memory_violations_are_named():
    model = model_config("gpt3", preset="175b")
    plan = uniform_plan(model, 8, 64, "gpipe", tensor=8)
    metrics = evaluate_plan(model, dgx_a100(nodes=8), plan)
    assert not metrics.feasible and "stage 0" in metrics.violations[0]
    ok = evaluate_plan(model, dgx_a100(nodes=8), uniform_plan(model, 8, 64, "1f1b", "selective", tensor=8,
                                                              sequence_parallel=True))
    assert ok.feasible


def test_mfu_counts_the_model_flops():
    """72 B s L h^2 (1 + s/6h + V/12hL) for GPT (Korthikanti et al.)."""
    model = model_config("gpt3", preset="175b")
    batch = 64
    s, L, h, V = model.seq, model.layers, model.hidden, model.vocab
    assert model.model_flops(batch) == pytest.approx(72 * batch * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L)),
                                                    rel=1e-12)
    metrics = evaluate_plan(model, dgx_a100(nodes=8), uniform_plan(model, 8, 64, "1f1b", "selective", tensor=8,
                                                                   sequence_parallel=True))
    assert metrics.mfu == pytest.approx(model.model_flops(batch) / (metrics.time_s * 64 * 312e12))
    assert 0 < metrics.mfu < metrics.hfu < 1


def test_energy_is_busy_and_idle_power():
    model = model_config("gpt2", preset="small")
    cluster = dgx_a100(nodes=1)
    plan = uniform_plan(model, 2, 8, "1f1b", data=4)
    metrics = evaluate_plan(model, cluster, plan)
    idle = with_device(cluster, busy_w=90.0)  # busy at idle power: energy = devices x idle x time
    assert evaluate_plan(model, idle, plan).energy_j == pytest.approx(8 * 90.0 * metrics.time_s)
    assert metrics.energy_j > 8 * 90.0 * metrics.time_s


def test_bad_plans_are_user_errors():
    model = model_config("gpt2", preset="small")
    with pytest.raises(MonetError):
        evaluate_plan(model, dgx_a100(nodes=1), uniform_plan(model, 4, 8, "1f1b", tensor=4))  # 16 > 8 devices
    with pytest.raises(MonetError):
        plan_from_dict({"data": 1})
    with pytest.raises(MonetError):
        Plan(1, 2, 1, False, 1, 4, "1f1b", (6, 5), ("none",) * 12)
    plan = uniform_plan(model, 2, 8, "gpipe")
    assert plan_from_dict(plan.to_dict()) == plan


def test_offload_frees_device_memory_and_needs_host_room():
    model = model_config("gpt2", preset="medium")
    cluster = with_device(dgx_a100(nodes=1), memory_bytes=12 * 2**30)
    keep = evaluate_plan(model, cluster, uniform_plan(model, 2, 16, "gpipe", data=4))
    offload = evaluate_plan(model, cluster, uniform_plan(model, 2, 16, "gpipe", "offload", data=4))
    assert not keep.feasible and offload.feasible
    assert offload.stages[1].activation_bytes < keep.stages[1].activation_bytes
    assert offload.time_s > keep.time_s  # the PCIe round trips are not overlapped
    no_room = dataclasses.replace(cluster, host_memory_bytes=2**20)
    tight = evaluate_plan(model, no_room, uniform_plan(model, 2, 16, "gpipe", "offload", data=4))
    assert not tight.feasible and "host" in tight.violations[0]
    no_host = dataclasses.replace(cluster, host_bandwidth=0.0)
    with pytest.raises(MonetError):
        evaluate_plan(model, no_host, uniform_plan(model, 2, 16, "gpipe", "offload", data=4))


def test_placement_decides_which_collectives_cross_nodes():
    model = model_config("gpt2", preset="medium")
    cluster = dgx_a100(nodes=2)  # 16 devices, d = 2, p = 8, t = 1
    common = {"data": 2, "pipeline": 8, "tensor": 1, "sequence_parallel": False, "micro_batch": 1}
    tdp = plan_costs(model, cluster, **common, placement="tdp")  # data 1 apart, stages 2 apart: in a node
    tpd = plan_costs(model, cluster, **common, placement="tpd")  # data 8 apart: across nodes
    assert tpd.layer_sync_ns > tdp.layer_sync_ns
    plan = dataclasses.replace(uniform_plan(model, 8, 16, "1f1b", data=2), placement="tpd")
    assert plan_from_dict(plan.to_dict()) == plan
    assert evaluate_plan(model, cluster, plan).time_s != evaluate_plan(
        model, cluster, dataclasses.replace(plan, placement="tdp")).time_s
