"""CBC through PuLP 3's ``COIN_CMD``, held to a :class:`~monet_ilp.engines.deadline.Deadline`.

``PULP_CBC_CMD`` (the class that runs the CBC binary PuLP bundles) is deprecated in
PuLP 3.3 and goes in 4.0, whose advice is ``pip install pulp[cbc]`` and ``COIN_CMD``.
:class:`Cbc` is ``COIN_CMD`` on the first CBC it finds: a ``cbc`` on the ``PATH``
(what ``pulp[cbc]`` installs), else the binary PuLP 3 still ships.  Nothing here
constructs ``PULP_CBC_CMD``, so nothing warns.

CBC gets its time limit (``-sec``) when it starts, after PuLP has written the MPS
file: the seconds the deadline has left then, not those it had when the solver was
set up.  CBC checks that limit only between nodes (a long root can run past it), so a
watchdog kills the process :data:`GRACE_S` seconds after the deadline; the caller
then has no CBC solution and falls back on its start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pulp

from monet_ilp.errors import MonetError
from monet_ilp.engines.deadline import Deadline

__all__ = ["GRACE_S", "Cbc", "CbcKilled", "CbcRun", "cbc_path", "run_cbc"]

#: Seconds CBC may run past the deadline before the watchdog kills it (it was told to
#: stop a little before: ``Deadline.wrap_up``).
GRACE_S = 0.5


#: Seconds per nonzero PuLP took to write the last MPS file (first guess: 10 µs).
_PULP_MPS_SECONDS_PER_NONZERO = [1e-5]


class CbcKilled(Exception):
    """CBC ran past the deadline and was killed (no solution file)."""


def cbc_path() -> str:
    """The CBC binary: ``cbc`` on the PATH, else the one bundled with PuLP 3."""
    found = shutil.which("cbc")
    if found:
        return found
    from pulp.apis import coin_api

    # A class attribute: reading it constructs nothing, so PuLP 3 does not warn.
    bundled = getattr(getattr(coin_api, "PULP_CBC_CMD", None), "pulp_cbc_path", None)
    if bundled and os.access(bundled, os.X_OK):
        return bundled
    raise MonetError("no CBC binary found", field="milp_solver",
                     fix="pip install 'pulp[cbc]' (or put cbc on the PATH), "
                         "or use milp_solver='highs'")


class Cbc(pulp.COIN_CMD):
    """``pulp.COIN_CMD`` whose ``-sec`` is what the deadline has left when CBC starts.

    Parameters
    ----------
    deadline
        The backend call's deadline (``None``: no limit beyond ``timeLimit``).
    **options
        ``COIN_CMD``'s options (``mip``, ``msg``, ``threads``, ``gapRel``, ``gapAbs``,
        ``warmStart``, ``logPath``, ...); ``timeLimit`` caps the seconds further.
    """

    def __init__(self, *, deadline: Deadline | None = None, **options):
        self.deadline = deadline
        self._cap = None
        super().__init__(path=cbc_path(), **options)
        # Our own folder for PuLP's temporary files: the watchdog recognises the CBC
        # process of this solve by it, and nothing is left behind.
        self._folder = tempfile.TemporaryDirectory(prefix="monet-cbc-")
        self.tmpDir = self._folder.name

    # PuLP reads ``self.timeLimit`` when it builds CBC's command line, after writing
    # the model: a property makes that read return the time left at that moment.
    @property
    def timeLimit(self):  # noqa: N802 (PuLP's name)
        left = None if self.deadline is None else self.deadline.solver_limit()
        if left is None:
            return self._cap
        return left if self._cap is None else min(left, self._cap)

    @timeLimit.setter
    def timeLimit(self, value):  # noqa: N802
        self._cap = value

    def actualSolve(self, lp, **kwargs):  # noqa: N802 (PuLP's name)
        if self.deadline is not None and self.deadline.passed():
            raise CbcKilled("no time left to start CBC")
        # PuLP writes the MPS file in Python, which cannot be interrupted: start only if
        # the time left covers it (at the rate the last write ran), and time this one.
        nonzeros = sum(len(c) for c in lp.constraints())
        left = None if self.deadline is None else self.deadline.left()
        if left is not None and left < _PULP_MPS_SECONDS_PER_NONZERO[0] * nonzeros:
            raise CbcKilled("no time left to write the model for CBC")
        write = lp.writeMPS

        def timed_write(*args, **kw):
            began = time.perf_counter()
            try:
                return write(*args, **kw)
            finally:
                if nonzeros >= 10_000:
                    _PULP_MPS_SECONDS_PER_NONZERO[0] = (time.perf_counter() - began) / nonzeros

        lp.writeMPS = timed_write  # this solve only: removed below
        stop = threading.Event()
        killed: list[int] = []
        watchdog = None
        if self.deadline is not None and self.deadline.limited:
            watchdog = threading.Thread(target=self._watch, args=(stop, killed), daemon=True)
            watchdog.start()
        try:
            return super().actualSolve(lp, **kwargs)
        except pulp.PulpSolverError:
            if killed:
                raise CbcKilled(f"CBC ran {GRACE_S:g} s past the time limit and was killed"
                                ) from None
            raise
        finally:
            del lp.writeMPS
            stop.set()
            if watchdog is not None:
                watchdog.join()
            self._folder.cleanup()

    def _watch(self, stop: threading.Event, killed: list[int]) -> None:
        """Kill this solve's CBC process once the deadline plus :data:`GRACE_S` has passed."""
        while not stop.wait(0.1):
            if time.perf_counter() < self.deadline.at + GRACE_S:
                continue
            for pid in _children_using(self.tmpDir):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except OSError:
                    pass
            if killed:
                return


