"""The Gantt chart of a schedule: one lane per core and per busy link, then each memory's occupancy.

It draws what :func:`~monet_ilp.evaluate.evaluate` rebuilt from a schedule (runs,
transfers, memory profiles); the time axis and the memory panels are in the units of
:mod:`.axes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from matplotlib.patches import Patch

from monet_ilp.evaluate import evaluate
from monet_ilp.graph.fusion import STAGE_OP_TYPE, TILE_SEP
from monet_ilp.graph.ir import Op, OpKind
from monet_ilp.instance import Instance
from monet_ilp.plot.axes import quantity, unit_axis
from monet_ilp.plot.figures import (
    CAPACITY_COLOR,
    OP_COLORS,
    TRANSFER_COLORS,
    UNKNOWN_COLOR,
    check_output,
    new_figure,
    save,
)
from monet_ilp.schedule import Schedule, Sequence, check_made_for, load_schedule

if TYPE_CHECKING:
    from pathlib import Path

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from monet_ilp.instance import MemorySpec

__all__ = ["gantt", "transfer_direction"]

_RECOMPUTE_HATCH = "////"
_WIDTH_IN = 12.0
_LANE_IN = 0.42
_MEMORY_PANEL_IN = 1.35
_LABEL_PT = 7.0
_MAX_LABELS = 400
# A non-SRAM memory whose capacity exceeds its peak this many times has its capacity
# written in the legend, not drawn: a 4 GiB line would flatten a 3 MiB profile.
_OFF_SCALE = 20


def gantt(instance: Instance | str | Path, schedule: Schedule | Sequence | str | Path,
          path: str | Path | None = None, title: str | None = None) -> Figure:
    """Draw a schedule: one lane per core and per busy link, then each memory's occupancy.

    Parameters
    ----------
    instance
        The instance, or the path of its JSON file.
    schedule
        A timed :class:`~monet_ilp.schedule.Schedule`, a P1
        :class:`~monet_ilp.schedule.Sequence` (drawn as the evaluator times it), or the
        path of a schedule JSON file.
    path
        If given, the figure is saved there; the suffix picks the format (png, pdf, svg).
    title
        The title; by default the instance name, latency, energy and feasibility.

    Returns
    -------
    matplotlib.figure.Figure
        The top axes (gid ``"gantt"``) has one lane per core (runs coloured by op kind,
        recomputations hatched) and one per link that carries a transfer (transfers
        coloured by direction), labelled by their ids; links the schedule leaves idle
        get no lane.  Below it, one axes per memory (gid ``"memory:<id>"``): the
        evaluator's occupancy profile as a step plot and the capacity as a dashed line
        (gid ``"capacity"``), in the byte unit named in the panel's label.  A memory
        that holds nothing says why in a note (gid ``"empty_note"``): unused, or its
        core's runs only touch persistent tensors, which stay in their home memory.
        The time axis is in the unit of the makespan (:func:`pick_unit`), named in its
        label.

    Raises
    ------
    MonetError
        For unreadable files, a Sequence on a several-core instance, or a path that
        cannot be written.
    """
    path = check_output(path)
    if not isinstance(instance, Instance):
        instance = Instance.load(instance)
    if not isinstance(schedule, (Schedule, Sequence)):
        schedule = load_schedule(schedule, instance)  # refuses a schedule made for another instance
    else:
        check_made_for(schedule, instance)
    metrics = evaluate(instance, schedule)
    timed = metrics.schedule
    makespan = max(metrics.latency_cycles, 1)

    lanes = _lanes(instance, timed)
    memories = _memories_to_draw(instance)

    heights = [max(1.2, _LANE_IN * len(lanes) + 0.6)] + [_MEMORY_PANEL_IN] * len(memories)
    fig = new_figure(_WIDTH_IN, sum(heights) + 0.9)
    axes = fig.subplots(len(heights), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    ax = axes[0]
    ax.set_gid("gantt")
    ax.set_xlim(0, makespan)
    lane_of = {name: i for i, name in enumerate(lanes)}
    labels = _LabelBudget(ax, makespan, fig)
    kinds = _draw_runs(ax, instance, timed, lane_of, labels)
    directions = _draw_transfers(ax, instance, timed, lane_of, labels)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.tick_params(axis="y", length=0)
    for boundary in range(1, len(lanes)):
        ax.axhline(boundary - 0.5, color="#DDDDDD", lw=0.6, zorder=0)
    ax.legend(handles=_gantt_legend(kinds, directions), loc="upper left", bbox_to_anchor=(1.0, 1.0),
              fontsize=8, frameon=False)

    for mem_ax, memory in zip(axes[1:], memories, strict=True):
        peak = metrics.peak_bytes.get(memory, 0)
        _draw_memory(mem_ax, instance.memory(memory), metrics.profile.get(memory, ()), peak,
                     makespan)
        if peak == 0:
            mem_ax.text(0.5, 0.5, _empty_memory_note(instance, timed, memory), ha="center",
                        va="center", transform=mem_ax.transAxes, fontsize=8, color="#555555",
                        gid="empty_note")
    # The axes share x, so one locator and formatter serve every panel.
    unit_axis(axes[-1].xaxis, makespan, "cycles", "time", nbins=10)

    if title is None:
        n = sum(metrics.violation_counts.values())
        verdict = "feasible" if metrics.feasible else f"INFEASIBLE, {n} violation{'s' * (n != 1)}"
        title = (f"{instance.name}: latency {quantity(metrics.latency_cycles, 'cycles')}, "
                 f"energy {quantity(metrics.energy.total_pj, 'pJ')}, "
                 f"{metrics.recomputations} recomputations, {metrics.transfers} transfers "
                 f"({verdict})")
    fig.suptitle(title, fontsize=10)
    if path is not None:
        save(fig, path)
    return fig


def _lanes(instance: Instance, timed: Schedule) -> list[str]:
    """Every core, then the links that carry a transfer, then names the instance lacks.

    Idle cores keep their lane (an idle core is worth seeing); idle links are left out,
    since a mesh has many more links than a schedule uses.  Runs and transfers on
    names the instance lacks still get a lane (the evaluator reports them as
    unknown_name), so that nothing in the schedule goes undrawn.
    """
    busy = {t.link for t in timed.transfers}
    lanes = [c.id for c in instance.cores] + [l.id for l in instance.links if l.id in busy]
    for name in dict.fromkeys([r.core for r in timed.ops] + [t.link for t in timed.transfers]):
        if name not in lanes:
            lanes.append(name)
    return lanes


def _empty_memory_note(instance: Instance, timed: Schedule, memory: str) -> str:
    """Why a memory's peak is 0: nothing used it, or its cores' runs need no copies.

    A run makes copies of its non-persistent outputs in its core's memory and reads
    its non-persistent inputs there (evaluator.md, EV.E1.2 and EV.E2 not_resident); its
    persistent inputs and outputs (weights, gradients, optimizer state) stay in
    ``persistent_home`` unless pinned.  So a core whose runs touch only persistent
    tensors, such as optimizer updates, streams them and holds nothing.
    """
    cores = {c.id for c in instance.cores if c.memory == memory}
    known = {op.id: op for op in instance.graph.ops}
    runs = [r for r in timed.ops if r.core in cores and r.op in known]
    moved = any(memory in (t.src, t.dst) for t in timed.transfers)
    if not runs and not moved:
        return f"unused: no run or transfer touches {memory}"
    ops = [known[r.op] for r in runs]
    streaming = all(instance.graph.tensor(t).persistent
                    for op in ops for t in (*op.inputs, *op.outputs))
    if not runs or moved or not streaming or instance.persistent_home is None:
        return "holds nothing at any time"
    kinds = ", ".join(sorted({str(op.kind).replace("_", " ") for op in ops}))
    n = len(runs)
    return (f"holds nothing: the {n} run{'s' * (n != 1)} here ({kinds}) read and write only "
            f"persistent tensors, streamed from {instance.persistent_home}")


def _memories_to_draw(instance: Instance) -> list[str]:
    """Each core's memory in core order, then every other memory (DRAM, host)."""
    order = list(dict.fromkeys(c.memory for c in instance.cores))
    return order + [m.id for m in instance.memories if m.id not in order]


