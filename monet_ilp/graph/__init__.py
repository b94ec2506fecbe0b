"""Training-graph builders and the TrainingGraph IR (first stage of the pipeline).

Graphs come from ONNX models (:func:`from_onnx`), the model zoo (:mod:`.zoo`, which
builds ONNX and goes through the same importer), node-link JSON files in the
Checkmate/Moccasin form (:func:`from_node_link`), or the random layered-DAG
generators (:func:`random_layered`, :func:`random_layered_literature`).

The names below are imported on first use (PEP 562): ``onnx`` alone takes a second to
import, and reading an instance file, which needs only :mod:`.ir`, should not pay it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monet_ilp.graph import zoo
    from monet_ilp.graph.analysis import GraphSummary, MemoryPeak, store_all_peak, summarize
    from monet_ilp.graph.ir import DType, Op, OpKind, Tensor, TensorKind, TrainingGraph
    from monet_ilp.graph.node_link import from_node_link, save_node_link, to_node_link
    from monet_ilp.graph.onnx_import import SUPPORTED_OPS, from_onnx
    from monet_ilp.graph.random_dag import random_layered, random_layered_literature

#: Each exported name -> the submodule that defines it (``zoo`` is a submodule itself).
_EXPORTS = {
    "SUPPORTED_OPS": "onnx_import",
    "DType": "ir",
    "GraphSummary": "analysis",
    "MemoryPeak": "analysis",
    "Op": "ir",
    "OpKind": "ir",
    "Tensor": "ir",
    "TensorKind": "ir",
    "TrainingGraph": "ir",
    "from_node_link": "node_link",
    "from_onnx": "onnx_import",
    "random_layered": "random_dag",
    "random_layered_literature": "random_dag",
    "save_node_link": "node_link",
    "store_all_peak": "analysis",
    "summarize": "analysis",
    "to_node_link": "node_link",
    "zoo": "zoo",
}

__all__ = [
    "SUPPORTED_OPS",
    "DType",
    "GraphSummary",
    "MemoryPeak",
    "Op",
    "OpKind",
    "Tensor",
    "TensorKind",
    "TrainingGraph",
    "from_node_link",
    "from_onnx",
    "random_layered",
    "random_layered_literature",
    "save_node_link",
    "store_all_peak",
    "summarize",
    "to_node_link",
    "zoo",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'monet_ilp.graph' has no attribute {name!r}")
    module = importlib.import_module(f"monet_ilp.graph.{_EXPORTS[name]}")
    return module if name == _EXPORTS[name] else getattr(module, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
