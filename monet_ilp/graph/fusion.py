"""Layer fusion: a fusion plan, its checks, and the tiled training graph it stands for.

A fused stack (``formulations/fusion.md``) is a run of consecutive forward layers executed
tile by tile along one axis (feature-map rows, tokens, or samples of the batch).
:func:`tile_graph` rewrites the training graph so that each layer of a stack becomes one
op per tile, each produced tensor one tensor per tile, and each weight of a stack one
staged SRAM copy that the stack's tiles share (FU.T1-FU.T6).  Everything after that is
today's machinery: the instance builder costs each tile with the cost model (FU.C1-C3),
the schedulers place, order, keep, move and recompute tiles, and the evaluator checks
every tile run, dependency and byte (FU.E).  A plan with no stack, or with one tile per
stack, leaves the graph as it is (FU.T7).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.graph.ir import Op, OpKind, Tensor, TensorKind, TrainingGraph

__all__ = [
    "FORMAT_NAME",
    "Axis",
    "FusionError",
    "FusionPlan",
    "Stack",
    "chain_parts",
    "chains",
    "extent",
    "fusable",
    "layer_by_layer",
    "load_fusion",
    "op_rows",
    "plan_of",
    "stacks_of",
    "tile_graph",
    "tile_id",
]

FORMAT_NAME = "monet-ilp/fusion"
FORMAT_VERSION = 1

#: The separator of a tile's name: ``F:conv1#2`` is tile 2 of ``F:conv1``, ``relu#2`` its output.
TILE_SEP = "#"
#: The staged SRAM copy of a weight that a stack's tiles read (FU.T4): ``conv1.weight@stack``.
STAGED_SUFFIX = "@stack"
#: The op that makes the staged copy (FU.T4).
STAGE_OP_TYPE = "Stage"


class FusionError(MonetError):
    """A fusion plan that does not fit its graph."""


class Axis(StrEnum):
    """What a stack is tiled along (FU.A1)."""

    ROWS = "rows"    # feature-map rows (NCHW: H) or tokens (B, T, D: T)
    BATCH = "batch"  # samples of the batch (dimension 0)


@dataclass(frozen=True)
class Stack:
    """Consecutive forward ops run tile by tile: ``ops`` (op ids, in graph order), ``tiles``
    tiles along ``axis``."""

    ops: tuple[str, ...]
    tiles: int
    axis: Axis = Axis.ROWS

    def to_dict(self) -> dict[str, Any]:
        return {"ops": list(self.ops), "tiles": self.tiles, "axis": str(self.axis)}


@dataclass(frozen=True)
class FusionPlan:
    """The fused stacks of a graph; every op in no stack runs layer by layer."""

    stacks: tuple[Stack, ...] = ()
    #: Where the plan came from (its file), for error messages.
    source: str = field(default="fusion plan", compare=False)

    @property
    def fused(self) -> tuple[Stack, ...]:
        """The stacks with more than one tile (a one-tile stack is layer by layer, FU.T7)."""
        return tuple(s for s in self.stacks if s.tiles > 1)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION,
                "stacks": [s.to_dict() for s in self.stacks]}

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "fusion plan") -> FusionPlan:
        """Read a plan (``{"stacks": [{"ops": [...], "tiles": n, "axis": "rows"}]}``)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("stacks"), list):
            raise InputFormatError(f"{source}: a fusion plan is an object with a list 'stacks'",
                                   field="stacks", fix='write {"stacks": [{"ops": [...], "tiles": 4}]}')
        stacks = []
        for i, record in enumerate(data["stacks"]):
            where = f"stacks[{i}]"
            if not isinstance(record, Mapping):
                raise InputFormatError(f"{source}: each stack is an object", field=where,
                                       fix='write {"ops": [...], "tiles": 4, "axis": "rows"}')
            ops = record.get("ops")
            if not isinstance(ops, list) or not ops or not all(isinstance(o, str) for o in ops):
                raise InputFormatError(f"{source}: {where}.ops must be a non-empty list of op ids",
                                       field=f"{where}.ops", fix="list the forward ops of the stack, in order")
            tiles = record.get("tiles")
            if not isinstance(tiles, int) or isinstance(tiles, bool) or tiles < 1:
                raise InputFormatError(f"{source}: {where}.tiles must be a positive integer, not {tiles!r}",
                                       field=f"{where}.tiles", fix="give the number of tiles (1: layer by layer)")
            try:
                axis = Axis(record.get("axis", "rows"))
            except ValueError:
                raise InputFormatError(f"{source}: {where}.axis {record.get('axis')!r} is unknown",
                                       field=f"{where}.axis",
                                       fix="use one of: " + ", ".join(a.value for a in Axis)) from None
            stacks.append(Stack(tuple(ops), tiles, axis))
        return cls(tuple(stacks), source=source)