class _LabelBudget:
    """Decides which bars get a text label: those wide enough for it, up to a cap.

    The width of the axes is not known before layout, so it is estimated from the
    figure's width; labels are few (at most one per bar that is wide on screen), so
    large schedules cost no more than their collections.
    """

    def __init__(self, ax: Axes, makespan: int, fig: Figure) -> None:
        width_px = _WIDTH_IN * fig.dpi * 0.78
        self.px_per_cycle = width_px / makespan
        self.char_px = _LABEL_PT * 0.62 * fig.dpi / 72
        self.ax = ax
        self.left = _MAX_LABELS

    def put(self, text: str, start: int, end: int, lane: int, color: str = "white") -> None:
        if self.left <= 0 or (end - start) * self.px_per_cycle < len(text) * self.char_px + 4:
            return
        self.left -= 1
        self.ax.text((start + end) / 2, lane, text, ha="center", va="center", fontsize=_LABEL_PT,
                     color=color, clip_on=True)


def _draw_runs(ax: Axes, instance: Instance, timed: Schedule, lane_of: Mapping[str, int],
               labels: _LabelBudget) -> set[str]:
    """One collection per lane for first runs and one for recomputations (hatched)."""
    kind_of = {op.id: _kind(op) for op in instance.graph.ops}
    # A recomputation is a run that is not its op's first by (start, end), as the
    # evaluator numbers them (evaluator.md, EV.E2); the schedule's instance field is not trusted.
    seen: set[str] = set()
    bars: dict[tuple[int, bool], tuple[list[tuple[int, int]], list[str]]] = {}
    kinds: set[str] = set()
    for run in sorted(timed.ops, key=lambda r: (r.start, r.end)):
        recompute = run.op in seen
        seen.add(run.op)
        kind = kind_of.get(run.op, "unknown")
        kinds.add(kind)
        lane = lane_of[run.core]
        xs, colors = bars.setdefault((lane, recompute), ([], []))
        xs.append((run.start, run.end - run.start))
        colors.append(OP_COLORS.get(kind, UNKNOWN_COLOR))
        labels.put(run.op, run.start, run.end, lane)
    for (lane, recompute), (xs, colors) in bars.items():
        if recompute:
            ax.broken_barh(xs, (lane - 0.38, 0.76), facecolors=colors, edgecolors="#202020",
                           linewidths=0.4, hatch=_RECOMPUTE_HATCH)
        else:
            ax.broken_barh(xs, (lane - 0.38, 0.76), facecolors=colors, edgecolors="white",
                           linewidths=0.3)
    if seen and len(seen) < len(timed.ops):
        kinds.add("recomputation")
    return kinds


