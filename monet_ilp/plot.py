"""Plots of verified results: the Gantt chart of a schedule and the Pareto front of a sweep.

This module sits after the evaluator in the pipeline: :func:`gantt` draws what
:func:`~monet_ilp.evaluate.evaluate` rebuilt from a schedule (runs, transfers, memory
profiles), and :func:`pareto` draws the points of a latency/energy sweep or of a GA
run.  Figures are made on matplotlib's Agg canvas without pyplot, so no global backend
is set and no window opens.

Axes show cycles and picojoules in the unit that keeps tick labels short (kcycles,
Mcycles, nJ, µJ, mJ, ..., :func:`pick_unit`, chosen from the largest value drawn),
and name the unit in the axis label; memory panels use B, KiB, MiB or GiB the same
way.

:func:`pareto` and ``monet-ilp plot pareto`` read two formats.  A Pareto front file
(``monet-ilp pareto`` writes it)::

    {
      "instance": "mlp_p3",                 # name shown in the title
      "objective_x": "latency",             # optional; must be "latency" if given
      "objective_y": "energy",              # optional; must be "energy" if given
      "points": [
        {
          "latency_cycles": 123456,         # int: the evaluator's latency of the schedule
          "energy_pj": 7890123,             # int: the evaluator's total energy
          "energy_bound_pj": 7000000,       # int or null: certified lower bound on energy
          "latency_bound_cycles": null,     # int or null: certified lower bound on latency
          "status": "optimal",              # the solve status of the point
          "schedule": "front/p0.json",      # str or null: where the schedule was saved
          "feasible": true                  # optional, default true: the evaluator's verdict
        }
      ]
    }

and a GA result (``monet-ilp ga --out`` writes it; :func:`monet_ilp.ga.nsga2.run_ga`
documents it): a JSON object with ``"format": "monet-ilp/ga"``, ``instance`` and
``points``, each point with ``latency_cycles``, ``energy_pj``, ``feasible`` and its
schedule inline (an object, not read here).  GA points have no bounds; a feasible
one counts as status ``"feasible"`` (not proven), an infeasible one as
``"infeasible"``.

Extra keys are allowed anywhere and ignored.  A point whose sweep step found no
schedule may give ``null`` for both ``latency_cycles`` and ``energy_pj`` and is not
drawn.  A bound above its point's value is an error.  Points with status
``"optimal"`` are drawn filled, the other feasible ones hollow; dominated points are
grey.  Infeasible points (``feasible``: false, e.g. the least-violating individual of
a GA run that found no feasible schedule) are never on the front: they are drawn as
red crosses and left out of the non-dominated set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence as Seq, TypeVar

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import Formatter, MaxNLocator

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph.ir import read_json
from monet_ilp.instance import Instance
from monet_ilp.schedule import Schedule, Sequence, check_made_for, load_schedule

__all__ = ["OP_COLORS", "TRANSFER_COLORS", "UNITS", "gantt", "non_dominated", "pareto", "pick_unit",
           "quantity", "read_front", "transfer_direction", "unit_axis"]

#: Bar colour of a run, by the kind of its op (``monet_ilp.graph.ir.OpKind``).
OP_COLORS: Mapping[str, str] = {
    "forward": "#4C72B0",
    "backward_data": "#DD8452",
    "backward_weight": "#C44E52",
    "loss": "#8172B3",
    "optimizer": "#937860",
}
#: Bar colour of a transfer, by direction: ``offload`` goes to a memory that is not an
#: SRAM, ``prefetch`` comes from one into an SRAM, ``core_to_core`` joins two SRAMs.
TRANSFER_COLORS: Mapping[str, str] = {
    "offload": "#E377C2",
    "prefetch": "#17BECF",
    "core_to_core": "#BCBD22",
}
_UNKNOWN_COLOR = "#9A9A9A"
_RECOMPUTE_HATCH = "////"
_CAPACITY_COLOR = "#D62728"
_DOMINATED_COLOR = "#B0B0B0"
_FRONT_COLOR = "#1F77B4"
_BOUND_COLOR = "#2CA02C"

_WIDTH_IN = 12.0
_DPI = 110
_LANE_IN = 0.42
_MEMORY_PANEL_IN = 1.35
_LABEL_PT = 7.0
_MAX_LABELS = 400
# A non-SRAM memory whose capacity exceeds its peak this many times has its capacity
# written in the legend, not drawn: a 4 GiB line would flatten a 3 MiB profile.
_OFF_SCALE = 20

#: Units of each base quantity, smallest first: (factor, name).  Energies are in
#: picojoules and times in cycles everywhere in monet-ilp (instance.py).
UNITS: Mapping[str, tuple[tuple[int, str], ...]] = {
    "cycles": ((1, "cycles"), (10**3, "kcycles"), (10**6, "Mcycles"), (10**9, "Gcycles")),
    "pJ": ((1, "pJ"), (10**3, "nJ"), (10**6, "µJ"), (10**9, "mJ"), (10**12, "J"), (10**15, "kJ")),
    "B": ((1, "B"), (1024, "KiB"), (1024**2, "MiB"), (1024**3, "GiB"), (1024**4, "TiB")),
}
# Tick steps MaxNLocator may pick (times a power of ten): 2.5 is left out, since its
# ticks (0, 2.5, 5, 7.5) need a decimal more than the step's own order of magnitude.
_TICK_STEPS = (1, 2, 5, 10)
_MAX_ERROR_REPR = 60

P = TypeVar("P")


# ===================================================================== units
def pick_unit(top: float, base: str) -> tuple[int, str]:
    """The largest unit of ``base`` (a key of :data:`UNITS`) not above ``|top|``.

    ``top`` in that unit is below 1000 (1024 for bytes) unless the ladder ends first,
    so tick labels have at most three digits before the point.  Values below the
    smallest unit get the smallest.

    Examples
    --------
    >>> pick_unit(6_217_177, "cycles")
    (1000000, 'Mcycles')
    >>> pick_unit(42_854_725_770, "pJ")
    (1000000000, 'mJ')
    """
    chosen = UNITS[base][0]
    for factor, name in UNITS[base]:
        if abs(top) >= factor:
            chosen = (factor, name)
    return chosen


def quantity(value: float, base: str) -> str:
    """``value`` in its own unit with four significant digits: ``"6.217 Mcycles"``."""
    factor, name = pick_unit(value, base)
    if factor == 1:
        return f"{value:,.0f} {name}"
    return f"{value / factor:.4g} {name}"


class _ScaledFormatter(Formatter):
    """Tick labels divided by a unit factor, with as few decimals as the ticks need."""

    def __init__(self, factor: float):
        self.factor = factor
        self.decimals = 0

    def set_locs(self, locs) -> None:
        super().set_locs(locs)
        values = [v / self.factor for v in locs]
        # The fewest decimals (up to 3) at which every tick label is exact.
        self.decimals = next((d for d in range(4) if all(abs(v * 10**d - round(v * 10**d)) < 1e-6
                                                          for v in values)), 3)

    def __call__(self, x, pos=None) -> str:
        text = f"{x / self.factor:.{self.decimals}f}"
        return "0" if float(text) == 0 else text  # no "-0" or "0.0"


class _ScaledLocator(MaxNLocator):
    """MaxNLocator's round steps counted in a unit: ticks at 1 MiB, not at 1,000,000 B."""

    def __init__(self, factor: float, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def tick_values(self, vmin, vmax):
        return super().tick_values(vmin / self.factor, vmax / self.factor) * self.factor


def unit_axis(axis, top: float, base: str, label: str, nbins: int | str = "auto") -> str:
    """Scale a matplotlib axis to the unit of ``top`` and name the unit in its label.

    Parameters
    ----------
    axis
        ``ax.xaxis`` or ``ax.yaxis``.
    top
        The largest value drawn on it, in the base unit.
    base
        A key of :data:`UNITS`: ``"cycles"``, ``"pJ"`` or ``"B"``.
    label
        The quantity, e.g. ``"latency"``; the axis label becomes ``"latency (Mcycles)"``.
    nbins
        At most this many tick intervals (matplotlib's ``MaxNLocator``).

    Returns
    -------
    str
        The unit's name.
    """
    factor, name = pick_unit(top, base)
    axis.set_major_locator(_ScaledLocator(factor, nbins=nbins, steps=list(_TICK_STEPS)))
    axis.set_major_formatter(_ScaledFormatter(factor))
    axis.set_label_text(f"{label} ({name})")
    return name


# ===================================================================== gantt
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
    path = _check_output(path)
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
    fig = Figure(figsize=(_WIDTH_IN, sum(heights) + 0.9), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
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

    for mem_ax, memory in zip(axes[1:], memories):
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
        _save(fig, path)
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
    its non-persistent inputs there (evaluator.md, E1.2 and E2 not_resident); its
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

    def __init__(self, ax, makespan: int, fig: Figure):
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


def _draw_runs(ax, instance: Instance, timed: Schedule, lane_of: Mapping[str, int],
               labels: _LabelBudget) -> set[str]:
    """One collection per lane for first runs and one for recomputations (hatched)."""
    kind_of = {op.id: str(op.kind) for op in instance.graph.ops}
    # A recomputation is a run that is not its op's first by (start, end), as the
    # evaluator numbers them (evaluator.md, E2); the schedule's instance field is not trusted.
    seen: set[str] = set()
    bars: dict[tuple[int, bool], tuple[list, list]] = {}
    kinds: set[str] = set()
    for run in sorted(timed.ops, key=lambda r: (r.start, r.end)):
        recompute = run.op in seen
        seen.add(run.op)
        kind = kind_of.get(run.op, "unknown")
        kinds.add(kind)
        lane = lane_of[run.core]
        xs, colors = bars.setdefault((lane, recompute), ([], []))
        xs.append((run.start, run.end - run.start))
        colors.append(OP_COLORS.get(kind, _UNKNOWN_COLOR))
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


def transfer_direction(instance: Instance, src: str, dst: str) -> str:
    """``offload``, ``prefetch``, ``core_to_core`` or ``other`` (a memory the instance lacks)."""
    if not (instance.has_memory(src) and instance.has_memory(dst)):
        return "other"
    src_sram = instance.memory(src).kind == "sram"
    dst_sram = instance.memory(dst).kind == "sram"
    if not dst_sram:
        return "offload"
    return "core_to_core" if src_sram else "prefetch"


def _draw_transfers(ax, instance: Instance, timed: Schedule, lane_of: Mapping[str, int],
                    labels: _LabelBudget) -> set[str]:
    bars: dict[int, tuple[list, list]] = {}
    directions: set[str] = set()
    for t in sorted(timed.transfers, key=lambda t: (t.start, t.end)):
        direction = transfer_direction(instance, t.src, t.dst)
        directions.add(direction)
        lane = lane_of[t.link]
        xs, colors = bars.setdefault(lane, ([], []))
        xs.append((t.start, t.end - t.start))
        colors.append(TRANSFER_COLORS.get(direction, _UNKNOWN_COLOR))
        labels.put(t.tensor, t.start, t.end, lane, color="black")
    for lane, (xs, colors) in bars.items():
        ax.broken_barh(xs, (lane - 0.3, 0.6), facecolors=colors, edgecolors="white", linewidths=0.3)
    return directions


def _gantt_legend(kinds: set[str], directions: set[str]) -> list:
    handles = [Patch(facecolor=color, label=kind.replace("_", " "))
               for kind, color in OP_COLORS.items() if kind in kinds]
    if "unknown" in kinds:
        handles.append(Patch(facecolor=_UNKNOWN_COLOR, label="unknown op"))
    if "recomputation" in kinds:
        handles.append(Patch(facecolor="white", edgecolor="#202020", hatch=_RECOMPUTE_HATCH,
                             label="recomputation"))
    handles += [Patch(facecolor=color, label=direction.replace("_", " "))
                for direction, color in TRANSFER_COLORS.items() if direction in directions]
    if "other" in directions:
        handles.append(Patch(facecolor=_UNKNOWN_COLOR, label="other transfer"))
    return handles


def _draw_memory(ax, memory, profile, peak: int, makespan: int) -> None:
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
        ax.plot([], [], color=_CAPACITY_COLOR, ls="--", lw=1.0,
                label=f"capacity {quantity(capacity, 'B')} (off scale)")
        top = max(peak, 1)
    else:
        ax.axhline(capacity, color=_CAPACITY_COLOR, ls="--", lw=1.0, gid="capacity",
                   label=f"capacity {quantity(capacity, 'B')}")
        top = max(peak, capacity)
    if peak > capacity:
        over = [b > capacity for b in held]
        ax.fill_between(times, held, capacity, where=over, step="post", color=_CAPACITY_COLOR,
                        alpha=0.35, lw=0, label="over capacity")
    ax.set_ylim(0, top * 1.12)
    unit = unit_axis(ax.yaxis, top, "B", memory.id, nbins=4)
    if top == 1:  # nothing held and no capacity line: a 0..1 B axis says nothing but 0
        ax.set_yticks([0])
    ax.set_ylabel(f"{memory.id}\n({unit})", fontsize=8, rotation=0, ha="right", va="center")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)


# ==================================================================== pareto
def non_dominated(points: Seq[P]) -> list[P]:
    """The points no other point dominates, sorted by latency (then energy).

    Parameters
    ----------
    points
        Mappings with ``latency_cycles`` and ``energy_pj`` (the points of a Pareto
        file), or ``(latency, energy)`` pairs.  Both objectives are minimised.

    Returns
    -------
    list
        The same objects, unchanged.  A point is dominated when another is no worse in
        both objectives and better in one; equal points do not dominate each other, so
        duplicates of a front point are all kept.
    """
    ordered = sorted(points, key=_objectives)
    front: list[P] = []
    best_energy = None
    for p in ordered:
        latency, energy = _objectives(p)
        if best_energy is None or energy < best_energy:
            front.append(p)
            best_energy = energy
        elif _objectives(front[-1]) == (latency, energy):
            front.append(p)
    return front


def _objectives(point: Any) -> tuple[Any, Any]:
    if isinstance(point, Mapping):
        return point["latency_cycles"], point["energy_pj"]
    latency, energy = point
    return latency, energy


def read_front(front: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Check a Pareto front or a GA result (a dict or the path of its JSON file).

    Both formats are in the module docstring; a GA result is recognised by its
    ``"format": "monet-ilp/ga"``.

    Returns
    -------
    dict
        ``{"instance": str, "source": "pareto" or "ga", "points": [...]}`` with the
        points that have a schedule, each a dict of ``latency_cycles``, ``energy_pj``,
        ``energy_bound_pj``, ``latency_bound_cycles``, ``status``, ``schedule`` (a
        path or ``None``; a GA point's inline schedule is not kept) and ``feasible``.

    Raises
    ------
    InputFormatError
        Naming the file and the field, for anything not in the format.  A bad value
        is shown by its type (objects, lists) or its first characters, never whole.
    """
    from monet_ilp.ga.nsga2 import FORMAT_NAME as GA_FORMAT

    source = None
    if not isinstance(front, Mapping):
        source = str(front)
        front = read_json(front)
    kind = front.get("format") if isinstance(front, Mapping) else None
    ga = kind == GA_FORMAT
    writer = "`monet-ilp ga --out`" if ga else "`monet-ilp pareto`"

    def fail(problem: str, field: str) -> InputFormatError:
        return InputFormatError(problem, file=source, field=field,
                                fix=f"write the file with {writer}, or follow the format in the "
                                    f"monet_ilp.plot docstring")

    if not isinstance(front, Mapping):
        raise fail(f"a Pareto front must be a JSON object, got {_brief(front)}", "(top level)")
    if kind is not None and not ga:
        raise InputFormatError(f"not a Pareto front or GA result (format {_brief(kind)})",
                               file=source, field="format",
                               fix="pass the file written by `monet-ilp pareto` or "
                                   "`monet-ilp ga --out`")
    for key, expected in (("objective_x", "latency"), ("objective_y", "energy")):
        if front.get(key, expected) != expected:
            raise fail(f"only latency/energy fronts can be drawn, got {_brief(front.get(key))}",
                       key)
    points = front.get("points")
    if not isinstance(points, list):
        raise fail(f"missing or not a list (got {_brief(points)})", "points")
    checked = []
    for k, p in enumerate(points):
        if not isinstance(p, Mapping):
            raise fail(f"a point must be an object, got {_brief(p)}", f"points[{k}]")
        point = _read_point(p, f"points[{k}]", ga, fail)
        if point is not None:
            checked.append(point)
    return {"instance": str(front.get("instance", "")), "source": "ga" if ga else "pareto",
            "points": checked}


def _read_point(p: Mapping[str, Any], where: str, ga: bool, fail) -> dict[str, Any] | None:
    """One point of either format, checked; ``None`` for a sweep step without a schedule."""
    latency, energy = p.get("latency_cycles"), p.get("energy_pj")
    if latency is None and energy is None and not ga:
        return None
    values: dict[str, Any] = {}
    for key, value in (("latency_cycles", latency), ("energy_pj", energy)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail(f"expected a non-negative integer, got {_brief(value)}", f"{where}.{key}")
        values[key] = value
    for key, of in (("energy_bound_pj", "energy_pj"), ("latency_bound_cycles", "latency_cycles")):
        bound = None if ga else p.get(key)  # a GA certifies nothing
        if bound is not None:
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise fail(f"expected a number or null, got {_brief(bound)}", f"{where}.{key}")
            if bound > values[of]:
                raise fail(f"the lower bound {bound} exceeds the point's {of} {values[of]}",
                           f"{where}.{key}")
        values[key] = bound
    feasible = p.get("feasible", True)
    if not isinstance(feasible, bool):
        raise fail(f"expected true or false, got {_brief(feasible)}", f"{where}.feasible")
    schedule = p.get("schedule")
    if ga:
        # GA points carry their schedule inline; drawing needs only the two objectives.
        if schedule is not None and not isinstance(schedule, Mapping):
            raise fail(f"expected an inline schedule (an object) or null, got {_brief(schedule)}",
                       f"{where}.schedule")
        status, schedule = ("feasible" if feasible else "infeasible"), None
    else:
        status = p.get("status", "")
        if not isinstance(status, str):
            raise fail(f"expected a string, got {_brief(status)}", f"{where}.status")
        if schedule is not None and not isinstance(schedule, str):
            raise fail(f"expected a path or null, got {_brief(schedule)}", f"{where}.schedule")
    return {**values, "status": status, "schedule": schedule, "feasible": feasible}


def _brief(value: Any) -> str:
    """A bad value as an error message shows it: its type for containers, else a clipped repr."""
    if isinstance(value, Mapping):
        return f"an object ({len(value)} keys)"
    if isinstance(value, (list, tuple)):
        return f"a list ({len(value)} items)"
    text = repr(value)
    return text if len(text) <= _MAX_ERROR_REPR else text[:_MAX_ERROR_REPR - 3] + "..."


def pareto(front: Mapping[str, Any] | str | Path, path: str | Path | None = None) -> Figure:
    """Draw a latency/energy Pareto front, from a ``monet-ilp pareto`` file or a GA result.

    Parameters
    ----------
    front
        A front or GA result in a format of the module docstring, or the path of its
        JSON file.
    path
        If given, the figure is saved there; the suffix picks the format.

    Returns
    -------
    matplotlib.figure.Figure
        One axes (gid ``"pareto"``): latency against energy, each in the unit that
        keeps tick labels short (named in the axis labels).  Feasible non-dominated
        points are joined as a step front (filled markers for proven-optimal points,
        hollow for the others); dominated points are grey; infeasible points are red
        crosses (gid ``"infeasible"``), never on the front; a certified energy lower
        bound below a point is a dotted downward bar ending in a ``v`` marker, a
        latency lower bound a dotted leftward bar ending in a ``<`` marker.  A bound
        that every feasible point shares (two points or more, e.g. a bound of the
        whole instance) is one dotted line across the axes instead (gids
        ``"energy_bound_all"``, ``"latency_bound_all"``).  The legend sits outside the
        axes, to the right, so it hides no point.
    """
    path = _check_output(path)
    data = read_front(front)
    points = data["points"]
    feasible = [p for p in points if p["feasible"]]
    infeasible = [p for p in points if not p["feasible"]]
    front_points = non_dominated(feasible)
    on_front = {id(p) for p in front_points}
    dominated = [p for p in feasible if id(p) not in on_front]

    fig = Figure(figsize=(8.5, 5.0), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.set_gid("pareto")
    if front_points:
        ax.plot([p["latency_cycles"] for p in front_points], [p["energy_pj"] for p in front_points],
                drawstyle="steps-post", color=_FRONT_COLOR, lw=1.2, zorder=2, gid="front")
    shared = {key: _shared_bound(feasible, key)
              for key in ("energy_bound_pj", "latency_bound_cycles")}
    for group, color, gid in ((front_points, _FRONT_COLOR, "front_points"),
                              (dominated, _DOMINATED_COLOR, "dominated")):
        for optimal in (True, False):
            chosen = [p for p in group if (p["status"] == "optimal") == optimal]
            if chosen:
                ax.scatter([p["latency_cycles"] for p in chosen], [p["energy_pj"] for p in chosen],
                           s=36, zorder=3, edgecolors=color, linewidths=1.3,
                           facecolors=color if optimal else "white", gid=gid)
        _draw_bounds(ax, group, dominated=group is dominated, shared=shared)
    _draw_shared_bounds(ax, shared)
    if infeasible:
        ax.scatter([p["latency_cycles"] for p in infeasible], [p["energy_pj"] for p in infeasible],
                   marker="x", s=40, linewidths=1.5, color=_CAPACITY_COLOR, zorder=3,
                   gid="infeasible")
    unit_axis(ax.xaxis, _largest(points, "latency_cycles", "latency_bound_cycles"), "cycles",
              "latency", nbins=6)
    unit_axis(ax.yaxis, _largest(points, "energy_pj", "energy_bound_pj"), "pJ", "energy", nbins=6)
    ax.grid(True, color="#EEEEEE", lw=0.6)
    ax.set_axisbelow(True)
    if not feasible:
        note = "no feasible point"
        if infeasible:
            note += ": the crosses are schedules the evaluator rejects"
        ax.text(0.5, 0.04 if infeasible else 0.5, note, transform=ax.transAxes, ha="center",
                va="bottom", color="#777777", gid="note")
    handles = _pareto_legend(feasible, dominated, infeasible, shared)
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  borderaxespad=0.0, frameon=False)
    title = data["instance"] or "Pareto front"
    if data["source"] == "ga":
        title += " (GA)"
    text = (f"{title}: {len(front_points)} non-dominated of {len(feasible)} points" if feasible
            else f"{title}: no feasible point")
    if infeasible:
        text += f", {len(infeasible)} infeasible"
    fig.suptitle(text, fontsize=10)
    if path is not None:
        _save(fig, path)
    return fig


def _largest(points: list[dict], *keys: str) -> int:
    """The largest value under ``keys`` (which decides an axis's unit); 0 with no point."""
    return max((p[k] for p in points for k in keys if p[k] is not None), default=0)


def _shared_bound(points: list[dict], key: str) -> int | float | None:
    """The bound under ``key`` if two points or more all have that one bound, else ``None``."""
    bounds = {p[key] for p in points}
    return bounds.pop() if len(points) >= 2 and len(bounds) == 1 and None not in bounds else None


def _draw_shared_bounds(ax, shared: Mapping[str, Any]) -> None:
    """One dotted line per bound every point shares, not one bar per point to the same value."""
    style = {"color": _BOUND_COLOR, "lw": 1.1, "ls": ":", "zorder": 1}
    if shared["energy_bound_pj"] is not None:
        ax.axhline(shared["energy_bound_pj"], gid="energy_bound_all", **style)
    if shared["latency_bound_cycles"] is not None:
        ax.axvline(shared["latency_bound_cycles"], gid="latency_bound_all", **style)


def _draw_bounds(ax, group: list[dict], dominated: bool, shared: Mapping[str, Any]) -> None:
    """Dotted bars from each point down to its energy bound and left to its latency bound.

    Bounds in ``shared`` (those of every point) are drawn once by :func:`_draw_shared_bounds`.
    """
    color = _DOMINATED_COLOR if dominated else _BOUND_COLOR
    style = {"colors": color, "lw": 1.1, "ls": ":", "zorder": 1}
    below = [p for p in group if shared["energy_bound_pj"] is None
             and _below(p["energy_bound_pj"], p["energy_pj"])]
    if below:
        x = [p["latency_cycles"] for p in below]
        bound = [p["energy_bound_pj"] for p in below]
        ax.vlines(x, bound, [p["energy_pj"] for p in below], gid="energy_bounds", **style)
        ax.scatter(x, bound, marker="v", s=28, color=color, zorder=1)
    left = [p for p in group if shared["latency_bound_cycles"] is None
            and _below(p["latency_bound_cycles"], p["latency_cycles"])]
    if left:
        y = [p["energy_pj"] for p in left]
        bound = [p["latency_bound_cycles"] for p in left]
        ax.hlines(y, bound, [p["latency_cycles"] for p in left], gid="latency_bounds", **style)
        ax.scatter(bound, y, marker="<", s=28, color=color, zorder=1)


def _below(bound, value) -> bool:
    return bound is not None and bound < value


def _pareto_legend(points: list[dict], dominated: list[dict], infeasible: list[dict],
                   shared: Mapping[str, Any]) -> list:
    """Handles for what is drawn: ``points`` are the feasible ones."""
    handles = []
    if points:
        handles.append(Line2D([], [], color=_FRONT_COLOR, marker="o",
                              label="non-dominated (step front)"))
    if any(p["status"] == "optimal" for p in points):
        handles.append(Line2D([], [], ls="", marker="o", color=_FRONT_COLOR,
                              label="proven optimal"))
    if any(p["status"] != "optimal" for p in points):
        handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="white",
                              color=_FRONT_COLOR, label="feasible, not proven"))
    if dominated:
        handles.append(Line2D([], [], ls="", marker="o", color=_DOMINATED_COLOR, label="dominated"))
    for key, marker, name in (("energy_bound_pj", "v", "energy"),
                              ("latency_bound_cycles", "<", "latency")):
        if shared[key] is not None:
            handles.append(Line2D([], [], color=_BOUND_COLOR, ls=":", label=f"certified {name} "
                                  f"lower bound\n(the same for every point)"))
        elif any(p[key] is not None for p in points):
            handles.append(Line2D([], [], color=_BOUND_COLOR, ls=":", marker=marker, markersize=5,
                                  label=f"certified {name} lower bound"))
    if infeasible:
        handles.append(Line2D([], [], ls="", marker="x", color=_CAPACITY_COLOR, markeredgewidth=1.5,
                              label="infeasible (evaluator rejects)"))
    return handles


# ===================================================================== files
def _check_output(path: str | Path | None) -> Path | None:
    """Refuse an output path that cannot be written before any drawing is done."""
    if path is None:
        return None
    path = Path(path)
    suffix = path.suffix.lower().lstrip(".")
    supported = FigureCanvasAgg.get_supported_filetypes()
    if suffix not in supported:
        choices = ", ".join("." + s for s in sorted(supported))
        raise MonetError(f"cannot write a {suffix or 'suffix-less'} figure", file=str(path),
                         field="output path", fix=f"end the path in one of {choices}")
    if not path.parent.is_dir():
        raise MonetError(f"directory {str(path.parent)!r} does not exist", file=str(path),
                         field="output path", fix="create the directory, or write elsewhere")
    return path


def _save(fig: Figure, path: Path) -> None:
    try:
        fig.savefig(path)
    except OSError as err:
        raise MonetError(f"cannot write the figure ({err.strerror or err})", file=str(path),
                         field="output path", fix="write into a writable directory") from None
