"""``monet-ilp batch run|summary|plot`` as a user runs them, and the pieces they read with."""

from __future__ import annotations

import csv
import json
import os
import pty
import subprocess
import sys
import textwrap

import pytest

from monet_ilp.batch.plots import pareto_front
from monet_ilp.batch.results import read_records
from monet_ilp.batch.summary import shifted_geomean, summarize_records
from tests.batch.conftest import REPO, cli


def _one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_summary_table_and_csv(mixed_run, tmp_path):
    _, out, _ = mixed_run
    result = cli("batch", "summary", str(out), "--csv", str(tmp_path / "s.csv"))
    assert result.returncode == 0, result.stderr
    for word in ("backend", "solved", "optimal", "mean gap", "geo-mean time", "cpsat-bad", "test:sleep"):
        assert word in result.stdout
    rows = {row["backend"]: row for row in csv.DictReader((tmp_path / "s.csv").read_text().splitlines())}
    assert set(rows) == {"cpsat", "test:raise", "test:crash", "test:sleep", "cpsat-bad"}
    assert rows["cpsat"]["solved"] == "2" and rows["cpsat"]["jobs"] == "2"
    assert rows["test:sleep"]["timeout"] == "2" and rows["test:sleep"]["solved"] == "0"
    assert rows["test:raise"]["error"] == "2" and rows["test:raise"]["mean_gap"] == ""
    assert float(rows["test:sleep"]["geomean_time_s"]) >= 2.0  # a timeout counts its time until the kill


def test_summary_of_tiny_exact(tiny_local):
    _, out, _ = tiny_local
    rows = summarize_records(read_records(out / "results.jsonl").records)
    assert {r.backend for r in rows} == {"cpsat", "milp", "dp"}
    for row in rows:
        assert row.jobs == row.solved == row.optimal == 4 and row.mean_gap == 0.0
        assert row.geomean_time_s is not None and row.geomean_time_s >= 0


def test_plot_writes_the_pngs(mixed_run, tmp_path):
    _, out, _ = mixed_run
    result = cli("batch", "plot", str(out), "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    pngs = [tmp_path / "time_to_solve.png", tmp_path / "gap_histogram.png", *tmp_path.glob("pareto/*.png")]
    assert len(pngs) == 3, result.stdout  # one instance, solved by cpsat for latency and for energy
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert "1 Pareto front" in result.stdout


def test_user_errors_are_one_line(tmp_path):
    _one_line_error(cli("batch", "summary", str(tmp_path)), "no results.jsonl")
    _one_line_error(cli("batch", "run", str(REPO / "instances" / "tiny_exact.yaml"), "--scheduler", "lokal:2",
                        "--out", str(tmp_path / "o")), "--scheduler", "local:N")


def test_progress_bar_on_a_terminal(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(textwrap.dedent("""
        models: [{chain: {length: 4, costs: 1, sizes: 1}}]
        budgets: [0.7, 0.9]
        backends: [dp]
    """))
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "monet_ilp", "batch", "run", str(path), "--jobs", "1",
                             "--out", str(tmp_path / "out")], cwd=REPO, stdin=slave, stdout=slave, stderr=slave,
                            env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # the terminal closed: the command is done
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert "2/2" in screen and "running" in screen and "failed" in screen and "ETA" in screen, screen
    assert len(read_records(tmp_path / "out" / "results.jsonl").records) == 2


def test_read_records_reports_damage_in_the_middle_but_keeps_going(tmp_path):
    good = {"format": "monet-ilp/batch-record", "version": 1, "status": "optimal"}
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({**good, "key": "a"}) + "\n\nnot json\n" + json.dumps({**good, "key": "b"}) + "\n"
                    + json.dumps({**good, "key": "c", "status": "bogus"}) + "\n")
    found = read_records(path)
    assert [r["key"] for r in found.records] == ["a", "b"]
    assert [n for n, _ in found.bad_lines] == [3, 5] and [n for n, _ in found.torn_lines] == [5]
    assert found.good_bytes == len(path.read_bytes()) - len(json.dumps({**good, "key": "c", "status": "bogus"})) - 1


def test_geomean_and_front():
    assert shifted_geomean([]) is None and shifted_geomean([0.0, 0.0]) == 0.0
    assert shifted_geomean([1.0, 3.0]) == pytest.approx((2 * 4) ** 0.5 - 1)
    assert pareto_front([(3, 1), (1, 3), (2, 2), (2, 3), (4, 4)]) == [(1, 3), (2, 2), (3, 1)]
