"""From stage-variable values to a P1 Sequence, and the LP roundings (Checkmate's and memory-aware).

Part of the ``milp`` backend.  A *plan* lists, for every stage ``t``, the ops
computed in it in index order (``R[t,·]``, ending with ``v_t``).  This module turns
a plan into a :class:`~monet_ilp.schedule.Sequence` whose releases follow FREE and
the least S (``formulations/p1_milp.md`` §6), turns a hint Sequence into a plan and
into start values, and implements the approximations of §7: round the LP's S, then
take the least R that makes it correct (Jain et al., MLSys 2020, §5), or keep in
the LP's order what fits the budget.  It runs no solver: :func:`.solve.rounding_sweep`
solves the LPs it rounds, and :mod:`.lp_round` is the ``heuristic:lp-round`` backend.
"""

from __future__ import annotations

import random
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from monet_ilp.problems.p1.milp.variables import Col, StageVariables, Term
from monet_ilp.schedule import Compute, Release, Sequence

if TYPE_CHECKING:
    from monet_ilp.engines.deadline import Deadline
    from monet_ilp.problems.p1.data import P1Data

__all__ = [
    "Plan",
    "PlanCost",
    "keep_by_priority",
    "plan_from_sequence",
    "plan_from_values",
    "prune_plan",
    "recompute_for_retention",
    "resident_at_stage_start",
    "round_lp_solution",
    "sequence_of_plan",
    "start_values",
]

#: ``plan[t]``: the ops computed in stage ``t``, increasing, the last one ``t``.
Plan = list[list[int]]


@dataclass(frozen=True)
class PlanCost:
    """What a plan costs under EV.E3: compute cycles, peak bytes, and whether it is valid."""

    compute_cycles: int
    peak_bytes: int
    recomputations: int
    valid: bool
    problem: str = ""


# ======================================================== plans and sequences (§6)
def resident_at_stage_start(data: P1Data, plan: Plan) -> list[set[int]]:
    """The least S of a plan: ``keep[t]`` holds the values resident when stage ``t`` starts.

    A value is kept into stage ``t`` iff stage ``t`` reads it before (re)computing
    it, or keeps it into stage ``t+1`` without computing it; ``keep[n]`` is empty.
    Every S that satisfies P1M.C2 and P1M.C3 with this R contains it, so its memory is the
    least (Checkmate's FREE frees everything else right after its last use).
    """
    n = data.n
    keep: list[set[int]] = [set() for _ in range(n + 1)]
    for t in range(n - 1, -1, -1):
        computed = set(plan[t])
        need = {e for e in keep[t + 1] if e not in computed}
        for j in plan[t]:
            for e in data.reads[j]:
                if e not in computed:
                    need.add(e)
        keep[t] = need
    return keep


def _check_plan(data: P1Data, plan: Plan) -> str:
    if len(plan) != data.n:
        return f"the plan has {len(plan)} stages, not {data.n}"
    for t, ops in enumerate(plan):
        if not ops or ops[-1] != t or any(a >= b for a, b in pairwise(ops)):
            return f"stage {t} must compute increasing ops ending with {t}: {ops}"
    return ""


