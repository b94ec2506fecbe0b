"""The P4 evaluator: memory per device, time per iteration (the pipeline simulated step by step), energy.

The witness for plans, as :mod:`monet_ilp.evaluate` is for schedules
(``formulations/p4_problem.md`` P4.V1-V6).  It reads the plan, the model and the
cluster, takes the per-layer costs (:mod:`.costs`, the data every P4 search reads too)
and shares nothing else with the searches: it adds up each stage's memory itself,
runs every forward and backward of every micro-batch on every stage in the order the
schedule prescribes, waits for each input to arrive, and checks every capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import MonetError
from monet_ilp.problems.p4.costs import PlanCosts, plan_costs

if TYPE_CHECKING:
    from monet_ilp.hardware.cluster import ClusterSpec
    from monet_ilp.problems.p4.model import TransformerConfig
    from monet_ilp.problems.p4.plan import Plan

__all__ = ["PlanMetrics", "StageMetrics", "evaluate_plan", "simulate_pipeline", "stage_orders"]


@dataclass(frozen=True)
class StageMetrics:
    """One pipeline stage: its layers, memory per device against the capacity, its busy time."""

    layers: tuple[int, int]  # first, last (inclusive)
    memory_bytes: int
    parameter_bytes: int
    activation_bytes: int
    in_flight: int  # micro-batches whose activations it holds at once
    busy_ns: int  # forwards, backwards, gradient synchronisation and optimizer step
    forward_ns: int  # one micro-batch
    backward_ns: int


@dataclass(frozen=True)
class PlanMetrics:
    """What the evaluator found (P4.V6)."""

    feasible: bool
    violations: tuple[str, ...]
    time_ns: int
    pipeline_ns: int
    sync_ns: int
    compute_ns: int  # the busiest stage's matrix products and element-wise ops
    communication_ns: int  # the rest of its busy time: tensor-parallel collectives, ZeRO, sync
    bubble_ns: int  # time the busiest stage waits
    energy_j: float
    devices: int
    model_flops: int
    mfu: float
    hfu: float
    stages: tuple[StageMetrics, ...] = field(default_factory=tuple)
    #: Every forward and backward: (stage, "F" or "B", micro-batch, start ns, end ns).
    timeline: tuple[tuple[int, str, int, int, int], ...] = field(default_factory=tuple, repr=False)

    @property
    def time_s(self) -> float:
        return self.time_ns / 1e9

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("stages", "timeline")}
        out["violations"] = list(self.violations)
        out["time_per_iteration_s"] = self.time_s
        out["stages"] = [dict(s.__dict__) for s in self.stages]
        return out


def stage_orders(schedule: str, stages: int, micro_batches: int) -> list[list[tuple[str, int]]]:
    """Each stage's sequence of ``("F", i)`` and ``("B", i)`` tasks (P4.V3).

    GPipe: every forward, then every backward in reverse order.  1F1B: ``p - s - 1``
    warm-up forwards (at most ``m``), then one forward and one backward in turn, then
    the remaining backwards.
    """
    m = micro_batches
    orders = []
    for s in range(stages):
        if schedule == "gpipe":
            orders.append([("F", i) for i in range(m)] + [("B", i) for i in reversed(range(m))])
            continue
        warm = min(stages - s - 1, m)
        order = [("F", i) for i in range(warm)]
        f, bwd = warm, 0
        while f < m:
            order.append(("F", f))
            f += 1
            order.append(("B", bwd))
            bwd += 1
        order += [("B", i) for i in range(bwd, m)]
        orders.append(order)
    return orders


def evaluate_plan(model: TransformerConfig, cluster: ClusterSpec, plan: Plan, *,
                  costs: PlanCosts | None = None) -> PlanMetrics:
    """Check ``plan`` and measure it (P4.V1-V6 of ``p4_problem.md``).

    A plan that breaks a device's memory is returned with ``feasible`` false and each
    violation named; one that cannot be built at all (degrees the model or the cluster
    cannot take) raises :class:`~monet_ilp.errors.MonetError`.
    """
    if sum(plan.stages) != model.layers:
        raise MonetError(f"plan covers {sum(plan.stages)} layers, the model has {model.layers}", field="stages",
                         fix="give layer counts summing to the model's layers")
    c = costs or plan_costs(model, cluster, data=plan.data, pipeline=plan.pipeline, tensor=plan.tensor,
                            sequence_parallel=plan.sequence_parallel, micro_batch=plan.micro_batch, zero=plan.zero,
                            placement=plan.placement)
    p, m = plan.pipeline, plan.micro_batches
    missing = sorted(set(plan.recompute) - set(c.layer))
    if missing:
        raise MonetError(f"plan uses {missing[0]!r}, which cluster {cluster.name!r} cannot do (no host link)",
                         field="recompute", fix="choose none, selective or full, or a cluster with host memory")
    violations: list[str] = []
    forward, backward, sync, busy_compute, flops_stage = [], [], [], [], []
    stages = []
    for s, layers in enumerate(plan.stage_layers()):
        options = [plan.recompute[i] for i in layers]
        fwd = sum(c.layer[o].forward_ns for o in options)
        bwd = sum(c.layer[o].backward_ns for o in options)
        compute = sum(c.layer[o].compute_ns for o in options)
        flops = sum(c.layer[o].flops for o in options)
        params = c.layer_param_bytes * len(layers)
        acts = sum(c.layer[o].activation_bytes for o in options)
        stage_sync = c.layer_sync_ns * len(layers) + c.layer_optimizer_ns * len(layers)
        for end in c.ends(s, p):
            fwd += end.forward_ns
            bwd += end.backward_ns
            params += end.param_bytes
            acts += end.activation_bytes
            stage_sync += end.step_ns
        # P4.V2: 1F1B holds at most p - s micro-batches' activations on stage s, GPipe all m.
        in_flight = m if plan.schedule == "gpipe" else min(m, p - s)
        transient = max((c.layer[o].transient_bytes for o in options), default=0)
        memory = params + in_flight * acts + transient
        if memory > c.capacity_bytes:
            violations.append(f"stage {s} (layers {layers.start}-{layers.stop - 1}) needs {memory:,} bytes per "
                              f"device, more than {c.capacity_bytes:,}")
        host = in_flight * sum(c.layer[o].host_bytes for o in options)
        if host > c.host_capacity_bytes:
            violations.append(f"stage {s} offloads {host:,} bytes per device, more than the host's "
                              f"{c.host_capacity_bytes:,}")
        forward.append(fwd)
        backward.append(bwd)
        sync.append(stage_sync)
        busy_compute.append(compute * m)
        flops_stage.append(flops * m)
        stages.append((layers, memory, params, in_flight * acts + transient, in_flight, fwd, bwd))
    tasks: list[tuple[int, str, int, int, int]] = []
    hops = [c.p2p_ns] * (p - 1)
    pipeline_ns = simulate_pipeline(stage_orders(plan.schedule, p, m), forward, backward, hops, hops, tasks)
    sync_ns = max(sync)
    time_ns = pipeline_ns + sync_ns
    busy = [m * (forward[s] + backward[s]) + sync[s] for s in range(p)]
    bottleneck = max(range(p), key=lambda s: busy[s])
    dev = cluster.device
    group = plan.data * plan.tensor  # devices per stage
    busy_s = sum(busy) * group / 1e9
    energy = dev.busy_w * busy_s + dev.idle_w * (time_ns / 1e9 * plan.devices - busy_s)
    model_flops = model.model_flops(plan.global_batch)
    peak = time_ns / 1e9 * plan.devices * dev.peak_flops
    hardware_flops = sum(flops_stage) * group  # per device figures times the devices of each stage
    hardware_flops += 3 * model.head_forward_flops(plan.global_batch)
    return PlanMetrics(
        feasible=not violations, violations=tuple(violations), time_ns=time_ns, pipeline_ns=pipeline_ns,
        sync_ns=sync_ns, compute_ns=busy_compute[bottleneck],
        communication_ns=busy[bottleneck] - busy_compute[bottleneck],
        bubble_ns=time_ns - busy[bottleneck], energy_j=energy, devices=plan.devices, model_flops=model_flops,
        mfu=model_flops / peak if peak else 0.0, hfu=hardware_flops / peak if peak else 0.0,
        stages=tuple(StageMetrics((r.start, r.stop - 1), mem, par, act, inf, busy[s], f, b)
                     for s, (r, mem, par, act, inf, f, b) in enumerate(stages)),
        timeline=tuple(tasks),
    )


def simulate_pipeline(orders: list[list[tuple[str, int]]], forward: list[int], backward: list[int],
                      down: list[int], up: list[int],
                      tasks: list[tuple[int, str, int, int, int]] | None = None) -> int:
    """Run every stage's tasks in its order, each as soon as its stage is free and its input has arrived.

    ``F(s, i)`` waits for ``F(s-1, i)`` and the hop ``down[s-1]`` across the boundary
    between stages ``s-1`` and ``s``; ``B(s, i)`` for ``B(s+1, i)`` and the hop ``up[s]``
    back across it (the last stage: for its own ``F(p-1, i)``).  Returns the end of the
    last task; ``tasks`` receives ``(stage, kind, micro-batch, start, end)`` of each.
    """
    p = len(orders)
    done: dict[tuple[str, int, int], int] = {}
    free = [0] * p
    position = [0] * p
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while position[s] < len(orders[s]):
                kind, i = orders[s][position[s]]
                if kind == "F":
                    need = None if s == 0 else done.get(("F", s - 1, i))
                    if s > 0 and need is None:
                        break
                    ready = 0 if need is None else need + down[s - 1]
                    length = forward[s]
                else:
                    if s == p - 1:
                        own = done.get(("F", s, i))
                        if own is None:
                            break
                        ready = own
                    else:
                        upstream = done.get(("B", s + 1, i))
                        if upstream is None:
                            break
                        ready = upstream + up[s]
                    length = backward[s]
                start = max(free[s], ready)
                free[s] = done[kind, s, i] = start + length
                if tasks is not None:
                    tasks.append((s, kind, i, start, start + length))
                position[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # a schedule whose orders wait on each other: a bug in stage_orders
            raise RuntimeError("pipeline orders deadlock")
    return max(free)
