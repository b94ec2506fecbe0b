"""``--scheduler tcp://HOST:PORT``: a real ``dask scheduler`` and ``dask worker`` on loopback.

The workers are started the way a cluster's are (daemonic, under a nanny), so every
job runs in a fresh interpreter instead of a forked one; the records must still be
those of the local pool.  Slow (two more interpreters and a cluster to start).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from monet_ilp.batch import run_batch
from monet_ilp.batch.results import content_of, read_records


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_running_scheduler_over_tcp(tiny_local, tmp_path):
    from dask.distributed import Client

    manifest, local_out, _ = tiny_local
    address = f"tcp://127.0.0.1:{_free_port()}"
    port = address.rsplit(":", 1)[1]
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", port, "--no-dashboard"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    try:
        time.sleep(1)
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                       "--nworkers", "2", "--nthreads", "1", "--host", "127.0.0.1",
                                       "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=60)
            assert all(client.run(lambda: __import__("multiprocessing").current_process().daemon).values())
        report = run_batch(manifest.jobs, tmp_path, scheduler=address)
        assert report.ran == len(manifest.jobs) and report.addresses[0] == address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    local = {r["key"]: r for r in read_records(local_out / "results.jsonl").records}
    remote = {r["key"]: r for r in read_records(tmp_path / "results.jsonl").records}
    assert set(local) == set(remote)
    for key, record in remote.items():
        assert content_of(record) == content_of(local[key]) and record["executor"] == f"dask:{address}"
