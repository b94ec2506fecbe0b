"""Tests of the node-link importer/exporter (Checkmate and Moccasin forms)."""

from __future__ import annotations

import json

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monet_ilp.errors import GraphError, InputFormatError
from monet_ilp.graph.ir import DType, Op, OpKind, Tensor, TensorKind, TrainingGraph
from monet_ilp.graph.node_link import (
    from_node_link,
    output_tensor_id,
    save_node_link,
    to_node_link,
)
from monet_ilp.graph.random_dag import random_layered
from monet_ilp.graph.zoo import mlp


def write(tmp_path, data, name="graph.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def checkmate_graph():
    """A small Checkmate-style training graph: 3 forward nodes, 2 backward nodes."""
    return {
        "directed": True,
        "multigraph": False,
        "graph": {"name": "tiny"},
        "nodes": [
            {"id": 0, "cost_cpu": 10, "cost_ram": 400, "name": "conv1"},
            {"id": 1, "cost_cpu": 2.5, "cost_ram": 6},
            {"id": 2, "cost_cpu": 0, "cost_ram": 4, "name": "loss"},
            {"id": 3, "cost_cpu": 5, "cost_ram": 6, "backward": True},
            {"id": 4, "cost_cpu": 20, "cost_ram": 400, "backward": True},
        ],
        "links": [
            {"source": 0, "target": 1},
            {"source": 1, "target": 2},
            {"source": 2, "target": 3},
            {"source": 1, "target": 3},
            {"source": 3, "target": 4},
            {"source": 0, "target": 4},
        ],
    }


def moccasin_graph():
    """A Moccasin-style multigraph with string ids and parallel edges keyed "0"/"1"."""
    return {
        "directed": True,
        "multigraph": True,
        "graph": {},
        "nodes": [
            {"id": "c", "duration": 3, "out_cost": 7},
            {"id": "a", "duration": 1.5, "out_cost": 10},
            {"id": "b", "duration": 2, "out_cost": 20},
        ],
        "edges": [
            {"source": "a", "target": "b", "key": "0"},
            {"source": "a", "target": "b", "key": "1"},
            {"source": "b", "target": "c", "key": "0"},
            {"source": "a", "target": "c", "key": "0"},
        ],
    }


def edges_of(graph: TrainingGraph) -> set[tuple[str, str]]:
    return set(graph.to_networkx().edges)


# -------------------------------------------------------------------- parsing
def test_checkmate_form_parses_from_file(tmp_path):
    graph = from_node_link(write(tmp_path, checkmate_graph()))
    assert graph.name == "tiny"
    assert [op.id for op in graph.ops] == ["0", "1", "2", "3", "4"]
    assert dict(graph.meta) == {"source": "node-link", "form": "checkmate", "has_order": False}
    assert edges_of(graph) == {
        ("0", "1"), ("1", "2"), ("2", "3"), ("1", "3"), ("3", "4"), ("0", "4"),
    }

    conv = graph.op("0")
    assert conv.kind is OpKind.FORWARD and conv.op_type == "node"
    assert conv.cost == 10 and isinstance(conv.cost, int)
    assert conv.macs == 0 and conv.flops == 0
    assert conv.members == ("conv1",)
    assert graph.op("1").cost == 2.5
    assert graph.op("2").cost == 0  # zero cost is allowed
    assert graph.op("3").kind is OpKind.BACKWARD_DATA

    out = graph.tensor(output_tensor_id("1"))
    assert (out.kind, out.bytes, out.shape, out.dtype) == (TensorKind.ACTIVATION, 6, (), DType.FP32)
    assert graph.tensor(output_tensor_id("3")).kind is TensorKind.ACTIVATION_GRAD
    assert graph.op("3").inputs == (output_tensor_id("2"), output_tensor_id("1"))
    # The backward pass reads forward outputs: those are the remat candidates.
    saved = {t.id for t in graph.saved_tensors()}
    assert saved == {output_tensor_id("0"), output_tensor_id("1"), output_tensor_id("2")}


def test_moccasin_multigraph_parses_and_collapses_parallel_edges(tmp_path):
    graph = from_node_link(write(tmp_path, moccasin_graph(), "moc.json"))
    assert graph.name == "moc"  # the file stem, since the graph has no name
    assert graph.meta["form"] == "moccasin"
    # No order given: a stable topological order of the node list.
    assert [op.id for op in graph.ops] == ["a", "b", "c"]
    assert graph.op("b").inputs == (output_tensor_id("a"),)
    assert graph.op("c").inputs == (output_tensor_id("b"), output_tensor_id("a"))
    assert graph.tensor(output_tensor_id("b")).bytes == 20
    assert graph.op("a").cost == 1.5


def test_accepts_parsed_dict_and_name_override():
    graph = from_node_link(checkmate_graph(), name="renamed")
    assert graph.name == "renamed"
    assert from_node_link({**checkmate_graph(), "graph": {}}).name == "node_link"


def test_sizes_need_not_be_multiples_of_four():
    data = checkmate_graph()
    data["nodes"][1]["cost_ram"] = 7
    data["nodes"][2]["cost_ram"] = 1.0e3  # integral float from a float-typed exporter
    graph = from_node_link(data)
    assert graph.tensor(output_tensor_id("1")).bytes == 7
    assert graph.tensor(output_tensor_id("2")).bytes == 1000
    assert isinstance(graph.tensor(output_tensor_id("2")).bytes, int)


@pytest.mark.parametrize("where", ["graph", "top"])
def test_order_is_used(tmp_path, where):
    data = moccasin_graph()
    data["nodes"].append({"id": "d", "duration": 1, "out_cost": 1})
    data["edges"].append({"source": "a", "target": "d", "key": "0"})
    order = ["a", "d", "b", "c"]
    if where == "graph":
        data["graph"]["order"] = order
    else:
        data["order"] = order
    graph = from_node_link(write(tmp_path, data))
    assert [op.id for op in graph.ops] == order
    assert graph.meta["has_order"] is True


def test_order_with_int_ids(tmp_path):
    data = checkmate_graph()
    data["graph"]["order"] = [0, 1, 2, 3, 4]
    graph = from_node_link(write(tmp_path, data))
    assert [op.id for op in graph.ops] == ["0", "1", "2", "3", "4"]


# ------------------------------------------------------------------ round trip
def test_round_trip_of_node_link_graphs(tmp_path):
    for data in (checkmate_graph(), moccasin_graph()):
        graph = from_node_link(write(tmp_path, data))
        path = tmp_path / "out.json"
        save_node_link(graph, path)
        again = from_node_link(path)
        assert again.ops == graph.ops
        assert again.tensors == graph.tensors
        assert edges_of(again) == edges_of(graph)
        assert [op.id for op in again.ops] == [op.id for op in graph.ops]


def test_round_trip_of_a_zoo_graph_keeps_kinds_and_macs(tmp_path):
    graph = mlp(depth=2, width=16, batch=4)
    path = tmp_path / "mlp.json"
    save_node_link(graph, path)
    again = from_node_link(path)
    assert [op.id for op in again.ops] == [op.id for op in graph.ops]
    for op in graph.ops:
        back = again.op(op.id)
        assert (back.kind, back.op_type, back.layer, back.macs, back.flops, back.members) == (
            op.kind, op.op_type, op.layer, op.macs, op.flops, op.members
        ), op.id
        assert back.cost == op.flops  # the zoo graph has no supplied cost: FLOPs stand in
    assert {op.kind for op in again.ops} == set(OpKind)
    assert sum(op.macs for op in again.ops) == sum(op.macs for op in graph.ops) > 0
    assert edges_of(again) == edges_of(graph)
    # The extras are plain node attributes next to what Checkmate readers expect.
    node = json.loads(path.read_text())["nodes"][0]
    assert {"cost_cpu", "cost_ram", "backward", "name"} <= node.keys()
    assert (node["kind"], node["macs"]) == ("forward", graph.ops[0].macs)


def test_files_without_the_extras_import_as_before():
    graph = from_node_link(checkmate_graph())
    assert all(op.op_type == "node" and op.macs == 0 and op.flops == 0 for op in graph.ops)
    assert [op.kind for op in graph.ops] == [OpKind.FORWARD] * 3 + [OpKind.BACKWARD_DATA] * 2
    assert [op.members for op in graph.ops] == [("conv1",), (), ("loss",), (), ()]
    assert not graph.has_loss
    # null extras count as absent, as null names and layers do.
    data = checkmate_graph()
    data["nodes"][0].update(kind=None, op_type=None, macs=None, flops=None, members=None)
    assert from_node_link(data) == graph


def test_kind_without_backward_implies_the_flag():
    data = checkmate_graph()
    data["nodes"][2]["kind"] = "loss"
    for node in data["nodes"][3:]:
        del node["backward"]
        node["kind"] = "backward_weight"
    graph = from_node_link(data)
    assert [op.kind for op in graph.ops] == [OpKind.FORWARD] * 2 + [OpKind.LOSS] + [
        OpKind.BACKWARD_WEIGHT
    ] * 2
    assert graph.tensor(output_tensor_id("2")).kind is TensorKind.ACTIVATION
    assert graph.tensor(output_tensor_id("4")).kind is TensorKind.ACTIVATION_GRAD


def test_export_is_readable_by_networkx():
    graph = from_node_link(checkmate_graph())
    data = json.loads(json.dumps(to_node_link(graph)))
    nx_graph = nx.node_link_graph(data, edges="links")
    assert isinstance(nx_graph, nx.DiGraph) and nx.is_directed_acyclic_graph(nx_graph)
    assert set(nx_graph.edges) == edges_of(graph)
    assert nx_graph.nodes["0"]["cost_ram"] == 400
    assert nx_graph.nodes["0"]["name"] == "conv1"
    assert nx_graph.nodes["1"]["name"] == "1"
    assert data["graph"]["order"] == ["0", "1", "2", "3", "4"]
    assert [n["backward"] for n in data["nodes"]] == [False, False, False, True, True]


def test_export_of_a_training_graph_with_loss_and_optimizer():
    fp = DType.FP32
    tensors = [
        Tensor("x", TensorKind.ACTIVATION, 16, (4,), fp),
        Tensor("w", TensorKind.WEIGHT, 16, (4,), fp),
        Tensor("y", TensorKind.ACTIVATION, 16, (4,), fp),
        Tensor("l", TensorKind.ACTIVATION, 4, (1,), fp),
        Tensor("dy", TensorKind.ACTIVATION_GRAD, 16, (4,), fp),
        Tensor("dw", TensorKind.WEIGHT_GRAD, 16, (4,), fp),
    ]
    ops = [
        Op("fc", OpKind.FORWARD, "MatMul", ("x", "w"), ("y",), flops=32),
        Op("loss", OpKind.LOSS, "MSE", ("y",), ("l",), flops=8),
        Op("dloss", OpKind.BACKWARD_DATA, "MSEGrad", ("y", "l"), ("dy",), flops=8),
        Op("dfc", OpKind.BACKWARD_WEIGHT, "MatMulGrad", ("x", "dy"), ("dw",), flops=32, cost=3.0),
        Op("sgd", OpKind.OPTIMIZER, "SGD", ("w", "dw"), (), updates=("w",), flops=8),
    ]
    graph = TrainingGraph.build("mlp", ops, tensors)
    data = to_node_link(graph)
    nodes = {n["id"]: n for n in data["nodes"]}
    assert nodes["fc"]["cost_cpu"] == 32 and nodes["dfc"]["cost_cpu"] == 3.0
    assert nodes["fc"]["cost_ram"] == 16
    assert nodes["sgd"]["cost_ram"] == 1 and nodes["sgd"]["virtual"] is True
    assert "virtual" not in nodes["fc"]
    assert {k: n["backward"] for k, n in nodes.items()} == {
        "fc": False, "loss": False, "dloss": True, "dfc": True, "sgd": True,
    }
    assert [(e["source"], e["target"]) for e in data["links"]] == [
        ("fc", "loss"), ("fc", "dloss"), ("loss", "dloss"), ("dloss", "dfc"), ("dfc", "sgd"),
    ]
    # Re-importing keeps the structure; the virtual node comes back without outputs.
    again = from_node_link(json.loads(json.dumps(data)))
    assert [op.id for op in again.ops] == [op.id for op in graph.ops]
    assert again.op("sgd").outputs == ()
    assert edges_of(again) == edges_of(graph)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 120), seed=st.integers(0, 10_000), edge_prob=st.floats(0, 1))
