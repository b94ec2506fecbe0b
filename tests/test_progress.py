"""Progress reports reach the listener of their context, and nobody else."""

from __future__ import annotations

import threading

from monet_ilp import progress


def test_reports_reach_the_listener_and_stop_with_the_block():
    heard: list[str] = []
    progress.report("before: nobody listens")
    with progress.listening(heard.append):
        progress.report("building: 1 of 2")
        inner: list[str] = []
        with progress.listening(inner.append):
            progress.report("inner")
        progress.report("building: 2 of 2")
    progress.report("after")
    assert heard == ["building: 1 of 2", "building: 2 of 2"]
    assert inner == ["inner"]


def test_a_thread_does_not_hear_another_threads_reports():
    heard: list[str] = []

    def other() -> None:
        progress.report("from another thread")

    with progress.listening(heard.append):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        progress.report("mine")
    assert heard == ["mine"]