def sequence_of_plan(data: P1Data, plan: Plan, *, meta: dict[str, Any] | None = None
                     ) -> tuple[Sequence, PlanCost]:
    """The Sequence of a plan and its EV.E3 cost, with every release placed by FREE (§6).

    Graph inputs nobody reads are released before the first computation.  After
    ``v_k`` in stage ``t``, each value ``e`` among ``v_k``'s inputs and outputs is
    released when no later op of stage ``t`` reads it and it is not kept into stage
    ``t+1`` (``FREE[t,e,k] = 1`` with the least S).  The returned cost replays the
    steps exactly as EV.E3 does (the resident set plus the running op's outputs).
    """
    problem = _check_plan(data, plan)
    if problem:
        return Sequence(()), PlanCost(0, 0, 0, False, problem)
    n = data.n
    keep = resident_at_stage_start(data, plan)
    bad = sorted(e for e in keep[0] if e < n)
    if bad:
        return Sequence(()), PlanCost(0, 0, 0, False,
                                      f"{data.ops[bad[0]]!r} is read before it is computed")
    steps: list[Compute | Release] = [Release(x) for x in data.unread_inputs]
    resident = set(range(n, data.n_values))
    held = data.persistent_bytes + sum(data.value_bytes[e] for e in resident)
    peak = 0
    cycles = 0
    problem = ""
    for t in range(n):
        for e in sorted(resident - keep[t]):  # never with the least S; kept for safety
            resident.discard(e)
            held -= data.value_bytes[e]
            steps.extend(Release(name) for name in data.tensors[e])
        last_use: dict[int, int] = {}
        for position, j in enumerate(plan[t]):
            last_use[j] = position
            for e in data.reads[j]:
                last_use[e] = position
        for position, k in enumerate(plan[t]):
            missing = [e for e in data.reads[k] if e not in resident]
            if missing and not problem:
                problem = (f"{data.ops[k]!r} reads value {missing[0]} that is not resident "
                           f"(stage {t})")
            if k not in resident:
                resident.add(k)
                held += data.value_bytes[k]
            peak = max(peak, held)
            cycles += data.cost[k]
            steps.append(Compute(data.ops[k]))
            for e in (*data.reads[k], k):
                if e in resident and last_use.get(e) == position and e not in keep[t + 1]:
                    resident.discard(e)
                    held -= data.value_bytes[e]
                    steps.extend(Release(name) for name in data.tensors[e])
    recomputations = sum(len(ops) for ops in plan) - n
    if not problem and peak > data.capacity_bytes:
        problem = f"peak {peak} bytes over the capacity of {data.capacity_bytes} bytes"
    counts: dict[int, int] = {}
    for ops in plan:
        for i in ops:
            counts[i] = counts.get(i, 0) + 1
    over = [i for i, c in counts.items() if c > data.max_computes]
    if over and not problem:
        problem = f"{data.ops[over[0]]!r} runs {counts[over[0]]} times, over max_computes"
    cost = PlanCost(cycles, peak, recomputations, not problem, problem)
    info = dict(meta or {}, compute_cycles=cycles, peak_bytes=peak, recomputations=recomputations)
    return Sequence(tuple(steps), info), cost


def plan_from_values(data: P1Data, x: StageVariables, values: Seq[float]) -> Plan:
    """The plan of a (near-)integral solution: ``R[t,i] > 0.5``."""
    def computed(r: Term) -> bool:
        return values[r.index] > 0.5 if isinstance(r, Col) else bool(r)

    return [sorted(i for i, r in x.R[t].items() if computed(r)) for t in range(data.n)]


def plan_from_sequence(data: P1Data, sequence: Sequence) -> Plan | None:
    """The plan of a Sequence in stage form, or ``None`` if it is not in that form.

    Stage form: first computations in the instance's order, and between two of them
    recomputations of earlier ops in increasing index order, each at most once.
    Releases are ignored (the plan's own are placed by :func:`sequence_of_plan`).
    """
    index = {op: i for i, op in enumerate(data.ops)}
    plan: Plan = [[] for _ in range(data.n)]
    seen: set[int] = set()
    t = 0
    for step in sequence.steps:
        if not isinstance(step, Compute):
            continue
        i = index.get(step.op)
        if i is None:
            return None
        if i not in seen:
            if i != t:
                return None
            seen.add(i)
            plan[t].append(i)
            t += 1
        elif t >= data.n:
            continue  # a recomputation after the last first computation serves nothing
        else:
            if plan[t] and plan[t][-1] >= i:
                return None
            plan[t].append(i)
    return plan if t == data.n else None


def prune_plan(data: P1Data, plan: Plan) -> Plan:
    """Drop recomputations whose result nothing uses (until none is left).

    A recomputation of ``i`` in stage ``t`` is dead when no later op of the stage
    reads ``i`` and ``i`` is not kept into stage ``t+1`` (least S).  Removing it
    lowers the cost and the memory and keeps the plan valid.
    """
    plan = [list(ops) for ops in plan]
    while True:
        keep = resident_at_stage_start(data, plan)
        dead = []
        for t, ops in enumerate(plan):
            read_later: set[int] = set()
            for j in reversed(ops):
                if j != t and j not in read_later and j not in keep[t + 1]:
                    dead.append((t, j))
                    continue  # what only a dead op reads may be dead too
                read_later.update(data.reads[j])
        if not dead:
            return plan
        for t, j in dead:
            plan[t].remove(j)


