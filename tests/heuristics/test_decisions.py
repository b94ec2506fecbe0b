"""Decisions (keep / offload / recompute, a core per layer) and their decoder.

Every decoded schedule goes through the evaluator.  Instances are small MLPs on a
two-core Edge TPU and on hetero_quad (P3), with SRAM budgets below what the
store-all schedule needs, and ResNet-18 on a 2x2 Edge TPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.decisions import (
    POLICIES,
    Decisions,
    decisions_from_dict,
    decisions_from_schedule,
    decode,
    default_decisions,
    load_decisions,
    plan_of,
    save_decisions,
)
from monet_ilp.heuristics.memory_aware import memory_aware_schedule
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.make import make_instance
from monet_ilp.solve import solve

TWO = {"n_pe_x": 2, "n_pe_y": 1}
LAYERS = ("fc1", "fc2", "head", "loss")
#: The MLP's store-all schedule peaks at 12 KiB per SRAM; its largest op needs 8 KiB.
TIGHT = 9 * 1024


def mlp(hw=None, sram_budget=None, objective="latency", depth=2):
    graph = zoo.mlp(depth=depth, width=64, batch=8, in_features=64)
    return make_instance(graph, hw or preset("edge_tpu", **TWO), problem="P3", sram_budget=sram_budget,
                         objective=objective)


def feasible(instance, schedule):
    metrics = evaluate(instance, schedule)
    assert metrics.feasible, (metrics.violations[:5], schedule.meta.get("repairs"))
    assert schedule.meta["latency_cycles"] == metrics.latency_cycles
    assert schedule.meta["recomputations"] == metrics.recomputations
    return metrics


def random_decisions(instance, rng):
    plan = plan_of(instance)
    tensors = {t: rng.choice(POLICIES if t in plan.recomputable else POLICIES[:2]) for t in plan.saved}
    return Decisions(tensors, {layer: rng.choice(plan.layer_cores[layer]) for layer in plan.layers})


def test_the_budget_is_below_what_store_all_needs():
    inst = mlp(sram_budget=TIGHT)
    assert not evaluate(inst, store_all_schedule(inst)).feasible


@pytest.mark.parametrize("hw", ["edge_tpu", "hetero_quad"])
def test_every_policy_combination_decodes_within_the_budget(hw):
    inst = mlp(preset("edge_tpu", **TWO) if hw == "edge_tpu" else preset("hetero_quad"), TIGHT)
    plan = plan_of(inst)
    choices = [POLICIES if t in plan.recomputable else POLICIES[:2] for t in plan.saved]
    cores = [c.id for c in inst.cores]
    allocations = [dict.fromkeys(LAYERS, cores[0]), dict(zip(LAYERS, itertools.cycle(cores), strict=False)),
                   dict(zip(LAYERS, reversed(cores * 2), strict=False))]
    for combo in itertools.product(*choices):
        for allocation in allocations:
            schedule = decode(inst, Decisions(dict(zip(plan.saved, combo, strict=True)), allocation))
            assert not schedule.meta["repairs"]["over_capacity"]
            feasible(inst, schedule)


@pytest.mark.parametrize("depth", [1, 3])
def test_random_decisions_on_deeper_and_shallower_mlps(depth):
    rng = random.Random(depth)
    for hw in (preset("edge_tpu", **TWO), preset("hetero_quad")):
        base = mlp(hw, depth=depth)
        peak = max(evaluate(base, store_all_schedule(base)).peak_bytes[c.memory] for c in base.cores)
        inst = mlp(hw, sram_budget=peak * 3 // 4, depth=depth)
        for _ in range(40):
            feasible(inst, decode(inst, random_decisions(inst, rng)))


def test_random_decisions_on_resnet18():
    inst = make_instance(zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3",
                         sram_budget=2 * 2**20 + 2**19)
    assert not evaluate(inst, store_all_schedule(inst)).feasible
    rng = random.Random(7)
    recomputed = 0
    for _ in range(8):
        recomputed += feasible(inst, decode(inst, random_decisions(inst, rng))).recomputations
    assert recomputed > 0


def runs_of(schedule, op):
    return [r for r in schedule.ops if r.op == op]


def moves(schedule, tensor):
    return [(t.src, t.dst) for t in sorted(schedule.transfers) if t.tensor == tensor]


def one_core(policy, **others):
    """relu1 under ``policy``, everything on pe_0 (so only the policies move data)."""
    inst = mlp()
    decisions = Decisions({"relu1": policy, **others}, dict.fromkeys(LAYERS, "pe_0"))
    return inst, decode(inst, decisions)


def test_keep_stays_in_sram():
    inst, schedule = one_core("keep")
    feasible(inst, schedule)
    assert len(runs_of(schedule, "F:fc1")) == 1 and moves(schedule, "relu1") == []


def test_offload_goes_to_dram_and_back():
    inst, schedule = one_core("offload")
    feasible(inst, schedule)
    assert len(runs_of(schedule, "F:fc1")) == 1
    assert moves(schedule, "relu1") == [("pe_0.sram", "dram"), ("dram", "pe_0.sram")]
    back = next(t for t in schedule.transfers if t.tensor == "relu1" and t.dst == "pe_0.sram")
    last_forward = runs_of(schedule, "F:fc2")[0]
    first_backward = min(r.start for r in schedule.ops if r.op in ("dX:fc1", "dW:fc2"))
    freed = [f.time for f in schedule.frees if f.tensor == "relu1" and f.memory == "pe_0.sram"]
    assert min(freed) >= last_forward.end and min(freed) <= back.start and back.end <= first_backward


def test_recompute_reruns_the_producer_before_the_backward_reader():
    inst, schedule = one_core("recompute")
    metrics = feasible(inst, schedule)
    _first, again = sorted(runs_of(schedule, "F:fc1"))
    assert metrics.recomputations == 1 and again.core == "pe_0"
    assert again.start >= runs_of(schedule, "F:fc2")[0].end
    assert again.end <= min(r.start for r in schedule.ops if r.op in ("dX:fc1", "dW:fc2"))
    assert moves(schedule, "relu1") == [] and moves(schedule, "input") == [("dram", "pe_0.sram")]
    # With the graph input offloaded too, the rerun fetches it again.
    inst, schedule = one_core("recompute", input="offload")
    feasible(inst, schedule)
    assert moves(schedule, "input") == [("dram", "pe_0.sram")] * 2


def test_recompute_is_recursive_when_the_inputs_are_gone():
    inst = mlp()
    decisions = Decisions({"relu1": "recompute", "relu2": "recompute", "loss.log_probs": "recompute"},
                          dict.fromkeys(LAYERS, "pe_0"))
    schedule = decode(inst, decisions)
    metrics = feasible(inst, schedule)
    # log_probs needs logits, which is gone: F:head runs again, and so on down the chain.
    assert len(runs_of(schedule, "F:loss")) == 2 and len(runs_of(schedule, "F:head")) == 2
    assert metrics.recomputations >= 4


def test_cross_core_data_moves_straight_between_the_srams():
    inst = mlp(sram_budget=TIGHT)
    schedule = decode(inst, Decisions({}, {"fc1": "pe_0", "fc2": "pe_1", "head": "pe_0", "loss": "pe_1"}))
    feasible(inst, schedule)
    # Made on pe_0 and read on pe_1: it still goes to DRAM (for later reads), but the read
    # on pe_1 takes the copy one NoC hop away, ready before the round trip through DRAM.
    def arrivals(tensor, memory):
        return [(t.src, t.end) for t in schedule.transfers if t.tensor == tensor and t.dst == memory]

    assert arrivals("relu1", "pe_1.sram")[0][0] == "pe_0.sram"
    assert [src for src, _ in arrivals("grad(logits)", "pe_0.sram")] == ["pe_1.sram"]
    hop = next(t for t in schedule.transfers if t.tensor == "relu1" and t.dst == "pe_1.sram")
    write = next(t for t in schedule.transfers if t.tensor == "relu1" and t.dst == "dram")
    assert hop.end < write.end + write.end - write.start  # before DRAM could send it back
    hops = [t for t in schedule.transfers if "dram" not in (t.src, t.dst)]
    assert hops and all(t.link.startswith("noc") for t in hops)
    # The producer's copy is kept until the hop ends.
    for t in hops:
        freed = [f.time for f in schedule.frees if f.tensor == t.tensor and f.memory == t.src]
        assert all(time >= t.end for time in freed)
    # relu1 is read again on pe_1 in the backward pass, after pe_1 let it go under the
    # tight budget: it comes back once more, and DRAM keeps its copy for that.
    assert len(arrivals("relu1", "pe_1.sram")) == 2 and ("pe_0.sram", "dram") in moves(schedule, "relu1")


def test_on_energy_cross_core_data_goes_to_dram_only_when_evicted():
    """On an energy instance a kept tensor read on another core crosses the NoC, and is
    written to DRAM only when its SRAM evicts it while that read is still to come."""
    allocation = {"fc1": "pe_0", "fc2": "pe_1", "head": "pe_0", "loss": "pe_1"}
    roomy = {obj: mlp(objective=obj) for obj in ("latency", "energy")}
    by = {obj: feasible(inst, decode(inst, Decisions({}, allocation))) for obj, inst in roomy.items()}
    energy_schedule = decode(roomy["energy"], Decisions({}, allocation))
    assert not [t for t in energy_schedule.transfers if t.dst == "dram"]  # nothing evicted, nothing written
    assert [t for t in decode(roomy["latency"], Decisions({}, allocation)).transfers if t.dst == "dram"]
    assert by["energy"].energy.dram_pj < by["latency"].energy.dram_pj
    # Under the tight budget evictions write what is still to be read elsewhere: every
    # policy and allocation still decodes within capacity, as on latency.
    tight = mlp(sram_budget=TIGHT, objective="energy")
    rng = random.Random(5)
    for _ in range(40):
        schedule = decode(tight, random_decisions(tight, rng))
        assert not schedule.meta["repairs"]["over_capacity"]
        feasible(tight, schedule)


def test_on_energy_a_recomputation_runs_where_its_weights_are_pinned():
    """On an energy instance a rerun is on its producer's core, where its weights are
    pinned, and its output crosses the NoC to the reader; on latency it is on the
    reader's core, and the weights it reads there are not pinned."""
    allocation = {"fc1": "pe_0", "fc2": "pe_1", "head": "pe_1", "loss": "pe_1"}
    decisions = Decisions({"relu1": "recompute"}, allocation, {}, ("fc1.weight", "fc1.bias"))
    schedules, reruns = {}, {}
    for objective in ("latency", "energy"):
        inst = mlp(objective=objective)
        schedules[objective] = decode(inst, decisions)
        feasible(inst, schedules[objective])
        # dW:fc2 on pe_1 reads relu1 after the forward phase freed it: one rerun of F:fc1.
        (reruns[objective],) = [run for run in schedules[objective].ops if run.op == "F:fc1" and run.instance == 1]
    energy = schedules["energy"]
    assert reruns["energy"].core == "pe_0" and set(dict(energy.pinned)) == {"fc1.weight", "fc1.bias"}
    moved = [t for t in energy.transfers if t.tensor == "relu1" and t.start >= reruns["energy"].end]
    assert [(t.src, t.dst) for t in moved] == [("pe_0.sram", "pe_1.sram")]
    assert reruns["latency"].core == "pe_1" and not schedules["latency"].pinned
    inst = mlp(objective="energy")
    assert evaluate(inst, energy).energy.total_pj < evaluate(inst, schedules["latency"]).energy.total_pj


