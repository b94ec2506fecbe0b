"""The HiGHS runner of every MILP backend, held to a :class:`~monet_ilp.engines.deadline.Deadline`.

:func:`run_highs` hands a :class:`~monet_ilp.engines.milp.SparseMilp` to HiGHS in one
piece (``highspy``), warm starts it, gives it the seconds the deadline leaves when it
starts (less the wrap-up), and interrupts it from its callbacks at that moment, since
HiGHS does not check its own limit everywhere.  ``stop_at`` interrupts it as well once
it has found a solution the caller accepts and then nothing better for a while.

HiGHS is not interrupted everywhere either: at the root of a 560 000-row model it went
silent for five minutes, callbacks included.  With ``watch`` the run takes place in a
child process that gets the deadline on the wall clock (its start-up counts), saves
every improving solution and the dual bounds it sees, and is killed :data:`GRACE_S`
seconds past the deadline; a killed run returns what it saved
(``formulations/time_limits.md``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import highspy
import numpy as np

from monet_ilp.engines.deadline import Deadline
from monet_ilp.engines.milp import SolverRun, SparseMilp, finite_or_none, trivial_run

__all__ = ["GRACE_S", "PATIENCE_S", "SWITCH_S", "child_main", "highs_lp", "python_beside_highs", "reset_threads",
           "run_highs"]

#: Seconds a watched HiGHS may overrun the deadline before it is killed (it was told to
#: stop a little before: ``Deadline.wrap_up``; incumbents and bounds are saved as found).
GRACE_S = 0.5

#: Seconds without a better solution after which ``stop_at`` interrupts HiGHS (or a
#: tenth of the time spent, if longer).
PATIENCE_S = 1.0

#: HiGHS's model statuses that mean "stopped before the end" (with or without a solution).
_STOPPED = ("kTimeLimit", "kIterationLimit", "kInterrupt", "kSolutionLimit", "kObjectiveBound",
            "kObjectiveTarget", "kMemoryLimit", "kHighsInterrupt")

Report = Callable[[str, Any], None]

#: Python's thread switch interval while a long Python computation runs beside HiGHS on
#: another thread (:data:`python_beside_highs`).
SWITCH_S = 0.0002


class _PythonBesideHighs:
    """Python's thread switch interval at :data:`SWITCH_S` while a long computation in
    Python runs beside HiGHS on another thread (the interval before it back once the last
    such computation ends; safe from several threads).

    HiGHS releases the interpreter while it solves, but its interrupt callbacks
    (:func:`run_highs`) need it many times a second.  A thread waiting for the
    interpreter asks for it only after the switch interval (5 ms by default), so beside a
    busy Python thread each callback waits that long.  The boundary relaxation of the
    random DAG n = 250 at 0.8 (``bounds.md``) reached 14,701 in 60 s alone, 14,447 beside a
    busy Python thread, and 14,701 again with the interval at 0.2 ms.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.saved = sys.getswitchinterval()

    def __enter__(self) -> None:
        with self.lock:
            if self.running == 0:
                self.saved = sys.getswitchinterval()
                sys.setswitchinterval(SWITCH_S)
            self.running += 1

    def __exit__(self, *_: object) -> None:
        with self.lock:
            self.running -= 1
            if self.running == 0:
                sys.setswitchinterval(self.saved)


#: ``with python_beside_highs:`` around the annealing of P1 and the descent of P3, which
#: portfolios run beside a HiGHS bound.
python_beside_highs = _PythonBesideHighs()


def reset_threads() -> None:
    """Start HiGHS's global scheduler afresh.

    It refuses a thread count other than the one it started with, and backends in one
    process run HiGHS with different counts: every run resets it.
    """
    highspy.Highs.resetGlobalScheduler(True)