def test_round_trip_of_random_graphs(n, seed, edge_prob):
    graph = random_layered(n, seed=seed, edge_prob=edge_prob)
    again = from_node_link(json.loads(json.dumps(to_node_link(graph))))
    assert again.ops == graph.ops
    assert again.tensors == graph.tensors
    # And a second trip is a fixed point of the exported JSON.
    assert to_node_link(again) == {**to_node_link(graph), "graph": to_node_link(again)["graph"]}


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 40),
    seed=st.integers(0, 10_000),
    str_ids=st.booleans(),
    multigraph=st.booleans(),
    shuffle_seed=st.integers(0, 1000),
)
def test_round_trip_of_arbitrary_node_link_files(n, seed, str_ids, multigraph, shuffle_seed):
    """Random DAG files in either form, ids of either type, nodes listed in any order."""
    import random

    rng = random.Random(shuffle_seed)
    source = random_layered(n, seed=seed)
    node_id = (lambda op_id: f"v{op_id}") if str_ids else int
    nodes = [
        {"id": node_id(op.id), "duration": op.cost, "out_cost": source.tensor(op.outputs[0]).bytes,
         "backward": rng.random() < 0.3}
        for op in source.ops
    ]
    rng.shuffle(nodes)
    links = []
    for u, v in source.to_networkx().edges:
        for key in ("0", "1") if multigraph and rng.random() < 0.5 else ("0",):
            links.append({"source": node_id(u), "target": node_id(v), "key": key})
    data = {"directed": True, "multigraph": multigraph, "graph": {}, "nodes": nodes, "links": links}

    graph = from_node_link(data)
    assert {op.id for op in graph.ops} == {str(node["id"]) for node in nodes}
    assert len(edges_of(graph)) == source.to_networkx().number_of_edges()
    again = from_node_link(to_node_link(graph))
    assert again.ops == graph.ops and again.tensors == graph.tensors


