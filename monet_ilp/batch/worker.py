"""The worker process of one batch job, forked from the fork server or run as
``python -m monet_ilp.batch.worker``.

Started by :func:`monet_ilp.batch.isolation.execute`, in a session of its own so that
the parent can kill it and anything it started (CBC, for one) at once.  A forked
worker (:func:`forked_main`) sends ``("solving", {instance, instance_hash, build_s})``
and then ``("result", outcome)`` over a pipe, and watches a lifeline pipe whose end
means the parent died.  A fresh interpreter (:func:`main`) speaks JSON lines:

* stdin: one JSON line, the job's payload; stdin then stays open, and its end
  means the parent is gone, so the worker kills its process group;
* stdout: ``{"event": "solving", "instance": ..., ...}`` when the instance is built
  and the solver starts, then ``{"event": "result", "fields": ..., "schedule": ...}``.
  Anything a solver prints (even from C) is sent to stderr instead.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection


def _watch_parent(stream: IO[bytes]) -> None:
    """Kill this process group once the parent's end of stdin closes (the parent died)."""
    try:
        while stream.read(65536):
            pass
    except OSError:
        pass
    _watch_parent_gone()


def _watch_lifeline(lifeline: Connection) -> None:
    try:
        lifeline.recv()
    except (EOFError, OSError):
        pass
    _watch_parent_gone()


def _watch_parent_gone() -> None:
    if hasattr(os, "killpg"):
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        except OSError:
            pass
    os._exit(3)


def forked_main(payload: dict[str, Any], results: Connection, lifeline: Connection, log_path: str) -> None:
    """Entry of a worker forked from the fork server (see :mod:`monet_ilp.batch.isolation`)."""
    os.setsid()
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)  # solver output (Python or C) goes to the job's log, not the terminal
    os.dup2(log, 2)
    os.close(log)
    threading.Thread(target=_watch_lifeline, args=(lifeline,), daemon=True).start()
    # heavy (the solver stack), and imported only once the output is redirected
    from monet_ilp.batch.job import run_job

    outcome = run_job(payload, on_solving=lambda known: results.send(("solving", known)))
    results.send(("result", outcome))
    results.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: the solver libraries are slow to unload


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # solver output (Python or C) must not corrupt the protocol
    line = sys.stdin.buffer.readline()
    if not line:
        os._exit(2)
    payload = json.loads(line)
    threading.Thread(target=_watch_parent, args=(sys.stdin.buffer,), daemon=True).start()

    def emit(message: dict[str, Any]) -> None:
        protocol.write(json.dumps(message, separators=(",", ":")) + "\n")
        protocol.flush()

    # heavy (the solver stack), and imported only once the output is redirected
    from monet_ilp.batch.job import run_job

    outcome = run_job(payload, on_solving=lambda known: emit({"event": "solving", **known}))
    emit({"event": "result", **outcome})
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: the solver libraries are slow to unload


if __name__ == "__main__":
    main()