def highs_lp(milp: SparseMilp, *, relax: bool = False, names: bool = False) -> highspy.HighsLp:
    """``milp`` as a ``highspy.HighsLp`` (without integrality when ``relax``; with the
    column and row names when ``names``)."""
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_ = milp.num_cols
    lp.num_row_ = milp.num_rows
    lp.col_cost_ = milp.cost
    lp.col_lower_ = np.where(np.isneginf(milp.col_lb), -inf, milp.col_lb)
    lp.col_upper_ = np.where(np.isposinf(milp.col_ub), inf, milp.col_ub)
    lp.row_lower_ = np.where(np.isneginf(milp.row_lb), -inf, milp.row_lb)
    lp.row_upper_ = np.where(np.isposinf(milp.row_ub), inf, milp.row_ub)
    lp.offset_ = milp.offset
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = lp.num_col_
    lp.a_matrix_.num_row_ = lp.num_row_
    lp.a_matrix_.start_ = milp.start
    lp.a_matrix_.index_ = milp.index
    lp.a_matrix_.value_ = milp.value
    if not relax and milp.integer.any():
        kind = highspy.HighsVarType
        lp.integrality_ = [kind.kInteger if flag else kind.kContinuous for flag in milp.integer]
    if names:
        if milp.col_names is None or milp.row_names is None:
            raise ValueError("the model has no names to write")
        lp.col_names_ = milp.col_names
        lp.row_names_ = milp.row_names
    return lp


def run_highs(milp: SparseMilp, *, relax: bool = False, threads: int = 1,
              deadline: Deadline | None = None, start: Sequence[float] | None = None,
              log: bool = False, gap_abs: float | None = None,
              options: Mapping[str, Any] | None = None,
              stop_at: Callable[[float], bool] | None = None, watch: bool = False,
              report: Report | None = None) -> SolverRun:
    """Solve ``milp`` (its LP relaxation with ``relax``) with HiGHS by ``deadline``.

    Parameters
    ----------
    relax
        Solve the LP relaxation (no integrality, no start, no gaps).
    threads
        HiGHS's ``threads``.
    deadline
        Stop by it, less its wrap-up (``None``: no limit).  With no time left HiGHS does
        not start (status ``limit``).
    start
        Column values to start the MILP from.
    log
        Show HiGHS's log.
    gap_abs
        The MILP's absolute gap (the relative gap is 0): e.g.
        :data:`~monet_ilp.engines.milp.INTEGER_GAP` on an integer objective.
    options
        Further HiGHS options by name (tolerances, ...).
    stop_at
        Interrupt the MILP once it has found a solution whose objective ``stop_at``
        accepts and nothing better for :data:`PATIENCE_S` seconds (or a tenth of the
        time spent); the run is then ``feasible`` with ``stopped`` set.
    watch
        Run the MILP in a child process killed :data:`GRACE_S` s past the deadline
        (only with a limited deadline; not with ``relax`` or ``stop_at``).
    report
        Called as ``report("incumbent", (values, objective))`` with each improving MILP
        solution (from a watched child, as the parent sees it, at most every 0.05 s) and
        ``report("bound", value)`` with dual bounds (in this process only).
    """
    deadline = deadline or Deadline(None)
    began = time.perf_counter()
    early = trivial_run(milp, deadline)
    if early is not None:
        return early
    until = _wall_clock(deadline)
    if watch and until is not None and deadline.at is not None and not relax and stop_at is None:
        run = _run_watched(milp, threads=threads, until=until, kill_at=deadline.at + GRACE_S,
                           start=start, log=log, gap_abs=gap_abs, options=options,
                           cancelled=lambda: deadline.cancelled, report=report)
    else:
        run = _solve_here(milp, relax=relax, threads=threads, until=until, start=start, log=log,
                          gap_abs=gap_abs, options=options, stop_at=stop_at, report=report,
                          cancelled=lambda: deadline.cancelled)
    run.seconds = time.perf_counter() - began
    return run


def _wall_clock(deadline: Deadline) -> float | None:
    """When the solver should stop, on the wall clock (``time.time()``, which a child
    process shares): the deadline less its wrap-up."""
    left = deadline.solver_limit()
    return None if left is None else time.time() + left


