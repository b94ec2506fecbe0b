"""The TrainingGraph IR: immutable ops and tensors of one training iteration.

Every builder (ONNX import, zoo, node-link import, random generator) ends here, and
every later stage (instances, formulations, evaluator) starts here.  The graph is
validated once, when it is built; afterwards it cannot change.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import GraphError, InputFormatError

if TYPE_CHECKING:
    import networkx as nx

FORMAT_NAME = "monet-ilp/training-graph"
FORMAT_VERSION = 1


class DType(StrEnum):
    """Element types, with their size in bytes (:attr:`itemsize`)."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    INT8 = "int8"
    INT32 = "int32"
    INT64 = "int64"
    BOOL = "bool"

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.FP32, DType.BF16, DType.FP16)


_ITEMSIZE = {
    DType.FP32: 4,
    DType.BF16: 2,
    DType.FP16: 2,
    DType.INT8: 1,
    DType.INT32: 4,
    DType.INT64: 8,
    DType.BOOL: 1,
}


class OpKind(StrEnum):
    FORWARD = "forward"
    BACKWARD_DATA = "backward_data"
    BACKWARD_WEIGHT = "backward_weight"
    LOSS = "loss"
    OPTIMIZER = "optimizer"


class TensorKind(StrEnum):
    ACTIVATION = "activation"
    ACTIVATION_GRAD = "activation_grad"
    WEIGHT = "weight"
    WEIGHT_GRAD = "weight_grad"
    OPTIMIZER_STATE = "optimizer_state"

    @property
    def persistent(self) -> bool:
        """Persistent tensors live for the whole iteration (never freed or recomputed)."""
        return self in (TensorKind.WEIGHT, TensorKind.WEIGHT_GRAD, TensorKind.OPTIMIZER_STATE)


@dataclass(frozen=True)
class Tensor:
    """One tensor of the training iteration.

    ``bytes`` is authoritative: it equals ``prod(shape) * dtype.itemsize`` for
    tensors that carry a shape, and is given directly for shapeless tensors (graphs
    imported from node-link files, where only a byte count is known).
    ``producer`` is ``None`` for graph inputs and persistent tensors that exist
    before the iteration starts.
    """

    id: str
    kind: TensorKind
    bytes: int
    shape: tuple[int, ...] = ()
    dtype: DType = DType.FP32
    producer: str | None = None
    consumers: tuple[str, ...] = ()
    layer: str = ""

    @property
    def persistent(self) -> bool:
        return self.kind.persistent

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.shape else self.bytes // self.dtype.itemsize


@dataclass(frozen=True)
class Op:
    """One operation: a forward layer or op, a backward op, the loss, or an update.

    ``macs`` counts multiply-accumulates done on a MAC array (convolutions and
    matrix products); ``flops`` counts every floating-point operation, so
    ``flops >= 2 * macs``.  ``dims`` are the loop dimensions the cost model
    unrolls (for a conv: B, K, C, G, OY, OX, FY, FX; for a matmul: B, M, N, K).
    ``updates`` lists the inputs an optimizer op rewrites in place.  ``cost`` is a
    compute cost supplied by the source file (node-link graphs); it is ``None``
    when costs come from the hardware cost model.  ``members`` names the source
    (ONNX) nodes fused into this op.  ``reads`` gives, for an input the op reads only in
    part, the bytes it reads (a tile of a fused stack reads its rows of an input and the
    halo rows of its neighbours' tiles, ``formulations/fusion.md`` FU.T3); an input not
    listed is read whole.
    """

    id: str
    kind: OpKind
    op_type: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    layer: str = ""
    macs: int = 0
    flops: int = 0
    updates: tuple[str, ...] = ()
    forward_of: str | None = None
    dims: Mapping[str, int] = field(default_factory=dict)
    cost: float | None = None
    members: tuple[str, ...] = ()
    reads: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", MappingProxyType(dict(self.dims)))
        object.__setattr__(self, "reads", MappingProxyType(dict(self.reads)))

    @property
    def is_backward(self) -> bool:
        return self.kind in (OpKind.BACKWARD_DATA, OpKind.BACKWARD_WEIGHT)


