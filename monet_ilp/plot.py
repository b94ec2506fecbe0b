"""Plots of verified results: the Gantt chart of a schedule and the Pareto front of a sweep.

This module sits after the evaluator in the pipeline: :func:`gantt` draws what
:func:`~monet_ilp.evaluate.evaluate` rebuilt from a schedule (runs, transfers, memory
profiles), and :func:`pareto` draws the points of a latency/energy sweep.  Figures are
made on matplotlib's Agg canvas without pyplot, so no global backend is set and no
window opens.

Pareto front file (``monet-ilp pareto`` writes it, ``monet-ilp plot pareto`` reads it)::

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
          "schedule": "front/p0.json"       # str or null: where the schedule was saved
        }
      ]
    }

Extra keys are allowed anywhere and ignored.  Points are verified schedules; a point
whose sweep step found no schedule may give ``null`` for both ``latency_cycles`` and
``energy_pj`` and is not drawn.  A bound above its point's value is an error.  Points
with status ``"optimal"`` are drawn filled, the others hollow; dominated points are
grey.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence as Seq, TypeVar

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MultipleLocator

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph.ir import read_json
from monet_ilp.instance import Instance
from monet_ilp.schedule import Schedule, Sequence, load_schedule

__all__ = ["OP_COLORS", "TRANSFER_COLORS", "gantt", "non_dominated", "pareto", "read_front",
           "transfer_direction"]

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

P = TypeVar("P")


# ===================================================================== gantt
def gantt(instance: Instance | str | Path, schedule: Schedule | Sequence | str | Path,
          path: str | Path | None = None, title: str | None = None) -> Figure:
    """Draw a schedule: one lane per core and per link, then each memory's occupancy.

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
        recomputations hatched) and one per link (transfers coloured by direction),
        labelled by their ids.  Below it, one axes per memory (gid ``"memory:<id>"``):
        the evaluator's occupancy profile as a step plot and the capacity as a dashed
        line (gid ``"capacity"``); the time axis is in cycles.

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
        schedule = load_schedule(schedule)
    metrics = evaluate(instance, schedule)
    timed = metrics.schedule
    makespan = max(metrics.latency_cycles, 1)

    lanes = [c.id for c in instance.cores] + [l.id for l in instance.links]
    # Runs and transfers on names the instance lacks still get a lane (the evaluator
    # reports them as unknown_name), so that nothing in the schedule goes undrawn.
    for name in dict.fromkeys([r.core for r in timed.ops] + [t.link for t in timed.transfers]):
        if name not in lanes:
            lanes.append(name)
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
        _draw_memory(mem_ax, instance.memory(memory), metrics.profile.get(memory, ()),
                     metrics.peak_bytes.get(memory, 0), makespan)
    axes[-1].set_xlabel("time (cycles)")
    axes[-1].xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))

    if title is None:
        n = sum(metrics.violation_counts.values())
        verdict = "feasible" if metrics.feasible else f"INFEASIBLE, {n} violation{'s' * (n != 1)}"
        title = (f"{instance.name}: latency {metrics.latency_cycles:,} cycles, energy "
                 f"{metrics.energy.total_pj:,} pJ, {metrics.recomputations} recomputations, "
                 f"{metrics.transfers} transfers ({verdict})")
    fig.suptitle(title, fontsize=10)
    if path is not None:
        _save(fig, path)
    return fig


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
    ax.step(times, held, where="post", color="#4C72B0", lw=1.0, label=f"held (peak {_human(peak)})")
    capacity = memory.capacity_bytes
    off_scale = memory.kind != "sram" and capacity > _OFF_SCALE * max(peak, 1)
    if off_scale:
        ax.plot([], [], color=_CAPACITY_COLOR, ls="--", lw=1.0,
                label=f"capacity {_human(capacity)} (off scale)")
        top = max(peak, 1)
    else:
        ax.axhline(capacity, color=_CAPACITY_COLOR, ls="--", lw=1.0, gid="capacity",
                   label=f"capacity {_human(capacity)}")
        top = max(peak, capacity)
    if peak > capacity:
        over = [b > capacity for b in held]
        ax.fill_between(times, held, capacity, where=over, step="post", color=_CAPACITY_COLOR,
                        alpha=0.35, lw=0, label="over capacity")
    ax.set_ylim(0, top * 1.12)
    _binary_ticks(ax, top)
    ax.set_ylabel(memory.id, fontsize=8, rotation=0, ha="right", va="center")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)


