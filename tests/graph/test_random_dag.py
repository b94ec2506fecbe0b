"""Tests of the random layered-DAG generator."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind, TensorKind
from monet_ilp.graph.random_dag import random_layered


def layer_index(op) -> int:
    return int(op.layer.removeprefix("layer"))


def check_structure(graph, n, *, width=(1, 8), skip=2, duration=(1, 100), size=(1, 100)):
    dag = graph.to_networkx()
    assert graph.name == f"random_layered_n{n}_s{graph.meta['seed']}"
    assert len(graph.ops) == n and dag.number_of_nodes() == n
    assert nx.is_directed_acyclic_graph(dag)
    sinks = [v for v in dag if dag.out_degree(v) == 0]
    assert sinks == [str(n - 1)]
    assert all(nx.has_path(dag, v, sinks[0]) for v in dag)
    assert graph.meta["edges"] == dag.number_of_edges()
    # Ids are in layer order, and that is the op order.
    assert [op.id for op in graph.ops] == [str(i) for i in range(n)]

    layers = [layer_index(op) for op in graph.ops]
    assert layers == sorted(layers)
    assert layers[-1] == graph.meta["layers"] - 1 and layers.count(layers[-1]) == 1
    widths = [layers.count(i) for i in range(layers[-1])]
    assert all(width[0] <= w <= width[1] for w in widths[:-1])
    assert 1 <= widths[-1] <= width[1]
    for u, v in dag.edges:
        lu, lv = layers[int(u)], layers[int(v)]
        assert lu < lv
        if v != sinks[0]:
            assert lv - lu <= skip
    for op in graph.ops:
        if layer_index(op) > 0 and op.id != sinks[0]:
            assert any(layers[int(p)] == layer_index(op) - 1 for p in dag.predecessors(op.id))

    for op in graph.ops:
        assert op.kind is OpKind.FORWARD and op.op_type == "node"
        assert isinstance(op.cost, int) and duration[0] <= op.cost <= duration[1]
        assert len(op.outputs) == 1
        tensor = graph.tensor(op.outputs[0])
        assert tensor.kind is TensorKind.ACTIVATION and tensor.shape == ()
        assert size[0] <= tensor.bytes <= size[1]


@pytest.mark.parametrize("n", [2, 3, 10, 100])
def test_structure_with_defaults(n):
    check_structure(random_layered(n), n)


def test_deterministic_for_a_seed():
    a, b = random_layered(200, seed=7), random_layered(200, seed=7)
    assert a == b
    assert a.ops != random_layered(200, seed=8).ops


def test_meta_records_every_parameter():
    graph = random_layered(30, seed=4, width=(2, 3), edge_prob=0.5, skip=3,
                           duration=(0, 5), size=(8, 8))
    assert dict(graph.meta) == {
        "source": "random_layered", "n": 30, "seed": 4, "width": [2, 3], "edge_prob": 0.5,
        "skip": 3, "duration": [0, 5], "size": [8, 8],
        "layers": graph.meta["layers"], "edges": graph.meta["edges"],
    }


def test_edge_prob_zero_gives_one_predecessor_per_node():
    graph = random_layered(50, seed=1, edge_prob=0.0)
    for op in graph.ops[:-1]:
        assert len(op.inputs) == (0 if layer_index(op) == 0 else 1)


def test_width_one_is_a_chain():
    graph = random_layered(20, width=(1, 1), edge_prob=0.0)
    assert [op.inputs for op in graph.ops] == [()] + [(f"{i}:out",) for i in range(19)]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 300),
    seed=st.integers(0, 2**32),
    width=st.tuples(st.integers(1, 6), st.integers(0, 6)).map(lambda w: (w[0], w[0] + w[1])),
    edge_prob=st.floats(0, 1),
    skip=st.integers(1, 4),
    duration=st.tuples(st.integers(0, 50), st.integers(0, 50)).map(lambda d: (d[0], d[0] + d[1])),
    size=st.tuples(st.integers(1, 50), st.integers(0, 50)).map(lambda s: (s[0], s[0] + s[1])),
)
def test_structure_for_any_parameters(n, seed, width, edge_prob, skip, duration, size):
    params = {"width": width, "skip": skip, "duration": duration, "size": size}
    graph = random_layered(n, seed=seed, edge_prob=edge_prob, **params)
    check_structure(graph, n, **params)
    assert graph == random_layered(n, seed=seed, edge_prob=edge_prob, **params)


# |E| of seed 0 with the defaults, as the table in formulations/random_dags.md gives it.
DOCUMENTED_EDGES = {100: 271, 250: 703, 1000: 2744}


@pytest.mark.parametrize("n", sorted(DOCUMENTED_EDGES))
def test_edge_density(n):
    """|E| with the defaults: connected, and the figure the docs quote (seed 0)."""
    graph = random_layered(n)
    check_structure(graph, n)
    edges = graph.meta["edges"]
    # The statistics go into the messages, not to stdout: tests print nothing.
    stats = f"n={n}: |E|={edges} |E|/n={edges / n:.2f} layers={graph.meta['layers']}"
    assert n - 1 <= edges, stats  # every node reaches the sink, so the graph is connected
    assert edges == DOCUMENTED_EDGES[n], f"{stats}; update formulations/random_dags.md"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"n": 1}, "n"),
        ({"n": 2.0}, "n"),
        ({"n": True}, "n"),
        ({"seed": "x"}, "seed"),
        ({"width": (0, 3)}, "width"),
        ({"width": (4, 3)}, "width"),
        ({"width": (1, 2, 3)}, "width"),
        ({"width": (1.0, 2)}, "width"),
        ({"edge_prob": -0.1}, "edge_prob"),
        ({"edge_prob": 1.5}, "edge_prob"),
        ({"edge_prob": float("nan")}, "edge_prob"),
        ({"skip": 0}, "skip"),
        ({"duration": (-1, 3)}, "duration"),
        ({"duration": (5, 3)}, "duration"),
        ({"size": (0, 10)}, "size"),
        ({"size": (10, 9)}, "size"),
    ],
)
def test_bad_parameters(kwargs, field):
    kwargs = {"n": 10, **kwargs}
    with pytest.raises(MonetError) as info:
        random_layered(**kwargs)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: {field} = ") and "fix:" in str(info.value)
