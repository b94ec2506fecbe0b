"""Gantt charts and Pareto fronts (monet_ilp.plot) and `monet-ilp plot`, on real files."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from dataclasses import replace

import pytest
from matplotlib.colors import to_rgba

from monet_ilp import plot
from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.instance import make_instance
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
    assert lane_labels(fig) == [c.id for c in inst.cores] + [l.id for l in inst.links]
    for core in inst.cores:
        assert capacity_of_panel(fig, core.memory) == inst.memory(core.memory).capacity_bytes
    assert axes_by_gid(fig, "memory:dram")  # the shared DRAM has a panel of its own
    # Every run is drawn, in its core's lane.
    gantt_ax = axes_by_gid(fig, "gantt")
    drawn = [b for c in gantt_ax.collections for b in bars(c) if b[2] == 0]
    assert len(drawn) == sum(1 for r in schedule.ops if r.core == inst.cores[0].id)
    assert fig.get_suptitle().startswith(f"{inst.name}: latency")


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
    assert lane_labels(fig) == [inst.cores[0].id] + [l.id for l in inst.links]
    link_lane = 1
    colors = {tuple(to_rgba(c)) for coll in axes_by_gid(fig, "gantt").collections
              for c, b in zip(coll.get_facecolors(), bars(coll)) if b[2] == link_lane}
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
    crafted = Schedule(tuple([late, *ops]), transfers, schedule.frees, schedule.pinned)
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
    with pytest.raises(MonetError, match="one core"):
        plot.gantt(p3[0], sequence)
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
                          text=True, timeout=120)


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
    from monet_ilp.cli import main

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