# ---------------------------------------------------------------------- errors
def assert_error(tmp_path, data, cls, field, *words):
    path = write(tmp_path, data, "bad.json")
    with pytest.raises(cls) as info:
        from_node_link(path)
    err = info.value
    assert type(err) is cls
    assert err.file == str(path)
    assert err.field is not None and field in err.field
    message = str(err)
    assert str(path) in message and field in message and "fix:" in message
    for word in words:
        assert word in message
    return err


def test_missing_file(tmp_path):
    with pytest.raises(InputFormatError, match="file not found"):
        from_node_link(tmp_path / "nope.json")


def test_not_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("this is not json")
    with pytest.raises(InputFormatError) as info:
        from_node_link(path)
    assert info.value.file == str(path)


def test_truncated_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(checkmate_graph())[:-40])
    with pytest.raises(InputFormatError, match="malformed JSON") as info:
        from_node_link(path)
    assert info.value.file == str(path) and "truncated" in str(info.value)


def test_top_level_not_an_object(tmp_path):
    assert_error(tmp_path, [1, 2], InputFormatError, "(top level)")


def test_undirected(tmp_path):
    assert_error(tmp_path, {**checkmate_graph(), "directed": False}, InputFormatError, "directed")


def test_missing_nodes(tmp_path):
    data = checkmate_graph()
    del data["nodes"]
    assert_error(tmp_path, data, InputFormatError, "nodes", '"nodes"')