def _solve_here(milp: SparseMilp, *, relax: bool, threads: int, until: float | None,
                start: Sequence[float] | None, log: bool, gap_abs: float | None,
                options: Mapping[str, Any] | None, stop_at: Callable[[float], bool] | None = None,
                report: Report | None = None,
                cancelled: Callable[[], bool] | None = None) -> SolverRun:
    """Run HiGHS in this process until ``until`` (``time.time()``) or until ``cancelled()``
    (a portfolio stopping it); ``report(kind, payload)`` receives incumbents and bounds as
    they come."""
    reset_threads()
    h = highspy.Highs()
    h.setOptionValue("output_flag", bool(log))
    h.setOptionValue("threads", int(threads))
    if not relax:
        h.setOptionValue("mip_rel_gap", 0.0)
        if gap_abs is not None:
            h.setOptionValue("mip_abs_gap", float(gap_abs))
    for name, value in (options or {}).items():
        if h.setOptionValue(name, value) != highspy.HighsStatus.kOk:
            raise ValueError(f"HiGHS refuses the option {name}={value!r}")
    h.passModel(highs_lp(milp, relax=relax))
    if start is not None and not relax:
        solution = highspy.HighsSolution()
        solution.col_value = list(start)
        h.setSolution(solution)
    began = time.time()
    last: list[float] = []  # when a solution stop_at accepts was last found
    stopped: list[bool] = []
    patient = stop_at is not None and not relax
    if until is not None:
        # The limit is what is left now, after handing over the model; HiGHS's own limit
        # is not checked everywhere, so its callbacks interrupt it at ``until`` as well.
        h.setOptionValue("time_limit", max(0.01, until - time.time()))

    def interrupt(event: Any) -> None:
        if report is not None and math.isfinite(event.data_out.mip_dual_bound):
            report("bound", event.data_out.mip_dual_bound)
        now = time.time()
        if (until is not None and now > until) or (cancelled is not None and cancelled()):
            event.interrupt()
        elif last and now - last[-1] > max(PATIENCE_S, (now - began) / 10):
            stopped.append(True)
            event.interrupt()

    def improved(event: Any) -> None:
        objective = event.data_out.objective_function_value
        if report is not None:
            report("incumbent", (list(event.data_out.mip_solution), objective))
        if stop_at is not None and stop_at(objective):
            last.append(time.time())

    if until is not None or patient or cancelled is not None:
        h.cbSimplexInterrupt += interrupt
        h.cbIpmInterrupt += interrupt
        h.cbMipInterrupt += interrupt
    if (report is not None or patient) and not relax:
        h.cbMipImprovingSolution += improved
    h.run()
    return _outcome(h, relax=relax, stopped=bool(stopped))


def _outcome(h: highspy.Highs, *, relax: bool, stopped: bool) -> SolverRun:
    status = h.getModelStatus()
    info = h.getInfo()
    kind = highspy.HighsModelStatus
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = list(h.getSolution().col_value) if has_solution else None
    objective = float(info.objective_function_value) if has_solution else None
    if relax:
        bound = objective if status == kind.kOptimal else None
    else:
        bound = finite_or_none(float(info.mip_dual_bound))
    detail = str(h.modelStatusToString(status))
    if status == kind.kOptimal:
        name = "optimal"
    elif status in (kind.kInfeasible, kind.kUnboundedOrInfeasible):
        return SolverRun("infeasible", detail=detail)  # every column is bounded: never unbounded
    elif has_solution:
        name = "feasible"
    elif status in tuple(getattr(kind, s) for s in _STOPPED):
        name = "limit"
    else:
        name = "error"
    return SolverRun(name, values, objective, bound, 0.0, detail, stopped)


