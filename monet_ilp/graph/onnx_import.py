"""ONNX front end: a forward (inference) ONNX model becomes a TrainingGraph.

The importer runs ONNX shape inference, sets aside constants and shape arithmetic,
turns views into aliases, recognises the Erf-GELU and LayerNorm decompositions,
lowers every remaining node with the rules of ``formulations/training_graph.md``,
and hands the result to :mod:`.autodiff`, which derives the backward and
optimizer ops.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from monet_ilp.errors import GraphError, InputFormatError, MonetError, UnsupportedOpError
from monet_ilp.graph.autodiff import FwdNode, TensorInfo, derive_training_graph
from monet_ilp.graph.ir import DType, TrainingGraph

_ONNX_DTYPES: dict[int, DType] = {
    onnx.TensorProto.FLOAT: DType.FP32,
    onnx.TensorProto.FLOAT16: DType.FP16,
    onnx.TensorProto.BFLOAT16: DType.BF16,
    onnx.TensorProto.INT8: DType.INT8,
    onnx.TensorProto.UINT8: DType.INT8,
    onnx.TensorProto.INT32: DType.INT32,
    onnx.TensorProto.INT64: DType.INT64,
    onnx.TensorProto.BOOL: DType.BOOL,
}

#: Ops that only reinterpret memory: their outputs alias their first input.
VIEW_OPS = frozenset(
    {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Split", "Slice",
     "SplitToSequence", "SequenceAt", "Expand"}
)

#: Shape arithmetic: folded away when every input is a constant.
SHAPE_OPS = frozenset({"Shape", "Size"})

#: BatchNormalization inputs 3 and 4 are running statistics, not trained.
_BUFFER_SLOTS = {"BatchNormalization": (3, 4)}
#: What a training-mode Dropout saves (:func:`from_onnx`'s ``dropout_mask``).
DROPOUT_MASKS = ("bool", "noise")


def from_onnx(
    model: onnx.ModelProto | str | Path,
    *,
    optimizer: str = "sgd",
    granularity: str = "layer",
    dtype: str | None = None,
    loss: str = "cross_entropy",
    allow_unknown: bool = False,
    output: str | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    batch: int | None = None,
    name: str | None = None,
    trainable: Iterable[str] | None = None,
    dropout_mask: str = "bool",
) -> TrainingGraph:
    """Import a forward ONNX model as a training graph.

    Parameters
    ----------
    model
        A ``ModelProto`` or the path of an ``.onnx`` file.
    optimizer
        ``"sgd"``, ``"momentum"`` or ``"adam"`` (0, 1 or 2 state tensors per weight).
    granularity
        ``"layer"``: each conv/matmul absorbs its elementwise tail; ``"op"``: one
        forward op per ONNX node (views and constants excepted).
    dtype
        Element type of every float tensor (``fp32``, ``bf16``, ``fp16``, ``int8``);
        ``None`` keeps the model's.
    loss
        ``"cross_entropy"`` (logits over the last axis) or ``"mse"``.
    allow_unknown
        Treat ops without an autodiff rule as elementwise (saving their inputs)
        instead of failing; the graph's ``meta["unknown_ops"]`` lists them as
        ``"<node name>:<op type>"``.  No Python warning is emitted: callers
        report ``meta["unknown_ops"]`` themselves.
    output
        The graph output that feeds the loss, when the model has several.
    input_shapes, batch
        Static shapes for inputs with symbolic dimensions; ``batch`` fills a
        symbolic first dimension of every input.
    name
        Graph name; defaults to the model's graph name or file stem.
    trainable
        The names of the initializers that are trained weights; every other
        initializer is a constant (a buffer, a folded mask or rotary table).  Default:
        the model's metadata entry ``monet_ilp.trainable`` (a JSON list, written by
        :func:`monet_ilp.graph.torch_export.export_for_training`), else every float
        initializer with more than one element (pipeline step 3).
    dropout_mask
        What a training-mode Dropout saves for its backward: ``"bool"``, a one-byte mask
        (PyTorch's fused ``native_dropout``, on CUDA), or ``"noise"``, the scaled noise in
        the input's dtype (PyTorch's eager dropout on CPU multiplies the input by it and
        saves it).
    """
    source = str(model) if isinstance(model, (str, Path)) else None
    try:
        proto = _load(model, trainable)
        return _Importer(
            proto,
            optimizer=optimizer,
            granularity=granularity,
            dtype=_parse_dtype(dtype),
            loss=loss,
            allow_unknown=allow_unknown,
            output=output,
            input_shapes=input_shapes or {},
            batch=batch,
            name=name or (Path(source).stem if source else proto.graph.name or "model"),
            dropout_mask=dropout_mask,
        ).run()
    except MonetError as err:
        if source:
            err.with_file(source)
        raise


def _parse_dtype(dtype: str | None) -> DType | None:
    if dtype is None:
        return None
    try:
        dt = DType(dtype)
    except ValueError:
        dt = None
    if dt is None or dt in (DType.INT32, DType.INT64, DType.BOOL):
        raise MonetError(f"unsupported dtype {dtype!r}", field="dtype", fix="use fp32, bf16, fp16 or int8")
    return dt


def _load(model: onnx.ModelProto | str | Path, trainable: Iterable[str] | None = None) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return _with_trainable(model, trainable)
    path = Path(model)
    if not path.is_file():
        raise InputFormatError("file not found", file=str(path), fix="check the path")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001  (onnx raises DecodeError, ValueError, OSError, ...)
        raise InputFormatError(
            f"not a readable ONNX model ({type(err).__name__}: {err})",
            file=str(path),
            fix="re-export the model; the file may be truncated or not ONNX",
        ) from None
    if not proto.graph.node:
        raise InputFormatError(
            "the ONNX model has no nodes (empty or truncated file)",
            file=str(path),
            field="graph.node",
            fix="re-export the model",
        )
    proto = _with_trainable(proto, trainable)
    _load_constant_external_data(proto, path)
    return proto


#: The metadata entry naming the trained initializers (a JSON list of names).
TRAINABLE_KEY = "monet_ilp.trainable"


def _with_trainable(proto: onnx.ModelProto, trainable: Iterable[str] | None) -> onnx.ModelProto:
    """``proto`` with ``trainable`` recorded in its metadata (a copy when it changes), after
    checking the names, from the argument or from the metadata already there."""
    entries = {p.key: p.value for p in proto.metadata_props}
    if trainable is None and TRAINABLE_KEY not in entries:
        return proto
    where = "trainable" if trainable is not None else f"metadata_props.{TRAINABLE_KEY}"
    if trainable is None:
        try:
            names = json.loads(entries[TRAINABLE_KEY])
        except json.JSONDecodeError as err:
            raise InputFormatError(f"{TRAINABLE_KEY} is not JSON ({err})", field=where,
                                   fix="write a JSON list of initializer names") from None
    else:
        names = list(trainable)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputFormatError(f"{where} must be a list of initializer names", field=where,
                               fix="write a JSON list of initializer names")
    inits = {i.name: i for i in proto.graph.initializer}
    unknown = sorted(set(names) - set(inits))
    if unknown:
        raise InputFormatError(
            f"{len(unknown)} trainable name(s) are not initializers of the model: {', '.join(unknown[:5])}",
            field=where, fix="name initializers of the model (its trained weights)")
    integer = sorted(n for n in names if not _float_initializer(inits[n]))
    if integer:
        raise InputFormatError(f"trainable initializer(s) {', '.join(integer[:5])} are not floating point",
                               field=where, fix="only float initializers can be trained")
    if trainable is None:
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for entry in list(copy.metadata_props):
        if entry.key == TRAINABLE_KEY:
            copy.metadata_props.remove(entry)
    copy.metadata_props.add(key=TRAINABLE_KEY, value=json.dumps(sorted(set(names))))
    return copy


def _load_constant_external_data(proto: onnx.ModelProto, path: Path) -> None:
    """Read the external data of the initializers that are constants (shapes, scalars).

    Exporters put initializers in a data file next to the model (torch's dynamo
    exporter does for every one, ``location`` relative to the model's folder).  The
    trained weights need only their dims and type, so their data is never read; the
    constants' values are (a ``Reshape`` target, an ``Expand`` shape).
    """
    names = _trainable_names(proto)
    for init in proto.graph.initializer:
        if init.data_location != onnx.TensorProto.EXTERNAL or _is_trainable_initializer(init, names):
            continue
        info = {entry.key: entry.value for entry in init.external_data}
        where = path.parent / info.get("location", "")
        try:
            external_data_helper.load_external_data_for_tensor(init, str(path.parent))
        except Exception as err:  # noqa: BLE001  (onnx raises ValidationError, OSError, ...)
            raise InputFormatError(
                f"initializer {init.name!r} keeps its data in {str(where)!r}, which cannot be read "
                f"({type(err).__name__}: {err})",
                file=str(path),
                field=f"graph.initializer.{init.name}",
                fix="keep the external data file(s) the exporter wrote next to the model, under the same name",
            ) from None
        init.data_location = onnx.TensorProto.DEFAULT
        del init.external_data[:]


@dataclass
class _Node:
    """A view of an ONNX node (or a fused pattern standing in for several)."""

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]
    members: tuple[str, ...] = ()


class _Importer:
    def __init__(self, proto: onnx.ModelProto, *, optimizer: str, granularity: str, dtype: DType | None,
                 loss: str, allow_unknown: bool, output: str | None,
                 input_shapes: Mapping[str, Sequence[int]], batch: int | None, name: str,
                 dropout_mask: str = "bool") -> None:
        if dropout_mask not in DROPOUT_MASKS:
            raise MonetError(f"dropout_mask = {dropout_mask!r}", field="dropout_mask",
                             fix=f"use one of {', '.join(DROPOUT_MASKS)}")
        self.dropout_mask = dropout_mask
        self.proto = proto
        self.optimizer = optimizer
        self.granularity = granularity
        self.dtype = dtype
        self.loss = loss
        self.allow_unknown = allow_unknown
        self.output_name = output
        self.input_shapes = dict(input_shapes)
        self.batch = batch
        self.name = name
        self.unknown_ops: list[str] = []

    # ----------------------------------------------------------------- driver
    def run(self) -> TrainingGraph:
        self.initializers = {t.name: t for t in self.proto.graph.initializer}
        self.trainable = _trainable_names(self.proto)
        model = _fold_constants(self._with_static_inputs(_without_weight_data(self.proto)))
        model = _shape_unknown_ops_elementwise(model, SHAPE_PRESERVING)
        if self.allow_unknown:
            model = _shape_unknown_ops_elementwise(model)
        graph = model.graph
        self.infos = self._collect_value_infos(graph)
        nodes = [
            _Node(n.name or f"{n.op_type}_{i}", n.op_type, list(n.input), list(n.output),
                  {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute})
            for i, n in enumerate(graph.node)
        ]
        _check_unique_names(nodes)
        nodes = _topological_nodes(nodes)
        self.constants = self._constant_values(nodes)
        self.params = self._parameters(nodes)
        nodes = [n for n in nodes if not self._is_constant_node(n)]
        nodes = _fuse_patterns(nodes, self.constants)
        self.alias: dict[str, str] = {}
        self.used: set[str] = set()
        self.produced: set[str] = set()
        self.extra_infos: dict[str, TensorInfo] = {}
        fwd_nodes = []
        broadcast: set[str] = set()  # outputs of Expand nodes that grow their input
        for n in nodes:
            if n.op_type == "Dropout" and self._dropout_trains(n):
                fwd_nodes.append(self._lower(n, _rule_dropout))
                continue
            if n.op_type in ("Reshape", "Flatten") and n.inputs[0] in broadcast:
                # A reshape of a broadcast (grouped-query attention's repeat_kv): PyTorch
                # cannot view it, so it copies; the copy is a tensor of its own.
                fwd_nodes.append(self._lower(n, _rule_materialize))
                continue
            if n.op_type == "Expand" and self._broadcasts(n):
                broadcast.add(n.outputs[0])
            if n.op_type in VIEW_OPS or self._no_op_cast(n) or self._select(n):
                src = self._canonical(n.inputs[0])
                for out in n.outputs[:1] if n.op_type == "Dropout" else n.outputs:
                    if out:
                        self.alias[out] = src
                        if n.inputs[0] in broadcast:  # a view of a broadcast is one too
                            broadcast.add(out)
                continue
            fwd_nodes.append(self._lower(n))
        input_names = [i.name for i in graph.input if i.name not in self.initializers]
        self.used -= self.produced
        for t in sorted(self.used - set(input_names)):
            raise GraphError(
                f"tensor {t!r} is read but no node, input or initializer defines it",
                field=f"tensor {t}",
                fix="repair the model (is it truncated?)",
            )
        graph_inputs = [i for i in input_names if i in self.used]
        output = self._pick_output(graph)
        tensor_infos = {
            t: TensorInfo(self.shape_of(t), self.dtype_of(t), t in self.params) for t in self._all_tensors(fwd_nodes, graph_inputs)
        }
        for fwd in fwd_nodes:
            for extra in fwd.outputs[1:]:
                tensor_infos[extra] = self.extra_infos[extra]
        meta = {
            "source": "onnx",
            "opset": max((o.version for o in self.proto.opset_import if o.domain in ("", "ai.onnx")), default=0),
            "onnx_nodes": len(self.proto.graph.node),
        }
        if self.unknown_ops:
            meta["unknown_ops"] = self.unknown_ops
        inference = _inference_export(nodes, self.constants, self._dropout_trains)
        if inference:
            meta["inference_export"] = inference
        return derive_training_graph(
            self.name,
            fwd_nodes,
            tensor_infos,
            graph_inputs,
            output,
            granularity=self.granularity,
            optimizer=self.optimizer,
            loss=self.loss,
            meta=meta,
        )

    # ---------------------------------------------------------------- shapes
    def _with_static_inputs(self, proto: onnx.ModelProto) -> onnx.ModelProto:
        model = onnx.ModelProto()
        model.CopyFrom(proto)
        init_names = set(self.initializers)
        known = {i.name for i in model.graph.input}
        for name in self.input_shapes:
            if name not in known:
                raise MonetError(
                    f"input_shapes names {name!r}, which is not a model input",
                    field="input_shapes",
                    fix=f"use one of: {', '.join(sorted(known - init_names))}",
                )
        for inp in model.graph.input:
            if inp.name in init_names:
                continue
            dims = inp.type.tensor_type.shape.dim
            if inp.name in self.input_shapes:
                shape = list(self.input_shapes[inp.name])
                del dims[:]
                for d in shape:
                    dims.add().dim_value = int(d)
            elif self.batch is not None and dims and not dims[0].HasField("dim_value"):
                dims[0].Clear()
                dims[0].dim_value = int(self.batch)
            for k, d in enumerate(dims):
                if not d.HasField("dim_value") or d.dim_value <= 0:
                    symbol = d.dim_param or "?"
                    raise GraphError(
                        f"input {inp.name!r} has symbolic or zero dimension {k} ({symbol!r})",
                        field=f"graph.input.{inp.name}",
                        fix="pass static shapes (--batch N or --input-shape NAME=1x3x224x224)",
                    )
        return model

    def _collect_value_infos(self, graph: onnx.GraphProto) -> dict[str, tuple[tuple[int, ...] | None, int]]:
        infos: dict[str, tuple[tuple[int, ...] | None, int]] = {}
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            tt = vi.type.tensor_type
            shape = None
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                shape = tuple(d.dim_value for d in tt.shape.dim)
            infos[vi.name] = (shape, tt.elem_type)
        for t in self.initializers.values():
            infos[t.name] = (tuple(t.dims), t.data_type)
        return infos

    def shape_of(self, t: str) -> tuple[int, ...]:
        shape, _ = self.infos.get(t, (None, 0))
        if shape is None:
            raise GraphError(
                f"tensor {t!r} has no static shape after shape inference",
                field=f"tensor {t}",
                fix="export the model with static shapes, or pass --batch / --input-shape",
            )
        if any(d <= 0 for d in shape):
            raise GraphError(
                f"tensor {t!r} has shape {list(shape)} with a zero or negative dimension",
                field=f"tensor {t}",
                fix="every tensor needs positive dimensions; check the input shapes",
            )
        return shape

    def dtype_of(self, t: str) -> DType:
        _, elem = self.infos.get(t, (None, onnx.TensorProto.FLOAT))
        dt = _ONNX_DTYPES.get(elem)
        if dt is None:
            raise GraphError(
                f"tensor {t!r} has unsupported element type "
                f"{onnx.TensorProto.DataType.Name(elem) if elem else 'unknown'}",
                field=f"tensor {t}",
                fix="export the model in fp32, fp16, bf16 or int8",
            )
        if self.dtype is not None and dt.is_float:
            return self.dtype
        return dt

    # ------------------------------------------------------------- constants
    def _constant_values(self, nodes: list[_Node]) -> dict[str, np.ndarray | None]:
        """Names that are constants; the value when it is known, else None.

        Constants are Constant nodes, initializers that are not trained (integer
        or single-element), and anything computed only from constants or from the
        static shape of a tensor.  They are not tensors of the training graph.
        """
        values: dict[str, np.ndarray | None] = {}
        for name, init in self.initializers.items():
            if not _is_trainable_initializer(init, self.trainable):
                values[name] = numpy_helper.to_array(init)
        for n in nodes:
            if n.op_type == "Constant":
                values[n.outputs[0]] = _constant_attr_value(n)
            elif n.op_type == "CastLike" and n.inputs and n.inputs[0] in values:
                # A constant cast to a tensor's type (dynamo writes scalars so) stays a constant.
                values[n.outputs[0]] = values[n.inputs[0]]
            elif n.op_type in SHAPE_OPS or (
                n.inputs and all(i == "" or i in values for i in n.inputs)
            ) or n.op_type in ("ConstantOfShape", "Range") and all(i in values for i in n.inputs if i):
                for out in n.outputs:
                    values[out] = None
        return values

    def _is_constant_node(self, n: _Node) -> bool:
        return bool(n.outputs) and all(o in self.constants for o in n.outputs if o)

    def _parameters(self, nodes: list[_Node]) -> set[str]:
        buffers = set()
        for n in nodes:
            for slot in _BUFFER_SLOTS.get(n.op_type, ()):
                if slot < len(n.inputs):
                    buffers.add(n.inputs[slot])
        return {
            name
            for name, init in self.initializers.items()
            if name not in self.constants and name not in buffers
        }

    def _canonical(self, t: str) -> str:
        while t in self.alias:
            t = self.alias[t]
        return t

    def _all_tensors(self, fwd_nodes: list[FwdNode], graph_inputs: list[str]) -> list[str]:
        names = list(graph_inputs)
        for n in fwd_nodes:
            names.extend(n.inputs)
            names.append(n.outputs[0])
        return list(dict.fromkeys(names))

    def _pick_output(self, graph: onnx.GraphProto) -> str:
        outputs = [o.name for o in graph.output]
        if self.output_name is not None:
            if self.output_name not in outputs:
                raise MonetError(
                    f"output {self.output_name!r} is not a model output",
                    field="output",
                    fix=f"use one of: {', '.join(outputs)}",
                )
            outputs = [self.output_name]
        if len(outputs) != 1:
            raise GraphError(
                f"the model has {len(outputs)} outputs ({', '.join(outputs)}); the loss needs one",
                field="graph.output",
                fix="choose the logits with --output NAME",
            )
        out = self._canonical(outputs[0])
        if out in self.constants or out in self.params or out not in self.produced:
            raise GraphError(
                f"model output {outputs[0]!r} is not computed from the inputs",
                field="graph.output",
                fix="export a model whose output depends on its inputs",
            )
        return out

    # ---------------------------------------------------------------- lowering
    def _broadcasts(self, n: _Node) -> bool:
        """An Expand whose output has more elements than its input."""
        source, _ = self.infos.get(n.inputs[0], (None, 0))
        target, _ = self.infos.get(n.outputs[0], (None, 0))
        return source is not None and target is not None and math.prod(target) > math.prod(source)

    def _select(self, n: _Node) -> bool:
        """A Gather of an activation at one constant scalar index (``x[:, 0]``, a ViT's
        class token): PyTorch's ``select``, a view that keeps its whole base alive."""
        if n.op_type != "Gather" or len(n.inputs) < 2 or n.inputs[0] in self.params:
            return False
        index = self.constants.get(n.inputs[1])
        return index is not None and np.ndim(index) == 0 and n.inputs[0] not in self.constants

    def _no_op_cast(self, n: _Node) -> bool:
        """A Cast (or CastLike) to the type its input has already: PyTorch's ``.to(dtype)``
        returns the same tensor, so it is a view, not a copy."""
        if n.op_type not in ("Cast", "CastLike") or not n.inputs or not n.outputs[0]:
            return False
        _, source = self.infos.get(n.inputs[0], (None, 0))
        _, target = self.infos.get(n.outputs[0], (None, 0))
        return bool(source) and source == target

    def _dropout_trains(self, n: _Node) -> bool:
        """Whether a Dropout node drops anything: ``training_mode`` true (an input whose
        value is not known counts as true) and a ratio above 0 (default 0.5); before opset
        12 the ratio is an attribute and the node trains unless ``is_test``."""
        if "is_test" in n.attrs or ("ratio" in n.attrs and len(n.inputs) < 2):
            return not n.attrs.get("is_test", 0) and float(n.attrs.get("ratio", 0.5)) > 0
        if len(n.inputs) < 3 or not n.inputs[2]:
            return False
        training = self.constants.get(n.inputs[2])
        if training is not None and not bool(np.asarray(training).item()):
            return False
        ratio = self.constants.get(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else None
        return ratio is None or float(np.asarray(ratio).item()) > 0

    def _lower(self, n: _Node, rule: Callable[[_RuleContext], FwdNode] | None = None) -> FwdNode:
        inputs = [self._canonical(i) if i else "" for i in n.inputs]
        rule = rule or OP_RULES.get(n.op_type)
        if rule is None:
            if not self.allow_unknown:
                raise UnsupportedOpError(
                    f"op type {n.op_type!r} (node {n.name!r}) has no autodiff rule",
                    field=f"node {n.name}",
                    fix="pass --allow-unknown to treat it as elementwise, or replace the op",
                )
            # Recorded in meta, not warned: the caller opted in, and the CLI prints
            # its own note per entry (a Python warning would add a source path).
            self.unknown_ops.append(f"{n.name}:{n.op_type}")
            rule = _elementwise_unknown
        ctx = _RuleContext(self, n, inputs)
        fwd = rule(ctx)
        fwd.name = n.name
        fwd.members = n.members or (n.name,)
        fwd.op_type = "Elementwise" if rule is _elementwise_unknown else n.op_type
        self.used.update(t for t in fwd.inputs if t not in self.params)
        for t in fwd.outputs:
            if t in self.produced:
                raise GraphError(f"tensor {t!r} is produced twice", field=f"node {n.name}",
                                 fix="give every node output a unique name")
            self.produced.add(t)
        return fwd


class _RuleContext:
    """What a lowering rule may ask about its node."""

    def __init__(self, importer: _Importer, node: _Node, inputs: list[str]):
        self.importer = importer
        self.node = node
        self.all_inputs = inputs

    def attr(self, key: str, default: Any = None) -> Any:
        return self.node.attrs.get(key, default)

    def is_tensor(self, t: str) -> bool:
        return bool(t) and t not in self.importer.constants

    def is_weight(self, t: str) -> bool:
        return t in self.importer.params

    @property
    def tensors(self) -> list[str]:
        """The node's inputs that are tensors of the training graph (not constants)."""
        return [t for t in self.all_inputs if self.is_tensor(t)]

    def input(self, k: int) -> str | None:
        if k < len(self.all_inputs) and self.is_tensor(self.all_inputs[k]):
            return self.all_inputs[k]
        return None

    def require(self, k: int, what: str) -> str:
        t = self.input(k)
        if t is None:
            raise GraphError(
                f"{self.node.op_type} node {self.node.name!r} is missing its {what} (input {k})",
                field=f"node {self.node.name}.input[{k}]",
                fix=f"give the node its {what}",
            )
        return t

    def shape(self, t: str) -> tuple[int, ...]:
        return self.importer.shape_of(t)

    def in_shape(self, k: int) -> tuple[int, ...]:
        """Shape of input ``k`` as this node sees it (a view may differ from the tensor it aliases)."""
        return self.importer.shape_of(self.node.inputs[k])

    @property
    def out(self) -> str:
        out = self.node.outputs[0]
        if not out:
            raise GraphError(f"node {self.node.name!r} has no output", field=f"node {self.node.name}",
                             fix="give the node an output")
        return out

    def out_numel(self) -> int:
        return math.prod(self.shape(self.out))

    def extra(self, suffix: str, shape: tuple[int, ...], dtype: DType) -> str:
        tid = f"{self.node.name}.{suffix}"
        self.importer.extra_infos[tid] = TensorInfo(shape, dtype)
        return tid

    def float_dtype(self) -> DType:
        return self.importer.dtype_of(self.out)


# ------------------------------------------------------------------- op rules
# Each rule returns a FwdNode whose ``needs`` follow what PyTorch autograd saves
# (formulations/training_graph.md, table TG.T1).  FLOPs outside the MAC array are
# per-element estimates; MACs are exact.

def _rule_conv(c: _RuleContext) -> FwdNode:
    x, w, b = c.require(0, "input"), c.require(1, "weight"), c.input(2)
    xs, ws, ys = c.in_shape(0), c.in_shape(1), c.shape(c.out)
    group = int(c.attr("group", 1))
    kernel = ws[2:]
    macs = math.prod(ys) * ws[1] * math.prod(kernel)
    spatial_out = ys[2:]
    spatial_in = xs[2:]
    strides = list(c.attr("strides", [1] * len(kernel)))
    dims = {"B": ys[0], "K": ws[0], "C": ws[1], "G": group}
    names_out = ("OY", "OX") if len(spatial_out) == 2 else tuple(f"O{i}" for i in range(len(spatial_out)))
    for key, size in zip(names_out[-len(spatial_out):], spatial_out, strict=True):
        dims[key] = size
    for key, size in zip(_axis_names("FY", "FX", "F", len(kernel)), kernel, strict=True):
        dims[key] = size
    for key, size in zip(_axis_names("IY", "IX", "I", len(spatial_in)), spatial_in, strict=True):
        dims[key] = size
    for key, size in zip(_axis_names("SY", "SX", "S", len(strides)), strides, strict=True):
        dims[key] = int(size)
    inputs = [x, w] + ([b] if b else [])
    needs = {x: {w}, w: {x}}
    grad_macs = {x: macs, w: macs}
    grad_flops = {}
    if b:
        needs[b] = set()
        grad_flops[b] = math.prod(ys)
    return FwdNode(c.node.name, "Conv", inputs, [c.out], macs=macs, flops=2 * macs + (math.prod(ys) if b else 0),
                   dims=dims, needs=needs, grad_macs=grad_macs, grad_flops=grad_flops)


def _rule_conv_transpose(c: _RuleContext) -> FwdNode:
    """ConvTranspose: every input element meets ``C_out/G · kernel`` weights; the gradients
    read what a convolution's do (dX the weight, dW the input)."""
    x, w, b = c.require(0, "input"), c.require(1, "weight"), c.input(2)
    ws, ys = c.in_shape(1), c.shape(c.out)
    macs = math.prod(c.in_shape(0)) * ws[1] * math.prod(ws[2:])
    inputs = [x, w] + ([b] if b else [])
    needs: dict[str, set[str]] = {x: {w}, w: {x}}
    grad_flops = {}
    if b:
        needs[b] = set()
        grad_flops[b] = math.prod(ys)
    return FwdNode(c.node.name, "ConvTranspose", inputs, [c.out], macs=macs,
                   flops=2 * macs + (math.prod(ys) if b else 0),
                   dims={"B": ys[0], "K": ys[1], "C": ws[0], "G": int(c.attr("group", 1))},
                   needs=needs, grad_macs={x: macs, w: macs}, grad_flops=grad_flops)


def _rule_einsum(c: _RuleContext) -> FwdNode:
    """Einsum: ``numel(Y)`` times the sizes of the summed letters MACs; each operand's
    gradient is an einsum of the output gradient with the other operands, so it reads them."""
    equation = c.attr("equation", b"")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    lhs, _, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    sizes: dict[str, int] = {}
    for k, term in enumerate(terms):
        shape = c.in_shape(k)
        head, _, tail = term.partition("...") if "..." in term else (term, "", "")
        for letter, size in zip(head, shape, strict=False):
            sizes[letter] = int(size)
        for letter, size in zip(tail, shape[len(shape) - len(tail):] if tail else (), strict=False):
            sizes[letter] = int(size)
    summed = set(lhs.replace(",", "").replace(".", "")) - set(rhs.replace(".", ""))
    macs = c.out_numel() * math.prod(sizes.get(letter, 1) for letter in summed)
    tensors = [t for t in c.all_inputs if c.is_tensor(t)]
    needs: dict[str, set[str]] = {t: set() for t in tensors}
    for k, t in enumerate(tensors):  # an operand given twice (a square) reads itself
        needs[t].update(tensors[:k] + tensors[k + 1:])
    return FwdNode(c.node.name, "Einsum", list(dict.fromkeys(tensors)), [c.out], macs=macs, flops=2 * macs,
                   dims={"N": c.out_numel()}, needs=needs,
                   grad_macs={t: macs for t in needs} if len(tensors) > 1 else {},
                   grad_flops={t: c.out_numel() for t in needs} if len(tensors) == 1 else {})


def _rule_lrn(c: _RuleContext) -> FwdNode:
    """LRN as PyTorch's composite ``local_response_norm`` saves it: the input, the pooled
    squares raised to beta (``base``) and the denominator, each the input's size."""
    x = c.require(0, "input")
    xs = c.in_shape(0)
    numel = math.prod(xs)
    size = int(c.attr("size", 5))
    base = c.extra("base", xs, c.float_dtype())
    denom = c.extra("denominator", xs, c.float_dtype())
    return FwdNode(c.node.name, "LRN", [x], [c.out, base, denom], flops=(size + 4) * numel, dims={"N": numel},
                   needs={x: {x, base, denom}}, grad_flops={x: (size + 6) * numel})


def _axis_names(y: str, x: str, prefix: str, n: int) -> tuple[str, ...]:
    """Names of ``n`` spatial axes: the last ``n`` of ``(y, x)``, or ``prefix0, prefix1, ...``."""
    return (y, x)[2 - n:] if n <= 2 else tuple(f"{prefix}{i}" for i in range(n))


def _matmul_node(c: _RuleContext, a: str, b: str, k: int, bias: str | None) -> FwdNode:
    ys = c.shape(c.out)
    numel = math.prod(ys)
    macs = numel * k
    m = ys[-2] if len(ys) >= 2 else 1
    n = ys[-1] if ys else 1
    dims = {"B": numel // max(1, m * n), "M": m, "N": n, "K": k}
    inputs = [a, b] + ([bias] if bias else [])
    needs = {a: {b}, b: {a}}
    # Both operands may be views of one tensor (q and k of a fused qkv): two gradients.
    grad_macs = {a: 2 * macs} if a == b else {a: macs, b: macs}
    grad_flops = {}
    if bias:
        needs[bias] = set()
        grad_flops[bias] = numel
    return FwdNode(c.node.name, c.node.op_type, list(dict.fromkeys(inputs)), [c.out], macs=macs,
                   flops=2 * macs + (numel if bias else 0), dims=dims, needs=needs,
                   grad_macs=grad_macs, grad_flops=grad_flops)


def _rule_gemm(c: _RuleContext) -> FwdNode:
    a, b, bias = c.require(0, "input A"), c.require(1, "input B"), c.input(2)
    sa = c.in_shape(0)
    k = sa[0] if c.attr("transA", 0) else sa[1]
    return _matmul_node(c, a, b, k, bias)


def _rule_matmul(c: _RuleContext) -> FwdNode:
    a, b = c.all_inputs[0], c.all_inputs[1]
    if not (c.is_tensor(a) and c.is_tensor(b)):
        # A product with a constant: its gradient needs only that constant.
        t = a if c.is_tensor(a) else b
        k = c.in_shape(0)[-1]
        numel = c.out_numel()
        return FwdNode(c.node.name, "MatMul", [t], [c.out], macs=numel * k, flops=2 * numel * k,
                       dims={"N": numel, "K": k}, needs={t: set()}, grad_macs={t: numel * k})
    return _matmul_node(c, a, b, c.in_shape(0)[-1], None)


def _unary(save: str, flops_per_elem: int, grad_flops_per_elem: int) -> Callable[[_RuleContext], FwdNode]:
    """A one-input elementwise op saving its input ("in"), its output ("out") or nothing."""

    def rule(c: _RuleContext) -> FwdNode:
        x = c.require(0, "input")
        numel = c.out_numel()
        saved = {"in": {x}, "out": {c.out}, "none": set()}[save]
        return FwdNode(c.node.name, c.node.op_type, [x], [c.out], flops=flops_per_elem * numel,
                       dims={"N": numel}, needs={x: saved}, grad_flops={x: grad_flops_per_elem * numel})

    return rule


def _rule_binary(c: _RuleContext) -> FwdNode:
    """Add, Sub, Mul, Div: a product or quotient saves the operands its gradients read."""
    a, b = c.all_inputs[0], c.all_inputs[1]
    numel = c.out_numel()
    tensors = [t for t in (a, b) if c.is_tensor(t)]
    if not tensors:
        raise GraphError(f"node {c.node.name!r} has only constant inputs", field=f"node {c.node.name}",
                         fix="fold the constant expression")
    needs: dict[str, set[str]] = {}
    op = c.node.op_type
    for t in tensors:
        other = b if t == a else a
        if op in ("Add", "Sub"):
            needs[t] = set()
        elif op == "Mul":
            needs[t] = {other} if c.is_tensor(other) else set()
        elif t == a:  # d(a/b)/da = 1/b
            needs[t] = {b} if c.is_tensor(b) else set()
        else:  # d(a/b)/db = -a/b^2
            needs[t] = {x for x in (a, b) if c.is_tensor(x)}
    grad = {t: numel * (1 if op in ("Add", "Sub") else 2) for t in tensors}
    return FwdNode(c.node.name, op, list(dict.fromkeys(tensors)), [c.out], flops=numel, dims={"N": numel},
                   needs=needs, grad_flops=grad)


def _rule_norm(c: _RuleContext) -> FwdNode:
    """Batch, Layer, Instance and Group normalisation (training mode): save the input and
    the statistics (two per normalised group)."""
    x = c.require(0, "input")
    scale, bias = c.input(1), c.input(2)
    xs = c.in_shape(0)
    numel = math.prod(xs)
    if c.node.op_type == "BatchNormalization":
        groups = xs[1] if len(xs) > 1 else 1
        stats = c.extra("stats", (2, groups), DType.FP32)  # save_mean, save_invstd
    elif c.node.op_type == "InstanceNormalization":
        groups = xs[0] * (xs[1] if len(xs) > 1 else 1)
        stats = c.extra("stats", (2, groups), DType.FP32)  # mean, invstd per sample and channel
    elif c.node.op_type == "GroupNormalization":
        groups = xs[0] * int(c.attr("num_groups", 1))
        stats = c.extra("stats", (2, groups), DType.FP32)  # mean, rstd per sample and group
    else:
        axis = int(c.attr("axis", -1)) % len(xs)
        groups = math.prod(xs[:axis]) if axis else 1
        stats = c.extra("stats", (2, groups), DType.FP32)  # mean, rstd
    needs: dict[str, set[str]] = {x: {x, stats} | ({scale} if scale else set())}
    grad_flops = {x: 8 * numel}
    inputs = [x]
    for p in (scale, bias):
        if p:
            inputs.append(p)
            needs[p] = {x, stats} if p == scale else set()
            grad_flops[p] = 2 * numel
    return FwdNode(c.node.name, c.node.op_type, inputs, [c.out, stats], flops=5 * numel,
                   dims={"N": numel, "C": groups}, needs=needs, grad_flops=grad_flops)


def _rule_maxpool(c: _RuleContext) -> FwdNode:
    x = c.require(0, "input")
    ys = c.shape(c.out)
    window = math.prod(c.attr("kernel_shape", [1]))
    indices = c.extra("indices", ys, DType.INT64)
    numel = math.prod(ys)
    return FwdNode(c.node.name, "MaxPool", [x], [c.out, indices], flops=window * numel,
                   dims={"N": numel, "W": window}, needs={x: {x, indices}}, grad_flops={x: numel})


def _rule_avgpool(c: _RuleContext) -> FwdNode:
    x = c.require(0, "input")
    numel_in = math.prod(c.in_shape(0))
    return FwdNode(c.node.name, c.node.op_type, [x], [c.out], flops=numel_in, dims={"N": numel_in},
                   needs={x: {x}}, grad_flops={x: numel_in})


def _rule_reduce(c: _RuleContext) -> FwdNode:
    x = c.require(0, "input")
    numel_in = math.prod(c.in_shape(0))
    return FwdNode(c.node.name, c.node.op_type, [x], [c.out], flops=numel_in, dims={"N": numel_in},
                   needs={x: set()}, grad_flops={x: numel_in})


def _rule_concat(c: _RuleContext) -> FwdNode:
    tensors = list(dict.fromkeys(c.tensors))
    numel = c.out_numel()
    return FwdNode(c.node.name, "Concat", tensors, [c.out], dims={"N": numel},
                   needs={t: set() for t in tensors}, grad_flops={t: 0 for t in tensors})


def _rule_gather(c: _RuleContext) -> FwdNode:
    data, indices = c.all_inputs[0], c.input(1)
    if not c.is_tensor(data):
        raise GraphError(f"Gather node {c.node.name!r} gathers from a constant", field=f"node {c.node.name}",
                         fix="fold the constant expression")
    numel = c.out_numel()
    inputs = [data] + ([indices] if indices else [])
    # The embedding backward scatters the output gradient back by index: it reads the indices.
    needs = {data: {indices} if indices else set()}
    return FwdNode(c.node.name, "Gather", inputs, [c.out], dims={"N": numel}, needs=needs,
                   grad_flops={data: numel})


def _rule_dropout(c: _RuleContext) -> FwdNode:
    """Dropout in training mode: a new output and its mask, which is all the backward reads:
    one byte per element (PyTorch's fused ``native_dropout`` saves a boolean mask) or, with
    ``dropout_mask="noise"``, the input's dtype (its eager CPU dropout saves the scaled noise
    it multiplies by)."""
    x = c.require(0, "input")
    numel = c.out_numel()
    mask = c.extra("mask", c.shape(c.out), DType.BOOL if c.importer.dropout_mask == "bool" else c.float_dtype())
    return FwdNode(c.node.name, "Dropout", [x], [c.out, mask], flops=2 * numel, dims={"N": numel},
                   needs={x: {mask}}, grad_flops={x: numel})


def _rule_no_grad(c: _RuleContext) -> FwdNode:
    """Comparisons and logic (Equal, Less, Greater, Not, And, Or, ...): a boolean result,
    through which no gradient flows; they save nothing."""
    tensors = list(dict.fromkeys(c.tensors))
    if not tensors:
        raise GraphError(f"node {c.node.name!r} has only constant inputs", field=f"node {c.node.name}",
                         fix="fold the constant expression")
    numel = c.out_numel()
    return FwdNode(c.node.name, c.node.op_type, tensors, [c.out], flops=numel, dims={"N": numel})


def _rule_where(c: _RuleContext) -> FwdNode:
    """Where(cond, a, b): each branch's gradient is the output gradient masked by cond."""
    cond, a, b = c.input(0), c.input(1), c.input(2)
    branches = [t for t in dict.fromkeys((a, b)) if t]
    if not branches:
        return _rule_no_grad(c)
    numel = c.out_numel()
    saved = {cond} if cond else set()
    inputs = list(dict.fromkeys([*branches, *([cond] if cond else [])]))
    return FwdNode(c.node.name, "Where", inputs, [c.out], flops=numel, dims={"N": numel},
                   needs={t: set(saved) for t in branches}, grad_flops={t: numel for t in branches})


def _rule_minmax(c: _RuleContext) -> FwdNode:
    """Max / Min of tensors: the gradient goes where each input won, so every input is
    saved (torch's maximum/minimum save self and other)."""
    tensors = list(dict.fromkeys(c.tensors))
    numel = c.out_numel()
    return FwdNode(c.node.name, c.node.op_type, tensors, [c.out], flops=numel * max(1, len(c.all_inputs) - 1),
                   dims={"N": numel}, needs={t: set(tensors) for t in tensors},
                   grad_flops={t: numel for t in tensors})


def _rule_reduce_max(c: _RuleContext) -> FwdNode:
    """ReduceMax / ReduceMin (amax/amin): the gradient reads the input and the result."""
    x = c.require(0, "input")
    numel_in = math.prod(c.in_shape(0))
    return FwdNode(c.node.name, c.node.op_type, [x], [c.out], flops=numel_in, dims={"N": numel_in},
                   needs={x: {x, c.out}}, grad_flops={x: numel_in})


def _rule_index_read(c: _RuleContext) -> FwdNode:
    """GatherElements(data, indices): the gradient scatters by index, reading the indices."""
    data, indices = c.require(0, "data"), c.input(1)
    numel = c.out_numel()
    inputs = [data] + ([indices] if indices else [])
    return FwdNode(c.node.name, c.node.op_type, inputs, [c.out], dims={"N": numel},
                   needs={data: {indices} if indices else set()}, grad_flops={data: numel})


def _rule_scatter(c: _RuleContext) -> FwdNode:
    """ScatterND / ScatterElements(data, indices, updates): data's gradient is the output
    gradient with the scattered places zeroed, the updates' is gathered there: both read
    the indices only."""
    data, indices, updates = c.input(0), c.input(1), c.input(2)
    numel = c.out_numel()
    diff = [t for t in dict.fromkeys((data, updates)) if t]
    inputs = list(dict.fromkeys([*diff, *([indices] if indices else [])]))
    saved = {indices} if indices else set()
    return FwdNode(c.node.name, c.node.op_type, inputs, [c.out], dims={"N": numel},
                   needs={t: set(saved) for t in diff}, grad_flops={t: numel for t in diff})


def _rule_reshape_data(c: _RuleContext) -> FwdNode:
    """Pad, Resize, Trilu, Tile and the like: the gradient depends on shapes only
    (slice, sum-pool, mask), never on the values: nothing saved."""
    x = c.require(0, "input")
    numel = max(c.out_numel(), math.prod(c.in_shape(0)))
    return FwdNode(c.node.name, c.node.op_type, [x], [c.out], flops=numel, dims={"N": numel},
                   needs={x: set()}, grad_flops={x: numel})


def _rule_attention(c: _RuleContext) -> FwdNode:
    """A fused scaled-dot-product attention (``_match_sdpa``): q ``(…, N, d)``, kᵀ
    ``(…, d, M)``, v ``(…, M, e)``.  Forward ``QKᵀ`` and ``PV``; the backward recomputes
    the scores and takes dP, dV, dQ and dK (torch's ``sdpa_backward_flop_count``), and
    every gradient reads q, k, v, the output and the log-sum-exp of each row."""
    q, kt, v = c.require(0, "query"), c.require(1, "key"), c.require(2, "value")
    qs, ks, vs = c.in_shape(0), c.in_shape(1), c.in_shape(2)
    rows = math.prod(qs[:-1])
    scores_macs = rows * ks[-1] * qs[-1]
    context_macs = rows * vs[-2] * vs[-1]
    lse = c.extra("logsumexp", tuple(qs[:-1]), DType.FP32)
    saved = {q, kt, v, c.out, lse}
    return FwdNode(c.node.name, "Attention", list(dict.fromkeys([q, kt, v])), [c.out, lse],
                   macs=scores_macs + context_macs, flops=2 * (scores_macs + context_macs) + 5 * rows * ks[-1],
                   dims={"N": rows, "M": ks[-1], "D": qs[-1]},
                   needs={q: set(saved), kt: set(saved), v: set(saved)},
                   grad_macs={q: 2 * scores_macs, kt: scores_macs, v: 2 * context_macs}
                   if len({q, kt, v}) == 3 else {q: 3 * scores_macs + 2 * context_macs})


def _rule_materialize(c: _RuleContext) -> FwdNode:
    """The copy a reshape of a broadcast makes: the gradient sums over the broadcast
    axes and saves nothing."""
    x = c.require(0, "input")
    numel = c.out_numel()
    return FwdNode(c.node.name, "Expand", [x], [c.out], flops=numel, dims={"N": numel},
                   needs={x: set()}, grad_flops={x: numel})


def _rule_clip(c: _RuleContext) -> FwdNode:
    return _unary("in", 2, 1)(c)


def _elementwise_unknown(c: _RuleContext) -> FwdNode:
    tensors = list(dict.fromkeys(c.tensors))
    if not tensors:
        raise GraphError(f"node {c.node.name!r} has no tensor inputs", field=f"node {c.node.name}",
                         fix="fold the constant expression")
    if c.importer.infos.get(c.out, (None, 0))[0] is None:
        # Shape inference knows nothing of the op: elementwise means shaped like its first input.
        first = next(k for k, t in enumerate(c.node.inputs) if c.is_tensor(c.all_inputs[k]))
        c.importer.infos[c.out] = (c.in_shape(first), c.importer.infos[c.node.inputs[first]][1])
    numel = c.out_numel()
    return FwdNode(c.node.name, "Elementwise", tensors, [c.out], flops=numel, dims={"N": numel},
                   needs={t: {t} for t in tensors}, grad_flops={t: numel for t in tensors})


OP_RULES: dict[str, Callable[[_RuleContext], FwdNode]] = {
    "Conv": _rule_conv,
    "Gemm": _rule_gemm,
    "MatMul": _rule_matmul,
    "Relu": _unary("out", 1, 1),
    "LeakyRelu": _unary("in", 2, 2),
    "Clip": _rule_clip,
    "Sigmoid": _unary("out", 4, 2),
    "Tanh": _unary("out", 4, 2),
    "Gelu": _unary("in", 8, 10),
    "Erf": _unary("in", 6, 6),
    "Exp": _unary("out", 4, 1),
    "Sqrt": _unary("out", 4, 2),
    "Rsqrt": _unary("out", 4, 3),  # a fused Sqrt -> Reciprocal
    "Attention": _rule_attention,  # a fused scaled_dot_product_attention
    "Silu": _unary("in", 5, 6),  # a fused x * Sigmoid(x)
    "Pow": _unary("in", 2, 3),
    "Neg": _unary("none", 1, 1),
    "Reciprocal": _unary("out", 1, 2),
    "Cast": _unary("none", 1, 1),
    "CastLike": _unary("none", 1, 1),  # the type of its second input; the gradient casts back
    "Softmax": _unary("out", 5, 4),
    "Add": _rule_binary,
    "Sub": _rule_binary,
    "Mul": _rule_binary,
    "Div": _rule_binary,
    "BatchNormalization": _rule_norm,
    "InstanceNormalization": _rule_norm,
    "GroupNormalization": _rule_norm,
    "ConvTranspose": _rule_conv_transpose,
    "Einsum": _rule_einsum,
    "LRN": _rule_lrn,
    "LayerNormalization": _rule_norm,
    "MaxPool": _rule_maxpool,
    "AveragePool": _rule_avgpool,
    "GlobalAveragePool": _rule_avgpool,
    "ReduceMean": _rule_reduce,
    "ReduceSum": _rule_reduce,
    "Concat": _rule_concat,
    "Gather": _rule_gather,
    "Where": _rule_where,
    "Equal": _rule_no_grad,
    "Less": _rule_no_grad,
    "LessOrEqual": _rule_no_grad,
    "Greater": _rule_no_grad,
    "GreaterOrEqual": _rule_no_grad,
    "Not": _rule_no_grad,
    "And": _rule_no_grad,
    "Or": _rule_no_grad,
    "IsNaN": _rule_no_grad,
    "Max": _rule_minmax,
    "Min": _rule_minmax,
    "ReduceMax": _rule_reduce_max,
    "ReduceMin": _rule_reduce_max,
    "GatherElements": _rule_index_read,
    "ScatterND": _rule_scatter,
    "ScatterElements": _rule_scatter,
    "Pad": _rule_reshape_data,
    "Resize": _rule_reshape_data,
    "Trilu": _rule_reshape_data,
    "Tile": _rule_reshape_data,
    "HardSwish": _unary("in", 4, 3),
    "HardSigmoid": _unary("in", 3, 2),
    "Softplus": _unary("in", 4, 4),
    "Mish": _unary("in", 8, 10),
    "Abs": _unary("in", 1, 1),
    "Log": _unary("in", 4, 1),
}

#: Every ONNX op type the importer understands (rules, views, constants, shape ops).
SUPPORTED_OPS = frozenset(OP_RULES) | VIEW_OPS | SHAPE_OPS | {"Constant", "ConstantOfShape", "Range"}


# ------------------------------------------------------------------ patterns
#: The nodes that read each tensor, the node that writes it, and the constants' values.
_Readers = Mapping[str, list[_Node]]
_Producers = Mapping[str, _Node]
_Constants = Mapping[str, np.ndarray | None]


def _fuse_patterns(nodes: list[_Node], constants: _Constants) -> list[_Node]:
    """Replace the Erf-GELU, LayerNorm, SiLU and rsqrt decompositions by single nodes."""
    for matcher in (_match_gelu, _match_layernorm, _match_silu, _match_rsqrt, _match_sdpa):
        while True:
            producer = {o: n for n in nodes for o in n.outputs}
            readers: dict[str, list[_Node]] = {}
            for n in nodes:
                for i in n.inputs:
                    readers.setdefault(i, []).append(n)
            for n in nodes:
                found = matcher(n, producer, readers, constants)
                if found is not None:
                    fused, members = found
                    ids = {id(m) for m in members}
                    last = max(k for k, m in enumerate(nodes) if id(m) in ids)
                    kept = [m for m in nodes[: last + 1] if id(m) not in ids]
                    # The fused node takes the place of its last member, after all its inputs.
                    nodes = kept + [fused] + nodes[last + 1 :]
                    break
            else:
                break
    return nodes


def _sole_reader(t: str, readers: _Readers, op_type: str | tuple[str, ...]) -> _Node | None:
    rs = readers.get(t, [])
    types = (op_type,) if isinstance(op_type, str) else op_type
    return rs[0] if len(rs) == 1 and rs[0].op_type in types else None


def _const_value(t: str, constants: _Constants) -> float | None:
    value = constants.get(t)
    if value is None or np.size(value) != 1:
        return None
    return float(np.asarray(value).reshape(()))


def _other(n: _Node, t: str) -> str:
    return n.inputs[1] if n.inputs[0] == t else n.inputs[0]


def _match_gelu(erf: _Node, producer: _Producers, readers: _Readers, constants: _Constants
                ) -> tuple[_Node, list[_Node]] | None:
    """x -> Div(sqrt 2) | Mul(1/sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5), the two
    products in any order: ``·x`` then ``·0.5``, ``(x·0.5)·``, or ``·0.5`` then ``·x``."""
    if erf.op_type != "Erf":
        return None
    scale = producer.get(erf.inputs[0])
    if scale is None or scale.op_type not in ("Div", "Mul") or len(readers.get(scale.outputs[0], [])) != 1:
        return None
    x = next((i for i in scale.inputs if i not in constants), None)
    k = next((i for i in scale.inputs if i in constants), None)
    if x is None or k is None:
        return None
    kv = _const_value(k, constants)
    if kv is None or not math.isclose(kv if scale.op_type == "Div" else 1 / kv, math.sqrt(2), rel_tol=1e-3):
        return None
    add = _sole_reader(erf.outputs[0], readers, "Add")
    if add is None or _const_value(_other(add, erf.outputs[0]), constants) != 1.0:
        return None
    m1 = _sole_reader(add.outputs[0], readers, "Mul")
    if m1 is None:
        return None
    partner = _other(m1, add.outputs[0])
    if partner == x:
        m2 = _sole_reader(m1.outputs[0], readers, "Mul")
        if m2 is None or _const_value(_other(m2, m1.outputs[0]), constants) != 0.5:
            return None
        members, out = [scale, erf, add, m1, m2], m2.outputs[0]
    elif partner in constants:  # torch's dynamo export: 0.5 * (1 + erf), then times x
        m2 = _sole_reader(m1.outputs[0], readers, "Mul")
        if (_const_value(partner, constants) != 0.5 or m2 is None
                or _other(m2, m1.outputs[0]) != x):
            return None
        members, out = [scale, erf, add, m1, m2], m2.outputs[0]
    else:
        half = producer.get(partner)
        if (half is None or half.op_type != "Mul" or x not in half.inputs
                or _const_value(_other(half, x), constants) != 0.5
                or len(readers.get(half.outputs[0], [])) != 1):
            return None
        members, out = [half, scale, erf, add, m1], m1.outputs[0]
    name = _pattern_name(members, "gelu")
    return _Node(name, "Gelu", [x], [out], {}, tuple(m.name for m in members)), members


def _match_silu(sig: _Node, producer: _Producers, readers: _Readers, constants: _Constants
                ) -> tuple[_Node, list[_Node]] | None:
    """x -> Sigmoid -> Mul(x): SiLU, which saves only x (PyTorch's SiluBackward)."""
    if sig.op_type != "Sigmoid" or not sig.inputs or sig.inputs[0] in constants:
        return None
    x = sig.inputs[0]
    mul = _sole_reader(sig.outputs[0], readers, "Mul")
    if mul is None or _other(mul, sig.outputs[0]) != x:
        return None
    members = [sig, mul]
    return _Node(_pattern_name(members, "silu"), "Silu", [x], [mul.outputs[0]], {},
                 tuple(m.name for m in members)), members


def _match_sdpa(softmax: _Node, producer: _Producers, readers: _Readers, constants: _Constants
                ) -> tuple[_Node, list[_Node]] | None:
    """torch's ``scaled_dot_product_attention`` as both exporters decompose it:
    ``MatMul(q · s, kᵀ · s) [+ mask] -> Softmax -> MatMul(·, v)``, the scale's square
    root applied to each operand.  PyTorch runs one fused kernel for it, which saves
    q, k, v, the output and the row log-sum-exp, never the attention matrix, and
    recomputes the scores in its backward (``_rule_attention``).  Eager attention (the
    scale applied to the scores) stays three nodes, as PyTorch runs it."""
    if softmax.op_type != "Softmax" or not softmax.inputs:
        return None
    scores = producer.get(softmax.inputs[0])
    add = None
    if scores is not None and scores.op_type == "Add":
        mask = next((i for i in scores.inputs if i in constants), None)
        if mask is None or len(readers.get(scores.outputs[0], [])) != 1:
            return None
        add, scores = scores, producer.get(_other(scores, mask))
    if scores is None or scores.op_type != "MatMul" or len(readers.get(scores.outputs[0], [])) != 1:
        return None
    scaled = [producer.get(i) for i in scores.inputs]
    if any(m is None or m.op_type != "Mul" or len(readers.get(m.outputs[0], [])) != 1
           or sum(i in constants for i in m.inputs) != 1 for m in scaled):
        return None
    q, kt = (next(i for i in m.inputs if i not in constants) for m in scaled if m is not None)
    context = _sole_reader(softmax.outputs[0], readers, "MatMul")
    if context is None or context.inputs[0] != softmax.outputs[0]:
        return None
    members = [m for m in scaled if m is not None] + [scores] + ([add] if add else []) + [softmax, context]
    name = f"{context.name}/attention"
    return _Node(name, "Attention", [q, kt, context.inputs[1]], [context.outputs[0]], {},
                 tuple(m.name for m in members)), members


def _match_rsqrt(sqrt: _Node, producer: _Producers, readers: _Readers, constants: _Constants
                 ) -> tuple[_Node, list[_Node]] | None:
    """x -> Sqrt -> Reciprocal: one rsqrt, which saves only its output (RMSNorm's statistic)."""
    if sqrt.op_type != "Sqrt":
        return None
    rec = _sole_reader(sqrt.outputs[0], readers, "Reciprocal")
    if rec is None:
        return None
    members = [sqrt, rec]
    return _Node(_pattern_name(members, "rsqrt"), "Rsqrt", [sqrt.inputs[0]], [rec.outputs[0]], {},
                 tuple(m.name for m in members)), members


def _match_layernorm(mean: _Node, producer: _Producers, readers: _Readers, constants: _Constants
                     ) -> tuple[_Node, list[_Node]] | None:
    """x -> ReduceMean -> Sub -> Pow(2) -> ReduceMean -> Add(eps) -> Sqrt -> Div [-> Mul(g) -> Add(b)]."""
    if mean.op_type != "ReduceMean":
        return None
    x = mean.inputs[0]
    subs = [r for r in readers.get(mean.outputs[0], []) if r.op_type == "Sub" and r.inputs == [x, mean.outputs[0]]]
    if len(subs) != 1 or len(readers.get(mean.outputs[0], [])) != 1:
        return None
    sub = subs[0]
    centred = readers.get(sub.outputs[0], [])
    pow_ = next((r for r in centred if r.op_type == "Pow"), None)
    div = next((r for r in centred if r.op_type == "Div" and r.inputs[0] == sub.outputs[0]), None)
    if pow_ is None or div is None or len(centred) != 2 or _const_value(pow_.inputs[1], constants) != 2.0:
        return None
    var = _sole_reader(pow_.outputs[0], readers, "ReduceMean")
    eps = _sole_reader(var.outputs[0], readers, "Add") if var is not None else None
    sqrt = _sole_reader(eps.outputs[0], readers, "Sqrt") if eps is not None else None
    if var is None or eps is None or sqrt is None or _sole_reader(sqrt.outputs[0], readers, "Div") is not div:
        return None
    epsilon = _const_value(_other(eps, var.outputs[0]), constants)
    if epsilon is None:
        return None
    members = [mean, sub, pow_, var, eps, sqrt, div]
    inputs, out = [x], div.outputs[0]
    gamma_node = _sole_reader(out, readers, "Mul")
    if gamma_node is not None and _other(gamma_node, out) not in constants:
        members.append(gamma_node)
        inputs.append(_other(gamma_node, out))
        out = gamma_node.outputs[0]
        beta_node = _sole_reader(out, readers, "Add")
        if beta_node is not None and _other(beta_node, out) not in constants:
            members.append(beta_node)
            inputs.append(_other(beta_node, out))
            out = beta_node.outputs[0]
    name = _pattern_name(members, "layernorm")
    attrs = {"axis": -1, "epsilon": epsilon}
    return _Node(name, "LayerNormalization", inputs, [out], attrs, tuple(m.name for m in members)), members


def _pattern_name(members: list[_Node], kind: str) -> str:
    names = [m.name for m in members]
    prefix = ""
    for chars in zip(*names, strict=False):  # up to the shortest name: a common prefix
        if len(set(chars)) != 1:
            break
        prefix += chars[0]
    prefix = prefix.rstrip("/._-:")
    # A shared scope ("/m/layer.0/mlp/...") names the pattern; names without scopes (the
    # dynamo exporter's "node_Sqrt_12") share only their stem, so the last member's
    # (unique) name does.
    return f"{prefix}/{kind}" if "/" in prefix else f"{names[-1]}/{kind}"


# -------------------------------------------------------------------- utils
def _float_initializer(init: onnx.TensorProto) -> bool:
    dt = _ONNX_DTYPES.get(init.data_type)
    return dt is not None and dt.is_float


def _trainable_names(proto: onnx.ModelProto) -> frozenset[str] | None:
    """The names of the model's ``monet_ilp.trainable`` entry (checked by :func:`_load`)."""
    for entry in proto.metadata_props:
        if entry.key == TRAINABLE_KEY:
            return frozenset(json.loads(entry.value))
    return None


def _is_trainable_initializer(init: onnx.TensorProto, names: frozenset[str] | None = None) -> bool:
    """An initializer in ``names`` when given; otherwise a float initializer with more
    than one element is trained and the rest are constants."""
    if names is not None:
        return init.name in names
    return _float_initializer(init) and math.prod(init.dims) > 1


def _constant_attr_value(n: _Node) -> np.ndarray | None:
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in n.attrs:
            value = n.attrs[key]
            if isinstance(value, onnx.TensorProto):
                return numpy_helper.to_array(value)
            return np.asarray(value)
    return None


def _without_weight_data(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose trained weights are typed graph inputs instead of initializers.

    Shape inference needs only their shapes; copying and serialising hundreds of
    megabytes of weights would dominate the import time.
    """
    model = onnx.ModelProto()
    graph = proto.graph
    for field_name in ("ir_version", "producer_name", "domain", "model_version"):
        setattr(model, field_name, getattr(proto, field_name))
    model.opset_import.extend(proto.opset_import)
    g = model.graph
    g.name = graph.name
    g.node.extend(graph.node)
    g.output.extend(graph.output)
    g.value_info.extend(graph.value_info)
    listed = {i.name for i in graph.input}
    g.input.extend(graph.input)
    names = _trainable_names(proto)
    for init in graph.initializer:
        if _is_trainable_initializer(init, names):
            if init.name not in listed:
                g.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
        else:
            g.initializer.append(init)
    model.ir_version = max(model.ir_version, 4)
    return model


def _infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as err:  # noqa: BLE001  (inference errors come from C++ under several types)
        raise InputFormatError(
            f"ONNX shape inference failed: {err}",
            field="graph",
            fix="check the model with onnx.checker, or export it with static shapes",
        ) from None


#: Ops never folded: random ones (Dropout's mask included), and those with subgraphs.
_NOT_FOLDED = frozenset({"Dropout", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                         "Multinomial", "Bernoulli", "If", "Loop", "Scan", "SequenceMap"})
#: A folded value has at most this many elements (a larger one stays a node; its shape
#: is still inferred from the folded values it reads).
FOLD_LIMIT = 1 << 20
#: Rounds of folding and shape inference (each folds what the previous one made static).
FOLD_ROUNDS = 8


#: Normalisation ops an inference export folds away (BatchNorm into the convolution).
_NORMS = frozenset({"BatchNormalization", "InstanceNormalization", "GroupNormalization", "LayerNormalization"})
#: How to export for training, in the words of the warning.
RE_EXPORT = ("re-export in training mode: torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING), "
             "or monet_ilp.graph.torch_export.export_for_training")


def _inference_export(nodes: list[_Node], constants: Mapping[str, Any],
                      trains: Callable[[_Node], bool]) -> list[str]:
    """Why the model looks exported for inference (pipeline step 6), or nothing.

    * Dropout nodes that do not train (``training_mode`` false or absent);
    * every convolution has a bias, there is no normalisation at all, and activations
      are added (residual blocks): a ResNet/MobileNet/EfficientNet family network with
      BatchNorm folded into its convolutions, whose saved activations then vanish.
      A plain VGG (biases, no normalisation, no residual adds) is not flagged.
    """
    reasons = []
    dropouts = [n for n in nodes if n.op_type == "Dropout"]
    if dropouts and not any(trains(n) for n in dropouts):
        reasons.append(f"its {len(dropouts)} Dropout node(s) are in inference mode")
    convs = [n for n in nodes if n.op_type == "Conv"]
    biased = [n for n in convs if len(n.inputs) > 2 and n.inputs[2]]
    residual = any(n.op_type == "Add" and len(n.inputs) == 2 and all(i and i not in constants for i in n.inputs)
                   for n in nodes)
    if len(convs) >= 2 and len(biased) == len(convs) and residual and not any(n.op_type in _NORMS for n in nodes):
        reasons.append(f"all {len(convs)} convolutions have a bias and there is no normalisation in a "
                       "network with residual adds (BatchNorm folded into the convolutions?)")
    return reasons


def _fold_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Shape inference with the shape subgraphs folded (pipeline step 1).

    Exporters compute shapes at run time: ``Shape`` of a tensor, then ``Gather``,
    ``Concat``, ``ConstantOfShape``, ``Expand``, ``Equal``, ``Where`` ... on the result.
    ONNX's data propagation follows some of these chains; whatever it leaves, this folds:
    ``Shape``/``Size`` of a tensor whose shape is static become constants, and so does
    every node whose inputs are all constants, evaluated by ONNX's reference evaluator
    (``onnx.reference``); then shapes are inferred again, until nothing changes.  So a
    shape computed from static inputs is static.
    """
    for _ in range(FOLD_ROUNDS):
        model = _infer_shapes(model)
        graph = model.graph
        shapes: dict[str, tuple[int, ...]] = {}
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            tt = vi.type.tensor_type
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                shapes[vi.name] = tuple(d.dim_value for d in tt.shape.dim)
        known: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=17)
        nodes: list[onnx.NodeProto] = []
        changed = False
        for k, node in enumerate(graph.node):
            values = _folded(node, known, shapes, opset)
            if values is None or any(v.size > FOLD_LIMIT for v in values):
                nodes.append(node)
                continue
            if node.op_type == "Constant":
                known[node.output[0]] = values[0]
                nodes.append(node)
                continue
            for out, value in zip(node.output, values, strict=False):
                if out:
                    known[out] = value
                    nodes.append(onnx.helper.make_node(
                        "Constant", [], [out], name=f"{node.name or node.op_type + str(k)}/folded:{out}",
                        value=numpy_helper.from_array(np.asarray(value), out)))
            changed = True
        if not changed:
            return model
        del graph.node[:]
        graph.node.extend(nodes)
    return _infer_shapes(model)


def _folded(node: onnx.NodeProto, known: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]],
            opset: int) -> list[np.ndarray] | None:
    """The values of ``node``'s outputs when they are constants, else ``None``."""
    if node.domain not in ("", "ai.onnx") or node.op_type in _NOT_FOLDED:
        return None
    if node.op_type == "Constant":
        value = _constant_attr_value(_Node(node.name, node.op_type, [], list(node.output),
                                           {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}))
        return None if value is None else [np.asarray(value)]
    if node.op_type in SHAPE_OPS and node.input[0] in shapes:
        shape = shapes[node.input[0]]
        if node.op_type == "Size":
            return [np.asarray(math.prod(shape), dtype=np.int64)]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        start, end = attrs.get("start", 0), attrs.get("end", len(shape))
        return [np.asarray(shape[start:end], dtype=np.int64)]
    if not node.input or not all(i == "" or i in known for i in node.input):
        return None
    feeds = {i: known[i] for i in node.input if i}
    inputs = [onnx.helper.make_tensor_value_info(i, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for i, v in feeds.items()]
    outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
    one = onnx.helper.make_model(onnx.helper.make_graph([node], "fold", inputs, outputs),
                                 opset_imports=[onnx.helper.make_opsetid("", opset)])
    try:
        return [np.asarray(v) for v in ReferenceEvaluator(one).run(None, feeds)]
    except Exception:  # noqa: BLE001  (a node the evaluator cannot run stays a node)
        return None


#: Ops whose result has their first input's shape, for when ONNX's inference leaves it
#: open (GroupNormalization is a function op it does not expand).
SHAPE_PRESERVING = frozenset({"GroupNormalization", "InstanceNormalization", "LRN", "Mish", "HardSwish",
                              "Softplus", "HardSigmoid"})


def _shape_unknown_ops_elementwise(model: onnx.ModelProto,
                                   ops: frozenset[str] | None = None) -> onnx.ModelProto:
    """Give outputs of ops without a rule (or of ``ops``) their first input's shape, and
    infer onwards."""
    for _ in range(len(model.graph.node)):
        typed = {vi.name: vi.type for vi in list(model.graph.input) + list(model.graph.value_info)
                 + list(model.graph.output) if vi.type.tensor_type.HasField("shape")}
        typed.update({t.name: None for t in model.graph.initializer})
        pending = [
            n for n in model.graph.node
            if (n.op_type in ops if ops is not None else n.op_type not in SUPPORTED_OPS)
            and n.input and n.input[0] in typed
            and typed[n.input[0]] is not None and any(o not in typed for o in n.output)
        ]
        if not pending:
            return model
        for n in pending:
            for out in n.output:
                if out not in typed:
                    vi = model.graph.value_info.add()
                    vi.name = out
                    vi.type.CopyFrom(typed[n.input[0]])
        model = _infer_shapes(model)
    return model


def _topological_nodes(nodes: list[_Node]) -> list[_Node]:
    """ONNX requires nodes in topological order; sort anyway, and name any cycle."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.outputs if o}
    g: nx.DiGraph[int] = nx.DiGraph()
    g.add_nodes_from(range(len(nodes)))
    for k, n in enumerate(nodes):
        for i in n.inputs:
            if i in producer:
                g.add_edge(producer[i], k)
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return [nodes[k] for k in nx.lexicographical_topological_sort(g)]
    path = " -> ".join(nodes[u].name for u, _ in cycle) + f" -> {nodes[cycle[0][0]].name}"
    raise GraphError(
        f"the ONNX graph has a cycle: {path}",
        field=f"node {nodes[cycle[0][0]].name}",
        fix="a model must be a DAG; re-export it",
    )


def _check_unique_names(nodes: list[_Node]) -> None:
    seen: dict[str, int] = {}
    for n in nodes:
        if n.name in seen:
            seen[n.name] += 1
            n.name = f"{n.name}_{seen[n.name]}"
        else:
            seen[n.name] = 0
