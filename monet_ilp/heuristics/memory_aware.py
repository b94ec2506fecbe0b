"""A memory-aware list scheduler for several cores: Belady eviction to DRAM.

The multi-core baseline that respects every SRAM capacity (the store-all list
scheduler, :func:`~monet_ilp.heuristics.store_all.store_all_schedule`, ignores them).
It is the decoder of :mod:`monet_ilp.heuristics.decisions` with every saved
activation kept and a core given per op: ops run once, in the instance's order, each
on its core (``core_of_op``, or the store-all allocation).  Data moves through the
shared memory (``input_home``, DRAM):

* an output that a later op on another core reads is written to DRAM right after it
  is produced; that reader fetches it from DRAM;
* when an op's inputs and outputs do not fit in its core's SRAM, the resident
  tensors it does not read are evicted, the one whose next read on that core is
  farthest first (Belady's rule); a tensor with no copy in DRAM is written there
  before it is freed;
* a copy is freed after its last reader on that core.

Each SRAM's events happen in time order, and a free of a copy still being read by a
transfer waits for it, so the capacity holds at every instant whenever every op
fits (its inputs and outputs at once).  Links are shared: a transfer takes the
earliest gap on the link that delivers first.  Weights stay in DRAM (no pinning) and
nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from monet_ilp.errors import MonetError
from monet_ilp.heuristics.decisions import list_schedule
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.schedule import Schedule

if TYPE_CHECKING:
    from monet_ilp.instance import Instance

__all__ = ["memory_aware_schedule"]


def memory_aware_schedule(instance: Instance, *, core_of_op: Mapping[str, str] | None = None,
                          allocate: Literal["layer", "op"] = "layer") -> Schedule:
    """List-schedule ``instance`` within its SRAM capacities (see the module docstring).

    Parameters
    ----------
    instance
        An instance whose graph inputs start in a shared (non-SRAM) memory (P3).
    core_of_op
        The core of every op; default: the store-all list scheduler's allocation.
    allocate
        The store-all allocation to take when ``core_of_op`` is not given
        (``"layer"`` or ``"op"``).

    Returns
    -------
    Schedule
        ``meta`` holds ``heuristic`` (``"memory_aware"``), ``allocate`` (``"given"``
        with ``core_of_op``), the claimed ``latency_cycles``, ``core_of_op`` and the
        decoder's ``repairs`` (its Belady evictions).

    Raises
    ------
    MonetError
        The graph inputs start in an SRAM, an op is given a core it is not costed on,
        or an op's inputs and outputs do not fit in its core's SRAM (the message
        gives the bytes needed).
    """
    if instance.memory(instance.input_home).kind == "sram":
        raise MonetError("the memory-aware scheduler moves data through a shared memory; this "
                         f"instance starts its inputs in SRAM {instance.input_home!r}",
                         field="input_home", fix="use a P3 instance (inputs in DRAM)")
    given = core_of_op is not None
    if core_of_op is None:
        first_core: dict[str, str] = {}
        for run in sorted(store_all_schedule(instance, allocate=allocate).ops):
            first_core.setdefault(run.op, run.core)
        core_of_op = first_core
    cores: list[str] = []
    for op in instance.graph.ops:
        core = core_of_op.get(op.id)
        if core is None or core not in instance.costs.get(op.id, {}):
            raise MonetError(f"op {op.id!r} is not costed on core {core!r}",
                             field=f"core_of_op.{op.id}", fix="allocate it to a core it can run on")
        cores.append(core)
    schedule = list_schedule(instance, cores, heuristic="memory_aware")
    meta = dict(schedule.meta, allocate="given" if given else allocate, core_of_op=dict(core_of_op))
    return Schedule(schedule.ops, schedule.transfers, schedule.frees, schedule.pinned, meta)
