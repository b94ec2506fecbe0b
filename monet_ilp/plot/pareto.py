"""The latency/energy Pareto front of a ``monet-ilp pareto`` sweep or of a GA result.

Both file formats are in the :mod:`monet_ilp.plot` docstring; :func:`read_front`
checks them, :func:`pareto` draws them.  Dominance is
:func:`monet_ilp.results.non_dominated`, the one rule of the package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from matplotlib.lines import Line2D

from monet_ilp.errors import InputFormatError
from monet_ilp.graph.ir import read_json
from monet_ilp.plot.axes import unit_axis
from monet_ilp.plot.figures import CAPACITY_COLOR, check_output, new_figure, save
from monet_ilp.results import GA_FORMAT, non_dominated

if TYPE_CHECKING:
    from pathlib import Path

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["pareto", "read_front"]

_DOMINATED_COLOR = "#B0B0B0"
_FRONT_COLOR = "#1F77B4"
_BOUND_COLOR = "#2CA02C"
_MAX_ERROR_REPR = 60


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


def _read_point(p: Mapping[str, Any], where: str, ga: bool,
                fail: Callable[[str, str], InputFormatError]) -> dict[str, Any] | None:
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
    path = check_output(path)
    data = read_front(front)
    points = data["points"]
    feasible = [p for p in points if p["feasible"]]
    infeasible = [p for p in points if not p["feasible"]]
    front_points = non_dominated(feasible)
    on_front = {id(p) for p in front_points}
    dominated = [p for p in feasible if id(p) not in on_front]

    fig = new_figure(8.5, 5.0)
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
                   marker="x", s=40, linewidths=1.5, color=CAPACITY_COLOR, zorder=3,
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
        save(fig, path)
    return fig


def _largest(points: list[dict[str, Any]], *keys: str) -> int:
    """The largest value under ``keys`` (which decides an axis's unit); 0 with no point."""
    return max((p[k] for p in points for k in keys if p[k] is not None), default=0)


def _shared_bound(points: list[dict[str, Any]], key: str) -> int | float | None:
    """The bound under ``key`` if two points or more all have that one bound, else ``None``."""
    bounds = {p[key] for p in points}
    return bounds.pop() if len(points) >= 2 and len(bounds) == 1 and None not in bounds else None


def _draw_shared_bounds(ax: Axes, shared: Mapping[str, Any]) -> None:
    """One dotted line per bound every point shares, not one bar per point to the same value."""
    if shared["energy_bound_pj"] is not None:
        ax.axhline(shared["energy_bound_pj"], gid="energy_bound_all", color=_BOUND_COLOR, lw=1.1,
                   ls=":", zorder=1)
    if shared["latency_bound_cycles"] is not None:
        ax.axvline(shared["latency_bound_cycles"], gid="latency_bound_all", color=_BOUND_COLOR,
                   lw=1.1, ls=":", zorder=1)


def _draw_bounds(ax: Axes, group: list[dict[str, Any]], dominated: bool, shared: Mapping[str, Any]) -> None:
    """Dotted bars from each point down to its energy bound and left to its latency bound.

    Bounds in ``shared`` (those of every point) are drawn once by :func:`_draw_shared_bounds`.
    """
    color = _DOMINATED_COLOR if dominated else _BOUND_COLOR
    below = [p for p in group if shared["energy_bound_pj"] is None
             and _below(p["energy_bound_pj"], p["energy_pj"])]
    if below:
        x = [p["latency_cycles"] for p in below]
        bound = [p["energy_bound_pj"] for p in below]
        ax.vlines(x, bound, [p["energy_pj"] for p in below], gid="energy_bounds", colors=color,
                  lw=1.1, ls=":", zorder=1)
        ax.scatter(x, bound, marker="v", s=28, color=color, zorder=1)
    left = [p for p in group if shared["latency_bound_cycles"] is None
            and _below(p["latency_bound_cycles"], p["latency_cycles"])]
    if left:
        y = [p["energy_pj"] for p in left]
        bound = [p["latency_bound_cycles"] for p in left]
        ax.hlines(y, bound, [p["latency_cycles"] for p in left], gid="latency_bounds", colors=color,
                  lw=1.1, ls=":", zorder=1)
        ax.scatter(bound, y, marker="<", s=28, color=color, zorder=1)


def _below(bound: float | None, value: float) -> bool:
    return bound is not None and bound < value


def _pareto_legend(points: list[dict[str, Any]], dominated: list[dict[str, Any]], infeasible: list[dict[str, Any]],
                   shared: Mapping[str, Any]) -> list[Line2D]:
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
        handles.append(Line2D([], [], ls="", marker="x", color=CAPACITY_COLOR, markeredgewidth=1.5,
                              label="infeasible (evaluator rejects)"))
    return handles
