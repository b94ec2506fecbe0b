"""Lower bounds on the latency of every P3 schedule: BD.B1, BD.B2 and the pin LP BD.B9.

``formulations/bounds.md``.  BD.B1 (the critical path) and BD.B2 (the work over the
cores) price every op at its fastest, pinned or not, as if every persistent tensor could
be pinned at once.  When the weights do not fit in the SRAMs together (ResNet-18's 89 MB
against four 3 MiB SRAMs; an MLP of depth 16 on hetero_quad), most ops run at their
unpinned cost, which is often twice the pinned one.  BD.B9 is the LP that lets the pins
share the room they have: it is the critical path and the work bound at once, with each
op's pinned saving bought by pinning all of its persistent inputs, and the pinned bytes
within the SRAMs' room (as BD.B5 for energy).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from monet_ilp.engines.highs import run_highs
from monet_ilp.engines.milp import RowModel, safe_ceil

if TYPE_CHECKING:
    from monet_ilp.problems.p3.data import P3Data

__all__ = ["latency_floor", "pin_room", "pinned_path_bound", "work_bound"]


def work_bound(data: P3Data) -> int:
    """BD.B2: every op runs at least once, at its fastest, on one of the cores."""
    cheapest = [min(list(op.cycles.values()) + list(op.pinned_cycles.values())) for op in data.ops]
    return -(-sum(cheapest) // len(data.cores))


def pin_room(data: P3Data) -> int:
    """The bytes pinned at once at most (BD.B5): the SRAMs' capacity less the largest op's footprint."""
    srams = {data.memory_of[c] for c in data.cores}
    return max(sum(data.capacity[m] for m in srams) - data.min_sram_bytes(), 0)


def pinned_path_bound(data: P3Data) -> int | None:
    """BD.B9: the latency LP over pin fractions; ``None`` when no pin saves anything.

    Columns: the latency ``L``, an end ``F_v`` per op, ``x_v`` (how much of op ``v``'s
    pinned saving ``s_v`` it gets) and ``y_p`` (how much of persistent tensor ``p`` is
    pinned).  Rows, for every op ``v`` with unpinned cost ``u_v`` (its cheapest core):

    * BD.B9.1 ``F_v + s_v x_v >= F_w + u_v`` for each op ``w`` it must follow (the
      producers of its inputs, and ``after``), and ``>= a_i + u_v`` for each graph input
      ``i`` it reads (``a_i``: the input's earliest arrival, as BD.B1);
    * BD.B9.2 ``L >= F_v``;
    * BD.B9.3 ``x_v <= y_p`` for each persistent tensor ``p`` it reads;
    * BD.B9.4 ``Σ_p bytes_p y_p <= room`` (:func:`pin_room`);
    * BD.B9.5 ``|cores| L + Σ_v s_v x_v >= Σ_v u_v`` (the work bound).

    Minimise ``L``.  Every schedule pins a set ``S`` for the whole iteration, and then
    every run of ``v`` takes at least ``u_v − s_v`` if all of ``v``'s persistent inputs
    are in ``S`` and ``u_v`` otherwise; setting ``x``, ``y`` to the indicators of ``S``
    and ``F`` to BD.B1's ends under those durations is a solution of the LP with ``L``
    at most the schedule's latency.  So the LP's optimum is a lower bound.
    """
    unpinned = [min(op.cycles.values()) for op in data.ops]
    saving = [max(0, u - min(op.pinned_cycles.values())) if op.pinned_cycles and op.persistent_reads else 0
              for u, op in zip(unpinned, data.ops, strict=True)]
    if not any(saving):
        return None
    model = RowModel()
    latency = model.col(1.0, integer=False, upper=math.inf)
    end = [model.col(0.0, integer=False, upper=math.inf) for _ in data.ops]
    share = {v: model.col(0.0, integer=False) for v, s in enumerate(saving) if s}
    pinnable = {p.index for p in data.persistent if p.pin_memories}
    pin = {p: model.col(0.0, integer=False) for v in share for p in data.ops[v].persistent_reads if p in pinnable}
    for op in data.ops:
        v = op.index
        gain = {share[v]: float(saving[v])} if v in share else {}
        before = set(op.after)
        earliest = 0
        for i in op.reads:
            producer = data.items[i].producer
            if producer is None:
                earliest = max(earliest, data.input_arrival_cycles(i, v))
            else:
                before.add(producer)
        for w in sorted(before):  # BD.B9.1
            model.row({end[v]: 1.0, end[w]: -1.0, **gain}, unpinned[v], math.inf)
        model.row({end[v]: 1.0, **gain}, earliest + unpinned[v], math.inf)
        model.row({latency: 1.0, end[v]: -1.0}, 0.0, math.inf)  # BD.B9.2
        if v in share:  # BD.B9.3: the saving needs every persistent input pinned
            for p in op.persistent_reads:
                if p in pin:
                    model.row({share[v]: 1.0, pin[p]: -1.0}, -math.inf, 0.0)
                else:
                    model.row({share[v]: 1.0}, -math.inf, 0.0)
    model.row({pin[p]: float(data.persistent[p].bytes) for p in pin}, -math.inf, float(pin_room(data)))  # BD.B9.4
    model.row({latency: float(len(data.cores)), **{share[v]: float(saving[v]) for v in share}},
              float(sum(unpinned)), math.inf)  # BD.B9.5
    run = run_highs(model.milp(), relax=True)
    if run.status != "optimal" or run.objective is None:
        return None
    return safe_ceil(run.objective)


def latency_floor(data: P3Data) -> int:
    """The largest of BD.B1, BD.B2 and BD.B9."""
    return max(data.critical_path_cycles(), work_bound(data), pinned_path_bound(data) or 0)
