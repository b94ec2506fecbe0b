"""The stage partition and recomputation of one P4 candidate as a MILP (``p4_problem.md`` P4.P0-P7).

For fixed degrees, micro-batching, schedule and ZeRO stage: which contiguous layers go
to which pipeline stage, and which layers recompute (none, selective, full), under each
device's memory, to minimise a lower bound on the evaluator's time (or energy) per
iteration.  The bound holds for every partition and recomputation of the candidate, so
the MILP's optimum (and its dual bound at a time limit) bounds the candidate, and its
solution is a plan the evaluator then measures.  In the spirit of the pipelined-model-
parallelism ILP of Beaumont et al. (Euro-Par 2021), with the memory of ``p - s``
micro-batches in flight on stage ``s`` under 1F1B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from monet_ilp.engines.deadline import Deadline
from monet_ilp.engines.highs import run_highs
from monet_ilp.engines.milp import RowModel

if TYPE_CHECKING:
    from monet_ilp.hardware.cluster import ClusterSpec
    from monet_ilp.problems.p4.costs import PlanCosts

__all__ = ["Partition", "solve_partition"]

#: Inside the MILP times are milliseconds (the costs' nanoseconds / MS): per-nanosecond
#: coefficients (seconds or joules) would fall below HiGHS's tolerances.
MS = 1e6
MS_PER_S = 1e3


@dataclass(frozen=True)
class Partition:
    """The MILP's answer for one candidate."""

    status: str  # "optimal", "feasible" (time limit, with a solution), "infeasible", "limit" (no solution)
    stages: tuple[int, ...] | None
    recompute: tuple[str, ...] | None
    objective: float | None  # the bound's value at the solution (the objective's unit: s, J or weighted)
    bound: float | None  # a lower bound on every partition of the candidate (same unit)
    seconds: float


