"""Our own autodiff: from forward nodes to a full training graph.

The ONNX front end (:mod:`.onnx_import`) lowers a model to :class:`FwdNode` records,
each carrying what its backward needs (the saved tensors, after PyTorch autograd)
and what it costs.  This module groups them into layers, then derives the loss,
backward-data, backward-weight and optimizer ops.  The rules are written down in
``formulations/training_graph.md``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import DType, Op, OpKind, Tensor, TensorKind, TrainingGraph

#: Ops that run on a MAC array and open a new layer at ``layer`` granularity.
ANCHOR_OPS = frozenset({"Conv", "Gemm", "MatMul"})

#: Ops a layer absorbs when they consume its output and nothing else does ("the tail").
TAIL_OPS = frozenset(
    {
        "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "Gelu", "Erf", "Softmax",
        "BatchNormalization", "LayerNormalization", "MaxPool", "AveragePool",
        "GlobalAveragePool", "Add", "Sub", "Mul", "Div", "Cast", "Exp", "Sqrt", "Pow",
        "Neg", "Reciprocal", "ReduceMean", "ReduceSum", "Elementwise",
    }
)

#: Optimizers: state tensors per weight and FLOPs per weight element of one update.
#: SGD: w -= lr*g (2).  Momentum: v = mu*v + g; w -= lr*v (4).
#: Adam: two moment updates (3 + 4), bias corrections and the step (5): 12.
OPTIMIZERS: Mapping[str, tuple[tuple[str, ...], int]] = {
    "sgd": ((), 2),
    "momentum": (("momentum",), 4),
    "adam": (("adam_m", "adam_v"), 12),
}

GRANULARITIES = ("layer", "op")
LOSSES = ("cross_entropy", "mse")


@dataclass
class FwdNode:
    """One forward computation, as the front end lowered it.

    ``inputs`` are tensor ids (activations and weights, never constants).
    ``outputs[0]`` is the result; further outputs are tensors the op creates only
    for its backward (BatchNorm statistics, MaxPool indices).  ``needs[x]`` is the
    set of tensors the gradient with respect to input ``x`` reads; ``grad_macs[x]``
    and ``grad_flops[x]`` are its cost.  An input absent from ``needs`` gets no
    gradient (indices, labels).
    """

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    macs: int = 0
    flops: int = 0
    dims: dict[str, int] = field(default_factory=dict)
    needs: dict[str, set[str]] = field(default_factory=dict)
    grad_macs: dict[str, int] = field(default_factory=dict)
    grad_flops: dict[str, int] = field(default_factory=dict)
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple[int, ...]
    dtype: DType
    is_weight: bool = False

    @property
    def bytes(self) -> int:
        return max(1, math.prod(self.shape)) * self.dtype.itemsize


def group_layers(nodes: Sequence[FwdNode], granularity: str) -> list[list[FwdNode]]:
    """Group forward nodes into layers.

    At ``op`` granularity every node is its own layer.  At ``layer`` granularity a
    conv/matmul (an anchor) opens a layer, and an op of :data:`TAIL_OPS` joins the
    layer whose *tail* (its last result) it consumes, provided nothing else reads
    that tail.  Because a layer only grows while its tail is its sole externally
    read result, fusing can never create a cycle between layers.
    """
    if granularity not in GRANULARITIES:
        raise MonetError(
            f"unknown granularity {granularity!r}",
            field="granularity",
            fix=f"use one of: {', '.join(GRANULARITIES)}",
        )
    if granularity == "op":
        return [[n] for n in nodes]
    readers: dict[str, int] = defaultdict(int)
    for n in nodes:
        for t in set(n.inputs):
            readers[t] += 1
    groups: list[list[FwdNode]] = []
    tail_of: dict[str, int] = {}  # tail tensor -> index of the open group it ends
    for n in nodes:
        target = None
        if n.op_type in TAIL_OPS:
            owners = [tail_of[t] for t in n.inputs if t in tail_of and readers[t] == 1]
            target = max(owners) if owners else None
        if target is None:
            groups.append([n])
            target = len(groups) - 1
        else:
            groups[target].append(n)
        for t in [t for t, g in tail_of.items() if g == target]:
            del tail_of[t]
        tail_of[n.outputs[0]] = target
    return groups


def derive_training_graph(
    name: str,
    nodes: Sequence[FwdNode],
    infos: Mapping[str, TensorInfo],
    graph_inputs: Sequence[str],
    output: str,
    *,
    granularity: str = "layer",
    optimizer: str = "sgd",
    loss: str = "cross_entropy",
    meta: Mapping[str, Any] | None = None,
) -> TrainingGraph:
    """Derive forward, loss, backward and optimizer ops from lowered forward nodes."""
    if optimizer not in OPTIMIZERS:
        raise MonetError(
            f"unknown optimizer {optimizer!r}",
            field="optimizer",
            fix=f"use one of: {', '.join(OPTIMIZERS)}",
        )
    if loss not in LOSSES:
        raise MonetError(f"unknown loss {loss!r}", field="loss", fix=f"use one of: {', '.join(LOSSES)}")
    groups = group_layers(nodes, granularity)
    return _Derivation(name, groups, infos, graph_inputs, output, optimizer, loss, granularity, meta).run()


class _Derivation:
    """One pass of the derivation; holds the bookkeeping shared by its steps."""

    def __init__(self, name: str, groups: list[list[FwdNode]], infos: Mapping[str, TensorInfo],
                 graph_inputs: Sequence[str], output: str, optimizer: str, loss: str, granularity: str,
                 meta: Mapping[str, Any] | None) -> None:
        self.name = name
        self.groups = groups
        self.infos = dict(infos)
        self.graph_inputs = list(graph_inputs)
        self.output = output
        self.optimizer = optimizer
        self.loss = loss
        self.granularity = granularity
        self.meta = dict(meta or {})
        self.layer_names = [self._layer_name(g) for g in groups]
        self.group_of_node = {n.name: i for i, g in enumerate(groups) for n in g}
        self.ops: list[Op] = []
        self.tensors: dict[str, Tensor] = {}

    # ----------------------------------------------------------------- helpers
    @staticmethod
    def _layer_name(group: list[FwdNode]) -> str:
        anchor = next((n for n in group if n.op_type in ANCHOR_OPS), group[0])
        return anchor.name

    def _is_weight(self, t: str) -> bool:
        return self.infos[t].is_weight

    def _add_tensor(self, tid: str, kind: TensorKind, layer: str, like: str | None = None,
                    shape: tuple[int, ...] | None = None, dtype: DType | None = None) -> str:
        if tid in self.tensors:
            return tid
        if shape is None or dtype is None:
            assert like is not None, "a tensor without a shape and dtype copies those of another"
            info = self.infos[like]
            shape = shape if shape is not None else info.shape
            dtype = dtype if dtype is not None else info.dtype
        self.tensors[tid] = Tensor(
            id=tid,
            kind=kind,
            bytes=max(1, math.prod(shape)) * dtype.itemsize,
            shape=shape,
            dtype=dtype,
            layer=layer,
        )
        return tid

    # -------------------------------------------------------------------- run
    def run(self) -> TrainingGraph:
        requires_grad = self._requires_grad()
        # Which group reads each tensor differentiably (forward consumers only).
        grad_readers: dict[str, list[int]] = defaultdict(list)
        for gi, group in enumerate(self.groups):
            produced = {t for n in group for t in n.outputs}
            for n in group:
                for t in n.inputs:
                    if (t in n.needs and t not in produced and requires_grad.get(t, self._is_weight(t))
                            and gi not in grad_readers[t]):
                        grad_readers[t].append(gi)
        self._forward_ops()
        loss_grad = self._loss_ops()
        grads_in: dict[str, list[str]] = defaultdict(list)  # tensor -> partial grads of it
        grads_in[self.output].append(loss_grad)
        weight_grads: dict[str, list[str]] = defaultdict(list)
        for gi in reversed(range(len(self.groups))):
            self._backward_ops(gi, requires_grad, grad_readers, grads_in, weight_grads)
        self._optimizer_ops(weight_grads)
        meta = {
            **self.meta,
            "granularity": self.granularity,
            "optimizer": self.optimizer,
            "loss": self.loss,
            "layers": len(self.groups),
        }
        return TrainingGraph.build(self.name, self.ops, self.tensors.values(), meta)

    def _requires_grad(self) -> dict[str, bool]:
        rg: dict[str, bool] = {t: False for t in self.graph_inputs}
        for group in self.groups:
            for n in group:
                flag = any(rg.get(t, False) or self._is_weight(t) for t in n.inputs if t in n.needs)
                for t in n.outputs:
                    rg[t] = flag
        return rg

    def _forward_ops(self) -> None:
        consumers_outside: dict[str, set[int]] = defaultdict(set)
        for gi, group in enumerate(self.groups):
            for n in group:
                for t in n.inputs:
                    consumers_outside[t].add(gi)
        for t in self.graph_inputs:
            self._add_tensor(t, TensorKind.ACTIVATION, "input", like=t)
        for gi, group in enumerate(self.groups):
            layer = self.layer_names[gi]
            produced = [t for n in group for t in n.outputs]
            produced_set = set(produced)
            saved = {s for n in group for needs in n.needs.values() for s in needs}
            inputs = list(dict.fromkeys(t for n in group for t in n.inputs if t not in produced_set))
            outputs = [
                t
                for t in produced
                if (consumers_outside[t] - {gi}) or t in saved or t == self.output
            ]
            for t in inputs:
                if self._is_weight(t):
                    self._add_tensor(t, TensorKind.WEIGHT, layer, like=t)
            for t in outputs:
                self._add_tensor(t, TensorKind.ACTIVATION, layer, like=t)
            self.ops.append(
                Op(
                    id=f"F:{layer}",
                    kind=OpKind.FORWARD,
                    op_type=_op_type(group),
                    inputs=tuple(inputs),
                    outputs=tuple(outputs),
                    layer=layer,
                    macs=sum(n.macs for n in group),
                    flops=sum(n.flops for n in group),
                    dims=_anchor(group).dims,
                    members=_members(group),
                )
            )

    def _loss_ops(self) -> str:
        logits = self.infos[self.output]
        numel = max(1, math.prod(logits.shape))
        if self.loss == "cross_entropy":
            if len(logits.shape) < 1:
                raise MonetError(
                    f"model output {self.output!r} is a scalar; cross-entropy needs logits",
                    field="output",
                    fix="export the model without its loss, ending in logits",
                )
            target = self._add_tensor("labels", TensorKind.ACTIVATION, "loss",
                                      shape=logits.shape[:-1] or (1,), dtype=DType.INT64)
            # log_softmax saves its result, nll_loss reads it back: the one saved tensor.
            saved = self._add_tensor("loss.log_probs", TensorKind.ACTIVATION, "loss", like=self.output)
            fwd_flops, bwd_flops = 5 * numel, 3 * numel
        else:
            target = self._add_tensor("targets", TensorKind.ACTIVATION, "loss", like=self.output)
            saved = None
            fwd_flops, bwd_flops = 3 * numel, 3 * numel
        loss_value = self._add_tensor("loss", TensorKind.ACTIVATION, "loss", shape=(), dtype=DType.FP32)
        outputs = (loss_value,) if saved is None else (loss_value, saved)
        self.ops.append(
            Op(id="F:loss", kind=OpKind.LOSS, op_type=self.loss, inputs=(self.output, target),
               outputs=outputs, layer="loss", flops=fwd_flops, dims={"N": numel})
        )
        grad = self._add_tensor(f"grad({self.output})", TensorKind.ACTIVATION_GRAD, "loss", like=self.output)
        reads = (saved, target) if saved is not None else (self.output, target)
        self.ops.append(
            Op(id="dX:loss", kind=OpKind.BACKWARD_DATA, op_type=self.loss, inputs=reads,
               outputs=(grad,), layer="loss", flops=bwd_flops, forward_of="F:loss", dims={"N": numel})
        )
        return grad

    def _backward_ops(self, gi: int, requires_grad: Mapping[str, bool], grad_readers: Mapping[str, list[int]],
                      grads_in: dict[str, list[str]], weight_grads: dict[str, list[str]]) -> None:
        group = self.groups[gi]
        layer = self.layer_names[gi]
        produced = {t for n in group for t in n.outputs}
        # Gradients arriving from later layers (or the loss) for this layer's results.
        incoming = [g for n in group for t in n.outputs for g in grads_in.get(t, [])]
        if not incoming:
            return
        # Internal readers: does a member's result feed another member differentiably?
        internal_reader = {t for n in group for t in n.inputs if t in produced and t in n.needs}
        dx_outputs: list[str] = []
        dx_reads: list[str] = []
        dx_macs = dx_flops = 0
        for n in group:
            for t, needs in n.needs.items():
                if self._is_weight(t) or not requires_grad.get(t, False):
                    continue
                dx_macs += n.grad_macs.get(t, 0)
                dx_flops += n.grad_flops.get(t, 0)
                dx_reads.extend(_in_node_order(n, needs))
                if t not in produced and gi in grad_readers.get(t, []):
                    tid = _grad_id(t, layer, len(grad_readers[t]) > 1)
                    self._add_tensor(tid, TensorKind.ACTIVATION_GRAD, layer, like=t)
                    if tid not in dx_outputs:
                        dx_outputs.append(tid)
                        grads_in[t].append(tid)
        # Gradients of weighted members' results, as dW reads them.
        dw_reads: list[str] = []
        dw_outputs: list[str] = []
        dw_macs = dw_flops = 0
        for n in group:
            weights = [t for t in n.needs if self._is_weight(t)]
            if not weights:
                continue
            result = n.outputs[0]
            if result in internal_reader:
                gid = self._add_tensor(f"grad({result})", TensorKind.ACTIVATION_GRAD, layer, like=result)
                if gid not in dx_outputs:
                    dx_outputs.append(gid)
                dw_reads.append(gid)
            else:
                dw_reads.extend(grads_in.get(result, []))
            for w in weights:
                dw_reads.extend(_in_node_order(n, n.needs[w]))
                dw_macs += n.grad_macs.get(w, 0)
                dw_flops += n.grad_flops.get(w, 0)
                wid = _grad_id(w, layer, len(grad_readers.get(w, [])) > 1)
                self._add_tensor(wid, TensorKind.WEIGHT_GRAD, layer, like=w)
                if wid not in dw_outputs:
                    dw_outputs.append(wid)
                    weight_grads[w].append(wid)
        dims = _anchor(group).dims
        forward_id = f"F:{layer}"
        if dx_outputs:
            self.ops.append(
                Op(
                    id=f"dX:{layer}",
                    kind=OpKind.BACKWARD_DATA,
                    op_type=_op_type(group),
                    inputs=tuple(dict.fromkeys(incoming + dx_reads)),
                    outputs=tuple(dx_outputs),
                    layer=layer,
                    macs=dx_macs,
                    flops=2 * dx_macs + dx_flops,
                    forward_of=forward_id,
                    dims=dims,
                    members=_members(group),
                )
            )
        if dw_outputs:
            self.ops.append(
                Op(
                    id=f"dW:{layer}",
                    kind=OpKind.BACKWARD_WEIGHT,
                    op_type=_op_type(group),
                    inputs=tuple(dict.fromkeys(dw_reads)),
                    outputs=tuple(dw_outputs),
                    layer=layer,
                    macs=dw_macs,
                    flops=2 * dw_macs + dw_flops,
                    forward_of=forward_id,
                    dims=dims,
                    members=_members(group),
                )
            )

    def _optimizer_ops(self, weight_grads: Mapping[str, list[str]]) -> None:
        states, flops_per_elem = OPTIMIZERS[self.optimizer]
        for w, grads in weight_grads.items():
            layer = self.tensors[w].layer
            state_ids = [
                self._add_tensor(f"{w}.{s}", TensorKind.OPTIMIZER_STATE, layer, like=w) for s in states
            ]
            numel = max(1, math.prod(self.infos[w].shape))
            self.ops.append(
                Op(
                    id=f"opt:{w}",
                    kind=OpKind.OPTIMIZER,
                    op_type=self.optimizer,
                    inputs=tuple(grads) + (w, *state_ids),
                    outputs=(),
                    updates=(w, *state_ids),
                    layer=layer,
                    flops=flops_per_elem * numel + (len(grads) - 1) * numel,
                    dims={"N": numel},
                )
            )


def _grad_id(t: str, layer: str, partial: bool) -> str:
    return f"grad({t})@{layer}" if partial else f"grad({t})"


def _anchor(group: Iterable[FwdNode]) -> FwdNode:
    group = list(group)
    return next((n for n in group if n.op_type in ANCHOR_OPS), group[0])


def _members(group: list[FwdNode]) -> tuple[str, ...]:
    return tuple(m for n in group for m in (n.members or (n.name,)))


def _op_type(group: list[FwdNode]) -> str:
    return "+".join(n.op_type for n in group)


def _in_node_order(node: FwdNode, needs: Iterable[str]) -> list[str]:
    """The tensors of ``needs`` (a set) in the node's input then output order, the rest by name.

    A set's order follows Python's string hashing, which changes from one process to the
    next: iterating it would give the same graph different input orders, so different
    instance fingerprints (a schedule made in one process would be refused in another).
    """
    wanted = set(needs)
    known = [t for t in dict.fromkeys((*node.inputs, *node.outputs)) if t in wanted]
    return known + sorted(wanted.difference(known))