def load_fusion(path: str | Path) -> FusionPlan:
    """A fusion plan from a JSON or YAML file; errors name the file and the field."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputFormatError(f"cannot read fusion plan {path}: {exc.strerror}", field="fusion",
                               fix="give the path of a fusion plan file") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml  # PyYAML only for YAML plans

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - any parse error is the file's
        raise InputFormatError(f"{path}: not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'} "
                               f"({exc})", field="fusion", fix="fix the file's syntax") from None
    return FusionPlan.from_dict(data, source=str(path))


def tile_id(name: str, tile: int) -> str:
    """The id of tile ``tile`` of op or tensor ``name``."""
    return f"{name}{TILE_SEP}{tile}"


# ====================================================================== geometry
def _axis_index(tensor: Tensor, axis: Axis) -> int | None:
    """Which dimension of ``tensor`` the axis is (FU.A1); ``None`` if it has none."""
    rank = len(tensor.shape)
    if axis is Axis.BATCH:
        return 0 if rank >= 2 else None
    return {4: 2, 3: 1}.get(rank)


def extent(tensor: Tensor, axis: Axis) -> int | None:
    """The tensor's length along ``axis`` (``None``: it has no such dimension)."""
    index = _axis_index(tensor, axis)
    return None if index is None else tensor.shape[index]


def _cut(length: int, tiles: int, i: int) -> tuple[int, int]:
    """Rows ``[a, b)`` of tile ``i`` of ``tiles`` balanced tiles of ``length`` rows (FU.T2)."""
    return i * length // tiles, (i + 1) * length // tiles


