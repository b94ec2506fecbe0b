"""P1 sequences from a plan of computations: frees right after last reads, and their replay.

Shared by the baseline heuristics (store-all, Chen): a heuristic decides *what to
compute when*; this module places every :class:`~monet_ilp.schedule.Release` by
liveness and replays the result under ``formulations/evaluator.md`` (EV.E3) to report
its compute cost and peak.  The evaluator remains the witness; these numbers are
what the heuristics claim.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from monet_ilp.errors import MonetError
from monet_ilp.schedule import Compute, Release

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.instance import Instance

__all__ = [
    "SequenceCost",
    "place_releases",
    "replay",
    "require_sequence_form",
    "sequence_form_applies",
]


@dataclass(frozen=True)
class SequenceCost:
    """What a P1 sequence costs under EV.E3.

    Attributes
    ----------
    compute_cycles
        Sum of the costs of every computation, recomputations included.
    peak_bytes
        Largest resident set (plus the running op's outputs) while any op runs.
    recomputations
        Number of computations beyond the first of each op.
    """

    compute_cycles: int
    peak_bytes: int
    recomputations: int


def sequence_form_applies(instance: Instance) -> bool:
    """Whether a P1 :class:`~monet_ilp.schedule.Sequence` can express a schedule of ``instance``.

    EV.E3 runs a sequence on a single core whose memory holds the graph inputs.
    """
    return len(instance.cores) == 1 and instance.cores[0].memory == instance.input_home


def require_sequence_form(instance: Instance, heuristic: str) -> None:
    """Raise :class:`MonetError` unless :func:`sequence_form_applies`."""
    if not sequence_form_applies(instance):
        raise MonetError(
            f"{heuristic} makes a one-core P1 sequence, but instance {instance.name!r} has "
            f"{len(instance.cores)} core(s) and its graph inputs start in {instance.input_home!r}",
            field="heuristic",
            fix="use a P1 instance (one core whose memory holds the graph inputs), or store_all",
        )


def place_releases(
    graph: TrainingGraph, computations: Iterable[str]
) -> tuple[Compute | Release, ...]:
    """Interleave frees into a plan: each copy of a node's value is released right after its last reader.

    P1's values are node-level (``formulations/p1_problem.md``, "Data"): the
    non-persistent outputs of a node are computed, kept and freed together, as in every
    P1 model.  A *copy* of a node's value starts when the node runs and lives until the
    last computation that reads any of its outputs before the node runs again; all of
    them are released right after that computation, or right after the node when nothing
    reads them (Checkmate's convention).  A graph input is a value of its own: it is
    released after its last reader, and one that nothing reads after the first
    computation, as in TG.M1 of ``formulations/training_graph.md``.

    Parameters
    ----------
    graph
        The training graph the computations belong to.
    computations
        Op ids in execution order; an op that appears again is a recomputation.
        Every read must follow a computation of its producer (or be a graph input).

    Returns
    -------
    tuple of Compute and Release
        The steps of a :class:`~monet_ilp.schedule.Sequence`.  After each
        computation come the releases of its dead inputs (in input order), then of
        its dead outputs.
    """
    plan = list(computations)

    Value = tuple[bool, str]  # (is a graph input, its tensor's id / its node's op id)

    def value_of(t: str) -> Value | None:
        tensor = graph.tensor(t)
        if tensor.persistent:
            return None
        return (True, t) if tensor.producer is None else (False, tensor.producer)

    members: dict[Value, list[str]] = {}  # value -> its non-persistent tensors, in output order
    for tensor in graph.tensors:
        if not tensor.persistent and tensor.producer is None:
            members[(True, tensor.id)] = [tensor.id]
    for op in graph.ops:
        outs = [t for t in dict.fromkeys(op.outputs) if not graph.tensor(t).persistent]
        if outs:
            members[(False, op.id)] = outs

    # release_after[i]: tensors whose current copy dies right after step i.
    release_after: list[list[str]] = [[] for _ in plan]
    last_read: dict[Value, int] = {}  # value -> last reader of its current copy
    born: dict[Value, int] = {}  # value -> position of its current copy's producer (-1: input)

    def close(value: Value) -> None:
        end = last_read.pop(value, born[value])
        release_after[max(end, 0)].extend(members[value])

    for value in members:
        if value[0]:
            born[value] = -1
    for i, op_id in enumerate(plan):
        op = graph.op(op_id)
        for t in op.inputs:
            read = value_of(t)
            if read is not None:
                last_read[read] = i
        node = (False, op_id)
        if node in members:
            if node in born:  # a recomputation: the previous copy ends before it
                close(node)
            born[node] = i
    for value in born:
        close(value)

    steps: list[Compute | Release] = []
    for i, op_id in enumerate(plan):
        steps.append(Compute(op_id))
        op = graph.op(op_id)
        dying = set(release_after[i])
        ordered = [t for t in dict.fromkeys(op.inputs + op.outputs) if t in dying]
        # Unread graph inputs die at step 0 without being touched by the op; the other
        # outputs of a node read here die with the ones it reads.
        ordered += sorted(dying.difference(ordered))
        steps.extend(Release(t) for t in ordered)
    return tuple(steps)


def replay(instance: Instance, steps: Iterable[Compute | Release]) -> SequenceCost:
    """Cost and peak of a P1 sequence on the instance's first core (EV.E3 semantics).

    The peak includes the persistent tensors when the instance models them in the
    core's memory (EV.E1.5).

    No check is made beyond what is needed to count: use
    :func:`monet_ilp.evaluate.evaluate` to verify a sequence.
    """
    graph = instance.graph
    core = instance.cores[0]
    resident = {t.id for t in graph.tensors if not t.persistent and t.producer is None}
    held = sum(graph.tensor(t).bytes for t in resident)
    if instance.persistent_home == core.memory:  # EV.E1.5: modelled, and held in this memory
        held += sum(t.bytes for t in graph.tensors if t.persistent)
    peak = 0  # EV.E3 checks memory while an op runs, not before the first one
    cycles = 0
    runs: dict[str, int] = {}
    for step in steps:
        if isinstance(step, Compute):
            op = graph.op(step.op)
            cycles += instance.cost(op.id, core.id).cycles
            runs[op.id] = runs.get(op.id, 0) + 1
            new = [
                t for t in dict.fromkeys(op.outputs)
                if not graph.tensor(t).persistent and t not in resident
            ]
            held += sum(graph.tensor(t).bytes for t in new)
            resident.update(new)
            peak = max(peak, held)
        elif step.tensor in resident:
            resident.remove(step.tensor)
            held -= graph.tensor(step.tensor).bytes
    return SequenceCost(
        compute_cycles=cycles,
        peak_bytes=peak,
        recomputations=sum(runs.values()) - len(runs),
    )
