"""Time in the tests without the wall clock: a clock that moves only when it is read, and
the deadlines a module makes, recorded.

A loop that runs "until the deadline" under :func:`ticking` ends after the same number
of looks at the clock on any machine, however loaded, so a test can assert exact values
of a time-limited search without asserting anything about wall time.  Only code that
reads the clock through the modules named is affected; a solver that keeps its own
time (CP-SAT, HiGHS) does not see it, so it is for pure-Python searches.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.deadline import Deadline

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


def recorded_deadlines(monkeypatch: pytest.MonkeyPatch, module: str) -> list[Deadline]:
    """The deadlines that ``module`` makes with its ``Deadline(...)``, in order (not the
    sub-deadlines :meth:`Deadline.sub` makes), so that a test can read what was left of
    a call's time when a step began: a share, asserted without the wall clock."""
    made: list[Deadline] = []

    class Recorded(Deadline):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(f"{module}.Deadline", Recorded)
    return made
