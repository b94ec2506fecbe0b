"""Progress of long steps (model building, solving), reported by whoever does the work.

Backends and builders call :func:`report` with a short line ("building the P3 MILP:
12,000 of 48,000 rows"); whoever shows progress (the CLI's spinner) installs a
listener with :func:`listening`.  Without a listener a report costs one lookup, so
library code may report freely; a listener lives in a context variable, so
concurrent solves in threads do not see each other's reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Listener = Callable[[str], None]

_listener: ContextVar[Listener | None] = ContextVar("monet_ilp_progress", default=None)


def report(message: str) -> None:
    """Tell the current listener, if any, what the long step is doing now."""
    listener = _listener.get()
    if listener is not None:
        listener(message)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send every :func:`report` made inside the block to ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
