"""Simulated annealing over P1 plans (``p1_interval.md`` P1I.L7).

The LNS (``lns.py``) re-decides windows of a few dozen positions exactly, and keeps the
plan within the budget at every step.  A recomputation that pays only together with
others far away (a value held longer here, another one dropped there) is out of its
reach.  The annealing makes one small change at a time anywhere in the plan (a
recomputation removed, moved, or added before a reader) and lets the plan go over the
budget for a while, at a price per unit of memory over it per position that rises as the
temperature falls, so that it ends within the budget.

A state is a list of computations (first computations in the instance's order; the
moves never touch them), put in the canonical form of ``p1_interval.md`` §5 by
:func:`_measure`: useless recomputations dropped, each copy held to its last reader.
Its score is ``cost + λ · excess``, ``excess`` the memory over the budget summed over
positions (P1I.L5's measure).  The time is split into :data:`ROUNDS` rounds, each from
the best plan within the budget so far, pruned (P1I.L0).  The result is the best plan, a
:class:`~monet_ilp.problems.p1.interval.Plan` made by :func:`canonical_plan`; the LNS
prunes it once more and the evaluator checks what the caller returns.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from monet_ilp.engines.highs import python_beside_highs
from monet_ilp.problems.p1.interval import Plan, canonical_plan
from monet_ilp.problems.p1.interval.plan import canonical_form, memory_of
from monet_ilp.problems.p1.prune import prune

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.problems.p1.data import P1Data

__all__ = ["ANNEAL_AT", "ANNEAL_COLD", "ANNEAL_HOT", "PRICE_FROM", "PRICE_TO", "Annealed", "anneal"]

#: The temperature falls geometrically from ``ANNEAL_HOT`` to ``ANNEAL_COLD`` times the
#: mean cost of an op, times ``sqrt(n / ANNEAL_AT)`` on a graph of ``n`` ops (P1I.L7: on
#: the literature's random DAGs at 0.8, n = 250 did best at 0.7, n = 1000 at 2.4-5).
ANNEAL_HOT = 1.0
ANNEAL_COLD = 0.025
ANNEAL_AT = 500
#: The price of one unit of memory over the budget at one position rises geometrically
#: from ``PRICE_FROM`` to ``PRICE_TO`` times the mean cost of an op per unit of its size.
PRICE_FROM = 2.0
PRICE_TO = 200.0
#: The annealing runs in this many rounds, each from the best plan so far, pruned.
ROUNDS = 2
#: A moved recomputation goes at most this many positions either way.
SHIFT = 20
#: Every this many moves the temperature and the price are set from the clock again.
TICK = 256


@dataclass(frozen=True)
class Annealed:
    """What :func:`anneal` did: the best plan within the budget (the start when none was
    cheaper), the moves tried, taken and taken uphill."""

    plan: Plan
    tried: int
    taken: int
    uphill: int


@dataclass(slots=True)
class _State:
    """A canonical list of computations with what the moves read: each copy's end, the
    memory at each position, the position of each node's first computation."""

    order: list[int]
    cost: int
    end: list[int]
    memory: list[int]
    excess: int
    first: list[int]
    update_at: int


def _measure(data: P1Data, order: list[int]) -> _State:
    """The canonical form of ``order`` (a list whose first computations follow the class's
    rules; the moves keep them) and its memory over the budget."""
    order, end, input_end, first = canonical_form(data, order)
    memory = memory_of(data, order, end, input_end)
    budget = data.budget
    excess = sum(m - budget for m in memory if m > budget)
    update_at = first[data.first_update] if data.first_update < data.n else len(order)
    return _State(order, sum(data.cost[v] for v in order), end, memory, excess, first, update_at)