def test_on_energy_an_evicted_tensor_waits_in_another_sram_instead_of_dram():
    """On an energy instance a kept tensor that its SRAM evicts while it is still to be
    read moves over the NoC into an SRAM with room (the idle core's here) and comes back
    from there; on latency it is written to DRAM and read back from there."""
    allocation = dict.fromkeys(LAYERS, "pe_0")
    moves = {}
    for objective in ("latency", "energy"):
        inst = mlp(sram_budget=TIGHT, objective=objective)
        schedule = decode(inst, Decisions({}, allocation))
        feasible(inst, schedule)
        assert ["relu1", "pe_0.sram", "dX:fc2"] in schedule.meta["repairs"]["evicted"]
        moves[objective] = [(t.src, t.dst) for t in schedule.transfers if t.tensor == "relu1"]
    assert moves["latency"] == [("pe_0.sram", "dram"), ("dram", "pe_0.sram")]
    assert moves["energy"] == [("pe_0.sram", "pe_1.sram"), ("pe_1.sram", "pe_0.sram")]
    # Under the tight budget every decoding still fits, with parked tensors among them.
    tight = mlp(sram_budget=TIGHT, objective="energy")
    rng = random.Random(11)
    parked = 0
    for _ in range(40):
        schedule = decode(tight, random_decisions(tight, rng))
        assert not schedule.meta["repairs"]["over_capacity"]
        feasible(tight, schedule)
        readers = {t.id: {run.core for run in schedule.ops if run.op in t.consumers} for t in tight.graph.tensors}
        parked += any(t.dst != "dram" and t.dst.split(".")[0] not in readers[t.tensor] for t in schedule.transfers)
    assert parked


