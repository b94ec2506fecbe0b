"""Run the jobs of a batch on a local process pool or a Dask cluster, appending each result as it comes.

Both executors run every job through :func:`monet_ilp.batch.isolation.execute`
(one worker process per job, killed past its deadline); only the parent writes
records, one as soon as each job finishes.  ``resume`` skips the keys already in
``results.jsonl`` after cutting off a torn last line, so a run killed at any
moment and resumed loses and duplicates nothing.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as _dt
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monet_ilp.batch.isolation import DEFAULT_BUILD_TIMEOUT, DEFAULT_GRACE, Cancelled, execute
from monet_ilp.batch.job import RECORD_FORMAT, RECORD_VERSION, Job
from monet_ilp.batch.results import ResultsLog
from monet_ilp.errors import MonetError

if TYPE_CHECKING:
    from pathlib import Path

    from distributed import Future

__all__ = ["FAILED_STATUSES", "BatchReport", "Observer", "make_record", "parse_scheduler", "run_batch"]

#: Statuses counted as failed by the progress bar, and rerun by ``retry_failed``.
FAILED_STATUSES = ("error", "timeout")


class Observer:
    """Receives the progress of a batch (the CLI draws a progress bar); every method is optional."""

    def started(self, total: int, skipped: int) -> None:
        """``total`` jobs will run; ``skipped`` were done before."""

    def progress(self, done: int, running: int, failed: int) -> None:
        """Counts after every change."""

    def finished(self, job: Job, record: Mapping[str, Any]) -> None:
        """A record was written."""

    def warn(self, text: str) -> None:
        """Something the user should know (a torn line that will be rerun, ...)."""


@dataclass
class BatchReport:
    """What a call of :func:`run_batch` did.

    Attributes
    ----------
    total
        Jobs in the set.
    skipped
        Jobs already done (``resume``), not run again.
    ran
        Jobs run and recorded now.
    counts
        Records written now, by status.
    bad_lines
        ``(line, reason)`` of the invalid lines found in ``results.jsonl``.
    interrupted
        True when the run was stopped (Ctrl-C) before every job was done.
    elapsed_s
        Wall time of the run.
    addresses
        With Dask: the scheduler's address, then the workers'.
    """

    total: int = 0
    skipped: int = 0
    ran: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    interrupted: bool = False
    elapsed_s: float = 0.0
    addresses: list[str] = field(default_factory=list)


def parse_scheduler(text: str | None) -> tuple[str, int | str | None]:
    """``None`` -> ("pool", None); ``local:N`` -> ("local", N); ``tcp://HOST:PORT`` -> ("tcp", address)."""
    if text is None:
        return "pool", None
    if text == "local" or text.startswith("local:"):
        count = text.partition(":")[2] or str(os.cpu_count() or 1)
        if not count.isdigit() or int(count) < 1:
            raise MonetError(f"--scheduler {text!r}: the worker count is not a positive integer",
                             field="--scheduler", fix="write local:N, e.g. local:2")
        return "local", int(count)
    if "://" in text:
        return "tcp", text
    raise MonetError(f"--scheduler {text!r} is neither local:N nor an address", field="--scheduler",
                     fix="write local:2 for a local Dask cluster, or tcp://HOST:PORT for a running scheduler")


def make_record(job: Job, outcome: Mapping[str, Any], executor: str) -> dict[str, Any]:
    """The record of a job from its outcome (:func:`~monet_ilp.batch.isolation.execute`); schedule path unset."""
    fields = outcome.get("fields", {})
    get = fields.get
    return {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "key": job.key,
        "set": job.set,
        "instance": get("instance"),
        "instance_hash": get("instance_hash"),
        "params": dict(job.params),
        "status": get("status", "error"),
        "objective": get("objective"),
        "bound": get("bound"),
        "gap": get("gap"),
        "feasible": get("feasible"),
        "latency_cycles": get("latency_cycles"),
        "energy_pj": get("energy_pj"),
        "compute_cycles": get("compute_cycles"),
        "schedule": None,
        "message": get("message", ""),
        "source": get("source", ""),
        "wall_time_s": get("wall_time_s"),
        "build_s": get("build_s"),
        "elapsed_s": outcome.get("elapsed_s"),
        "host": outcome.get("host"),
        "executor": executor,
        "finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "stats": get("stats", {}),
    }


