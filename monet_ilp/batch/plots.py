"""Plots of a results directory, one function per plot, drawn with matplotlib's Agg canvas.

Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot, so
no global backend is switched; :func:`monet_ilp.plot.new_figure`), and written as PNG.  Only verified schedules are
plotted (README, "Statuses").  Each ``plot_*`` function writes its file and
returns the path; the matching ``*_figure`` function builds the figure without
writing it.  Counts have integer ticks, latencies and energies are in the unit
:func:`monet_ilp.plot.pick_unit` picks from the data, and legends sit outside the
axes so that they hide nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.ticker import MaxNLocator

from monet_ilp.batch.job import canonical_json
from monet_ilp.batch.summary import is_solved, time_of
from monet_ilp.plot import new_figure, unit_axis
from monet_ilp.results import non_dominated

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

__all__ = ["design_space_figure", "design_space_records", "gap_histogram_figure", "instance_group",
           "pareto_front", "pareto_front_figure", "plan_scaling_figure", "plot_design_space", "plot_gap_histogram",
           "plot_pareto_front", "plot_plan_scaling", "plot_results", "plot_time_to_solve", "time_to_solve_figure"]

#: The hardware parameters of a design-space point whose product is its peak compute
#: (MACs per cycle: SIMD units x lanes per PE, times the PEs).
_COMPUTE_PARAMS = ("simd_units", "lanes", "n_pe_x", "n_pe_y")

#: Job parameters that do not change the instance (they pick the solver or the objective).
_SOLVER_PARAMS = ("backend", "label", "options", "objective", "alpha", "runtime_limit_cycles", "seed",
                  "time_limit", "workers", "plugins")


def _figure(width: float = 8.0, height: float = 4.2) -> Figure:
    return new_figure(width, height)


def _legend_outside(ax: Axes) -> None:
    """The legend to the right of the axes (constrained layout makes room), never over data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False,
                  fontsize="small")


def _integer_counts(axis: Axis) -> None:
    """Ticks at whole numbers only: the axis counts records."""
    axis.set_major_locator(MaxNLocator(integer=True))


def _label(record: Mapping[str, Any]) -> str:
    params = record.get("params", {})
    return str(params.get("label") or params.get("backend", "?"))


