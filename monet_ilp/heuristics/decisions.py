"""MONET-style decisions (keep / offload / recompute, a core per layer) and their decoder.

A heuristic backend between the GA (or an outside tool) and the evaluator:
:func:`decode` list-schedules an :class:`~monet_ilp.instance.Instance` under a
:class:`Decisions` into a timed :class:`~monet_ilp.schedule.Schedule`, keeping every
SRAM within its capacity (Belady eviction to the shared memory is the repair), and
:func:`decisions_from_schedule` reads the decisions back out of any schedule.

The decoder, in the instance's op order (one pass):

* each op runs once on its layer's core (``Decisions.cores``); an op with an empty
  layer, or one its layer's core cannot run, takes the first core that can;
* data crosses cores through the shared memory (``instance.input_home``, DRAM): an
  output that a later op on another core reads is written there right after it is
  produced; a ``keep`` one also stays in its producer's SRAM until the last read in
  another SRAM (or an eviction), and each such read takes the copy that arrives first:
  DRAM's, or the producer's moved straight over a link that joins the two SRAMs (a
  NoC hop, often done before the round trip through DRAM).  On an energy instance a
  ``keep`` one whose readers' SRAMs all have a link from its producer's is not written
  to DRAM when made: the reads take the NoC hop, and it goes to DRAM only if its SRAM
  evicts it while such a read is still to come (the write costs DRAM energy; on
  latency it runs beside the compute and gives a second source);
* the saved activations (``TrainingGraph.saved_tensors``) follow their policy:

  - ``keep``: the copy stays in the producer core's SRAM until its last reader there;
  - ``offload``: written to DRAM right after it is produced, its SRAM copy freed after
    its last forward-phase reader on that core, fetched back before a later reader;
  - ``recompute``: freed after its last forward-phase reader; a backward reader that
    lacks it reruns its producer on its own core (a recomputation), with the
    producer's inputs fetched from DRAM or, when no copy is left, recomputed in turn.
    On an energy instance the rerun is on the producer's core instead, when a link
    joins its SRAM to the reader's: there its weights may be pinned (a rerun on
    another core would unpin them), and the output crosses that link to the reader;

  The forward phase is every op that is not a backward or optimizer op.  Graph
  inputs (no producer) cannot be recomputed; they start in DRAM.
* when an op's inputs and outputs do not fit next to what its SRAM holds, the
  resident tensors it does not read are evicted, the one read again farthest in the
  future first (Belady's rule); one still needed and without a DRAM copy is written
  to DRAM first (not a ``recompute`` one: it is recomputed when needed).  On an energy
  instance it goes instead, over a link, into the SRAM with the most room for it then
  (when one has room), and comes back from there: a NoC hop costs far less energy than
  DRAM.  That SRAM evicts it first when it needs the room, writing it to DRAM then if it
  is still to be read.
* pinned persistent tensors (``Decisions.pinned``): one whose readers all run on one
  core is held in that core's SRAM for the whole iteration (its bytes count there from
  the start, and are never evicted), and an op whose persistent inputs are all pinned
  in its SRAM runs at its pinned cost (EV.E1.5); one read on several cores stays in
  ``persistent_home`` (``meta["repairs"]["unpinned"]``), as does one that a
  recomputation on another core may read (on latency: the reader's core), and one that would leave the SRAM too little
  room for its largest op (pins are taken in order while they fit).

Each SRAM's events (copies made, copies freed) are laid out in time order, so the
capacity holds at every instant whenever each op fits with its inputs and outputs.
When one does not, the schedule holds more than the capacity (the evaluator reports
it) and ``meta["repairs"]["over_capacity"]`` says where.  Links carry one transfer
at a time (a transfer takes the earliest gap on the link that delivers first);
weights not pinned stay in ``persistent_home``.  The shared memory is taken to be
large enough: its copies stay until the end and its capacity is not managed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.graph.ir import read_json
from monet_ilp.heuristics.checkpointing import plan_order, rematerialize
from monet_ilp.heuristics.decoder import (
    DecoderPlan,
    RawSchedule,
    decode_genes,
    decode_placed,
    decode_raw,
    list_schedule,
    plan_of,
)
from monet_ilp.heuristics.liveness import place_releases, replay
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.schedule import OpRun, Schedule, Sequence

if TYPE_CHECKING:
    from monet_ilp.instance import Instance

__all__ = [
    "FORMAT_NAME",
    "POLICIES",
    "Decisions",
    "DecoderPlan",
    "RawSchedule",
    "decisions_from_dict",
    "decisions_from_schedule",
    "decode",
    "decode_genes",
    "decode_raw",
    "decode_sequence",
    "default_decisions",
    "list_schedule",
    "load_decisions",
    "plan_of",
    "save_decisions",
]

FORMAT_NAME = "monet-ilp/decisions"
FORMAT_VERSION = 1
#: The policies of a saved activation, in gene order (the GA's 0, 1, 2).
POLICIES: tuple[str, ...] = ("keep", "offload", "recompute")
_KEEP, _OFFLOAD, _RECOMPUTE = POLICIES
_FIX = "follow the decisions format in the README (section 'Grading outside decisions')"


# ===================================================================== decisions
@dataclass(frozen=True)
class Decisions:
    """Keep / offload / recompute per saved activation, and a core per layer.

    Parameters
    ----------
    tensors
        Saved-activation id -> ``"keep"``, ``"offload"`` or ``"recompute"``.  A saved
        activation left out is kept.
    cores
        Layer name -> core id.  A layer left out goes to the first core that can run
        its first op.
    meta
        Free-form provenance (the tool that made the decisions, ...).
    pinned
        Persistent tensors (weights, gradients, optimizer state) to pin: held in the SRAM
        of the core that runs every op reading them, for the whole iteration, so that
        those ops run at their pinned cost (EV.E1.5).  One whose readers run on several
        cores stays in ``persistent_home`` (the decoder's repair, ``unpinned``).
    """

    tensors: Mapping[str, str] = field(default_factory=dict)
    cores: Mapping[str, str] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    pinned: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("tensors", "cores", "meta"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "pinned", tuple(dict.fromkeys(self.pinned)))

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "tensors": dict(self.tensors),
                "cores": dict(self.cores), "pinned": list(self.pinned), "meta": dict(self.meta)}

    def validate(self, instance: Instance, *, source: str | None = None) -> Decisions:
        """Check every name against ``instance``; return ``self``.

        Raises
        ------
        MonetError
            An unknown or unsaved tensor, an unknown policy, ``recompute`` of a graph
            input, an unknown layer or core, or a core that runs none of the layer's ops.
        """
        plan = plan_of(instance)
        for t, policy in self.tensors.items():
            where = f"tensors.{t}"
            if policy not in POLICIES:
                raise MonetError(f"unknown policy {policy!r} for tensor {t!r}", file=source,
                                 field=where, fix=f"use one of: {', '.join(POLICIES)}")
            if t not in plan.saved_index:
                known = t in plan.size
                raise MonetError(
                    f"tensor {t!r} is {'not a saved activation' if known else 'not in the graph'} of "
                    f"instance {instance.name!r}", file=source, field=where,
                    fix="name only saved activations (non-persistent tensors a backward op reads): "
                        + _some(plan.saved))
            if policy == _RECOMPUTE and t not in plan.recomputable:
                raise MonetError(f"tensor {t!r} has no forward producer to rerun (a graph input)",
                                 file=source, field=where, fix='use "keep" or "offload"')
            if policy == _OFFLOAD and plan.sequence_form:
                raise MonetError(f"instance {instance.name!r} has one memory (P1): tensor {t!r} cannot be "
                                 "offloaded", file=source, field=where, fix='use "keep" or "recompute"')
        for k, t in enumerate(self.pinned):
            where = f"pinned[{k}]"
            if t not in plan.persistent_readers:
                known = t in plan.size
                raise MonetError(f"tensor {t!r} is {'not a persistent tensor that an op reads' if known else 'not in the graph'}"
                                 f" of instance {instance.name!r}", file=source, field=where,
                                 fix="pin only weights, gradients or optimizer state that an op reads: "
                                     + _some(plan.persistent_readers))
            if not plan.pins_modelled:
                raise MonetError(f"instance {instance.name!r} does not model persistent tensors "
                                 "(persistent_home is None), so nothing can be pinned", file=source,
                                 field=where, fix='leave "pinned" out, or use a P3 instance')
        for layer, core in self.cores.items():
            where = f"cores.{layer}"
            if layer not in plan.layer_index:
                raise MonetError(f"unknown layer {layer!r} in instance {instance.name!r}", file=source,
                                 field=where, fix=f"name layers of the graph: {_some(plan.layers)}")
            if not instance.has_core(core):
                raise MonetError(f"unknown core {core!r} for layer {layer!r}", file=source, field=where,
                                 fix=f"use one of: {', '.join(c.id for c in instance.cores)}")
            if not any(core in plan.costs[k] for k in plan.ops_of_layer[layer]):
                raise MonetError(f"core {core!r} runs none of the ops of layer {layer!r}", file=source,
                                 field=where, fix=f"use one of: {', '.join(plan.layer_cores[layer])}")
        return self


def _some(names: Iterable[str], n: int = 6) -> str:
    listed = list(names)
    return ", ".join(listed[:n]) + (", ..." if len(listed) > n else "") if listed else "none"


def default_decisions(instance: Instance) -> Decisions:
    """Everything kept; each layer on the core the store-all list scheduler gives it."""
    cores = dict(store_all_schedule(instance, allocate="layer").meta["core_of_layer"])
    return Decisions({t: _KEEP for t in plan_of(instance).saved}, cores, {"source": "default"})


def decisions_from_dict(data: Mapping[str, Any], *, source: str | None = None,
                        instance: Instance | None = None) -> Decisions:
    """Rebuild :class:`Decisions` (``"format": "monet-ilp/decisions"``).

    With ``instance``, the names are also checked against it (:meth:`Decisions.validate`).
    """
    if not isinstance(data, Mapping) or data.get("format") != FORMAT_NAME:
        raise InputFormatError(f'not monet-ilp decisions (expected "format": "{FORMAT_NAME}")',
                               file=source, field="format", fix=_FIX)
    if data.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise InputFormatError(f"unsupported decisions version {data.get('version')!r}", file=source,
                               field="version", fix=f"write version {FORMAT_VERSION}")
    tables = {}
    for key in ("tensors", "cores"):
        table = data.get(key, {})
        if not isinstance(table, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
            raise InputFormatError(f'"{key}" must map names to strings', file=source, field=key,
                                   fix=_FIX)
        tables[key] = table
    pinned = data.get("pinned", [])
    if not isinstance(pinned, list) or not all(isinstance(t, str) for t in pinned):
        raise InputFormatError('"pinned" must be a list of tensor names', file=source, field="pinned", fix=_FIX)
    meta = data.get("meta", {})
    decisions = Decisions(tables["tensors"], tables["cores"], meta if isinstance(meta, Mapping) else {},
                          tuple(pinned))
    return decisions.validate(instance, source=source) if instance is not None else decisions


def load_decisions(path: str | Path, instance: Instance | None = None) -> Decisions:
    return decisions_from_dict(read_json(path), source=str(path), instance=instance)


def save_decisions(decisions: Decisions, path: str | Path) -> None:
    Path(path).write_text(json.dumps(decisions.to_dict(), indent=1) + "\n")


def decisions_from_schedule(instance: Instance, schedule: Schedule) -> Decisions:
    """The decisions a schedule embodies (to seed a GA with a solver's schedule).

    The core of a layer is that of the first run of its forward op (its first op when
    it has none).  A saved activation is ``recompute`` if its producer runs twice,
    ``offload`` if some SRAM gets a copy of it back from a non-SRAM memory after
    having held it before, and ``keep`` otherwise.  The schedule's pins are kept.
    """
    plan = plan_of(instance)
    first_run: dict[str, OpRun] = {}
    runs_of: dict[str, int] = {}
    for run in sorted(schedule.ops, key=attrgetter("start", "end")):
        first_run.setdefault(run.op, run)
        runs_of[run.op] = runs_of.get(run.op, 0) + 1
    cores = {}
    for layer in plan.layers:
        lead = first_run.get(plan.lead_op[layer])
        if lead is not None and instance.has_core(lead.core):
            cores[layer] = lead.core
    sram = {m.id for m in instance.memories if m.kind == "sram"}
    memory_of = {c.id: c.memory for c in instance.cores}
    held: dict[str, list[tuple[int, str, str]]] = {}  # tensor -> (time, memory, how)
    for run in schedule.ops:
        if run.core in memory_of:
            for t in plan.graph_outputs.get(run.op, ()):
                held.setdefault(t, []).append((run.start, memory_of[run.core], "run"))
    for tr in schedule.transfers:
        how = "from_sram" if tr.src in sram else "from_shared"
        held.setdefault(tr.tensor, []).append((tr.start, tr.dst, how))
    tensors = {}
    for t in plan.saved:
        producer = plan.producer_op.get(t)
        if producer is not None and runs_of.get(producer, 0) > 1:
            tensors[t] = _RECOMPUTE
            continue
        seen: set[str] = set()
        policy = _KEEP
        for _, memory, how in sorted(held.get(t, ())):
            if memory in sram and how == "from_shared" and memory in seen:
                policy = _OFFLOAD
            seen.add(memory)
        tensors[t] = policy
    return Decisions(tensors, cores, {"source": "schedule", "heuristic": schedule.meta.get("heuristic")
                                      or schedule.meta.get("backend")},
                     tuple(t for t, _ in schedule.pinned if t in plan.persistent_readers))


# ======================================================================= decode
def decode(instance: Instance, decisions: Decisions, *, validate: bool = True) -> Schedule | Sequence:
    """List-schedule ``instance`` under ``decisions`` (see the module docstring).

    Parameters
    ----------
    instance
        A P3 instance: its graph inputs start in a shared (non-SRAM) memory.
    decisions
        The policies and the layer allocation; checked against the instance unless
        ``validate`` is false.

    Returns
    -------
    Schedule or Sequence
        On a P1 instance, :func:`decode_sequence`'s Sequence.  Otherwise a timed
        schedule whose ``meta`` holds ``heuristic`` (``"decisions"``), the claimed ``latency_cycles``,
        ``recomputations``, and ``repairs``: ``evicted`` (``[tensor, memory, op]`` for
        each Belady eviction), ``over_capacity`` (``[op, memory, bytes]`` where an op
        did not fit even after evicting everything else), ``offloaded_instead``
        (recompute decisions turned into offloads because a weight update came first)
        and ``unpinned`` (the pins it left out, module docstring).

    Raises
    ------
    MonetError
        The instance keeps its graph inputs in an SRAM, a link is missing, or the
        decisions name something the instance does not have.
    """
    if validate:
        decisions.validate(instance)
    plan = plan_of(instance)
    if plan.sequence_form:
        return decode_sequence(instance, decisions)
    policy = [POLICIES.index(decisions.tensors.get(t, _KEEP)) for t in plan.saved]
    return decode_placed(instance, plan.core_of_ops(decisions.cores), policy, decisions.pinned)


def decode_sequence(instance: Instance, decisions: Decisions) -> Sequence:
    """A P1 instance's decoding: the ops in order, each saved activation kept or recomputed.

    The on-demand rematerialisation of :func:`~monet_ilp.heuristics.checkpointing.rematerialize`
    (optimizer ops last): a ``recompute`` activation is dropped after its last reader of
    the forward pass and recomputed, depth first, when a backward op reads it; every
    other one is kept until its last reader.  Frees follow P1's node-level values
    (:func:`~monet_ilp.heuristics.liveness.place_releases`).  Nothing is repaired: a
    schedule over the budget is what the evaluator reports.
    """
    graph = instance.graph
    plan = plan_of(instance)
    keep = [t for t in plan.saved if decisions.tensors.get(t, _KEEP) != _RECOMPUTE]
    steps = place_releases(graph, rematerialize(graph, plan_order(graph), keep))
    cost = replay(instance, steps)
    return Sequence(steps, meta={"heuristic": "decisions", "recomputations": cost.recomputations,
                                 "compute_cycles": cost.compute_cycles, "peak_bytes": cost.peak_bytes})