# ====================================================================== the watched child
def child_main(folder: str) -> None:
    """Entry point of the watched HiGHS process (``python -c``, so no user ``__main__`` runs).

    Reads ``job.pkl`` from ``folder``; writes each improving solution to
    ``incumbent.pkl``, the best dual bound seen to ``bound.txt`` (both replaced
    atomically) and the final :class:`~monet_ilp.engines.milp.SolverRun` to ``result.pkl``.
    """
    where = Path(folder)
    job = pickle.loads((where / "job.pkl").read_bytes())
    best = [-math.inf]

    def save(name: str, data: bytes) -> None:
        temporary = where / (name + ".tmp")
        temporary.write_bytes(data)
        os.replace(temporary, where / name)

    def report(kind: str, payload: Any) -> None:
        if kind == "incumbent":
            save("incumbent.pkl", pickle.dumps(payload))
        elif payload > best[0]:
            best[0] = payload
            save("bound.txt", repr(payload).encode())

    try:
        run = _solve_here(job["milp"], relax=False, threads=job["threads"], until=job["until"],
                          start=job["start"], log=job["log"], gap_abs=job["gap_abs"],
                          options=job["options"], report=report)
    except Exception as err:  # noqa: BLE001 (report it, rather than leave the parent guessing)
        run = SolverRun("error", detail=f"{type(err).__name__}: {err}")
    save("result.pkl", pickle.dumps(run))


def _run_watched(milp: SparseMilp, *, threads: int, until: float, kill_at: float,
                 start: Sequence[float] | None, log: bool, gap_abs: float | None,
                 options: Mapping[str, Any] | None,
                 cancelled: Callable[[], bool] | None = None,
                 report: Report | None = None) -> SolverRun:
    """Run HiGHS in a child process, killed at ``kill_at`` (``perf_counter``) if still running
    (or at once when ``cancelled()``).

    The child gets ``until`` on the wall clock, so its own start-up (imports, the model)
    counts.  It saves every improving solution and the dual bounds it sees, so a killed
    run still returns its incumbent and a valid bound; ``report`` gets each incumbent
    the parent sees saved.
    """
    with tempfile.TemporaryDirectory(prefix="monet-milp-") as tmp:
        where = Path(tmp)
        # Names are for files, not for solving: the child does without them.
        job = {"milp": dataclasses.replace(milp, col_names=None, row_names=None),
               "threads": threads, "until": until,
               "start": None if start is None else list(start), "log": log, "gap_abs": gap_abs,
               "options": dict(options or {})}
        (where / "job.pkl").write_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])  # the folder holding monet_ilp
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        entry = "import sys; from monet_ilp.engines.highs import child_main; child_main(sys.argv[1])"
        command = [sys.executable, "-c", entry, tmp]
        with open(where / "stderr.txt", "wb") as errors:
            child = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                     stdout=None if log else subprocess.DEVNULL, stderr=errors)
            seen = 0
            incumbent = where / "incumbent.pkl"
            try:
                while (child.poll() is None and time.perf_counter() < kill_at
                       and not (cancelled is not None and cancelled())):
                    time.sleep(0.05)
                    if report is not None and incumbent.exists() and incumbent.stat().st_mtime_ns != seen:
                        seen = incumbent.stat().st_mtime_ns
                        report("incumbent", pickle.loads(incumbent.read_bytes()))
            finally:  # the child never outlives this call, whatever ``report`` does
                killed = child.poll() is None
                if killed:
                    child.kill()
                child.wait()
        result = where / "result.pkl"
        if not killed and result.exists():
            run: SolverRun = pickle.loads(result.read_bytes())
            return run
        values = objective = bound = None
        if (where / "incumbent.pkl").exists():
            values, objective = pickle.loads((where / "incumbent.pkl").read_bytes())
        if (where / "bound.txt").exists():
            bound = float((where / "bound.txt").read_text())
        problem = (where / "stderr.txt").read_text(errors="replace").strip().splitlines()
    # Without an incumbent of its own the run has none: the caller falls back on its start
    # (and says so in the result's source).
    if not killed:
        detail = "the HiGHS process ended without a result" + (f": {problem[-1]}" if problem else "")
        return SolverRun("error" if values is None else "feasible", values, objective, bound,
                         0.0, detail)
    return SolverRun("feasible" if values is not None else "limit", values, objective, bound, 0.0,
                     "stopped at the time limit (HiGHS process killed)")
