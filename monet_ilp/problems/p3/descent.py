"""``descend``: a descent over the ops' cores, the pins and the activation policies (P3D).

``formulations/p3_cpsat.md`` §"descent" (P3D.1-P3D.5).  The LNS re-solves a dozen ops
at a time with CP-SAT; what it changes slowly is the placement of the pins, because a
pin moves with every op that reads it.  This descent searches exactly that, on the
decoder (:func:`~monet_ilp.heuristics.decoder.decode_placed_raw`: ops in a given order,
each on its core, Belady eviction to DRAM) scored by the decoder's fast path
(:func:`~monet_ilp.heuristics.fast.fast_metrics`), thousands of moves a second:

* P3D.1 the starts: from each given schedule, each op on the core of its first run,
  its pins, and its activations' policies as
  :func:`~monet_ilp.heuristics.decisions.decisions_from_schedule` reads them; the
  decoder places the ops in the order of the start's first runs (:func:`in_order`);
* P3D.2 the moves: one op to another core; one pin added or dropped; one persistent
  tensor pinned with every op that reads it moved to one core; one group of persistent
  tensors joined by the ops that read them (:func:`_pin_groups`) pinned, with all those
  ops moved to one core, or unpinned; one saved activation's policy (keep, offload,
  recompute) changed;
* P3D.3 a move is taken when it lowers the pair (capacity violations plus the runs
  and transfers beyond class P3.K3: at most ``max_computes`` runs of an op,
  ``max_transfers`` transfers of a tensor into a memory; then the objective), so a start
  that does not fit is first brought to fit; the moves are tried in a seeded random
  order, in passes, until a pass takes none;
* P3D.4 under a time limit, simulated annealing first: from the best start, for
  :data:`ANNEAL_SHARE` of the time, one random move at a time, taken when it lowers the
  violations, or keeps them and raises the objective by no more than a temperature
  allows (the Metropolis rule), the temperature falling geometrically from
  :data:`ANNEAL_FROM` to :data:`ANNEAL_TO` of the start's objective;
* P3D.5 then descents: from the annealing's best (without it, from each start in turn),
  then, until the deadline, from the best so far and from each start in turn, kicked by
  :data:`KICK` random moves.

The best is decoded again, and the reference evaluator gives its value.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import networkx as nx

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph.ir import TrainingGraph
from monet_ilp.heuristics.decisions import POLICIES, decisions_from_schedule
from monet_ilp.heuristics.decoder import decode_placed, decode_placed_raw, plan_of
from monet_ilp.heuristics.fast import fast_metrics
from monet_ilp.problems.p3.data import DEFAULT_MAX_COMPUTES, DEFAULT_MAX_TRANSFERS

if TYPE_CHECKING:
    from collections.abc import Sequence as Seq

    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.heuristics.decoder import RawSchedule
    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule

__all__ = ["Descent", "descend", "in_order"]

#: The recompute policy's index in :data:`~monet_ilp.heuristics.decisions.POLICIES`.
_RECOMPUTE = POLICIES.index("recompute")
#: The score of a decoding that fails outright (P3D.3).
_NOWHERE = (1 << 30, float("inf"))
#: P3D.4: the annealing's moves between two looks at the clock.
_ANNEAL_BATCH = 64
#: P3D.4: the share of the time the annealing gets before the descents, and its
#: temperatures at its start and at its end, as shares of its start's objective.
ANNEAL_SHARE = 0.8
ANNEAL_FROM = 0.02
ANNEAL_TO = 0.0005
#: P3D.5: the random moves that start each descent after the first round.
KICK = 4
#: The order the decoder places the ops in (an index into the starts' orders), the ops'
#: cores (by position in the instance's order), the policy of each saved activation (in
#: the instance's order), the pins.
_State = tuple[int, list[str], list[int], list[str]]


@dataclass(frozen=True)
class Descent:
    """What :func:`descend` found: the schedule (checked by the evaluator) and its value,
    the value of each start's decisions decoded (``None``: it does not fit, or leaves the
    class), the moves tried and taken, and the descents run."""

    schedule: Schedule
    value: int | float
    decoded: tuple[int | float | None, ...]
    tried: int
    taken: int
    rounds: int
    seconds: float
    #: The annealing's moves tried, those of them taken that raised the objective, and
    #: the value of its best state (``None``: it did not run).
    annealed: tuple[int, int, int | float] | None = None


def descend(instance: Instance, starts: Seq[Schedule], *, deadline: Deadline, seed: int = 0,
            rounds: int | None = None, anneal: int | None = None, max_computes: int | None = None,
            max_transfers: int | None = None) -> Descent | None:
    """Descend from each of ``starts`` (module docstring); ``None`` when no decoding reached fits.

    Parameters
    ----------
    instance
        A P3 instance (its graph inputs in a shared memory).
    starts
        Timed schedules whose order of first runs, ops' cores, pins and activation
        policies start the descents (a solver's schedule, the list-scheduling baselines).
    deadline
        When to stop: until then, each descent after the first starts from the best so
        far, kicked (P3D.5); under a limit, the annealing first (P3D.4).
    seed
        Seeds the order of the moves.
    rounds
        Stop after this many descents (``None``: at the deadline); with it and ``anneal``
        given, the result depends only on the seed when the deadline does not come first.
    anneal
        The annealing's moves (P3D.4; ``0``: none); ``None``: :data:`ANNEAL_SHARE` of the
        time under a limited deadline without ``rounds``, none otherwise.
    max_computes, max_transfers
        The class P3.K3 the moves stay in (the LNS's).
    """
    began = time.perf_counter()
    computes = DEFAULT_MAX_COMPUTES if max_computes is None else max_computes
    transfers = DEFAULT_MAX_TRANSFERS if max_transfers is None else max_transfers
    plan = plan_of(instance)
    graph = instance.graph

    # P3D.1 each start's order: the instance with its ops in the order of the start's
    # first runs, and the maps from the instance's positions to that order's.
    orders: list[tuple[Instance, list[int], list[int]]] = []
    position = {op: k for k, op in enumerate(plan.order)}
    saved_at = {t: i for i, t in enumerate(plan.saved)}

    def decisions_of(start: Schedule) -> _State:
        """P3D.1: a start's order, its ops' cores, its activations' policies, its pins."""
        first: dict[str, tuple[int, str]] = {}
        for run in sorted(start.ops, key=lambda r: (r.start, r.end)):
            first.setdefault(run.op, (run.start, run.core))
        ordered = in_order(instance, sorted(plan.order, key=lambda op: (first[op][0], position[op])))
        ordered_plan = plan_of(ordered)
        orders.append((ordered, [position[op] for op in ordered_plan.order],
                       [saved_at[t] for t in ordered_plan.saved]))
        decisions = decisions_from_schedule(instance, start)
        return (len(orders) - 1, [first[op][1] for op in plan.order],
                [POLICIES.index(decisions.tensors.get(t, "keep")) for t in plan.saved],
                [p for p, _ in start.pinned])

    initial = [decisions_of(start) for start in starts]
    if not initial:
        return None

    def decoded_as(order: int, cores: list[str], policies: list[int]) -> tuple[Instance, list[str], list[int]]:
        """The decoder's arguments for a state: the order's instance, cores and policies."""
        ordered, ops, saved = orders[order]
        return ordered, [cores[k] for k in ops], [policies[i] for i in saved]

    def score(order: int, cores: list[str], policies: list[int], pinned: list[str]) -> tuple[int, float]:
        """P3D.3: (how far the decoding is from fitting and from the class, its objective)."""
        ordered, ordered_cores, ordered_policies = decoded_as(order, cores, policies)
        try:
            raw = decode_placed_raw(ordered, ordered_cores, ordered_policies, pinned)
        except MonetError:  # a recomputation the decoder cannot make (after an update)
            return _NOWHERE
        metrics = fast_metrics(ordered, raw)
        return sum(metrics.violation_counts.values()) + _outside(raw, computes, transfers), metrics.objective_value

    candidates = [[c for c in instance.costs[op] if instance.has_core(c)] for op in plan.order]
    persistent = [t.id for t in graph.tensors if t.persistent]
    readers = plan.persistent_readers  # tensor -> positions of the ops that read it
    core_ids = [c.id for c in instance.cores]
    moves: list[tuple[str, object, object]] = [
        ("core", k, c) for k in range(len(plan.order)) if len(candidates[k]) > 1 for c in candidates[k]]
    moves += [("pin", p, None) for p in persistent]
    moves += [("gather", p, c) for p in persistent if p in readers for c in core_ids]
    groups = _pin_groups(readers)
    moves += [("group", i, c) for i in range(len(groups)) if len(groups[i]) > 1 for c in core_ids]
    moves += [("policy", i, q) for i, t in enumerate(plan.saved) for q in range(len(POLICIES))
              if q != _RECOMPUTE or t in plan.recomputable]

    def gathered(state: _State, tensors: list[str], where: str) -> _State:
        """``state`` with ``tensors`` pinned and every op that reads them on ``where`` (where it can run)."""
        order, cores, policies, pinned = state
        on = list(cores)
        for p in tensors:
            for k in readers[p]:
                if where in candidates[k]:
                    on[k] = where
        return order, on, policies, [*pinned, *(p for p in tensors if p not in pinned)]

    def moved(state: _State, move: tuple[str, object, object]) -> _State | None:
        """``state`` after ``move``, or ``None`` where the move changes nothing."""
        kind, what, where = move
        order, cores, policies, pinned = state
        if kind == "core":
            assert isinstance(what, int) and isinstance(where, str)
            if cores[what] == where or where not in candidates[what]:
                return None
            return order, [*cores[:what], where, *cores[what + 1:]], policies, pinned
        if kind == "pin":
            return (order, cores, policies,
                    [p for p in pinned if p != what] if what in pinned else [*pinned, str(what)])
        if kind == "gather":
            assert isinstance(what, str) and isinstance(where, str)
            return gathered(state, [what], where)
        if kind == "group":  # the group pinned with its readers on one core, or, all pinned, unpinned
            assert isinstance(what, int) and isinstance(where, str)
            group = groups[what]
            if all(p in pinned for p in group):
                return order, cores, policies, [p for p in pinned if p not in group]
            return gathered(state, group, where)
        assert isinstance(what, int) and isinstance(where, int)
        if policies[what] == where:
            return None
        return order, cores, [*policies[:what], where, *policies[what + 1:]], pinned

    def attempt(state: _State, move: tuple[str, object, object]) -> tuple[_State, tuple[int, float]] | None:
        """``state`` after ``move`` and its score (P3D.3), or ``None`` where the move changes nothing."""
        after = moved(state, move)
        return None if after is None else (after, score(*after))

    scores = [score(*state) for state in initial]
    decoded = [value[1] if value[0] == 0 else None for value in scores]
    best = min(scores)
    best_state = initial[scores.index(best)]
    tried = taken = done = 0
    rng = random.Random(seed)

    def annealed(state: _State, value: tuple[int, float], moves_left: int | None,
                 seconds: float) -> tuple[_State, tuple[int, float], int, int]:
        """P3D.4: the best state the annealing from ``state`` reaches in ``moves_left``
        moves (``None``: in ``seconds``), its score, the moves tried and the uphill moves
        taken."""
        hot = max(ANNEAL_FROM * value[1], 1.0)
        cold = max(ANNEAL_TO * value[1], 1e-3)
        began_at = time.perf_counter()
        best_here, count, uphill = (value, state), 0, 0
        while not deadline.passed():
            if moves_left is None:
                progress = (time.perf_counter() - began_at) / seconds
            else:
                progress = count / moves_left
            if progress >= 1.0:
                break
            temperature = hot * (cold / hot) ** progress
            for move in (rng.choice(moves) for _ in range(_ANNEAL_BATCH)):
                if moves_left is not None and count >= moves_left:
                    break
                trial = attempt(state, move)
                if trial is None:
                    continue
                count += 1
                after, v = trial
                if v[0] < value[0] or (v[0] == value[0] and v[1] <= value[1]):
                    value, state = v, after
                    if value < best_here[0]:
                        best_here = (value, state)
                elif v[0] == value[0] and rng.random() < math.exp((value[1] - v[1]) / temperature):
                    value, state, uphill = v, after, uphill + 1
        return best_here[1], best_here[0], count, uphill

    froms = initial
    annealing = None
    timed = anneal is None and rounds is None and (deadline.left() or 0.0) > 0
    if (timed or (anneal or 0) > 0) and best[1] < float("inf"):
        # P3D.4 the annealing from the best start; the descents start from its best.
        state, value, count, uphill = annealed(best_state, best, None if timed else anneal,
                                               ANNEAL_SHARE * (deadline.left() or 0.0))
        annealing = (count, uphill, value[1])
        froms = [state]
        if value < best:
            best, best_state = value, state
    while not deadline.passed() and (rounds is None or done < rounds):
        # P3D.5 the start of this descent: the annealing's best, or each start in turn,
        # first, then the best so far and those in turn, each kicked by KICK random moves.
        if done < len(froms):
            state = froms[done]
        else:
            turn = (done - len(froms)) % (len(froms) + 1)
            state = best_state if turn == 0 else froms[turn - 1]
            for move in rng.sample(moves, min(KICK, len(moves))):
                after = moved(state, move)
                if after is not None and score(*after)[0] == 0:
                    state = after
        # P3D.3 one descent: first improvement, passes in a random order until none improves.
        value = score(*state)
        improved = True
        while improved and not deadline.passed():
            improved = False
            rng.shuffle(moves)
            for move in moves:
                if deadline.passed():
                    break
                trial = attempt(state, move)
                if trial is None:
                    continue
                tried += 1
                after, v = trial
                if v < value:
                    value, state, improved = v, after, True
                    taken += 1
        done += 1
        if value < best:
            best, best_state = value, state
    if best[0]:
        return None
    order, core_of, policy, pins = best_state
    schedule = decode_placed(*decoded_as(order, core_of, policy), pins)
    metrics = evaluate(instance, schedule)
    if not metrics.feasible:
        return None
    return Descent(metrics.schedule, metrics.objective_value, tuple(decoded), tried, taken, done,
                   round(time.perf_counter() - began, 3), annealing)


def in_order(instance: Instance, order: Seq[str]) -> Instance:
    """``instance`` with its graph's ops in ``order`` (made topological, stable with
    respect to it): the order the decoder places them in."""
    graph = instance.graph
    ops = {op.id: op for op in graph.ops}
    return replace(instance, graph=TrainingGraph.build(graph.name, [ops[op] for op in order], graph.tensors,
                                                       graph.meta, reorder=True))


def _outside(raw: RawSchedule, computes: int, transfers: int) -> int:
    """P3D.3: the runs beyond ``computes`` of an op and the transfers beyond ``transfers``
    of a tensor into one memory (P3.K1, P3.L1; the decoder keeps the other rules of
    P3.K3)."""
    runs = Counter(r[2] for r in raw.runs)
    moved = Counter((x[2], x[4]) for x in raw.transfers)
    return (sum(max(0, n - computes) for n in runs.values())
            + sum(max(0, n - transfers) for n in moved.values()))


def _pin_groups(readers: dict[str, list[int]]) -> list[list[str]]:
    """The persistent tensors joined by the ops that read them (an op runs at its pinned
    cost only when every persistent tensor it reads is pinned): the connected parts of
    the graph of tensors and their readers, each in the order of ``readers``."""
    graph: nx.Graph[object] = nx.Graph()
    graph.add_nodes_from(readers)
    graph.add_edges_from((p, ("op", k)) for p, ks in readers.items() for k in ks)
    return [[p for p in readers if p in part] for part in nx.connected_components(graph)]