def test_empty_nodes(tmp_path):
    data = {**checkmate_graph(), "nodes": [], "links": []}
    assert_error(tmp_path, data, InputFormatError, "nodes")


def test_missing_links(tmp_path):
    data = checkmate_graph()
    del data["links"]
    assert_error(tmp_path, data, InputFormatError, "links")


@pytest.mark.parametrize(
    "attribute, spellings",
    [("cost_cpu", ("'cost_cpu'", "'duration'")), ("cost_ram", ("'cost_ram'", "'out_cost'"))],
)
def test_node_missing_cost_or_size(tmp_path, attribute, spellings):
    data = checkmate_graph()
    del data["nodes"][2][attribute]
    assert_error(tmp_path, data, InputFormatError, "nodes.2", "node '2'", *spellings)


def test_moccasin_node_missing_size(tmp_path):
    data = moccasin_graph()
    del data["nodes"][1]["out_cost"]
    assert_error(tmp_path, data, InputFormatError, "nodes.a", "'out_cost'", "'cost_ram'")


@pytest.mark.parametrize("size", [0, -8])
def test_zero_or_negative_size(tmp_path, size):
    data = checkmate_graph()
    data["nodes"][1]["cost_ram"] = size
    assert_error(tmp_path, data, GraphError, "nodes.1.cost_ram", "positive")


def test_fractional_size(tmp_path):
    data = moccasin_graph()
    data["nodes"][0]["out_cost"] = 2.5
    assert_error(tmp_path, data, GraphError, "nodes.c.out_cost", "whole bytes")


def test_negative_cost(tmp_path):
    data = moccasin_graph()
    data["nodes"][0]["duration"] = -1
    assert_error(tmp_path, data, GraphError, "nodes.c.duration", "negative")


