"""The TrainingGraph IR: validation, immutability, JSON round trip, networkx view."""

from __future__ import annotations

import dataclasses
import json

import networkx as nx
import pytest

from monet_ilp.errors import GraphError, InputFormatError
from monet_ilp.graph import DType, Op, OpKind, Tensor, TensorKind, TrainingGraph


def chain(sizes=(4, 8, 16)) -> TrainingGraph:
    """a -> b -> c, each op writing one activation of the given size."""
    names = "abc"[: len(sizes)]
    tensors = [Tensor(f"t_{n}", TensorKind.ACTIVATION, s) for n, s in zip(names, sizes, strict=True)]
    ops = [Op(n, OpKind.FORWARD, "node", inputs=(f"t_{p}",) if p else (), outputs=(f"t_{n}",), cost=1)
           for p, n in zip([None, *names], names, strict=False)]
    return TrainingGraph.build("chain", ops, tensors)


def test_build_derives_producers_and_consumers():
    g = chain()
    assert g.tensor("t_a").producer == "a"
    assert g.tensor("t_a").consumers == ("b",)
    assert g.tensor("t_c").consumers == ()


def test_immutable():
    # The ignores below are the point: each write is refused at run time.
    g = chain()
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        g.op("a").dims["K"] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        g.meta["x"] = 1  # type: ignore[index]


def test_json_round_trip(tmp_path):
    g = chain()
    path = tmp_path / "g.json"
    g.save(path)
    again = TrainingGraph.load(path)
    assert again == g
    assert json.loads(path.read_text())["format"] == "monet-ilp/training-graph"


def test_networkx_view():
    view = chain().to_networkx()
    assert list(nx.topological_sort(view)) == ["a", "b", "c"]
    assert view.edges["a", "b"]["bytes"] == 4
    assert view.nodes["c"]["out_bytes"] == 16


def test_reorder_puts_ops_in_topological_order():
    g = chain()
    shuffled = TrainingGraph.build("c", list(reversed(g.ops)), g.tensors, reorder=True)
    assert [op.id for op in shuffled.ops] == ["a", "b", "c"]
    with pytest.raises(GraphError, match="before its producer"):
        TrainingGraph.build("c", list(reversed(g.ops)), g.tensors)


def test_cycle_is_named():
    tensors = [Tensor("x", TensorKind.ACTIVATION, 4), Tensor("y", TensorKind.ACTIVATION, 4)]
    ops = [Op("a", OpKind.FORWARD, "n", inputs=("y",), outputs=("x",)),
           Op("b", OpKind.FORWARD, "n", inputs=("x",), outputs=("y",))]
    with pytest.raises(GraphError, match="cycle: a -> b -> a|cycle: b -> a -> b"):
        TrainingGraph.build("cyc", ops, tensors, reorder=True)
    with pytest.raises(GraphError, match="cycle"):
        TrainingGraph.build("cyc", ops, tensors)


@pytest.mark.parametrize("size", [0, -5])
def test_non_positive_sizes_are_rejected(size):
    with pytest.raises(GraphError, match="positive") as err:
        chain(sizes=(4, size, 8))
    assert "tensors.t_b.bytes" in str(err.value)


def test_bytes_must_match_shape():
    t = Tensor("t", TensorKind.ACTIVATION, 10, shape=(2, 2), dtype=DType.FP32)
    with pytest.raises(GraphError, match="does not match shape"):
        TrainingGraph.build("g", [Op("a", OpKind.FORWARD, "n", outputs=("t",))], [t])


def test_unknown_and_duplicate_references():
    t = Tensor("t", TensorKind.ACTIVATION, 4)
    with pytest.raises(GraphError, match="does not define"):
        TrainingGraph.build("g", [Op("a", OpKind.FORWARD, "n", inputs=("zz",), outputs=("t",))], [t])
    with pytest.raises(GraphError, match="duplicate op id"):
        TrainingGraph.build("g", [Op("a", OpKind.FORWARD, "n", outputs=("t",)),
                                  Op("a", OpKind.FORWARD, "n")], [t])
    with pytest.raises(GraphError, match="produced by both"):
        TrainingGraph.build("g", [Op("a", OpKind.FORWARD, "n", outputs=("t",)),
                                  Op("b", OpKind.FORWARD, "n", outputs=("t",))], [t])


def test_negative_macs_and_cost():
    t = Tensor("t", TensorKind.ACTIVATION, 4)
    with pytest.raises(GraphError, match="macs"):
        TrainingGraph.build("g", [Op("a", OpKind.FORWARD, "n", outputs=("t",), macs=-1)], [t])
    with pytest.raises(GraphError, match="cost"):
        TrainingGraph.build("g", [Op("a", OpKind.FORWARD, "n", outputs=("t",), cost=-2.0)], [t])


def test_updates_must_be_persistent_inputs():
    w = Tensor("w", TensorKind.WEIGHT, 4)
    a = Tensor("a", TensorKind.ACTIVATION, 4)
    ok = TrainingGraph.build("g", [Op("u", OpKind.OPTIMIZER, "sgd", inputs=("w",), updates=("w",))], [w])
    assert ok.op("u").updates == ("w",)
    with pytest.raises(GraphError, match="updates"):
        TrainingGraph.build("g", [Op("p", OpKind.FORWARD, "n", outputs=("a",)),
                                  Op("u", OpKind.OPTIMIZER, "sgd", inputs=("a",), updates=("a",))], [a])


def test_load_errors_name_file_and_field(tmp_path):
    path = tmp_path / "g.json"
    chain().save(path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(InputFormatError, match="malformed JSON") as err:
        TrainingGraph.load(path)
    assert str(path) in str(err.value)

    data = chain().to_dict()
    del data["ops"][1]["kind"]
    path.write_text(json.dumps(data))
    with pytest.raises(InputFormatError, match="missing field 'kind'") as err:
        TrainingGraph.load(path)
    assert "ops.b.kind" in str(err.value) and str(path) in str(err.value)

    data = chain().to_dict()
    data["tensors"][0]["bytes"] = -3
    path.write_text(json.dumps(data))
    with pytest.raises(GraphError, match="positive") as err:
        TrainingGraph.load(path)
    assert str(path) in str(err.value)

    path.write_text(json.dumps({"nodes": []}))
    with pytest.raises(InputFormatError, match="not a monet-ilp training graph"):
        TrainingGraph.load(path)

    data = chain().to_dict()
    data["ops"][0]["kind"] = "sideways"
    path.write_text(json.dumps(data))
    with pytest.raises(InputFormatError, match="use one of"):
        TrainingGraph.load(path)
