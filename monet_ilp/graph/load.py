"""A training graph from any of its sources, by kind: the one loader of the CLI and the batch runner.

The kinds are the keys of a batch manifest's model entry (``instances/README.md``):

========== ============================================ =====================================
kind       ``source``                                   builder (its keywords are ``params``)
========== ============================================ =====================================
zoo        a zoo model name (``resnet18``)              :func:`monet_ilp.graph.zoo.build`
chain      none                                         :func:`monet_ilp.graph.chain.chain_graph`
random     none                                         :func:`monet_ilp.graph.random_dag.random_layered`
random_literature none                                  :func:`monet_ilp.graph.random_dag.random_layered_literature`
onnx       an ``.onnx`` file                            :func:`monet_ilp.graph.onnx_import.from_onnx`
node_link  a Checkmate/Moccasin node-link JSON file     :func:`monet_ilp.graph.node_link.from_node_link`
graph      a monet-ilp training-graph JSON file         :meth:`monet_ilp.graph.ir.TrainingGraph.load`
========== ============================================ =====================================

and :data:`FILE`, a file whose kind is read off it: ``.onnx`` by its suffix, a JSON
file by its ``"format"`` (a training graph, else node-link).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.graph.chain import chain_graph
from monet_ilp.graph.ir import FORMAT_NAME, TrainingGraph, read_json
from monet_ilp.graph.node_link import from_node_link
from monet_ilp.graph.random_dag import random_layered, random_layered_literature

__all__ = ["FILE", "GENERATED", "KINDS", "builder", "load_graph"]

#: The kinds of graph source, in the order a model spec is read.
KINDS = ("zoo", "chain", "random", "random_literature", "onnx", "node_link", "graph")
#: The kinds generated from parameters alone (no name, no file), and the parameter that
#: sizes each.
GENERATED = {"chain": "length", "random": "n", "random_literature": "n"}
#: A file of any kind (ONNX, training graph or node-link), told apart by its content.
FILE = "file"

_BUILDERS: dict[str, Callable[..., TrainingGraph]] = {
    "chain": chain_graph, "random": random_layered, "random_literature": random_layered_literature,
    "node_link": from_node_link, "graph": TrainingGraph.load,
}
#: Parameters given as pairs (JSON and YAML have lists, not tuples).
_PAIRS = {"chain": ("costs", "sizes"), "random": ("width", "duration", "size"),
          "random_literature": ("duration", "size")}


def builder(kind: str) -> Callable[..., TrainingGraph]:
    """The function that builds a graph of ``kind``: the parameters it takes are its keywords."""
    if kind in ("zoo", "onnx"):
        from monet_ilp.graph import zoo  # onnx takes a second to import: only for these kinds
        from monet_ilp.graph.onnx_import import from_onnx  # onnx, as above

        return zoo.build if kind == "zoo" else from_onnx
    try:
        return _BUILDERS[kind]
    except KeyError:
        raise MonetError(f"unknown kind of graph {kind!r}", field="model",
                         fix=f"use one of {', '.join(KINDS)}") from None


def load_graph(kind: str, source: str | Path | None = None, **params: Any) -> TrainingGraph:
    """The training graph of ``kind`` from ``source`` (a name or a file), built with ``params``.

    Parameters
    ----------
    kind
        One of :data:`KINDS`, or :data:`FILE`.
    source
        The zoo model's name, or the file; nothing for ``chain`` and ``random``.
    params
        The builder's keywords (module docstring).  For :data:`FILE` they are ONNX
        import options, used only when the file is ONNX (a JSON file holds its graph
        already).

    Raises
    ------
    MonetError
        An unknown kind, or whatever the builder raises (bad parameters, a missing or
        malformed file).
    """
    if kind == FILE:
        path = str(source)
        if Path(path).suffix.lower() == ".onnx":
            return builder("onnx")(path, **params)
        data = read_json(path)
        if isinstance(data, dict) and data.get("format") == FORMAT_NAME:
            return TrainingGraph.from_dict(data, source=path)
        return from_node_link(path)
    build = builder(kind)
    if kind in _PAIRS:
        pairs = {name: tuple(params[name]) for name in _PAIRS[kind] if isinstance(params.get(name), list)}
        return build(**{**params, **pairs})
    return build(source, **params)
