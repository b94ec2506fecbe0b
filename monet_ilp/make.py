"""Building instances: budgets as users write them, P1 from a graph alone, P1-P3 from hardware.

:mod:`monet_ilp.instance` holds the data; this module makes it.  The scaling to
integer cycles, bytes and picojoules is documented there.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph.analysis import store_all_peak
from monet_ilp.graph.fusion import FusionPlan, tile_graph
from monet_ilp.hardware.cost import can_run, op_cost
from monet_ilp.hardware.model import OpCost
from monet_ilp.hardware.schema import parse_size
from monet_ilp.heuristics.store_all import store_all
from monet_ilp.instance import (
    COST_SCALE,
    CoreSpec,
    Instance,
    MemorySpec,
    Objective,
    Problem,
    link_spec,
)

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.hardware.model import Hardware, Memory

_E = TypeVar("_E", bound=Enum)

#: A budget written as a bare integer below this many bytes is refused as ambiguous:
#: ``--budget 2`` is far more likely a slip for ``2x`` or ``0.2`` than two bytes.
MIN_PLAIN_BUDGET_BYTES = 1024


def parse_budget(value: Any, *, field: str = "--budget", file: str | None = None) -> float | int | None:
    """A budget as written by a user: a ``float`` multiple of the store-all peak, or ``int`` bytes.

    * ``0.8`` or ``80%``: a fraction of the store-all activation peak, in (0, 1];
    * ``1.5x``: an explicit multiple of the peak (any positive number);
    * ``2MiB``, ``300kB``, ``4096B``: bytes, with a unit;
    * ``300000``: bytes, as a bare integer of at least :data:`MIN_PLAIN_BUDGET_BYTES`.

    Anything else (``2``, ``2.0``, ``-1``, ``abc``) raises :class:`MonetError` naming
    ``field`` and the spellings above, so that no budget is read in a unit the user
    did not mean.
    """

    fix = ("write a fraction of the store-all peak in (0, 1] (0.8 or 80%), a multiple with an x "
           f"(1.5x), or bytes with a unit (2MiB, 4096B) or as an integer of at least "
           f"{MIN_PLAIN_BUDGET_BYTES}")

    def bad(problem: str) -> MonetError:
        return MonetError(problem, file=file, field=field, fix=fix)

    if value is None:
        return None
    if isinstance(value, bool):
        raise bad(f"budget {value!r} is not a size or a fraction")
    if isinstance(value, int):
        if value < MIN_PLAIN_BUDGET_BYTES:
            raise bad(f"budget {value} is ambiguous (bytes? a multiple of the peak?)")
        return value
    if isinstance(value, float):
        if not 0 < value <= 1:
            raise bad(f"budget {value!r} is not a fraction in (0, 1]")
        return value
    text = str(value).strip().replace("_", "")
    try:
        if text.lower().endswith("x"):
            multiple = float(text[:-1])
            if not 0 < multiple < float("inf"):
                raise bad(f"budget {text!r} is not a positive multiple of the peak")
            return multiple
        if text.endswith("%"):
            return parse_budget(float(text[:-1]) / 100, field=field, file=file)
        if text.isdigit():
            return parse_budget(int(text), field=field, file=file)
        return parse_budget(float(text), field=field, file=file)
    except ValueError:
        pass
    try:
        size = parse_size(text, field=field, file=file)
    except MonetError:
        raise bad(f"cannot read budget {text[:40]!r}") from None
    if size < 1:
        raise bad(f"budget {text!r} is not a positive number of bytes")
    return size


def budget_bytes_of(graph: TrainingGraph, budget: float | int, *, field_name: str = "budget") -> int:
    """A budget in bytes: an ``int`` is bytes, a ``float`` a multiple of the store-all peak.

    Text as users write it goes through :func:`parse_budget` first.

    The peak is that of non-persistent tensors in the graph's op order
    (``formulations/training_graph.md``, TG.M1); persistent tensors are outside the budget.
    """

    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0:
        raise MonetError(f"budget {budget!r} must be positive", field=field_name,
                         fix="give a multiple of the store-all peak (a float, e.g. 0.8) or bytes (an int)")
    if isinstance(budget, float):
        return max(1, int(budget * store_all_peak(graph).activation_bytes))
    return budget


def graph_costs(graph: TrainingGraph) -> tuple[dict[str, int], int]:
    """Per-op integer costs from the graph itself, and the scale applied.

    Node-link graphs carry ``cost``; integer costs are kept, fractional ones are
    multiplied by :data:`COST_SCALE` and rounded.  Ops without a cost (ONNX graphs
    used without hardware) cost their FLOPs.
    """
    given = [op.cost for op in graph.ops if op.cost is not None]
    fractional = any(float(c) != int(c) for c in given)
    scale = COST_SCALE if fractional else 1
    costs = {
        op.id: (round(op.cost * scale) if op.cost is not None else op.flops * scale) for op in graph.ops
    }
    return costs, scale


def p1_instance(graph: TrainingGraph, budget: float | int = 0.8, *, name: str | None = None) -> Instance:
    """P1 (remat) on one core, with costs taken from the graph (no hardware).

    The one memory, ``core0.sram``, has the budget as capacity; the objective is the
    total compute cost, recomputation included.
    """

    costs, scale = graph_costs(graph)
    capacity = budget_bytes_of(graph, budget)
    return Instance(
        name=name or f"{graph.name}_p1_b{budget}",
        problem=Problem.P1,
        objective=Objective.COMPUTE,
        graph=graph,
        cores=(CoreSpec("core0", "core0.sram"),),
        memories=(MemorySpec("core0.sram", "sram", capacity),),
        links=(),
        costs={op: {"core0": OpCost(cycles=c)} for op, c in costs.items()},
        input_home="core0.sram",
        meta={
            "budget": budget,
            "budget_bytes": capacity,
            "store_all_peak_bytes": store_all_peak(graph).activation_bytes,
            "cost_source": "graph",
            "cost_scale": scale,
        },
    )


def make_instance(
    graph: TrainingGraph,
    hardware: Hardware | None = None,
    *,
    problem: str | Problem = Problem.P1,
    budget: float | int | None = None,
    sram_budget: int | None = None,
    objective: str | Objective | None = None,
    core: str | None = None,
    offload: str = "dram",
    alpha: float = 0.5,
    runtime_limit_cycles: int | None = None,
    name: str | None = None,
    fusion: FusionPlan | None = None,
) -> Instance:
    """Build an instance of problem class P1, P2 or P3.

    Parameters
    ----------
    graph
        The training graph.
    hardware
        A :class:`~monet_ilp.hardware.Hardware`; ``None`` (P1 only) takes costs from
        the graph (:func:`p1_instance`).
    problem
        ``P1`` (remat on one core), ``P2`` (remat + offload to ``offload``, the
        ``dram`` or ``host`` memory, over the links that reach it) or ``P3`` (every
        core, shared DRAM, every link).
    budget
        P1/P2: the budget of the core's memory, bytes (int) or a fraction of the
        store-all activation peak (float; default 0.8).  P3: every core's SRAM
        capacity as such a fraction or byte count, unless ``sram_budget`` is given.
    sram_budget
        P3: each core's SRAM capacity in bytes (default: the hardware's).
    objective
        ``compute`` (default for P1), ``latency`` (default otherwise), ``energy``
        or ``weighted``.
    core
        P1/P2: the core to use (default: the first).
    runtime_limit_cycles
        With the energy objective: the latency limit (POET's runtime constraint).
    fusion
        A layer-fusion plan (``formulations/fusion.md``): the instance is built over the
        tiled graph (FU.T), with ``meta["fusion"]`` recording the plan.  Budgets given as a
        fraction are of the untiled graph's store-all peak, so a budget means the same
        bytes with and without fusion.
    """
    problem = _enum_arg(Problem, problem, "problem")
    default_objective = Objective.COMPUTE if problem is Problem.P1 else Objective.LATENCY
    objective = _enum_arg(Objective, objective or default_objective, "objective")
    if hardware is None:
        if problem is not Problem.P1:
            raise MonetError(f"{problem} needs a hardware description", field="hardware",
                             fix="pass --hw PRESET or a YAML file")
        inst = p1_instance(graph, 0.8 if budget is None else budget, name=name)
        return _replace(inst, objective=objective, runtime_limit_cycles=runtime_limit_cycles, alpha=alpha)

    if fusion is not None and fusion.fused and hardware is None:
        raise MonetError("a fusion plan needs a hardware description to cost its tiles", field="fusion",
                         fix="pass --hw PRESET or a YAML file")
    if any(op.cost is not None for op in graph.ops):  # only node-link ops carry a supplied cost
        raise MonetError("this graph carries its own costs (a node-link graph); the cost model cannot "
                         "cost its ops", field="hardware", fix="build a P1 instance without --hw")
    def fpj(pj: float) -> int:  # pJ per byte -> integer fJ per byte
        return round(pj * 1000)

    if problem is Problem.P3:
        chosen = list(hardware.cores)
    else:
        core_id = core or hardware.cores[0].id
        if core_id not in {c.id for c in hardware.cores}:
            raise MonetError(f"unknown core {core_id!r}", field="core",
                             fix=f"use one of: {', '.join(c.id for c in hardware.cores)}")
        chosen = [hardware.core(core_id)]
    memories: list[MemorySpec] = []
    for c in chosen:
        if problem is Problem.P3:
            if sram_budget is not None:
                capacity = int(sram_budget)
            elif budget is not None:
                capacity = budget_bytes_of(graph, budget)
            else:
                capacity = c.sram_bytes
        else:
            capacity = budget_bytes_of(graph, 0.8 if budget is None else budget)
        memories.append(MemorySpec(c.sram, "sram", capacity, fpj(c.sram_read_pj_per_byte),
                                   fpj(c.sram_write_pj_per_byte)))
    shared: list[Memory] = []
    if problem is Problem.P2:
        target = {"dram": hardware.dram, "host": hardware.host}.get(offload)
        if target is None:
            raise MonetError(f"the hardware has no {offload!r} memory to offload to", field="offload",
                             fix="use --offload dram or host, with a hardware that has it")
        shared = [target]
    elif problem is Problem.P3:
        shared = [m for m in (hardware.dram, hardware.host) if m is not None]
    for m in shared:
        memories.append(MemorySpec(m.id, str(m.kind), m.capacity_bytes, fpj(m.read_pj_per_byte),
                                   fpj(m.write_pj_per_byte)))
    known = {m.id for m in memories}
    links = [
        link_spec(l.id, [e for e in l.endpoints if e in known], l.bandwidth_bytes_per_cycle, l.pj_per_byte,
                  l.latency_cycles)
        for l in hardware.links
        if sum(e in known for e in l.endpoints) >= 2
    ]
    if problem is Problem.P2 and not links:
        raise MonetError(f"no link joins {chosen[0].sram} and {offload}", field="links",
                         fix="describe a link between the core's SRAM and the offload memory")
    if fusion is not None:
        graph = tile_graph(graph, fusion)  # FU.T: the stacks' tiles are the ops from here on
    costs: dict[str, dict[str, OpCost]] = {}
    pinned: dict[str, dict[str, OpCost]] = {}
    for op in graph.ops:
        reads_persistent = any(graph.tensor(t).persistent for t in op.inputs)
        for c in chosen:
            if can_run(op, c):
                costs.setdefault(op.id, {})[c.id] = op_cost(op, graph, c, hardware)
                if problem is Problem.P3 and reads_persistent:
                    pinned.setdefault(op.id, {})[c.id] = op_cost(op, graph, c, hardware, pinned=True)
    static_mw = sum(c.static_mw for c in chosen) + sum(m.static_mw for m in shared)
    peak = store_all_peak(graph)
    inst = Instance(
        name=name or f"{graph.name}_{hardware.name}_{problem}",
        problem=problem,
        objective=Objective.LATENCY if objective is Objective.WEIGHTED else objective,
        graph=graph,
        cores=tuple(CoreSpec(c.id, c.sram) for c in chosen),
        memories=tuple(memories),
        links=tuple(links),
        costs=costs,
        pinned_costs=pinned,
        input_home=memories[0].id if problem is not Problem.P3 else (hardware.dram.id if hardware.dram else memories[0].id),
        persistent_home=(hardware.dram.id if problem is Problem.P3 and hardware.dram else None),
        static_fj_per_cycle=round(static_mw * 1e12 / hardware.clock_hz),
        alpha=alpha,
        runtime_limit_cycles=runtime_limit_cycles,
        meta={
            "hardware": hardware.name,
            "hardware_params": dict(hardware.params),
            "clock_hz": hardware.clock_hz,
            "budget": budget,
            "sram_budget": sram_budget,
            "store_all_peak_bytes": peak.activation_bytes,
            "persistent_bytes": peak.persistent_bytes,
            "cost_source": "cost_model",
            "cost_scale": 1,
        },
    )
    if objective is Objective.WEIGHTED:
        inst = with_weighted_references(inst)
    return inst


def with_weighted_references(inst: Instance) -> Instance:
    """The instance with the ``weighted`` objective, normalised by its store-all baseline.

    ``meta.latency_ref_cycles`` and ``meta.energy_ref_pj`` are the latency and the
    energy of the store-all schedule (``heuristics.store_all``; capacities are not
    checked), so that ``α · latency / latency_ref + (1 − α) · energy / energy_ref``
    is 1 for the baseline.
    """

    base = _replace(inst, objective=Objective.LATENCY)
    metrics = evaluate(base, store_all(base))
    meta = dict(inst.meta, latency_ref_cycles=max(1, metrics.latency_cycles),
                energy_ref_pj=max(1, metrics.energy.total_pj))
    return _replace(inst, objective=Objective.WEIGHTED, meta=meta)


def _enum_arg(enum: type[_E], value: object, field_name: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        raise MonetError(f"unknown {field_name} {value!r}", field=field_name,
                         fix=f"use one of: {', '.join(e.value for e in enum)}") from None


def _replace(inst: Instance, **changes: Any) -> Instance:

    return dataclasses.replace(inst, **changes)
