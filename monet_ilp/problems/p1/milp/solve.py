"""Build and solve the P1 stage MILP with HiGHS (default) or CBC; bound, status, schedule, export.

Part of the ``milp`` backend (Instance -> MILP -> Sequence), reached through
:func:`monet_ilp.solve` as ``backend="milp"``.  The model of
``formulations/p1_milp.md`` is built once as a solver-neutral sparse matrix
(:class:`~.variables.LinearModel`), handed to the engines as a
:class:`~monet_ilp.engines.milp.SparseMilp` (HiGHS through ``highspy``, CBC on an MPS
file HiGHS writes), and its solution turned into a Sequence by :mod:`.rounding`.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monet_ilp.engines.cbc import run_cbc
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.engines.export import export_path, write_model
from monet_ilp.engines.highs import run_highs
from monet_ilp.engines.milp import INTEGER_GAP, SolverRun, SparseMilp, bound_ceil, check_solver
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import best_verified
from monet_ilp.problems.p1.cpsat import min_budget
from monet_ilp.problems.p1.data import P1Data, check_p1, p1_data
from monet_ilp.problems.p1.milp.constraints import add_constraints
from monet_ilp.problems.p1.milp.objectives import total_compute_cost
from monet_ilp.problems.p1.milp.rounding import (
    BUDGET_FRACTIONS,
    THRESHOLDS,
    Plan,
    PlanCost,
    keep_by_priority,
    plan_from_sequence,
    plan_from_values,
    prune_plan,
    round_lp_solution,
    sequence_of_plan,
    start_values,
)
from monet_ilp.problems.p1.milp.variables import LinearModel, StageVariables, add_variables
from monet_ilp.problems.p1.prune import pruned_starts
from monet_ilp.results import BackendResult, Status
from monet_ilp.schedule import Schedule, Sequence

if TYPE_CHECKING:
    from pathlib import Path

    from monet_ilp.heuristics.starts import Starts
    from monet_ilp.instance import Instance

__all__ = [
    "Built",
    "MilpOptions",
    "SolverRun",
    "build_model",
    "export_model",
    "lp_bound",
    "rounding_sweep",
    "run_solver",
    "solve_milp",
    "sparse_milp",
    "with_least_budget",
]


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
    solver = check_solver(options.get("milp_solver", "highs"))
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
    #: The model as the engines take it, made on first use (:meth:`milp`).
    sparse: SparseMilp | None = field(default=None, repr=False)

    def milp(self) -> SparseMilp:
        """The model as the engines take it (made once, so that the LP and the MILP run
        share it, and CBC's MPS file)."""
        if self.sparse is None:
            self.sparse = sparse_milp(self.model)
        return self.sparse


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
    path = export_path(path, field="path")
    check_p1(instance, "milp")
    built = build_model(instance, max_computes=opts.max_computes)
    return write_model(built.milp(), path)


def _mps_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:60] or "p1"


# ====================================================================== solvers
#: MILPs at least this large run, under a time limit, in a child process that is
#: killed at the deadline (``run_highs(watch=True)``): HiGHS does not check its limit
#: everywhere (at the root of a 560 000-row model it went silent for five minutes,
#: callbacks included).
WATCHED_NONZEROS = 200_000


def run_solver(solver: str, built: Built, *, relax: bool, threads: int,
               time_limit: float | None = None, start: list[float] | None = None,
               log: bool = False, deadline: Deadline | None = None) -> SolverRun:
    """Solve the built model (its LP relaxation with ``relax``) with ``highs`` or ``cbc``.

    The solver stops at ``deadline`` (default: ``time_limit`` seconds from now), its
    set-up included; with no time left it does not start (status ``limit``).  With
    integer costs the MILP stops at an absolute gap of
    :data:`~monet_ilp.engines.milp.INTEGER_GAP`, which proves the optimum.
    """
    deadline = deadline or Deadline(time_limit)
    milp = built.milp()
    gap = INTEGER_GAP if milp.integral_objective() else 1e-9
    if solver == "highs":
        watch = deadline.limited and not relax and milp.num_nonzeros >= WATCHED_NONZEROS
        return run_highs(milp, relax=relax, threads=threads, deadline=deadline, start=start,
                         log=log, gap_abs=gap, watch=watch)
    return run_cbc(milp, relax=relax, threads=threads, deadline=deadline, start=start, log=log,
                   gap_abs=gap)


def sparse_milp(model: LinearModel) -> SparseMilp:
    """``model`` as the engines take it (names included: CBC's file and an export need them;
    the objective constant, the first computations, is named ``first_computations``)."""
    return SparseMilp.of(cost=model.col_cost, col_lb=model.col_lb, col_ub=model.col_ub,
                         row_lb=model.row_lb, row_ub=model.row_ub, start=model.row_start,
                         index=model.row_index, value=model.row_value, integer=model.col_integer,
                         offset=model.offset, col_names=list(model.col_name),
                         row_names=list(model.row_name), offset_name="first_computations",
                         contradictions=list(model.contradictions))


