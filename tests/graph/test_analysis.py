"""Graph statistics and the store-all peak, against numbers worked out by hand; the inference part."""

from __future__ import annotations

from monet_ilp.graph import (
    Op,
    OpKind,
    Tensor,
    TensorKind,
    TrainingGraph,
    from_onnx,
    store_all_peak,
    summarize,
    zoo,
)
from monet_ilp.graph.analysis import inference_graph

from . import onnx_builders as ob


def diamond() -> TrainingGraph:
    """a -> (b, c) -> d, plus a 100-byte weight read by b.

    Sizes: a=10, b=20, c=30, d=5.  Order a, b, c, d.
    While a runs: a (10).  While b runs: a (still read by c) + b = 30.
    While c runs: a + b (read by d) + c = 60.  While d runs: b + c + d = 55.
    Peak 60 at c, plus 100 persistent bytes.
    """
    tensors = [Tensor(t, TensorKind.ACTIVATION, s) for t, s in (("a", 10), ("b", 20), ("c", 30), ("d", 5))]
    tensors.append(Tensor("w", TensorKind.WEIGHT, 100))
    ops = [
        Op("A", OpKind.FORWARD, "n", outputs=("a",)),
        Op("B", OpKind.FORWARD, "n", inputs=("a", "w"), outputs=("b",)),
        Op("C", OpKind.FORWARD, "n", inputs=("a",), outputs=("c",)),
        Op("D", OpKind.FORWARD, "n", inputs=("b", "c"), outputs=("d",)),
    ]
    return TrainingGraph.build("diamond", ops, tensors)


def test_store_all_peak_by_hand():
    peak = store_all_peak(diamond())
    assert peak.profile_bytes == (10, 30, 60, 55)
    assert (peak.activation_bytes, peak.persistent_bytes, peak.total_bytes, peak.at_op) == (60, 100, 160, "C")


def test_store_all_peak_depends_on_order():
    # Running C before B: a+c = 40, then a+b+c = 60 at B; same peak, profile differs.
    peak = store_all_peak(diamond(), order=["A", "C", "B", "D"])
    assert peak.profile_bytes == (10, 40, 60, 55)


def test_summary_of_an_imported_mlp():
    g = from_onnx(ob.mlp(batch=8, sizes=(16, 32, 32, 4)), optimizer="momentum")
    s = summarize(g)
    weights = 4 * (32 * 16 + 32 + 32 * 32 + 32 + 4 * 32 + 4)
    assert s.weight_bytes == weights == s.weight_grad_bytes == s.optimizer_state_bytes
    assert s.ops_by_kind == {"forward": 3, "loss": 1, "backward_data": 4, "backward_weight": 3, "optimizer": 6}
    assert s.forward_macs == 8 * (16 * 32 + 32 * 32 + 32 * 4)
    # Saved: input x (8x16), a0 and a1 (8x32 each), log-probs (8x4) in fp32, labels (8) in int64.
    assert s.saved_bytes == 4 * (8 * 16 + 2 * 8 * 32 + 8 * 4) + 8 * 8
    assert s.store_all_peak.total_bytes == s.store_all_peak.activation_bytes + 3 * weights


def test_inference_graph_is_the_forward_part():
    graph = zoo.resnet18(batch=1)
    inference = inference_graph(graph)
    forward = [op.id for op in graph.ops if op.kind is OpKind.FORWARD]
    assert [op.id for op in inference.ops] == forward
    kinds = {t.kind for t in inference.tensors}
    assert TensorKind.WEIGHT in kinds and not kinds & {TensorKind.WEIGHT_GRAD, TensorKind.OPTIMIZER_STATE,
                                                       TensorKind.ACTIVATION_GRAD}
    assert not inference.saved_tensors() and not inference.has_loss
    assert inference.name == "resnet18_cifar_inference" and inference.meta["phase"] == "inference"
    assert sum(op.macs for op in inference.ops) == sum(op.macs for op in graph.ops if op.kind is OpKind.FORWARD)
    assert store_all_peak(inference).total_bytes < store_all_peak(graph).total_bytes
    assert inference_graph(inference).name == inference.name  # idempotent