def _children_using(folder: str) -> list[int]:
    """This process's children whose command line names ``folder`` (Linux ``/proc``)."""
    found = []
    me = str(os.getpid())
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            parent = stat[stat.rindex(")") + 2:].split()[1]
            if parent == me and folder in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@dataclass
class CbcRun:
    """What :func:`run_cbc` saw: CBC's log, its solution file (``None`` without one), and
    whether the watchdog killed it."""

    log: str
    solution: list[str] | None
    killed: bool
    seconds: float


def run_cbc(mps: Path, *, relax: bool, threads: int, deadline: Deadline, gap_abs: float | None,
            start: Path | None = None, log: bool = False) -> CbcRun:
    """Run the CBC binary on an MPS file by ``deadline`` (the P1 MILP's path, without PuLP).

    The P1 backend builds its model as arrays, and HiGHS writes them as MPS in C++ in a
    fraction of the time PuLP takes to rebuild and write them in Python; CBC then gets
    the seconds left (``-sec``), and is killed :data:`GRACE_S` seconds past the deadline.
    ``start`` is a CBC solution file to start from (``-mips``); ``relax`` solves the LP
    (``-initialSolve``) instead of the MILP (``-solve``).
    """
    began = time.perf_counter()
    solution = mps.with_suffix(".sol")
    args = [cbc_path(), str(mps)]
    if start is not None and not relax:
        args += ["-mips", str(start)]
    left = deadline.solver_limit()
    if left is not None:
        args += ["-sec", f"{left:.3f}"]
    args += ["-timeMode", "elapsed", "-threads", str(int(threads))]
    if not relax:
        args += ["-ratio", "0"] + ([] if gap_abs is None else ["-allow", repr(float(gap_abs))])
    args += ["-solve" if not relax else "-initialSolve", "-printingOptions", "all",
             "-solution", str(solution)]
    log_path = mps.with_suffix(".log")
    with open(log_path, "wb") as out:
        child = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        kill_at = None if deadline.at is None else deadline.at + GRACE_S
        while child.poll() is None and (kill_at is None or time.perf_counter() < kill_at):
            time.sleep(0.05)
        killed = child.poll() is None
        if killed:
            child.kill()
        child.wait()
    text = log_path.read_text(errors="replace")
    if log:
        print(text)
    lines = solution.read_text().splitlines() if solution.exists() and not killed else None
    return CbcRun(text, lines, killed, time.perf_counter() - began)
