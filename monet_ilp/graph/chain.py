"""Training chains: the graphs the chain DP solves exactly (``formulations/dp.md`` §1.3).

:func:`chain_graph` builds a node-link style chain ``F1..FL [loss] BL..B1`` with fixed
or seeded random costs and sizes; the batch runner's ``chain:`` graphs and the tests
use it.  Which graphs the DP accepts as chains is the DP's question
(:func:`monet_ilp.problems.p1.dp.chain_of`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from typing import cast

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import DType, Op, OpKind, Tensor, TensorKind, TrainingGraph
from monet_ilp.graph.node_link import node_op

__all__ = ["chain_graph"]


def chain_graph(
    length: int,
    *,
    costs: int | tuple[int, int] = 1,
    sizes: int | tuple[int, int] = 1,
    seed: int = 0,
    loss: bool = True,
    reads: str = "output",
    input_bytes: int = 0,
    op_costs: Mapping[str, int] | None = None,
    op_sizes: Mapping[str, int] | None = None,
    name: str | None = None,
) -> TrainingGraph:
    """A node-link style training chain ``F1..FL [loss] BL..B1`` (``formulations/dp.md`` §1.3).

    ``F1`` reads the graph input ``x`` when ``input_bytes > 0`` (else nothing), ``Fj``
    reads ``F(j-1)``, ``loss`` reads ``FL``, and ``Bi`` reads the gradient (``B(i+1)``,
    or ``loss`` for ``i = L``; nothing for ``BL`` without a loss) and, by ``reads``:

    * ``"output"``: ``Fi`` (Checkmate's linear graphs);
    * ``"input"``: ``F(i-1)`` (``x`` for ``B1``, if there is one);
    * ``"both"``: ``F(i-1)`` and ``Fi`` (rotor's chains).

    Every op has one output (``"<id>:out"``).

    Parameters
    ----------
    costs, sizes
        An int (every op the same: a *homogeneous* chain) or an inclusive range
        ``(low, high)`` drawn per op from ``random.Random(seed)``.
    op_costs, op_sizes
        Per-op overrides by op id (``"F1"``, ``"loss"``, ``"B3"``...).

    Returns
    -------
    TrainingGraph
        Forward ops of kind ``forward``, the loss of kind ``loss``, backward ops of kind
        ``backward_data``; ``meta["source"] = "chain_graph"``.
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise MonetError(f"length = {length!r} must be an integer >= 1", field="length",
                         fix="pass the number of forward ops")
    if reads not in ("output", "input", "both"):
        raise MonetError(f"reads = {reads!r}", field="reads", fix='use "output", "input" or "both"')
    rng = random.Random(seed)

    def draw(spec: int | tuple[int, int], what: str, low_limit: int) -> int:
        if isinstance(spec, int) and not isinstance(spec, bool):
            value = spec
        else:
            lo, hi = cast("tuple[int, int]", spec)  # a pair (a list from YAML too)
            value = lo + min(int(rng.random() * (hi - lo + 1)), hi - lo)
        if value < low_limit:
            raise MonetError(f"{what} = {value} must be >= {low_limit}", field=what,
                             fix=f"give {what} >= {low_limit}")
        return value

    names = [f"F{j}" for j in range(1, length + 1)] + (["loss"] if loss else [])
    names += [f"B{i}" for i in range(length, 0, -1)]
    cost = {v: draw(costs, "costs", 0) for v in names}
    size = {v: draw(sizes, "sizes", 1) for v in names}
    cost.update(op_costs or {})
    size.update(op_sizes or {})
    ops: list[Op] = []
    tensors: list[Tensor] = []

    def add(op_id: str, preds: list[str], *, backward: bool = False, kind: OpKind | None = None,
            graph_inputs: tuple[str, ...] = ()) -> None:
        op, tensor = node_op(op_id, cost=cost[op_id], size=size[op_id], inputs=preds, backward=backward)
        op = replace(op, inputs=graph_inputs + op.inputs, kind=kind or op.kind)
        ops.append(op)
        if tensor is not None:  # a size always gives an output
            tensors.append(tensor)

    x: tuple[str, ...] = ()
    if input_bytes:
        tensors.append(Tensor("x", TensorKind.ACTIVATION, int(input_bytes), dtype=DType.FP32))
        x = ("x",)
    for j in range(1, length + 1):
        add(f"F{j}", [f"F{j - 1}"] if j > 1 else [], graph_inputs=x if j == 1 else ())
    if loss:
        add("loss", [f"F{length}"], kind=OpKind.LOSS)
    for i in range(length, 0, -1):
        grad = [f"B{i + 1}"] if i < length else (["loss"] if loss else [])
        fwd = {"output": [i], "input": [i - 1], "both": [i - 1, i]}[reads]
        fwd_preds = [f"F{j}" for j in fwd if j >= 1]
        add(f"B{i}", grad + fwd_preds, backward=True,
            graph_inputs=x if (0 in fwd and i == 1) else ())
    meta = {"source": "chain_graph", "length": length, "seed": seed, "loss": loss, "reads": reads,
            "input_bytes": input_bytes,
            "costs": costs if isinstance(costs, int) else list(costs),
            "sizes": sizes if isinstance(sizes, int) else list(sizes)}
    return TrainingGraph.build(name or f"chain_L{length}_{reads}_s{seed}", ops, tensors, meta)