def _binary_ticks(ax, top: int) -> None:
    """Y ticks at round multiples of B, KiB, MiB or GiB, labelled in that unit."""
    unit, name = 1, "B"
    for power, unit_name in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if top >= 1024 ** power:
            unit, name = 1024 ** power, unit_name
            break
    span = top / unit
    steps = (s * 10 ** e for e in range(-3, 12) for s in (1, 2, 2.5, 5))
    step = next((s for s in steps if span / s <= 4), span)
    ax.yaxis.set_major_locator(MultipleLocator(step * unit))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y / unit:g} {name}"))


def _human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{n} B"


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
    """Check a Pareto front (a dict or the path of its JSON file) against the module's format.

    Returns
    -------
    dict
        ``{"instance": str, "points": [...]}`` with the points that have a schedule,
        each a dict of the six fields of the format.

    Raises
    ------
    InputFormatError
        Naming the file and the field, for anything not in the format.
    """
    source = None
    if not isinstance(front, Mapping):
        source = str(front)
        front = read_json(front)

    def fail(problem: str, field: str) -> InputFormatError:
        return InputFormatError(problem, file=source, field=field,
                                fix="write the front with `monet-ilp pareto`, or follow the format "
                                    "in the monet_ilp.plot docstring")

    if not isinstance(front, Mapping):
        raise fail("a Pareto front must be a JSON object", "(top level)")
    for key, expected in (("objective_x", "latency"), ("objective_y", "energy")):
        if front.get(key, expected) != expected:
            raise fail(f"only latency/energy fronts can be drawn, got {front.get(key)!r}", key)
    points = front.get("points")
    if not isinstance(points, list):
        raise fail("missing or not a list", "points")
    checked = []
    for k, p in enumerate(points):
        where = f"points[{k}]"
        if not isinstance(p, Mapping):
            raise fail("a point must be an object", where)
        latency, energy = p.get("latency_cycles"), p.get("energy_pj")
        if latency is None and energy is None:
            continue  # a sweep step without a schedule
        values = {}
        for key, value in (("latency_cycles", latency), ("energy_pj", energy)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise fail(f"expected a non-negative integer, got {value!r}", f"{where}.{key}")
            values[key] = value
        for key, of in (("energy_bound_pj", "energy_pj"),
                        ("latency_bound_cycles", "latency_cycles")):
            bound = p.get(key)
            if bound is not None:
                if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                    raise fail(f"expected a number or null, got {bound!r}", f"{where}.{key}")
                if bound > values[of]:
                    raise fail(f"the lower bound {bound} exceeds the point's {of} {values[of]}",
                               f"{where}.{key}")
            values[key] = bound
        status = p.get("status", "")
        schedule = p.get("schedule")
        if not isinstance(status, str):
            raise fail(f"expected a string, got {status!r}", f"{where}.status")
        if schedule is not None and not isinstance(schedule, str):
            raise fail(f"expected a path or null, got {schedule!r}", f"{where}.schedule")
        checked.append({**values, "status": status, "schedule": schedule})
    return {"instance": str(front.get("instance", "")), "points": checked}


def pareto(front: Mapping[str, Any] | str | Path, path: str | Path | None = None) -> Figure:
    """Draw a latency/energy Pareto front.

    Parameters
    ----------
    front
        A front in the format of the module docstring, or the path of its JSON file.
    path
        If given, the figure is saved there; the suffix picks the format.

    Returns
    -------
    matplotlib.figure.Figure
        One axes: latency (cycles) against energy (pJ).  Non-dominated points are
        joined as a step front (filled markers for proven-optimal points, hollow for
        the others); dominated points are grey; a certified energy lower bound below a
        point is a dotted downward bar ending in a ``v`` marker, a latency lower bound a
        dotted leftward bar ending in a ``<`` marker.
    """
    path = _check_output(path)
    data = read_front(front)
    points = data["points"]
    front_points = non_dominated(points)
    on_front = {id(p) for p in front_points}
    dominated = [p for p in points if id(p) not in on_front]

    fig = Figure(figsize=(7.5, 5.0), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.set_gid("pareto")
    if front_points:
        ax.plot([p["latency_cycles"] for p in front_points], [p["energy_pj"] for p in front_points],
                drawstyle="steps-post", color=_FRONT_COLOR, lw=1.2, zorder=2, gid="front")
    for group, color, gid in ((front_points, _FRONT_COLOR, "front_points"),
                              (dominated, _DOMINATED_COLOR, "dominated")):
        for optimal in (True, False):
            chosen = [p for p in group if (p["status"] == "optimal") == optimal]
            if chosen:
                ax.scatter([p["latency_cycles"] for p in chosen], [p["energy_pj"] for p in chosen],
                           s=36, zorder=3, edgecolors=color, linewidths=1.3,
                           facecolors=color if optimal else "white", gid=gid)
        _draw_bounds(ax, group, dominated=group is dominated)
    ax.set_xlabel("latency (cycles)")
    ax.set_ylabel("energy (pJ)")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(True, color="#EEEEEE", lw=0.6)
    ax.set_axisbelow(True)
    if not points:
        ax.text(0.5, 0.5, "no verified points", transform=ax.transAxes, ha="center", va="center",
                color="#777777")
    ax.legend(handles=_pareto_legend(points, dominated), fontsize=8, loc="upper right")
    title = data["instance"] or "Pareto front"
    fig.suptitle(f"{title}: {len(front_points)} non-dominated of {len(points)} points", fontsize=10)
    if path is not None:
        _save(fig, path)
    return fig


def _draw_bounds(ax, group: list[dict], dominated: bool) -> None:
    """Dotted bars from each point down to its energy bound and left to its latency bound."""
    color = _DOMINATED_COLOR if dominated else _BOUND_COLOR
    style = {"colors": color, "lw": 1.1, "ls": ":", "zorder": 1}
    below = [p for p in group if _below(p["energy_bound_pj"], p["energy_pj"])]
    if below:
        x = [p["latency_cycles"] for p in below]
        bound = [p["energy_bound_pj"] for p in below]
        ax.vlines(x, bound, [p["energy_pj"] for p in below], gid="energy_bounds", **style)
        ax.scatter(x, bound, marker="v", s=28, color=color, zorder=1)
    left = [p for p in group if _below(p["latency_bound_cycles"], p["latency_cycles"])]
    if left:
        y = [p["energy_pj"] for p in left]
        bound = [p["latency_bound_cycles"] for p in left]
        ax.hlines(y, bound, [p["latency_cycles"] for p in left], gid="latency_bounds", **style)
        ax.scatter(bound, y, marker="<", s=28, color=color, zorder=1)


def _below(bound, value) -> bool:
    return bound is not None and bound < value


def _pareto_legend(points: list[dict], dominated: list[dict]) -> list:
    handles = [Line2D([], [], color=_FRONT_COLOR, marker="o", label="non-dominated (step front)")]
    if any(p["status"] == "optimal" for p in points):
        handles.append(Line2D([], [], ls="", marker="o", color=_FRONT_COLOR,
                              label="proven optimal"))
    if any(p["status"] != "optimal" for p in points):
        handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="white",
                              color=_FRONT_COLOR, label="feasible, not proven"))
    if dominated:
        handles.append(Line2D([], [], ls="", marker="o", color=_DOMINATED_COLOR, label="dominated"))
    if any(p["energy_bound_pj"] is not None for p in points):
        handles.append(Line2D([], [], color=_BOUND_COLOR, ls=":", marker="v", markersize=5,
                              label="certified energy lower bound"))
    if any(p["latency_bound_cycles"] is not None for p in points):
        handles.append(Line2D([], [], color=_BOUND_COLOR, ls=":", marker="<", markersize=5,
                              label="certified latency lower bound"))
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