def start_values(data: P1Data, x: StageVariables, n_cols: int, plan: Plan) -> list[float] | None:
    """Column values of ``plan`` (R, least S, FREE, U); ``None`` if the model excludes it."""
    values = [0.0] * n_cols
    keep = resident_at_stage_start(data, plan)
    for t in range(data.n):
        for e, s in x.S[t].items():
            if s == 1:
                keep[t].add(e)  # a constant 1 (P1M.D2, P1M.D4); it is in the least S anyway
        if any(x.s(t, e) == 0 for e in keep[t]):
            return None
    unit = data.scale
    for t in range(data.n):
        in_stage = set(plan[t])
        for i in plan[t]:
            r = x.r(t, i)
            if isinstance(r, Col):
                values[r.index] = 1.0
            elif r != 1:
                return None  # the model fixed this recomputation to 0
        for e, s in x.S[t].items():
            if isinstance(s, Col):
                values[s.index] = float(e in keep[t])
        position = {k: p for p, k in enumerate(plan[t])}
        last_use: dict[int, int] = {}
        for p, j in enumerate(plan[t]):
            last_use[j] = p
            for e in data.reads[j]:
                last_use[e] = p
        held = sum(data.value_bytes[e] for e in keep[t])
        freed_after: dict[int, int] = {}
        for (e, k), free in x.FREE[t].items():
            if k in in_stage and last_use.get(e) == position[k] and e not in keep[t + 1]:
                values[free.index] = 1.0
                freed_after[k] = freed_after.get(k, 0) + data.value_bytes[e]
        for k in x.positions[t]:
            if k in in_stage:
                held += data.value_bytes[k]
            if x.U[t]:
                if held > data.budget_bytes:
                    return None
                values[x.U[t][k].index] = held // unit
            held -= freed_after.get(k, 0)
    return values


# ================================================================= rounding (§7)
def recompute_for_retention(data: P1Data, x: StageVariables, kept: list[set[int]]) -> Plan:
    """Checkmate's second phase: the least R that makes a rounded S correct.

    Stages are processed from the last: a value kept into stage ``t+1`` and not kept
    into stage ``t`` is recomputed in stage ``t``; then, from ``v_t`` down, every
    value an op of the stage reads is recomputed unless it is kept.  Where the
    model forbids the recomputation (P1M.D1-D3), the value is kept instead, which
    becomes a requirement on stage ``t-1``.  ``kept`` is modified in place.
    """
    n = data.n
    plan: Plan = [[] for _ in range(n)]
    for t in range(n - 1, -1, -1):
        compute = {t}
        for e in [e for e in kept[t + 1] if e < t]:
            if e not in kept[t]:
                if isinstance(x.r(t, e), Col):
                    compute.add(e)
                else:
                    kept[t].add(e)
        for e in kept[t + 1]:
            if e >= n:
                kept[t].add(e)  # an input kept later was resident all along
        for j in range(t, -1, -1):
            if j not in compute:
                continue
            for e in data.reads[j]:
                if e in kept[t] or e in compute:
                    continue
                if e < n and isinstance(x.r(t, e), Col):
                    compute.add(e)
                else:
                    kept[t].add(e)
        plan[t] = sorted(compute)
    return plan


def round_lp_solution(data: P1Data, x: StageVariables, values: Seq[float], *,
                      thresholds: Seq[float] = (0.5,), samples: int = 0, seed: int = 0,
                      deadline: Deadline | None = None
                      ) -> tuple[Plan | None, PlanCost | None, dict[str, int]]:
    """Round the S of an LP solution (thresholds, then random samples); keep the best valid plan.

    Each rounding is completed by :func:`recompute_for_retention`, cleaned by
    :func:`prune_plan`, and replayed by :func:`sequence_of_plan`; a plan counts if
    its peak fits the capacity and no op runs more than ``max_computes`` times.  Past
    ``deadline`` no further rounding is tried (at least one is).
    """
    n = data.n
    fractional = []
    for t in range(n + 1):
        row = {}
        if t < n:
            for e, s in x.S[t].items():
                row[e] = values[s.index] if isinstance(s, Col) else float(s)
        fractional.append(row)
    rng = random.Random(seed)
    # (kind, threshold or sample number)
    rules: list[tuple[str, float]] = [("threshold", th) for th in thresholds]
    rules += [("random", k) for k in range(samples)]
    best: tuple[Plan, PlanCost] | None = None
    tried = valid = 0
    seen: set[tuple[tuple[int, ...], ...]] = set()
    for kind, arg in rules:
        if deadline is not None and deadline.passed() and tried:
            break
        kept: list[set[int]] = []
        for t in range(n + 1):
            if kind == "threshold":
                kept.append({e for e, v in fractional[t].items() if v >= arg - 1e-9})
            else:
                kept.append({e for e, v in fractional[t].items()
                             if v >= 1 - 1e-9 or rng.random() < v})
        signature = tuple(tuple(sorted(k)) for k in kept)
        if signature in seen:
            continue
        seen.add(signature)
        tried += 1
        plan = prune_plan(data, recompute_for_retention(data, x, kept))
        _, cost = sequence_of_plan(data, plan)
        if not cost.valid:
            continue
        valid += 1
        if best is None or cost.compute_cycles < best[1].compute_cycles:
            best = (plan, cost)
    info = {"roundings": tried, "valid_roundings": valid}
    return (best[0], best[1], info) if best else (None, None, info)