@pytest.mark.parametrize("value", ["12", True, None, [1]])
def test_cost_of_wrong_type(tmp_path, value):
    data = checkmate_graph()
    data["nodes"][0]["cost_cpu"] = value
    assert_error(tmp_path, data, InputFormatError, "nodes.0.cost_cpu")


def test_bad_node_id_and_duplicate_ids(tmp_path):
    data = checkmate_graph()
    data["nodes"][0]["id"] = 1.5
    assert_error(tmp_path, data, InputFormatError, "nodes[0].id")
    data = checkmate_graph()
    data["nodes"][1]["id"] = "0"  # int 0 and str "0" are the same op id
    assert_error(tmp_path, data, InputFormatError, "nodes[1].id", "unique")


def test_bad_backward_flag(tmp_path):
    data = checkmate_graph()
    data["nodes"][3]["backward"] = "yes"
    assert_error(tmp_path, data, InputFormatError, "nodes.3.backward")


@pytest.mark.parametrize("value", ["backward", 3, ["forward"]])
def test_unknown_kind(tmp_path, value):
    data = checkmate_graph()
    data["nodes"][3]["kind"] = value
    assert_error(tmp_path, data, InputFormatError, "nodes.3.kind", "backward_weight")


@pytest.mark.parametrize("node, kind", [(1, "optimizer"), (3, "loss"), (4, "forward")])
def test_kind_disagreeing_with_backward(tmp_path, node, kind):
    data = checkmate_graph()
    data["nodes"][node]["kind"] = kind
    if node == 1:
        data["nodes"][node]["backward"] = False
    assert_error(tmp_path, data, InputFormatError, f"nodes.{node}.backward", repr(kind))


@pytest.mark.parametrize("key, value", [("macs", -1), ("flops", 2.5)])
def test_bad_counts(tmp_path, key, value):
    data = checkmate_graph()
    data["nodes"][0][key] = value
    assert_error(tmp_path, data, GraphError, f"nodes.0.{key}", "whole number")


@pytest.mark.parametrize("key, value", [("macs", "many"), ("op_type", 7), ("members", "conv1")])
def test_extras_of_wrong_type(tmp_path, key, value):
    data = checkmate_graph()
    data["nodes"][0][key] = value
    assert_error(tmp_path, data, InputFormatError, f"nodes.0.{key}")


def test_edge_to_unknown_node(tmp_path):
    data = checkmate_graph()
    data["links"].append({"source": 4, "target": 99})
    assert_error(tmp_path, data, GraphError, "links[6].target", "99")


def test_malformed_edge(tmp_path):
    data = moccasin_graph()
    data["edges"].append({"source": "a"})
    assert_error(tmp_path, data, InputFormatError, "edges[4]")


def test_self_loop(tmp_path):
    data = moccasin_graph()
    data["edges"].append({"source": "b", "target": "b", "key": "0"})
    assert_error(tmp_path, data, GraphError, "edges[4]", "self loop")


def test_cycle_names_the_file(tmp_path):
    data = checkmate_graph()
    data["links"].append({"source": 4, "target": 1})
    err = assert_error(tmp_path, data, GraphError, "ops.", "cycle")
    assert "->" in err.problem


def test_edge_from_virtual_node(tmp_path):
    data = moccasin_graph()
    data["nodes"][1]["virtual"] = True
    assert_error(tmp_path, data, GraphError, "edges[0]", "virtual")


@pytest.mark.parametrize(
    "order, field, word",
    [
        (["a", "b"], "graph.order", "leaves out 1"),
        (["a", "b", "c", "c"], "graph.order[3]", "twice"),
        (["a", "b", "z"], "graph.order[2]", "'z'"),
        ("abc", "graph.order", "not a list"),
    ],
)
def test_order_not_a_permutation(tmp_path, order, field, word):
    data = moccasin_graph()
    data["graph"]["order"] = order
    assert_error(tmp_path, data, InputFormatError, field, word)


def test_order_not_topological(tmp_path):
    data = moccasin_graph()
    data["order"] = ["a", "c", "b"]
    assert_error(tmp_path, data, GraphError, "order", "predecessor 'b'")


def test_errors_without_a_file_name_no_file():
    data = checkmate_graph()
    del data["nodes"]
    with pytest.raises(InputFormatError) as info:
        from_node_link(data)
    assert info.value.file is None and info.value.field == "nodes"