def test_an_op_that_cannot_fit_is_reported_not_hidden():
    inst = mlp(sram_budget=6 * 1024)
    schedule = decode(inst, default_decisions(inst))
    assert schedule.meta["repairs"]["over_capacity"]
    assert evaluate(inst, schedule).violation_counts.get("capacity", 0) > 0


def test_decisions_read_back_from_a_decoded_schedule():
    inst = mlp()
    rng = random.Random(3)
    for _ in range(30):
        decisions = random_decisions(inst, rng)
        schedule = decode(inst, decisions)
        assert not schedule.meta["repairs"]["evicted"]
        back = decisions_from_schedule(inst, schedule)
        assert dict(back.cores) == dict(decisions.cores)
        assert dict(back.tensors) == dict(decisions.tensors)


def test_decisions_from_a_solver_schedule_are_valid():
    inst = mlp(sram_budget=TIGHT)
    result = solve(inst, "cpsat", time_limit=2, workers=1)
    decisions = decisions_from_schedule(inst, result.schedule).validate(inst)
    assert set(decisions.cores) == set(LAYERS) and set(decisions.tensors) == set(plan_of(inst).saved)
    feasible(inst, decode(inst, decisions))


def test_memory_aware_is_the_all_keep_decoder():
    inst = mlp(sram_budget=TIGHT)
    for allocate in ("layer", "op"):
        schedule = memory_aware_schedule(inst, allocate=allocate)
        metrics = feasible(inst, schedule)
        assert metrics.recomputations == 0 and metrics.transfers > 0
        assert schedule.meta["heuristic"] == "memory_aware" and schedule.meta["allocate"] == allocate
    given = {op.id: "pe_1" for op in inst.graph.ops}
    assert {r.core for r in memory_aware_schedule(inst, core_of_op=given).ops} == {"pe_1"}
    with pytest.raises(MonetError, match="needs 8192 bytes"):
        memory_aware_schedule(mlp(sram_budget=8191))
    with pytest.raises(MonetError, match="not costed"):
        memory_aware_schedule(inst, core_of_op={**given, "F:fc1": "pe_9"})


