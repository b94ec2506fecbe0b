"""Exact over the class of fusion plans (``formulations/fusion.md`` FU.X): every plan of
FU.K1 enumerated and solved by an exact backend, on small CNNs written as ONNX files."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from monet_ilp.analysis.fusion import class_plans, count_plans, fusion_exact, fusion_search
from monet_ilp.cli import main
from monet_ilp.errors import MonetError
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.graph.fusion import chains
from monet_ilp.graph.onnx_import import from_onnx
from monet_ilp.hardware.presets import preset
from monet_ilp.results import Status
from tests.conftest import cli_code

ONE = preset("edge_tpu", n_pe_x=1, n_pe_y=1)
TWO = preset("edge_tpu", n_pe_x=1, n_pe_y=2)


def cnn_onnx(path, layers: int, channels: int, side: int) -> str:
    """``layers`` 3x3 convolutions with ReLU (same padding), global pooling, flatten."""
    nodes, weights, x = [], [], "x"
    for i in range(layers):
        w = np.random.default_rng(i).standard_normal((channels, channels if i else 3, 3, 3)).astype(np.float32)
        weights.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        x = f"r{i}"
    nodes += [helper.make_node("GlobalAveragePool", [x], ["p"]), helper.make_node("Flatten", ["p"], ["y"])]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, side, side])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.fixture(scope="module")
def cnn2(tmp_path_factory):
    return cnn_onnx(tmp_path_factory.mktemp("cnn") / "cnn2.onnx", layers=2, channels=4, side=8)


@pytest.fixture(scope="module")
def cnn3(tmp_path_factory):
    return cnn_onnx(tmp_path_factory.mktemp("cnn") / "cnn3.onnx", layers=3, channels=8, side=12)


def test_the_class_holds_every_cut_and_tile_count_once(tmp_path):
    graph = inference_graph(from_onnx(cnn_onnx(tmp_path / "cnn5.onnx", layers=5, channels=4, side=16)))
    (run,) = chains(graph)
    assert len(run) == 5
    f = [1, 1]
    for n in range(2, 6):  # FU.X2 with two tile counts: f(n) = 2 f(n-1) + f(n-2)
        f.append(2 * f[n - 1] + f[n - 2])
    plans = class_plans(graph, tiles=(2, 4))
    assert len(plans) == count_plans(graph, tiles=(2, 4)) == f[5] == 41
    assert plans[0].fused == () and len(set(plans)) == len(plans)
    for plan in plans:
        covered = [op for s in plan.fused for op in s.ops]
        assert len(covered) == len(set(covered)) and all(len(s.ops) > 1 and s.tiles in (2, 4) for s in plan.fused)
    # FU.S3: a tile count above an op's rows is lowered to them, and the plans stay distinct
    lowered = class_plans(graph, tiles=(2, 4, 64))
    assert count_plans(graph, tiles=(2, 4, 64)) == len(set(lowered)) == len(lowered)
    assert max(s.tiles for p in lowered for s in p.fused) == 16  # the rows of a 16 x 16 map


def test_the_studied_networks_hold_too_many_plans_to_list():
    from monet_ilp.graph import zoo

    graph = inference_graph(zoo.resnet18(batch=1))
    assert count_plans(graph, tiles=(2,)) == 2**18  # one chain of 19 ops: each cut in or out
    with pytest.raises(MonetError, match="54,406,016 plans"):
        class_plans(graph, tiles=(2, 4, 8), max_plans=64)


def test_every_plan_is_solved_and_the_best_is_optimal_over_the_class(cnn3):
    graph = inference_graph(from_onnx(cnn3))
    found = fusion_exact(graph, TWO, sram_budget=2**16, tiles=(2, 4), time_limit=60, workers=1)
    assert found.plans == len(found.rows) == 7 and found.proven and not found.errors
    values = [r.objective for r in found.rows]
    assert all(r.result.status is Status.OPTIMAL and r.result.metrics.feasible for r in found.rows)
    assert found.class_bound == found.best.objective == min(values) and found.gap == 0
    lbl = next(r for r in found.rows if not r.plan.fused)
    assert found.best.plan.fused and found.best.objective < lbl.objective  # fusion pays on two cores
    assert found.bound.of("latency") <= found.class_bound  # FU.B holds for every plan
    assert "class FU.X1 (7 plans" in found.bound_holds_for
    # FU.X5: the search finds nothing below the class optimum
    searched = fusion_search(graph, TWO, sram_budget=2**16, tiles=(2, 4), backend="heuristic:memory_aware",
                             finalists=3, workers=1)
    assert all(r.objective >= found.best.objective for r in searched.rows)


def test_cpsat_and_milp_agree_on_the_class_optimum(cnn2):
    graph = inference_graph(from_onnx(cnn2))
    found = {backend: fusion_exact(graph, ONE, sram_budget=2**15, objective="energy", tiles=(2, 4),
                                   backend=backend, time_limit=60, workers=1)
             for backend in ("cpsat", "milp")}
    assert all(f.proven for f in found.values())
    assert found["cpsat"].class_bound == found["milp"].class_bound == found["cpsat"].best.objective
    assert ([(r.plan, r.objective) for r in found["cpsat"].rows]
            == [(r.plan, r.objective) for r in found["milp"].rows])


def test_a_plan_with_no_schedule_drops_out_of_the_class_bound(cnn2):
    # 2 KiB per core: layer by layer and two tiles are proved infeasible, four tiles fit
    found = fusion_exact(inference_graph(from_onnx(cnn2)), ONE, sram_budget=2**11, tiles=(2, 4),
                         time_limit=60, workers=1)
    statuses = {r.summary(): r.result.status for r in found.rows}
    assert statuses["layer by layer"] is Status.INFEASIBLE
    assert found.proven and found.best.plan.fused[0].tiles == 4
    assert found.class_bound == found.best.objective


def test_a_class_too_large_or_a_heuristic_backend_is_refused_with_the_fix(cnn3):
    graph = inference_graph(from_onnx(cnn3))
    with pytest.raises(MonetError, match="holds 7 plans") as raised:
        fusion_exact(graph, ONE, sram_budget=2**16, tiles=(2, 4), max_plans=4)
    assert raised.value.field == "tiles" and "--max-plans" in raised.value.fix
    with pytest.raises(MonetError, match="heuristic") as raised:
        fusion_exact(graph, ONE, sram_budget=2**16, backend="heuristic:memory_aware")
    assert raised.value.field == "backend"


def test_the_cli_prints_every_plan_and_writes_the_best(cnn2, tmp_path, capsys):
    out = tmp_path / "best.json"
    args = ["fusion", "exact", "--graph", cnn2, "--phase", "inference", "--hw", "edge_tpu", "--set", "n_pe_x=1",
            "--set", "n_pe_y=2", "--sram-budget", "32KiB", "--tiles", "2,4", "--time-limit", "30", "-o", str(out)]
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "optimal over the class (FU.X4)" in captured.err and "3 plans" in captured.out
    plan = json.loads(out.read_text())
    assert plan["stacks"][0]["tiles"] == 4
    assert cli_code(["fusion", "exact", "--graph", cnn2, "--hw", "edge_tpu", "--sram-budget", "32KiB",
                     "--tiles", "2,4,8", "--max-plans", "2"]) == 2
