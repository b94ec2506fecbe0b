"""The runner, for real: worker processes, a Dask LocalCluster on loopback, SIGKILL and resume,
solvers that raise, crash or overrun, and torn lines in results.jsonl."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from monet_ilp.batch import load_manifest, parse_manifest, read_records, run_batch
from monet_ilp.batch.results import content_of, latest_records
from monet_ilp.errors import MonetError
from tests.batch.conftest import PLUGIN, REPO


def manifest(text: str):
    return parse_manifest(textwrap.dedent(text), source="test.yaml", base=REPO)


def records_by_key(out) -> dict[str, dict]:
    found = read_records(out / "results.jsonl")
    assert not found.bad_lines
    keys = [r["key"] for r in found.records]
    assert len(keys) == len(set(keys)), "a job was recorded twice"
    return {r["key"]: r for r in found.records}


def test_local_pool_solves_tiny_exact_and_backends_agree(tiny_local):
    m, out, report = tiny_local
    assert report.ran == len(m.jobs) == 12 and report.counts == {"optimal": 12} and not report.interrupted
    records = records_by_key(out)
    assert set(records) == {j.key for j in m.jobs}
    by_instance: dict[str, set] = {}
    for job in m.jobs:
        r = records[job.key]
        assert r["status"] == "optimal" and r["feasible"] is True and r["gap"] == 0.0
        assert r["objective"] == r["bound"] == r["compute_cycles"] and r["params"] == dict(job.params)
        schedule = json.loads((out / r["schedule"]).read_text())
        assert schedule["format"] == "monet-ilp/schedule"
        by_instance.setdefault(r["instance_hash"], set()).add(r["objective"])
    assert len(by_instance) == 4 and all(len(v) == 1 for v in by_instance.values())


def test_dask_local_cluster_gives_the_same_records(tiny_local, tmp_path):
    m, local_out, _ = tiny_local
    report = run_batch(m.jobs, tmp_path, scheduler="local:2")
    assert report.ran == 12
    assert len(report.addresses) == 3 and all(a.startswith("tcp://127.0.0.1:") for a in report.addresses)
    local, dask = records_by_key(local_out), records_by_key(tmp_path)
    assert set(local) == set(dask)
    for key in local:
        assert content_of(dask[key]) == content_of(local[key])
        assert dask[key]["executor"] == "dask:local:2" and local[key]["executor"] == "local"


def test_failing_jobs_are_recorded_and_the_batch_goes_on(mixed_run):
    m, out, report = mixed_run
    records = records_by_key(out)
    assert len(records) == len(m.jobs) == 10 == report.ran
    by_label: dict[str, list] = {}
    for r in records.values():
        by_label.setdefault(r["params"]["label"], []).append(r)
    for r in by_label["test:raise"]:
        assert r["status"] == "error" and "RuntimeError: boom" in r["message"]
        assert r["instance"] and r["schedule"] is None
    for r in by_label["test:crash"]:
        assert r["status"] == "error" and "died (exit status 7)" in r["message"]
    for r in by_label["test:sleep"]:  # killed (the verdict of a kill), not waited for: they sleep 120 s
        assert r["status"] == "timeout" and "killed: no result 2 s (time limit) + 0.5 s (grace)" in r["message"]
        assert r["elapsed_s"] >= 2.5 and r["instance"] and r["instance_hash"]  # not before the limit and grace
    for r in by_label["cpsat-bad"]:
        assert r["status"] == "error" and "nope" in r["message"]
    for r in by_label["cpsat"]:
        assert r["status"] in ("optimal", "feasible") and r["feasible"] is True
        assert r["latency_cycles"] > 0 and r["energy_pj"] > 0 and (out / r["schedule"]).is_file()
    assert report.counts["timeout"] == 2 and report.counts["error"] == 6


def test_results_are_never_overwritten_without_resume(tiny_local):
    m, out, _ = tiny_local
    with pytest.raises(MonetError, match="already holds 12 records"):
        run_batch(m.jobs, out)
    report = run_batch(m.jobs, out, resume=True)
    assert report.skipped == 12 and report.ran == 0


TORN_MANIFEST = """
    models:
      - chain: {costs: 1, sizes: 1}
        sweep: {length: [4, 5, 6]}
    budgets: 0.7
    backends: [dp]
"""


class Collect:
    """An observer that keeps what it is told."""

    def __init__(self):
        self.events = []

    def started(self, total, skipped): ...

    def progress(self, done, running, failed): ...

    def finished(self, job, record):
        self.events.append(("ran", record["key"]))

    def warn(self, text):
        self.events.append(("warn", text))


def test_a_torn_last_line_is_cut_off_and_its_job_rerun(tmp_path):
    m = manifest(TORN_MANIFEST)
    run_batch(m.jobs, tmp_path, workers=2)
    path = tmp_path / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    for damage in ("cut_mid_line", "garbage_line"):
        torn_key = json.loads(lines[-1])["key"]
        if damage == "cut_mid_line":  # a write torn by a crash
            path.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
        else:  # a damaged last line that does end with a newline
            path.write_bytes(b"".join(lines[:-1]) + b'{"format": "monet-ilp/batch-record", "key": "'
                             + torn_key.encode() + b'", "stat\n')
        found = read_records(path)
        assert found.torn_tail and len(found.records) == 2
        seen = Collect()
        report = run_batch(m.jobs, tmp_path, resume=True, observer=seen)
        assert report.skipped == 2 and report.ran == 1, damage
        assert seen.events[0][0] == "warn" and "line 3 is torn" in seen.events[0][1]
        assert seen.events[1:] == [("ran", torn_key)]
        records = records_by_key(tmp_path)
        assert set(records) == {j.key for j in m.jobs}
        assert path.read_bytes().splitlines(keepends=True)[:2] == lines[:2]
        lines = path.read_bytes().splitlines(keepends=True)


@pytest.mark.slow  # 10-30 s: the slow tier (CI runs it after the default one)
def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "set.yaml"
    path.write_text(textwrap.dedent(f"""
        name: killed
        plugins: [{PLUGIN}]
        models:
          - chain: {{costs: 1, sizes: 1}}
            sweep: {{length: [4, 5, 6]}}
        budgets: 1.0
        backends: [dp, test:sleep]
        options: {{test:sleep: {{seconds: 1.0}}}}
        time_limits: 30
    """))
    jobs = load_manifest(path).jobs
    out = tmp_path / "out"
    results = out / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "monet_ilp", "batch", "run", str(path), "--jobs", "1",
                             "--out", str(out), "--quiet"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.exists() and results.read_bytes().count(b"\n") >= 2:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    else:
        pytest.fail("no records within 60 s")
    children = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    _gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, "workers outlived the killed batch"
    before = read_records(results)
    assert 2 <= len(before.records) < len(jobs)

    resumed = subprocess.run([sys.executable, "-m", "monet_ilp", "batch", "run", str(path), "--jobs", "2",
                              "--out", str(out), "--resume"], cwd=REPO, capture_output=True, text=True,
                             timeout=120, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before.records)} done before" in resumed.stdout
    records = records_by_key(out)
    assert set(records) == {j.key for j in jobs}
    for r in before.records:  # what was there is kept as it was
        assert records[r["key"]] == r
    assert all(r["status"] in ("optimal", "feasible") for r in records.values())
    assert latest_records(read_records(results).records).keys() == records.keys()
