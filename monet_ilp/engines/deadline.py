"""One time limit for a whole backend call: model building, bounds, solvers, fallbacks.

Every exact backend starts a :class:`Deadline` when it is called and hands it to each
step: builders check it inside their long loops (and report progress through
:mod:`monet_ilp.progress`), solvers get the seconds that are left, and optional steps
(warm starts, repairs, the minimum-budget explanation of an infeasible budget) run
only in what is left.  ``formulations/time_limits.md`` states what counts and the
overhead a solve may add to its limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from monet_ilp import progress

__all__ = ["Deadline", "Detail", "OutOfTime"]

#: How far a step got: a text, or a callable that makes it (called only when needed).
Detail = str | Callable[[], str] | None


class OutOfTime(Exception):
    """The deadline passed inside a long step; the backend falls back on what it has.

    Parameters
    ----------
    step
        What was being done ("building the P3 MILP").
    detail
        How far it got ("1,200 of 4,800 copy pairs, 310,000 rows"), or empty.
    """

    def __init__(self, step: str, detail: str = ""):
        self.step = step
        self.detail = detail
        super().__init__(f"time limit reached while {step}" + (f" ({detail})" if detail else ""))


class Deadline:
    """The end of a time limit, counted from the start of the backend call.

    Parameters
    ----------
    time_limit
        Seconds (``None``: no limit; every check passes and no solver is limited).
    started
        ``time.perf_counter()`` at the start of the call (default: now).

    Notes
    -----
    :meth:`check` is cheap (one clock read, and a progress report at most every
    :attr:`REPORT_EVERY_S` seconds), so builders may call it once per row.
    """

    #: Seconds between two progress reports of one deadline.
    REPORT_EVERY_S = 0.25
    #: Solvers stop this share of the time limit before the deadline (at most
    #: :attr:`WRAP_UP_MAX_S`): what they overrun, and what comes after them (reading the
    #: solution back, the schedule, the evaluator's check in ``solve``), then mostly fits.
    WRAP_UP_SHARE = 0.05
    WRAP_UP_MAX_S = 0.5

    def __init__(self, time_limit: float | None, *, started: float | None = None):
        self.started = time.perf_counter() if started is None else float(started)
        self.at = None if time_limit is None else self.started + float(time_limit)
        self.wrap_up = 0.0 if time_limit is None else min(self.WRAP_UP_MAX_S,
                                                          self.WRAP_UP_SHARE * float(time_limit))
        self._next_report = 0.0
        # Shared with every sub-deadline: cancelling the call cancels its steps.
        self._stop = _Stop()

    def __repr__(self) -> str:
        return f"Deadline(left={self.left()!r})"

    @property
    def limited(self) -> bool:
        return self.at is not None

    def elapsed(self) -> float:
        """Seconds since the call started."""
        return time.perf_counter() - self.started

    def left(self) -> float | None:
        """Seconds left (0 once passed or cancelled), ``None`` without a limit."""
        if self.at is None:
            return None
        if self.cancelled:
            return 0.0
        return max(0.0, self.at - time.perf_counter())

    def passed(self, margin: float = 0.0) -> bool:
        """Whether fewer than ``margin`` seconds are left (always, once cancelled)."""
        return self.cancelled or (self.at is not None and time.perf_counter() >= self.at - margin)

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called (on this deadline or the one it is a step of)."""
        return self._stop.event.is_set()

    def cancel(self) -> None:
        """End the time now: checks raise, solvers running under it are told to stop.

        A portfolio cancels its other members once one of them has proven the optimum;
        they return what they have, as at a time limit.  Safe from any thread.
        """
        self._stop.fire()

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` (no longer than what is left), waking at once on :meth:`cancel`;
        whether the deadline was cancelled."""
        left = self.left()
        return self._stop.event.wait(max(0.0, seconds if left is None else min(seconds, left)))

    @contextmanager
    def on_cancel(self, stop: Callable[[], None]) -> Iterator[None]:
        """Call ``stop`` (e.g. a solver's ``stop_search``) if the deadline is cancelled
        while the block runs (at once if it already is)."""
        self._stop.add(stop)
        try:
            yield
        finally:
            self._stop.remove(stop)

    def solver_limit(self, share: float = 1.0, *, at_most: float | None = None) -> float | None:
        """Seconds to give a solver: ``share`` of what is left before the wrap-up, at most
        ``at_most``.

        ``None`` without a limit (and without ``at_most``).  Callers skip the solver
        when the deadline has :meth:`passed`; a positive floor keeps solvers that reject
        0 happy without giving them time the call does not have.
        """
        left = self.left()
        if left is None:
            return 0.01 if self.cancelled else at_most
        seconds = max(0.0, left - self.wrap_up) * share
        if at_most is not None:
            seconds = min(seconds, at_most)
        return max(seconds, 0.01)

    def sub(self, share: float = 1.0, *, at_most: float | None = None) -> Deadline:
        """A deadline for an optional step: ``share`` of what is left, at most ``at_most`` s."""
        seconds = self.solver_limit(share, at_most=at_most)
        child = Deadline(seconds)
        child.wrap_up = 0.0  # the parent's wrap-up is already set aside
        child._next_report = self._next_report
        child._stop = self._stop
        return child

    def check(self, step: str, detail: Detail = None) -> None:
        """Raise :class:`OutOfTime` once the deadline has passed; report progress now and then.

        ``detail`` is a string or a callable returning one (called only when a report is
        made or the deadline has passed, so that callers in tight loops format nothing).
        """
        now = time.perf_counter()
        if (self.at is not None and now >= self.at) or self.cancelled:
            raise OutOfTime(step, _text(detail))
        if now >= self._next_report:
            self._next_report = now + self.REPORT_EVERY_S
            text = _text(detail)
            progress.report(f"{step}: {text}" if text else step)


class _Stop:
    """The cancellation of one call: a flag, and what to tell when it is raised."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []

    def add(self, hook: Callable[[], None]) -> None:
        with self._lock:
            self._hooks.append(hook)
        if self.event.is_set():
            hook()

    def remove(self, hook: Callable[[], None]) -> None:
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)

    def fire(self) -> None:
        self.event.set()
        with self._lock:
            hooks = list(self._hooks)
        for hook in hooks:
            hook()


def _text(detail: Detail) -> str:
    if detail is None:
        return ""
    return str(detail() if callable(detail) else detail)
