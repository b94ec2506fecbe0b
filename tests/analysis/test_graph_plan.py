"""P4 for a training graph (formulations/p4_problem.md P4.G): units and cuts, the messages
between stages, P4 with one device is P3, never worse than one chip, the bound under
every plan, and bad input.

Every P3 schedule here comes from the deterministic list scheduler
(``heuristic:memory_aware``), so exact values do not depend on the machine's speed.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from monet_ilp.analysis.graph_plan import (
    GraphPlan,
    graph_plan_search,
    graph_units,
    hardware_of,
    measure_plan,
    plan_bound,
)
from monet_ilp.graph import zoo
from monet_ilp.graph.ir import OpKind
from monet_ilp.graph.load import load_graph
from monet_ilp.hardware.cluster import cluster, edge_tpu_mesh
from monet_ilp.make import make_instance
from monet_ilp.solve import solve
from tests.conftest import cli_code

if TYPE_CHECKING:
    from pathlib import Path

HEURISTIC = "heuristic:memory_aware"
MESH_SRAM = ("pe_sram_bytes=3MiB",)


def mlp(b: int):  # type: ignore[no-untyped-def]
    return zoo.build("mlp", batch=b, depth=3, width=64, in_features=64)


def test_units_follow_the_forward_layers_and_every_op_has_one() -> None:
    g = mlp(4)
    units = graph_units(g)
    assert units.names == ("fc1", "fc2", "fc3", "head")
    assert set(units.unit_of) == {op.id for op in g.ops}
    for op in g.ops:  # a backward op sits with the forward op it differentiates
        if op.forward_of is not None:
            assert units.unit_of[op.id] == units.unit_of[op.forward_of]
    assert units.allowed_cuts() == [1, 2, 3]


def _tied_onnx(path: Path) -> Path:
    weight = numpy_helper.from_array(np.ones((16, 16), dtype=np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "W"], ["y"], name="fc2")]
    graph = helper.make_graph(nodes, "tied", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_weight_read_on_both_sides_blocks_the_cut(tmp_path: Path) -> None:
    units = graph_units(load_graph("file", _tied_onnx(tmp_path / "tied.onnx")))
    assert units.names == ("fc1", "fc2")
    assert units.allowed_cuts() == []
    assert "'W'" in units.blocked[1]


def test_what_crosses_a_cut_is_the_activation_down_and_its_gradient_up() -> None:
    """P4.G4 on the MLP: after fc1 its output goes down, and the gradient of it comes back."""
    g = mlp(4)
    hw = hardware_of(cluster("edge_tpu_mesh"))
    plan = GraphPlan(data=1, pipeline=2, micro_batch=4, micro_batches=2, schedule="1f1b", stages=(1, 3))
    measured = measure_plan(g, edge_tpu_mesh(chips=2), hw, plan, backend=HEURISTIC)
    assert measured is not None
    _, _, stages = measured
    fc1 = next(op for op in g.ops if op.id == "F:fc1")
    out = sum(g.tensor(t).bytes for t in fc1.outputs)
    assert stages[0]["sends_bytes"] == out  # the activation fc2 reads
    grad = [t for t in g.tensors if t.kind.value == "activation_grad" and t.producer is not None
            and g.op(t.producer).forward_of == "F:fc2" and any(g.op(c).forward_of == "F:fc1" for c in t.consumers)]
    assert stages[1]["sends_back_bytes"] == sum(t.bytes for t in grad) > 0


def test_p4_with_one_device_and_one_micro_batch_is_p3() -> None:
    """P4.G3: one device, the graph's own batch: the plan is P3's schedule of the whole graph."""
    g = mlp(8)
    spec = edge_tpu_mesh(chips=1)
    hw = hardware_of(spec)
    result = graph_plan_search(lambda b: g, spec, hw, global_batch=8, micro_batches=[8], backend=HEURISTIC)
    p3 = solve(make_instance(g, hw, problem="P3", objective="latency"), HEURISTIC)
    assert result.plan == GraphPlan(1, 1, 8, 1, "1f1b", (4,))
    assert isinstance(p3.objective, int)
    assert result.value == math.ceil(p3.objective * 1e9 / hw.clock_hz) / 1e9
    assert result.one_device == result.value
    assert result.parts[0].kind == "all"
    assert result.bound is not None and result.bound <= result.value


def test_on_the_mesh_resnet18_is_never_worse_than_one_chip() -> None:
    """P4.G8: the one-chip plans are in the class and tried first; the 4-chip plan is no slower."""
    spec = cluster("edge_tpu_mesh")
    hw = hardware_of(spec, None, MESH_SRAM)
    result = graph_plan_search(lambda b: zoo.build("resnet18", batch=b), spec, hw, global_batch=4,
                               micro_batches=[1, 2, 4], backend=HEURISTIC)
    assert result.status in ("optimal", "feasible")
    assert result.value is not None and result.one_device is not None and result.bound is not None
    assert result.bound <= result.value <= result.one_device
    assert result.plan is not None and result.plan.devices == 4
    # micro-batches of 2 and 4 are proved not to fit a PE's 3 MiB (P4.G6)
    assert len(result.stats["micro_batch_infeasible"]) == 2
    # the one-chip reference is P3's: four forward-backward schedules and one optimizer step
    g = zoo.build("resnet18", batch=1)
    fb = solve(make_instance(g.__class__.build("fb", [o for o in g.ops if o.kind is not OpKind.OPTIMIZER],
                                               g.tensors, g.meta), hw, problem="P3", objective="latency"),
               HEURISTIC)
    assert isinstance(fb.objective, int)
    assert result.one_device >= 4 * math.ceil(fb.objective * 1e9 / hw.clock_hz) / 1e9


@pytest.mark.parametrize("seed", range(12))
def test_the_bound_holds_for_random_plans(seed: int) -> None:
    """P4.G7 under every cut: random degrees, micro-batching, schedules and cuts, each measured,
    on a chain (the MLP) and on a graph with skip connections (ResNet-18)."""
    rng = random.Random(seed)
    g = mlp(4) if seed % 2 == 0 else zoo.build("resnet18", batch=1)
    n = graph_units(g).count
    p = rng.choice([2, 3, 4])
    d = rng.choice([1, 2]) if p == 2 else 1
    spec = edge_tpu_mesh(chips=d * p)
    hw = hardware_of(spec, None, () if seed % 2 == 0 else MESH_SRAM)
    m = rng.choice([1, 2, 3, 5])
    schedule = rng.choice(["1f1b", "gpipe"])
    cuts = sorted(rng.sample(range(1, n), p - 1))
    edges = [0, *cuts, n]
    plan = GraphPlan(d, p, 4 if seed % 2 == 0 else 1, m, schedule, tuple(edges[i + 1] - edges[i] for i in range(p)))
    measured = measure_plan(g, spec, hw, plan, backend=HEURISTIC)
    assert measured is not None
    value, parts, _ = measured
    assert all(r.cycles is not None for r in parts)
    bound = plan_bound(g, spec, hw, data=d, pipeline=p, micro_batches=m, schedule=schedule)
    assert bound <= value


def test_cli_plans_a_zoo_graph(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    code = cli_code(["plan", "--model", "mlp", "-p", "batch=8", "-p", "depth=2", "-p", "width=32",
                     "-p", "in_features=32", "--cluster", "edge_tpu_mesh", "--stage-backend", HEURISTIC,
                     "--json", str(out)])
    assert code == 0
    import json

    data = json.loads(out.read_text())
    assert data["plan"]["data"] * data["plan"]["pipeline"] in (1, 4)
    assert data["bound"] <= data["value"]


@pytest.mark.parametrize("args", [
    ["--pipeline", "2"],  # the tied graph has no allowed cut
    ["--emit", "megatron"],  # emitters are for transformer plans
    ["--objective", "energy"],
])
def test_cli_refuses_bad_graph_plans(tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = _tied_onnx(tmp_path / "tied.onnx")
    assert cli_code(["plan", "--graph", str(path), "--cluster", "edge_tpu_mesh", *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if args[0] == "--pipeline":
        assert "'W'" in err and "tied.onnx" in err


def test_cli_refuses_an_inference_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = mlp(2)
    forward = [op for op in g.ops if op.kind is OpKind.FORWARD]
    used = {t for op in forward for t in op.inputs + op.outputs}
    inference = g.__class__.build("inference", forward, [t for t in g.tensors if t.id in used])
    path = tmp_path / "inference.json"
    inference.save(path)
    assert cli_code(["plan", "--graph", str(path), "--cluster", "edge_tpu_mesh"]) == 2
    assert "not a training graph" in capsys.readouterr().err


def test_a_cluster_without_hardware_is_refused() -> None:
    from monet_ilp.errors import MonetError

    with pytest.raises(MonetError, match="--hw"):
        hardware_of(cluster("dgx_h100"))