def _kind(op: Op) -> str:
    """The colour key of an op: its kind, or a fused stack's tile or weight staging (FU.T1, FU.T4)."""
    if op.op_type == STAGE_OP_TYPE:
        return "weight_stage"
    if op.kind is OpKind.FORWARD and TILE_SEP in op.id:
        return "forward_tile"
    return str(op.kind)


def transfer_direction(instance: Instance, src: str, dst: str) -> str:
    """``offload``, ``prefetch``, ``core_to_core`` or ``other`` (a memory the instance lacks)."""
    if not (instance.has_memory(src) and instance.has_memory(dst)):
        return "other"
    src_sram = instance.memory(src).kind == "sram"
    dst_sram = instance.memory(dst).kind == "sram"
    if not dst_sram:
        return "offload"
    return "core_to_core" if src_sram else "prefetch"


def _draw_transfers(ax: Axes, instance: Instance, timed: Schedule, lane_of: Mapping[str, int],
                    labels: _LabelBudget) -> set[str]:
    bars: dict[int, tuple[list[tuple[int, int]], list[str]]] = {}
    directions: set[str] = set()
    for t in sorted(timed.transfers, key=lambda t: (t.start, t.end)):
        direction = transfer_direction(instance, t.src, t.dst)
        directions.add(direction)
        lane = lane_of[t.link]
        xs, colors = bars.setdefault(lane, ([], []))
        xs.append((t.start, t.end - t.start))
        colors.append(TRANSFER_COLORS.get(direction, UNKNOWN_COLOR))
        labels.put(t.tensor, t.start, t.end, lane, color="black")
    for lane, (xs, colors) in bars.items():
        ax.broken_barh(xs, (lane - 0.3, 0.6), facecolors=colors, edgecolors="white", linewidths=0.3)
    return directions


def _gantt_legend(kinds: set[str], directions: set[str]) -> list[Patch]:
    handles = [Patch(facecolor=color, label=kind.replace("_", " "))
               for kind, color in OP_COLORS.items() if kind in kinds]
    if "unknown" in kinds:
        handles.append(Patch(facecolor=UNKNOWN_COLOR, label="unknown op"))
    if "recomputation" in kinds:
        handles.append(Patch(facecolor="white", edgecolor="#202020", hatch=_RECOMPUTE_HATCH,
                             label="recomputation"))
    handles += [Patch(facecolor=color, label=direction.replace("_", " "))
                for direction, color in TRANSFER_COLORS.items() if direction in directions]
    if "other" in directions:
        handles.append(Patch(facecolor=UNKNOWN_COLOR, label="other transfer"))
    return handles


def _draw_memory(ax: Axes, memory: MemorySpec, profile: tuple[tuple[int, int], ...], peak: int,
                 makespan: int) -> None:
    ax.set_gid(f"memory:{memory.id}")
    times = [0] + [t for t, _ in profile] + [makespan]
    held = [0] + [b for _, b in profile]
    held.append(held[-1])
    ax.fill_between(times, held, step="post", color="#4C72B0", alpha=0.25, lw=0)
    ax.step(times, held, where="post", color="#4C72B0", lw=1.0,
            label=f"held (peak {quantity(peak, 'B')})")
    capacity = memory.capacity_bytes
    off_scale = memory.kind != "sram" and capacity > _OFF_SCALE * max(peak, 1)
    if off_scale:
        ax.plot([], [], color=CAPACITY_COLOR, ls="--", lw=1.0,
                label=f"capacity {quantity(capacity, 'B')} (off scale)")
        top = max(peak, 1)
    else:
        ax.axhline(capacity, color=CAPACITY_COLOR, ls="--", lw=1.0, gid="capacity",
                   label=f"capacity {quantity(capacity, 'B')}")
        top = max(peak, capacity)
    if peak > capacity:
        over = [b > capacity for b in held]
        ax.fill_between(times, held, capacity, where=over, step="post", color=CAPACITY_COLOR,
                        alpha=0.35, lw=0, label="over capacity")
    ax.set_ylim(0, top * 1.12)
    unit = unit_axis(ax.yaxis, top, "B", memory.id, nbins=4)
    if top == 1:  # nothing held and no capacity line: a 0..1 B axis says nothing but 0
        ax.set_yticks([0])
    ax.set_ylabel(f"{memory.id}\n({unit})", fontsize=8, rotation=0, ha="right", va="center")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
