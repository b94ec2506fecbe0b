"""The search over fusion plans (``formulations/fusion.md`` FU.K1, FU.K2), on a one-block
GPT-2 with deterministic backends (the list scheduler screens and solves)."""

from __future__ import annotations

import json

import pytest

from monet_ilp.analysis.fusion import dram_bytes, fusion_search, plan_from_spec, stream_rule
from monet_ilp.graph import zoo
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.graph.fusion import chain_parts, chains
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance
from monet_ilp.results import Status
from tests.conftest import cli_code

HW = preset("edge_tpu", n_pe_x=2, n_pe_y=2)
LIST = "heuristic:memory_aware"
GPT = ["--model", "gpt2", "-p", "n_layer=1", "-p", "d_model=32", "-p", "n_head=2", "-p", "seq=16",
       "-p", "vocab=64", "-p", "batch=2"]

@pytest.fixture(scope="module")
def gpt():
    return zoo.gpt2(n_layer=1, d_model=32, n_head=2, seq=16, vocab=64, batch=2)


def test_the_search_returns_verified_plans_best_first_with_layer_by_layer_among_them(gpt):
    found = fusion_search(gpt, HW, sram_budget=2**20, tiles=(2, 4), backend=LIST, screen_backend=LIST,
                          finalists=2, workers=1)
    assert found.layer_by_layer.plan.fused == () and found.layer_by_layer in found.rows
    values = [r.objective for r in found.rows]
    assert values == sorted(values) and found.best.objective == values[0]
    for row in found.rows:
        assert row.result.status is Status.FEASIBLE and row.result.metrics.feasible
        assert row.result.objective == row.result.metrics.objective_value
        assert row.dram_bytes == dram_bytes(row.instance, row.result.schedule) > 0
        assert row.instance.graph.meta.get("fusion", {"stacks": []})["stacks"] == [
            s.to_dict() for s in row.plan.stacks]
    assert found.screened >= 1 + 2  # layer by layer and the whole chain at 2 and 4 tiles


def test_streams_rule_keeps_each_stacks_weights_within_the_capacity(gpt):
    capacity = 40_000
    plan = stream_rule(gpt, capacity, 2)
    assert plan.fused
    for stack in plan.fused:
        weights = {t for op in stack.ops for t in gpt.op(op).inputs if gpt.tensor(t).persistent}
        assert sum(gpt.tensor(t).bytes for t in weights) <= capacity or len(stack.ops) == 1
    covered = [op for s in plan.fused for op in s.ops]
    assert set(covered) <= set(chains(gpt)[0])


def test_a_graph_with_nothing_fusable_says_so():
    training = zoo.resnet18(batch=1)  # every conv carries a batch normalisation in training (FU.F2)
    found = fusion_search(training, HW, sram_budget=3 * 2**20, backend=LIST, screen_backend=LIST, workers=1,
                          tiles=(2,), time_limit=3)
    assert [r.plan.fused for r in found.rows] == [()]
    assert found.notes and "no chain" in found.notes[0]
    # FU.B4: the only plan's bounds over every schedule hold for every plan, and beat FU.B1.
    assert found.only_plan_bound is not None and found.bound_every_plan == found.only_plan_bound
    assert found.bound.latency_cycles < found.only_plan_bound <= found.best.objective


def test_the_cli_searches_and_writes_the_best_plan(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert cli_code(["fusion", "search", *GPT, "--hw", "edge_tpu", "--set", "n_pe_x=2", "--set", "n_pe_y=2",
                "--sram-budget", "1MiB", "--tiles", "2", "--backend", LIST, "--finalists", "1",
                "--workers", "1", "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["format"] == "monet-ilp/fusion"
    printed = capsys.readouterr()
    assert "layer by layer" in printed.out
    # The plan it wrote makes an instance.
    assert cli_code(["instance", "make", *GPT, "--hw", "edge_tpu", "--sram-budget", "1MiB", "--fusion", str(out),
                "-o", str(tmp_path / "inst.json")]) == 0


def test_a_bad_plan_on_the_command_line_exits_2_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"stacks": [{"ops": ["F:h.0.ln_1", "F:h.0.attn.scores"], "tiles": 2}]}))
    assert cli_code(["instance", "make", *GPT, "--hw", "edge_tpu", "--sram-budget", "1MiB", "--fusion", str(bad),
                "-o", str(tmp_path / "inst.json")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "stacks[0].ops" in err and "fix:" in err and "Traceback" not in err


def test_plans_cut_where_weights_outgrow_the_sram_are_still_chains():
    """{chains: 4} and Stream's rule on ResNet-18 inference at 512 KiB: layers whose weights
    cannot be staged are left out, and what is left is cut into chains (FU.S1)."""
    graph = inference_graph(zoo.resnet18(batch=1))
    plain = make_instance(graph, HW, problem="P3", sram_budget=2**19)
    for plan in (plan_from_spec(graph, plain, {"chains": 4}), stream_rule(graph, 2**19, 4)):
        assert plan.fused
        tiled = make_instance(graph, HW, problem="P3", sram_budget=2**19, fusion=plan)  # accepted
        assert tiled.graph.meta["fusion"]["stacks"]
        for stack in plan.fused:
            assert chain_parts(graph, stack.ops) == [list(stack.ops)]