def test_json_round_trip(tmp_path):
    inst = mlp()
    decisions = Decisions({"relu1": "recompute", "input": "offload"}, {"fc1": "pe_1"}, {"tool": "mine"})
    path = tmp_path / "d.json"
    save_decisions(decisions, path)
    data = json.loads(path.read_text())
    assert data["format"] == "monet-ilp/decisions" and data["tensors"]["relu1"] == "recompute"
    back = load_decisions(path, inst)
    assert back == decisions
    assert decode(inst, back).to_dict() == decode(inst, decisions).to_dict()


def restricted(inst):
    """``inst`` with layer fc2 runnable on pe_0 only."""
    costs = {op: ({c: v for c, v in row.items() if c == "pe_0"} if inst.graph.op(op).layer == "fc2"
                  else dict(row)) for op, row in inst.costs.items()}
    return dataclasses.replace(inst, costs=costs)


@pytest.mark.parametrize("data, fragments", [
    ({"format": "monet-ilp/schedule"}, ["format", "monet-ilp/decisions"]),
    ({"format": "monet-ilp/decisions", "tensors": {"relu1": "discard"}}, ["tensors.relu1", "discard", "keep"]),
    ({"format": "monet-ilp/decisions", "tensors": {"relu9": "keep"}}, ["tensors.relu9", "not in the graph"]),
    ({"format": "monet-ilp/decisions", "tensors": {"logits": "keep"}}, ["tensors.logits", "not a saved"]),
    ({"format": "monet-ilp/decisions", "tensors": {"input": "recompute"}}, ["tensors.input", "offload"]),
    ({"format": "monet-ilp/decisions", "cores": {"fc9": "pe_0"}}, ["cores.fc9", "unknown layer", "fc1"]),
    ({"format": "monet-ilp/decisions", "cores": {"fc1": "pe_7"}}, ["cores.fc1", "unknown core", "pe_0, pe_1"]),
    ({"format": "monet-ilp/decisions", "cores": {"fc2": "pe_1"}}, ["cores.fc2", "runs none", "pe_0"]),
    ({"format": "monet-ilp/decisions", "cores": ["fc1"]}, ["cores", "map names"]),
    ({"format": "monet-ilp/decisions", "pinned": "fc1.weight"}, ["pinned", "list of tensor names"]),
    ({"format": "monet-ilp/decisions", "pinned": ["relu1"]}, ["pinned[0]", "not a persistent tensor"]),
    ({"format": "monet-ilp/decisions", "pinned": ["fc9.weight"]}, ["pinned[0]", "not in the graph"]),
], ids=["format", "policy", "unknown-tensor", "unsaved-tensor", "recompute-input", "layer", "core",
        "incapable-core", "not-a-map", "pins-not-a-list", "pin-activation", "pin-unknown"])
