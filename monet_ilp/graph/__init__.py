"""Training-graph builders and the TrainingGraph IR (first stage of the pipeline).

Graphs come from ONNX models (:func:`from_onnx`), the model zoo (:mod:`.zoo`, which
builds ONNX and goes through the same importer), node-link JSON files in the
Checkmate/Moccasin form (:func:`from_node_link`), or the random layered-DAG
generators (:func:`random_layered`, :func:`random_layered_literature`).
"""

from monet_ilp.graph import zoo
from monet_ilp.graph.analysis import GraphSummary, MemoryPeak, store_all_peak, summarize
from monet_ilp.graph.ir import DType, Op, OpKind, Tensor, TensorKind, TrainingGraph
from monet_ilp.graph.node_link import from_node_link, save_node_link, to_node_link
from monet_ilp.graph.onnx_import import SUPPORTED_OPS, from_onnx
from monet_ilp.graph.random_dag import random_layered, random_layered_literature

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
