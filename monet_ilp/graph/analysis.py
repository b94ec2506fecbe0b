"""Statistics of a training graph: sizes by kind, work, and the store-all memory peak;
and its inference part.

These are graph facts, with no hardware involved; ``monet-ilp graph show`` prints them
and instance building takes its default budget from :func:`store_all_peak`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monet_ilp.graph.ir import OpKind, Tensor, TensorKind, TrainingGraph

#: The phases a graph can be built for: the training step, or inference (forward only).
PHASES = ("training", "inference")


@dataclass(frozen=True)
class MemoryPeak:
    """The peak of a schedule that keeps everything (no frees before last use).

    ``total_bytes`` = ``activation_bytes`` + ``persistent_bytes``; ``at_op`` is the
    op during which the peak is reached, ``profile_bytes`` the non-persistent
    bytes resident while each op of the order runs.
    """

    total_bytes: int
    activation_bytes: int
    persistent_bytes: int
    at_op: str
    profile_bytes: tuple[int, ...]


def store_all_peak(graph: TrainingGraph, order: Sequence[str] | None = None) -> MemoryPeak:
    """Peak memory of running ``order`` (default: the graph's op order) keeping everything.

    The semantics are those of Checkmate and Moccasin (formulations/p1_problem.md): while op
    ``v`` runs, memory holds ``v``'s outputs and every non-persistent tensor that
    was produced before and is still read by ``v`` or a later op.  Values are
    node-level: an op's non-persistent outputs are held together, until the last reader
    of any of them (right after the op when nothing reads them); a graph input is freed
    after its own last reader.  Graph inputs are resident from the start.
    Persistent tensors (weights, gradients, optimizer state) are counted once, for
    the whole iteration.
    """
    ops = list(order) if order is not None else [op.id for op in graph.ops]
    position = {op: i for i, op in enumerate(ops)}
    n = len(ops)
    delta = [0] * (n + 1)
    persistent = 0
    value_end: dict[str, int] = {}  # producer -> the last reader of any of its outputs
    for t in graph.tensors:
        if not t.persistent and t.producer is not None:
            start = position[t.producer]
            value_end[t.producer] = max([value_end.get(t.producer, start)]
                                        + [position[c] for c in t.consumers])
    for t in graph.tensors:
        if t.persistent:
            persistent += t.bytes
            continue
        start = position[t.producer] if t.producer is not None else 0
        end = (value_end[t.producer] if t.producer is not None
               else max([start] + [position[c] for c in t.consumers]))
        delta[start] += t.bytes
        delta[end + 1] -= t.bytes
    profile = list(itertools.accumulate(delta[:n]))
    peak_at = max(range(n), key=profile.__getitem__) if n else 0  # the first op at the peak
    activation_peak = profile[peak_at] if n else 0
    return MemoryPeak(
        total_bytes=activation_peak + persistent,
        activation_bytes=activation_peak,
        persistent_bytes=persistent,
        at_op=ops[peak_at] if n else "",
        profile_bytes=tuple(profile),
    )


@dataclass(frozen=True)
class GraphSummary:
    """The figures ``monet-ilp graph show`` prints."""

    name: str
    ops_by_kind: dict[str, int]
    tensors: int
    layers: int
    forward_macs: int
    backward_macs: int
    total_flops: int
    activation_bytes: int
    saved_bytes: int
    weight_bytes: int
    weight_grad_bytes: int
    optimizer_state_bytes: int
    store_all_peak: MemoryPeak

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["store_all_peak"] = {
            "total_bytes": self.store_all_peak.total_bytes,
            "activation_bytes": self.store_all_peak.activation_bytes,
            "persistent_bytes": self.store_all_peak.persistent_bytes,
            "at_op": self.store_all_peak.at_op,
        }
        return data


def summarize(graph: TrainingGraph) -> GraphSummary:
    """Count ops by kind, MACs, and bytes by tensor kind; compute the store-all peak."""

    def bytes_of(*kinds: TensorKind) -> int:
        return sum(t.bytes for t in graph.tensors_of_kind(*kinds))

    forward_kinds = (OpKind.FORWARD, OpKind.LOSS)
    return GraphSummary(
        name=graph.name,
        ops_by_kind=dict(Counter(str(op.kind) for op in graph.ops)),
        tensors=len(graph.tensors),
        layers=len({op.layer for op in graph.ops if op.kind is OpKind.FORWARD}),
        forward_macs=sum(op.macs for op in graph.ops if op.kind in forward_kinds),
        backward_macs=sum(op.macs for op in graph.ops if op.is_backward),
        total_flops=sum(op.flops for op in graph.ops),
        activation_bytes=sum(
            t.bytes
            for t in graph.tensors_of_kind(TensorKind.ACTIVATION)
            if t.producer is None or graph.op(t.producer).kind in forward_kinds
        ),
        saved_bytes=sum(t.bytes for t in graph.saved_tensors()),
        weight_bytes=bytes_of(TensorKind.WEIGHT),
        weight_grad_bytes=bytes_of(TensorKind.WEIGHT_GRAD),
        optimizer_state_bytes=bytes_of(TensorKind.OPTIMIZER_STATE),
        store_all_peak=store_all_peak(graph),
    )


def inference_graph(graph: TrainingGraph) -> TrainingGraph:
    """The forward (inference) part of a training graph: its forward ops and what they touch.

    The loss, backward and optimizer ops go, and with them the gradients and the
    optimizer state; the weights stay (persistent, read by the forward ops), the graph
    inputs the forward ops read stay, and labels go with the loss.  No activation is
    saved any more (nothing reads it backward), so an instance of it schedules one
    inference of the same layers on the same hardware (MONET's inference against
    training comparison).  ``meta["phase"]`` is ``"inference"``.
    """
    ops = [op for op in graph.ops if op.kind is OpKind.FORWARD]
    used = {t for op in ops for t in (*op.inputs, *op.outputs)}
    tensors = [Tensor(t.id, t.kind, t.bytes, t.shape, t.dtype, layer=t.layer)
               for t in graph.tensors if t.id in used]
    name = graph.name if graph.name.endswith("_inference") else f"{graph.name}_inference"
    return TrainingGraph.build(name, ops, tensors, {**graph.meta, "phase": "inference"})
