"""Layer fusion (``formulations/fusion.md``): the plan's checks, the tiled graph, its costs,
and the evaluator checking a fused schedule tile by tile."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import zoo
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.graph.fusion import (
    Axis,
    FusionError,
    FusionPlan,
    Stack,
    chains,
    fusable,
    load_fusion,
    plan_of,
    tile_graph,
    tile_id,
)
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.memory_aware import memory_aware_schedule
from monet_ilp.instance import Instance
from monet_ilp.make import make_instance

HW = preset("edge_tpu", n_pe_x=2, n_pe_y=2)
PLAIN: list[Instance] = []  # the layer-by-layer instance of the ``gpt`` graph, made once


@pytest.fixture(scope="module")
def gpt() -> object:
    """A one-block GPT-2 (2 samples of 16 tokens, 32 features): training graph."""
    graph = zoo.gpt2(n_layer=1, d_model=32, n_head=2, seq=16, vocab=64, batch=2)
    PLAIN[:] = [make_instance(graph, HW, problem="P3", sram_budget=2**20)]
    return graph


@pytest.fixture(scope="module")
def resnet_inference() -> object:
    return inference_graph(zoo.resnet18(batch=1))


# ====================================================================== what is fusable
def test_batch_norm_in_training_cuts_stacks_and_layer_norm_does_not(gpt, resnet_inference):
    training = zoo.resnet18(batch=1)
    why = fusable(training.op("F:layer1.0.conv1"), training, Axis.ROWS)
    assert why is not None and "batch normalisation in training" in why
    assert fusable(resnet_inference.op("F:layer1.0.conv1"), resnet_inference, Axis.ROWS) is None
    assert fusable(gpt.op("F:h.0.ln_1"), gpt, Axis.ROWS) is None
    pooled = fusable(resnet_inference.op("F:layer4.1.conv2"), resnet_inference, Axis.ROWS)
    assert pooled is not None and "avgpool" in pooled  # the global pooling reduces the rows
    assert chains(training) == []  # every conv of ResNet-18 carries a training-mode BN
    assert [len(c) for c in chains(resnet_inference)] == [19]


# ====================================================================== identity
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_stacks_of_one_tile_leave_the_graph_and_the_instance_as_they_are(gpt, data):
    """FU.T7: one tile per stack is layer by layer (any stacks, fusable or not)."""
    forward = [op.id for op in gpt.ops if op.kind == "forward"]
    cuts = sorted(data.draw(st.sets(st.integers(1, len(forward) - 1), max_size=4)))
    bounds = [0, *cuts, len(forward)]
    stacks = tuple(Stack(tuple(forward[a:b]), 1, data.draw(st.sampled_from(list(Axis))))
                   for a, b in itertools.pairwise(bounds))
    plan = FusionPlan(stacks)
    assert tile_graph(gpt, plan) is gpt
    fused = make_instance(gpt, HW, problem="P3", sram_budget=2**20, fusion=plan)
    assert fused.fingerprint == PLAIN[0].fingerprint


# ====================================================================== the tiled graph
def test_tiles_cover_their_receptive_field_with_halos(resnet_inference):
    """FU.T3: 3x3 convs, stride 1, 4 tiles of 8 rows: tile 1 of the second conv reads rows
    7-16 of the first conv's output, i.e. one row of tile 0, tile 1 whole, one row of tile 2."""
    stack = ["F:layer1.0.conv1", "F:layer1.0.conv2"]
    tiled = tile_graph(resnet_inference, plan_of([stack], 4))
    second = tiled.op(tile_id("F:layer1.0.conv2", 1))
    made = [tile_id("layer1.0.relu1", j) for j in range(4)]
    assert [t for t in second.inputs if t in made] == made[:3]
    row = 64 * 32 * 4  # 64 channels x 32 columns x fp32
    assert second.reads[made[0]] == row and second.reads[made[2]] == row
    assert made[1] not in second.reads  # read whole
    # The residual input, made before the stack, is read in part: its own 8 rows.
    assert second.reads["relu"] == 8 * row
    assert second.dims["OY"] == 8 and second.dims["IY"] == 10
    # The first tile's window starts at row 0 (padding), the last ends at row 32.
    first = tiled.op(tile_id("F:layer1.0.conv1", 0))
    assert first.reads["relu"] == 9 * row and first.dims["IY"] == 9
    # Weights are staged once and read by every tile.
    assert tiled.op("S:layer1.0.conv1.weight").outputs == ("layer1.0.conv1.weight@stack",)
    assert all("layer1.0.conv1.weight@stack" in tiled.op(tile_id("F:layer1.0.conv1", i)).inputs
               for i in range(4))


