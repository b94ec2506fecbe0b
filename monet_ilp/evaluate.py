"""The evaluator: the independent witness every schedule answers to.

It rebuilds copies, checks and metrics from an :class:`~monet_ilp.instance.Instance`
and a :class:`~monet_ilp.schedule.Schedule` (or a P1
:class:`~monet_ilp.schedule.Sequence`) alone, following ``formulations/evaluator.md``
(EV.E1 copies, EV.E2 checks, EV.E3 the sequence form, EV.E4 metrics); it imports no formulation
or heuristic code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from monet_ilp.errors import MonetError
from monet_ilp.instance import Instance, Objective, per_instance, pj_of
from monet_ilp.schedule import (
    Compute,
    Free,
    OpRun,
    Release,
    Schedule,
    Sequence,
    Transfer,
    schedule_from_dict,
)

if TYPE_CHECKING:
    import weakref

    from monet_ilp.graph.ir import Op

__all__ = [
    "MAX_VIOLATIONS_PER_KIND",
    "VIOLATION_KINDS",
    "EnergyBreakdown",
    "Metrics",
    "Violation",
    "best_verified",
    "evaluate",
    "objective_value",
    "verified",
]

#: The violation kinds of evaluator.md, EV.E2, in the order of its table.
VIOLATION_KINDS: tuple[str, ...] = (
    "unknown_name",
    "missing_op",
    "bad_core",
    "duration",
    "negative_time",
    "core_overlap",
    "not_resident",
    "bad_link",
    "link_overlap",
    "bad_free",
    "duplicate_copy",
    "bad_pin",
    "update_hazard",
    "capacity",
    "runtime_limit",
)

#: At most this many violations of one kind are listed; ``Metrics.violation_counts``
#: still counts them all (a bad GPT-2 schedule would otherwise yield megabytes).
MAX_VIOLATIONS_PER_KIND = 50


# ====================================================================== results
@dataclass(frozen=True)
class Violation:
    """One failed check of evaluator.md, EV.E2.

    Parameters
    ----------
    kind
        One of :data:`VIOLATION_KINDS`.
    message
        Human-readable, naming the op, tensor, memory and time involved.
    time, op, tensor, memory
        Where it happened, when it applies (``None`` otherwise).
    """

    kind: str
    message: str
    time: int | None = None
    op: str | None = None
    tensor: str | None = None
    memory: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class EnergyBreakdown:
    """Energy of a schedule in picojoules, split as in evaluator.md, EV.E4.

    ``total_pj`` is the sum of the six parts; it is computed, not passed.
    """

    compute_pj: int = 0
    recompute_pj: int = 0
    sram_pj: int = 0
    dram_pj: int = 0
    link_pj: int = 0
    static_pj: int = 0
    total_pj: int = field(init=False)

    def __post_init__(self) -> None:
        total = (self.compute_pj + self.recompute_pj + self.sram_pj + self.dram_pj
                 + self.link_pj + self.static_pj)
        object.__setattr__(self, "total_pj", total)

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnergyBreakdown:
        return cls(**{k: int(v) for k, v in data.items() if k != "total_pj"})


@dataclass(frozen=True)
class Metrics:
    """What the evaluator found: feasibility, violations and the EV.E4 metrics.

    Attributes
    ----------
    feasible
        True when no check of EV.E2 failed.
    violations
        The failed checks, at most :data:`MAX_VIOLATIONS_PER_KIND` of each kind.
    violation_counts
        Number of violations found per kind (listed or not); empty when feasible.
    latency_cycles
        The makespan: largest end of a run or transfer.
    compute_cycles
        Sum of run durations, recomputations included (the P1 objective).
    energy
        The energy breakdown, in picojoules.
    peak_bytes
        Peak occupancy of every memory of the instance.
    profile
        Per memory, the change points ``(time, bytes)`` of its occupancy.  For a
        :class:`Sequence` there is one point per computation, at its start (EV.E3), so
        zero-cycle computations may give several points at one time.
    recomputations
        Runs with instance number >= 1.
    transfers
        Number of transfers.
    objective_value
        The instance's objective (EV.E4): an integer, or a float for ``weighted``.
    schedule
        The timed schedule evaluated; for a :class:`Sequence`, the one built from it.
    """

    feasible: bool
    violations: tuple[Violation, ...]
    violation_counts: Mapping[str, int]
    latency_cycles: int
    compute_cycles: int
    energy: EnergyBreakdown
    peak_bytes: Mapping[str, int]
    profile: Mapping[str, tuple[tuple[int, int], ...]]
    recomputations: int
    transfers: int
    objective_value: int | float
    schedule: Schedule

    def violations_of(self, kind: str) -> tuple[Violation, ...]:
        """The listed violations of one kind."""
        return tuple(v for v in self.violations if v.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary; :meth:`from_dict` rebuilds the same Metrics."""
        return {
            "feasible": self.feasible,
            "violations": [v.to_dict() for v in self.violations],
            "violation_counts": dict(self.violation_counts),
            "latency_cycles": self.latency_cycles,
            "compute_cycles": self.compute_cycles,
            "energy": self.energy.to_dict(),
            "peak_bytes": dict(self.peak_bytes),
            "profile": {m: [list(p) for p in points] for m, points in self.profile.items()},
            "recomputations": self.recomputations,
            "transfers": self.transfers,
            "objective_value": self.objective_value,
            "schedule": self.schedule.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Metrics:
        schedule = schedule_from_dict(data["schedule"])
        if not isinstance(schedule, Schedule):
            raise MonetError("metrics hold a sequence, not a timed schedule", field="schedule",
                             fix="write metrics with Metrics.to_dict")
        return cls(
            feasible=bool(data["feasible"]),
            violations=tuple(Violation(**v) for v in data["violations"]),
            violation_counts=MappingProxyType(dict(data["violation_counts"])),
            latency_cycles=data["latency_cycles"],
            compute_cycles=data["compute_cycles"],
            energy=EnergyBreakdown.from_dict(data["energy"]),
            peak_bytes=MappingProxyType(dict(data["peak_bytes"])),
            profile=MappingProxyType({m: tuple((int(t), int(b)) for t, b in points)
                                      for m, points in data["profile"].items()}),
            recomputations=data["recomputations"],
            transfers=data["transfers"],
            objective_value=data["objective_value"],
            schedule=schedule,
        )


# ================================================================ entry point
def evaluate(instance: Instance, schedule: Schedule | Sequence) -> Metrics:
    """Check ``schedule`` against ``instance`` and measure it (formulations/evaluator.md).

    Parameters
    ----------
    instance
        The instance the schedule claims to solve.
    schedule
        A timed :class:`Schedule`, or a P1 :class:`Sequence` (one-core instances only),
        which is timed back to back on the instance's core (EV.E3).

    Returns
    -------
    Metrics
        Feasibility, every violation found (an infeasible schedule never raises) and
        the EV.E4 metrics.

    Raises
    ------
    MonetError
        For unusable input only: a Sequence for an instance with several cores or
        whose graph inputs start outside the core's memory, or a ``weighted``
        objective without reference values in ``instance.meta``.
    """
    _check_objective_available(instance)
    index = _index_of(instance)
    if isinstance(schedule, Sequence):
        return _evaluate_sequence(instance, index, schedule)
    if isinstance(schedule, Schedule):
        return _evaluate_timed(instance, index, schedule)
    raise MonetError(f"cannot evaluate a {type(schedule).__name__}", field="schedule",
                     fix="pass a monet_ilp.schedule.Schedule or Sequence")


# ============================================================ per-instance index
class _OpInfo:
    """What the checks need of one op, with duplicates removed."""

    __slots__ = (
        "costs",
        "hazard_readers",
        "id",
        "needs_produced",
        "pinned_costs",
        "reads",
        "reads_persistent",
        "updates",
        "writes",
    )

    def __init__(self, op: Op, instance: Instance, persistent: frozenset[str], producer: Mapping[str, str | None],
                 readers_of: Mapping[str, tuple[str, ...]]) -> None:
        self.id = op.id
        self.reads = tuple(t for t in dict.fromkeys(op.inputs) if t not in persistent)
        self.reads_persistent = tuple(t for t in dict.fromkeys(op.inputs) if t in persistent)
        # Persistent inputs made during the iteration (weight gradients): a dependency
        # that copies do not witness, since persistent tensors have no copies.
        self.needs_produced = tuple((t, p) for t in self.reads_persistent
                                    if (p := producer[t]) is not None and p != op.id)
        self.writes = tuple(t for t in dict.fromkeys(op.outputs) if t not in persistent)
        self.updates = tuple(dict.fromkeys(op.updates))
        self.hazard_readers = tuple((reader, t) for t in self.updates
                                    for reader in readers_of[t] if reader != op.id)
        self.costs = instance.costs.get(op.id, {})
        self.pinned_costs = instance.pinned_costs.get(op.id, {})


class _Index:
    """Per-instance lookups built once and cached (the GA evaluates thousands of schedules)."""

    def __init__(self, instance: Instance):
        graph = instance.graph
        self.bytes = {t.id: t.bytes for t in graph.tensors}
        self.persistent = frozenset(t.id for t in graph.tensors if t.persistent)
        producer = {t.id: t.producer for t in graph.tensors}
        readers_of = {t.id: tuple(dict.fromkeys(t.consumers)) for t in graph.tensors}
        self.ops = {op.id: _OpInfo(op, instance, self.persistent, producer, readers_of)
                    for op in graph.ops}
        self.op_order = tuple(op.id for op in graph.ops)
        self.graph_inputs = tuple(t.id for t in graph.tensors if t.producer is None and not t.persistent)
        self.persistent_tensors = tuple(t.id for t in graph.tensors if t.persistent)
        self.persistent_bytes = sum(self.bytes[t] for t in self.persistent_tensors)
        self.core_memory = {c.id: c.memory for c in instance.cores}
        self.capacity = {m.id: m.capacity_bytes for m in instance.memories}
        self.is_sram = {m.id: m.kind == "sram" for m in instance.memories}
        self.memory_ids = tuple(m.id for m in instance.memories)
        self.links = {l.id: l for l in instance.links}
        self.modelled = instance.persistent_home is not None


_INDEX_CACHE: dict[int, tuple[weakref.ref[Instance], _Index]] = {}
_start_end = attrgetter("start", "end")
#: Runs on a core or transfers on a link: what may not overlap.
_Interval = TypeVar("_Interval", OpRun, Transfer)


def verified(instance: Instance, schedule: Schedule | Sequence | None) -> Metrics | None:
    """The metrics of ``schedule`` if the evaluator accepts it, else ``None`` (also for no schedule).

    What a backend that stops early checks before it returns a hint or a baseline: only
    a schedule the witness accepts may be returned as feasible.
    """
    if schedule is None:
        return None
    metrics = evaluate(instance, schedule)
    return metrics if metrics.feasible else None


def best_verified(instance: Instance, candidates: Iterable[tuple[str, Schedule | Sequence | None]]
                  ) -> tuple[str, Schedule | Sequence, int | float] | None:
    """Of named candidate schedules, the one the evaluator accepts with the best objective.

    Returns ``(name, schedule, objective)``, the first in order among equals, or ``None``.
    """
    found: list[tuple[int | float, int, str, Schedule | Sequence]] = []
    for k, (name, schedule) in enumerate(candidates):
        metrics = verified(instance, schedule)
        if metrics is not None and schedule is not None:
            found.append((metrics.objective_value, k, name, schedule))
    if not found:
        return None
    value, _, name, schedule = min(found, key=lambda t: (t[0], t[1]))
    return name, schedule, value


def _index_of(instance: Instance) -> _Index:
    return per_instance(_INDEX_CACHE, instance, _Index)


# ================================================================ violations
class _Violations:
    """Collects violations, formatting the message only of those that are kept."""

    def __init__(self) -> None:
        self.kept: list[Violation] = []
        self.counts: dict[str, int] = {}

    def add(self, kind: str, template: str, *, time: int | None = None, op: str | None = None,
            tensor: str | None = None, memory: str | None = None, **extra: Any) -> None:
        n = self.counts.get(kind, 0) + 1
        self.counts[kind] = n
        if n <= MAX_VIOLATIONS_PER_KIND:
            message = template.format(time=time, op=op, tensor=tensor, memory=memory, **extra)
            self.kept.append(Violation(kind, message, time, op, tensor, memory))

    def sorted_kept(self) -> tuple[Violation, ...]:
        order = {k: i for i, k in enumerate(VIOLATION_KINDS)}
        return tuple(sorted(self.kept, key=lambda v: (order.get(v.kind, len(order)),
                                                       -1 if v.time is None else v.time)))


def _missing_ops(index: _Index, ran: Mapping[str, Any], found: _Violations) -> None:
    # EV.E2 missing_op
    for op in index.op_order:
        if op not in ran:
            found.add("missing_op", "op {op!r} never runs", op=op)


# =========================================================== EV.E3: sequence form
def _evaluate_sequence(instance: Instance, index: _Index, sequence: Sequence) -> Metrics:
    if len(instance.cores) != 1:
        raise MonetError(
            f"a Sequence (the P1 form) runs on one core, but instance {instance.name!r} has "
            f"{len(instance.cores)} cores",
            field="schedule",
            fix="give a timed Schedule that places every run on a core, or use a one-core instance",
        )
    core = instance.cores[0].id
    memory = index.core_memory[core]
    if instance.input_home != memory:
        raise MonetError(
            f"a Sequence keeps every tensor in {memory!r}, but instance {instance.name!r} puts the "
            f"graph inputs in {instance.input_home!r}",
            field="schedule",
            fix="give a timed Schedule with transfers, or an instance whose input_home is the core's memory",
        )
    found = _Violations()
    nbytes = index.bytes
    ops = index.ops
    persistent = index.persistent
    capacity = index.capacity[memory]
    # EV.E1.5: persistent tensors, when modelled, sit in persistent_home all iteration.
    base = index.persistent_bytes if instance.persistent_home == memory else 0

    resident = set(index.graph_inputs)
    held = sum(nbytes[t] for t in resident)
    time = 0
    runs: list[OpRun] = []
    frees: list[Free] = []
    count: dict[str, int] = {}
    updated_by: dict[str, str] = {}
    points: list[tuple[int, int]] = []
    peak = 0
    over: list[Any] | None = None  # [first op, first time, peak bytes, peak op, peak time, last op]
    compute_cycles = compute_pj = recompute_pj = sram_pj = dram_pj = recomputations = 0

    for step_no, step in enumerate(sequence.steps):
        if isinstance(step, Compute):
            op = step.op
            info = ops.get(op)
            if info is None:
                found.add("unknown_name", "step {step}: op {op!r} is not in the graph", op=op, step=step_no)
                continue
            cost = info.costs.get(core)
            if cost is None:
                found.add("bad_core", "op {op!r} is not costed on core {core!r} (step {step})",
                          op=op, core=core, step=step_no, time=time)
            for t in info.reads:
                if t not in resident:
                    found.add("not_resident",
                              "op {op!r} (step {step}, time {time}) reads {tensor!r}, not resident in {memory!r}",
                              op=op, tensor=t, memory=memory, time=time, step=step_no)
            for t, producer in info.needs_produced:
                if producer not in count:
                    found.add("not_resident",
                              "op {op!r} (step {step}) reads {tensor!r} before its producer {producer!r} runs",
                              op=op, tensor=t, producer=producer, time=time, step=step_no)
            for t in info.reads_persistent:
                updater = updated_by.get(t)
                if updater is not None and updater != op:
                    found.add("update_hazard",
                              "op {op!r} (step {step}) reads {tensor!r} after {updater!r} updated it in place",
                              op=op, tensor=t, updater=updater, time=time, step=step_no)
            instance_no = count.get(op, 0)
            count[op] = instance_no + 1
            if info.updates:
                if instance_no:
                    found.add("update_hazard", "op {op!r} updates persistent tensors in place and runs "
                              "again (step {step}); it must run once", op=op, time=time, step=step_no)
                for t in info.updates:
                    updated_by[t] = op
            # EV.E3: while v runs, memory holds the resident set plus v's new outputs.
            for t in info.writes:
                if t not in resident:
                    resident.add(t)
                    held += nbytes[t]
            total = base + held
            if not points or points[-1][1] != total:
                points.append((time, total))
            peak = max(peak, total)
            if total > capacity:
                if over is None:
                    over = [op, time, total, op, time, op]
                else:
                    over[5] = op
                    if total > over[2]:
                        over[2:5] = [total, op, time]
            elif over is not None:
                _sequence_capacity(found, memory, capacity, over)
                over = None
            cycles = cost.cycles if cost is not None else 0
            runs.append(OpRun(time, time + cycles, op, instance_no, core))
            compute_cycles += cycles
            if cost is not None:
                if instance_no:
                    recomputations += 1
                    recompute_pj += cost.compute_pj + cost.sram_pj + cost.dram_pj
                else:
                    compute_pj += cost.compute_pj
                    sram_pj += cost.sram_pj
                    dram_pj += cost.dram_pj
            elif instance_no:
                recomputations += 1
            time += cycles
        elif isinstance(step, Release):
            t = step.tensor
            if t in resident:
                resident.remove(t)
                held -= nbytes[t]
                frees.append(Free(time, t, memory))
            elif t not in nbytes:
                found.add("unknown_name", "step {step}: released tensor {tensor!r} is not in the graph",
                          tensor=t, step=step_no)
            elif t in persistent:
                found.add("bad_free", "step {step}: {tensor!r} is persistent and is never released",
                          tensor=t, memory=memory, time=time, step=step_no)
            else:
                found.add("bad_free", "step {step}: released {tensor!r}, which is not resident in {memory!r}",
                          tensor=t, memory=memory, time=time, step=step_no)
        else:
            raise MonetError(f"step {step_no} of the sequence is a {type(step).__name__}",
                             field=f"steps[{step_no}]", fix="use Compute and Release steps")
    if over is not None:
        _sequence_capacity(found, memory, capacity, over)
    _missing_ops(index, count, found)

    latency = time
    profile: dict[str, tuple[tuple[int, int], ...]] = {m: () for m in index.memory_ids}
    peaks: dict[str, int] = {m: 0 for m in index.memory_ids}
    if points:
        if points[-1][1]:
            points.append((latency, 0))  # EV.E1.4: whatever is left goes at the makespan
        profile[memory] = tuple(points)
        peaks[memory] = peak
    home = instance.persistent_home
    if home is not None and home != memory and index.persistent_bytes and latency > 0:
        _sweep_memory(home, {0: index.persistent_bytes, latency: -index.persistent_bytes},
                      index.capacity[home], profile, peaks, found)
    if instance.runtime_limit_cycles is not None and latency > instance.runtime_limit_cycles:
        _runtime_violation(found, latency, instance.runtime_limit_cycles)
    timed = Schedule(tuple(runs), (), tuple(frees), (), sequence.meta)
    energy = EnergyBreakdown(compute_pj=compute_pj, recompute_pj=recompute_pj, sram_pj=sram_pj,
                             dram_pj=dram_pj, link_pj=0,
                             static_pj=instance.static_fj_per_cycle * latency // 1000)
    return _metrics(instance, found, latency, compute_cycles, energy, peaks, profile,
                    recomputations, 0, timed)


def _sequence_capacity(found: _Violations, memory: str, capacity: int, over: list[Any]) -> None:
    first, _, peak, peak_op, peak_time, last = over
    span = f"while {first!r} runs" if first == last else f"from {first!r} to {last!r}"
    found.add("capacity", "memory {memory!r} exceeds its capacity of {capacity} bytes {span}: "
              "{peak} bytes while {op!r} runs at time {time}",
              memory=memory, capacity=capacity, span=span, peak=peak, op=peak_op, time=peak_time)


# ================================================================ timed form
def _evaluate_timed(instance: Instance, index: _Index, schedule: Schedule) -> Metrics:
    found = _Violations()
    ops = index.ops
    nbytes = index.bytes
    core_memory = index.core_memory
    persistent = index.persistent
    links = index.links
    modelled = index.modelled

    # ---------------------------------------------------------- pins (EV.E1.5)
    pinned: dict[str, str] = {}
    for t, m in schedule.pinned:
        if t not in nbytes or m not in index.capacity:
            found.add("unknown_name", "pin of {tensor!r} in {memory!r}: unknown "
                      + ("tensor" if t not in nbytes else "memory"), tensor=t, memory=m)
        elif t not in persistent:
            found.add("bad_pin", "{tensor!r} is not persistent and cannot be pinned (in {memory!r})",
                      tensor=t, memory=m)
        elif not modelled:
            found.add("bad_pin", "{tensor!r} is pinned in {memory!r}, but this instance does not model "
                      "persistent tensors (persistent_home is None)", tensor=t, memory=m)
        elif t in pinned:
            found.add("bad_pin", "{tensor!r} is pinned twice ({first!r} and {memory!r})",
                      tensor=t, memory=m, first=pinned[t])
        else:
            pinned[t] = m

    # ----------------------------------------------------------------- runs
    runs_by_op: dict[str, list[OpRun]] = {}
    runs_by_core: dict[str, list[OpRun]] = {}
    compute_cycles = 0
    for run in schedule.ops:
        compute_cycles += run.end - run.start
        if run.op not in ops or run.core not in core_memory:
            found.add("unknown_name", "run of {op!r} on {core!r} at time {time}: unknown "
                      + ("op" if run.op not in ops else "core"), op=run.op, core=run.core, time=run.start)
            continue
        if run.start < 0:
            found.add("negative_time", "run of {op!r} on {core!r} starts at time {time}",
                      op=run.op, core=run.core, time=run.start)
        runs_by_op.setdefault(run.op, []).append(run)
        runs_by_core.setdefault(run.core, []).append(run)

    # Instance numbers by start time (EV.E2): 0 is the first computation.
    ranked: list[tuple[OpRun, int]] = []
    compute_pj = recompute_pj = sram_pj = dram_pj = link_pj = recomputations = 0
    for op, op_runs in runs_by_op.items():
        if len(op_runs) > 1:
            op_runs.sort(key=lambda r: (r.start, r.end, r.instance))
        info = ops[op]
        for number, run in enumerate(op_runs):
            ranked.append((run, number))
            if number:
                recomputations += 1
            cost = info.costs.get(run.core)
            if cost is None:
                found.add("bad_core", "op {op!r} runs on core {core!r}, where it is not costed "
                          "(costed on: {allowed})", op=op, core=run.core, time=run.start,
                          allowed=", ".join(info.costs) or "none")
                continue
            memory = core_memory[run.core]
            if (info.reads_persistent and run.core in info.pinned_costs
                    and all(pinned.get(t) == memory for t in info.reads_persistent)):
                cost = info.pinned_costs[run.core]
            if run.end - run.start != cost.cycles:
                found.add("duration", "run of {op!r} on {core!r} lasts {got} cycles [{time}, {end}); "
                          "its cost is {want}", op=op, core=run.core, time=run.start, end=run.end,
                          got=run.end - run.start, want=cost.cycles)
            if number:
                recompute_pj += cost.compute_pj + cost.sram_pj + cost.dram_pj
            else:
                compute_pj += cost.compute_pj
                sram_pj += cost.sram_pj
                dram_pj += cost.dram_pj
    for core, core_runs in runs_by_core.items():
        for a, b in _overlaps(core_runs):
            found.add("core_overlap", "runs of {op!r} [{time}, {end}) and {other!r} [{start2}, {end2}) "
                      "overlap on core {core!r}", op=b.op, time=b.start, end=b.end, other=a.op,
                      start2=a.start, end2=a.end, core=core)

    # ------------------------------------------------------------ transfers
    good_transfers = []
    runs_by_link: dict[str, list[Transfer]] = {}
    for tr in schedule.transfers:
        unknown = [what for what, ok in (("tensor", tr.tensor in nbytes), ("source memory", tr.src in index.capacity),
                                         ("destination memory", tr.dst in index.capacity),
                                         ("link", tr.link in links)) if not ok]
        if unknown:
            found.add("unknown_name", "transfer of {tensor!r} from {src!r} to {memory!r} over {link!r} "
                      "at time {time}: unknown {what}", tensor=tr.tensor, src=tr.src, memory=tr.dst,
                      link=tr.link, time=tr.start, what=", ".join(unknown))
            continue
        if tr.start < 0:
            found.add("negative_time", "transfer of {tensor!r} to {memory!r} starts at time {time}",
                      tensor=tr.tensor, memory=tr.dst, time=tr.start)
        link = links[tr.link]
        size = nbytes[tr.tensor]
        if not link.connects(tr.src, tr.dst):
            found.add("bad_link", "link {link!r} does not connect {src!r} and {memory!r} (transfer of "
                      "{tensor!r} at time {time}); its endpoints are {ends}", link=tr.link, src=tr.src,
                      memory=tr.dst, tensor=tr.tensor, time=tr.start, ends=", ".join(link.endpoints))
        want = link.transfer_cycles(size)
        if tr.end - tr.start != want:
            found.add("bad_link", "transfer of {tensor!r} ({size} bytes) over {link!r} lasts {got} cycles "
                      "[{time}, {end}); it takes {want}", tensor=tr.tensor, size=size, link=tr.link,
                      time=tr.start, end=tr.end, got=tr.end - tr.start, want=want, memory=tr.dst)
        runs_by_link.setdefault(tr.link, []).append(tr)
        link_pj += link.transfer_pj(size)
        read = pj_of(size, instance.memory(tr.src).read_fj_per_byte)
        write = pj_of(size, instance.memory(tr.dst).write_fj_per_byte)
        if index.is_sram[tr.src]:
            sram_pj += read
        else:
            dram_pj += read
        if index.is_sram[tr.dst]:
            sram_pj += write
        else:
            dram_pj += write
        if tr.tensor in persistent:
            found.add("not_resident", "transfer of {tensor!r} at time {time}: persistent tensors are not "
                      "transferred (they stay in persistent_home or are pinned)", tensor=tr.tensor,
                      memory=tr.src, time=tr.start)
            continue
        good_transfers.append(tr)
    for link_id, link_runs in runs_by_link.items():
        for earlier, later in _overlaps(link_runs):
            found.add("link_overlap", "transfers of {tensor!r} [{time}, {end}) and {other!r} "
                      "[{start2}, {end2}) overlap on link {link!r}", tensor=later.tensor, time=later.start,
                      end=later.end, other=earlier.tensor, start2=earlier.start, end2=earlier.end,
                      link=link_id)

    latency = schedule.makespan

    # -------------------------------------------------------- copies (EV.E1)
    # Events at one instant: frees first (a copy freed at t is gone for a run or
    # transfer starting at t), then allocations; a free that finds no copy is retried
    # after them, so a zero-cycle run's output can be freed at the instant it appears.
    # A copy is written until its run or transfer ends (a rewrite, until the rewriting
    # run ends), and a free before then is refused (EV.E1.4).
    events: list[tuple[int, int, int, Free | OpRun | Transfer]] = []
    for k, f in enumerate(schedule.frees):
        events.append((f.time, 0, k, f))
    for k, (run, _) in enumerate(ranked):
        events.append((run.start, 1, k, run))
    for k, tr in enumerate(good_transfers):
        events.append((tr.start, 2, k, tr))
    events.sort()  # (time, phase, k) is unique: the items themselves are never compared

    copies: dict[tuple[str, str], list[list[int]]] = {}
    open_copy: dict[tuple[str, str], list[int]] = {}
    # (tensor, memory) -> (end, writer) of the last run or transfer writing the open copy
    writing: dict[tuple[str, str], tuple[int, OpRun | Transfer]] = {}
    for t in index.graph_inputs:
        copy = [0, 0, -1]  # alloc, ready, free (-1: not freed yet)
        copies[(t, instance.input_home)] = [copy]
        open_copy[(t, instance.input_home)] = copy

    def release(f: Free) -> bool:
        key = (f.tensor, f.memory)
        copy = open_copy.get(key)
        if copy is None or copy[0] > f.time:
            return False
        written = writing.get(key)
        if written is not None and written[0] > f.time:  # EV.E1.4: not before it is written
            writer = written[1]
            if isinstance(writer, OpRun):
                by = f"the run of {writer.op!r} on {writer.core!r} [{writer.start}, {writer.end})"
            else:
                by = f"the transfer from {writer.src!r} over {writer.link!r} [{writer.start}, {writer.end})"
            found.add("bad_free", "free of {tensor!r} in {memory!r} at time {time}: {by} writes that copy "
                      "until time {end}; it may be freed from then on", tensor=f.tensor, memory=f.memory,
                      time=f.time, by=by, end=written[0],
                      op=writer.op if isinstance(writer, OpRun) else None)
            return True  # refused, and reported: the copy stays
        copy[2] = f.time
        del open_copy[key]
        writing.pop(key, None)
        return True

    def retry_frees(retry: list[Free]) -> None:
        for f in retry:
            if not release(f):
                if f.tensor in persistent:
                    found.add("bad_free", "free of {tensor!r} in {memory!r} at time {time}: persistent "
                              "tensors are never freed", tensor=f.tensor, memory=f.memory, time=f.time)
                else:
                    found.add("bad_free", "free of {tensor!r} in {memory!r} at time {time}: no copy is "
                              "resident there then", tensor=f.tensor, memory=f.memory, time=f.time)

    retry: list[Free] = []
    now = None
    for when, _, _, item in events:
        if when != now:
            if retry:
                retry_frees(retry)
                retry = []
            now = when
        if isinstance(item, Free):  # phase 0
            if item.tensor not in nbytes or item.memory not in index.capacity:
                found.add("unknown_name", "free of {tensor!r} in {memory!r} at time {time}: unknown "
                          + ("tensor" if item.tensor not in nbytes else "memory"),
                          tensor=item.tensor, memory=item.memory, time=item.time)
            elif not release(item):
                retry.append(item)
        elif isinstance(item, OpRun):  # phase 1
            memory = core_memory[item.core]
            for t in ops[item.op].writes:
                key = (t, memory)
                if key not in open_copy:
                    copy = [item.start, item.end, -1]
                    copies.setdefault(key, []).append(copy)
                    open_copy[key] = copy
                    writing[key] = (item.end, item)
                elif (written := writing.get(key)) is None or written[0] < item.end:
                    writing[key] = (item.end, item)  # EV.E1.2: a resident copy is rewritten
        else:
            key = (item.tensor, item.dst)
            if key in open_copy:
                found.add("duplicate_copy", "transfer of {tensor!r} to {memory!r} at time {time}: a copy "
                          "is already resident there", tensor=item.tensor, memory=item.dst, time=item.start)
            else:
                copy = [item.start, item.end, -1]
                copies.setdefault(key, []).append(copy)
                open_copy[key] = copy
                writing[key] = (item.end, item)
    retry_frees(retry)
    for copy in open_copy.values():  # EV.E1.4: kept until the makespan
        copy[2] = max(latency, copy[0])

    # ------------------------------------------------ residency and ordering
    for run, _ in ranked:
        info = ops[run.op]
        memory = core_memory[run.core]
        s, e = run.start, run.end
        for t in info.reads:
            if not _has_copy(copies.get((t, memory)), s, e):
                found.add("not_resident", "run of {op!r} [{time}, {end}) on {core!r} reads {tensor!r}, "
                          "which has no copy in {memory!r} ready by {time} and kept until {end}",
                          op=run.op, time=s, end=e, core=run.core, tensor=t, memory=memory)
        if modelled:
            for t in info.reads_persistent:
                where = pinned.get(t)
                if where is not None and where != memory:
                    found.add("not_resident", "run of {op!r} on {core!r} at time {time} reads {tensor!r}, "
                              "pinned in {where!r}, not in {memory!r}", op=run.op, core=run.core, time=s,
                              tensor=t, where=where, memory=memory)
        for t, producer in info.needs_produced:
            if not any(r.end <= s for r in runs_by_op.get(producer, ())):
                found.add("not_resident", "run of {op!r} at time {time} reads {tensor!r} before its "
                          "producer {producer!r} has run", op=run.op, time=s, tensor=t, producer=producer)
    for tr in good_transfers:
        s, e = tr.start, tr.end
        if not _has_copy(copies.get((tr.tensor, tr.src)), s, e):
            found.add("not_resident", "transfer of {tensor!r} [{time}, {end}) reads from {memory!r}, which "
                      "holds no copy ready by {time} and kept until {end}", tensor=tr.tensor, time=s,
                      end=e, memory=tr.src)

    # ------------------------------------------------------ update hazards
    for op, op_runs in runs_by_op.items():
        info = ops[op]
        if not info.updates:
            continue
        first = op_runs[0]
        if len(op_runs) > 1:
            found.add("update_hazard", "op {op!r} updates persistent tensors in place and runs {n} times; "
                      "it must run once", op=op, n=len(op_runs), time=op_runs[1].start)
        for reader, t in info.hazard_readers:
            for run in runs_by_op.get(reader, ()):
                if run.end > first.start:
                    found.add("update_hazard", "run of {reader!r} [{start}, {end}) reads {tensor!r}, which "
                              "{op!r} updates in place from time {time}", reader=reader, start=run.start,
                              end=run.end, tensor=t, op=op, time=first.start)
    _missing_ops(index, runs_by_op, found)

    # ------------------------------------------------------ capacity (EV.E2)
    deltas: dict[str, dict[int, int]] = {m: {} for m in index.memory_ids}
    for (t, memory), memory_copies in copies.items():
        size = nbytes[t]
        d = deltas[memory]
        for alloc, _, free in memory_copies:
            if alloc < free:
                d[alloc] = d.get(alloc, 0) + size
                d[free] = d.get(free, 0) - size
    home = instance.persistent_home  # not None: modelled
    if home is not None and latency > 0:
        for t in index.persistent_tensors:
            d = deltas[pinned.get(t, home)]
            d[0] = d.get(0, 0) + nbytes[t]
            d[latency] = d.get(latency, 0) - nbytes[t]
    profile: dict[str, tuple[tuple[int, int], ...]] = {}
    peaks: dict[str, int] = {}
    for memory in index.memory_ids:
        _sweep_memory(memory, deltas[memory], index.capacity[memory], profile, peaks, found)

    if instance.runtime_limit_cycles is not None and latency > instance.runtime_limit_cycles:
        _runtime_violation(found, latency, instance.runtime_limit_cycles)
    energy = EnergyBreakdown(compute_pj=compute_pj, recompute_pj=recompute_pj, sram_pj=sram_pj,
                             dram_pj=dram_pj, link_pj=link_pj,
                             static_pj=instance.static_fj_per_cycle * latency // 1000)
    return _metrics(instance, found, latency, compute_cycles, energy, peaks, profile,
                    recomputations, len(schedule.transfers), schedule)


def _has_copy(candidates: list[list[int]] | None, start: int, end: int) -> bool:
    """EV.E2 not_resident: some copy is ready by ``start`` and kept until ``end``."""
    if candidates:
        for alloc_ready_free in candidates:
            if alloc_ready_free[1] <= start and alloc_ready_free[2] >= end:
                return True
    return False


def _overlaps(items: list[_Interval]) -> Iterator[tuple[_Interval, _Interval]]:
    """Each interval that starts before an earlier one (of positive length) ends, after that one."""
    items.sort(key=_start_end)
    busy = None
    for item in items:
        if item.end <= item.start:
            continue  # an empty interval occupies nothing
        if busy is not None and item.start < busy.end:
            yield busy, item
        if busy is None or item.end > busy.end:
            busy = item


def _sweep_memory(memory: str, delta: Mapping[int, int], capacity: int,
                  profile: dict[str, tuple[tuple[int, int], ...]], peaks: dict[str, int],
                  found: _Violations) -> None:
    """Profile, peak and capacity violations (one per maximal interval over capacity)."""
    points = []
    total = peak = 0
    over = None  # [start, peak bytes, peak time]
    for when in sorted(delta):
        change = delta[when]
        if not change:
            continue
        total += change
        points.append((when, total))
        peak = max(peak, total)
        if total > capacity:
            if over is None:
                over = [when, total, when]
            elif total > over[1]:
                over[1:] = [total, when]
        elif over is not None:
            found.add("capacity", "memory {memory!r} holds more than its {capacity} bytes during "
                      "[{start}, {end}): {peak} bytes at time {time}", memory=memory, capacity=capacity,
                      start=over[0], end=when, peak=over[1], time=over[2])
            over = None
    if over is not None:  # cannot happen: everything is released by the end
        found.add("capacity", "memory {memory!r} holds {peak} bytes > {capacity} from time {time} on",
                  memory=memory, capacity=capacity, peak=over[1], time=over[2])
    profile[memory] = tuple(points)
    peaks[memory] = peak


def _runtime_violation(found: _Violations, latency: int, limit: int) -> None:
    found.add("runtime_limit", "latency {latency} cycles exceeds the runtime limit of {limit} cycles",
              latency=latency, limit=limit, time=latency)


# ================================================================== metrics
def _check_objective_available(instance: Instance) -> None:
    if instance.objective is Objective.WEIGHTED and not (
            "latency_ref_cycles" in instance.meta and "energy_ref_pj" in instance.meta):
        raise MonetError(
            f"instance {instance.name!r} has the weighted objective, whose value needs reference "
            "latency and energy; this is not available yet",
            field="meta.latency_ref_cycles/meta.energy_ref_pj",
            fix="set meta latency_ref_cycles and energy_ref_pj on the instance, or use the "
                "compute, latency or energy objective",
        )


def objective_value(instance: Instance, latency: int, compute_cycles: int,
                    energy: EnergyBreakdown) -> int | float:
    """The instance's objective (EV.E4) from a schedule's latency, compute cycles and energy."""
    objective = instance.objective
    if objective is Objective.COMPUTE:
        return compute_cycles
    if objective is Objective.LATENCY:
        return latency
    if objective is Objective.ENERGY:
        return energy.total_pj
    alpha = instance.alpha
    return float(alpha * latency / instance.meta["latency_ref_cycles"]
                 + (1 - alpha) * energy.total_pj / instance.meta["energy_ref_pj"])


def _metrics(instance: Instance, found: _Violations, latency: int, compute_cycles: int,
             energy: EnergyBreakdown, peaks: dict[str, int], profile: dict[str, tuple[tuple[int, int], ...]],
             recomputations: int,
             transfers: int, schedule: Schedule) -> Metrics:
    return Metrics(
        feasible=not found.counts,
        violations=found.sorted_kept(),
        violation_counts=MappingProxyType(found.counts),
        latency_cycles=latency,
        compute_cycles=compute_cycles,
        energy=energy,
        peak_bytes=MappingProxyType(peaks),
        profile=MappingProxyType(profile),
        recomputations=recomputations,
        transfers=transfers,
        objective_value=objective_value(instance, latency, compute_cycles, energy),
        schedule=schedule,
    )