def solve_partition(costs: PlanCosts, cluster: ClusterSpec, *, layers: int, pipeline: int, micro_batches: int,
                    schedule: str, devices_per_stage: int, objective: str = "time",
                    weights: tuple[float, float] | None = None, time_cap_ns: float | None = None,
                    time_limit: float | None = None) -> Partition:
    """Solve P4.P0-P8 for one candidate (``devices_per_stage`` = ``d * t``).

    ``objective`` ``time`` (seconds) or ``energy`` (joules), or ``weights`` ``(w_t, w_e)``
    for ``w_t · seconds + w_e · joules``; ``time_cap_ns`` keeps the plans whose evaluator
    time can be at most that (the ε-constraint of a Pareto sweep).
    """
    if weights is None:
        weights = (1.0, 0.0) if objective == "time" else (0.0, 1.0)
    L, p, m = layers, pipeline, micro_batches
    options = list(costs.layer)  # none, selective, full, and offload where there is a host
    model = RowModel()
    col, row, cost = model.col, model.row, model.cost

    # P4.P0 n[s, k]: how many layers stage s runs with recomputation k.  The layers are
    # identical, so a stage is a count of layers per option, and the stages, taken in
    # order, are contiguous blocks: no ordering constraint is needed.
    w: dict[tuple[int, str], int] = {(s, k): col(upper=float(L)) for s in range(p) for k in options}
    row({j: 1.0 for j in w.values()}, float(L), float(L))  # P4.P1 every layer once
    for s in range(p):  # P4.P2 every stage runs at least one layer
        row({w[s, k]: 1.0 for k in options}, 1.0, math.inf)
    in_flight = [m if schedule == "gpipe" else min(m, p - s) for s in range(p)]
    transient = {k: costs.layer[k].transient_bytes for k in options if costs.layer[k].transient_bytes}
    work: list[dict[int, float]] = []
    fixed_work: list[float] = []
    forward: list[dict[int, float]] = []
    fixed_forward: list[float] = []
    sync: list[dict[int, float]] = []
    fixed_sync: list[float] = []
    for s in range(p):
        memory: dict[int, float] = {}
        stage_work: dict[int, float] = {}
        stage_sync: dict[int, float] = {}
        stage_forward: dict[int, float] = {}
        for k in options:
            j, lc = w[s, k], costs.layer[k]
            memory[j] = costs.layer_param_bytes + in_flight[s] * lc.activation_bytes
            stage_work[j] = (lc.forward_ns + lc.backward_ns) / MS
            stage_forward[j] = lc.forward_ns / MS
            stage_sync[j] = (costs.layer_sync_ns + costs.layer_optimizer_ns) / MS
        ends = costs.ends(s, p)
        const = sum(end.param_bytes + in_flight[s] * end.activation_bytes for end in ends)
        if transient:  # P4.P3 what a full or offloaded layer holds again while its backward runs
            most = col(integer=False, upper=math.inf)  # the largest such transient in stage s
            for k, size in transient.items():
                flag = col()  # stage s has a layer with option k
                row({flag: float(L), w[s, k]: -1.0}, 0.0, math.inf)
                row({most: 1.0, flag: -float(size)}, 0.0, math.inf)
            memory[most] = 1.0
        if "offload" in options:  # P4.P3 host memory per device
            row({w[s, "offload"]: float(in_flight[s] * costs.layer["offload"].host_bytes)}, -math.inf,
                float(costs.host_capacity_bytes))
        row(memory, -math.inf, float(costs.capacity_bytes - const))  # P4.P3 memory per device
        work.append(stage_work)
        forward.append(stage_forward)
        fixed_forward.append(sum(end.forward_ns for end in ends) / MS)
        fixed_work.append(sum(end.work_ns for end in ends) / MS)
        sync.append(stage_sync)
        fixed_sync.append(sum(end.step_ns for end in ends) / MS)
    # P4.P5 the pipeline: stage s waits for every upstream stage once on the way in and
    # once on the way out, and runs m forwards and backwards in between.
    z = col(integer=False, upper=math.inf)
    for s in range(p):
        terms = {z: 1.0}
        rhs = m * fixed_work[s]
        for j, v in work[s].items():
            terms[j] = terms.get(j, 0.0) - m * v
        for up in range(s):
            for j, v in work[up].items():
                terms[j] = terms.get(j, 0.0) - v
            rhs += fixed_work[up] + 2 * costs.p2p_ns / MS
        row(terms, rhs, math.inf)
    for s in range(p - 1):
        # P4.P5 the way down and back.  GPipe: stage s runs its m forwards, then its first
        # backward waits for the last micro-batch to go down the rest of the pipeline and
        # back.  1F1B: its first backward waits for the first micro-batch's way down and
        # back, during which it runs at most its warm-up forwards (min(m, p - s) - 1).
        overlap = 0 if schedule == "gpipe" else min(m, p - s) - 1
        terms = {z: 1.0}
        rhs = m * fixed_work[s] - overlap * fixed_forward[s] + 2 * (p - 1) * costs.p2p_ns / MS
        for j, v in work[s].items():
            terms[j] = terms.get(j, 0.0) - m * v
        for j, v in forward[s].items():
            terms[j] = terms.get(j, 0.0) + overlap * v
        for other in range(p):
            if other == s:
                continue
            for j, v in work[other].items():
                terms[j] = terms.get(j, 0.0) - v
            rhs += fixed_work[other]
        row(terms, rhs, math.inf)
    q = col(integer=False, upper=math.inf)  # P4.P6 the slowest gradient synchronisation and optimizer step
    for s in range(p):
        terms = {q: 1.0}
        for j, v in sync[s].items():
            terms[j] = -v
        row(terms, fixed_sync[s], math.inf)
    # P4.P7 the objective: w_t (Z + Q) seconds + w_e joules (Z, Q in ms), the energy being
    # N W_i (Z + Q) + (W_b - W_i) d t sum_s (m W_s + sync_s).
    w_time, w_energy = weights
    dev = cluster.device
    devices = devices_per_stage * p
    cost[z] = cost[q] = (w_time + w_energy * devices * dev.idle_w) / MS_PER_S
    offset = 0.0
    if w_energy:
        extra = w_energy * (dev.busy_w - dev.idle_w) * devices_per_stage / MS_PER_S
        for s in range(p):
            for j, v in work[s].items():
                cost[j] += extra * m * v
            for j, v in sync[s].items():
                cost[j] += extra * v
            offset += extra * (m * fixed_work[s] + fixed_sync[s])
    if time_cap_ns is not None:  # P4.P8 the ε-constraint: Z + Q is at most the evaluator's time
        row({z: 1.0, q: 1.0}, -math.inf, time_cap_ns / MS)
    # The objective is scaled so that its largest coefficient is 1 (HiGHS's tolerances are
    # absolute), and scaled back after.
    scale = max(abs(c) for c in cost) or 1.0
    cost[:] = [c / scale for c in cost]
    offset /= scale
    milp = model.milp(offset)
    run = run_highs(milp, deadline=Deadline(time_limit))
    if run.status == "infeasible":
        return Partition("infeasible", None, None, None, math.inf, run.seconds)
    bound = None if run.bound is None else run.bound * scale
    if run.values is None:
        return Partition("limit", None, None, None, bound, run.seconds)
    counts = []
    recompute: list[str] = []
    for s in range(p):
        per = {k: round(run.values[w[s, k]]) for k in options}
        counts.append(sum(per.values()))
        for k in options:  # within a stage the order of identical layers does not matter
            recompute += [k] * per[k]
    status = "optimal" if run.status == "optimal" else "feasible"
    objective_value = None if run.objective is None else run.objective * scale
    return Partition(status, tuple(counts), tuple(recompute), objective_value, bound, run.seconds)