# ====================================================================== LP roundings (§7)
def rounding_sweep(instance: Instance, built: Built, lp_values: Seq[float] | None, *, solver: str,
                   threads: int, deadline: Deadline | None,
                   fractions: Seq[float] = BUDGET_FRACTIONS,
                   thresholds: Seq[float] = THRESHOLDS, samples: int = 16, seed: int = 0,
                   log: bool = False) -> tuple[Plan | None, PlanCost | None, dict[str, Any]]:
    """Round LP solutions at the budget fractions in turn; the first with a fitting plan wins.

    ``lp_values`` is the LP solution at the full budget (solved by the caller, which
    needs it for the bound); the smaller budgets are solved here.  Every plan is
    checked against the true capacity.  Past ``deadline`` no further budget is tried
    (a model cut short by it is dropped).
    """
    deadline = deadline or Deadline(None)
    info: dict[str, Any] = {"roundings": 0, "valid_roundings": 0}
    for fraction in fractions:
        if fraction == 1.0:
            attempt, values = built, lp_values
        else:
            if deadline.passed():
                break
            try:
                attempt = build_model(instance, max_computes=built.data.max_computes,
                                      budget_bytes=int(built.data.budget_bytes * fraction),
                                      deadline=deadline)
            except OutOfTime:
                break
            if attempt.model.contradictions:
                break
            run = run_solver(solver, attempt, relax=True, threads=threads, deadline=deadline,
                             log=log)
            values = run.values if run.status == "optimal" else None
        if values is None:
            continue
        plan, cost, tried = round_lp_solution(attempt.data, attempt.x, values,
                                              thresholds=thresholds, samples=samples, seed=seed,
                                              deadline=deadline)
        info["roundings"] += tried["roundings"]
        info["valid_roundings"] += tried["valid_roundings"]
        for floor in (0.0, 0.5):  # memory-aware rounding, against the true budget
            aware = keep_by_priority(built.data, attempt.x, values, floor=floor)
            info["roundings"] += 1
            if aware is None:
                continue
            aware = prune_plan(built.data, aware)
            _, aware_cost = sequence_of_plan(built.data, aware)
            if aware_cost.valid:
                info["valid_roundings"] += 1
                if cost is None or aware_cost.compute_cycles < cost.compute_cycles:
                    plan, cost = aware, aware_cost
        if plan is not None:
            info["budget_fraction"] = fraction
            return plan, cost, info
    return None, None, info


# ====================================================================== messages
def infeasible_message(instance: Instance, built: Built, *, lp: bool = False,
                       deadline: Deadline | None = None) -> str:
    """"infeasible at budget B", with the minimum feasible budget when CP-SAT can compute it.

    ``monet_ilp.problems.p1.cpsat.min_budget`` returns ``(bytes, proven)`` within the
    time ``deadline`` has left (at most :data:`MIN_BUDGET_SECONDS`); with no time left,
    or when it fails, the message states the budget only.
    """
    data = built.data
    what = "even the LP relaxation is infeasible" if lp else "no schedule in stage form fits"
    text = f"infeasible at budget {data.capacity_bytes} bytes ({what}"
    if built.model.contradictions:
        text += "; " + built.model.contradictions[0]
    text += ")"
    return with_least_budget(instance, text, deadline)


def with_least_budget(instance: Instance, text: str, deadline: Deadline | None = None) -> str:
    """``text`` with the least budget that fits, as CP-SAT finds it in the time left (at most
    :data:`MIN_BUDGET_SECONDS`); with no time left, or when it fails, ``text`` as it is."""
    deadline = deadline or Deadline(None)
    if deadline.passed():
        return text + "; the minimum feasible budget was not searched (time limit)"
    try:
        need, proven = min_budget(instance, deadline=deadline.sub(at_most=MIN_BUDGET_SECONDS))
    except (MonetError, OutOfTime):  # CP-SAT cannot handle the instance, or no time left
        return text
    if proven:
        return text + f"; the minimum feasible budget is {need} bytes (CP-SAT)"
    return text + f"; a budget of {need} bytes is feasible (CP-SAT, not proven minimal)"


#: Share of the time left that the LP relaxation (the bound, and the LP roundings' start)
#: may take under a time limit.
LP_SHARE = 0.5

#: Seconds at most for the minimum feasible budget in an infeasibility message (a hint,
#: not worth a long wait).
MIN_BUDGET_SECONDS = 30.0


# ====================================================================== backend
def baseline_sequences(instance: Instance, deadline: Deadline) -> list[tuple[str, Sequence]]:
    """The feasible-first heuristics' sequences, by name (``heuristics/starts.py``; Chen's
    greedy cut short at the deadline; the repair's pruned, ``p1_interval.md`` P1I.L0).

    The start candidates of the MILP, and what the backend returns when the time runs
    out before the solver has a schedule (``formulations/time_limits.md``).
    """
    return [(name, sequence) for name, sequence in pruned_starts(instance, deadline=deadline)
            if sequence is not None]


