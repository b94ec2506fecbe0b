"""The CBC runner of every MILP backend, held to a :class:`~monet_ilp.engines.deadline.Deadline`.

:func:`run_cbc` has HiGHS write the :class:`~monet_ilp.engines.milp.SparseMilp` as one
MPS file (in C++, seconds where PuLP's writer took half a minute for a 531 683-row
model; the LP and the MILP runs of one model share it) and runs the CBC binary on it:
``-initialSolve`` for the LP relaxation, ``-solve`` for the MILP, with the seconds the
deadline leaves when CBC starts (``-sec``, elapsed time).  CBC checks that limit only
between nodes (a long root can run past it), so it is killed :data:`GRACE_S` seconds
after the deadline; the caller then has no CBC solution and falls back on its start.

The binary is the one ``pip install 'pulp[cbc]'`` puts on the ``PATH``, else the one
PuLP 3 still ships (PuLP 3.3 deprecates its ``PULP_CBC_CMD`` for 4.0; its path is a
class attribute, and reading it constructs nothing, so nothing warns).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from monet_ilp.engines.deadline import Deadline
from monet_ilp.engines.export import write_model
from monet_ilp.engines.milp import SolverRun, SparseMilp, trivial_run
from monet_ilp.errors import MonetError

__all__ = ["GRACE_S", "PREPROCESS_INFEASIBLE", "CbcRun", "cbc_path", "outcome", "run_cbc", "run_cbc_binary"]

#: Seconds CBC may run past the deadline before it is killed (it was told to stop a
#: little before: ``Deadline.wrap_up``).
GRACE_S = 0.5

#: What CBC's log says when its pre-processing finds the model infeasible: not a proof
#: (a time limit that stops the cut generators leaves this line on a feasible model), so
#: :func:`run_cbc` runs CBC again without pre-processing.
PREPROCESS_INFEASIBLE = "Pre-processing says infeasible"

#: Seconds per nonzero that writing a model as MPS took last (first guess: 2 µs, a
#: loaded 2-core machine); a write, which cannot be interrupted, is not started without
#: that much time left.
_MPS_SECONDS_PER_NONZERO = [2e-6]


def cbc_path() -> str:
    """The CBC binary: ``cbc`` on the PATH, else the one bundled with PuLP 3."""
    found = shutil.which("cbc")
    if found:
        return found
    from pulp.apis import coin_api  # PuLP takes 0.2 s to import: only to find the binary it bundles

    # A class attribute: reading it constructs nothing, so PuLP 3 does not warn.
    bundled = getattr(getattr(coin_api, "PULP_CBC_CMD", None), "pulp_cbc_path", None)
    if bundled and os.access(bundled, os.X_OK):
        return str(bundled)
    raise MonetError("no CBC binary found", field="milp_solver",
                     fix="pip install 'pulp[cbc]' (or put cbc on the PATH), "
                         "or use milp_solver='highs'")


def run_cbc(milp: SparseMilp, *, relax: bool = False, threads: int = 1,
            deadline: Deadline | None = None, start: Sequence[float] | None = None,
            log: bool = False, gap_abs: float | None = None) -> SolverRun:
    """Solve ``milp`` (its LP relaxation with ``relax``) with CBC by ``deadline``.

    ``milp`` needs names (they tie CBC's solution file to the columns).  ``start`` is
    the column values to start the MILP from (CBC's ``-mips``); ``gap_abs`` the MILP's
    absolute gap (the relative gap is 0).  With no time left to write the model or to
    start CBC, the run is ``limit``; a killed CBC is ``limit`` too (its solution is lost).
    """
    deadline = deadline or Deadline(None)
    began = time.perf_counter()
    early = trivial_run(milp, deadline)
    if early is not None:
        return early
    written = _mps_file(milp, deadline)
    if written is None:
        return SolverRun("limit", seconds=time.perf_counter() - began,
                         detail="no time left to write the model for CBC")
    mps, names = written
    with tempfile.TemporaryDirectory(prefix="monet-cbc-run-") as tmp:
        run_mps = Path(tmp) / "model.mps"
        os.symlink(mps, run_mps)  # CBC writes its log and solution next to the model
        start_file = None
        if start is not None and not relax:
            # CBC's solution format (what PuLP's COIN_CMD writes for a warm start); the
            # column the file adds for the objective constant is fixed at 1.
            values = list(start) + [1.0] * (len(names) - len(start))
            start_file = Path(tmp) / "start.sol"
            start_file.write_text("Stopped on time - objective value 0\n" + "".join(
                f"{i:>7} {name} {value:>15} {0:>23}\n"
                for i, (name, value) in enumerate(zip(names, values, strict=True))))
        run = run_cbc_binary(run_mps, relax=relax, threads=threads, deadline=deadline,
                             gap_abs=None if relax else gap_abs, start=start_file, log=log)
        if not relax and not run.killed and PREPROCESS_INFEASIBLE in run.log:
            # CBC's pre-processing says "infeasible" when the time limit cuts its cut
            # generators short (and, in some releases, on feasible models): the claim
            # stands only if the search without pre-processing proves it.
            run = run_cbc_binary(run_mps, relax=False, threads=threads, deadline=deadline,
                                 gap_abs=gap_abs, start=start_file, log=log, preprocess=False)
    seconds = time.perf_counter() - began
    if run.killed:
        return SolverRun("limit", seconds=seconds,
                         detail=f"stopped at the time limit (CBC killed {GRACE_S:g} s after it)")
    return outcome(milp, run, relax=relax, seconds=seconds)


def _mps_file(milp: SparseMilp, deadline: Deadline) -> tuple[Path, list[str]] | None:
    """The model's MPS file and its column names, written once per model (``None``: no
    time left to write it)."""
    cached = milp.files.get("cbc.mps")
    if cached is None:
        left = deadline.left()
        if left is not None and left < _MPS_SECONDS_PER_NONZERO[0] * milp.num_nonzeros:
            return None
        began = time.perf_counter()
        folder = tempfile.TemporaryDirectory(prefix="monet-cbc-")  # removed with the model
        mps = Path(folder.name) / "model.mps"
        write_model(milp, mps)
        names = milp.file_col_names()
        if milp.num_nonzeros >= 10_000:
            _MPS_SECONDS_PER_NONZERO[0] = (time.perf_counter() - began) / milp.num_nonzeros
        cached = milp.files["cbc.mps"] = (folder, mps, names)
    _, mps, names = cached
    return mps, names


def outcome(milp: SparseMilp, run: CbcRun, *, relax: bool, seconds: float) -> SolverRun:
    """What CBC's log and solution file say."""
    result = _result_line(run.log)
    if run.solution is None:
        return SolverRun("error", seconds=seconds, detail=result or "CBC wrote no solution")
    first = run.solution[0].split() if run.solution else [""]
    column = {name: c for c, name in enumerate(milp.col_names or [])}
    values = [0.0] * milp.num_cols
    for line in run.solution[1:]:
        parts = line.split()
        if parts[:1] == ["**"]:  # CBC marks infeasible rows and columns
            parts = parts[1:]
        if len(parts) >= 3 and parts[1] in column:
            values[column[parts[1]]] = float(parts[2])
    value = milp.objective_of(values)
    status = first[0] if first else ""
    has_solution = status == "Optimal" or (len(first) >= 5 and first[4] == "objective")
    if status == "Optimal" or result.startswith("optimal"):
        return SolverRun("optimal", values, value, value, seconds, result or "optimal")
    if PREPROCESS_INFEASIBLE in run.log:
        return SolverRun("limit", None, None, None, seconds,
                         "CBC's pre-processing said infeasible (not a proof: a time limit "
                         "stops it so)")
    if status in ("Infeasible", "Integer") or "infeasible" in result:
        return SolverRun("infeasible", seconds=seconds, detail=result or status.lower())
    bound = _bound(run.log)
    if has_solution and not relax:
        return SolverRun("feasible", values, value, bound, seconds, result)
    return SolverRun("limit", None, None, bound, seconds, result or " ".join(first))


def _result_line(text: str) -> str:
    """CBC's "Result - ..." line, lower case ("optimal: ..." when it says optimal)."""
    match = re.search(r"^Result - (.*)$", text, re.MULTILINE)
    if not match:
        return ""
    line = match.group(1).strip().lower()
    if "optimal" in line:
        return "optimal: " + line
    return line


def _bound(text: str) -> float | None:
    """The last lower bound in CBC's log."""
    for pattern in (r"^Lower bound:\s*(-?[\d.eE+]+)", r"best possible (-?[\d.eE+]+)"):
        found = re.findall(pattern, text, re.MULTILINE)
        if found:
            try:
                return float(found[-1])
            except ValueError:
                pass
    return None


# ====================================================================== the binary
@dataclass
class CbcRun:
    """What :func:`run_cbc_binary` saw: CBC's log, its solution file (``None`` without
    one), and whether it was killed."""

    log: str
    solution: list[str] | None
    killed: bool
    seconds: float


def run_cbc_binary(mps: Path, *, relax: bool, threads: int, deadline: Deadline,
                   gap_abs: float | None, start: Path | None = None, log: bool = False,
                   preprocess: bool = True) -> CbcRun:
    """Run the CBC binary on an MPS file by ``deadline``; killed :data:`GRACE_S` s past it.

    ``start`` is a CBC solution file to start from (``-mips``); ``relax`` solves the LP
    (``-initialSolve``) instead of the MILP (``-solve``); ``preprocess=False`` turns CBC's
    pre-processing off (``-preprocess off``).  CBC writes its log and its
    solution next to ``mps``.
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
    if not preprocess:
        args += ["-preprocess", "off"]
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
