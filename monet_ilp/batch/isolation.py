"""Run one job in a process of its own, under a hard deadline: the executor both pools share.

:func:`execute` starts a worker process (:mod:`monet_ilp.batch.worker`), waits for
its result, and kills its whole process group when it overruns: ``time_limit +
grace`` seconds after the solver started (the worker says when), or
``build_timeout`` seconds while the instance is being built.  The local pool calls
it from a thread per slot, a Dask worker calls it as its task, so both produce the
same records.

Workers are forked from a fork server that has imported the solver stack once
(``multiprocessing``'s forkserver, preloaded with :data:`PRELOAD`), which saves
about a second of imports per job.  Where a process may not have children of its
own (a daemonic Dask worker) or there is no fork, each worker is a fresh
interpreter instead (``python -m monet_ilp.batch.worker``); the worker code and the
result are the same.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from monet_ilp.batch.worker import forked_main

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext

__all__ = ["DEFAULT_BUILD_TIMEOUT", "DEFAULT_GRACE", "PRELOAD", "Cancelled", "execute"]

#: Seconds a solver may overrun its time limit before it is killed.
DEFAULT_GRACE = 10.0
#: Seconds allowed to build an instance (graph import, costing) before the job is killed.
DEFAULT_BUILD_TIMEOUT = 600.0
#: Modules the fork server imports once, so that every forked worker has them.  The CLI is
#: among them because multiprocessing re-imports a script's ``__main__`` (such as the
#: ``monet-ilp`` entry point) in every forked worker; with its imports done, that is cheap.
PRELOAD = ("monet_ilp.batch.worker", "monet_ilp.batch.job", "monet_ilp.solve", "monet_ilp.evaluate",
           "monet_ilp.instance", "monet_ilp.graph", "monet_ilp.hardware.presets", "monet_ilp.heuristics",
           "monet_ilp.problems.p1.dp", "monet_ilp.problems.p1.cpsat", "monet_ilp.problems.p1.milp",
           "monet_ilp.cli")
_STDERR_TAIL = 2000
_preload_lock = threading.Lock()
_preloaded = False


#: A worker's message: its event (``"solving"``, ``"result"``) and what it says.
Message = tuple[str | None, dict[str, Any]]


class Cancelled(Exception):
    """The batch was interrupted while this job ran; its process was killed and nothing is recorded."""


def _killpg(pid: int | None, fallback: Callable[[], object]) -> None:
    """Kill a worker and everything it started (it leads its own session)."""
    try:
        if pid is not None and hasattr(os, "killpg"):
            os.killpg(pid, signal.SIGKILL)
            return
    except (ProcessLookupError, PermissionError, OSError):
        pass  # not yet a group leader: kill the process alone
    try:
        fallback()
    except (ProcessLookupError, OSError, ValueError):
        pass


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _STDERR_TAIL))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-5:])


def _fork_context() -> ForkServerContext | None:
    """The preloaded forkserver context, or ``None`` where this process cannot use one."""
    global _preloaded
    if os.name != "posix" or multiprocessing.current_process().daemon:
        return None
    try:
        ctx = multiprocessing.get_context("forkserver")
    except ValueError:
        return None
    with _preload_lock:
        if not _preloaded:
            ctx.set_forkserver_preload(list(PRELOAD))
            _preloaded = True
    return ctx


# ================================================================ channels
class _Forked:
    """A worker forked from the fork server; messages come over a pipe."""

    def __init__(self, ctx: ForkServerContext, payload: Mapping[str, Any], log_path: str) -> None:
        self.results, results_w = ctx.Pipe(duplex=False)
        lifeline_r, self.lifeline = ctx.Pipe(duplex=False)  # its end tells the worker this process died
        self.proc = ctx.Process(target=forked_main, args=(dict(payload), results_w, lifeline_r, log_path),
                                daemon=False, name=f"monet-ilp-job-{payload['key']}")
        self.proc.start()
        results_w.close()
        lifeline_r.close()

    def next(self, timeout: float) -> Message | None:
        """A message, ``None`` at the end of the stream, or ``queue.Empty`` past ``timeout``."""
        ready = multiprocessing.connection.wait([self.results, self.proc.sentinel], timeout=max(0.0, timeout))
        if not ready:
            raise queue.Empty
        if self.results.poll(0):
            try:
                message: Message = self.results.recv()
                return message
            except (EOFError, OSError):
                return None
        return None  # the process ended without a word

    def kill(self) -> None:
        _killpg(self.proc.pid, self.proc.kill)

    def finish(self) -> int | None:
        self.lifeline.close()
        self.proc.join(timeout=10)
        if self.proc.exitcode is None:
            self.kill()
            self.proc.join()
        self.results.close()
        code = self.proc.exitcode
        self.proc.close()
        return code


class _Spawned:
    """A worker in a fresh interpreter (``python -m monet_ilp.batch.worker``); messages are JSON lines."""

    def __init__(self, payload: Mapping[str, Any], log_path: str, python: str | None) -> None:
        with open(log_path, "ab") as log:  # the worker writes to its own copy of the descriptor
            self.proc = subprocess.Popen(
                [python or sys.executable, "-m", "monet_ilp.batch.worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, close_fds=True,
                start_new_session=os.name == "posix",
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        # stdin stays open: its end is how the worker learns that this process died
        self.stdin.write((json.dumps(payload) + "\n").encode())
        self.stdin.flush()

    def _read(self) -> None:
        try:
            for line in self.stdout:
                self.lines.put(line)
        except (OSError, ValueError):
            pass
        self.lines.put(None)

    def next(self, timeout: float) -> Message | None:
        while True:
            line = self.lines.get(timeout=max(0.0, timeout))
            if line is None:
                return None
            try:
                message: dict[str, Any] = json.loads(line)
            except ValueError:
                continue
            event = message.pop("event", None)
            return (event, message)

    def kill(self) -> None:
        _killpg(self.proc.pid if os.name == "posix" else None, self.proc.kill)

    def finish(self) -> int | None:
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        self.reader.join(timeout=5)
        self.stdout.close()
        code: int | None = self.proc.returncode
        return code


# ================================================================= execute
def execute(payload: Mapping[str, Any], *, grace: float = DEFAULT_GRACE,
            build_timeout: float = DEFAULT_BUILD_TIMEOUT, cancel: threading.Event | None = None,
            python: str | None = None, fork: bool = True) -> dict[str, Any]:
    """Solve one job in a worker process of its own and return its outcome.

    Parameters
    ----------
    payload
        :meth:`monet_ilp.batch.job.Job.payload`.
    grace
        Seconds past the job's time limit before the worker is killed (``timeout``).
    build_timeout
        Seconds allowed to build the instance.
    cancel
        When set, the worker is killed and :class:`Cancelled` raised.
    python
        Interpreter of a fresh worker (default: this one); implies ``fork=False``.
    fork
        Fork the worker from the preloaded fork server when this process may.

    Returns
    -------
    dict
        ``{"fields": {...}, "schedule": dict | None}``: the worker's fields (see
        :func:`monet_ilp.batch.job.run_job`), or a ``timeout``/``error`` verdict
        when it was killed or died, plus ``elapsed_s`` and ``host``.
    """
    time_limit = float(payload["params"]["time_limit"])
    start = time.monotonic()
    fd, log_path = tempfile.mkstemp(prefix="monet-ilp-job-", suffix=".log")
    os.close(fd)
    try:
        ctx = _fork_context() if fork and python is None else None
        channel = _Forked(ctx, payload, log_path) if ctx is not None else _Spawned(payload, log_path, python)
        outcome: dict[str, Any] | None = None
        verdict: tuple[str, str] | None = None
        known: dict[str, Any] = {}  # what the worker said before it solved (instance name, hash)
        try:
            deadline, phase = start + build_timeout, "build"
            while True:
                wait = deadline - time.monotonic()
                if cancel is not None:
                    wait = min(wait, 0.2)
                try:
                    message = channel.next(wait)
                except queue.Empty:
                    if cancel is not None and cancel.is_set():
                        channel.kill()
                        raise Cancelled(payload["key"]) from None
                    if time.monotonic() >= deadline:
                        channel.kill()
                        verdict = ("timeout", f"killed: building the instance took over {build_timeout:g} s "
                                              "(raise --build-timeout)" if phase == "build" else
                                   f"killed: no result {time_limit:g} s (time limit) + {grace:g} s (grace) "
                                   "after the solver started")
                        break
                    continue
                if message is None:
                    break
                if message[0] == "solving":
                    phase, deadline = "solve", time.monotonic() + time_limit + grace
                    known = dict(message[1]) if len(message) > 1 else {}
                elif message[0] == "result":
                    outcome = {"fields": message[1]["fields"], "schedule": message[1].get("schedule")}
                    break
        except BaseException:
            channel.kill()
            raise
        finally:
            code = channel.finish()
        if outcome is None:
            if verdict is None:
                how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                tail = _tail(log_path)
                verdict = ("error", f"the worker process died ({how}) without a result"
                                    + (f": {tail}" if tail else ""))
            outcome = {"fields": {**known, "status": verdict[0], "message": verdict[1]}, "schedule": None}
    finally:
        try:
            os.unlink(log_path)
        except OSError:
            pass
    outcome["elapsed_s"] = round(time.monotonic() - start, 4)
    outcome["host"] = socket.gethostname()
    return outcome
