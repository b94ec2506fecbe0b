"""Test-only backends, registered when a manifest lists this module under ``plugins``.

The batch workers import it too, so these are real backends in real worker
processes: one that sleeps (and then answers with the store-all baseline), one that
raises, and one whose process dies without a word.
"""

from __future__ import annotations

import os
import time

from monet_ilp.solve import BackendResult, Status, register_backend


def _sleep(instance, *, time_limit=None, workers=None, hint=None, seconds: float = 60.0, **options):
    """Ignore the time limit: sleep, then return the store-all schedule."""
    from monet_ilp.heuristics import HEURISTICS

    time.sleep(seconds)
    return BackendResult(Status.FEASIBLE, HEURISTICS["store_all"](instance), message=f"slept {seconds} s")


def _raise(instance, **kwargs):
    raise RuntimeError("boom: this backend always fails")


def _crash(instance, **kwargs):
    os._exit(7)


register_backend("test:sleep", lambda: _sleep)
register_backend("test:raise", lambda: _raise)
register_backend("test:crash", lambda: _crash)
