"""Import and export of networkx node-link JSON graphs in the Checkmate/Moccasin form.

A graph builder: it turns the DAG files of the rematerialisation literature into a
:class:`~monet_ilp.graph.ir.TrainingGraph`, and writes any TrainingGraph back out.

Accepted input
--------------
The JSON that ``networkx.node_link_data`` writes for a directed graph (simple or
multi-), in either of two spellings of the node attributes:

=================  ============================  =============================
                   Form A ("checkmate")          Form B ("moccasin")
=================  ============================  =============================
compute cost       ``cost_cpu`` (number >= 0)    ``duration`` (number >= 0)
output size        ``cost_ram`` (bytes, > 0)     ``out_cost`` (bytes, > 0)
=================  ============================  =============================

Optional node attributes: ``backward`` (bool, default false), ``name`` (str),
``layer`` (str) and ``virtual`` (bool; see :func:`to_node_link`).  Files written by
:func:`to_node_link` also carry the monet-ilp extras below, so that a round trip
keeps what the IR knows of each op; Checkmate and Moccasin readers ignore them,
and files without them import as if they were absent:

===============  =====================================================  ===========
attribute        meaning                                                default
===============  =====================================================  ===========
``kind``         op kind: ``forward``, ``backward_data``,               from
                 ``backward_weight``, ``loss`` or ``optimizer``         ``backward``
``op_type``      the op's type (``Gemm+Relu``, ``cross_entropy``, ...)  ``"node"``
``macs``         multiply-accumulates (int >= 0)                        0
``flops``        floating-point operations (int >= 0)                   0
``members``      source (ONNX) node names fused into the op (list)      ``[name]``
===============  =====================================================  ===========

``kind`` and ``backward`` must agree when both are given: ``backward`` is false
exactly for ``forward`` and ``loss`` (the loss closes the forward pass).  Edges are read
from ``"links"`` or ``"edges"``; each ``{"source": u, "target": v}`` means *v reads
u's output* (files written with ``node_link_data(G, source="0", target="1")``, as the
literature's random layered DAGs are, carry ``{"0": u, "1": v}``: read the same way).
Parallel edges of a multigraph (keys ``"0"``, ``"1"``, ...) collapse into one.  Node
ids may be ints or strings; op ids are ``str(id)``; a node without ``"id"`` is numbered
by its position in ``"nodes"``, as ``networkx.node_link_graph`` numbers it.  A node's
``name`` may be an integer (kept as its string).

If the file carries ``"order"`` (in ``data["graph"]`` or at the top level), it is
the op order and must be a topological order of every node; otherwise a stable
topological order of the node list is used.

Mapping onto the IR
-------------------
Each node becomes one op (``kind``, ``op_type``, ``macs``, ``flops`` and ``layer``
from the attributes above; without ``kind`` the op is ``forward`` or, when
``backward`` is true, ``backward_data``; ``cost`` = the compute cost, kept ``int``
when it is one) with exactly one shapeless fp32 output tensor named
:func:`output_tensor_id` (kind ``activation`` or, when ``backward`` is true,
``activation_grad``; ``bytes`` = the output size).  ``members`` become the op's
members; without them a node ``name`` distinct from its id is kept as the op's
single ``members`` entry.

A round trip therefore keeps every op's id, kind, type, layer, MACs, FLOPs, cost
and members, and the op-level edges; it does not keep tensors without a producer
(graph inputs, weights), several outputs of one op (they merge into one), tensor
shapes and kinds beyond activation / activation_grad, ``dims`` or ``forward_of``.

Errors
------
Every failure names the file (when read from one), the field and the fix:
:class:`~monet_ilp.errors.InputFormatError` for malformed input (not JSON, missing
``nodes``/``links``, a node without cost or size, wrong value types, an unknown
``kind`` or one that contradicts ``backward``, an ``order`` that is not a
permutation of the nodes) and :class:`~monet_ilp.errors.GraphError` for a
structurally wrong graph (size <= 0, negative cost, negative or fractional
``macs``/``flops``, an edge naming an unknown node, a self loop, a cycle, an
``order`` that is not topological).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from monet_ilp.errors import GraphError, InputFormatError, MonetError
from monet_ilp.graph.ir import DType, Op, OpKind, Tensor, TensorKind, TrainingGraph, read_json

__all__ = [
    "from_node_link",
    "node_op",
    "output_tensor_id",
    "save_node_link",
    "to_node_link",
]

# The two accepted spellings of each required node attribute, Form A first.
COST_KEYS = ("cost_cpu", "duration")
SIZE_KEYS = ("cost_ram", "out_cost")

# Op kinds exported with ``"backward": false``: the loss closes the forward pass.
_FORWARD_HALF = (OpKind.FORWARD, OpKind.LOSS)


# ----------------------------------------------------------------------- building
def output_tensor_id(op_id: str) -> str:
    """Id of the single output tensor of a node-link op (``"<op id>:out"``)."""
    return f"{op_id}:out"


def node_op(
    op_id: str,
    *,
    cost: int | float,
    size: int | None,
    inputs: Sequence[str] = (),
    backward: bool = False,
    layer: str = "",
    name: str | None = None,
    kind: OpKind | None = None,
    op_type: str = "node",
    macs: int = 0,
    flops: int = 0,
    members: Sequence[str] | None = None,
) -> tuple[Op, Tensor | None]:
    """Make the op (and its output tensor) of one node of a node-link style DAG.

    Shared by :func:`from_node_link` and the random generator so that both produce
    identical ops, and random graphs survive a node-link round trip unchanged.

    Parameters
    ----------
    op_id
        The op id (the node id as a string).
    cost
        Compute cost of the node, stored in :attr:`Op.cost`.
    size
        Bytes of the node's output; ``None`` makes an op with no output (a
        ``virtual`` node, see :func:`to_node_link`).
    inputs
        Op ids of the node's predecessors, in the order the op reads them.
    backward
        Whether the node belongs to the backward pass (its output is then an
        ``activation_grad``).
    layer
        Layer label copied to the op and its output.
    name
        The node's name; kept as the op's only ``members`` entry when it differs
        from ``op_id`` and ``members`` is not given.
    kind
        The op kind; ``None`` means ``backward_data`` if ``backward`` else
        ``forward``.  The caller keeps it consistent with ``backward``.
    op_type, macs, flops
        Copied to the op (a node-link file supplies them only as extras).
    members
        The op's members; ``None`` derives them from ``name``.

    Returns
    -------
    tuple[Op, Tensor | None]
        The op and its output tensor (``None`` when ``size`` is ``None``).
    """
    tensor = None
    if size is not None:
        tensor = Tensor(
            id=output_tensor_id(op_id),
            kind=TensorKind.ACTIVATION_GRAD if backward else TensorKind.ACTIVATION,
            bytes=size,
            shape=(),
            dtype=DType.FP32,
            layer=layer,
        )
    if kind is None:
        kind = OpKind.BACKWARD_DATA if backward else OpKind.FORWARD
    if members is None:
        members = (name,) if name is not None and name != op_id else ()
    op = Op(
        id=op_id,
        kind=kind,
        op_type=op_type,
        inputs=tuple(output_tensor_id(p) for p in inputs),
        outputs=(tensor.id,) if tensor is not None else (),
        layer=layer,
        macs=macs,
        flops=flops,
        cost=cost,
        members=tuple(members),
    )
    return op, tensor


# ------------------------------------------------------------------------ import
def from_node_link(
    data_or_path: str | os.PathLike[str] | Mapping[str, Any], *, name: str | None = None,
    source_key: str | None = None, target_key: str | None = None, id_key: str = "id",
) -> TrainingGraph:
    """Build a TrainingGraph from a node-link JSON graph (Checkmate or Moccasin form).

    Parameters
    ----------
    data_or_path
        A path to a JSON file, or the already parsed JSON object.
    name
        Graph name; defaults to ``data["graph"]["name"]``, then the file stem, then
        ``"node_link"``.
    source_key, target_key
        The keys of a link's ends (``node_link_data``'s ``source=``/``target=``).  By
        default ``"source"``/``"target"``, else detected: the two keys (in the file's
        order) whose values name nodes in every link.
    id_key
        The key of a node's id (``node_link_data``'s ``name=``); a node without it is
        numbered by its position.

    Returns
    -------
    TrainingGraph
        One op per node, in the file's ``order`` if it has one.  ``meta`` is
        ``{"source": "node-link", "form": "checkmate" | "moccasin", "has_order": bool}``.

    Raises
    ------
    InputFormatError
        The file is unreadable or malformed (see the module docstring).
    GraphError
        The graph is structurally wrong: bad sizes or costs, dangling edges, self
        loops, cycles, a non-topological ``order``.
    """
    if isinstance(data_or_path, (str, os.PathLike)):
        path = Path(data_or_path)
        file: str | None = str(path)
        default_name = path.stem
        data = read_json(path)
    elif isinstance(data_or_path, Mapping):
        file, default_name, data = None, "node_link", data_or_path
    else:
        raise InputFormatError(
            f"expected a path or a parsed node-link object, got {type(data_or_path).__name__}",
            fix="pass a file path or the dict json.load returned",
        )
    try:
        return _parse(data, name, default_name, (source_key, target_key), id_key)
    except MonetError as err:
        if file:
            err.with_file(file)
        raise


def _parse(data: Any, name: str | None, default_name: str,
           ends: tuple[str | None, str | None] = (None, None), id_key: str = "id") -> TrainingGraph:
    if not isinstance(data, Mapping):
        raise InputFormatError(
            f"the top level is a JSON {type(data).__name__}, not an object",
            field="(top level)",
            fix='pass networkx node-link JSON: {"directed": true, "nodes": [...], "links": [...]}',
        )
    if data.get("directed") is False:
        raise InputFormatError(
            "the graph is undirected; a training graph needs edge directions",
            field="directed",
            fix="export a networkx DiGraph or MultiDiGraph",
        )
    graph_attrs: Mapping[str, Any] = data["graph"] if isinstance(data.get("graph"), Mapping) else {}
    nodes = _parse_nodes(data, id_key)
    preds = _parse_edges(data, nodes, ends)

    order_field, order = _find_order(data, graph_attrs)
    if order is not None:
        order_ids = _parse_order(order, order_field, nodes)
    else:
        order_ids = list(nodes)

    ops, tensors = [], []
    for op_id in order_ids:
        node = nodes[op_id]
        op, tensor = node_op(op_id, inputs=preds[op_id], **node)
        ops.append(op)
        if tensor is not None:
            tensors.append(tensor)
    # A file is Form A as soon as one node uses a Checkmate spelling.
    uses_form_a = any(
        COST_KEYS[0] in raw or SIZE_KEYS[0] in raw for raw in data["nodes"]
    )
    meta = {
        "source": "node-link",
        "form": "checkmate" if uses_form_a else "moccasin",
        "has_order": order is not None,
    }
    graph_name = name or str(graph_attrs.get("name") or "") or default_name
    # reorder=True detects cycles (raising GraphError with the cycle); for a valid
    # topological `order` the stable sort returns that order unchanged.
    graph = TrainingGraph.build(graph_name, ops, tensors, meta, reorder=True)
    if order is not None:
        _check_topological(order_ids, preds, order_field)
    # Rebuild in the final op order, with tensors in the order of their producers:
    # consumers and tensors are then listed as an export lists its nodes, so a
    # node-link round trip reproduces the graph exactly.
    tensor_of = {t.producer: t for t in graph.tensors}
    ordered_tensors = [tensor_of[op.id] for op in graph.ops if op.id in tensor_of]
    return TrainingGraph.build(graph_name, graph.ops, ordered_tensors, meta)


def _parse_nodes(data: Mapping[str, Any], id_key: str = "id") -> dict[str, dict[str, Any]]:
    """Map op id -> keyword arguments of :func:`node_op` (minus ``inputs``)."""
    if "nodes" not in data:
        raise InputFormatError(
            'missing "nodes"',
            field="nodes",
            fix='pass networkx node-link JSON, which lists the nodes under "nodes"',
        )
    raw_nodes = data["nodes"]
    if not isinstance(raw_nodes, list):
        raise InputFormatError(
            f'"nodes" must be a list, got {type(raw_nodes).__name__}',
            field="nodes",
            fix="list one object per node",
        )
    if not raw_nodes:
        raise InputFormatError("the graph has no nodes", field="nodes", fix="add at least one node")
    nodes: dict[str, dict[str, Any]] = {}
    raw_id_of: dict[str, Any] = {}
    by_position: set[str] = set()
    for i, raw in enumerate(raw_nodes):
        if not isinstance(raw, Mapping):
            raise InputFormatError(
                f"node {i} is a JSON {type(raw).__name__}, not an object",
                field=f"nodes[{i}]",
                fix='give each node as {"id": ..., "cost_cpu": ..., "cost_ram": ...}',
            )
        # Without an "id", networkx's node_link_graph numbers the node by its position.
        raw_id = raw.get(id_key, i)
        op_id = _node_id(raw_id, f"nodes[{i}].{id_key}")
        if op_id in nodes:
            raise InputFormatError(
                f"node ids {raw_id_of[op_id]!r} and {raw_id!r} both give op id {op_id!r}"
                + (" (a node without an id is numbered by its position)"
                   if id_key not in raw or op_id in by_position else ""),
                field=f"nodes[{i}].{id_key}",
                fix="give every node a unique id, or none at all (they are then numbered by position)",
            )
        raw_id_of[op_id] = raw_id
        if id_key not in raw:
            by_position.add(op_id)
        where = f"nodes.{op_id}"
        kind, backward = _kind_and_backward(raw, op_id, where)
        virtual = _flag(raw, "virtual", where)
        nodes[op_id] = {
            "cost": _cost(raw, op_id, where),
            # A virtual node (written by to_node_link for ops without outputs) has
            # no output tensor; its placeholder size is not read.
            "size": None if virtual else _size(raw, op_id, where),
            "backward": backward,
            "layer": _optional_str(raw, "layer", where) or "",
            "name": _name(raw, where),
            "kind": kind,
            "op_type": _optional_str(raw, "op_type", where) or "node",
            "macs": _count(raw, "macs", op_id, where),
            "flops": _count(raw, "flops", op_id, where),
            "members": _members(raw, where),
        }
    return nodes


def _node_id(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputFormatError(
            f"node id {value!r} is a {type(value).__name__}; ids must be ints or strings",
            field=where,
            fix="use integer or string node ids",
        )
    return str(value)


def _lookup(raw: Mapping[str, Any], keys: tuple[str, str], op_id: str, what: str, where: str
            ) -> tuple[str, Any]:
    for key in keys:
        if key in raw:
            return key, raw[key]
    raise InputFormatError(
        f"node {op_id!r} has no {what}: give {keys[0]!r} (Checkmate form) "
        f"or {keys[1]!r} (Moccasin form)",
        field=where,
        fix=f"add {keys[0]!r} or {keys[1]!r} to every node",
    )


def _number(value: Any, key: str, op_id: str, where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputFormatError(
            f"node {op_id!r}: {key} = {value!r} is not a finite number",
            field=f"{where}.{key}",
            fix=f"give {key} as a number",
        )
    return value


def _cost(raw: Mapping[str, Any], op_id: str, where: str) -> int | float:
    key, value = _lookup(raw, COST_KEYS, op_id, "compute cost", where)
    cost = _number(value, key, op_id, where)
    if cost < 0:
        raise GraphError(
            f"node {op_id!r} has negative compute cost {key} = {cost!r}",
            field=f"{where}.{key}",
            fix="give a compute cost >= 0",
        )
    return cost


def _size(raw: Mapping[str, Any], op_id: str, where: str) -> int:
    key, value = _lookup(raw, SIZE_KEYS, op_id, "output size", where)
    size = _number(value, key, op_id, where)
    if size <= 0:
        raise GraphError(
            f"node {op_id!r} has output size {key} = {size!r}; sizes must be positive",
            field=f"{where}.{key}",
            fix="give every output a size of at least 1 byte",
        )
    if size != int(size):
        raise GraphError(
            f"node {op_id!r} has fractional output size {key} = {size!r}",
            field=f"{where}.{key}",
            fix="give sizes in whole bytes (scale them if they are in MB or similar)",
        )
    # Integral floats (e.g. 1024.0 from a float-typed exporter) are whole bytes.
    return int(size)


def _kind_and_backward(
    raw: Mapping[str, Any], op_id: str, where: str
) -> tuple[OpKind | None, bool]:
    """The node's op kind (``None`` if not given) and its ``backward`` flag.

    A kind without ``backward`` implies the flag; both given must agree, since the
    flag alone decides what Checkmate/Moccasin readers of the same file see.
    """
    if raw.get("kind") is None:
        return None, _flag(raw, "backward", where)
    value = raw["kind"]
    kinds = [k.value for k in OpKind]
    if value not in kinds:
        raise InputFormatError(
            f"node {op_id!r}: kind = {value!r} is not an op kind",
            field=f"{where}.kind",
            fix=f"use one of: {', '.join(kinds)} (or drop the attribute)",
        )
    kind = OpKind(value)
    implied = kind not in _FORWARD_HALF
    backward = _flag(raw, "backward", where) if "backward" in raw else implied
    if backward != implied:
        raise InputFormatError(
            f"node {op_id!r} has kind {kind.value!r} but backward = {str(backward).lower()}",
            field=f"{where}.backward",
            fix="set backward to false for forward and loss nodes and to true for the "
            "other kinds, or drop one of the two attributes",
        )
    return kind, backward


def _count(raw: Mapping[str, Any], key: str, op_id: str, where: str) -> int:
    """An optional whole, non-negative count (``macs``, ``flops``); 0 when absent or null."""
    if raw.get(key) is None:
        return 0
    value = _number(raw[key], key, op_id, where)
    if value < 0 or value != int(value):
        raise GraphError(
            f"node {op_id!r} has {key} = {value!r}; it must be a whole number >= 0",
            field=f"{where}.{key}",
            fix=f"give {key} as a non-negative integer, or drop it",
        )
    # Integral floats (1e6 from a float-typed exporter) are whole counts.
    return int(value)


def _members(raw: Mapping[str, Any], where: str) -> tuple[str, ...] | None:
    """The node's ``members`` list, or ``None`` to derive members from its name."""
    value = raw.get("members")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
        raise InputFormatError(
            f"members = {value!r} is not a list of strings",
            field=f"{where}.members",
            fix="write members as a list of node names, or drop it",
        )
    return tuple(value)


