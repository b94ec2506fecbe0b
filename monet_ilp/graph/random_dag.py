"""Random layered DAGs, the synthetic benchmark graphs of the rematerialisation literature.

A graph builder: :func:`random_layered` makes a seeded
:class:`~monet_ilp.graph.ir.TrainingGraph` in the style of Moccasin's random layered
graphs, with node-link style ops (one output per node, supplied costs), so it
round-trips through :mod:`monet_ilp.graph.node_link` unchanged.  See
``formulations/random_dags.md`` for the generative process and its edge density.
"""

from __future__ import annotations

import math
import random
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import TrainingGraph
from monet_ilp.graph.node_link import node_op

__all__ = ["random_layered"]


def random_layered(
    n: int,
    *,
    seed: int = 0,
    width: tuple[int, int] = (1, 8),
    edge_prob: float = 0.2,
    skip: int = 2,
    duration: tuple[int, int] = (1, 100),
    size: tuple[int, int] = (1, 100),
) -> TrainingGraph:
    """Generate a random layered DAG with exactly ``n`` nodes and a single sink.

    The generative process:

    1. ``n - 1`` nodes are placed in layers ``0, 1, ...``, each of a width drawn
       uniformly from ``width`` (the last layer takes whatever is left).
    2. Every node of layer ``i > 0`` reads one node of layer ``i - 1`` chosen
       uniformly (so every node outside layer 0 has a predecessor), plus each other
       node of layers ``i - skip .. i - 1`` independently with probability
       ``edge_prob``.
    3. Node ``n - 1`` is the sink, alone in a final layer: it reads every node that
       has no successor (all of the last layer, and any earlier node that no
       later node picked).  So the graph has exactly one sink, and every node
       reaches it.

    Each node's compute cost (``op.cost``) and output size (bytes) are integers
    drawn uniformly from the inclusive ranges ``duration`` and ``size``.

    Node ids are ``"0" .. str(n - 1)`` in layer order, which is also the op order
    (a topological order).  Ops are forward, ``op_type`` ``"node"``, ``layer``
    ``"layer<i>"``, with one shapeless fp32 activation output each, exactly as
    :func:`~monet_ilp.graph.node_link.from_node_link` builds them.

    The graph depends only on the arguments: the generator draws from
    ``random.Random(seed).random()``, whose sequence Python keeps stable across
    versions (integers are derived from it here rather than with ``randint``,
    whose algorithm may change).

    Parameters
    ----------
    n
        Number of nodes, sink included; at least 2.
    seed
        Seed of the random stream.
    width
        Inclusive range ``(min, max)`` of layer widths; ``1 <= min <= max``.
    edge_prob
        Probability of each optional edge, in ``[0, 1]``.
    skip
        How many earlier layers a node may read from (1 = only the previous
        layer); at least 1.
    duration
        Inclusive range of compute costs; ``0 <= min <= max`` (zero-cost ops,
        like reshapes, are legitimate).
    size
        Inclusive range of output sizes in bytes; ``1 <= min <= max``.

    Returns
    -------
    TrainingGraph
        Named ``f"random_layered_n{n}_s{seed}"``; ``meta`` records ``source``
        (``"random_layered"``), every parameter, and the resulting ``layers`` (sink
        layer included) and ``edges`` counts.

    Raises
    ------
    MonetError
        A parameter is out of range; the error's ``field`` names it.

    Notes
    -----
    With the defaults, |E| is about 2.6 n (mean 2.53 n at n = 100 rising to
    2.67 n at n = 1000, over 20 seeds; see ``formulations/random_dags.md``).  In
    expectation a node outside layer 0 has about
    ``1 + edge_prob * (skip * mean_width - 1) = 2.6`` predecessors, and the sink
    reads the nodes left without a successor (about 0.1 n of them).
    """
    _check_int("n", n, minimum=2)
    _check_int("seed", seed)
    _check_range("width", width, minimum=1)
    _check_probability("edge_prob", edge_prob)
    _check_int("skip", skip, minimum=1)
    _check_range("duration", duration, minimum=0)
    _check_range("size", size, minimum=1)

    rng = random.Random(seed)

    def uniform_int(low: int, high: int) -> int:
        return low + min(int(rng.random() * (high - low + 1)), high - low)

    layers: list[list[int]] = []
    placed = 0
    while placed < n - 1:
        layer_width = min(uniform_int(*width), n - 1 - placed)
        layers.append(list(range(placed, placed + layer_width)))
        placed += layer_width

    preds: dict[int, list[int]] = {v: [] for v in range(n)}
    has_successor = [False] * n
    for i, layer in enumerate(layers[1:], start=1):
        previous = layers[i - 1]
        candidates = [u for earlier in layers[max(0, i - skip) : i] for u in earlier]
        for v in layer:
            chosen = {previous[uniform_int(0, len(previous) - 1)]}
            for u in candidates:
                # Draw for every candidate, even the chosen one, so that one node's
                # mandatory pick does not shift the random stream of the others.
                if rng.random() < edge_prob:
                    chosen.add(u)
            preds[v] = sorted(chosen)
            for u in chosen:
                has_successor[u] = True
    sink = n - 1
    preds[sink] = [v for v in range(sink) if not has_successor[v]]

    ops, tensors = [], []
    layer_of = {v: i for i, layer in enumerate(layers) for v in layer}
    layer_of[sink] = len(layers)
    for v in range(n):
        op, tensor = node_op(
            str(v),
            cost=uniform_int(*duration),
            size=uniform_int(*size),
            inputs=[str(u) for u in preds[v]],
            layer=f"layer{layer_of[v]}",
        )
        assert tensor is not None  # a node with a size writes one tensor
        ops.append(op)
        tensors.append(tensor)

    meta: dict[str, Any] = {
        "source": "random_layered",
        "n": n,
        "seed": seed,
        "width": list(width),
        "edge_prob": edge_prob,
        "skip": skip,
        "duration": list(duration),
        "size": list(size),
        "layers": len(layers) + 1,
        "edges": sum(len(p) for p in preds.values()),
    }
    return TrainingGraph.build(f"random_layered_n{n}_s{seed}", ops, tensors, meta)


# -------------------------------------------------------------------- validation
def _bad(name: str, value: Any, requirement: str) -> MonetError:
    return MonetError(
        f"{name} = {value!r}: {requirement}",
        field=name,
        fix=f"pass {name} {requirement.removeprefix('must be ')}",
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(name: str, value: Any, minimum: int | None = None) -> None:
    if not _is_int(value):
        raise _bad(name, value, "must be an integer")
    if minimum is not None and value < minimum:
        raise _bad(name, value, f"must be an integer >= {minimum}")


def _check_range(name: str, value: Any, minimum: int) -> None:
    requirement = f"must be a pair (low, high) of integers with {minimum} <= low <= high"
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise _bad(name, value, requirement)
    low, high = value
    if not (_is_int(low) and _is_int(high) and minimum <= low <= high):
        raise _bad(name, value, requirement)


def _check_probability(name: str, value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise _bad(name, value, "must be a probability in [0, 1]")