def keep_by_priority(data: P1Data, x: StageVariables, values: Seq[float] | None = None, *,
                     floor: float = 0.0, passes: int = 25) -> Plan | None:
    """Memory-aware rounding (§7): keep, stage by stage, what fits, in the LP's order of S.

    Stages run forward.  Stage ``t`` recomputes, in index order, what ``v_t`` needs
    and is not resident; then the values present in the stage that may serve later
    (P1M.D1) are kept into stage ``t+1`` in decreasing ``S*[t+1,e]`` (the LP solution
    ``values``; without one, soonest next reader first, Belady's rule), each as long
    as holding it to the end of the stage fits the budget, skipping those with
    ``S* < floor``.  Inputs still needed, and everything still read once
    recomputation is over (P1M.D2), are kept unconditionally.  When a stage's
    recomputations do not fit, the values it had to recompute are *protected* (kept
    first whenever they fit) and the pass starts again, at most ``passes`` times.
    Returns ``None`` when no pass fits; the caller replays the plan in any case.
    """
    protect: set[int] = set()
    for _ in range(passes):
        plan, stage, recomputed = _keep_pass(data, x, values, floor, protect)
        if plan is not None:
            return plan
        if stage is None:
            return None
        direct = recomputed & set(data.reads[stage])
        fresh = (direct - protect) or (recomputed - protect)
        if not fresh:
            return None
        protect |= fresh
    return None


def _keep_pass(data: P1Data, x: StageVariables, values: Seq[float] | None, floor: float,
               protect: set[int]) -> tuple[Plan | None, int | None, set[int]]:
    """One forward pass of :func:`keep_by_priority`: the plan, or the stage that failed and
    what it recomputed (``None`` as the stage when the failure is not one of memory)."""
    n = data.n
    budget = data.budget_bytes
    size = data.value_bytes

    def priority(t: int, e: int) -> float:
        s = x.s(t, e)
        if isinstance(s, Col):
            return values[s.index] if values is not None else 0.0
        return float(s)

    def next_reader(e: int, t: int) -> int:
        later = [j for j in data.users[e] if j > t]
        return later[0] if later else data.horizon[e] + n

    plan: Plan = []
    start = set(range(n, data.n_values))
    computed = [0] * n
    for t in range(n):
        stage = {t}
        for j in range(t, -1, -1):
            if j not in stage:
                continue
            for e in data.reads[j]:
                if e in start or e in stage:
                    continue
                if e >= n or data.recompute(t, e) is not None or computed[e] >= data.max_computes:
                    return None, None, set()
                stage.add(e)
        order = sorted(stage)
        last: dict[int, int] = {}
        for p, j in enumerate(order):
            last[j] = p
            for e in data.reads[j]:
                last[e] = p
        held = sum(size[e] for e in start if e in last)
        memory = []
        for p, k in enumerate(order):
            held += size[k]
            memory.append(held)
            for e in (*data.reads[k], k):
                if last.get(e) == p:
                    held -= size[e]
        if max(memory) > budget:
            return None, t, stage - {t}
        forced, optional = [], []
        for e in start | stage:
            if data.horizon[e] <= t:
                continue
            if e >= n or t + 1 > data.first_update or data.max_computes <= 1:
                if e >= n or any(j > t for j in data.users[e]):
                    forced.append(e)
                continue
            optional.append(e)
        optional.sort(key=lambda e: (e not in protect, -priority(t + 1, e), next_reader(e, t), e))
        keep: set[int] = set()
        for e in forced + optional:
            if values is not None and e not in protect and priority(t + 1, e) < floor \
                    and e not in forced:
                continue
            begin = last[e] + 1 if e in last else 0
            if any(m + size[e] > budget for m in memory[begin:]):
                if e in forced:
                    return None, t, set(forced)
                continue
            for p in range(begin, len(memory)):
                memory[p] += size[e]
            keep.add(e)
        for j in order:
            computed[j] += 1
        plan.append(order)
        start = keep
    return plan, None, set()


#: LP budgets tried, as fractions of the true one, until a rounding fits (Checkmate's allowance).
BUDGET_FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4)
THRESHOLDS = tuple(k / 10 for k in range(1, 10))
