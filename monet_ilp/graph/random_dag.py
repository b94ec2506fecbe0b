"""Random layered DAGs, the synthetic benchmark graphs of the rematerialisation literature.

Graph builders that make seeded :class:`~monet_ilp.graph.ir.TrainingGraph` objects
with node-link style ops (one output per node, supplied costs), so they round-trip
through :mod:`monet_ilp.graph.node_link` unchanged:

- :func:`random_layered`, the project's first generator (layer widths drawn from a
  range, one mandatory edge from the previous layer plus optional edges);
- :func:`random_layered_literature`, the parameterisation of the literature's random
  layered graphs (Gagrani et al., 2022, Appendix A; the graphs Moccasin evaluates
  on): width ratio, level variance, edge density, skip-connection density
  (``formulations/random_dags.md``, RD.L1-RD.C1).

See ``formulations/random_dags.md`` for both generative processes.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import TrainingGraph
from monet_ilp.graph.node_link import node_op

__all__ = [
    "DEFAULT_WIDTH_RATIO",
    "MOCCASIN_WIDTH_RATIO",
    "consecutive_edge_count",
    "random_layered",
    "random_layered_literature",
]

#: Width ratio of each random layered graph Moccasin published (Bartan et al., 2023), by
#: ``n``; :func:`random_layered_literature` uses it when ``width_ratio`` is not given.
MOCCASIN_WIDTH_RATIO: Mapping[int, float] = {100: 0.27, 250: 0.43, 500: 0.36, 1000: 0.31}
#: Width ratio for any other ``n``: about the mean of the four published ones (0.3425).
DEFAULT_WIDTH_RATIO = 0.34


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


def random_layered_literature(
    n: int,
    *,
    seed: int = 0,
    width_ratio: float | None = None,
    level_variance: float = 0.75,
    edge_density: float = 0.2,
    skip_density: float = 0.14,
    duration: tuple[int, int] = (1, 100),
    size: tuple[int, int] = (1, 100),
) -> TrainingGraph:
    """Generate a random layered DAG in the literature's parameterisation (RD.L1-RD.C1).

    The random layered graphs of Gagrani et al. (2022, Appendix A), on which Moccasin
    (Bartan et al., 2023) evaluates, with the four parameters Moccasin's instance
    names carry (``w``, ``nlv``, ``ed``, ``scd``).  The generative process
    (``formulations/random_dags.md``):

    1. (RD.L1) Node 0 is the single source, alone in level 0; node ``n - 1`` is the
       single sink, alone in the last level.  The ``n - 2`` other nodes go into
       interior levels; the width ratio ``W`` sets their expected number
       ``L = ceil(sqrt(n * (1 - W) / W))``, so that ``W / (1 - W)`` is the mean
       level width ``n / L`` over the number of levels.
    2. (RD.L2) With ``w = n / L``, each interior level's width is drawn uniformly
       from the integers ``lo .. hi``, ``lo = max(1, ceil(w * (1 - level_variance)))``
       and ``hi = max(lo, floor(w * (1 + level_variance)) - 1)``; levels are filled
       in order and the last interior level takes what is left.
    3. (RD.E1) Two consecutive levels of widths ``a`` and ``b`` get exactly
       ``round(edge_density * a * b + (1 - edge_density) * max(a, b))`` edges
       (:func:`consecutive_edge_count`): from
       ``max(a, b)`` (every node of both levels touched) at density 0 to all
       ``a * b`` at density 1.  Each node of the wider level gets an equal share
       (the remainder going to nodes drawn at random) and connects to that many
       consecutive nodes of the narrower level around its proportional position.
       So every node but the source reads a node of the previous level, and every
       node but the sink is read by one of the next level.
    4. (RD.E2) Skip connections: ``round(E1 * skip_density / (1 - skip_density))``
       further edges, ``E1`` the number from step 3, so that they are a fraction
       ``skip_density`` of all edges (rounded, halves up).  Each joins a node drawn
       uniformly from an interior level drawn uniformly to a node of a later
       interior level at least two levels further on (drawn uniformly); a pair
       already joined is drawn again.  With fewer than three interior levels there
       are none.
    5. (RD.C1) Every node gets an integer compute cost (``op.cost``) and output size
       (bytes) drawn uniformly from the inclusive ranges ``duration`` and ``size``.

    Node ids are ``"0" .. str(n - 1)`` in level order, which is also the op order
    (a topological order); ops are forward, ``op_type`` ``"node"``, ``layer``
    ``"layer<i>"`` (``layer0`` the source), exactly as
    :func:`~monet_ilp.graph.node_link.from_node_link` builds them.  Every draw comes
    from ``random.Random(seed).random()``, so the graph depends only on the
    arguments.

    Parameters
    ----------
    n
        Number of nodes, source and sink included; at least 2.
    seed
        Seed of the random stream.
    width_ratio
        ``W`` in ``(0, 1)``: larger means fewer, wider levels.  ``None`` takes
        :data:`MOCCASIN_WIDTH_RATIO` ``[n]`` for Moccasin's sizes (0.27 at n = 100,
        0.43 at 250, 0.36 at 500, 0.31 at 1000) and :data:`DEFAULT_WIDTH_RATIO`
        otherwise.
    level_variance
        Relative spread of the level widths around ``n / L``, in ``[0, 1]``
        (0: every full level has the same width).
    edge_density
        Density of the edges between consecutive levels, in ``[0, 1]``.
    skip_density
        Fraction of all edges that skip at least one level, in ``[0, 1)``.
    duration
        Inclusive range of compute costs; ``0 <= min <= max``.
    size
        Inclusive range of output sizes in bytes; ``1 <= min <= max``.

    Returns
    -------
    TrainingGraph
        Named like Moccasin's instance plus the seed,
        ``random_layered_n{n}_w{W}_nlv{level_variance}_ed{edge_density}_scd{skip_density}_s{seed}``
        (numbers in ``:g`` format, e.g. ``random_layered_n250_w0.43_nlv0.75_ed0.2_scd0.14_s0``);
        ``meta`` records ``source`` (``"random_layered_literature"``), every
        parameter (``width_ratio`` as used), and the resulting ``levels`` (source and
        sink levels included), ``edges`` and ``skip_edges`` counts.

    Raises
    ------
    MonetError
        A parameter is out of range; the error's ``field`` names it.

    Notes
    -----
    Only when nearly every pair of nodes two or more levels apart is already joined
    can step 4 stop short of its count: it gives up after ``20 * count + 100``
    draws, and ``meta["skip_edges"]`` says how many it placed.
    """
    _check_int("n", n, minimum=2)
    _check_int("seed", seed)
    if width_ratio is None:
        width_ratio = MOCCASIN_WIDTH_RATIO.get(n, DEFAULT_WIDTH_RATIO)
    _check_fraction(
        "width_ratio", width_ratio, "must be a number in (0, 1)", open_low=True, open_high=True
    )
    _check_fraction("level_variance", level_variance, "must be a number in [0, 1]")
    _check_fraction("edge_density", edge_density, "must be a number in [0, 1]")
    _check_fraction("skip_density", skip_density, "must be a number in [0, 1)", open_high=True)
    _check_range("duration", duration, minimum=0)
    _check_range("size", size, minimum=1)

    rng = random.Random(seed)

    def uniform_int(low: int, high: int) -> int:
        return low + min(int(rng.random() * (high - low + 1)), high - low)

    # RD.L1-L2: the levels.
    expected_levels = max(1, math.ceil(math.sqrt(n * (1 - width_ratio) / width_ratio)))
    mean_width = n / expected_levels
    low = max(1, math.ceil(mean_width * (1 - level_variance)))
    high = max(low, math.floor(mean_width * (1 + level_variance)) - 1)
    levels: list[list[int]] = [[0]]
    placed = 1
    while placed < n - 1:
        width = min(uniform_int(low, high), n - 1 - placed)
        levels.append(list(range(placed, placed + width)))
        placed += width
    levels.append([n - 1])

    # RD.E1: consecutive levels.
    preds: dict[int, set[int]] = {v: set() for v in range(n)}
    consecutive = 0
    for earlier, later in itertools.pairwise(levels):
        for u, v in _consecutive_edges(earlier, later, edge_density, uniform_int):
            preds[v].add(u)
            consecutive += 1

    # RD.E2: skip connections between interior levels 1 .. len(levels) - 2.
    skip_target = math.floor(consecutive * skip_density / (1 - skip_density) + 0.5)
    skips = 0
    interior = len(levels) - 2
    if interior >= 3 and skip_target > 0:
        for _ in range(20 * skip_target + 100):
            i = uniform_int(1, interior - 2)
            j = uniform_int(i + 2, interior)
            u = levels[i][uniform_int(0, len(levels[i]) - 1)]
            v = levels[j][uniform_int(0, len(levels[j]) - 1)]
            if u not in preds[v]:
                preds[v].add(u)
                skips += 1
                if skips == skip_target:
                    break

    # RD.C1: costs and sizes, in node order.
    ops, tensors = [], []
    level_of = {v: i for i, level in enumerate(levels) for v in level}
    for v in range(n):
        op, tensor = node_op(
            str(v),
            cost=uniform_int(*duration),
            size=uniform_int(*size),
            inputs=[str(u) for u in sorted(preds[v])],
            layer=f"layer{level_of[v]}",
        )
        assert tensor is not None  # a node with a size writes one tensor
        ops.append(op)
        tensors.append(tensor)

    meta: dict[str, Any] = {
        "source": "random_layered_literature",
        "n": n,
        "seed": seed,
        "width_ratio": width_ratio,
        "level_variance": level_variance,
        "edge_density": edge_density,
        "skip_density": skip_density,
        "duration": list(duration),
        "size": list(size),
        "levels": len(levels),
        "edges": consecutive + skips,
        "skip_edges": skips,
    }
    name = (
        f"random_layered_n{n}_w{width_ratio:g}_nlv{level_variance:g}_ed{edge_density:g}"
        f"_scd{skip_density:g}_s{seed}"
    )
    return TrainingGraph.build(name, ops, tensors, meta)


def consecutive_edge_count(a: int, b: int, edge_density: float) -> int:
    """Edges between consecutive levels of widths ``a`` and ``b`` (RD.E1).

    Parameters
    ----------
    a, b
        The two levels' widths (positive).
    edge_density
        In ``[0, 1]``.

    Returns
    -------
    int
        ``round(edge_density * a * b + (1 - edge_density) * max(a, b))``, halves up;
        between ``max(a, b)`` and ``a * b``.
    """
    exact = edge_density * a * b + (1 - edge_density) * max(a, b)
    return min(a * b, max(max(a, b), math.floor(exact + 0.5)))


def _consecutive_edges(
    earlier: list[int],
    later: list[int],
    edge_density: float,
    uniform_int: Callable[[int, int], int],
) -> list[tuple[int, int]]:
    """The edges from ``earlier`` to ``later`` (RD.E1), as ``(u, v)`` pairs."""
    total = consecutive_edge_count(len(earlier), len(later), edge_density)
    wide, narrow = (earlier, later) if len(earlier) >= len(later) else (later, earlier)
    b, s = len(wide), len(narrow)
    share = [total // b] * b
    # The remainder goes to distinct nodes of the wider level, drawn without replacement.
    pool = list(range(b))
    for k in range(total % b):
        pick = uniform_int(k, b - 1)
        pool[k], pool[pick] = pool[pick], pool[k]
        share[pool[k]] += 1
    edges = []
    for i, count in enumerate(share):
        # The nearest narrow position to i's, halves up: consecutive centres differ by
        # at most 1 (s <= b), so every narrow node is some wide node's centre.
        centre = 0 if b == 1 else (2 * i * (s - 1) + b - 1) // (2 * (b - 1))
        start = min(max(centre - (count - 1) // 2, 0), s - count)
        for k in range(start, start + count):
            x, y = wide[i], narrow[k]
            edges.append((x, y) if wide is earlier else (y, x))
    return edges


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


def _check_fraction(
    name: str, value: Any, requirement: str, *, open_low: bool = False, open_high: bool = False
) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or value > 1
        or (open_low and value == 0)
        or (open_high and value == 1)
    ):
        raise _bad(name, value, requirement)