def anneal(data: P1Data, plan: Plan, *, deadline: Deadline, seed: int = 0, moves: int | None = None) -> Annealed:
    """Anneal from ``plan`` (within the budget or not) until ``deadline``, or for ``moves``
    moves (then deterministic per seed); P1I.L7.

    :data:`ROUNDS` rounds share the time (or the moves); each starts from the best plan
    within the budget so far, pruned (P1I.L0), with the whole fall of the temperature and
    rise of the price.
    """
    span = deadline.left()
    if moves is None and span is None:
        raise ValueError("anneal needs a time limit or a number of moves")
    began = time.perf_counter()
    rng = random.Random(seed)
    ops = [v for v in range(data.n) if v < data.first_update]
    mean_cost = max(1.0, sum(data.cost[v] for v in ops) / max(1, len(ops)))
    mean_size = sum(data.size[v] for v in ops) / max(1, len(ops))
    hot = ANNEAL_HOT * mean_cost * math.sqrt(data.n / ANNEAL_AT)
    schedule = (hot, hot * ANNEAL_COLD / ANNEAL_HOT, mean_cost / max(mean_size, 1e-9))
    best = plan if plan.fits(data) else None
    tried = taken = uphill = 0
    with python_beside_highs:
        for r in range(ROUNDS):
            if best is not None:
                best = prune(data, best, deadline=deadline)
            origin = plan if best is None else best
            budget = None if moves is None else (moves * (r + 1)) // ROUNDS - tried
            until = None if span is None else began + span * (r + 1) / ROUNDS
            found, counts = _round(data, origin, schedule, rng, deadline, moves=budget, until=until)
            tried, taken, uphill = tried + counts[0], taken + counts[1], uphill + counts[2]
            if found is not None and (best is None or found.cost < best.cost):
                best = found
            if deadline.passed():
                break
    return Annealed(best if best is not None else plan, tried, taken, uphill)


def _round(data: P1Data, plan: Plan, schedule: tuple[float, float, float], rng: random.Random,
           deadline: Deadline, *, moves: int | None, until: float | None) -> tuple[Plan | None, tuple[int, int, int]]:
    """One round of :func:`anneal`: its best plan within the budget (``None``: none
    cheaper than ``plan``) and the moves tried, taken and taken uphill."""
    hot, cold, unit = schedule
    began = time.perf_counter()
    length = None if until is None else max(until - began, 1e-9)
    state = _measure(data, list(plan.nodes))
    best: Plan | None = None
    best_cost = plan.cost if plan.fits(data) else math.inf
    tried = taken = uphill = 0
    temperature, price = hot, PRICE_FROM * unit
    while moves is None or tried < moves:
        if tried % TICK == 0:
            done = tried / moves if moves is not None else (time.perf_counter() - began) / (length or 1e-9)
            if done >= 1.0 or deadline.passed():
                break
            temperature = hot * (cold / hot) ** done
            price = PRICE_FROM * unit * (PRICE_TO / PRICE_FROM) ** done
        tried += 1
        order = _moved(data, state, rng)
        if order is None:
            continue
        new = _measure(data, order)
        change = new.cost - state.cost + price * (new.excess - state.excess)
        if change > 0 and rng.random() >= math.exp(-change / temperature):
            continue
        taken += 1
        uphill += change > 0
        state = new
        if new.excess == 0 and new.cost < best_cost:
            best, best_cost = canonical_plan(data, new.order), new.cost
    return best, (tried, taken, uphill)


def _moved(data: P1Data, state: _State, rng: random.Random) -> list[int] | None:
    """One random move (P1I.L7), or ``None`` when the draw gives none."""
    order, first, update_at = state.order, state.first, state.update_at
    draw = rng.random()
    if draw < 0.55:
        k = rng.randrange(len(order))
        v = order[k]
        if first[v] == k:
            return None  # a first computation: the moves keep them
        order = order[:]
        del order[k]
        if draw < 0.35:
            return order  # removed: its readers read the copy before, held longer
        # moved, after the node's first computation and before the first optimizer op
        to = k + rng.randint(-SHIFT, SHIFT)
        if to <= first[v] or to > update_at - 1:
            return None
        order.insert(to, v)
        return order
    if state.excess > 0 and draw < 0.85:
        # added where the memory is over the budget: a value held across position t and
        # not read there, computed again before its next reader
        over = [t for t, m in enumerate(state.memory) if m > data.budget]
        t = rng.choice(over)
        held = [k for k in range(t) if state.end[k] > t and order[k] < data.first_update]
        if not held:
            return None
        k = rng.choice(held)
        v = order[k]
        q = next(j for j in range(t + 1, state.end[k] + 1) if v in data.preds[order[j]])
        at = rng.randint(t + 1, q)
    else:
        # added before a reader, anywhere since the value's previous read or computation
        if update_at < 2:
            return None
        q = rng.randrange(1, update_at)
        inputs = [u for u in data.preds[order[q]] if u < data.first_update]
        if not inputs:
            return None
        v = rng.choice(inputs)
        prev = q - 1
        while prev >= 0 and order[prev] != v and v not in data.preds[order[prev]]:
            prev -= 1
        if prev >= q - 1:
            return None
        at = rng.randint(prev + 1, q)
    if at > update_at:
        return None
    order = order[:]
    order.insert(at, v)
    return order
