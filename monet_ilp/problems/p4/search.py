"""The P4 search: every candidate of degrees and micro-batching, pruned by bounds, each solved exactly.

``formulations/p4_problem.md`` P4.S1-S5.  The candidates are the degrees ``(d, p, t)``
using every device of the cluster (``t`` within a node), the micro-batch sizes, the
pipeline schedules, sequence parallelism and the ZeRO stages.  Each gets a bound that
costs nothing (its work spread evenly over its stages); in increasing order of it, a
candidate whose bound is not below the best plan so far is pruned, and the others get
the partition MILP (:mod:`.partition`), whose plan the evaluator measures.  The result
is the best verified plan, and the least bound over the candidates: a lower bound over
the whole class, so the gap is certified.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import Deadline
from monet_ilp.errors import MonetError
from monet_ilp.problems.p4.costs import PlanCosts, plan_costs
from monet_ilp.problems.p4.evaluate import PlanMetrics, evaluate_plan
from monet_ilp.problems.p4.partition import Partition, solve_partition
from monet_ilp.problems.p4.plan import PLACEMENTS, SCHEDULES, Plan
from monet_ilp.results import bound_error

if TYPE_CHECKING:
    from monet_ilp.hardware.cluster import ClusterSpec
    from monet_ilp.problems.p4.model import TransformerConfig

__all__ = ["CLASS", "OBJECTIVES", "PlanResult", "plan_pareto", "plan_search", "work_bound"]

#: Seconds of the first pass's MILP per candidate (P4.S4).
FIRST_PASS_S = 2.0
#: What a plan may minimise (P4.P7).
OBJECTIVES = ("time", "energy", "weighted")

#: Relative tolerance of P4's real-valued seconds and joules: a plan is optimal when the
#: bound is within it of the plan's value, and a bound wrong when above it by more (BD.C1;
#: HiGHS's stage MILPs prove their bounds to about this accuracy).
PLAN_TOLERANCE = 1e-6

#: The class of plans the search is exact over (P4.S1).
CLASS = ("plans using every device, tensor groups within a node, data or pipeline groups next, "
         "micro-batches of {sizes}, GPipe or 1F1B, "
         "ZeRO {zero}, contiguous stages, per layer none/selective/full recomputation or offload (with a host link)")


@dataclass(frozen=True)
class PlanResult:
    """The best verified plan, its measures, and a bound over the class (P4.S5)."""

    status: str  # "optimal", "feasible", "infeasible", "unknown", "error" (a bound above the plan's value)
    plan: Plan | None
    metrics: PlanMetrics | None
    objective: str
    value: float | None  # seconds per iteration, or joules per iteration
    bound: float | None  # same unit; holds for every plan of the class
    seconds: float
    holds_for: str
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        if self.value is None or self.bound is None or self.value <= 0:
            return None
        return (self.value - self.bound) / self.value  # as it is: never clamped (BD.C1)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "feasible": self.metrics is not None and self.metrics.feasible,
                "objective": self.objective, "value": self.value, "bound": self.bound, "gap": self.gap,
                "time_per_iteration_s": None if self.metrics is None else self.metrics.time_s,
                "plan": None if self.plan is None else self.plan.to_dict(),
                "metrics": None if self.metrics is None else self.metrics.to_dict(),
                "seconds": self.seconds, "holds_for": self.holds_for, "stats": self.stats}


def work_bound(model: TransformerConfig, cluster: ClusterSpec, global_batch: int) -> float:
    """P4.S2: seconds no plan can beat: the model's FLOPs at every device's sustained peak."""
    dev = cluster.device
    return model.model_flops(global_batch) / (cluster.devices * dev.peak_flops * dev.gemm_efficiency)


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _candidates(model: TransformerConfig, cluster: ClusterSpec, global_batch: int, micro_batches: tuple[int, ...],
                schedules: tuple[str, ...], zero: tuple[int, ...]) -> list[dict[str, Any]]:
    out = []
    n = cluster.devices
    for t in _divisors(cluster.devices_per_node):
        if model.heads % t or model.kv % t or model.hidden % t or model.ffn % t or n % t:
            continue
        for p in _divisors(n // t):
            if p > model.layers:
                continue
            d = n // (t * p)
            for b in micro_batches:
                if global_batch % (d * b):
                    continue
                m = global_batch // (d * b)
                for sp in ((False, True) if t > 1 and model.seq % t == 0 else (False,)):
                    for z in (zero if d > 1 else (0,)):
                        for schedule in (schedules if p > 1 else ("1f1b",)):
                            for placement in (PLACEMENTS if p > 1 and d > 1 else ("tdp",)):
                                out.append({"data": d, "pipeline": p, "tensor": t, "sequence_parallel": sp,
                                            "micro_batch": b, "micro_batches": m, "schedule": schedule, "zero": z,
                                            "placement": placement})
    return out


def _even_bound(c: PlanCosts, candidate: dict[str, Any], layers: int, weights: tuple[float, float],
                cluster: ClusterSpec) -> tuple[float, float]:
    """P4.S3: the candidate's pipeline, bubble included, at its cheapest per layer.

    Returns the bound on the weighted objective and on the time (seconds) alone.
    """
    p, m = int(candidate["pipeline"]), int(candidate["micro_batches"])
    u = min(lc.forward_ns + lc.backward_ns for lc in c.layer.values())  # recomputation only adds
    ends = [0.0] * p
    ends[0] += c.first.work_ns
    ends[-1] += c.last.work_ns
    # P4.S3a: stage k runs its m forwards and m backwards after micro-batch 0 has come
    # through the stages before it, and its last backward goes back through them:
    #   pipeline ≥ B_k = Σ_{s<k} (w_s + 2 hop) + m w_k  for every k, w_s = n_s u + e_s.
    # Any convex combination of the B_k with weights λ_k ∝ r^(p-1-k), r = (m-1)/m, gives
    # every n_s the same coefficient 1 / (1 - r^p), so it bounds every split of the layers.
    r = (m - 1) / m
    lam = [r ** (p - 1 - k) for k in range(p)]
    total = sum(lam)
    lam = [x / total for x in lam]
    after = 0.0
    coef = [0.0] * p
    for k in range(p - 1, -1, -1):
        coef[k] = m * lam[k] + after
        after += lam[k]
    prefix, const = 0.0, 0.0
    for k in range(p):
        const += lam[k] * (prefix + m * ends[k])
        prefix += ends[k] + 2 * c.p2p_ns
    pipeline = min(coef) * u * layers + const
    pipeline = max(pipeline, _chain_bound(c, candidate, layers))
    sync = layers * (c.layer_sync_ns + c.layer_optimizer_ns) + c.first.step_ns + c.last.step_ns
    even = m * (layers * u + c.first.work_ns + c.last.work_ns) / p
    # P4.S3b: the synchronisation after the pipeline: the largest stage's, at least the mean
    seconds = (max(even, pipeline * (1 - 1e-12)) + sync / p) / 1e9
    dev = cluster.device
    group = int(candidate["data"]) * int(candidate["tensor"])
    work = m * (layers * u + c.first.work_ns + c.last.work_ns) + sync  # busy time, summed over stages
    joules = group * p * dev.idle_w * seconds + (dev.busy_w - dev.idle_w) * group * work / 1e9
    return weights[0] * seconds + weights[1] * joules, seconds


def _chain_bound(c: PlanCosts, candidate: dict[str, Any], layers: int) -> float:
    """P4.S3c: the pipeline from the first backward each stage waits for.

    Stage ``k`` runs its first backward only after micro-batch 0's forward has gone
    through every stage and its backward has come back from the last; before that it
    has done ``q_k`` forwards (1F1B: ``min(m, p - k)``), after it it still runs ``m``
    backwards and ``m - q_k`` forwards, and then its last backward goes back through the
    stages before it.  With ``W`` every stage's forward and backward once:
    ``pipeline ≥ W + (m - 1) b_k + (m - q_k) f_k + 2 (p - 1) hop`` (1F1B) and
    ``W + (m - 1) (f_k + b_k) + 2 (p - 1) hop`` (GPipe, whose first backward follows all
    ``m`` forwards).  Each is ``a_k n_k + c_k`` in the layers ``n_k ≥ 1`` of stage ``k``.
    """
    p, m = int(candidate["pipeline"]), int(candidate["micro_batches"])
    f_u = min(lc.forward_ns for lc in c.layer.values())
    b_u = min(lc.backward_ns for lc in c.layer.values())
    ef, eb = [0.0] * p, [0.0] * p
    ef[0] += c.first.forward_ns
    eb[0] += c.first.backward_ns
    ef[-1] += c.last.forward_ns
    eb[-1] += c.last.backward_ns
    whole = layers * (f_u + b_u) + sum(ef) + sum(eb) + 2 * (p - 1) * c.p2p_ns
    slopes, offsets = [], []
    for k in range(p):
        if candidate.get("schedule") == "gpipe":
            slopes.append((m - 1) * (f_u + b_u))
            offsets.append((m - 1) * (ef[k] + eb[k]))
        else:
            q = min(m, p - k)
            slopes.append((m - 1) * b_u + (m - q) * f_u)
            offsets.append((m - 1) * eb[k] + (m - q) * ef[k])
    # Every stage holds a whole number of layers, at least one (P4.D3): the least largest
    # a_k n_k + c_k over such splits, by giving each next layer to the stage it costs
    # least (exact for a sum of increasing linear terms under a maximum).
    worst = max(a + o for a, o in zip(slopes, offsets, strict=True))  # one layer each
    heap = [(2 * a + o, a, k) for k, (a, o) in enumerate(zip(slopes, offsets, strict=True))]  # with one more
    heapq.heapify(heap)
    for _ in range(layers - p):
        value, a, k = heapq.heappop(heap)
        worst = max(worst, value)
        heapq.heappush(heap, (value + a, a, k))
    return whole + worst


def _estimate(c: PlanCosts, candidate: dict[str, Any], layers: int, weights: tuple[float, float],
              cluster: ClusterSpec) -> float:
    """A quick estimate of the candidate's best plan: even stages, one recomputation option
    for every layer (the first that fits), ``(m + p - 1)`` times the slowest stage; only
    an order for P4.S4 (``inf`` when no uniform option fits)."""
    p, m = int(candidate["pipeline"]), int(candidate["micro_batches"])
    per = -(-layers // p)
    flying = m if candidate["schedule"] == "gpipe" else min(m, p)
    ends_fb = max(c.first.work_ns, c.last.work_ns)
    ends_bytes = max(end.param_bytes + flying * end.activation_bytes for end in (c.first, c.last))
    for lc in c.layer.values():
        memory = per * (c.layer_param_bytes + flying * lc.activation_bytes) + lc.transient_bytes + ends_bytes
        if memory <= c.capacity_bytes and flying * per * lc.host_bytes <= c.host_capacity_bytes:
            stage = per * (lc.forward_ns + lc.backward_ns) + ends_fb
            sync = per * (c.layer_sync_ns + c.layer_optimizer_ns) + c.first.step_ns
            seconds = ((m + p - 1) * stage + sync) / 1e9
            dev = cluster.device
            devices = int(candidate["data"]) * int(candidate["tensor"]) * p
            return weights[0] * seconds + weights[1] * devices * dev.busy_w * seconds
    return float("inf")


def plan_search(model: TransformerConfig, cluster: ClusterSpec, *, global_batch: int, objective: str = "time",
                alpha: float = 0.5, references: tuple[float, float] | None = None, time_cap: float | None = None,
                time_limit: float | None = 60.0, micro_batches: tuple[int, ...] = (1, 2, 4, 8),
                schedules: tuple[str, ...] = SCHEDULES, zero: tuple[int, ...] = (0, 1, 2, 3)) -> PlanResult:
    """The best plan of the class for ``model`` on ``cluster`` (P4.S1-S5).

    Parameters
    ----------
    global_batch
        Sequences per iteration (``d * b * m``).
    objective
        ``time`` (seconds per iteration), ``energy`` (joules per iteration) or
        ``weighted``: ``alpha · time / time_ref + (1 - alpha) · energy / energy_ref``, the
        references being ``references`` or, by default, the time and energy of the
        fastest plan (searched first).
    time_cap
        Seconds: only plans at most this slow count (the ε-constraint, P4.P8); the bound
        then holds for those plans.
    time_limit
        Seconds for the whole search; a search that runs out returns its best plan and
        the least bound of the candidates it has not ruled out.
    micro_batches, schedules, zero
        The micro-batch sizes, pipeline schedules and ZeRO stages the class allows.
    """
    if objective not in OBJECTIVES:
        raise MonetError(f"objective {objective!r}", field="objective", fix=f"use {', '.join(OBJECTIVES)}")
    if global_batch < 1:
        raise MonetError(f"global batch {global_batch}", field="global_batch", fix="give a positive batch")
    if objective == "weighted" and not 0 <= alpha <= 1:
        raise MonetError(f"alpha = {alpha}", field="alpha", fix="give a weight in [0, 1]")
    began = time.perf_counter()
    deadline = Deadline(time_limit)
    holds_for = CLASS.format(sizes=", ".join(map(str, micro_batches)),
                             zero="0-3" if tuple(sorted(zero)) == (0, 1, 2, 3) else ", ".join(map(str, sorted(zero))))
    if time_cap is not None:
        holds_for += f", at most {time_cap:.6g} s per iteration"
    stats: dict[str, Any] = {"candidates": 0, "solved": 0, "pruned": 0, "infeasible": 0, "unfinished": 0}
    if objective == "weighted":
        if references is None:
            fastest = plan_search(model, cluster, global_batch=global_batch, objective="time",
                                  time_limit=deadline.solver_limit(0.5), micro_batches=micro_batches,
                                  schedules=schedules, zero=zero)
            if fastest.metrics is None:
                return dataclasses.replace(fastest, objective=objective)
            references = (fastest.metrics.time_s, fastest.metrics.energy_j)
        stats["references"] = {"time_s": references[0], "energy_j": references[1]}
        weights = (alpha / references[0], (1 - alpha) / references[1])
    else:
        weights = (1.0, 0.0) if objective == "time" else (0.0, 1.0)
    scored = []
    for candidate in _candidates(model, cluster, global_batch, micro_batches, schedules, zero):
        costs = plan_costs(model, cluster, data=candidate["data"], pipeline=candidate["pipeline"],
                           tensor=candidate["tensor"], sequence_parallel=candidate["sequence_parallel"],
                           micro_batch=candidate["micro_batch"], zero=candidate["zero"],
                           placement=candidate["placement"])
        even, seconds = _even_bound(costs, candidate, model.layers, weights, cluster)
        if time_cap is not None and seconds > time_cap:
            stats["infeasible"] += 1  # even its evenly spread work is slower than the cap
            continue
        scored.append((even, candidate, costs))
    # P4.S4: the most promising candidates first (by a quick estimate of their plan), so
    # that a good plan is found early and prunes the rest by their bounds.
    scored.sort(key=lambda item: (_estimate(item[2], item[1], model.layers, weights, cluster), item[0]))
    stats["candidates"] = len(scored) + stats["infeasible"]
    if not scored:
        why = ("no candidate is fast enough for the cap" if stats["infeasible"] else
               "no degrees divide the model, the cluster and the batch")
        return PlanResult("infeasible", None, None, objective, None, None, round(time.perf_counter() - began, 3),
                          holds_for, {**stats, "why": why})
    best: tuple[float, Plan, PlanMetrics] | None = None
    open_bounds: list[float] = []  # bounds of candidates that might still hold a better plan
    floor = work_bound(model, cluster, global_batch) if objective == "time" else 0.0
    cap_ns = None if time_cap is None else time_cap * 1e9
    unproven: list[tuple[float, dict[str, Any], PlanCosts]] = []  # P4.S4's second pass

    def partition(candidate: dict[str, Any], costs: PlanCosts, limit: float | None) -> Partition:
        return solve_partition(costs, cluster, layers=model.layers, pipeline=candidate["pipeline"],
                               micro_batches=candidate["micro_batches"], schedule=candidate["schedule"],
                               devices_per_stage=candidate["data"] * candidate["tensor"], weights=weights,
                               time_cap_ns=cap_ns, time_limit=limit)

    def consider(part_stages: tuple[int, ...], part_recompute: tuple[str, ...], candidate: dict[str, Any],
                 costs: PlanCosts) -> None:
        nonlocal best
        plan = Plan(candidate["data"], candidate["pipeline"], candidate["tensor"], candidate["sequence_parallel"],
                    candidate["micro_batch"], candidate["micro_batches"], candidate["schedule"], part_stages,
                    part_recompute, candidate["zero"], candidate["placement"])
        metrics = evaluate_plan(model, cluster, plan, costs=costs)
        if not metrics.feasible:  # the MILP's memory rows are the evaluator's: a bug if this happens
            raise RuntimeError(f"partition MILP returned an infeasible plan: {metrics.violations[0]}")
        if time_cap is not None and metrics.time_s > time_cap:
            return  # within the MILP's cap, but the pipeline runs slower: not a plan of the sweep
        value = weights[0] * metrics.time_s + weights[1] * metrics.energy_j
        if best is None or value < best[0]:
            best = (value, plan, metrics)

    for position, (even, candidate, costs) in enumerate(scored):
        if best is not None and even >= best[0] * (1 - 1e-9):
            stats["pruned"] += 1
            open_bounds.append(even)
            continue
        if deadline.passed():
            stats["unfinished"] += len(scored) - position
            open_bounds.append(min(e for e, _, _ in scored[position:]))
            break
        # First pass: a short MILP per candidate, so that one hard candidate cannot hold up
        # the others; the unproven ones go to the second pass with what time is left.
        share = deadline.solver_limit(1 / max(1, min(8, len(scored) - position)), at_most=FIRST_PASS_S)
        part = partition(candidate, costs, share)
        stats["solved"] += 1
        if part.status == "infeasible":
            stats["infeasible"] += 1
            continue
        bound = even if part.bound is None else max(even, part.bound)
        if part.status != "optimal":
            unproven.append((bound, candidate, costs))
        else:
            open_bounds.append(bound)
        if part.stages is not None and part.recompute is not None:
            consider(part.stages, part.recompute, candidate, costs)
    # Second pass (P4.S4): the unproven candidates whose bound is below the best plan,
    # most promising first, each with a share of the time left.
    unproven.sort(key=lambda item: item[0])
    for position, (bound, candidate, costs) in enumerate(unproven):
        if best is not None and bound >= best[0] * (1 - 1e-9):
            open_bounds.extend(b for b, _, _ in unproven[position:])
            break
        if deadline.passed():
            open_bounds.extend(b for b, _, _ in unproven[position:])
            break
        share = deadline.solver_limit(1 / max(1, len(unproven) - position))
        part = partition(candidate, costs, share)
        stats["second_pass"] = stats.get("second_pass", 0) + 1
        if part.status == "infeasible":
            continue
        open_bounds.append(bound if part.bound is None else max(bound, part.bound))
        if part.stages is not None and part.recompute is not None:
            consider(part.stages, part.recompute, candidate, costs)
    seconds = round(time.perf_counter() - began, 3)
    stats["work_bound_s"] = work_bound(model, cluster, global_batch)
    if best is None:
        status = "infeasible" if stats["infeasible"] == stats["candidates"] else "unknown"
        # P4.S5: the class's optimum is the least of its candidates' optima, so its bound
        # is the least of their bounds (a derivation, not a cap).
        return PlanResult(status, None, None, objective, None, min(open_bounds, default=None), seconds, holds_for,
                          stats)
    value, plan, metrics = best
    # P4.S5: the class's optimum is the least of its candidates' optima, each at least its
    # bound (open_bounds holds every candidate's): the least of these holds for the class.
    bound = max(floor, min(open_bounds, default=floor))
    wrong = bound_error(value, bound, "P4 search (P4.S2 work bound and the stage MILPs' bounds)", holds_for,
                        tolerance=PLAN_TOLERANCE)
    if wrong is not None:  # BD.C1: the bound is checked against the verified plan, never capped
        return PlanResult("error", plan, metrics, objective, value, bound, seconds, holds_for,
                          {**stats, "error": wrong})
    status = "optimal" if bound >= value * (1 - PLAN_TOLERANCE) else "feasible"
    return PlanResult(status, plan, metrics, objective, value, bound, seconds, holds_for, stats)


def plan_pareto(model: TransformerConfig, cluster: ClusterSpec, *, global_batch: int, points: int = 5,
                time_limit: float | None = 60.0, **options: Any) -> list[PlanResult]:
    """The time/energy Pareto front by ε-constraint (P4.S6): the fastest plan, the most frugal,
    and the most frugal at ``points - 2`` time caps evenly spaced between them.

    Each result's bound holds for the plans at most as slow as its cap; the dominated
    points are left out.  ``time_limit`` is shared by the searches.
    """
    if points < 2:
        raise MonetError(f"points = {points}", field="points", fix="ask for at least 2 points")
    deadline = Deadline(time_limit)
    share = 1 / points
    fastest = plan_search(model, cluster, global_batch=global_batch, objective="time",
                          time_limit=deadline.solver_limit(share), **options)
    frugal = plan_search(model, cluster, global_batch=global_batch, objective="energy",
                         time_limit=deadline.solver_limit(1 / (points - 1)), **options)
    if fastest.metrics is None or frugal.metrics is None:
        return [r for r in (fastest, frugal) if r.metrics is not None]
    low, high = fastest.metrics.time_s, frugal.metrics.time_s
    results = [plan_search(model, cluster, global_batch=global_batch, objective="energy", time_cap=low,
                           time_limit=deadline.solver_limit(1 / (points - 1)), **options)]
    for i in range(1, points - 1):
        cap = low + (high - low) * i / (points - 1)
        results.append(plan_search(model, cluster, global_batch=global_batch, objective="energy", time_cap=cap,
                                   time_limit=deadline.solver_limit(1 / max(1, points - 1 - i)), **options))
    results.append(frugal)
    measured = sorted(((r.metrics.time_s, r.metrics.energy_j, r) for r in results if r.metrics is not None),
                      key=lambda item: (item[0], item[1]))
    front: list[PlanResult] = []
    least = float("inf")
    for _, energy, r in measured:
        if energy < least:
            front.append(r)
            least = energy
    return front
