"""The store-all baseline: every op runs once and every activation stays until its last reader.

A heuristic backend (Instance -> Schedule): :func:`store_all_sequence` is the P1
reference that defines the default budgets, :func:`store_all_schedule` its
multi-core (P3) counterpart, a list scheduler with greedy layer-to-core allocation.
Neither recomputes nor offloads, so both may exceed a small memory capacity; the
evaluator reports it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from monet_ilp.errors import MonetError
from monet_ilp.graph.ir import Op, OpKind
from monet_ilp.heuristics.liveness import (
    place_releases,
    replay,
    require_sequence_form,
    sequence_form_applies,
)
from monet_ilp.schedule import Free, OpRun, Schedule, Sequence, Transfer

if TYPE_CHECKING:
    from monet_ilp.instance import Instance

__all__ = ["store_all", "store_all_schedule", "store_all_sequence"]


def store_all(instance: Instance) -> Sequence | Schedule:
    """The store-all baseline in the form the instance calls for.

    :func:`store_all_sequence` when the sequence form applies
    (:func:`sequence_form_applies`), otherwise :func:`store_all_schedule`.
    """
    if sequence_form_applies(instance):
        return store_all_sequence(instance)
    return store_all_schedule(instance)


def store_all_sequence(instance: Instance) -> Sequence:
    """Every op once, in graph order, on the first core; each tensor freed after its last reader.

    Non-persistent tensors are released right after their last reader (right after
    their producer when nothing reads them, e.g. the loss value), so the sequence's
    peak is the store-all peak of the graph (TG.M1 in ``formulations/training_graph.md``;
    plus the persistent bytes if the instance keeps them in the core's memory).

    Parameters
    ----------
    instance
        A one-core instance whose core memory holds the graph inputs (P1, P2).

    Returns
    -------
    Sequence
        ``meta`` holds ``heuristic`` (``"store_all"``) and the claimed
        ``compute_cycles``, ``peak_bytes`` and ``recomputations`` (0).

    Raises
    ------
    MonetError
        The instance has several cores, or its graph inputs start elsewhere.
    """
    require_sequence_form(instance, "store_all_sequence")
    steps = place_releases(instance.graph, [op.id for op in instance.graph.ops])
    cost = replay(instance, steps)
    return Sequence(
        steps,
        meta={
            "heuristic": "store_all",
            "compute_cycles": cost.compute_cycles,
            "peak_bytes": cost.peak_bytes,
            "recomputations": cost.recomputations,
        },
    )


def store_all_schedule(
    instance: Instance, *, allocate: Literal["layer", "op"] = "layer"
) -> Schedule:
    """List-schedule every op once, in graph order, over the cores (the P3 store-all baseline).

    Each op starts as soon as its core is free and its inputs have arrived in the
    core's memory, and runs on the core chosen as follows:

    * ``allocate="layer"`` (default): the first op of each layer in graph order (its
      forward op) goes to the core, among those it is costed on, where it would
      *finish* earliest; every later op of the same layer (its dX, dW and optimizer
      ops) follows it onto that core when it is costed there.  This is MONET's
      layer-to-core allocation: the saved activations a layer's backward reads are
      already in its core's memory.  Ops with an empty ``layer`` choose on their own.
    * ``allocate="op"``: every op chooses its earliest-finishing core on its own
      (better for graphs whose ``layer`` is not a network layer, e.g. the ranks of
      random layered DAGs).

    Ties go to the core listed first in the instance.  An input without a copy in
    the core's memory is transferred, as early as its source copy and the links
    allow, along the route of earliest arrival (possibly several hops, e.g. SRAM ->
    DRAM -> SRAM) from any memory holding a copy; of parallel links the one that
    delivers first is used, and each link carries one transfer at a time.  Graph inputs start
    in ``instance.input_home``.  Every copy is freed when its last reader or its last
    outgoing transfer ends.  An op reading a persistent tensor made in the iteration
    (a weight gradient) waits for its producer, and an optimizer op for every run
    that reads the tensors it updates.  Nothing is pinned: persistent tensors stay in
    ``persistent_home`` and ops use their unpinned costs.

    Parameters
    ----------
    instance
        An instance with one or more cores.
    allocate
        ``"layer"`` or ``"op"``, see above.

    Returns
    -------
    Schedule
        ``meta`` holds ``heuristic`` (``"store_all"``), ``allocate``, the claimed
        ``latency_cycles`` and ``compute_cycles``, and ``core_of_layer``.  Memory
        capacities are not taken into account: on a small memory the schedule
        violates ``capacity``, which the evaluator reports.

    Raises
    ------
    MonetError
        ``allocate`` is unknown, or some input cannot reach the memory of any core
        its reader is costed on (no chain of links).
    """
    if allocate not in ("layer", "op"):
        raise MonetError(
            f"unknown allocation {allocate!r}", field="allocate", fix='use "layer" or "op"'
        )
    state = _ListState(instance)
    core_of_layer: dict[str, str] = {}
    for op in instance.graph.ops:
        candidates = tuple(c.id for c in instance.cores if c.id in instance.costs[op.id])
        chosen = core_of_layer.get(op.layer) if allocate == "layer" and op.layer else None
        if chosen is not None and chosen in candidates:
            candidates = (chosen,)
        trials = [state.trial(op, core) for core in candidates]
        if not any(trials):
            raise MonetError(
                f"op {op.id!r} cannot get its inputs into the memory of any core it runs on",
                field=f"links (op {op.id})",
                fix="add links so that every memory reaches every core's memory",
            )
        best = min((t for t in trials if t is not None), key=lambda t: t.end)
        state.commit(op, best)
        if allocate == "layer" and op.layer:
            core_of_layer.setdefault(op.layer, best.core)
    runs, transfers, frees = state.result()
    return Schedule(
        ops=runs,
        transfers=transfers,
        frees=frees,
        meta={
            "heuristic": "store_all",
            "allocate": allocate,
            "latency_cycles": max([r.end for r in runs] + [t.end for t in transfers], default=0),
            "compute_cycles": sum(r.end - r.start for r in runs),
            "core_of_layer": core_of_layer,
        },
    )


# ----------------------------------------------------------------- list scheduling
@dataclass
class _Trial:
    """The outcome of placing one op on one core, not yet committed."""

    core: str
    start: int
    end: int
    transfers: list[Transfer] = field(default_factory=list)


class _ListState:
    """Busy times of cores and links, and where each tensor has (or will have) a copy."""

    def __init__(self, instance: Instance):
        self.instance = instance
        self.graph = instance.graph
        self.core_free = {c.id: 0 for c in instance.cores}
        self.link_free = {l.id: 0 for l in instance.links}
        # tensor -> memory -> ready time of its copy there; a copy is never made twice.
        self.copies: dict[str, dict[str, int]] = {}
        # (tensor, memory) -> end of the last run or transfer that reads the copy.
        self.last_use: dict[tuple[str, str], int] = {}
        # persistent tensor -> end of the last run reading it (optimizer hazard).
        self.read_end: dict[str, int] = {}
        # persistent tensor made during the iteration (weight gradient) -> end of its producer.
        self.made_at: dict[str, int] = {}
        self.runs: list[OpRun] = []
        self.transfers: list[Transfer] = []
        for t in self.graph.tensors:
            if not t.persistent and t.producer is None:
                self.copies[t.id] = {instance.input_home: 0}
        self.neighbours: dict[str, list[tuple[str, str]]] = {m.id: [] for m in instance.memories}
        for link in instance.links:
            for a in link.endpoints:
                for b in link.endpoints:
                    if a != b:
                        self.neighbours[a].append((link.id, b))

    # ---------------------------------------------------------------- trials
    def trial(self, op: Op, core: str) -> _Trial | None:
        """Earliest start and end of ``op`` on ``core`` given the commitments so far."""
        memory = self.instance.core(core).memory
        link_free = dict(self.link_free)
        start = self.core_free[core]
        planned: list[Transfer] = []
        for t in dict.fromkeys(op.inputs):
            if self.graph.tensor(t).persistent:
                # No copy witnesses a weight gradient: wait for the run that makes it.
                start = max(start, self.made_at.get(t, 0))
                continue
            route = self._fetch(t, memory, link_free)
            if route is None:
                return None
            for hop in route:
                link_free[hop.link] = hop.end
            planned += route
            start = max(start, route[-1].end if route else self.copies[t][memory])
        if op.kind is OpKind.OPTIMIZER:
            start = max([start] + [self.read_end.get(t, 0) for t in op.updates])
        end = start + self.instance.cost(op.id, core).cycles
        return _Trial(core=core, start=start, end=end, transfers=planned)

    def _fetch(self, tensor: str, dst: str, link_free: dict[str, int]) -> list[Transfer] | None:
        """Transfers that bring ``tensor`` to ``dst`` earliest ([] if a copy is there or coming).

        Dijkstra over memories from every memory holding a copy (labelled with its
        ready time); a hop over link ``l`` arrives at ``max(t, free(l)) + cycles``.
        Memories that already hold a copy are never entered (no duplicate copies).
        """
        holders = self.copies.get(tensor, {})
        if dst in holders:
            return []
        nbytes = self.graph.tensor(tensor).bytes
        arrival: dict[str, int] = dict(holders)
        came_from: dict[str, tuple[str, str]] = {}  # memory -> (link, previous memory)
        heap = [(r, m) for m, r in sorted(holders.items())]
        heapq.heapify(heap)
        done: set[str] = set()
        while heap:
            time, memory = heapq.heappop(heap)
            if memory in done:
                continue
            done.add(memory)
            if memory == dst:
                break
            for link_id, nxt in self.neighbours[memory]:
                if nxt in holders or nxt in done:
                    continue
                link = self.instance.link(link_id)
                at = max(time, link_free[link_id]) + link.transfer_cycles(nbytes)
                if at < arrival.get(nxt, at + 1):
                    arrival[nxt] = at
                    came_from[nxt] = (link_id, memory)
                    heapq.heappush(heap, (at, nxt))
        if dst not in done:
            return None
        path: list[tuple[str, str, str]] = []
        memory = dst
        while memory not in holders:
            link_id, previous = came_from[memory]
            path.append((link_id, previous, memory))
            memory = previous
        # Re-time hop by hop: a link with three or more endpoints may carry two hops.
        route: list[Transfer] = []
        free = dict(link_free)
        time = holders[memory]
        for link_id, src, hop_dst in reversed(path):
            start = max(time, free[link_id])
            time = start + self.instance.link(link_id).transfer_cycles(nbytes)
            free[link_id] = time
            route.append(
                Transfer(start=start, end=time, tensor=tensor, src=src, dst=hop_dst, link=link_id)
            )
        return route

    # ---------------------------------------------------------------- commits
    def commit(self, op: Op, trial: _Trial) -> None:
        memory = self.instance.core(trial.core).memory
        for hop in trial.transfers:
            self.transfers.append(hop)
            self.link_free[hop.link] = hop.end
            self.copies[hop.tensor][hop.dst] = hop.end
            self._use(hop.tensor, hop.src, hop.end)
            self._use(hop.tensor, hop.dst, hop.end)
        self.runs.append(
            OpRun(start=trial.start, end=trial.end, op=op.id, instance=0, core=trial.core)
        )
        self.core_free[trial.core] = trial.end
        for t in dict.fromkeys(op.inputs):
            if self.graph.tensor(t).persistent:
                self.read_end[t] = max(self.read_end.get(t, 0), trial.end)
            else:
                self._use(t, memory, trial.end)
        for t in op.outputs:
            if self.graph.tensor(t).persistent:
                self.made_at[t] = trial.end
            else:
                self.copies[t] = {memory: trial.end}
                self._use(t, memory, trial.end)

    def _use(self, tensor: str, memory: str, until: int) -> None:
        key = (tensor, memory)
        self.last_use[key] = max(self.last_use.get(key, 0), until)

    def result(self) -> tuple[tuple[OpRun, ...], tuple[Transfer, ...], tuple[Free, ...]]:
        frees = tuple(
            sorted(Free(time=until, tensor=t, memory=m) for (t, m), until in self.last_use.items())
        )
        return tuple(sorted(self.runs)), tuple(sorted(self.transfers)), frees
