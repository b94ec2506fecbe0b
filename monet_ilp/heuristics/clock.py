"""What the heuristics take as a deadline: anything with ``passed()``.

The heuristics sit beside :mod:`monet_ilp.engines` (neither imports the other), so they
take a :class:`~monet_ilp.engines.deadline.Deadline` by this protocol.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Clock"]


class Clock(Protocol):
    """A deadline (:class:`~monet_ilp.engines.deadline.Deadline`): anything with ``passed()``."""

    def passed(self) -> bool: ...