# ================================================================ executors
class _LocalPool:
    """At most ``n`` jobs at a time, each in its own worker process (threads only wait on them)."""

    def __init__(self, n: int, grace: float, build_timeout: float):
        self.n = n
        self.grace, self.build_timeout = grace, build_timeout
        self.cancel = threading.Event()
        self.running = 0
        self._lock = threading.Lock()
        self.pool = cf.ThreadPoolExecutor(max_workers=n, thread_name_prefix="monet-batch")
        self.name = "local"

    def _run(self, payload: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.running += 1
        try:
            return execute(payload, grace=self.grace, build_timeout=self.build_timeout, cancel=self.cancel)
        finally:
            with self._lock:
                self.running -= 1

    def results(self, jobs: Sequence[Job]) -> Iterator[tuple[Job | None, dict[str, Any]]]:
        futures = {self.pool.submit(self._run, job.payload()): job for job in jobs}
        pending = set(futures)
        while pending:
            done, pending = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
            for future in done:
                yield futures[future], _outcome_of(future)
            if not done:
                yield None, {}  # a tick, to refresh the counts

    def running_now(self, remaining: int) -> int:
        return self.running

    def close(self, interrupted: bool) -> None:
        if interrupted:
            self.cancel.set()
        self.pool.shutdown(wait=True, cancel_futures=True)


class _DaskPool:
    """Jobs as tasks of a Dask cluster (a LocalCluster started here, or a running scheduler)."""

    def __init__(self, kind: str, arg: int | str | None, grace: float, build_timeout: float) -> None:
        try:
            from dask.distributed import Client, LocalCluster  # heavy: loaded only with --scheduler
        except ImportError:  # pragma: no cover  (a declared dependency)
            raise MonetError("dask.distributed is not installed", field="--scheduler",
                             fix='pip install "dask[distributed]"') from None
        self.grace, self.build_timeout = grace, build_timeout
        self.cluster: LocalCluster | None = None
        if kind == "local":
            import dask  # heavy: loaded only with --scheduler

            # Non-daemonic workers may fork job processes from the preloaded fork server,
            # exactly as the local pool does (daemonic ones start a fresh interpreter per job).
            with dask.config.set({"distributed.worker.daemon": False}):
                self.cluster = LocalCluster(n_workers=arg, threads_per_worker=1, processes=True,
                                            host="127.0.0.1", dashboard_address=None,
                                            silence_logs=logging.ERROR)
            self.client = Client(self.cluster)
            self.name = f"dask:local:{arg}"
        else:
            try:
                self.client = Client(arg, timeout="15s")
            except (OSError, TimeoutError) as err:
                raise MonetError(f"cannot reach the Dask scheduler at {arg} ({err})", field="--scheduler",
                                 fix="start it (dask scheduler), or check the address") from None
            self.name = f"dask:{arg}"
        self.futures: list[Future[dict[str, Any]]] = []

    def results(self, jobs: Sequence[Job]) -> Iterator[tuple[Job, dict[str, Any]]]:
        from dask.distributed import as_completed  # heavy: loaded only with --scheduler

        by_key: dict[object, Job] = {}  # by the future's Dask key
        for job in jobs:
            future = self.client.submit(execute, job.payload(), grace=self.grace,
                                        build_timeout=self.build_timeout, pure=False, retries=0,
                                        key=f"monet-ilp-{job.key}-{time.monotonic_ns()}")
            by_key[future.key] = job
            self.futures.append(future)
        for future in as_completed(self.futures):
            yield by_key[future.key], _outcome_of(future)

    def addresses(self) -> list[str]:
        info = self.client.scheduler_info()
        return [info["address"], *sorted(info["workers"])]

    def running_now(self, remaining: int) -> int:
        try:
            slots: int = sum(self.client.nthreads().values())
        except Exception:  # noqa: BLE001  (only for the progress bar)
            slots = 1
        return min(remaining, slots)

    def close(self, interrupted: bool) -> None:
        try:
            if interrupted and self.futures:
                self.client.cancel(self.futures)
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()


def _outcome_of(future: cf.Future[dict[str, Any]] | Future[dict[str, Any]]) -> dict[str, Any]:
    """A future's outcome; an exception of the executor itself becomes an ``error`` verdict."""
    try:
        return future.result()
    except Cancelled:
        raise
    except Exception as err:  # noqa: BLE001  (the executor's own failure is the job's error verdict)
        return {"fields": {"status": "error", "message": f"the executor failed: {type(err).__name__}: {err}"},
                "schedule": None}


# =================================================================== driver
def run_batch(
    jobs: Sequence[Job],
    out_dir: str | Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    grace: float = DEFAULT_GRACE,
    build_timeout: float = DEFAULT_BUILD_TIMEOUT,
    observer: Observer | None = None,
) -> BatchReport:
    """Run ``jobs``, appending one record per finished job to ``<out_dir>/results.jsonl``.

    Parameters
    ----------
    jobs
        The jobs (e.g. ``load_manifest(path).jobs``).
    out_dir
        The results directory (created if needed).
    workers
        Jobs at a time in the local pool (default: the number of CPUs).
    scheduler
        ``None`` for the local pool, ``local:N`` for a Dask LocalCluster of N
        single-threaded worker processes on loopback, or ``tcp://HOST:PORT``.
    resume
        Skip the jobs whose key already has a record.  Without it, an existing
        non-empty ``results.jsonl`` is an error (nothing is overwritten).
    retry_failed
        With ``resume``: run again the jobs whose last record is ``error`` or
        ``timeout`` (the new record is appended; readers keep the last per key).
    grace, build_timeout
        See :func:`monet_ilp.batch.isolation.execute`.
    observer
        Progress callbacks.
    """
    observer = observer or Observer()
    kind, arg = parse_scheduler(scheduler)
    start = time.monotonic()
    report = BatchReport(total=len(jobs))
    with ResultsLog(out_dir) as log:
        found = log.read()
        report.bad_lines = list(found.bad_lines)
        if found.records and not resume:
            raise MonetError(f"{log.path} already holds {len(found.records)} records", field="--out",
                             fix="pass --resume to skip the jobs done, or choose another --out")
        for number, reason in found.torn_lines:
            observer.warn(f"{log.path}: line {number} is torn or invalid ({reason}); "
                          "cutting it off and running its job again")
        log.cut_torn_tail(found)
        for number, reason in found.bad_lines[:len(found.bad_lines) - len(found.torn_lines)]:
            observer.warn(f"{log.path}: line {number} is not a valid record ({reason}); ignoring it")
        last: dict[str, str] = {}
        for record in found.records:
            last[record["key"]] = record["status"]
        todo = [job for job in jobs
                if job.key not in last or (retry_failed and last[job.key] in FAILED_STATUSES)]
        report.skipped = len(jobs) - len(todo)
        observer.started(len(todo), report.skipped)
        if not todo:
            report.elapsed_s = time.monotonic() - start
            return report
        if kind == "pool":
            executor: _LocalPool | _DaskPool = _LocalPool(max(1, workers or os.cpu_count() or 1), grace, build_timeout)
        else:
            executor = _DaskPool(kind, arg, grace, build_timeout)
        done = failed = 0
        interrupted = True
        try:
            if isinstance(executor, _DaskPool):
                report.addresses = executor.addresses()
            observer.progress(0, executor.running_now(len(todo)), 0)
            for job, outcome in executor.results(todo):
                if job is not None:
                    record = make_record(job, outcome, executor.name)
                    if outcome.get("schedule") is not None:
                        record["schedule"] = log.write_schedule(job.key, outcome["schedule"])
                    log.append(record)
                    done += 1
                    failed += record["status"] in FAILED_STATUSES
                    report.counts[record["status"]] = report.counts.get(record["status"], 0) + 1
                    observer.finished(job, record)
                observer.progress(done, executor.running_now(len(todo) - done), failed)
            interrupted = False
        finally:
            report.ran = done
            report.interrupted = interrupted
            executor.close(interrupted)
            report.elapsed_s = time.monotonic() - start
    return report