def _conv_padding(op: Op) -> int:
    """Rows of padding above a conv's or pool's input (symmetric "same"-style padding)."""
    d = op.dims
    return max(0, -(-((d["OY"] - 1) * d.get("SY", 1) + d["FY"] - d["IY"]) // 2))


def _is_windowed(op: Op, axis: Axis) -> bool:
    """A conv or pool along rows: an output row reads a window of input rows (FU.T3)."""
    return axis is Axis.ROWS and all(k in op.dims for k in ("OY", "IY", "FY"))


def _needs_all_rows(op: Op, graph: TrainingGraph, axis: Axis) -> bool:
    """A product of two activations along tokens (attention's scores and context): each
    output token may read every input token (FU.T3, the causal mask is not assumed)."""
    return (axis is Axis.ROWS and op.macs > 0 and not _is_windowed(op, axis)
            and not any(graph.tensor(t).persistent for t in op.inputs))


def _input_rows(op: Op, graph: TrainingGraph, axis: Axis, tensor: Tensor,
                rows: tuple[int, int], main: bool) -> tuple[int, int]:
    """The rows of input ``tensor`` that output rows ``rows`` of ``op`` read (FU.T3)."""
    length = extent(tensor, axis)
    assert length is not None
    a, b = rows
    if main and _is_windowed(op, axis):
        s, f, pad = op.dims.get("SY", 1), op.dims["FY"], _conv_padding(op)
        return max(0, a * s - pad), min(length, (b - 1) * s - pad + f)
    if _needs_all_rows(op, graph, axis):
        # Scores read one tensor (Q and K): every row.  Context reads the scores' rows of
        # its own tokens and every row of V.
        activations = [t for t in op.inputs if not graph.tensor(t).persistent]
        if not main or len(activations) == 1:
            return 0, length
    return a, b


def fusable(op: Op, graph: TrainingGraph, axis: Axis) -> str | None:
    """Why ``op`` cannot be in a stack tiled along ``axis`` (FU.F1-FU.F4); ``None`` if it can."""
    if op.kind is not OpKind.FORWARD:
        return f"{op.kind} ops are not fused (FU.F1: only forward layers are)"
    if op.op_type == STAGE_OP_TYPE:
        return "a staging op is made by fusion, not fused"
    if op.cost is not None or op.op_type == "node":
        return "a node-link op has no shapes to tile (FU.F1)"
    training = graph.meta.get("phase") != "inference" and graph.has_loss
    if training and "BatchNormalization" in op.op_type.split("+"):
        return ("batch normalisation in training needs the statistics of the whole feature map "
                "before it normalises any tile (FU.F2): cut the stack before it")
    if any(graph.tensor(t).persistent for t in op.outputs + op.updates):
        return "it writes a persistent tensor (a weight or a state), which is not tiled"
    outputs = [graph.tensor(t) for t in op.outputs if not graph.tensor(t).persistent]
    if not outputs:
        return "it writes no activation to tile"
    length = extent(outputs[0], axis)
    if length is None:
        return f"its output {outputs[0].id!r} (shape {list(outputs[0].shape)}) has no {axis} dimension (FU.F3)"
    for tensor in outputs[1:]:
        if extent(tensor, axis) != length and _read_forward(tensor, graph):
            return (f"its output {tensor.id!r} (shape {list(tensor.shape)}) is not along the {axis} of "
                    f"{outputs[0].id!r} and a forward op reads it (a reduction such as pooling, FU.F4)")
    for t in op.inputs:
        tensor = graph.tensor(t)
        if tensor.persistent or tensor.kind is not TensorKind.ACTIVATION:
            continue
        if extent(tensor, axis) is None:
            return f"its input {t!r} (shape {list(tensor.shape)}) has no {axis} dimension (FU.F3)"
    main = next((graph.tensor(t) for t in op.inputs if not graph.tensor(t).persistent), None)
    if (main is not None and not _is_windowed(op, axis) and not _needs_all_rows(op, graph, axis)
            and extent(main, axis) != length):
        return (f"it maps {extent(main, axis)} {axis} of {main.id!r} onto {length} "
                    "(a reduction or reshape along the axis, FU.F4)")
    return None


def _read_forward(tensor: Tensor, graph: TrainingGraph) -> bool:
    return any(graph.op(c).kind is OpKind.FORWARD for c in tensor.consumers)


# ====================================================================== checks
def _check(plan: FusionPlan, graph: TrainingGraph, source: str) -> None:
    """Each stack is a chain of fusable forward ops, consecutive in the graph's order, with
    at most as many tiles as its shortest layer has rows (FU.S1-FU.S4)."""
    position = {op.id: i for i, op in enumerate(graph.ops)}
    owner: dict[str, int] = {}
    for s, stack in enumerate(plan.stacks):
        where = f"{source}: stacks[{s}]"
        for op_id in stack.ops:
            if op_id not in position:
                raise FusionError(f"{where} names op {op_id!r}, which graph {graph.name!r} does not have",
                                  field=f"stacks[{s}].ops", fix="name forward ops of the graph (e.g. 'F:conv1')")
            if op_id in owner:
                raise FusionError(f"{where}: op {op_id!r} is already in stacks[{owner[op_id]}]",
                                  field=f"stacks[{s}].ops", fix="put each op in one stack")
            owner[op_id] = s
        if stack.tiles == 1:
            continue
        forward = [op for op in graph.ops if op.kind is OpKind.FORWARD]
        order = {op.id: i for i, op in enumerate(forward)}
        for op_id in stack.ops:
            why = fusable(graph.op(op_id), graph, stack.axis)
            if why is not None:
                raise FusionError(f"{where}: op {op_id!r} cannot be fused along {stack.axis}: {why}",
                                  field=f"stacks[{s}].ops", fix="cut the stack there (or leave the op out)")
        places = [order[o] for o in stack.ops]
        if places != list(range(places[0], places[0] + len(places))):
            raise FusionError(f"{where} is not a chain: its ops are not consecutive forward ops in the "
                              "graph's order (FU.S1)", field=f"stacks[{s}].ops",
                              fix="list consecutive forward ops, in the graph's order")
        made: set[str] = set()
        for k, op_id in enumerate(stack.ops):
            op = graph.op(op_id)
            if k and not any(t in made for t in op.inputs):
                raise FusionError(f"{where} is not a chain: {op_id!r} reads nothing the stack's earlier "
                                  "ops make (FU.S1)", field=f"stacks[{s}].ops",
                                  fix="start a new stack at that op")
            made.update(op.outputs)
        for op_id in stack.ops:
            op = graph.op(op_id)
            length = op_rows(graph, op.id, stack.axis)
            if stack.tiles > length:
                raise FusionError(f"{where}: {stack.tiles} tiles, but {op_id!r} has only {length} {stack.axis} "
                                  "(FU.S3)", field=f"stacks[{s}].tiles",
                                  fix=f"use at most {length} tiles, or cut the stack before {op_id!r}")


def op_rows(graph: TrainingGraph, op_id: str, axis: Axis) -> int:
    """The extent along ``axis`` of an op's first non-persistent output (1 without one):
    the most tiles the op can be cut into (FU.S3)."""
    first = next((graph.tensor(t) for t in graph.op(op_id).outputs if not graph.tensor(t).persistent), None)
    return (extent(first, axis) if first is not None else None) or 1


# ====================================================================== the rewrite
def tile_graph(graph: TrainingGraph, plan: FusionPlan) -> TrainingGraph:
    """The training graph in which every stack of ``plan`` runs tile by tile (FU.T1-FU.T7).

    ``meta["fusion"]`` records the plan.  With no stack of more than one tile the graph
    is returned as it is (FU.T7).
    """
    _check(plan, graph, plan.source)
    stacks = plan.fused
    if not stacks:
        return graph
    tiled_ops: dict[str, list[Op]] = {}  # a stack op -> its tiles
    tiles_of: dict[str, list[str]] = {}   # a tiled tensor -> its tiles
    new_tensors: list[Tensor] = []
    staged_first: dict[str, list[Op]] = {}  # the first op of a stack -> its staging ops
    rows_of: dict[str, list[tuple[int, int]]] = {}   # a tensor tiled along rows -> the rows of each tile
    axis_of: dict[str, Axis] = {}   # ... and the axis it is tiled along
    shared_by: dict[str, int] = {}  # a tensor split in per-tile shares (FU.T2') -> its stack
    for s_index, stack in enumerate(stacks):
        axis, n = stack.axis, stack.tiles
        staged: dict[str, str] = {}
        stage_ops: list[Op] = []
        for op_id in stack.ops:
            op = graph.op(op_id)
            length = op_rows(graph, op.id, axis)
            cuts = [_cut(length, n, i) for i in range(n)]
            for t in op.inputs:
                tensor = graph.tensor(t)
                if tensor.persistent and t not in staged:
                    staged[t] = t + STAGED_SUFFIX  # FU.T4: the stack's weights, staged once
                    new_tensors.append(Tensor(id=staged[t], kind=TensorKind.ACTIVATION, bytes=tensor.bytes,
                                              shape=tensor.shape, dtype=tensor.dtype, layer=tensor.layer))
                    stage_ops.append(Op(id=f"S:{t}", kind=OpKind.FORWARD, op_type=STAGE_OP_TYPE,
                                        inputs=(t,), outputs=(staged[t],), layer=op.layer,
                                        flops=0, macs=0))
            for t in op.outputs:
                tensor = graph.tensor(t)
                if tensor.persistent:
                    raise FusionError(f"op {op_id!r} writes persistent tensor {t!r}: not fusable",
                                      field="stacks", fix="cut the stack there")
                length_t = extent(tensor, axis)
                if length_t != length:  # FU.T2': per-tile shares of a tensor not along the axis
                    shared_by[t] = s_index
                    shares = [_cut(tensor.bytes, n, i) for i in range(n)]
                    tiles_of[t] = [tile_id(t, i) for i in range(n)]
                    new_tensors += [Tensor(id=tile_id(t, i), kind=tensor.kind, bytes=b - a, shape=(),
                                           dtype=tensor.dtype, layer=tensor.layer)
                                    for i, (a, b) in enumerate(shares)]
                    continue
                rows_of[t] = [_cut(length_t, n, i) for i in range(n)]
                axis_of[t] = axis
                tiles_of[t] = [tile_id(t, i) for i in range(n)]
                new_tensors += [_tile_tensor(tensor, axis, a, b, i) for i, (a, b) in enumerate(rows_of[t])]
            main = next((t for t in op.inputs if not graph.tensor(t).persistent), None)
            tiles = []
            for i, (a, b) in enumerate(cuts):
                inputs: list[str] = []
                reads: dict[str, int] = {}
                for t in op.inputs:
                    tensor = graph.tensor(t)
                    if tensor.persistent:
                        inputs.append(staged[t])
                        continue
                    if shared_by.get(t) == s_index:  # FU.T2': tile i reads tile i's share
                        inputs.append(tiles_of[t][i])
                        continue
                    if (tensor.kind is not TensorKind.ACTIVATION or extent(tensor, axis) is None
                            or t in shared_by or axis_of.get(t, axis) is not axis):
                        # Read whole (labels, a gradient, another stack's shares or tiles along
                        # another axis): every tile of it, if it is tiled (FU.T5).
                        inputs += tiles_of.get(t, [t])
                        continue
                    lo, hi = _input_rows(op, graph, axis, tensor, (a, b), t == main)
                    if t in rows_of:  # FU.T3: the tiles (of this stack or an earlier one) that cover [lo, hi)
                        for j, (ta, tb) in enumerate(rows_of[t]):
                            if ta < hi and lo < tb:
                                inputs.append(tiles_of[t][j])
                                part = _row_bytes(tensor, axis) * (min(hi, tb) - max(lo, ta))
                                if (min(hi, tb) - max(lo, ta)) != tb - ta:
                                    reads[tiles_of[t][j]] = part
                    else:  # FU.T3: a tensor made before the stack, read in part
                        inputs.append(t)
                        reads[t] = _row_bytes(tensor, axis) * (hi - lo)
                outputs = [tiles_of[t][i] for t in op.outputs]
                tiles.append(Op(id=tile_id(op_id, i), kind=op.kind, op_type=op.op_type,
                                inputs=tuple(dict.fromkeys(inputs)), outputs=tuple(outputs), layer=op.layer,
                                macs=_share(op.macs, b - a, length), flops=_share(op.flops, b - a, length),
                                dims=_tile_dims(op, graph, axis, a, b, length), members=op.members,
                                reads=reads))
            tiled_ops[op_id] = tiles
        staged_first[stack.ops[0]] = stage_ops
    ops: list[Op] = []
    for op in graph.ops:
        if op.id in staged_first:
            ops += staged_first[op.id]
        if op.id in tiled_ops:
            ops += tiled_ops[op.id]
            continue
        # FU.T5: an op outside the stacks reads every tile of a tiled tensor.
        inputs = [x for t in op.inputs for x in tiles_of.get(t, [t])]
        updates = op.updates
        if inputs != list(op.inputs):
            op = Op(id=op.id, kind=op.kind, op_type=op.op_type, inputs=tuple(inputs), outputs=op.outputs,
                    layer=op.layer, macs=op.macs, flops=op.flops, updates=updates, forward_of=op.forward_of,
                    dims=op.dims, cost=op.cost, members=op.members, reads=op.reads)
        ops.append(op)
    tensors = [t for t in graph.tensors if t.id not in tiles_of] + new_tensors
    meta = {**graph.meta, "fusion": plan.to_dict()}
    return TrainingGraph.build(graph.name, ops, tensors, meta)


def _row_bytes(tensor: Tensor, axis: Axis) -> int:
    length = extent(tensor, axis)
    assert length
    return tensor.bytes // length


def _tile_tensor(tensor: Tensor, axis: Axis, a: int, b: int, i: int) -> Tensor:
    index = _axis_index(tensor, axis)
    assert index is not None
    shape = list(tensor.shape)
    shape[index] = b - a
    return Tensor(id=tile_id(tensor.id, i), kind=tensor.kind, bytes=math.prod(shape) * tensor.dtype.itemsize,
                  shape=tuple(shape), dtype=tensor.dtype, layer=tensor.layer)


def _share(total: int, rows: int, length: int) -> int:
    """A tile's share of an op's MACs or FLOPs (FU.C1): exact where the rows divide it."""
    return -(-total * rows // length)


def _tile_dims(op: Op, graph: TrainingGraph, axis: Axis, a: int, b: int, length: int) -> dict[str, int]:
    """The loop dimensions of a tile (FU.C1): the tiled extent shrinks to the tile's rows."""
    dims = dict(op.dims)
    rows = b - a
    if axis is Axis.BATCH:
        if "B" in dims:
            dims["B"] = -(-dims["B"] * rows // length)
    elif "OY" in dims and dims["OY"] == length:
        main = next(graph.tensor(t) for t in op.inputs if not graph.tensor(t).persistent)
        lo, hi = _input_rows(op, graph, axis, main, (a, b), True)
        dims["OY"], dims["IY"] = rows, hi - lo
    elif "M" in dims and dims["M"] == length:
        dims["M"] = rows
    for key in ("N",):  # element counts of vector ops (LayerNormalization, Gather)
        if key in dims and "M" not in dims and "OY" not in dims:
            dims[key] = -(-dims[key] * rows // length)
    return dims


def stacks_of(graph: TrainingGraph) -> FusionPlan:
    """The fusion plan a tiled graph was made with (an empty plan for any other graph)."""
    data = graph.meta.get("fusion")
    return FusionPlan() if data is None else FusionPlan.from_dict(data, source=f"graph {graph.name!r}")


def layer_by_layer(graph: TrainingGraph) -> FusionPlan:
    """No stack: every op layer by layer."""
    del graph
    return FusionPlan()


def chains(graph: TrainingGraph, axis: Axis = Axis.ROWS) -> list[list[str]]:
    """The maximal runs of fusable, consecutive, chained forward ops (FU.S1): the candidates
    a stack is cut from."""
    runs: list[list[str]] = []
    current: list[str] = []
    made: set[str] = set()
    for op in graph.ops:
        if op.kind is not OpKind.FORWARD:
            continue
        ok = fusable(op, graph, axis) is None
        if ok and current and any(t in made for t in op.inputs):
            current.append(op.id)
            made.update(op.outputs)
            continue
        if len(current) > 1:
            runs.append(current)
        current, made = ([op.id], set(op.outputs)) if ok else ([], set())
    if len(current) > 1:
        runs.append(current)
    return runs


def chain_parts(graph: TrainingGraph, ops: Sequence[str]) -> list[list[str]]:
    """``ops`` (consecutive forward ops) cut into chains (FU.S1): a new part starts at each op
    that reads nothing the part's earlier ops make."""
    parts: list[list[str]] = []
    made: set[str] = set()
    for op_id in ops:
        op = graph.op(op_id)
        if not parts or not any(t in made for t in op.inputs):
            parts.append([])
            made = set()
        parts[-1].append(op_id)
        made.update(op.outputs)
    return parts


def plan_of(stacks: Iterable[Sequence[str]], tiles: int | Sequence[int], axis: Axis = Axis.ROWS) -> FusionPlan:
    """A plan from lists of op ids and a tile count (one for all, or one per stack)."""
    runs = [tuple(s) for s in stacks]
    counts = [tiles] * len(runs) if isinstance(tiles, int) else list(tiles)
    return FusionPlan(tuple(Stack(s, t, axis) for s, t in zip(runs, counts, strict=True)))
