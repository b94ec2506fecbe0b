"""Chen et al.'s activation checkpointing (2016) as P1 baselines: the sqrt(n) and greedy rules.

A heuristic backend (Instance -> Sequence): both rules cut the forward ops into
segments and keep only what crosses a segment boundary; :func:`rematerialize`
then runs the graph, recomputing dropped activations on demand in the backward
pass.  Reference: T. Chen, B. Xu, C. Zhang, C. Guestrin, "Training Deep Nets with
Sublinear Memory Cost", arXiv:1604.06174.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from collections.abc import Sequence as Seq
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import OpKind, TrainingGraph
from monet_ilp.heuristics.liveness import (
    SequenceCost,
    place_releases,
    replay,
    require_sequence_form,
)
from monet_ilp.schedule import Sequence

if TYPE_CHECKING:
    from monet_ilp.heuristics.clock import Clock
    from monet_ilp.instance import Instance


__all__ = [
    "chen_greedy_sequence",
    "chen_sqrt_sequence",
    "keep_across_segments",
    "plan_order",
    "rematerialize",
]

#: Op kinds of the forward pass: a dropped activation is held until its last reader
#: among these, and recomputed for any other reader.
FORWARD_PASS = (OpKind.FORWARD, OpKind.LOSS)


def chen_sqrt_sequence(instance: Instance) -> Sequence:
    """Chen's sqrt(n) checkpointing: ``round(sqrt(n))`` equal segments of the n forward ops.

    The forward ops (kind ``forward``, in graph order) are cut into ``k =
    round(sqrt(n))`` contiguous segments of near-equal length.  Only the tensors that
    cross a boundary are kept (:func:`keep_across_segments`); on a chain that is the
    output of each segment's last op, Chen's checkpoints.  The last segment is
    kept whole: the backward pass starts with it, so recomputing it could only add
    cost.  Everything else is freed after its last forward reader and recomputed on
    demand in the backward pass (:func:`rematerialize`).

    Parameters
    ----------
    instance
        A P1 instance (the sequence runs on the first core).

    Returns
    -------
    Sequence
        ``meta``: ``heuristic`` (``"sqrt"``), ``segments``, ``boundary_ops`` (last
        op of each segment but the last), ``kept`` (number of kept activations),
        and the claimed ``compute_cycles``, ``peak_bytes``, ``recomputations``.
    """
    require_sequence_form(instance, "sqrt")
    graph = instance.graph
    order = plan_order(graph)
    forward = [op for op in order if graph.op(op).kind is OpKind.FORWARD]
    k = max(1, round(math.sqrt(len(forward))))
    segment_of = {op: j * k // len(forward) for j, op in enumerate(forward)}
    return _sequence(instance, order, segment_of, {"heuristic": "sqrt", "segments": k})


def chen_greedy_sequence(
    instance: Instance, budget_bytes: int | None = None, *, max_thresholds: int = 512,
    deadline: Clock | None = None,
) -> Sequence:
    """Chen's greedy checkpointing, with the threshold searched for the budget.

    For a threshold ``b``, walk the forward ops in graph order adding up the bytes
    of their (non-persistent) outputs; when the running sum exceeds ``b``, the
    current op closes a segment and the sum restarts from 0.  Segments are then
    handled as in :func:`chen_sqrt_sequence` (the last one is kept whole).

    The running sum is always the total of a run of consecutive forward ops, so the
    segmentation only changes when ``b`` crosses such a total: the search tries
    ``b = 0`` and every distinct total of consecutive ops (the largest one is
    store-all: a single segment), at most ``max_thresholds`` of them (evenly spaced
    in sorted order when there are more), and evaluates each distinct segmentation.
    Chen et al. search ``b`` around ``sqrt(x * y)``; trying every breakpoint is
    exact for the rule and cheap at the sizes of interest.  The result is the
    candidate with the lowest compute cost whose peak fits ``budget_bytes`` (ties:
    lower peak); when none fits, the one with the smallest peak.

    Parameters
    ----------
    instance
        A P1 instance (the sequence runs on the first core).
    budget_bytes
        The memory to fit; default ``instance.budget_bytes``.
    max_thresholds
        Cap on the thresholds tried.
    deadline
        A :class:`~monet_ilp.engines.deadline.Deadline` (anything with ``passed()``):
        once it has passed, the search stops and returns the best candidate so far (at
        least one is always tried), so that a backend's time limit holds.

    Returns
    -------
    Sequence
        ``meta``: ``heuristic`` (``"greedy"``), ``threshold_bytes``,
        ``budget_bytes``, ``fits`` (whether the claimed peak is within the
        budget), ``candidates`` (distinct segmentations tried), ``segments``,
        ``boundary_ops``, ``kept``, the claimed ``compute_cycles``, ``peak_bytes``,
        ``recomputations``, and ``note`` when nothing fits.
    """
    require_sequence_form(instance, "greedy")
    graph = instance.graph
    budget = instance.budget_bytes if budget_bytes is None else int(budget_bytes)
    order = plan_order(graph)
    forward = [op for op in order if graph.op(op).kind is OpKind.FORWARD]
    out_bytes = [
        sum(graph.tensor(t).bytes for t in graph.op(op).outputs if not graph.tensor(t).persistent)
        for op in forward
    ]
    thresholds = _breakpoints(out_bytes, max_thresholds)

    best: tuple[tuple[int, int, int], Sequence] | None = None
    tried: set[tuple[int, ...]] = set()
    for b in thresholds:
        if best is not None and deadline is not None and deadline.passed():
            break
        segment_of = _greedy_segments(forward, out_bytes, b)
        signature = tuple(segment_of[op] for op in forward)
        if signature in tried:
            continue
        tried.add(signature)
        meta = {
            "heuristic": "greedy",
            "threshold_bytes": b,
            "budget_bytes": budget,
            "segments": max(signature, default=0) + 1,
        }
        candidate = _sequence(instance, order, segment_of, meta)
        cycles, peak = candidate.meta["compute_cycles"], candidate.meta["peak_bytes"]
        rank = (0, cycles, peak) if peak <= budget else (1, peak, cycles)
        if best is None or rank < best[0]:
            best = (rank, candidate)
    assert best is not None
    rank, chosen = best
    meta = dict(chosen.meta, fits=rank[0] == 0, candidates=len(tried))
    if rank[0] == 1:
        meta["note"] = (
            f"no threshold fits {budget} bytes; returned the smallest peak found "
            f"({chosen.meta['peak_bytes']} bytes)"
        )
    return Sequence(chosen.steps, meta=meta)


# ------------------------------------------------------------------ the executor
def plan_order(graph: TrainingGraph) -> list[str]:
    """The graph's op order with optimizer ops moved last (they already are in built graphs).

    Recomputing a forward op after the optimizer has updated a weight it reads would
    read the new weight (EV.E2 ``update_hazard``); running every optimizer op after the
    whole backward pass rules that out.

    Raises
    ------
    MonetError
        An optimizer op writes a non-persistent tensor that another op reads, so it
        cannot be moved.
    """
    optimizer = [op for op in graph.ops if op.kind is OpKind.OPTIMIZER]
    for op in optimizer:
        for t in op.outputs:
            if not graph.tensor(t).persistent and graph.tensor(t).consumers:
                raise MonetError(
                    f"optimizer op {op.id!r} writes {t!r}, which "
                    f"{graph.tensor(t).consumers[0]!r} reads",
                    field=f"ops.{op.id}.outputs",
                    fix="optimizer ops may only update persistent tensors in place",
                )
    rest = [op.id for op in graph.ops if op.kind is not OpKind.OPTIMIZER]
    return rest + [op.id for op in optimizer]


def keep_across_segments(graph: TrainingGraph, segment_of: dict[str, int]) -> set[str]:
    """Activations to keep when forward ops are cut into segments (Chen's checkpoints on a DAG).

    Kept: every output of the last segment, and every output of an earlier segment
    that a forward-pass op of a later segment reads (the loss counts as the last
    segment).  On a chain these are the segments' last outputs; on a DAG every
    tensor crossing a cut, so a segment can always be recomputed from kept tensors.
    Graph inputs and tensors not made by forward ops are always kept by
    :func:`rematerialize` and need not be listed.

    Parameters
    ----------
    graph
        The training graph.
    segment_of
        Segment index of each forward op (0, 1, ...).
    """
    last = max(segment_of.values(), default=0)
    keep: set[str] = set()
    for op_id, segment in segment_of.items():
        for t in graph.op(op_id).outputs:
            tensor = graph.tensor(t)
            if tensor.persistent:
                continue
            readers = [graph.op(c) for c in tensor.consumers]
            later = [
                segment_of.get(r.id, last) for r in readers if r.kind in FORWARD_PASS
            ]
            if segment == last or any(s > segment for s in later):
                keep.add(t)
    return keep


def rematerialize(graph: TrainingGraph, order: Seq[str], keep: Iterable[str]) -> list[str]:
    """Run ``order`` keeping ``keep``; recompute every other forward activation on demand.

    The on-demand rematerialisation executor, Chen's backward pass generalised to
    DAGs.  Activations made by forward ops and not in ``keep`` are dropped after
    their last reader of the forward pass (kinds ``forward`` and ``loss``; right
    after their producer if there is none).  Before each op of ``order`` runs, every
    non-resident input is made resident by recomputing its producer, whose own
    missing inputs are recomputed first (depth first, in input order).  A recomputed
    activation is then held until its last reader: it is dropped only once.  Graph
    inputs, and tensors made by any op that is not a forward op, are never dropped.
    Frees are placed afterwards, by :func:`~monet_ilp.heuristics.liveness.place_releases`.

    Parameters
    ----------
    graph
        The training graph.
    order
        Every op once, in a valid order: the first computations.
    keep
        Forward activations not to drop.

    Returns
    -------
    list of str
        The computations, recomputations included, in order.

    Raises
    ------
    MonetError
        A recomputation would read a weight that an optimizer op has already
        updated (put optimizer ops last, :func:`plan_order`).
    """
    keep = set(keep)
    position = {op: i for i, op in enumerate(order)}
    drop_after: dict[int, list[str]] = {}
    for tensor in graph.tensors:
        if tensor.persistent or tensor.producer is None or tensor.id in keep:
            continue
        if graph.op(tensor.producer).kind is not OpKind.FORWARD:
            continue
        forward_reads = [position[c] for c in tensor.consumers if graph.op(c).kind in FORWARD_PASS]
        drop_after.setdefault(max([position[tensor.producer]] + forward_reads), []).append(tensor.id)

    resident = {t.id for t in graph.tensors if not t.persistent and t.producer is None}
    updated: set[str] = set()
    plan: list[str] = []

    def run(op_id: str) -> None:
        plan.append(op_id)
        op = graph.op(op_id)
        resident.update(t for t in op.outputs if not graph.tensor(t).persistent)
        updated.update(op.updates)

    def missing(op_id: str) -> list[str]:
        return [
            t for t in dict.fromkeys(graph.op(op_id).inputs)
            if not graph.tensor(t).persistent and t not in resident
        ]

    def recompute(tensor: str) -> None:
        # Iterative depth-first: a long dropped chain must not hit the recursion limit.
        stack: list[tuple[str, bool]] = [(tensor, False)]
        while stack:
            t, expanded = stack.pop()
            if t in resident:
                continue
            producer = graph.tensor(t).producer
            if producer is None or graph.op(producer).kind is not OpKind.FORWARD:
                raise AssertionError(f"{t!r} was dropped but cannot be recomputed")
            if expanded:
                stale = updated.intersection(graph.op(producer).inputs)
                if stale:
                    raise MonetError(
                        f"recomputing {producer!r} would read {min(stale)!r} "
                        "after its update",
                        field=f"ops.{producer}",
                        fix="run optimizer ops after the backward pass (plan_order)",
                    )
                run(producer)
                continue
            stack.append((t, True))
            stack.extend((u, False) for u in reversed(missing(producer)))

    for i, op_id in enumerate(order):
        for t in missing(op_id):
            recompute(t)
        run(op_id)
        resident.difference_update(drop_after.get(i, ()))
    return plan


# ------------------------------------------------------------------ helpers
def _breakpoints(out_bytes: list[int], limit: int) -> list[int]:
    """0 and every distinct total of consecutive entries, thinned evenly to ``limit``."""
    prefix = [0]
    for nbytes in out_bytes:
        prefix.append(prefix[-1] + nbytes)
    n = len(prefix)
    totals = sorted({0} | {prefix[j] - prefix[i] for i in range(n) for j in range(i + 1, n)})
    if len(totals) > max(limit, 2):
        step = (len(totals) - 1) / (max(limit, 2) - 1)
        totals = sorted({totals[round(k * step)] for k in range(limit)})
    # Largest first: store-all is tried first and wins ties on cost.
    return totals[::-1]


def _greedy_segments(forward: list[str], out_bytes: list[int], threshold: int) -> dict[str, int]:
    segment_of: dict[str, int] = {}
    segment, running = 0, 0
    for op, nbytes in zip(forward, out_bytes, strict=True):
        segment_of[op] = segment
        running += nbytes
        if running > threshold:
            segment, running = segment + 1, 0
    return segment_of


def _sequence(
    instance: Instance, order: list[str], segment_of: dict[str, int], meta: dict[str, Any]
) -> Sequence:
    graph = instance.graph
    keep = keep_across_segments(graph, segment_of)
    plan = rematerialize(graph, order, keep)
    steps = place_releases(graph, plan)
    cost: SequenceCost = replay(instance, steps)
    ops = list(segment_of)
    boundaries = [op for op, nxt in itertools.pairwise(ops) if segment_of[op] != segment_of[nxt]]
    return Sequence(
        steps,
        meta={
            **meta,
            "boundary_ops": boundaries,
            "kept": len(keep),
            "compute_cycles": cost.compute_cycles,
            "peak_bytes": cost.peak_bytes,
            "recomputations": cost.recomputations,
        },
    )
