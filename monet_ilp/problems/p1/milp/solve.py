"""Build and solve the P1 stage MILP with HiGHS (default) or CBC; bound, status, schedule, export.

Part of the ``milp`` backend (Instance -> MILP -> Sequence), reached through
:func:`monet_ilp.solve` as ``backend="milp"``.  The model of
``formulations/p1_milp.md`` is built once as a solver-neutral sparse matrix
(:class:`~.variables.LinearModel`), passed to HiGHS through ``highspy`` or to CBC
through PuLP, and its solution turned into a Sequence by :mod:`.rounding`.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import best_verified
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.engines.cbc import GRACE_S as CBC_GRACE_S
from monet_ilp.engines.cbc import run_cbc
from monet_ilp.problems.p1.milp.constraints import add_constraints
from monet_ilp.problems.p1.milp.objectives import total_compute_cost
from monet_ilp.problems.p1.milp.rounding import (
    BUDGET_FRACTIONS,
    THRESHOLDS,
    keep_by_priority,
    plan_from_sequence,
    plan_from_values,
    prune_plan,
    round_lp_solution,
    rounding_sweep,
    sequence_of_plan,
    start_values,
)
from monet_ilp.problems.p1.data import P1Data, check_p1, p1_data
from monet_ilp.problems.p1.milp.variables import LinearModel, StageVariables, add_variables
from monet_ilp.instance import Instance
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Schedule, Sequence

__all__ = [
    "Built",
    "MilpOptions",
    "SolverRun",
    "build_model",
    "export_model",
    "lp_bound",
    "run_solver",
    "solve_milp",
]

SOLVERS = ("highs", "cbc")
#: With integer costs an optimum is proven once the bound is within 0.5 of it.
INTEGER_GAP = 0.5


# ======================================================================= options
@dataclass(frozen=True)
class MilpOptions:
    """Backend options (``**options`` of :func:`solve_milp`), validated."""

    solver: str = "highs"
    max_computes: int | None = None
    export: str | None = None
    lp_bound: bool = True
    warm_start: bool = True
    log: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_options(options: Mapping[str, Any], extra: Iterable[str] = ()) -> MilpOptions:
    """Check the backend options; an unknown name raises a :class:`MonetError`."""
    known = {"milp_solver", "max_computes", "fixed_order", "export", "lp_bound", "warm_start",
             "log"}
    extra = set(extra)
    unknown = sorted(set(options) - known - extra)
    if unknown:
        raise MonetError(f"unknown option {unknown[0]!r} for the MILP backend", field=unknown[0],
                         fix=f"use one of: {', '.join(sorted(known | extra))}")
    solver = str(options.get("milp_solver", "highs")).lower()
    if solver not in SOLVERS:
        raise MonetError(f"unknown MILP solver {solver!r}", field="milp_solver",
                         fix=f"use one of: {', '.join(SOLVERS)}")
    if not options.get("fixed_order", True):
        raise MonetError("the MILP stage model needs the fixed order of first computations",
                         field="fixed_order", fix="use fixed_order=True, or the cpsat backend")
    export = options.get("export")
    return MilpOptions(
        solver=solver,
        max_computes=options.get("max_computes"),
        export=None if export is None else str(export),
        lp_bound=bool(options.get("lp_bound", True)),
        warm_start=bool(options.get("warm_start", True)),
        log=bool(options.get("log", False)),
        extra={k: v for k, v in options.items() if k in extra},
    )


# ======================================================================= the model
@dataclass
class Built:
    """A built model: the stage data, the sparse model and its columns."""

    data: P1Data
    model: LinearModel
    x: StageVariables
    seconds: float


def build_model(instance: Instance, *, max_computes: int | None = None, relax: bool = False,
                budget_bytes: int | None = None, deadline: Deadline | None = None) -> Built:
    """Build the stage MILP of ``formulations/p1_milp.md`` (its LP relaxation with ``relax``).

    ``budget_bytes`` replaces the budget the values may use (capacity minus
    persistent bytes); the schedule is still checked against the capacity.  Past
    ``deadline`` the build stops with :class:`OutOfTime` (it reports progress before).
    """
    start = time.perf_counter()
    data = p1_data(instance, max_computes=max_computes, budget_bytes=budget_bytes)
    model = LinearModel(name=_mps_name(instance.name), deadline=deadline)
    x = add_variables(model, data, relax=relax)
    add_constraints(model, data, x)
    total_compute_cost(model, data, x)
    model.deadline = None  # built: later uses (solvers, export) have their own limits
    return Built(data, model, x, time.perf_counter() - start)


def model_stats(built: Built) -> dict[str, Any]:
    model = built.model
    return {
        "variables": model.num_cols,
        "binaries": model.num_integer,
        "constraints": model.num_rows,
        "nonzeros": model.num_nonzeros,
        "columns": built.x.counts(),
        "ops": built.data.n,
        "build_s": round(built.seconds, 3),
    }


def export_model(instance: Instance, path: str | Path, **options: Any) -> Path:
    """Write the stage MILP as MPS (``.mps``) or CPLEX LP (``.lp``), chosen by the suffix.

    The file solves elsewhere (Gurobi, CPLEX, HiGHS, CBC): its optimum plus the
    objective offset (first computations, in the MPS objective constant) is the
    minimum compute cost.  Column names follow ``p1_milp.md``: ``R_t_i``,
    ``S_t_e``, ``F_t_e_k``, ``U_t_k`` (``e`` is an op index or ``x<k>`` for the k-th
    graph input).  Options: ``max_computes``.
    """
    opts = parse_options(options)
    path = Path(path)
    if path.suffix.lower() not in (".mps", ".lp"):
        raise MonetError(f"cannot tell the model format of {str(path)!r}", field="path",
                         fix="end the file name with .mps or .lp")
    check_p1(instance, "milp")
    built = build_model(instance, max_computes=opts.max_computes)
    _write(built.model, path)
    return path


def _write(model: LinearModel, path: Path) -> None:
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(_highs_lp(_model_arrays(model, names=True), relax=False))
    status = h.writeModel(str(path))
    if status != highspy.HighsStatus.kOk or not path.exists():
        raise MonetError(f"HiGHS could not write {str(path)!r}", field="export",
                         fix="check that the directory exists and is writable")


def _mps_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:60] or "p1"


# ====================================================================== solvers
@dataclass
class SolverRun:
    """What a solver returned: ``status`` is optimal, feasible, infeasible, limit or error."""

    status: str
    values: list[float] | None = None
    objective: float | None = None
    bound: float | None = None
    seconds: float = 0.0
    detail: str = ""


def run_solver(solver: str, model: LinearModel, *, relax: bool, threads: int,
               time_limit: float | None = None, start: list[float] | None = None,
               log: bool = False, deadline: Deadline | None = None) -> SolverRun:
    """Solve ``model`` (its LP relaxation with ``relax``) with ``highs`` or ``cbc``.

    The solver stops at ``deadline`` (default: ``time_limit`` seconds from now), its
    set-up included; with no time left it does not start (status ``limit``).
    """
    deadline = deadline or Deadline(time_limit)
    if model.num_cols == 0:  # every variable fixed (e.g. max_computes=1): nothing to solve
        return SolverRun("optimal", [], model.offset, model.offset, 0.0, "no free variable")
    if deadline.passed():
        return SolverRun("limit", detail="no time left to start the solver")
    if solver == "highs":
        return _run_highs(model, relax=relax, threads=threads, deadline=deadline,
                          start=start, log=log)
    return _run_cbc(model, relax=relax, threads=threads, deadline=deadline,
                    start=start, log=log)


def _model_arrays(model: LinearModel, *, names: bool = False) -> dict[str, Any]:
    """The model as plain numpy arrays (what HiGHS takes, and cheap to send to a process).

    With ``names`` (export) the objective constant becomes a column fixed at 1 (not
    every MPS reader takes an objective constant), and a violated constant row
    becomes an infeasible row, so that the file means the same anywhere.
    """
    import numpy as np

    col_lb, col_ub, names_c = list(model.col_lb), list(model.col_ub), list(model.col_name)
    row_start, row_index = list(model.row_start), list(model.row_index)
    row_value = list(model.row_value)
    row_lb, row_ub, names_r = list(model.row_lb), list(model.row_ub), list(model.row_name)
    integer = list(model.col_integer)
    cost = list(model.col_cost)
    offset = model.offset
    if names and offset:
        col_lb.append(1.0), col_ub.append(1.0), names_c.append("first_computations")
        integer.append(False), cost.append(offset)
        offset = 0.0
    if names and model.contradictions:  # keep the instance infeasible wherever the file is solved
        col_lb.append(0.0), col_ub.append(0.0), names_c.append("contradiction")
        integer.append(False), cost.append(0.0)
        row_index.append(len(col_lb) - 1), row_value.append(1.0)
        row_start.append(len(row_index)), row_lb.append(1.0), row_ub.append(math.inf)
        names_r.append("contradiction")
    return {
        "cost": np.asarray(cost, dtype=np.float64),
        "col_lb": np.asarray(col_lb, dtype=np.float64),
        "col_ub": np.asarray(col_ub, dtype=np.float64),
        "row_lb": np.asarray(row_lb, dtype=np.float64),
        "row_ub": np.asarray(row_ub, dtype=np.float64),
        "start": np.asarray(row_start, dtype=np.int32),
        "index": np.asarray(row_index, dtype=np.int32),
        "value": np.asarray(row_value, dtype=np.float64),
        "integer": np.asarray(integer, dtype=bool),
        "offset": offset,
        "col_names": names_c if names else None,
        "row_names": names_r if names else None,
        "abs_gap": INTEGER_GAP if _integral_costs(model) else 1e-9,
    }


def _highs_lp(arrays: Mapping[str, Any], *, relax: bool):
    """A ``highspy.HighsLp`` of :func:`_model_arrays` (without integrality when ``relax``)."""
    import highspy
    import numpy as np

    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_ = len(arrays["cost"])
    lp.num_row_ = len(arrays["row_lb"])
    lp.col_cost_ = arrays["cost"]
    lp.col_lower_ = arrays["col_lb"]
    lp.col_upper_ = arrays["col_ub"]
    lp.row_lower_ = np.where(np.isneginf(arrays["row_lb"]), -inf, arrays["row_lb"])
    lp.row_upper_ = np.where(np.isposinf(arrays["row_ub"]), inf, arrays["row_ub"])
    lp.offset_ = arrays["offset"]
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_ = lp.num_col_
    lp.a_matrix_.num_row_ = lp.num_row_
    lp.a_matrix_.start_ = arrays["start"]
    lp.a_matrix_.index_ = arrays["index"]
    lp.a_matrix_.value_ = arrays["value"]
    if not relax and arrays["integer"].any():
        kind = highspy.HighsVarType
        lp.integrality_ = [kind.kInteger if flag else kind.kContinuous for flag in arrays["integer"]]
    if arrays["col_names"] is not None:
        lp.col_names_ = arrays["col_names"]
        lp.row_names_ = arrays["row_names"]
    return lp


_HIGHS_THREADS: list[int] = []  # the thread count HiGHS's global scheduler was started with
#: MILPs at least this large run, under a time limit, in a child process that is
#: killed at the deadline: HiGHS does not check its limit everywhere (at the root of
#: a 560 000-row model it went silent for five minutes, callbacks included).
WATCHED_NONZEROS = 200_000
#: Seconds a watched HiGHS may overrun the deadline before it is killed (it was told to
#: stop a little before: ``Deadline.wrap_up``; incumbents and bounds are saved as found).
GRACE_S = 0.5


def _run_highs(model: LinearModel, *, relax: bool, threads: int, deadline: Deadline,
               start: list[float] | None, log: bool) -> SolverRun:
    began = time.perf_counter()
    arrays = _model_arrays(model)
    if deadline.limited and not relax and model.num_nonzeros >= WATCHED_NONZEROS:
        run = _run_highs_watched(arrays, threads=threads, deadline=deadline, start=start, log=log)
    else:
        run = _highs_solve(arrays, relax=relax, threads=threads, until=_wall_clock(deadline),
                           start=start, log=log)
    run.seconds = time.perf_counter() - began
    return run


def _wall_clock(deadline: Deadline) -> float | None:
    """When the solver should stop, on the wall clock (``time.time()``, which a child
    process shares): the deadline less its wrap-up."""
    left = deadline.solver_limit()
    return None if left is None else time.time() + left


def _highs_solve(arrays: Mapping[str, Any], *, relax: bool, threads: int,
                 until: float | None, start: Any, log: bool, report=None) -> SolverRun:
    """Run HiGHS here until ``until`` (``time.time()``); ``report(kind, payload)`` receives
    incumbents and bounds as they come."""
    import highspy

    # HiGHS refuses to run when the thread count differs from its live global scheduler's,
    # and the P2/P3 backends (PuLP's HiGHS) start that scheduler too: reset it every time.
    highspy.Highs.resetGlobalScheduler(True)
    _HIGHS_THREADS[:] = [threads]
    h = highspy.Highs()
    h.setOptionValue("output_flag", bool(log))
    h.setOptionValue("threads", int(threads))
    if not relax:
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", arrays["abs_gap"])
    h.passModel(_highs_lp(arrays, relax=relax))
    if start is not None and not relax:
        solution = highspy.HighsSolution()
        solution.col_value = list(start)
        h.setSolution(solution)
    if until is not None:
        # The limit is what is left now, after handing over the model; HiGHS's own limit
        # is not checked everywhere, so its callbacks interrupt it at the deadline as
        # well (still not everywhere, see WATCHED_NONZEROS).
        h.setOptionValue("time_limit", max(0.01, until - time.time()))

        def stop(event) -> None:
            if report is not None and math.isfinite(event.data_out.mip_dual_bound):
                report("bound", event.data_out.mip_dual_bound)
            if time.time() > until:
                event.interrupt()

        h.cbSimplexInterrupt += stop
        h.cbIpmInterrupt += stop
        h.cbMipInterrupt += stop
    if report is not None and not relax:
        def improved(event) -> None:
            report("incumbent", (list(event.data_out.mip_solution),
                                 event.data_out.objective_function_value))

        h.cbMipImprovingSolution += improved
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    kind = highspy.HighsModelStatus
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = list(h.getSolution().col_value) if has_solution else None
    objective = info.objective_function_value if has_solution else None
    if relax:
        bound = objective if status == kind.kOptimal else None
    else:
        bound = info.mip_dual_bound if math.isfinite(info.mip_dual_bound) else None
    if status == kind.kOptimal:
        name = "optimal"
    elif status in (kind.kInfeasible, kind.kUnboundedOrInfeasible):
        name = "infeasible"  # every column is bounded: never unbounded
    elif status in (kind.kTimeLimit, kind.kIterationLimit, kind.kInterrupt, kind.kSolutionLimit,
                    kind.kObjectiveBound, kind.kObjectiveTarget, kind.kMemoryLimit,
                    kind.kHighsInterrupt):
        name = "feasible" if has_solution else "limit"
    else:
        name = "error"
    return SolverRun(name, values, objective, bound, 0.0, h.modelStatusToString(status))


def _highs_child_main(folder: str) -> None:
    """Entry point of the watched HiGHS process (``python -c``, so no user ``__main__`` runs).

    Reads ``job.pkl`` from ``folder``; writes each improving solution to
    ``incumbent.pkl``, the best dual bound seen to ``bound.txt`` (both replaced
    atomically) and the final :class:`SolverRun` to ``result.pkl``.
    """
    import os
    import pickle

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
        run = _highs_solve(job["arrays"], relax=False, threads=job["threads"],
                           until=job["until"], start=job["start"], log=job["log"], report=report)
    except Exception as err:  # report it, rather than leave the parent guessing
        run = SolverRun("error", detail=f"{type(err).__name__}: {err}")
    save("result.pkl", pickle.dumps(run))


def _run_highs_watched(arrays: Mapping[str, Any], *, threads: int, deadline: Deadline,
                       start: list[float] | None, log: bool) -> SolverRun:
    """Run HiGHS in a child process, killed ``GRACE_S`` after the deadline if still running.

    The child gets the deadline on the wall clock, so its own start-up (imports, the
    model) counts.  It saves every improving solution and the dual bounds it sees, so a
    killed run still returns its incumbent (else the start) and a valid bound.
    """
    import os
    import pickle
    import subprocess
    import sys

    import monet_ilp

    with tempfile.TemporaryDirectory(prefix="monet-milp-") as tmp:
        where = Path(tmp)
        job = {"arrays": dict(arrays), "threads": threads, "until": _wall_clock(deadline),
               "start": None if start is None else list(start), "log": log}
        (where / "job.pkl").write_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        env = dict(os.environ)
        package_root = str(Path(monet_ilp.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        command = [sys.executable, "-c", "import sys; from monet_ilp.problems.p1.milp.solve "
                   "import _highs_child_main; _highs_child_main(sys.argv[1])", tmp]
        with open(where / "stderr.txt", "wb") as errors:
            child = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                     stdout=None if log else subprocess.DEVNULL, stderr=errors)
            kill_at = deadline.at + GRACE_S
            while child.poll() is None and time.perf_counter() < kill_at:
                time.sleep(0.05)
            killed = child.poll() is None
            if killed:
                child.kill()
            child.wait()
        result = where / "result.pkl"
        if not killed and result.exists():
            return pickle.loads(result.read_bytes())
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


def _integral_costs(model: LinearModel) -> bool:
    return all(float(c).is_integer() for c in model.col_cost) and float(model.offset).is_integer()


#: Seconds per nonzero that writing a model as MPS for CBC took last (first guess: 2 µs, a
#: loaded 2-core machine); a write is not started without that much time left.
_MPS_SECONDS_PER_NONZERO = [2e-6]


def _run_cbc(model: LinearModel, *, relax: bool, threads: int, deadline: Deadline,
             start: list[float] | None, log: bool) -> SolverRun:
    """CBC on the model, written as MPS by HiGHS (:func:`~.cbc.run_cbc`), by ``deadline``."""
    import highspy

    began = time.perf_counter()
    if model.contradictions:
        return SolverRun("infeasible", detail="; ".join(model.contradictions[:3]))
    # One MPS file per model, for the LP (CBC's -initialSolve solves the relaxation) and
    # the MILP: writing it is the slow part (seconds for a million nonzeros).
    # Writing cannot be interrupted: it starts only if the time left covers it (at the
    # rate the last write ran).
    cached = getattr(model, "_cbc_mps", None)
    if cached is None:
        left = deadline.left()
        if left is not None and left < _MPS_SECONDS_PER_NONZERO[0] * model.num_nonzeros:
            return SolverRun("limit", seconds=time.perf_counter() - began,
                             detail="no time left to write the model for CBC")
        folder = tempfile.TemporaryDirectory(prefix="monet-cbc-")  # removed with the model
        arrays = _model_arrays(model, names=True)
        mps = Path(folder.name) / "model.mps"
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.passModel(_highs_lp(arrays, relax=False))
        h.writeModel(str(mps))
        if model.num_nonzeros >= 10_000:
            _MPS_SECONDS_PER_NONZERO[0] = (time.perf_counter() - began) / model.num_nonzeros
        cached = model._cbc_mps = (folder, mps, arrays["col_names"], arrays["abs_gap"])
    folder, mps, names, abs_gap = cached
    with tempfile.TemporaryDirectory(prefix="monet-cbc-run-") as tmp:
        run_mps = Path(tmp) / "model.mps"
        os.symlink(mps, run_mps)  # CBC writes its log and solution next to the model
        start_file = None
        if start is not None and not relax:
            # CBC's solution format (what PuLP's COIN_CMD writes for a warm start); the
            # objective-constant column is fixed at 1.
            values = list(start) + [1.0] * (len(names) - len(start))
            start_file = Path(tmp) / "start.sol"
            start_file.write_text("Stopped on time - objective value 0\n" + "".join(
                f"{i:>7} {name} {value:>15} {0:>23}\n"
                for i, (name, value) in enumerate(zip(names, values))))
        run = run_cbc(run_mps, relax=relax, threads=threads, deadline=deadline,
                      gap_abs=None if relax else abs_gap, start=start_file, log=log)
    seconds = time.perf_counter() - began
    if run.killed:
        return SolverRun("limit", seconds=seconds,
                         detail=f"stopped at the time limit (CBC killed {CBC_GRACE_S:g} s "
                                "after it)")
    result = _cbc_result(run.log)
    if run.solution is None:
        return SolverRun("error", seconds=seconds, detail=result or "CBC wrote no solution")
    first = run.solution[0].split() if run.solution else [""]
    column = {name: c for c, name in enumerate(model.col_name)}
    values = [0.0] * model.num_cols
    for line in run.solution[1:]:
        parts = line.split()
        if parts[:1] == ["**"]:  # CBC marks infeasible rows and columns
            parts = parts[1:]
        if len(parts) >= 3 and parts[1] in column:
            values[column[parts[1]]] = float(parts[2])
    value = model.offset + sum(c * v for c, v in zip(model.col_cost, values) if c)
    status = first[0] if first else ""
    has_solution = status == "Optimal" or (len(first) >= 5 and first[4] == "objective")
    if status == "Optimal" or result.startswith("optimal"):
        return SolverRun("optimal", values, value, value, seconds, result or "optimal")
    if status in ("Infeasible", "Integer") or "infeasible" in result:
        return SolverRun("infeasible", seconds=seconds, detail=result or status.lower())
    bound = _cbc_bound(run.log)
    if has_solution and not relax:
        return SolverRun("feasible", values, value, bound, seconds, result)
    return SolverRun("limit", None, None, bound, seconds, result or " ".join(first))


def _cbc_result(text: str) -> str:
    match = re.search(r"^Result - (.*)$", text, re.MULTILINE)
    if not match:
        return ""
    line = match.group(1).strip().lower()
    if "optimal" in line:
        return "optimal: " + line
    return line


def _cbc_bound(text: str) -> float | None:
    for pattern in (r"^Lower bound:\s*(-?[\d.eE+]+)", r"best possible (-?[\d.eE+]+)"):
        found = re.findall(pattern, text, re.MULTILINE)
        if found:
            try:
                return float(found[-1])
            except ValueError:
                pass
    return None


# ====================================================================== messages
def infeasible_message(instance: Instance, built: Built, *, lp: bool = False,
                       deadline: Deadline | None = None) -> str:
    """"infeasible at budget B", with the minimum feasible budget when CP-SAT can compute it.

    ``monet_ilp.problems.p1.cpsat.min_budget`` returns ``(bytes, proven)`` within the
    time ``deadline`` has left (at most :data:`MIN_BUDGET_SECONDS`); with no time left,
    or when it cannot be imported or fails, the message states the budget only.
    """
    data = built.data
    what = "even the LP relaxation is infeasible" if lp else "no schedule in stage form fits"
    text = f"infeasible at budget {data.capacity_bytes} bytes ({what}"
    if built.model.contradictions:
        text += "; " + built.model.contradictions[0]
    text += ")"
    deadline = deadline or Deadline(None)
    if deadline.passed():
        return text + "; the minimum feasible budget was not searched (time limit)"
    try:
        from monet_ilp.problems.p1.cpsat import min_budget
    except Exception:  # the CP-SAT backend is optional here
        return text
    try:
        found = min_budget(instance, deadline=deadline.sub(at_most=MIN_BUDGET_SECONDS))
    except Exception:
        return text
    need, proven = found if isinstance(found, tuple) else (found, True)
    if isinstance(need, bool) or not isinstance(need, (int, float)):
        return text
    if proven:
        return text + f"; the minimum feasible budget is {int(need)} bytes (CP-SAT)"
    return text + f"; a budget of {int(need)} bytes is feasible (CP-SAT, not proven minimal)"


#: Share of the time left that the LP relaxation (the bound, and the LP roundings' start)
#: may take under a time limit.
LP_SHARE = 0.5

#: Seconds at most for the minimum feasible budget in an infeasibility message (a hint,
#: not worth a long wait).
MIN_BUDGET_SECONDS = 30.0


# ====================================================================== backend
def baseline_sequences(instance: Instance, deadline: Deadline) -> list[tuple[str, Sequence]]:
    """Store-all and Chen's greedy (its search cut short at the deadline), by name.

    The start candidates of the MILP, and what the backend returns when the time runs
    out before the solver has a schedule (``formulations/time_limits.md``).
    """
    from monet_ilp.heuristics import chen_greedy_sequence, store_all

    found: list[tuple[str, Sequence]] = []
    makers = (("store_all", store_all),
              ("greedy", lambda inst: chen_greedy_sequence(inst, deadline=deadline)))
    for name, make in makers:
        if found and deadline.passed():
            break
        try:
            sequence = make(instance)
        except MonetError:
            continue
        if isinstance(sequence, Sequence):
            found.append((name, sequence))
    return found


def _start_plan(instance: Instance, built: Built, hint: Schedule | Sequence | None,
                lp_values: list[float] | None, baselines: list[tuple[str, Sequence]], *,
                solver: str, threads: int,
                deadline: Deadline) -> tuple[list[float] | None, str, dict[str, Any]]:
    """A start solution: the cheapest that fits of the hint, the baselines and the LP roundings.

    The LP rounding sweep (§7) over smaller LP budgets runs only when nothing else
    fits, and within half the time left.
    """
    data, x = built.data, built.x
    candidates: list[tuple[str, Any]] = []
    if isinstance(hint, Sequence):
        candidates.append(("given", plan_from_sequence(data, hint)))
    elif hint is not None:
        candidates.append(("given", None))  # a timed Schedule has no stage form
    for name, sequence in baselines:
        candidates.append((name, plan_from_sequence(data, sequence)))
    candidates.append(("belady", keep_by_priority(data, x)))
    if lp_values is not None and not deadline.passed():
        plan, _, _ = round_lp_solution(data, x, lp_values, thresholds=THRESHOLDS, samples=8,
                                       deadline=deadline)
        candidates.append(("lp-round", plan))
        for floor in (0.0, 0.5):
            plan = keep_by_priority(data, x, lp_values, floor=floor)
            candidates.append((f"lp-keep{floor}", plan))
    best: tuple[int, str, list[float]] | None = None
    tried: dict[str, Any] = {}

    def consider(name: str, plan) -> None:
        nonlocal best
        if plan is None:
            tried[name] = "no plan in stage form"
            return
        plan = prune_plan(data, plan)
        _, cost = sequence_of_plan(data, plan)
        values = start_values(data, x, built.model.num_cols, plan) if cost.valid else None
        if values is None:
            tried[name] = cost.problem or "outside the model"
            return
        tried[name] = cost.compute_cycles
        if best is None or cost.compute_cycles < best[0]:
            best = (cost.compute_cycles, name, values)

    for name, plan in candidates:
        if best is not None and deadline.passed():
            tried[name] = "not tried (time limit)"
            continue
        consider(name, plan)
    if best is None and lp_values is not None and not deadline.passed():
        plan, _, info = rounding_sweep(instance, built, None, solver=solver, threads=threads,
                                       deadline=deadline.sub(0.5), fractions=BUDGET_FRACTIONS[1:],
                                       samples=0)
        consider(f"lp-round x{info.get('budget_fraction', '?')}", plan)
    if best is None:
        return None, "", tried
    return best[2], best[1], tried


def solve_milp(instance: Instance, *, time_limit: float | None = None, workers: int | None = None,
               hint: Schedule | Sequence | None = None, **options: Any) -> BackendResult:
    """Solve P1 exactly with Checkmate's stage MILP (``formulations/p1_milp.md``).

    Parameters
    ----------
    instance
        A P1 instance (one core whose memory holds the graph inputs).
    time_limit
        Seconds for the whole run (baselines, model, LP bound, MILP, the minimum budget
        of an infeasible instance; ``formulations/time_limits.md``).  At the limit the
        best schedule found so far is returned (FEASIBLE) with the best bound; when the
        time runs out before the solver has one, that is the best baseline the
        evaluator accepts (``source`` ``hint:<name>``).
    workers
        Solver threads (default 1).
    hint
        A Sequence in stage form to start from (§6); the solver starts from the
        cheapest that fits the model of the hint, store-all, Chen's greedy and the
        LP roundings.
    **options
        ``milp_solver``: ``"highs"`` (default) or ``"cbc"``; ``max_computes``:
        computations per op (default unlimited); ``export``: also write the model
        to this ``.mps``/``.lp`` path; ``lp_bound`` (default true): solve the LP
        relaxation first and report it; ``warm_start`` (default true); ``log``:
        show the solver's log; ``fixed_order`` must be true.

    Returns
    -------
    BackendResult
        OPTIMAL when the solver proves it, FEASIBLE at a limit with a schedule,
        UNKNOWN without one, INFEASIBLE with the budget (and the minimum feasible
        budget when the CP-SAT backend can compute it in the time left).  ``objective``
        is the schedule's compute cost, ``bound`` the best proven lower bound, rounded
        up (costs are integers; at least every op once).  ``stats``: ``lp_bound``,
        ``variables``, ``binaries``, ``constraints``, ``nonzeros``, ``columns``
        (R/S/FREE/U), ``solver``, ``solver_status``, ``start``, ``stopped``, timings.
    """
    deadline = Deadline(time_limit)  # everything below counts (time_limits.md)
    began = deadline.started
    opts = parse_options(options)
    threads = int(workers) if workers else 1
    stats: dict[str, Any] = {"solver": opts.solver, "lp_bound": None}
    check_p1(instance, "milp")
    trivial = sum(p1_data(instance, max_computes=opts.max_computes).cost)  # every op at least once

    def done(status: Status, **kwargs: Any) -> BackendResult:
        stats["wall_s"] = round(time.perf_counter() - began, 3)
        return BackendResult(status, stats=stats, **kwargs)

    # Before the model: the baselines, to start from and to fall back on.
    baselines = baseline_sequences(instance, deadline)

    def fallback(reason: str, bound: int | None) -> BackendResult:
        """The best baseline the evaluator accepts (FEASIBLE), else UNKNOWN; with ``bound``."""
        bound = trivial if bound is None else max(bound, trivial)
        known = best_verified(instance, [("given", hint)] + baselines)
        if known is None:
            return done(Status.UNKNOWN, bound=bound, message=f"{reason}; no schedule known")
        name, schedule, value = known
        stats["start"] = name
        return done(Status.FEASIBLE, schedule=schedule, objective=value, bound=min(bound, value),
                    message=f"{reason}; returning the {name} schedule", source=f"hint:{name}")

    try:
        built = build_model(instance, max_computes=opts.max_computes, deadline=deadline)
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return fallback(str(stop), None)
    if opts.export:
        path = Path(opts.export)
        if path.suffix.lower() not in (".mps", ".lp"):
            raise MonetError(f"cannot tell the model format of {opts.export!r}", field="export",
                             fix="end the file name with .mps or .lp")
        _write(built.model, path)
    stats.update(model_stats(built))

    if built.model.contradictions:
        return done(Status.INFEASIBLE, message=infeasible_message(instance, built,
                                                                  deadline=deadline))
    lp_values = None
    lp_ceiling = None
    if opts.lp_bound:
        # At most LP_SHARE of the time left: the MILP needs the rest.
        lp = run_solver(opts.solver, built.model, relax=True, threads=threads,
                        deadline=deadline.sub(LP_SHARE), log=opts.log)
        stats["lp_s"] = round(lp.seconds, 3)
        if lp.status == "infeasible":
            return done(Status.INFEASIBLE, message=infeasible_message(instance, built, lp=True,
                                                                      deadline=deadline))
        if lp.status == "optimal" and lp.objective is not None:
            stats["lp_bound"] = lp.objective
            lp_ceiling = math.ceil(lp.objective - 1e-6)
            lp_values = lp.values
    start = None
    if opts.warm_start:
        start, source, tried = _start_plan(instance, built, hint, lp_values, baselines,
                                           solver=opts.solver, threads=threads, deadline=deadline)
        stats["start"] = source or None
        stats["start_candidates"] = tried
    run = run_solver(opts.solver, built.model, relax=False, threads=threads,
                     deadline=deadline, start=start, log=opts.log)
    stats["mip_s"] = round(run.seconds, 3)
    stats["solver_status"] = run.detail
    bound = None
    if run.bound is not None:
        bound = math.ceil(run.bound - 1e-6)
    if lp_ceiling is not None:
        bound = lp_ceiling if bound is None else max(bound, lp_ceiling)
    if run.status == "infeasible":
        return done(Status.INFEASIBLE, message=infeasible_message(instance, built,
                                                                  deadline=deadline))
    values = run.values if run.values is not None else start
    source = "milp" if values is not start else f"hint:{stats.get('start')}"
    if values is None:
        if run.status == "limit":
            return fallback(f"no schedule found ({run.detail})", bound)
        return done(Status.ERROR, bound=bound, message=f"no schedule found ({run.detail})")
    bound = trivial if bound is None else max(bound, trivial)
    data = built.data
    meta = {"backend": "milp", "solver": opts.solver}
    plan = prune_plan(data, plan_from_values(data, built.x, values))
    sequence, cost = sequence_of_plan(data, plan, meta=meta)
    if not cost.valid and start is not None and values is not start:
        # A solution the solver accepted within its tolerances but the exact replay
        # rejects: fall back to the start, which the replay accepted.
        stats["rejected_solution"] = cost.problem
        run.status = "feasible"
        source = f"hint:{stats.get('start')}"
        sequence, cost = sequence_of_plan(data, prune_plan(data, plan_from_values(
            data, built.x, start)), meta=meta)
    if not cost.valid:
        return done(Status.ERROR, bound=bound,
                    message=f"the solution does not describe a valid schedule: {cost.problem}")
    proven = run.status == "optimal" and bound is not None and bound >= cost.compute_cycles
    if run.status == "optimal":
        bound = cost.compute_cycles if proven else bound
    bound = min(bound, cost.compute_cycles)
    stats["solver_objective"] = run.objective
    status = Status.OPTIMAL if proven else Status.FEASIBLE
    message = "optimal in stage form" if proven else f"stopped: {run.detail}"
    return done(status, schedule=sequence, objective=cost.compute_cycles, bound=bound,
                message=message, source=source)


def lp_bound(instance: Instance, *, time_limit: float | None = None, workers: int | None = None,
             **options: Any) -> float:
    """The optimum of the stage MILP's LP relaxation: a lower bound on the stage-form optimum.

    Returns ``math.inf`` when even the relaxation is infeasible, and ``nan`` when the
    solver stops (time limit) before proving the LP optimum.  Options:
    ``milp_solver``, ``max_computes``.
    """
    opts = parse_options(options)
    check_p1(instance, "milp")
    built = build_model(instance, max_computes=opts.max_computes, relax=True)
    if built.model.contradictions:
        return math.inf
    run = run_solver(opts.solver, built.model, relax=True, threads=int(workers) if workers else 1,
                     time_limit=time_limit, log=opts.log)
    if run.status == "infeasible":
        return math.inf
    if run.status != "optimal" or run.objective is None:
        return math.nan
    return float(run.objective)
