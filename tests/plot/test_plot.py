"""Gantt charts and Pareto fronts (monet_ilp.plot) and `monet-ilp plot`, on real files."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from dataclasses import replace
from itertools import pairwise

import pytest
from matplotlib.colors import to_rgba

from monet_ilp import plot
from monet_ilp.cli import main
from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.ga.nsga2 import run_ga
from monet_ilp.graph import random_layered, zoo
from monet_ilp.graph.fusion import chains, plan_of
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.memory_aware import memory_aware_schedule
from monet_ilp.make import make_instance
from monet_ilp.schedule import Schedule, Sequence, Transfer, save_schedule
from monet_ilp.solve import solve


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def mlp():
    return zoo.build("mlp")


@pytest.fixture(scope="module")
def hardware():
    return preset("edge_tpu", n_pe_x=2, n_pe_y=1)


@pytest.fixture(scope="module")
def p3(mlp, hardware):
    inst = make_instance(mlp, hardware, problem="P3")
    return inst, solve(inst, "heuristic:store_all").schedule


@pytest.fixture(scope="module")
def p1(mlp, hardware):
    inst = make_instance(mlp, hardware, problem="P1", budget=0.95)
    result = solve(inst, "heuristic:sqrt")
    assert isinstance(result.schedule, Sequence) and result.metrics.recomputations > 0
    return inst, result.schedule


@pytest.fixture(scope="module")
def p2(mlp, hardware):
    inst = make_instance(mlp, hardware, problem="P2", budget=0.9)
    result = solve(inst, "cpsat", time_limit=10)
    assert result.schedule is not None and result.metrics.feasible, result.message
    assert result.schedule.transfers, "the P2 test instance should need an offload"
    return inst, result.schedule


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def axes_by_gid(fig, gid):
    found = [ax for ax in fig.axes if ax.get_gid() == gid]
    assert len(found) == 1, [ax.get_gid() for ax in fig.axes]
    return found[0]


def lane_labels(fig) -> list[str]:
    return [t.get_text() for t in axes_by_gid(fig, "gantt").get_yticklabels()]


def bars(collection) -> list[tuple[float, float, float]]:
    """(x start, x end, y centre) of every bar of a broken_barh collection."""
    out = []
    for p in collection.get_paths():
        v = p.vertices
        out.append((v[:, 0].min(), v[:, 0].max(), round((v[:, 1].min() + v[:, 1].max()) / 2, 6)))
    return out


def capacity_of_panel(fig, memory: str) -> float:
    lines = [line for line in axes_by_gid(fig, f"memory:{memory}").get_lines()
             if line.get_gid() == "capacity"]
    assert len(lines) == 1
    y0, y1 = lines[0].get_ydata()
    assert y0 == y1
    return y0


# --------------------------------------------------------------------- gantt
def test_gantt_p3_lanes_capacity_and_png(p3, tmp_path):
    inst, schedule = p3
    out = tmp_path / "g.png"
    fig = plot.gantt(inst, schedule, path=out)
    width, height = png_size(out)
    assert 800 <= width <= 3000 and 400 <= height <= 3000
    busy = {t.link for t in schedule.transfers}
    assert lane_labels(fig) == [c.id for c in inst.cores] + [l.id for l in inst.links if l.id in busy]
    assert "noc_0_1" not in lane_labels(fig)  # store-all moves nothing between the cores
    for core in inst.cores:
        assert capacity_of_panel(fig, core.memory) == inst.memory(core.memory).capacity_bytes
    assert axes_by_gid(fig, "memory:dram")  # the shared DRAM has a panel of its own
    # Every run is drawn, in its core's lane.
    gantt_ax = axes_by_gid(fig, "gantt")
    drawn = [b for c in gantt_ax.collections for b in bars(c) if b[2] == 0]
    assert len(drawn) == sum(1 for r in schedule.ops if r.core == inst.cores[0].id)
    assert fig.get_suptitle().startswith(f"{inst.name}: latency")


def test_gantt_shows_a_fused_stacks_tiles_and_its_staged_weights(tmp_path):
    graph = zoo.gpt2(n_layer=1, d_model=32, n_head=2, seq=16, vocab=64, batch=2)
    inst = make_instance(graph, preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3", sram_budget=2**20,
                         fusion=plan_of([chains(graph)[0]], 4))
    fig = plot.gantt(inst, memory_aware_schedule(inst), path=tmp_path / "fused.png")
    legend = [t.get_text() for t in axes_by_gid(fig, "gantt").get_legend().get_texts()]
    assert "forward tile" in legend and "weight stage" in legend
    drawn = sum(len(bars(c)) for c in axes_by_gid(fig, "gantt").collections)
    assert drawn >= 4 * len(chains(graph)[0])  # every tile is a bar


def test_gantt_p1_sequence_is_drawn_timed_with_recomputations_hatched(p1, tmp_path):
    inst, sequence = p1
    metrics = evaluate(inst, sequence)
    fig = plot.gantt(inst, sequence, path=tmp_path / "p1.png", title="P1 sqrt")
    assert png_size(tmp_path / "p1.png")[0] > 0
    assert lane_labels(fig) == [inst.cores[0].id]
    hatched = [c for c in axes_by_gid(fig, "gantt").collections if c.get_hatch()]
    assert sum(len(c.get_paths()) for c in hatched) == metrics.recomputations
    assert capacity_of_panel(fig, inst.cores[0].memory) == inst.budget_bytes
    assert fig.get_suptitle() == "P1 sqrt"
    # The occupancy step plot ends at the makespan, where the time axis ends.
    memory_ax = axes_by_gid(fig, f"memory:{inst.cores[0].memory}")
    assert max(memory_ax.get_lines()[0].get_xdata()) == metrics.latency_cycles
    assert memory_ax.get_xlim()[1] == metrics.latency_cycles


def test_gantt_p2_transfers_coloured_by_direction(p2, tmp_path):
    inst, schedule = p2
    fig = plot.gantt(inst, schedule, path=tmp_path / "p2.png")
    assert lane_labels(fig) == [inst.cores[0].id] + [l.id for l in inst.links]  # every link is busy
    link_lane = 1
    colors = {tuple(to_rgba(c)) for coll in axes_by_gid(fig, "gantt").collections
              for c, b in zip(coll.get_facecolors(), bars(coll), strict=True) if b[2] == link_lane}
    kinds = {plot.transfer_direction(inst, t.src, t.dst) for t in schedule.transfers}
    assert kinds == {"offload", "prefetch"}
    assert colors == {to_rgba(plot.TRANSFER_COLORS[k]) for k in kinds}
    assert axes_by_gid(fig, "memory:dram")


def test_gantt_multicore_lanes_and_recompute_by_start_time(p3, tmp_path):
    inst, schedule = p3
    # Move every other run to the second core and add a late run of an early op that
    # claims to be instance 0: the plot numbers runs by start time, as the evaluator does.
    ops = [replace(r, core="pe_1") if i % 2 else r for i, r in enumerate(schedule.ops)]
    first = min(schedule.ops, key=lambda r: r.start)
    end = schedule.makespan + first.end - first.start
    late = replace(first, instance=0, start=schedule.makespan, end=end)
    copy = Transfer(start=10, end=20, tensor="input", src="pe_0.sram", dst="pe_1.sram", link="noc_0_1")
    transfers = (*schedule.transfers, copy)
    crafted = Schedule((late, *ops), transfers, schedule.frees, schedule.pinned)
    fig = plot.gantt(inst, crafted)
    gantt_ax = axes_by_gid(fig, "gantt")
    lane = {name: i for i, name in enumerate(lane_labels(fig))}
    plain = [b for c in gantt_ax.collections if not c.get_hatch() for b in bars(c)]
    hatched = [b for c in gantt_ax.collections if c.get_hatch() for b in bars(c)]
    assert sum(1 for b in plain if b[2] == lane["pe_1"]) == len(ops) // 2
    assert hatched == [(late.start, late.end, lane[first.core])]
    noc = [b for b in plain if b[2] == lane["noc_0_1"]]
    assert noc == [(10, 20, lane["noc_0_1"])]
    assert "INFEASIBLE" in fig.get_suptitle()


def test_gantt_large_schedule_uses_few_artists(tmp_path):
    inst = make_instance(random_layered(600, seed=1), None, problem="P1", budget=0.9)
    schedule = solve(inst, "heuristic:store_all").schedule
    fig = plot.gantt(inst, schedule, path=tmp_path / "big.png")
    gantt_ax = axes_by_gid(fig, "gantt")
    assert sum(len(c.get_paths()) for c in gantt_ax.collections) == len(inst.graph.ops) >= 500
    assert len(gantt_ax.collections) <= 2  # one per lane and style, not one per run
    assert len(gantt_ax.texts) < 100  # only labels that fit
    assert png_size(tmp_path / "big.png")[0] > 800


def test_gantt_accepts_paths_and_rejects_a_sequence_on_several_cores(p1, p3, tmp_path):
    inst, sequence = p1
    inst.save(tmp_path / "i.json")
    save_schedule(sequence, tmp_path / "s.json")
    assert lane_labels(plot.gantt(tmp_path / "i.json", tmp_path / "s.json")) == [inst.cores[0].id]
    with pytest.raises(MonetError, match="made for another instance"):
        plot.gantt(p3[0], sequence)
    with pytest.raises(MonetError, match="one core"):  # a hand-made sequence carries no fingerprint
        plot.gantt(p3[0], replace(sequence, meta={}))
    with pytest.raises(MonetError, match="suffix-less|fix: end the path"):
        plot.gantt(inst, sequence, path=tmp_path / "noext")
    with pytest.raises(MonetError, match="does not exist"):
        plot.gantt(inst, sequence, path=tmp_path / "missing" / "g.png")


# ------------------------------------------------------------- non_dominated
def test_non_dominated_pairs():
    points = [(5, 10), (1, 50), (3, 20), (3, 25), (4, 20), (2, 50), (5, 10), (9, 9), (8, 30)]
    assert plot.non_dominated(points) == [(1, 50), (3, 20), (5, 10), (5, 10), (9, 9)]
    assert plot.non_dominated([]) == []
    assert plot.non_dominated([(7, 7)]) == [(7, 7)]


def test_non_dominated_mappings_keeps_the_objects():
    points = [{"latency_cycles": 10, "energy_pj": 5, "tag": "a"},
              {"latency_cycles": 5, "energy_pj": 10, "tag": "b"},
              {"latency_cycles": 10, "energy_pj": 10, "tag": "c"}]
    front = plot.non_dominated(points)
    assert [p["tag"] for p in front] == ["b", "a"]
    assert front[0] is points[1]


# -------------------------------------------------------------------- pareto
def point(latency, energy, bound=None, status="feasible", latency_bound=None):
    return {"latency_cycles": latency, "energy_pj": energy, "energy_bound_pj": bound,
            "latency_bound_cycles": latency_bound, "status": status, "schedule": None}


FRONT = {
    "instance": "mlp_p3", "objective_x": "latency", "objective_y": "energy", "sweep": "eps",
    "points": [point(100, 900, 900, "optimal"), point(150, 700, 600, latency_bound=140),
               point(160, 800, 750), point(220, 500, 500, "optimal"),
               {**point(None, None), "status": "infeasible"}],
}


def test_pareto_front_bounds_and_dominated(tmp_path):
    path = tmp_path / "front.json"
    path.write_text(json.dumps(FRONT))
    fig = plot.pareto(path, path=tmp_path / "pareto.png")
    w, h = png_size(tmp_path / "pareto.png")
    assert 500 <= w <= 2000 and 300 <= h <= 2000
    ax = axes_by_gid(fig, "pareto")
    (front_line,) = [line for line in ax.get_lines() if line.get_gid() == "front"]
    assert list(front_line.get_xdata()) == [100, 150, 220]
    assert list(front_line.get_ydata()) == [900, 700, 500]
    assert front_line.get_drawstyle() == "steps-post"
    dominated = [c for c in ax.collections if c.get_gid() == "dominated"]
    assert [tuple(o) for c in dominated for o in c.get_offsets()] == [(160, 800)]
    assert all(tuple(e) == to_rgba("#B0B0B0") for c in dominated for e in c.get_edgecolors())
    # Energy bounds below their points: 150 -> 600 on the front, 160 -> 750 greyed.
    segments = sorted(tuple(map(tuple, s)) for c in ax.collections if c.get_gid() == "energy_bounds"
                      for s in c.get_segments())
    assert segments == [((150, 600), (150, 700)), ((160, 750), (160, 800))]
    assert any(c.get_gid() == "latency_bounds" for c in ax.collections)
    assert "3 non-dominated of 4 points" in fig.get_suptitle()


def test_pareto_bound_shared_by_every_point_is_one_line():
    # demo.py grades every point against the instance's bounds: one line each, not a bar per point.
    front = {"instance": "x", "points": [point(100, 900, 400, latency_bound=80), point(150, 700, 400, latency_bound=80),
                                         point(160, 800, 400, latency_bound=80)]}
    ax = axes_by_gid(plot.pareto(front), "pareto")
    (energy,) = [line for line in ax.get_lines() if line.get_gid() == "energy_bound_all"]
    (latency,) = [line for line in ax.get_lines() if line.get_gid() == "latency_bound_all"]
    assert list(energy.get_ydata()) == [400, 400] and list(latency.get_xdata()) == [80, 80]
    assert not [c for c in ax.collections if c.get_gid() in ("energy_bounds", "latency_bounds")]
    assert ax.get_ylim()[0] < 400 and ax.get_xlim()[0] < 80  # the bounds are in view
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "certified energy lower bound\n(the same for every point)" in legend


def test_pareto_empty_front_still_draws(tmp_path):
    plot.pareto({"instance": "none", "points": []}, path=tmp_path / "empty.png")
    assert png_size(tmp_path / "empty.png")[0] > 0


@pytest.mark.parametrize("change, field", [
    (lambda f: f.update(points={}), "points"),
    (lambda f: f.update(objective_y="compute"), "objective_y"),
    (lambda f: f["points"][1].update(latency_cycles=1.5), "points[1].latency_cycles"),
    (lambda f: f["points"][0].update(energy_pj=None), "points[0].energy_pj"),
    (lambda f: f["points"][1].update(energy_bound_pj=701), "points[1].energy_bound_pj"),
    (lambda f: f["points"][2].update(latency_bound_cycles=161), "points[2].latency_bound_cycles"),
    (lambda f: f["points"][2].update(status=3), "points[2].status"),
])
def test_read_front_rejects_what_is_not_in_the_format(change, field, tmp_path):
    front = json.loads(json.dumps(FRONT))
    change(front)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(front))
    with pytest.raises(InputFormatError) as err:
        plot.read_front(path)
    assert err.value.field == field and err.value.file == str(path) and err.value.fix


# ----------------------------------------------------------------------- CLI
def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monet_ilp", "plot", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def assert_user_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_cli_gantt_and_pareto(p2, tmp_path):
    inst, schedule = p2
    inst.save(tmp_path / "inst.json")
    save_schedule(schedule, tmp_path / "sched.json")
    (tmp_path / "front.json").write_text(json.dumps(FRONT))
    done = run("gantt", str(tmp_path / "sched.json"), "--instance", str(tmp_path / "inst.json"),
               "-o", str(tmp_path / "gantt.png"))
    assert done.returncode == 0, done.stderr
    assert png_size(tmp_path / "gantt.png")[0] > 800
    done = run("pareto", str(tmp_path / "front.json"), "-o", str(tmp_path / "pareto.svg"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pareto.svg").read_text().lstrip().startswith("<?xml")


def test_cli_missing_file_exits_2(p3, tmp_path):
    p3[0].save(tmp_path / "inst.json")
    assert_user_error(run("gantt", str(tmp_path / "missing.json"), "--instance", str(tmp_path / "inst.json"),
                          "-o", str(tmp_path / "g.png")), "missing.json", "not found")


def test_cli_malformed_input_and_bad_output_exit_2(p3, tmp_path, capsys):
    # In process (same entry point as the installed command) to keep the file fast.
    inst, schedule = p3
    inst.save(tmp_path / "inst.json")
    save_schedule(schedule, tmp_path / "sched.json")
    (tmp_path / "cut.json").write_text('{"format": "monet-ilp/sched')
    (tmp_path / "nolist.json").write_text('{"instance": "x", "points": 3}')
    cases = [
        (["pareto", str(tmp_path / "cut.json"), "-o", str(tmp_path / "p.png")], ["cut.json", "malformed JSON"]),
        (["pareto", str(tmp_path / "nolist.json"), "-o", str(tmp_path / "p.png")], ["nolist.json", "points"]),
        (["gantt", str(tmp_path / "sched.json"), "--instance", str(tmp_path / "inst.json"),
          "-o", str(tmp_path / "g.unknown")], ["g.unknown", "fix:"]),
        (["gantt", str(tmp_path / "cut.json"), "--instance", str(tmp_path / "inst.json"),
          "-o", str(tmp_path / "g.png")], ["cut.json", "malformed JSON"]),
    ]
    for args, fragments in cases:
        with pytest.raises(SystemExit) as exit_:
            main(["plot", *args])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert all(f in lines[0] for f in fragments), lines[0]


# ------------------------------------------------------- reading GA results
def tiny_p3():
    """The small P3 instance of tests/test_ga.py: a 2-layer MLP on two cores, 9 KiB of SRAM each."""
    graph = zoo.mlp(depth=2, width=64, batch=8, in_features=64)
    return make_instance(graph, preset("edge_tpu", n_pe_x=2, n_pe_y=1), problem="P3", sram_budget=9 * 1024)


@pytest.fixture(scope="module")
def ga_result():
    result = run_ga(tiny_p3(), seed=1, generations=3, population=8)
    assert result["points"] and all(p["feasible"] for p in result["points"])
    return result


def test_cli_plots_a_ga_result(ga_result, tmp_path, capsys):
    (tmp_path / "ga.json").write_text(json.dumps(ga_result))
    main(["plot", "pareto", str(tmp_path / "ga.json"), "-o", str(tmp_path / "front.png")])
    assert "wrote" in capsys.readouterr().err
    assert png_size(tmp_path / "front.png")[0] > 500
    fig = plot.pareto(tmp_path / "ga.json")
    ax = axes_by_gid(fig, "pareto")
    (front_line,) = [line for line in ax.get_lines() if line.get_gid() == "front"]
    points = sorted((p["latency_cycles"], p["energy_pj"]) for p in ga_result["points"])
    assert list(zip(front_line.get_xdata(), front_line.get_ydata(), strict=True)) == points
    assert not [c for c in ax.collections if c.get_gid() in ("infeasible", "energy_bounds")]
    n = len(points)
    assert fig.get_suptitle() == f"{ga_result['instance']} (GA): {n} non-dominated of {n} points"


def test_infeasible_ga_points_are_crosses_off_the_front(ga_result):
    result = json.loads(json.dumps(ga_result))
    first = result["points"][0]
    # An infeasible point that would dominate everything if it counted.
    result["points"].append({**first, "feasible": False, "latency_cycles": first["latency_cycles"] // 2,
                             "energy_pj": first["energy_pj"] // 2})
    ax = axes_by_gid(plot.pareto(result), "pareto")
    (front_line,) = [line for line in ax.get_lines() if line.get_gid() == "front"]
    assert list(front_line.get_xdata()) == sorted(p["latency_cycles"] for p in ga_result["points"])
    (crosses,) = [c for c in ax.collections if c.get_gid() == "infeasible"]
    assert [tuple(o) for o in crosses.get_offsets()] == [(first["latency_cycles"] // 2, first["energy_pj"] // 2)]
    assert "infeasible" in " ".join(t.get_text() for t in ax.get_legend().get_texts())

    # A GA run without a feasible individual keeps only its least-violating one.
    result["points"] = [{**first, "feasible": False}]
    fig = plot.pareto(result)
    ax = axes_by_gid(fig, "pareto")
    assert not [line for line in ax.get_lines() if line.get_gid() == "front"]
    assert fig.get_suptitle().endswith("(GA): no feasible point, 1 infeasible")
    assert next(t.get_text() for t in ax.texts if t.get_gid() == "note").startswith("no feasible point")


def test_read_front_of_a_ga_result(ga_result):
    data = plot.read_front(ga_result)
    assert data["source"] == "ga" and data["instance"] == ga_result["instance"]
    assert [(p["latency_cycles"], p["energy_pj"], p["feasible"], p["status"]) for p in data["points"]] == [
        (p["latency_cycles"], p["energy_pj"], True, "feasible") for p in ga_result["points"]]
    assert all(p["schedule"] is None and p["energy_bound_pj"] is None for p in data["points"])
    assert plot.read_front(FRONT)["source"] == "pareto"


def test_errors_never_echo_a_whole_value(ga_result, tmp_path, capsys):
    # The first-hour mistake: a GA point's inline schedule in a file without the GA format.
    front = {"instance": "x", "points": [{**ga_result["points"][0]}]}
    (tmp_path / "front.json").write_text(json.dumps(front))
    ga = json.loads(json.dumps(ga_result))
    ga["points"][0]["latency_cycles"] = "9" * 500
    (tmp_path / "ga.json").write_text(json.dumps(ga))
    (tmp_path / "sched.json").write_text(json.dumps(ga_result["points"][0]["schedule"]))
    cases = [("front.json", "points[0].schedule", "an object ("),
             ("ga.json", "points[0].latency_cycles", "'" + "9" * 56 + "..."),
             ("sched.json", "format", "'monet-ilp/schedule'")]
    for name, field, shown in cases:
        with pytest.raises(SystemExit) as exit_:
            main(["plot", "pareto", str(tmp_path / name), "-o", str(tmp_path / "p.png")])
        assert exit_.value.code == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), lines
        assert name in lines[0] and field in lines[0] and shown in lines[0] and "fix:" in lines[0]
        assert len(lines[0].replace(str(tmp_path), "")) < 250, lines[0]
        assert "9" * 61 not in lines[0] and "F:fc" not in lines[0]


# ---------------------------------------------------- readable figures, measured
def rendered(fig):
    """Draw the figure on its Agg canvas; return the renderer for bounding boxes."""
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def tick_labels(axis):
    """The tick labels drawn on an axis: inside its view, visible, not empty."""
    lo, hi = sorted(axis.get_view_interval())
    span = hi - lo
    return [t.label1 for t in axis.get_major_ticks()
            if lo - 1e-9 * span <= t.get_loc() <= hi + 1e-9 * span
            and t.label1.get_visible() and t.label1.get_text()]


def assert_readable(axis, renderer, unit: str, longest: int = 6) -> None:
    """The unit is named in the axis label; tick labels are short and do not overlap."""
    assert f"({unit})" in axis.get_label().get_text(), axis.get_label().get_text()
    labels = tick_labels(axis)
    assert len(labels) >= 2
    assert all(len(t.get_text()) <= longest for t in labels), [t.get_text() for t in labels]
    boxes = [t.get_window_extent(renderer) for t in labels]
    horizontal = axis.axis_name == "x"
    spans = sorted((b.x0, b.x1) if horizontal else (b.y0, b.y1) for b in boxes)
    assert all(a[1] <= b[0] for a, b in pairwise(spans)), [t.get_text() for t in labels]


def data_points_px(ax):
    """Every scatter point of the axes, in display coordinates."""
    return [tuple(xy) for c in ax.collections if len(c.get_offsets())
            for xy in ax.transData.transform(c.get_offsets())]


def scaled_front(latency_scale: int, energy_scale: int) -> dict:
    front = json.loads(json.dumps(FRONT))
    for p in front["points"]:
        for key, scale in (("latency_cycles", latency_scale), ("energy_pj", energy_scale),
                           ("energy_bound_pj", energy_scale), ("latency_bound_cycles", latency_scale)):
            if p[key] is not None:
                p[key] *= scale
    return front


@pytest.mark.parametrize("latency_scale, energy_scale, units", [
    (1, 1, ("cycles", "pJ")),
    (41_113, 47_000_001, ("Mcycles", "mJ")),  # ResNet-18 on edge_tpu: ~6 Mcycles, ~42 mJ
    (10**7 + 7, 10**4 + 3, ("Gcycles", "µJ")),
])
def test_pareto_axes_units_ticks_and_legend(latency_scale, energy_scale, units):
    fig = plot.pareto(scaled_front(latency_scale, energy_scale))
    renderer = rendered(fig)
    ax = axes_by_gid(fig, "pareto")
    assert_readable(ax.xaxis, renderer, units[0])
    assert_readable(ax.yaxis, renderer, units[1])
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.x0 >= ax.get_window_extent(renderer).x1  # outside the axes, to the right
    points = data_points_px(ax)
    assert len(points) >= 4 and not any(legend.contains(x, y) for x, y in points)


def test_pick_unit_and_quantity():
    assert plot.pick_unit(0, "cycles") == (1, "cycles")
    assert plot.pick_unit(999, "cycles") == (1, "cycles")
    assert plot.pick_unit(1000, "cycles") == (1000, "kcycles")
    assert plot.pick_unit(42_854_725_770, "pJ") == (10**9, "mJ")
    assert plot.pick_unit(3 * 2**20, "B") == (2**20, "MiB")
    assert plot.quantity(6_217_177, "cycles") == "6.217 Mcycles"
    assert plot.quantity(27_260_000, "pJ") == "27.26 µJ"
    assert plot.quantity(512, "B") == "512 B"


def test_gantt_time_axis_memory_panels_and_lanes(p2):
    inst, schedule = p2
    fig = plot.gantt(inst, schedule)
    renderer = rendered(fig)
    makespan = evaluate(inst, schedule).latency_cycles
    time_unit = plot.pick_unit(makespan, "cycles")[1]
    assert time_unit != "cycles"
    bottom = fig.axes[-1]
    assert_readable(bottom.xaxis, renderer, time_unit)
    assert f"{makespan / plot.pick_unit(makespan, 'cycles')[0]:.4g} {time_unit}" in fig.get_suptitle()
    for memory in inst.memories:
        ax = axes_by_gid(fig, f"memory:{memory.id}")
        unit = ax.get_ylabel().split("(")[-1].rstrip(")")
        assert unit in ("B", "KiB", "MiB", "GiB"), ax.get_ylabel()
        assert_readable(ax.yaxis, renderer, unit, longest=4)
    # Lane labels are one per lane, stacked without overlap.
    lanes = sorted((b.y0, b.y1) for b in (t.get_window_extent(renderer) for t in tick_labels(
        axes_by_gid(fig, "gantt").yaxis)))
    assert len(lanes) == len(lane_labels(fig)) and all(a[1] <= b[0] for a, b in pairwise(lanes))


def test_gantt_explains_memories_that_hold_nothing(p3):
    inst, schedule = p3
    notes = lambda fig, memory: [t.get_text() for t in axes_by_gid(fig, f"memory:{memory}").texts
                                 if t.get_gid() == "empty_note"]
    # Store-all runs everything on pe_0: pe_1 is idle and its SRAM unused.
    fig = plot.gantt(inst, schedule)
    assert notes(fig, "pe_1.sram") == ["unused: no run or transfer touches pe_1.sram"]
    assert notes(fig, "pe_0.sram") == [] and notes(fig, "dram") == []
    assert "pe_1" in lane_labels(fig)  # an idle core keeps its lane
    # Optimizer updates read and write only persistent tensors, in DRAM: a core that
    # runs nothing else holds nothing, and the panel says why instead of a bare "peak 0 B".
    kinds = {op.id: str(op.kind) for op in inst.graph.ops}
    moved = [replace(r, core="pe_1") if kinds[r.op] == "optimizer" else r for r in schedule.ops]
    n = sum(1 for r in moved if r.core == "pe_1")
    fig = plot.gantt(inst, replace(schedule, ops=tuple(moved)))
    assert evaluate(inst, replace(schedule, ops=tuple(moved))).peak_bytes["pe_1.sram"] == 0
    (note,) = notes(fig, "pe_1.sram")
    assert note == (f"holds nothing: the {n} runs here (optimizer) read and write only persistent "
                    f"tensors, streamed from {inst.persistent_home}")