def _by_label(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        out.setdefault(_label(record), []).append(record)
    return out


def time_to_solve_figure(records: Iterable[Mapping[str, Any]]) -> Figure:
    """Instances solved (verified schedule) within t seconds, against t, one curve per backend."""
    fig = _figure()
    ax = fig.add_subplot()
    for label, group in _by_label(records).items():
        times = sorted(t for r in group if is_solved(r) and (t := time_of(r)) is not None)
        if not times:
            ax.plot([], [], label=f"{label} (0/{len(group)})")
            continue
        xs = [max(t, 1e-3) for t in times]  # a log axis has no 0
        ax.step([xs[0]] + xs, [0] + list(range(1, len(xs) + 1)), where="post",
                label=f"{label} ({len(times)}/{len(group)})")
    _integer_counts(ax.yaxis)
    ax.set_xscale("log")
    ax.set_xlabel("time (s, log scale)")
    ax.set_ylabel("instances solved (verified)")
    ax.set_title("time to solve")
    ax.grid(True, which="both", alpha=0.3)
    _legend_outside(ax)
    return fig


def plot_time_to_solve(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write :func:`time_to_solve_figure` to ``path`` (PNG); return the path."""
    return _save(time_to_solve_figure(records), path)


def gap_histogram_figure(records: Iterable[Mapping[str, Any]], bins: int = 20) -> Figure:
    """Histogram of the relative gap (in %) of the solved records that have a bound, per backend.

    When every gap is 0 the histogram has one bin: a single bar at 0 (stacked by
    backend) and a note that every solve was proven optimal.
    """
    fig = _figure()
    ax = fig.add_subplot()
    data = {label: [100.0 * float(r["gap"]) for r in group if is_solved(r) and r.get("gap") is not None]
            for label, group in _by_label(records).items()}
    data = {k: v for k, v in data.items() if v}
    total = sum(len(v) for v in data.values())
    top = max((max(v) for v in data.values()), default=0.0)
    if not data:
        ax.text(0.5, 0.5, "no solved record with a bound", ha="center", va="center", transform=ax.transAxes)
    elif top <= 0:
        bottom = 0
        for label, gaps in data.items():
            ax.bar([0], [len(gaps)], bottom=[bottom], width=0.6, label=f"{label} ({len(gaps)})")
            bottom += len(gaps)
        ax.set_xlim(-1.5, 1.5)
        ax.set_xticks([0])
        ax.set_ylim(0, total * 1.25)
        ax.text(0.5, 0.95, f"all {total} solve{'s' * (total != 1)} proven optimal (gap 0 %)",
                ha="center", va="top", transform=ax.transAxes, gid="note")
    else:
        edges = [top * i / bins for i in range(bins + 1)]
        ax.hist(list(data.values()), bins=edges, label=[f"{k} ({len(v)})" for k, v in data.items()])
    _integer_counts(ax.yaxis)
    ax.set_xlabel("gap (%)")
    ax.set_ylabel("records")
    ax.set_title("gap between objective and bound")
    _legend_outside(ax)
    return fig


def plot_gap_histogram(records: Iterable[Mapping[str, Any]], path: str | Path, bins: int = 20) -> Path:
    """Write :func:`gap_histogram_figure` to ``path`` (PNG); return the path."""
    return _save(gap_histogram_figure(records, bins), path)


def instance_group(record: Mapping[str, Any]) -> str:
    """A key shared by the records of one instance, whatever the backend and the objective."""
    params = {k: v for k, v in record.get("params", {}).items() if k not in _SOLVER_PARAMS}
    return hashlib.sha256(canonical_json(params).encode()).hexdigest()[:12]


def pareto_front(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The non-dominated points (both coordinates minimised), by increasing first coordinate."""
    return non_dominated(set(points), keep_equal=False)


def pareto_front_figure(records: Iterable[Mapping[str, Any]], title: str = "") -> Figure:
    """Latency against energy of the verified schedules of one instance, and their front.

    Both axes are in the unit that keeps tick labels short (named in the labels).
    """
    fig = _figure()
    ax = fig.add_subplot()
    records = [r for r in records if is_solved(r) and r.get("latency_cycles") is not None
               and r.get("energy_pj") is not None]
    markers = {"latency": "o", "energy": "s", "weighted": "^", "compute": "D", None: "x"}
    for label, group in _by_label(records).items():
        for objective in sorted({r["params"].get("objective") or "" for r in group}):
            pts = [(r["latency_cycles"], r["energy_pj"]) for r in group
                   if (r["params"].get("objective") or "") == objective]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=markers.get(objective or None, "x"),
                       label=f"{label}, {objective or 'default'}", alpha=0.8)
    front = pareto_front((r["latency_cycles"], r["energy_pj"]) for r in records)
    if front:
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="black", linewidth=1,
                label="front")
    unit_axis(ax.xaxis, max((r["latency_cycles"] for r in records), default=0), "cycles", "latency", nbins=6)
    unit_axis(ax.yaxis, max((r["energy_pj"] for r in records), default=0), "pJ", "energy", nbins=6)
    ax.set_title(title or "Pareto front", fontsize="medium")
    ax.grid(True, alpha=0.3)
    _legend_outside(ax)
    return fig


def plot_pareto_front(records: Iterable[Mapping[str, Any]], path: str | Path, title: str = "") -> Path:
    """Write :func:`pareto_front_figure` to ``path`` (PNG); return the path."""
    return _save(pareto_front_figure(records, title), path)


def model_name(record: Mapping[str, Any]) -> str:
    """The model of a record: its zoo name, or its kind and file."""
    model = record["params"]["model"]
    kind = next((k for k in model if k not in ("params", "sha256", "phase")), "model")
    value = model[kind]
    return value if isinstance(value, str) else kind


def phase_of(record: Mapping[str, Any]) -> str:
    phase: str = record["params"]["model"].get("phase", "training")
    return phase


