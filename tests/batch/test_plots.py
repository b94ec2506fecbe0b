"""The batch plots (monet_ilp.batch.plots) read well: integer counts, units, legends off the data.

Records are made by hand (the fields ``batch run`` writes that the plots read), so
these tests draw figures only; tests/batch/test_commands.py runs the whole command.
"""

from __future__ import annotations

import pytest

from monet_ilp.batch import plots


def record(backend: str, gap: float, seconds: float, latency: int | None = None, energy: int | None = None,
           objective: str = "latency") -> dict:
    return {"params": {"backend": backend, "objective": objective, "model": "mlp"},
            "status": "optimal" if gap == 0 else "feasible", "feasible": True, "gap": gap,
            "wall_time_s": seconds, "latency_cycles": latency, "energy_pj": energy}


def rendered(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def shown_ticks(axis) -> list[float]:
    lo, hi = sorted(axis.get_view_interval())
    return [t for t in axis.get_majorticklocs() if lo <= t <= hi]


def assert_integer_ticks(axis) -> None:
    ticks = shown_ticks(axis)
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def assert_legend_outside(fig, renderer) -> None:
    (ax,) = fig.axes
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


ALL_OPTIMAL = [record(b, 0.0, 0.1 * k + 0.05) for b in ("cpsat", "milp", "dp") for k in range(4)]


def test_gap_histogram_when_every_gap_is_zero():
    fig = plots.gap_histogram_figure(ALL_OPTIMAL)
    renderer = rendered(fig)
    (ax,) = fig.axes
    assert_integer_ticks(ax.yaxis)
    # One bar at 0, stacked by backend, as tall as the number of solves.
    bars = ax.patches
    assert len(bars) == 3 and {round(b.get_x() + b.get_width() / 2, 9) for b in bars} == {0}
    assert sum(b.get_height() for b in bars) == 12 and max(b.get_y() + b.get_height() for b in bars) == 12
    assert list(shown_ticks(ax.xaxis)) == [0]
    assert [t.get_text() for t in ax.texts if t.get_gid() == "note"] == ["all 12 solves proven optimal (gap 0 %)"]
    assert_legend_outside(fig, renderer)


def test_gap_histogram_with_gaps_counts_whole_records():
    records = [record("cpsat", g, 1.0) for g in (0, 0, 0.01, 0.03, 0.12)] + [record("milp", 0.2, 2.0)]
    fig = plots.gap_histogram_figure(records)
    renderer = rendered(fig)
    (ax,) = fig.axes
    assert_integer_ticks(ax.yaxis)
    assert sum(b.get_height() for b in ax.patches) == 6
    assert not ax.texts
    assert_legend_outside(fig, renderer)


def test_gap_histogram_without_bounds_says_so(tmp_path):
    path = plots.plot_gap_histogram([record("dp", 0, 1.0) | {"gap": None}], tmp_path / "gap.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_time_to_solve_counts_are_integers():
    fig = plots.time_to_solve_figure(ALL_OPTIMAL + [record("cpsat", 0, 3.0) | {"feasible": False}])
    renderer = rendered(fig)
    (ax,) = fig.axes
    assert_integer_ticks(ax.yaxis)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["cpsat (4/5)", "milp (4/4)", "dp (4/4)"]
    assert_legend_outside(fig, renderer)


@pytest.mark.parametrize("latency, energy, units", [
    (6_217_177, 42_854_725_770, ("Mcycles", "mJ")),
    (4_551, 27_260_000, ("kcycles", "µJ")),
])
def test_pareto_front_units_and_short_ticks(latency, energy, units):
    records = [record("cpsat", 0, 1.0, latency + 5 * k * latency // 100, energy - 3 * k * energy // 100, objective)
               for k, objective in enumerate(("latency", "energy", "latency", "energy"))]
    fig = plots.pareto_front_figure(records, "mlp")
    renderer = rendered(fig)
    (ax,) = fig.axes
    assert ax.get_xlabel() == f"latency ({units[0]})" and ax.get_ylabel() == f"energy ({units[1]})"
    for axis in (ax.xaxis, ax.yaxis):
        texts = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
        assert texts and all(len(t) <= 6 for t in texts), texts
    assert_legend_outside(fig, renderer)


def design_record(model: str, phase: str, u: int, lanes: int, side: int, latency: int, energy: int) -> dict:
    spec = {"zoo": model, "params": {}} | ({"phase": phase} if phase != "training" else {})
    hw = {"preset": "edge_tpu", "name": f"edge_tpu_{side}x{side}_U{u}_L{lanes}",
          "params": {"simd_units": u, "lanes": lanes, "n_pe_x": side, "n_pe_y": side, "pe_sram_bytes": 2**20}}
    return {"params": {"backend": "heuristic:memory_aware", "objective": "latency", "model": spec, "hardware": hw},
            "status": "feasible", "feasible": True, "gap": None, "wall_time_s": 0.1, "latency_cycles": latency,
            "energy_pj": energy}


def test_design_space_scatter_per_model_and_phase(tmp_path):
    records = [design_record("resnet18", phase, u, lanes, side, latency=(10**7 if phase == "training" else 2 * 10**6)
                             // (u * lanes), energy=(5 if phase == "training" else 1) * 10**9 + 10**6 * side)
               for phase in ("training", "inference") for u in (16, 64) for lanes in (1, 8) for side in (1, 4)]
    records.append(design_record("mlp", "training", 16, 1, 1, 100, 100))  # one point: no design space
    groups = plots.design_space_records(records)
    assert list(groups) == ["resnet18"] and len(groups["resnet18"]) == 16
    fig = plots.design_space_figure(groups["resnet18"], "resnet18")
    rendered(fig)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["training (8 configurations)", "inference (8 configurations)"]
    assert all(ax.get_xscale() == "log" for ax in panels)
    # The fastest, cheapest point (U64 L8 on one PE) is named as Pareto-optimal in each panel.
    assert all(any(t.get_text() == "1x1_U64_L8" for t in ax.texts) for ax in panels)
    assert any("peak compute" in ax.get_ylabel() for ax in fig.axes)  # the colour bar
    written = plots.plot_results(records, tmp_path)
    assert tmp_path / "design_space_resnet18.png" in written
