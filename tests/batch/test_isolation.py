"""One job in a process of its own: the fork-server worker and the fresh-interpreter worker agree,
and both are killed, with everything they started, once past their deadline."""

from __future__ import annotations

import time

import psutil

from monet_ilp.batch import parse_manifest
from monet_ilp.batch.isolation import execute
from tests.batch.conftest import PLUGIN, REPO


def jobs(text: str):
    return parse_manifest(text, source="t.yaml", base=REPO).jobs


def test_forked_and_fresh_workers_give_the_same_result():
    (job,) = jobs("models: [{chain: {length: 5, costs: 1, sizes: 1}}]\nbudgets: 0.7\nbackends: [dp]\n")
    forked = execute(job.payload())
    fresh = execute(job.payload(), fork=False)
    timing = ("wall_time_s", "build_s", "stats")
    strip = lambda o: {k: v for k, v in o["fields"].items() if k not in timing}
    assert strip(forked) == strip(fresh) and forked["fields"]["status"] == "optimal"
    assert forked["schedule"] == fresh["schedule"] is not None


def test_a_fresh_worker_past_its_deadline_is_killed_with_its_children():
    (job,) = jobs(f"plugins: [{PLUGIN}]\nmodels: [{{chain: {{length: 3}}}}]\nbudgets: 1.0\n"
                  "backends: [test:sleep]\ntime_limits: 0.5\n")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    start = time.monotonic()
    outcome = execute(job.payload(), grace=0.3, fork=False)
    assert outcome["fields"]["status"] == "timeout" and "0.5 s (time limit) + 0.3 s (grace)" in \
        outcome["fields"]["message"]
    assert time.monotonic() - start >= 0.8 and outcome["fields"]["instance"]  # not before the limit and grace
    # Killed, not waited for (it sleeps 60 s): the verdict is the kill's, and nothing it started is left.
    assert outcome["fields"]["message"].startswith("killed: ")
    left = {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}
    assert left <= before


def test_a_worker_that_dies_is_an_error_with_its_exit_status():
    (job,) = jobs(f"plugins: [{PLUGIN}]\nmodels: [{{chain: {{length: 3}}}}]\nbackends: [test:crash]\n")
    for fork in (True, False):
        outcome = execute(job.payload(), fork=fork)
        assert outcome["fields"]["status"] == "error"
        assert "died (exit status 7)" in outcome["fields"]["message"], fork