@dataclass(frozen=True)
class TrainingGraph:
    """An immutable, validated training graph.

    ``ops`` are listed in a valid execution order (every input is produced by an
    earlier op or by no op at all); that order is the default "fixed order of
    first computations" of the remat problems.  Producers and consumers of each
    tensor are derived from the ops when the graph is built, so the two can never
    disagree.

    Use :meth:`build` to construct one; the constructor itself checks an already
    consistent set of ops and tensors.
    """

    name: str
    ops: tuple[Op, ...]
    tensors: tuple[Tensor, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)
    _op_index: Mapping[str, Op] = field(init=False, repr=False, compare=False)
    _tensor_index: Mapping[str, Tensor] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))
        op_index = MappingProxyType({op.id: op for op in self.ops})
        tensor_index = MappingProxyType({t.id: t for t in self.tensors})
        object.__setattr__(self, "_op_index", op_index)
        object.__setattr__(self, "_tensor_index", tensor_index)
        _validate(self, op_index, tensor_index)

    # ------------------------------------------------------------------ building
    @classmethod
    def build(
        cls,
        name: str,
        ops: Iterable[Op],
        tensors: Iterable[Tensor],
        meta: Mapping[str, Any] | None = None,
        *,
        reorder: bool = False,
    ) -> TrainingGraph:
        """Build a graph, deriving every tensor's producer and consumers from ``ops``.

        With ``reorder=True`` the ops are put in a topological order (stable with
        respect to the given one); otherwise the given order must already be one.
        A cycle raises :class:`GraphError` naming the ops on it.
        """
        ops = list(ops)
        tensors = list(tensors)
        _check_unique(ops, "op")
        _check_unique(tensors, "tensor")
        known = {t.id for t in tensors}
        producer: dict[str, str] = {}
        consumers: dict[str, list[str]] = {t: [] for t in known}
        for op in ops:
            for t in op.inputs:
                if t not in known:
                    raise GraphError(
                        f"op {op.id!r} reads tensor {t!r}, which the graph does not define",
                        field=f"ops.{op.id}.inputs",
                        fix="declare the tensor or remove the reference",
                    )
                consumers[t].append(op.id)
            for t in op.outputs:
                if t not in known:
                    raise GraphError(
                        f"op {op.id!r} writes tensor {t!r}, which the graph does not define",
                        field=f"ops.{op.id}.outputs",
                        fix="declare the tensor or remove the reference",
                    )
                if t in producer:
                    raise GraphError(
                        f"tensor {t!r} is produced by both {producer[t]!r} and {op.id!r}",
                        field=f"tensors.{t}",
                        fix="give each produced tensor exactly one producer",
                    )
                producer[t] = op.id
        if reorder:
            ops = _topological(ops, producer)
        tensors = [
            Tensor(
                id=t.id,
                kind=t.kind,
                bytes=t.bytes,
                shape=t.shape,
                dtype=t.dtype,
                producer=producer.get(t.id),
                consumers=tuple(consumers[t.id]),
                layer=t.layer,
            )
            for t in tensors
        ]
        return cls(name=name, ops=tuple(ops), tensors=tuple(tensors), meta=dict(meta or {}))

    # ------------------------------------------------------------------- access
    def op(self, op_id: str) -> Op:
        return self._op_index[op_id]

    def tensor(self, tensor_id: str) -> Tensor:
        return self._tensor_index[tensor_id]

    def ops_of_kind(self, *kinds: OpKind) -> tuple[Op, ...]:
        return tuple(op for op in self.ops if op.kind in kinds)

    def tensors_of_kind(self, *kinds: TensorKind) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if t.kind in kinds)

    @property
    def has_loss(self) -> bool:
        return any(op.kind is OpKind.LOSS for op in self.ops)

    def saved_tensors(self) -> tuple[Tensor, ...]:
        """Non-persistent tensors made in the forward pass and read by a backward op.

        These are the candidates for keep / offload / recompute.
        """
        saved = []
        for t in self.tensors:
            if t.persistent or t.kind is TensorKind.ACTIVATION_GRAD:
                continue
            if t.producer is not None and self.op(t.producer).is_backward:
                continue
            if any(self.op(c).is_backward for c in t.consumers):
                saved.append(t)
        return tuple(saved)

    def to_networkx(self) -> nx.DiGraph[str]:
        """Op-level DAG view: nodes are op ids, an edge u->v carries the tensors u passes v.

        Node attributes copy the op's fields; edge attributes are ``tensors`` (ids)
        and ``bytes`` (their total size).
        """
        import networkx as nx  # networkx takes 0.1 s to import: only when a graph is checked or converted

        g: nx.DiGraph[str] = nx.DiGraph(name=self.name)
        for op in self.ops:
            g.add_node(
                op.id,
                kind=str(op.kind),
                op_type=op.op_type,
                layer=op.layer,
                macs=op.macs,
                flops=op.flops,
                out_bytes=sum(self.tensor(t).bytes for t in op.outputs),
            )
        for t in self.tensors:
            if t.producer is None:
                continue
            for c in dict.fromkeys(t.consumers):
                if g.has_edge(t.producer, c):
                    g.edges[t.producer, c]["tensors"].append(t.id)
                    g.edges[t.producer, c]["bytes"] += t.bytes
                else:
                    g.add_edge(t.producer, c, tensors=[t.id], bytes=t.bytes)
        return g

    # --------------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "name": self.name,
            "meta": dict(self.meta),
            "tensors": [_tensor_to_dict(t) for t in self.tensors],
            "ops": [_op_to_dict(op) for op in self.ops],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> TrainingGraph:
        """Rebuild a graph from :meth:`to_dict` output; ``source`` names the file in errors."""
        try:
            if not isinstance(data, Mapping) or data.get("format") != FORMAT_NAME:
                raise InputFormatError(
                    f"not a monet-ilp training graph (expected \"format\": \"{FORMAT_NAME}\")",
                    field="format",
                    fix="pass a file written by `monet-ilp graph build/import`, or import "
                    "node-link graphs with `monet-ilp graph import`",
                )
            if data.get("version") != FORMAT_VERSION:
                raise InputFormatError(
                    f"unsupported format version {data.get('version')!r}",
                    field="version",
                    fix=f"regenerate the file with this monet-ilp (version {FORMAT_VERSION})",
                )
            tensors = [_tensor_from_dict(t, i) for i, t in enumerate(_list(data, "tensors"))]
            ops = [_op_from_dict(o, i) for i, o in enumerate(_list(data, "ops"))]
            return cls.build(str(data.get("name", "graph")), ops, tensors, data.get("meta") or {})
        except GraphError as err:
            if source:
                err.with_file(source)
            raise

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> TrainingGraph:
        path = Path(path)
        data = read_json(path)
        try:
            return cls.from_dict(data, source=str(path))
        except InputFormatError as err:
            err.with_file(str(path))
            raise