def test_bad_decisions_name_file_field_and_fix(tmp_path, data, fragments):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MonetError) as err:
        load_decisions(path, restricted(mlp()))
    message = str(err.value)
    assert "bad.json" in message and "fix:" in message
    for fragment in fragments:
        assert fragment in message


def test_decisions_from_dict_without_an_instance_checks_the_format_only():
    decisions = decisions_from_dict({"format": "monet-ilp/decisions", "tensors": {"x": "keep"}})
    with pytest.raises(MonetError, match="tensors.x"):
        decode(mlp(), decisions)


def test_pins_hold_weights_in_sram_at_the_pinned_cost():
    """Pinning a layer's weights keeps them in its core's SRAM (EV.E1.5): its ops run at
    their pinned cost, the SRAM holds the bytes all along, and energy falls."""
    inst = mlp()
    plan = plan_of(inst)
    base = default_decisions(inst)
    pins = tuple(plan.layer_persistent["fc1"])
    pinned = dataclasses.replace(base, pinned=pins)
    plain, held = decode(inst, base), decode(inst, pinned)
    m0, m1 = feasible(inst, plain), feasible(inst, held)
    core = base.cores["fc1"]
    memory = next(c.memory for c in inst.cores if c.id == core)
    assert dict(held.pinned) == dict.fromkeys(pins, memory) and not held.meta["repairs"]["unpinned"]
    assert m1.energy.total_pj < m0.energy.total_pj
    assert m1.peak_bytes[memory] >= sum(inst.graph.tensor(t).bytes for t in pins)
    fc1 = {op.id for op in inst.graph.ops if op.layer == "fc1"}
    for run in held.ops:
        cost = inst.cost(run.op, run.core, pinned=run.op in fc1)
        assert run.end - run.start == cost.cycles
    assert decisions_from_schedule(inst, held).pinned == tuple(t for t, _ in held.pinned)


def test_pins_the_decoder_cannot_honour_are_left_out():
    """A weight that a recomputation on another core reads, or one that leaves an SRAM no
    room for its largest op, stays at home (``meta.repairs.unpinned``)."""
    inst = mlp()
    # relu1 (made by fc1 on pe_0) is recomputed for dW:fc2 on pe_1: F:fc1 reruns there,
    # reading fc1.weight, which therefore cannot be pinned on pe_0.
    decisions = Decisions({"relu1": "recompute"}, {"fc1": "pe_0", "fc2": "pe_1", "head": "pe_1", "loss": "pe_1"},
                          pinned=("fc1.weight", "fc2.weight"))
    schedule = decode(inst, decisions)
    feasible(inst, schedule)
    assert any(r.op == "F:fc1" and r.core == "pe_1" for r in schedule.ops)
    assert schedule.meta["repairs"]["unpinned"] == ["fc1.weight"]
    assert dict(schedule.pinned) == {"fc2.weight": "pe_1.sram"}
    tight = mlp(sram_budget=TIGHT)  # 9 KiB per SRAM: the weights cannot all stay
    everything = tuple(plan_of(tight).persistent_readers)
    schedule = decode(tight, dataclasses.replace(default_decisions(tight), pinned=everything))
    feasible(tight, schedule)
    unpinned = schedule.meta["repairs"]["unpinned"]
    assert unpinned and set(unpinned) | {t for t, _ in schedule.pinned} == set(everything)


def test_pins_need_an_instance_that_models_persistent_tensors():
    graph = zoo.mlp(depth=2, width=64, batch=8, in_features=64)
    p2 = make_instance(graph, preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P2", budget=1.0)
    weight = next(t.id for t in graph.tensors if t.persistent)
    with pytest.raises(MonetError, match="does not model persistent tensors"):
        Decisions(pinned=(weight,)).validate(p2)