def _flag(raw: Mapping[str, Any], key: str, where: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise InputFormatError(
            f"{key} = {value!r} is not a boolean",
            field=f"{where}.{key}",
            fix=f"write {key} as true or false",
        )
    return value


def _name(raw: Mapping[str, Any], where: str) -> str | None:
    """A node's ``name``: a string, or an integer as the literature's random DAGs write it."""
    value = raw.get("name")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _optional_str(raw, "name", where)


#: The keys of an edge's ends: networkx's defaults, then the ``"0"``/``"1"`` that files
#: written with ``node_link_data(G, source="0", target="1")`` carry.
EDGE_KEYS = (("source", "target"), ("0", "1"))


def _optional_str(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputFormatError(
            f"{key} = {value!r} is not a string",
            field=f"{where}.{key}",
            fix=f"write {key} as a string",
        )
    return value


def _edge_keys(raw_edges: list[Any], nodes: Mapping[str, Any], key: str,
               ends: tuple[str | None, str | None]) -> tuple[str, str] | None:
    """The keys of the links' ends: given, the default or ``"0"``/``"1"``, or detected
    as the only two keys whose values name nodes in every link (``None``: none found)."""
    if ends[0] is not None or ends[1] is not None:
        if ends[0] is None or ends[1] is None:
            raise InputFormatError("give both the source and the target key of the links", field=key,
                                   fix="pass --source-key and --target-key together")
        return ends[0], ends[1]
    links = [raw for raw in raw_edges if isinstance(raw, Mapping)]
    if not links:
        return EDGE_KEYS[0]
    for pair in EDGE_KEYS:
        if any(pair[0] in raw and pair[1] in raw for raw in links):
            return pair

    def names_node(value: Any) -> bool:
        return (isinstance(value, (int, str)) and not isinstance(value, bool)) and str(value) in nodes

    candidates = [k for k in links[0] if all(k in raw and names_node(raw[k]) for raw in links)]
    return (candidates[0], candidates[1]) if len(candidates) == 2 else None


def _parse_edges(data: Mapping[str, Any], nodes: Mapping[str, Any],
                 ends: tuple[str | None, str | None] = (None, None)) -> dict[str, list[str]]:
    """Map op id -> predecessor op ids, in file order, parallel edges collapsed."""
    key = "links" if "links" in data else "edges" if "edges" in data else None
    if key is None:
        raise InputFormatError(
            'missing "links" (or "edges")',
            field="links",
            fix='list the edges under "links", as networkx node_link_data does (an empty '
            "list if there are none)",
        )
    raw_edges = data[key]
    if not isinstance(raw_edges, list):
        raise InputFormatError(
            f'"{key}" must be a list, got {type(raw_edges).__name__}',
            field=key,
            fix='list one {"source": u, "target": v} object per edge',
        )
    preds: dict[str, dict[str, None]] = {op_id: {} for op_id in nodes}
    keys = _edge_keys(raw_edges, nodes, key, ends)
    for i, raw in enumerate(raw_edges):
        where = f"{key}[{i}]"
        if keys is None or not isinstance(raw, Mapping) or keys[0] not in raw or keys[1] not in raw:
            wanted = "a source and a target" if keys is None else f"the keys {keys[0]!r} and {keys[1]!r}"
            raise InputFormatError(
                f"edge {i} is not an object with {wanted}",
                field=where,
                fix='give each edge as {"source": u, "target": v} (or {"0": u, "1": v}), or name the '
                    "keys of the ends (--source-key / --target-key)",
            )
        found: list[str] = []
        for end, name in zip(keys, ("source", "target"), strict=True):
            op_id = _node_id(raw[end], f"{where}.{end}")
            if op_id not in nodes:
                raise GraphError(
                    f"edge {i} has {name} {raw[end]!r}, which is not a node",
                    field=f"{where}.{end}",
                    fix="declare the node or remove the edge",
                )
            found.append(op_id)
        source, target = found
        if source == target:
            raise GraphError(
                f"edge {i} is a self loop on node {raw[keys[0]]!r}",
                field=where,
                fix="remove the self loop; a node cannot read its own output",
            )
        if nodes[source]["size"] is None:
            raise GraphError(
                f"edge {i} leaves virtual node {raw[keys[0]]!r}, which has no output",
                field=where,
                fix="remove the edge, or drop the node's \"virtual\" flag and give it a size",
            )
        preds[target][source] = None  # a dict keeps file order and collapses duplicates
    return {op_id: list(p) for op_id, p in preds.items()}


def _find_order(data: Mapping[str, Any], graph_attrs: Mapping[str, Any]) -> tuple[str, Any]:
    if "order" in graph_attrs:
        return "graph.order", graph_attrs["order"]
    return "order", data.get("order")


def _parse_order(order: Any, where: str, nodes: Mapping[str, Any]) -> list[str]:
    fix = "list every node id exactly once, or drop the order"
    if not isinstance(order, list):
        raise InputFormatError(
            f"the order is a {type(order).__name__}, not a list of node ids", field=where, fix=fix
        )
    ids: list[str] = []
    seen: set[str] = set()
    for i, value in enumerate(order):
        op_id = _node_id(value, f"{where}[{i}]")
        if op_id not in nodes:
            raise InputFormatError(
                f"the order names {value!r}, which is not a node", field=f"{where}[{i}]", fix=fix
            )
        if op_id in seen:
            raise InputFormatError(
                f"the order lists node {value!r} twice", field=f"{where}[{i}]", fix=fix
            )
        seen.add(op_id)
        ids.append(op_id)
    missing = [op_id for op_id in nodes if op_id not in seen]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise InputFormatError(
            f"the order leaves out {len(missing)} node(s): {shown}", field=where, fix=fix
        )
    return ids


def _check_topological(order_ids: list[str], preds: Mapping[str, list[str]], where: str) -> None:
    position = {op_id: i for i, op_id in enumerate(order_ids)}
    for op_id in order_ids:
        for pred in preds[op_id]:
            if position[pred] > position[op_id]:
                raise GraphError(
                    f"the order puts node {op_id!r} before its predecessor {pred!r} "
                    f"(edge {pred!r} -> {op_id!r})",
                    field=where,
                    fix="give a topological order, or drop it to let monet-ilp choose one",
                )


# ------------------------------------------------------------------------ export
def to_node_link(graph: TrainingGraph) -> dict[str, Any]:
    """Export a TrainingGraph as node-link JSON in the Checkmate form (Form A).

    One node per op, in op order: ``id`` (the op id), ``name`` (the op's single
    ``members`` entry if it has exactly one, else the op id), ``cost_cpu``
    (``op.cost``, or ``op.flops`` when the op has no supplied cost), ``cost_ram``
    (total bytes of the op's outputs), ``backward``, and the extras ``kind``,
    ``op_type``, ``layer``, ``macs``, ``flops`` and (when the op has any)
    ``members``, which :func:`from_node_link` reads back (see the module
    docstring for what a round trip keeps).

    ``backward`` is true for every op outside the forward half of the iteration,
    i.e. every kind except ``forward`` and ``loss`` (the loss closes the forward
    pass).  Optimizer updates therefore count as backward.

    Ops with no outputs (e.g. optimizer updates that rewrite persistent tensors in
    place) get ``cost_ram = 1`` -- Checkmate/Moccasin need a positive size -- and
    ``"virtual": true``; :func:`from_node_link` turns them back into ops without
    outputs.  Edges run producer -> consumer, one per pair of ops, listed by
    consumer in op order; tensors with no producer (graph inputs, weights) give no
    edge.  ``graph.order`` is the op order.  The edge list is under ``"links"``, the
    key older networkx (and Checkmate/Moccasin) files use; networkx >= 3.6 reads it
    with ``node_link_graph(data, edges="links")``.

    Parameters
    ----------
    graph
        Any TrainingGraph.

    Returns
    -------
    dict
        JSON-serialisable node-link data.
    """
    nodes = []
    for op in graph.ops:
        node: dict[str, Any] = {
            "id": op.id,
            "name": op.members[0] if len(op.members) == 1 else op.id,
            "cost_cpu": op.cost if op.cost is not None else op.flops,
            "cost_ram": sum(graph.tensor(t).bytes for t in op.outputs) or 1,
            "backward": op.kind not in _FORWARD_HALF,
            "kind": str(op.kind),
            "op_type": op.op_type,
            "layer": op.layer,
            "macs": op.macs,
            "flops": op.flops,
        }
        if op.members:
            node["members"] = list(op.members)
        if not op.outputs:
            node["virtual"] = True
        nodes.append(node)
    links: list[dict[str, str]] = []
    for op in graph.ops:
        producers = dict.fromkeys(
            p for t in op.inputs if (p := graph.tensor(t).producer) is not None
        )
        links.extend({"source": p, "target": op.id} for p in producers)
    return {
        "directed": True,
        "multigraph": False,
        "graph": {"name": graph.name, "order": [op.id for op in graph.ops]},
        "nodes": nodes,
        "links": links,
    }


def save_node_link(graph: TrainingGraph, path: str | os.PathLike[str]) -> None:
    """Write :func:`to_node_link` of ``graph`` to ``path`` as JSON.

    Parameters
    ----------
    graph
        Any TrainingGraph.
    path
        Destination file; overwritten if it exists.
    """
    Path(path).write_text(json.dumps(to_node_link(graph), indent=1) + "\n")