# --------------------------------------------------------------------- helpers
def read_json(path: str | Path) -> Any:
    """Read a JSON file, turning every failure into an :class:`InputFormatError`."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputFormatError("file not found", file=str(path), fix="check the path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputFormatError(
            f"cannot read the file ({err})", file=str(path), fix="pass a readable UTF-8 JSON file"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputFormatError(
            f"malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}",
            file=str(path),
            field=f"line {err.lineno}",
            fix="repair or regenerate the file (was it truncated?)",
        ) from None


def _check_unique(items: Sequence[Op | Tensor], what: str) -> None:
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise GraphError(
                f"duplicate {what} id {item.id!r}",
                field=f"{what}s.{item.id}",
                fix=f"give every {what} a unique id",
            )
        seen.add(item.id)


def _topological(ops: list[Op], producer: Mapping[str, str]) -> list[Op]:
    import networkx as nx  # networkx takes 0.1 s to import: only when a graph is checked or converted

    g: nx.DiGraph[str] = nx.DiGraph()
    position = {op.id: i for i, op in enumerate(ops)}
    g.add_nodes_from(position)
    for op in ops:
        for t in op.inputs:
            if t in producer:
                g.add_edge(producer[t], op.id)
    _raise_on_cycle(g)
    by_id = {op.id: op for op in ops}
    order = nx.lexicographical_topological_sort(g, key=position.__getitem__)
    return [by_id[o] for o in order]


def _raise_on_cycle(g: nx.DiGraph[str]) -> None:
    import networkx as nx  # networkx takes 0.1 s to import: only when a graph is checked or converted

    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return
    path = " -> ".join(str(u) for u, _ in cycle) + f" -> {cycle[0][0]}"
    raise GraphError(
        f"the graph has a cycle: {path}",
        field=f"ops.{cycle[0][0]}",
        fix="a training graph must be a DAG; remove one edge of the cycle",
    )


def _validate(graph: TrainingGraph, ops: Mapping[str, Op], tensors: Mapping[str, Tensor]) -> None:
    if len(ops) != len(graph.ops):
        _check_unique(list(graph.ops), "op")
    if len(tensors) != len(graph.tensors):
        _check_unique(list(graph.tensors), "tensor")
    if not graph.ops:
        raise GraphError("the graph has no ops", field="ops", fix="build a graph with at least one op")
    for tensor in graph.tensors:
        if not isinstance(tensor.bytes, int) or isinstance(tensor.bytes, bool) or tensor.bytes <= 0:
            raise GraphError(
                f"tensor {tensor.id!r} has size {tensor.bytes!r} bytes; sizes must be positive integers",
                field=f"tensors.{tensor.id}.bytes",
                fix="give every tensor a positive byte size",
            )
        if any((not isinstance(d, int)) or d <= 0 for d in tensor.shape):
            raise GraphError(
                f"tensor {tensor.id!r} has shape {list(tensor.shape)}; dimensions must be positive",
                field=f"tensors.{tensor.id}.shape",
                fix="give static, positive shapes (run shape inference or fix the input shape)",
            )
        if tensor.shape and tensor.bytes != math.prod(tensor.shape) * tensor.dtype.itemsize:
            raise GraphError(
                f"tensor {tensor.id!r}: {tensor.bytes} bytes does not match shape {list(tensor.shape)} of {tensor.dtype}",
                field=f"tensors.{tensor.id}.bytes",
                fix="set bytes = prod(shape) * itemsize",
            )
        if tensor.producer is not None and tensor.producer not in ops:
            raise GraphError(
                f"tensor {tensor.id!r} names unknown producer {tensor.producer!r}",
                field=f"tensors.{tensor.id}.producer",
                fix="build graphs with TrainingGraph.build",
            )
    seen: set[str] = set()
    for op in graph.ops:
        for name, value in (("macs", op.macs), ("flops", op.flops)):
            if not isinstance(value, int) or value < 0:
                raise GraphError(
                    f"op {op.id!r} has {name} = {value!r}; it must be a non-negative integer",
                    field=f"ops.{op.id}.{name}",
                    fix=f"give a non-negative integer {name}",
                )
        if op.cost is not None and not (isinstance(op.cost, (int, float)) and op.cost >= 0):
            raise GraphError(
                f"op {op.id!r} has cost {op.cost!r}; it must be a non-negative number",
                field=f"ops.{op.id}.cost",
                fix="give a non-negative compute cost",
            )
        for t in op.inputs + op.outputs:
            if t not in tensors:
                raise GraphError(
                    f"op {op.id!r} refers to unknown tensor {t!r}",
                    field=f"ops.{op.id}",
                    fix="declare the tensor",
                )
        for t in op.updates:
            if t not in op.inputs or not tensors[t].persistent:
                raise GraphError(
                    f"op {op.id!r} updates {t!r}, which is not one of its persistent inputs",
                    field=f"ops.{op.id}.updates",
                    fix="only update persistent tensors the op also reads",
                )
        for t in op.inputs:
            producer = tensors[t].producer
            if producer is not None and producer not in seen:
                import networkx as nx  # networkx takes 0.1 s to import: only when a graph is checked or converted

                g: nx.DiGraph[str] = nx.DiGraph()
                for o in graph.ops:
                    for i in o.inputs:
                        source = tensors[i].producer
                        if source is not None:
                            g.add_edge(source, o.id)
                _raise_on_cycle(g)
                raise GraphError(
                    f"op {op.id!r} reads {t!r} before its producer {producer!r} runs",
                    field=f"ops.{op.id}",
                    fix="list ops in a topological order (or build with reorder=True)",
                )
        for t in op.outputs:
            if tensors[t].producer != op.id:
                raise GraphError(
                    f"tensor {t!r} does not name op {op.id!r} as its producer",
                    field=f"tensors.{t}.producer",
                    fix="build graphs with TrainingGraph.build",
                )
        seen.add(op.id)
    if graph.has_loss:
        _check_reaches_loss(graph)


def _check_reaches_loss(graph: TrainingGraph) -> None:
    """In a training graph every forward op must contribute to the loss."""
    # The ops with a path to a loss op, walked back from it (every instance file is
    # checked so: no networkx to import for it).
    producers: dict[str, set[str]] = {op.id: set() for op in graph.ops}
    for t in graph.tensors:
        if t.producer is not None:
            for c in t.consumers:
                producers.setdefault(c, set()).add(t.producer)
    feeding = {op.id for op in graph.ops if op.kind is OpKind.LOSS}
    stack = list(feeding)
    while stack:
        for p in producers.get(stack.pop(), ()):
            if p not in feeding:
                feeding.add(p)
                stack.append(p)
    for op in graph.ops:
        if op.kind is OpKind.FORWARD and op.id not in feeding:
            raise GraphError(
                f"forward op {op.id!r} has no path to the loss",
                field=f"ops.{op.id}",
                fix="remove the dead op, or make its output the model output",
            )


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise InputFormatError(
            f"field {key!r} must be a list, got {type(value).__name__}",
            field=key,
            fix="regenerate the file",
        )
    return value


def _tensor_to_dict(t: Tensor) -> dict[str, Any]:
    return {
        "id": t.id,
        "kind": str(t.kind),
        "bytes": t.bytes,
        "shape": list(t.shape),
        "dtype": str(t.dtype),
        "layer": t.layer,
        "producer": t.producer,
        "consumers": list(t.consumers),
    }


def _op_to_dict(op: Op) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": op.id,
        "kind": str(op.kind),
        "op_type": op.op_type,
        "layer": op.layer,
        "inputs": list(op.inputs),
        "outputs": list(op.outputs),
        "macs": op.macs,
        "flops": op.flops,
    }
    if op.updates:
        data["updates"] = list(op.updates)
    if op.forward_of is not None:
        data["forward_of"] = op.forward_of
    if op.dims:
        data["dims"] = dict(op.dims)
    if op.cost is not None:
        data["cost"] = op.cost
    if op.members:
        data["members"] = list(op.members)
    if op.reads:
        data["reads"] = dict(op.reads)
    return data


def _field(record: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in record:
        raise InputFormatError(f"missing field {key!r}", field=f"{where}.{key}", fix=f"add {key!r}")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputFormatError(
            f"field {key!r} has the wrong type ({type(value).__name__})",
            field=f"{where}.{key}",
            fix="regenerate the file",
        )
    return value


def _enum(enum: type[StrEnum], value: Any, where: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise InputFormatError(
            f"unknown value {value!r}", field=where, fix=f"use one of: {allowed}"
        ) from None


def _tensor_from_dict(record: Any, i: int) -> Tensor:
    where = f"tensors[{i}]"
    if not isinstance(record, Mapping):
        raise InputFormatError("each tensor must be an object", field=where, fix="regenerate the file")
    tid = _field(record, "id", where, str)
    where = f"tensors.{tid}"
    return Tensor(
        id=tid,
        kind=_enum(TensorKind, _field(record, "kind", where, str), f"{where}.kind"),
        bytes=_field(record, "bytes", where, int),
        shape=tuple(record.get("shape", ())),
        dtype=_enum(DType, record.get("dtype", "fp32"), f"{where}.dtype"),
        layer=str(record.get("layer", "")),
    )


def _op_from_dict(record: Any, i: int) -> Op:
    where = f"ops[{i}]"
    if not isinstance(record, Mapping):
        raise InputFormatError("each op must be an object", field=where, fix="regenerate the file")
    oid = _field(record, "id", where, str)
    where = f"ops.{oid}"
    return Op(
        id=oid,
        kind=_enum(OpKind, _field(record, "kind", where, str), f"{where}.kind"),
        op_type=_field(record, "op_type", where, str),
        inputs=tuple(_field(record, "inputs", where, list)),
        outputs=tuple(_field(record, "outputs", where, list)),
        layer=str(record.get("layer", "")),
        macs=_field(record, "macs", where, int),
        flops=_field(record, "flops", where, int),
        updates=tuple(record.get("updates", ())),
        forward_of=record.get("forward_of"),
        dims=dict(record.get("dims", {})),
        cost=record.get("cost"),
        members=tuple(record.get("members", ())),
        reads={str(k): int(v) for k, v in dict(record.get("reads", {})).items()},
    )