def _start_plan(instance: Instance, built: Built, hint: Schedule | Sequence | None,
                lp_values: list[float] | None, baselines: list[tuple[str, Sequence]], *,
                solver: str, threads: int,
                deadline: Deadline) -> tuple[list[float] | None, str, dict[str, Any]]:
    """A start solution: the cheapest that fits of the hint, the baselines and the LP roundings.

    The LP rounding sweep (§7) over smaller LP budgets runs only when nothing else
    fits, and within half the time left.
    """
    data, x = built.data, built.x
    candidates: list[tuple[str, Plan | None]] = []
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

    def consider(name: str, plan: Plan | None) -> None:
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
    # everything below counts (time_limits.md); a portfolio passes its own (to cancel it)
    deadline: Deadline = options.pop("_deadline", None) or Deadline(time_limit)
    starts: Starts | None = options.pop("_starts", None)
    began = deadline.started
    opts = parse_options(options)
    threads = int(workers) if workers else 1
    stats: dict[str, Any] = {"solver": opts.solver, "lp_bound": None}
    check_p1(instance, "milp")
    trivial = sum(p1_data(instance, max_computes=opts.max_computes).cost)  # every op at least once

    def done(status: Status, **kwargs: Any) -> BackendResult:
        stats["wall_s"] = round(time.perf_counter() - began, 3)
        return BackendResult(status, stats=stats, **kwargs)

    # Before the model: the baselines, to start from and to fall back on (a portfolio
    # that has made them already passes them as ``_starts``).
    baselines = (baseline_sequences(instance, deadline) if starts is None
                 else [(name, sequence) for name, sequence in starts if sequence is not None])

    def fallback(reason: str, bound: int | None) -> BackendResult:
        """The best baseline the evaluator accepts (FEASIBLE), else UNKNOWN.

        A baseline may lie outside the stage form, so its result carries the bound over
        every schedule (every op once); the model's own bound, over its class only, is
        ``stats["class_bound"]`` (BD.C1: neither is capped at the baseline's cost).
        """
        bound = trivial if bound is None else max(bound, trivial)
        known = best_verified(instance, [("given", hint), *baselines])
        if known is None:
            return done(Status.UNKNOWN, bound=bound, message=f"{reason}; no schedule known")
        name, schedule, value = known
        stats.update(start=name, class_bound=bound, bound_class="every schedule (every op once)")
        return done(Status.FEASIBLE, schedule=schedule, objective=value, bound=trivial,
                    message=f"{reason}; returning the {name} schedule", source=f"hint:{name}")

    try:
        built = build_model(instance, max_computes=opts.max_computes, deadline=deadline)
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return fallback(str(stop), None)
    if opts.export:
        write_model(built.milp(), opts.export)
    stats.update(model_stats(built))

    if built.model.contradictions:
        return done(Status.INFEASIBLE, message=infeasible_message(instance, built,
                                                                  deadline=deadline))
    lp_values = None
    lp_ceiling = None
    if opts.lp_bound:
        # At most LP_SHARE of the time left: the MILP needs the rest.
        lp = run_solver(opts.solver, built, relax=True, threads=threads,
                        deadline=deadline.sub(LP_SHARE), log=opts.log)
        stats["lp_s"] = round(lp.seconds, 3)
        if lp.status == "infeasible":
            return done(Status.INFEASIBLE, message=infeasible_message(instance, built, lp=True,
                                                                      deadline=deadline))
        if lp.status == "optimal" and lp.objective is not None:
            stats["lp_bound"] = lp.objective
            lp_ceiling = bound_ceil(lp.objective)
            lp_values = lp.values
    start = None
    if opts.warm_start:
        start, source, tried = _start_plan(instance, built, hint, lp_values, baselines,
                                           solver=opts.solver, threads=threads, deadline=deadline)
        stats["start"] = source or None
        stats["start_candidates"] = tried
    run = run_solver(opts.solver, built, relax=False, threads=threads,
                     deadline=deadline, start=start, log=opts.log)
    stats["mip_s"] = round(run.seconds, 3)
    stats["solver_status"] = run.detail
    bound = None
    if run.bound is not None:
        bound = bound_ceil(run.bound)
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
    # The bound as proved; one above the schedule's cost is a bug solve() reports (BD.C1).
    proven = run.status == "optimal" and bound is not None and bound >= cost.compute_cycles
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
    run = run_solver(opts.solver, built, relax=True, threads=int(workers) if workers else 1,
                     time_limit=time_limit, log=opts.log)
    if run.status == "infeasible":
        return math.inf
    if run.status != "optimal" or run.objective is None:
        return math.nan
    return float(run.objective)