def peak_macs_per_cycle(record: Mapping[str, Any]) -> int | None:
    """SIMD units x lanes x PEs of a record's preset hardware, or None without them."""
    hardware = record["params"].get("hardware") or {}
    params = hardware.get("params") or {}
    if not all(k in params for k in _COMPUTE_PARAMS):
        return None
    total = 1
    for k in _COMPUTE_PARAMS:
        total *= int(params[k])
    return total


def design_space_records(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Per model, the verified records on several points of one design space (a preset
    whose compute parameters vary), the best schedule per hardware point and phase."""
    best: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for r in records:
        if not is_solved(r) or r.get("latency_cycles") is None or r.get("energy_pj") is None:
            continue
        if peak_macs_per_cycle(r) is None:
            continue
        key = (model_name(r), phase_of(r), canonical_json(r["params"]["hardware"]))
        if key not in best or (r["latency_cycles"], r["energy_pj"]) < (best[key]["latency_cycles"],
                                                                        best[key]["energy_pj"]):
            best[key] = r
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for (model, _, _), r in best.items():
        by_model.setdefault(model, []).append(r)
    return {m: rs for m, rs in by_model.items()
            if len({canonical_json(r["params"]["hardware"]) for r in rs}) > 1}


def design_space_figure(records: Iterable[Mapping[str, Any]], title: str = "") -> Figure:
    """Energy against latency of one model on every hardware point, one panel per phase
    (training, inference), coloured by peak compute (MACs per cycle): MONET's design-space
    figure.  Latency is on a log axis; energy too when it spans more than a factor 3.
    The Pareto-optimal points are ringed and named (their hardware)."""
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import NullFormatter

    records = list(records)
    phases = [p for p in ("training", "inference") if any(phase_of(r) == p for r in records)]
    fig = _figure(5.0 * len(phases) + 1.5, 4.4)
    compute = {id(r): peak_macs_per_cycle(r) or 1 for r in records}
    lo, hi = min(compute.values()), max(compute.values())
    norm = LogNorm(vmin=lo, vmax=hi if hi > lo else lo + 1)
    axes = fig.subplots(1, len(phases), squeeze=False)[0]
    scatter = None
    for ax, phase in zip(axes, phases, strict=True):
        group = [r for r in records if phase_of(r) == phase]
        scatter = ax.scatter([r["latency_cycles"] for r in group], [r["energy_pj"] for r in group],
                             c=[compute[id(r)] for r in group], norm=norm, cmap="viridis",
                             s=22, alpha=0.85, edgecolors="none")
        front = non_dominated(group, key=lambda r: (r["latency_cycles"], r["energy_pj"]), keep_equal=False)
        ax.scatter([r["latency_cycles"] for r in front], [r["energy_pj"] for r in front], s=70,
                   facecolors="none", edgecolors="black", linewidths=0.9, label="Pareto-optimal")
        for r in front:
            ax.annotate(str((r["params"]["hardware"] or {}).get("name", "")).removeprefix("edge_tpu_"),
                        (r["latency_cycles"], r["energy_pj"]), textcoords="offset points", xytext=(5, 4),
                        fontsize="x-small")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        energies = [r["energy_pj"] for r in group]
        if max(energies) > 3 * min(energies):
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel("energy (pJ)")
        else:
            unit_axis(ax.yaxis, max(energies), "pJ", "energy", nbins=6)
        ax.set_xlabel("latency (cycles)")
        ax.set_title(f"{phase} ({len(group)} configurations)", fontsize="medium")
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize="small", loc="upper right")
    if scatter is not None:
        fig.colorbar(scatter, ax=list(axes), label="peak compute (MACs per cycle: U x L x PEs)")
    fig.suptitle(title or "design space", fontsize="medium")
    return fig


def plot_design_space(records: Iterable[Mapping[str, Any]], path: str | Path, title: str = "") -> Path:
    """Write :func:`design_space_figure` to ``path`` (PNG); return the path."""
    return _save(design_space_figure(records, title), path)


def plot_results(records: Iterable[Mapping[str, Any]], out_dir: str | Path, *,
                 max_pareto: int = 50) -> list[Path]:
    """Every plot of a set of records into ``out_dir``: ``time_to_solve.png``, ``gap_histogram.png``,
    ``pareto/<instance>.png`` for each instance solved under several objectives (at most
    ``max_pareto`` of them), ``design_space_<model>.png`` for each model run on several
    points of a design space (:func:`design_space_figure`), and ``plan_scaling.png`` for
    the P4 plans (:func:`plan_scaling_figure`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = list(records)
    written = [plot_time_to_solve(records, out_dir / "time_to_solve.png"),
               plot_gap_histogram(records, out_dir / "gap_histogram.png")]
    if plan_records(records):
        written.append(plot_plan_scaling(records, out_dir / "plan_scaling.png"))
    for model, group in design_space_records(records).items():
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
        written.append(plot_design_space(group, out_dir / f"design_space_{safe}.png",
                                         f"{model}: energy against latency per hardware point"))
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(instance_group(record), []).append(record)
    count = 0
    for group_key, group in groups.items():
        verified = [r for r in group if is_solved(r) and r.get("latency_cycles") is not None
                    and r.get("energy_pj") is not None]
        if len({r["params"].get("objective") for r in verified}) < 2:
            continue
        if count >= max_pareto:
            break
        first = verified[0]
        name = first.get("instance") or group_key
        budget = first["params"].get("budget")
        title = name + ("" if budget is None else f", budget {budget}")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        written.append(plot_pareto_front(group, out_dir / "pareto" / f"{safe}_{group_key}.png", title))
        count += 1
    return written


def plan_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The verified P4 plans among the records (``plans`` jobs of a manifest)."""
    return [r for r in records if "p4" in r.get("params", {}) and is_solved(r)
            and (r.get("stats") or {}).get("time_per_iteration_s") is not None]


def plan_scaling_figure(records: Iterable[Mapping[str, Any]], title: str = "") -> Figure:
    """P4: time per iteration (and MFU) against the devices of the cluster, one line per model,
    batch and objective, each point with its certified bound."""
    fig = _figure(9.0, 4.2)
    ax, mfu_ax = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    lines: dict[str, list[Mapping[str, Any]]] = {}
    for r in plan_records(records):
        spec = r["params"]["p4"]
        model = spec["model"]
        name = "-".join(str(model[k]) for k in ("family", "preset") if k in model) or str(model.get("name"))
        lines.setdefault(f"{name} B={spec['global_batch']} {spec['objective']}", []).append(r)
    for label, group in sorted(lines.items()):
        group = sorted(group, key=lambda r: r["stats"]["devices"])
        devices = [r["stats"]["devices"] for r in group]
        ax.plot(devices, [r["stats"]["time_per_iteration_s"] for r in group], marker="o", label=label)
        if all(r["params"]["p4"]["objective"] == "time" and r.get("bound") is not None for r in group):
            ax.plot(devices, [r["bound"] for r in group], linestyle=":", color=ax.lines[-1].get_color())
        mfu_ax.plot(devices, [100 * r["stats"]["mfu"] for r in group], marker="o")
    for a in (ax, mfu_ax):
        a.set_xscale("log", base=2)
        a.set_xlabel("devices")
        a.grid(True, alpha=0.3)
    ax.set_yscale("log")
    ax.set_ylabel("time per iteration (s); dotted: bound")
    mfu_ax.set_ylabel("MFU (%)")
    ax.set_title(title or "plans against cluster size", fontsize="medium")
    _legend_outside(mfu_ax)
    if ax.get_legend_handles_labels()[0]:
        mfu_ax.legend(*ax.get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.02, 1.0),
                      frameon=False, fontsize="small")
    return fig


def plot_plan_scaling(records: Iterable[Mapping[str, Any]], path: str | Path, title: str = "") -> Path:
    """Write :func:`plan_scaling_figure` to ``path`` (PNG); return the path."""
    return _save(plan_scaling_figure(records, title), path)


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