def test_tiles_split_work_and_bytes_exactly_and_outside_readers_read_every_tile(gpt):
    chain = chains(gpt)[0]
    tiled = tile_graph(gpt, plan_of([chain], 4))
    for op_id in chain:
        op = gpt.op(op_id)
        tiles = [tiled.op(tile_id(op_id, i)) for i in range(4)]
        assert sum(t.macs for t in tiles) == op.macs and sum(t.flops for t in tiles) == op.flops
        for k, out in enumerate(op.outputs):
            assert sum(tiled.tensor(t.outputs[k]).bytes for t in tiles) == gpt.tensor(out).bytes
    # The backward of a fused layer reads every tile of what the forward saved (FU.T5).
    backward = tiled.op("dX:h.0.mlp.c_fc")
    assert [tile_id("h.0.mlp.fc", i) for i in range(4)] == [t for t in backward.inputs if "h.0.mlp.fc#" in t]
    # Attention's scores wait for every token of Q.K; its context reads its own rows of the
    # scores and every row of V.
    scores = tiled.op(tile_id("F:h.0.attn.scores", 2))
    assert [t for t in scores.inputs if "qkv#" in t] == [tile_id("h.0.attn.qkv", j) for j in range(4)]
    context = tiled.op(tile_id("F:h.0.attn.context", 2))
    assert [t for t in context.inputs if "softmax#" in t] == [tile_id("h.0.attn.softmax", 2)]


def test_a_tile_reads_its_weights_from_sram_and_the_stage_from_dram(gpt):
    tiled = make_instance(gpt, HW, problem="P3", sram_budget=2**20,
                          fusion=plan_of([chains(gpt)[0]], 2))
    plain = make_instance(gpt, HW, problem="P3", sram_budget=2**20)
    whole, tile = plain.cost("F:h.0.mlp.c_fc", "pe_0"), tiled.cost(tile_id("F:h.0.mlp.c_fc", 0), "pe_0")
    stage = tiled.cost("S:h.0.mlp.c_fc.weight", "pe_0")
    assert whole.dram_pj > 0 and tile.dram_pj == 0 and stage.dram_pj > 0  # FU.C2, FU.C3
    assert stage.compute_pj == 0


# ====================================================================== the evaluator
def test_the_evaluator_checks_a_fused_schedule_tile_by_tile(gpt):
    inst = make_instance(gpt, HW, problem="P3", sram_budget=2**20, fusion=plan_of([chains(gpt)[0]], 4))
    schedule = memory_aware_schedule(inst)
    assert evaluate(inst, schedule).feasible
    # Tile 2 of the context started before the last tile of Q.K.V that it reads was made.
    runs = {r.op: r for r in schedule.ops}
    made = runs[tile_id("F:h.0.attn.c_attn", 3)]
    late = tile_id("F:h.0.attn.context", 2)
    early = dataclasses.replace(runs[late], start=made.start,
                                end=made.start + runs[late].end - runs[late].start)
    broken = dataclasses.replace(schedule, ops=tuple(early if r.op == late else r for r in schedule.ops))
    metrics = evaluate(inst, broken)
    assert not metrics.feasible
    assert any(late in v for v in map(str, metrics.violations))


def test_a_fused_instance_and_its_schedule_survive_their_files(gpt, tmp_path):
    inst = make_instance(gpt, HW, problem="P3", sram_budget=2**20, fusion=plan_of([chains(gpt)[0]], 3))
    inst.save(tmp_path / "fused.json")
    again = Instance.load(tmp_path / "fused.json")
    assert again.fingerprint == inst.fingerprint
    assert again.meta.get("fusion") == inst.meta.get("fusion") or again.graph.meta["fusion"]
    schedule = memory_aware_schedule(inst)
    assert evaluate(again, schedule).objective_value == evaluate(inst, schedule).objective_value


# ====================================================================== bad plans
@pytest.mark.parametrize("plan,where,says", [
    ({"stacks": [{"ops": ["F:h.0.ln_1", "F:h.0.attn.scores"], "tiles": 2}]}, "stacks[0].ops", "not a chain"),
    ({"stacks": [{"ops": ["F:h.0.ln_1", "F:h.0.attn.c_attn"], "tiles": 17}]}, "stacks[0].tiles", "at most 16"),
    ({"stacks": [{"ops": ["dX:h.0.ln_1"], "tiles": 2}]}, "stacks[0].ops", "backward_data ops are not fused"),
    ({"stacks": [{"ops": ["F:nope"], "tiles": 2}]}, "stacks[0].ops", "does not have"),
    ({"stacks": [{"ops": ["F:h.0.ln_1"], "tiles": 0}]}, "stacks[0].tiles", "positive integer"),
    ({"stacks": [{"ops": ["F:h.0.ln_1"], "tiles": 2, "axis": "cols"}]}, "stacks[0].axis", "unknown"),
    ({"stack": []}, "stacks", "a list 'stacks'"),
])
def test_a_bad_plan_names_the_file_the_field_and_the_fix(gpt, tmp_path, plan, where, says):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(MonetError) as caught:
        tile_graph(gpt, load_fusion(path))
    assert caught.value.field == where and says in str(caught.value) and str(path) in str(caught.value)
    assert caught.value.fix


def test_a_malformed_plan_file_is_an_input_error(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("stacks: [\n")
    with pytest.raises(MonetError, match="not valid YAML"):
        load_fusion(path)
    with pytest.raises(FusionError, match="already in stacks"):
        tile_graph(zoo.gpt2(n_layer=1, d_model=32, n_head=2, seq=16, vocab=64, batch=2),
                   FusionPlan((Stack(("F:h.0.ln_1",), 1), Stack(("F:h.0.ln_1",), 1))))