def literature_random_dag(n: int, seed: int) -> dict:
    """A DAG file as the literature's random layered DAGs are written: nodes without
    ``id`` (networkx numbers them by position), an integer ``name``, and links keyed
    ``"0"``/``"1"`` (``node_link_data(G, source="0", target="1")``)."""
    graph = nx.gnp_random_graph(n, 0.3, seed=seed, directed=True)
    dag = nx.DiGraph((u, v) for u, v in graph.edges if u < v)
    dag.add_nodes_from(range(n))
    for v in range(n):
        dag.nodes[v].update(name=v, duration=1 + (7 * v + seed) % 50, out_cost=1 + (3 * v + seed) % 90)
    data = nx.node_link_data(nx.DiGraph(dag.subgraph(range(n))), source="0", target="1", edges="links")
    data["nodes"] = sorted(data["nodes"], key=lambda node: node["id"])
    for node in data["nodes"]:
        del node["id"]
    return data


@pytest.mark.parametrize("seed", [1, 2])
def test_the_literatures_random_dag_files_import_as_networkx_reads_them(tmp_path, seed):
    """Issue: such files were rejected (no id, int name, "0"/"1" link keys)."""
    data = literature_random_dag(12, seed)
    path = tmp_path / "rl.json"
    path.write_text(json.dumps(data))
    graph = from_node_link(path)
    reference = nx.node_link_graph(data, source="0", target="1", edges="links")
    assert {op.id for op in graph.ops} == {str(v) for v in reference.nodes}
    assert all(op.members == (op.id,) or not op.members for op in graph.ops)  # the int name is the id
    edges = {(p, op.id) for op in graph.ops for t in op.inputs
             for p in [graph.tensor(t).producer] if p is not None}
    assert edges == {(str(u), str(v)) for u, v in reference.edges}
    for op in graph.ops:
        attributes = reference.nodes[int(op.id)]
        assert op.cost == attributes["duration"]
        assert graph.tensor(output_tensor_id(op.id)).bytes == attributes["out_cost"]


def test_nodes_without_ids_collide_with_an_explicit_id_and_say_so(tmp_path):
    data = literature_random_dag(4, 1)
    data["nodes"][2]["id"] = 0  # node 0 has no id: it is numbered 0 by position
    assert_error(tmp_path, data, InputFormatError, "nodes[2].id", "by its position")


def test_an_edge_with_neither_key_pair_names_both_spellings(tmp_path):
    data = literature_random_dag(4, 1)
    data["links"].append({"from": 0, "to": 1})
    assert_error(tmp_path, data, InputFormatError, f"links[{len(data['links']) - 1}]", '"0"')


@pytest.mark.parametrize("keys", [
    {"source": "from", "target": "to"},
    {"source": "u", "target": "v", "name": "node"},
    {"name": "key_of_node"},
])
def test_files_written_with_any_node_link_data_keys_round_trip(tmp_path, keys):
    """Issue: a graph written by networkx.node_link_data with any of its key arguments
    round-trips: link keys are detected (the two keys naming nodes), the id key is given."""
    dag = nx.DiGraph([(0, 1), (0, 2), (1, 3), (2, 3)])
    for v in dag:
        dag.nodes[v].update(duration=v + 1, out_cost=4 * (v + 1))
    data = nx.node_link_data(dag, **{"edges": "links", **keys})
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    graph = from_node_link(path, id_key=keys.get("name", "id"))
    edges = {(graph.tensor(t).producer, op.id) for op in graph.ops for t in op.inputs}
    assert edges == {(str(u), str(v)) for u, v in dag.edges}
    back = nx.node_link_graph(to_node_link(graph), edges="links")
    assert {(str(u), str(v)) for u, v in back.edges} == edges


def test_link_keys_on_the_command_line(tmp_path):
    """--source-key/--target-key name the ends when detection cannot (three keys of every
    link name nodes); without them the error (exit 2, no traceback) says so."""
    from tests.cli.test_cli import assert_user_error, run

    data = literature_random_dag(5, 3)
    for link in data["links"]:
        link["from"], link["to"] = link.pop("0"), link.pop("1")
        link["via"] = link["from"]  # a third key naming a node: detection is ambiguous
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    assert_user_error(run("graph", "import", str(path)), "links[0]", "--source-key")
    given = run("graph", "import", str(path), "--source-key", "from", "--target-key", "to")
    assert given.returncode == 0, given.stderr
