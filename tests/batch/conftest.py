"""Shared fixtures of the batch tests: the repository root on every worker's path, and one real run
of ``instances/tiny_exact.yaml`` on the local pool that several tests read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "instances" / "tiny_exact.yaml"
PLUGIN = "tests.batch.plugin_backends"

#: A P2 set in which every way a job can fail happens once per objective: a backend that
#: raises, one whose process dies, one that overruns its time limit (2 s, grace 0.5 s),
#: and a cpsat variant given a CP-SAT parameter that does not exist (an unknown option name
#: is refused with the manifest); cpsat itself solves both objectives.
MIXED = f"""
name: mixed
plugins: [{PLUGIN}]
models: [{{zoo: mlp, params: {{depth: 2, width: 32, batch: 4}}}}]
hardware: [{{preset: edge_tpu, params: {{mesh: 1}}}}]
problems: P2
budgets: 1.0
objectives: [latency, energy]
backends: [cpsat, test:raise, test:crash, test:sleep, {{name: cpsat, label: cpsat-bad, options: {{params: {{nope: 1}}}}}}]
options: {{test:sleep: {{seconds: 120}}}}
time_limits: 2
"""


@pytest.fixture(autouse=True, scope="session")
def _workers_import_the_test_plugins():
    """Worker processes (and Dask workers) must import ``tests.batch.plugin_backends``."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old) if p)
    yield
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def cli(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``monet-ilp ARGS`` as a user runs it (a real process)."""
    return subprocess.run([sys.executable, "-m", "monet_ilp", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def tiny_local(tmp_path_factory):
    """tiny_exact solved once on the local pool with 2 jobs at a time: (manifest, results dir, report)."""
    from monet_ilp.batch import load_manifest, run_batch

    manifest = load_manifest(TINY)
    out = tmp_path_factory.mktemp("tiny_local")
    report = run_batch(manifest.jobs, out, workers=2)
    return manifest, out, report


@pytest.fixture(scope="session")
def mixed_run(tmp_path_factory):
    """MIXED run once with 2 jobs at a time and a 0.5 s grace: (manifest, results dir, report)."""
    from monet_ilp.batch import parse_manifest, run_batch

    manifest = parse_manifest(MIXED, source="mixed.yaml", base=REPO)
    out = tmp_path_factory.mktemp("mixed")
    report = run_batch(manifest.jobs, out, workers=2, grace=0.5)
    return manifest, out, report
