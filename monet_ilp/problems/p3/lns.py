"""``solve_p3_lns``: large-neighbourhood search for P3 on its CP-SAT model (``p3_cpsat.md`` §8).

The model of ``formulations/p3_cpsat.md`` is built once.  The incumbent is a full
assignment of its variables: the hint's first (the given schedule, else the best
list-scheduling baseline; one CP-SAT finds on the whole model when that start lies
outside the model's class, P3L.N0), then each improving step's solution.  A step
(P3L.N1-N4):

* fixes the *decisions* outside a neighbourhood to the incumbent's: for every op outside
  it, which of its runs exist, on which core, at the pinned cost or not, and which copy
  each of its reads uses; for every item none of its ops reads or writes, its transfers
  (presence, route, source copy); the pins of the persistent tensors only fixed ops read
  (P3L.N1);
* leaves everything else free (the neighbourhood's decisions, every start, transfer,
  copy and free), hints the incumbent, and gives CP-SAT a few seconds (P3L.N2);
* draws its neighbourhood in turn from three kinds, with a seeded generator (P3L.N3):
  ``layers`` (the ops of a few layers: their allocation, variants, recomputations),
  ``window`` (the ops whose incumbent first runs start in a window of time) and
  ``tensor`` (a saved activation's producer and readers: keep, offload or recompute);
* reads the solution back as a schedule, has the evaluator check it, and takes it when
  the evaluator's objective is lower (P3L.N4).

The neighbourhood grows after a step proven optimal and shrinks after one that ran
out of time without a better schedule.  The search proves nothing: its bound is the
combinatorial one (``formulations/bounds.md``, every schedule), and ``optimal`` is
claimed only when the schedule meets it.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from monet_ilp.engines.cpsat import configured_solver
from monet_ilp.engines.deadline import Deadline, OutOfTime
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.problems.p3.bounds import backend_floor
from monet_ilp.problems.p3.cpsat import DEFAULT_PARAMS, P3CpModel, _baseline
from monet_ilp.problems.p3.data import (
    DEFAULT_MAX_COMPUTES,
    DEFAULT_MAX_TRANSFERS,
    P3Data,
    baseline_schedules,
    p3_data,
)
from monet_ilp.results import BackendResult, Status

if TYPE_CHECKING:
    from collections.abc import Iterator

    from monet_ilp.instance import Instance
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["NEIGHBOURHOODS", "P3_LNS_OPTIONS", "retime", "solve_p3_lns"]

#: The options of the ``lns`` backend on P3 beyond time_limit, workers and hint.
P3_LNS_OPTIONS = ("step_time", "size", "steps", "seed", "max_computes", "max_transfers", "log")
#: P3L.N3's kinds, in the order they take turns.
NEIGHBOURHOODS = ("layers", "window", "tensor")
#: Wall seconds of CP-SAT per step (P3L.N2), and the bounds of the neighbourhood's size
#: (ops; a ``layers`` step frees whole layers up to about this many ops).
STEP_TIME = 3.0
MIN_SIZE, MAX_SIZE = 4, 200
#: P3L.N0: the share of the time left that CP-SAT on the whole model may take to find a
#: solution of the model from a start outside its class (at least one step's time).
REPAIR_SHARE = 0.25


def solve_p3_lns(
    instance: Instance,
    *,
    time_limit: float | None = None,
    workers: int | None = None,
    hint: Schedule | Sequence | None = None,
    step_time: float = STEP_TIME,
    size: int = 12,
    steps: int | None = None,
    seed: int = 0,
    max_computes: int | None = None,
    max_transfers: int | None = None,
    log: bool = False,
    **options: Any,
) -> BackendResult:
    """Improve a P3 schedule by re-solving neighbourhoods of it with CP-SAT (module docstring).

    Parameters
    ----------
    instance
        A P3 instance (objective latency, energy or weighted).
    time_limit
        Seconds for everything (``None``: until ``steps`` steps).
    workers
        CP-SAT workers per step (default 1).
    hint
        The schedule to start from (a GA's, a solver's); default: the best
        list-scheduling baseline.
    step_time
        Wall seconds of CP-SAT per step.
    size
        The first neighbourhood's size, in ops.
    steps
        Stop after this many steps.
    seed
        Seeds the neighbourhoods and CP-SAT.
    max_computes, max_transfers
        The class P3.K3 of the model (``p3_problem.md``).

    Returns
    -------
    BackendResult
        ``feasible`` with the best schedule found and the combinatorial bound
        (``optimal`` when they meet); ``unknown`` without a start.
        ``stats["steps"]`` and ``stats["improving_steps"]`` count the steps,
        ``stats["trajectory"]`` lists ``[seconds, objective]`` at each improvement.
    """
    # The bound over every schedule when the caller (auto, P3A.2) has computed it already.
    floor: int | float | None = options.pop("_floor", None)
    if options:
        name = min(options)
        raise MonetError(f"backend 'lns' on P3 has no option {name!r}", field=name,
                         fix=f"its options are: {', '.join(P3_LNS_OPTIONS)}")
    if step_time <= 0 or size < 1:
        raise MonetError("lns needs step_time > 0 and size >= 1", field="step_time",
                         fix="pass a positive step_time and size")
    deadline = Deadline(time_limit)
    began = deadline.started
    data = _class_data(instance, max_computes, max_transfers)
    if floor is None:
        floor = backend_floor(instance, deadline)
    stats: dict[str, Any] = {"model": "p3_cpsat", "search": "lns", "hint": "given" if hint is not None else "baseline"}
    start = hint if hint is not None else _baseline(instance)
    if start is None:
        return BackendResult(Status.UNKNOWN, bound=floor, stats=stats,
                             message="no schedule to start from (no hint, no baseline)")
    best = evaluate(instance, start)
    if not best.feasible:
        return BackendResult(Status.UNKNOWN, bound=floor, stats=stats,
                             message="the start breaks the instance: the LNS needs a feasible schedule")
    best_schedule: Schedule = best.schedule
    best_value = best.objective_value
    stats["start_objective"] = best_value
    try:
        built = P3CpModel(data, deadline=deadline)
        built.add_hint(best_schedule)
    except OutOfTime as stop:
        stats["stopped"] = str(stop)
        return _result(best_schedule, best_value, floor, stats, f"{stop}; returning the start", "hint")
    proto = built.model.proto
    incumbent = _hinted(built)
    stats.update(variables=len(proto.variables), build_seconds=round(time.perf_counter() - began, 3))

    def read(solver: cp_model.CpSolver) -> tuple[Schedule, int | float | None, dict[int, int]]:
        """A step's solution: its schedule, the evaluator's objective (``None``: rejected), its values."""
        schedule, _ = built.schedule(solver, {"backend": "lns", "model": "p3_cpsat"})
        metrics = evaluate(instance, schedule)
        values = {i: solver.value(built.model.get_int_var_from_proto_index(i)) for i in range(len(proto.variables))}
        return schedule, metrics.objective_value if metrics.feasible else None, values

    # P3L.N0: the incumbent is a solution of the model.  A start outside class P3.K3 (an
    # item fetched twice into one memory, a third run) has decisions no solution has, and
    # every step from it would be infeasible.  CP-SAT first finds a solution with its runs
    # and pins (its data moves free), else one on the whole model hinted with it, else
    # the list-scheduling baselines are tried as starts; the search goes on from the first
    # solution found (its best is still the given start).
    current = best_value
    whole = set(range(len(data.ops)))

    def tries() -> Iterator[tuple[str, set[int], bool, Schedule | None]]:
        """(name, ops freed, data moves kept, a baseline to start from instead)."""
        yield "check", set(), True, None
        yield "moves", set(), False, None
        yield "repair", whole, True, None
        if hint is not None:  # made only when needed
            for k, (ok, _, other) in enumerate(baseline_schedules(instance)):
                if ok:
                    yield f"baseline {k}", set(), True, other

    for name, free, moves, other in tries():
        left = deadline.left()
        if deadline.passed(margin=0.1):
            break
        if other is not None:  # a baseline's decisions as the incumbent
            built.model.clear_hints()  # type: ignore[no-untyped-call]  # OR-Tools leaves it unannotated
            built.add_hint(other)
            incumbent = _hinted(built)
        # The repair stops at its first solution, with at most REPAIR_SHARE of the time left.
        limit = max(step_time, REPAIR_SHARE * (left or 4 * step_time)) if name == "repair" else step_time
        status, solver = _step(built, incumbent, free, deadline=deadline, step_time=limit, workers=workers,
                               seed=seed, log=log, first=name != "moves", moves=moves)
        stats[f"{name}_status"] = status
        if solver is None:
            continue
        schedule, value, values = read(solver)
        if value is None:
            continue
        incumbent, current = values, value
        if value < best_value:
            best_schedule, best_value = schedule, value
        if name != "check":
            stats[f"{name}_objective"] = value
        break

    rng = random.Random(seed)
    done = improving = 0
    statuses: dict[str, int] = {}
    trajectory: list[list[float]] = [[round(time.perf_counter() - began, 3), best_value]]
    while (steps is None or done < steps) and not deadline.passed(margin=0.1):
        kind = NEIGHBOURHOODS[done % len(NEIGHBOURHOODS)]
        free = _neighbourhood(built, incumbent, kind, size, rng)
        status, solver = _step(built, incumbent, free, deadline=deadline, step_time=step_time,
                               workers=workers, seed=seed + done, log=log)
        done += 1
        statuses[status] = statuses.get(status, 0) + 1
        better = False
        if solver is not None:
            schedule, value, values = read(solver)
            if value is not None and value < current:
                incumbent, current, better = values, value, True
                improving += 1
                if value < best_value:
                    best_schedule, best_value = schedule, value
                    trajectory.append([round(time.perf_counter() - began, 3), best_value])
        if status == "OPTIMAL":
            size = min(MAX_SIZE, int(size * 1.3) + 1)
        elif not better:
            size = max(MIN_SIZE, int(size * 0.85))
        if floor is not None and best_value <= floor:
            break
    stats.update(steps=done, improving_steps=improving, trajectory=trajectory, last_size=size,
                 step_statuses=statuses)
    source = "lns" if improving else "hint"
    return _result(best_schedule, best_value, floor, stats,
                   f"{done} LNS steps, {improving} improving (objective {stats['start_objective']} -> "
                   f"{best_value}); bound: every schedule (combinatorial)", source)


def retime(instance: Instance, schedule: Schedule, *, time_limit: float, workers: int | None = None,
           seed: int = 0, max_computes: int | None = None, max_transfers: int | None = None
           ) -> tuple[Schedule, int | float] | None:
    """P3L.T1: ``schedule``'s decisions (runs, cores, variants, pins, transfers, reads)
    fixed in the model, every start, end and free left to CP-SAT, solved for at most
    ``time_limit`` seconds: the best timing of those decisions that the model has, and its
    value by the evaluator.  ``None`` when the model has no solution with them (the
    schedule lies outside class P3.K3) or none is found in time.  The result is a
    solution of the model, so it is a complete hint for CP-SAT (a decoder's schedule,
    timed by the decoder's rules, is not: CP-SAT may find nothing from it)."""
    deadline = Deadline(time_limit)
    data = _class_data(instance, max_computes, max_transfers)
    try:
        built = P3CpModel(data, deadline=deadline)
        built.add_hint(schedule)
    except OutOfTime:
        return None
    _, solver = _step(built, _hinted(built), set(), deadline=deadline, step_time=time_limit, workers=workers,
                      seed=seed, log=False)
    if solver is None:
        return None
    timed, _ = built.schedule(solver, {"backend": "lns", "model": "p3_cpsat", "retimed": True})
    metrics = evaluate(instance, timed)
    return (metrics.schedule, metrics.objective_value) if metrics.feasible else None


def _class_data(instance: Instance, max_computes: int | None, max_transfers: int | None) -> P3Data:
    """The model's data for class P3.K3 with these limits (the defaults where ``None``)."""
    return p3_data(instance,
                   max_computes=DEFAULT_MAX_COMPUTES if max_computes is None else max_computes,
                   max_transfers=DEFAULT_MAX_TRANSFERS if max_transfers is None else max_transfers)


def _hinted(built: P3CpModel) -> dict[int, int]:
    """The model's hint as an incumbent: variable index -> value."""
    hint = built.model.proto.solution_hint
    return dict(zip(hint.vars, hint.values, strict=True))


def _result(schedule: Schedule, value: int | float, floor: int | float | None, stats: dict[str, Any],
            message: str, source: str) -> BackendResult:
    proven = floor is not None and value <= floor
    # The floor as proved, never replaced by the value (BD.C1): above it, solve() says error.
    return BackendResult(Status.OPTIMAL if proven else Status.FEASIBLE, schedule, value, floor, message,
                         {**stats, "bound_class": "every schedule (the floor, BD.B1-B6, B9, B12, BD.E)"},
                         source=source)


def _neighbourhood(built: P3CpModel, incumbent: dict[int, int], kind: str, size: int,
                   rng: random.Random) -> set[int]:
    """P3L.N3: the ops whose decisions a step frees."""
    data = built.data
    n = len(data.ops)
    size = min(size, n)
    if kind == "layers":
        layers: dict[str, list[int]] = {}
        for op in data.ops:
            layers.setdefault(op.layer or op.id, []).append(op.index)
        names = list(layers)
        rng.shuffle(names)
        free: set[int] = set()
        for name in names:
            if free and len(free) + len(layers[name]) > size:
                break
            free.update(layers[name])
        return free
    if kind == "window":
        starts = sorted((incumbent.get(built.runs[v][0].start.index, 0), v) for v in range(n))
        first = rng.randrange(max(1, n - size + 1))
        return {v for _, v in starts[first:first + size]}
    # tensor: a saved activation's producer and its readers, and more until ``size``.
    free = set()
    items = [it for it in data.items if it.producer is not None]
    rng.shuffle(items)
    for item in items:
        assert item.producer is not None
        group = {item.producer, *item.readers}
        if free and len(free) + len(group) > size:
            break
        free |= group
    return free


def _step(built: P3CpModel, incumbent: dict[int, int], free: set[int], *, deadline: Deadline,
          step_time: float, workers: int | None, seed: int, log: bool,
          first: bool = False, moves: bool = True) -> tuple[str, cp_model.CpSolver | None]:
    """P3L.N1-N2: fix the decisions outside ``free``, hint the incumbent, solve (``first``:
    stop at the first solution; ``moves=False``: leave every transfer and read choice free)."""
    step = built.model.clone()
    proto = step.proto
    fixed: set[int] = set()

    def pin(var: Any) -> None:
        if isinstance(var, int):
            return
        index = var.index
        value = incumbent.get(index)
        if value is not None and index not in fixed:
            fixed.add(index)
            proto.variables[index].domain.clear()
            proto.variables[index].domain.extend([value, value])

    data = built.data
    for op in data.ops:
        if op.index in free:
            continue
        for run in built.runs[op.index]:
            pin(run.present)
            for alt in run.alts:
                pin(alt.lit)
    # The items a freed op reads or writes keep every choice open; the others keep their
    # transfers (presence, route, source) and the copies their reads use.
    items = {i for v in free for i in (*data.ops[v].reads, *data.ops[v].writes)}
    if not moves:
        items = {x.item for x in built.transfers} | {i for (_, _, _, i) in built.reads}
    for x in built.transfers:
        if x.item in items:
            continue
        pin(x.present)
        for mv, sources in x.sources:
            pin(mv.lit)
            for _, sigma in sources:
                pin(sigma)
    for (v, _, _, i), choice in built.reads.items():
        if v not in free and i not in items:
            for _, y in choice:
                pin(y)
    persistent = {p for v in free for p in data.ops[v].persistent_reads}
    for (p, _), lit in built.pins.items():
        if p not in persistent:  # only fixed ops read it
            pin(lit)
    step.clear_hints()  # type: ignore[no-untyped-call]  # OR-Tools leaves it unannotated
    for index, value in incumbent.items():
        step.add_hint(step.get_int_var_from_proto_index(index), value)
    limit = deadline.solver_limit()
    solver = configured_solver(time_limit=step_time if limit is None else min(step_time, limit),
                               workers=workers or 1, seed=seed, log=log, defaults=DEFAULT_PARAMS)
    solver.parameters.stop_after_first_solution = first
    with deadline.on_cancel(solver.stop_search):
        status = solver.solve(step)
    name = str(solver.status_name(status))
    return name, solver if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
