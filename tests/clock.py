"""A clock for the tests of timed Python loops: it moves only when it is read.

A loop that runs "until the deadline" under :func:`ticking` ends after the same number
of looks at the clock on any machine, however loaded, so a test can assert exact values
of a time-limited search without asserting anything about wall time.  Only code that
reads the clock through the modules named is affected; a solver that keeps its own
time (CP-SAT, HiGHS) does not see it, so it is for pure-Python searches.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest


class TickingClock:
    """``time`` as the modules see it, but ``perf_counter`` (and ``monotonic``) add
    ``step`` seconds on every read instead of following the wall clock."""

    def __init__(self, step: float, start: float = 1000.0):
        self.step = step
        self.now = start
        self.reads = 0

    def perf_counter(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now

    monotonic = perf_counter

    def __getattr__(self, name: str) -> Any:  # sleep, strftime, ...: the real ones
        return getattr(time, name)


def ticking(monkeypatch: pytest.MonkeyPatch, *modules: str, step: float = 0.0) -> TickingClock:
    """Give each of ``modules`` (dotted names of modules that ``import time``) one
    :class:`TickingClock`; the monkeypatch puts the real clock back after the test.
    ``step=0`` freezes time."""
    clock = TickingClock(step)
    for module in modules:
        monkeypatch.setattr(f"{module}.time", clock)
    return clock
