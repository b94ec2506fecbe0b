"""``monet-ilp solve``, ``min-budget``, ``pareto``, ``bound`` and ``grade``: solving, and what a solution is worth."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from monet_ilp.analysis.pareto import pareto_front
from monet_ilp.cli.instance import budget_notes
from monet_ilp.cli.render import (
    POSITIVE,
    SECONDS,
    console,
    err_console,
    exit_unless,
    progress_bar,
    show,
    working,
)
from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph.ir import read_json
from monet_ilp.graph.load import FILE, load_graph
from monet_ilp.heuristics import store_all
from monet_ilp.instance import FORMAT_NAME as INSTANCE_FORMAT
from monet_ilp.instance import Instance, Objective
from monet_ilp.make import make_instance, parse_budget, with_weighted_references
from monet_ilp.problems.p4.instance import P4_FORMAT, P4Instance, p4_instance_from_dict
from monet_ilp.schedule import save_schedule
from monet_ilp.solve import Status, load_hint, solve
from monet_ilp.units import human_bytes

__all__ = ["bound_cmd", "grade_cmd", "instance_from", "min_budget_cmd", "pareto_cmd", "solve_cmd"]


def p4_instance_of(path: str) -> P4Instance | None:
    """The P4 instance in ``path``, or ``None`` when the file is something else."""
    if Path(path).suffix.lower() != ".json":
        return None
    data = read_json(path)
    if isinstance(data, dict) and data.get("format") == P4_FORMAT:
        return p4_instance_from_dict(data, source=path)
    return None


def instance_from(path: str, budget: str | None) -> Instance:
    """An instance file, or a graph (node-link, training graph, ONNX) made into a P1 instance."""
    if Path(path).suffix.lower() != ".onnx":
        data = read_json(path)
        if isinstance(data, dict) and data.get("format") == INSTANCE_FORMAT:
            if budget is not None:
                raise MonetError("--budget applies to graphs; an instance has its budget already",
                                 field="--budget", fix="drop --budget, or remake the instance")
            return Instance.from_dict(data, source=path)
    g = load_graph(FILE, path, optimizer="sgd", granularity="layer", dtype=None)
    return make_instance(g, None, problem="P1",
                         budget=parse_budget(budget, field="--budget") if budget else 0.8)


@click.command("solve")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--backend", default="auto", show_default=True,
              help="auto (P1: the portfolio; P2/P3: cpsat), cpsat, milp, dp, interval, lns, or "
                   "heuristic:store_all|sqrt|greedy|evict|memory_aware|lp-round (`monet-ilp backends`).")
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True,
              help="Seconds for the whole solve, model building included (formulations/time_limits.md).")
@click.option("--workers", type=POSITIVE, default=2, show_default=True, help="Solver threads.")
@click.option("--budget", help="For a graph file: the P1 budget (0.8 = fraction of the store-all peak, or bytes).")
@click.option("--milp-solver", type=click.Choice(["highs", "cbc"]), default=None, help="MILP solver (default highs).")
@click.option("--max-computes", type=POSITIVE, default=None, help="At most this many computations per node.")
@click.option("--free-order", is_flag=True, help="Let first computations come in any topological order.")
@click.option("--encoding", default=None, help="cpsat encoding (see formulations/p1_cpsat.md).")
@click.option("--colocate", type=click.Choice(["none", "layer"]), default=None,
              help="P3: 'layer' puts a layer's forward, dX and dW on one core (default: none).")
@click.option("--max-transfers", type=click.IntRange(min=0), default=None, help="P3: transfers of a tensor into one memory (default 1).")
@click.option("--no-pin", is_flag=True, help="P3: never pin weights in SRAM.")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Random seed of the CP-SAT-based backends (cpsat, interval, lns, auto).")
@click.option("--hint", "hint_path", type=click.Path(dir_okay=False),
              help="Warm start from a schedule, a ga.json (its best point) or a decisions file.")
@click.option("--export", "export_path", type=click.Path(dir_okay=False), help="milp: write the model (.mps/.lp).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the schedule JSON here.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
def solve_cmd(path: str, backend: str, time_limit: float, workers: int, budget: str | None,
              milp_solver: str | None, max_computes: int | None, free_order: bool, encoding: str | None,
              colocate: str | None, max_transfers: int | None, no_pin: bool, seed: int | None,
              hint_path: str | None, export_path: str | None, out: str | None, json_out: str | None) -> None:
    """Solve an instance (or a graph, as P1) and verify the schedule with the evaluator.

    A P4 instance file (``monet-ilp plan --save-instance``) runs the plan search instead,
    with ``--time-limit`` and ``--json``.
    """
    p4 = p4_instance_of(path)
    if p4 is not None:  # P4: the plan search, and the plan evaluator's verdict
        from monet_ilp.cli.plan import run_plan  # P4's search loads the MILP solvers

        run_plan(p4, time_limit=time_limit, json_out=json_out, plot_out=None)
        return
    inst = instance_from(path, budget)
    for note in budget_notes(inst):
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    options: dict[str, Any] = {k: v for k, v in (("milp_solver", milp_solver), ("max_computes", max_computes),
                                                 ("encoding", encoding), ("export", export_path),
                                                 ("colocate", colocate), ("max_transfers", max_transfers),
                                                 ("seed", seed))
                               if v is not None}
    if free_order:
        options["fixed_order"] = False
    if no_pin:
        options["allow_pin"] = False
    hint = load_hint(hint_path, inst) if hint_path else None
    with working(f"solving with {backend}"):
        result = solve(inst, backend, time_limit=time_limit, workers=workers, hint=hint, **options)
    reference = evaluate(inst, store_all(inst))
    table = Table(title=f"{backend} on {inst.name}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("status", str(result.status))
    table.add_row("schedule from", result.source or "-")
    table.add_row(f"objective ({inst.objective})", "-" if result.objective is None else f"{result.objective:,}")
    table.add_row("best bound", "-" if result.bound is None else f"{result.bound:,}")
    table.add_row("gap", "-" if result.gap is None else f"{100 * result.gap:.3f} %")
    table.add_row("wall time", f"{result.wall_time_s:.2f} s")
    verdict = "-" if result.metrics is None else ("feasible" if result.metrics.feasible else "INFEASIBLE")
    table.add_row("evaluator", verdict)
    if result.objective is not None and reference.objective_value:
        # Store-all is the reference even where it breaks the budget; the label says so.
        label = "vs store-all" + ("" if reference.feasible else " (over budget)")
        table.add_row(label, f"{100 * (result.objective / reference.objective_value - 1):+.2f} %")
    if result.metrics is not None and len(inst.cores) > 1:
        m = result.metrics
        table.add_row("latency", f"{m.latency_cycles:,} cycles")
        table.add_row("energy", f"{m.energy.total_pj:,} pJ")
        for core in inst.cores:
            runs = sum(1 for r in m.schedule.ops if r.core == core.id)
            table.add_row(f"{core.id}", f"{runs} runs, peak {human_bytes(m.peak_bytes[core.memory])} "
                                        f"of {human_bytes(inst.memory(core.memory).capacity_bytes)}")
        table.add_row("recomputations / transfers / pins",
                      f"{m.recomputations} / {m.transfers} / {len(m.schedule.pinned)}")
    show(table)
    if result.bound is not None:
        console.print(f"the bound holds for {result.bound_holds_for}", markup=False, highlight=False)
    if result.message:
        console.print(result.message, markup=False, highlight=False)
    if out and result.schedule is not None:
        save_schedule(result.schedule, out)
        err_console.print(f"wrote {out}")
    if json_out:
        Path(json_out).write_text(json.dumps(result.to_dict()) + "\n")
    exit_unless(result.status in (Status.OPTIMAL, Status.FEASIBLE))


@click.command("min-budget")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True)
@click.option("--workers", type=POSITIVE, default=2, show_default=True)
def min_budget_cmd(path: str, time_limit: float, workers: int) -> None:
    """The smallest memory budget for which any schedule exists (proven by CP-SAT when it can).

    The eviction heuristic brackets it first, in a fraction of the time (a floor no
    schedule beats, and the least budget it finds a schedule for); CP-SAT's stage model
    then narrows it with half the time left, where it builds in time (its proof holds
    for its class: one pass per stage); the LNS's descent on the interval model (P1I.L5),
    which scales to large graphs, then looks below it with what remains (a fifth of the
    limit, at least 2 s, after such a proof).  The message says which schedules the
    answer is proven for.
    """
    inst = instance_from(path, None)
    # The solvers load once the instance has been read (a bad file is reported at once).
    from monet_ilp.heuristics.evict import min_budget_estimate  # numpy: only here
    from monet_ilp.problems.p1.cpsat import min_budget  # OR-Tools is heavy: only here
    from monet_ilp.problems.p1.lns import lowest_peak  # OR-Tools is heavy: only here

    began = time.perf_counter()

    def left() -> float:
        return max(1.0, time_limit - (time.perf_counter() - began))

    with working("bracketing the budget (eviction heuristic)"):
        estimate = min_budget_estimate(inst, time_limit=0.2 * time_limit)
    with working("minimising the peak (stage model)"):
        budget_bytes, proven = min_budget(inst, time_limit=0.5 * left(), workers=workers)
    # Which schedules the least budget is proven for: every one the evaluator accepts
    # (the eviction heuristic's floor, tensor by tensor), every P1 schedule (node-level
    # values: an op's outputs freed together; the interval descent's floor), or the
    # stage form's class (CP-SAT, one pass per stage).
    claim = "stage form (one pass per stage)" if proven else None
    if estimate.upper < budget_bytes or estimate.proven:
        budget_bytes, claim = estimate.upper, None
    if budget_bytes > estimate.lower:
        # A proof over a class may still leave room below it: the descent looks there
        # (briefly after a proof; otherwise with all the time left).
        seconds = min(left(), max(2.0, 0.2 * time_limit)) if claim else left()
        with working("minimising the peak (interval model, descent)"):
            found = lowest_peak(inst, time_limit=seconds, workers=workers, starts=[estimate.sequence])
        if found.peak_bytes < budget_bytes or (found.proven and found.peak_bytes <= budget_bytes):
            budget_bytes = found.peak_bytes
            claim = "every P1 schedule (an op's outputs freed together)" if found.proven else None
    peak = inst.meta.get("store_all_peak_bytes")
    share = f" ({budget_bytes / peak:.3f} of the store-all peak)" if peak else ""
    floor = f"no schedule exists below {estimate.lower:,} bytes ({estimate.lower_reason})"
    if budget_bytes <= estimate.lower:
        how = "proven for every schedule (no step of any schedule needs less)"
    elif claim:
        how = f"proven over {claim}; {floor}"
    else:
        how = f"not proven (time limit); {floor}"
    console.print(f"minimum budget: {budget_bytes:,} bytes{share}, {how}", highlight=False)


@click.command("pareto")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--points", type=POSITIVE, default=8, show_default=True, help="Solves in the ε-constraint sweep.")
@click.option("--backend", default="cpsat", show_default=True)
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True, help="Seconds per point.")
@click.option("--workers", type=POSITIVE, default=2, show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), default="pareto.json", show_default=True,
              help="The front (JSON); schedules go to <out stem>_schedules/.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Also draw the front (.png/.pdf/.svg).")
def pareto_cmd(path: str, points: int, backend: str, time_limit: float, workers: int, out: str,
               plot_path: str | None) -> None:
    """Latency/energy Pareto front by ε-constraint: verified schedules, each with its energy bound."""
    inst = instance_from(path, None)
    target = Path(out)
    with progress_bar("sweeping", points) as progress:
        front = pareto_front(inst, points=points, backend=backend, time_limit=time_limit, workers=workers,
                             schedule_dir=target.with_name(target.stem + "_schedules"), progress=progress)
    target.write_text(json.dumps(front, indent=1) + "\n")
    table = Table(title=f"Pareto front of {inst.name} ({backend}, {time_limit:g} s per point)")
    for col in ("latency (cycles)", "energy (pJ)", "energy bound (pJ)", "certified gap", "status",
                "schedule from"):
        table.add_column(col, justify="left" if col == "schedule from" else "right")
    for p in front["points"]:
        bound = p["energy_bound_pj"]
        gap = "-" if bound is None or not p["energy_pj"] else f"{100 * (p['energy_pj'] - bound) / p['energy_pj']:.2f} %"
        table.add_row(f"{p['latency_cycles']:,}", f"{p['energy_pj']:,}", "-" if bound is None else f"{bound:,.0f}",
                      gap, p["status"], p.get("source") or "-")
    show(table)
    err_console.print(f"wrote {target}")
    if not front["points"]:
        for step in front["sweep"]:
            console.print(f"{step['label']}: {step['status']}: {step['message']}", markup=False,
                          highlight=False)
    elif plot_path:
        from monet_ilp.plot import pareto  # matplotlib is heavy: loaded only for --plot

        pareto(front, plot_path)
        err_console.print(f"wrote {plot_path}")
    exit_unless(bool(front["points"]))


@click.command("bound")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--objective", type=click.Choice(["latency", "energy", "weighted", "compute"]), default=None,
              help="Bound this objective instead of the instance's.")
@click.option("--runtime-limit", type=POSITIVE, default=None, help="Energy: bound schedules of at most this latency.")
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True, help="Seconds for the solver bounds.")
@click.option("--workers", type=POSITIVE, default=2, show_default=True)
@click.option("--no-solver", is_flag=True, help="Only the combinatorial bounds (instant).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the bounds as JSON here.")
def bound_cmd(path: str, objective: str | None, runtime_limit: int | None, time_limit: float, workers: int,
              no_solver: bool, json_out: str | None) -> None:
    """The best certified lower bound on the objective, and where each bound comes from."""
    inst = instance_from(path, None)
    from monet_ilp.analysis.bounds import lower_bounds  # every solver library: after the file

    if objective is not None:
        inst = dataclasses.replace(inst, objective=Objective(objective))
        if inst.objective is Objective.WEIGHTED and "latency_ref_cycles" not in inst.meta:
            inst = with_weighted_references(inst)
    if runtime_limit is not None:
        inst = dataclasses.replace(inst, runtime_limit_cycles=runtime_limit)
    with working("bounding"):
        report = lower_bounds(inst, time_limit=time_limit, workers=workers, solver=not no_solver)
    table = Table(title=f"lower bounds on {report['objective']} of {inst.name}"
                        + (f" (latency <= {runtime_limit:,})" if runtime_limit else ""))
    for col in ("bound", "family", "value", "holds for", "seconds", "detail"):
        table.add_column(col, justify="right" if col in ("value", "seconds") else "left")
    for b in report["bounds"]:
        value = "-" if b["value"] is None else (f"{b['value']:,.6g}" if isinstance(b["value"], float)
                                                else f"{b['value']:,}")
        table.add_row(b["name"], b["family"], value, b["holds_for"], f"{b['seconds']:.2f}", b["detail"])
    show(table)
    best = report["best"]
    if best == float("inf"):
        why = next(b["detail"] for b in report["bounds"] if b["name"] == report["best_source"])
        console.print(f"no schedule exists ({report['best_source']}: {why})", highlight=False, markup=False)
    else:
        console.print(f"best lower bound: {best if best is None else format(best, ',')} ({report['best_source']}, "
                      f"holds for {report['best_holds_for']})"
                      + ("" if report["incumbent"] is None else f"; best schedule found: {report['incumbent']:,}"),
                      highlight=False, markup=False)
        if report["best_all"] is not None and report["best_all"] != best:
            console.print(f"best lower bound over every schedule: {report['best_all']:,} "
                          f"({report['best_all_source']})", highlight=False, markup=False)
    for wrong in report["errors"]:
        err_console.print(f"error: {wrong}", highlight=False, markup=False)
    if json_out:  # strict JSON has no Infinity: an infinite bound is written "inf"
        finite = json.loads(json.dumps(report, default=str),
                            parse_constant=lambda c: {"Infinity": "inf", "-Infinity": "-inf"}.get(c, c))
        Path(json_out).write_text(json.dumps(finite, indent=1) + "\n")
    exit_unless(best != float("inf") and not report["errors"])


def _number(x: float | None) -> str:
    return "-" if x is None else (f"{x:,.4g}" if isinstance(x, float) else f"{x:,}")


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


@click.command("grade")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--instance", "instance_path", required=True, type=click.Path(dir_okay=False))
@click.option("--time-limit", type=SECONDS, default=30.0, show_default=True, help="Seconds per bound solve.")
@click.option("--workers", type=POSITIVE, default=2, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the grades as JSON here.")
def grade_cmd(path: str, instance_path: str, time_limit: float, workers: int, json_out: str | None) -> None:
    """Grade a GA result, outside decisions or a schedule against certified lower bounds."""
    inst = instance_from(instance_path, None)
    from monet_ilp.analysis.grade import grade, load_points  # every solver library: after the file

    points = load_points(path, inst)
    with progress_bar("grading", len(points) + 1) as progress:
        report = grade(inst, points, time_limit=time_limit, workers=workers, progress=progress)
    table = Table(title=f"grades on {inst.name} (certified bounds, {time_limit:g} s per solve)")
    num, pct = _number, _percent
    if "latency_bound_source" in report:
        for col in ("point", "verdict", "latency", "latency bound", "gap", "energy", "energy bound at <= latency",
                    "gap ", "solver improves"):
            table.add_column(col, justify="left" if col in ("point", "verdict") else "right")
        for r in report["points"]:
            table.add_row(r["label"], "feasible" if r["feasible"] else "INFEASIBLE", num(r["latency_cycles"]),
                          num(r["latency_bound_cycles"]), pct(r["latency_gap"]), num(r["energy_pj"]),
                          num(r.get("energy_bound_pj")), pct(r.get("energy_gap")),
                          "-" if r.get("solver_improves") is None else ("yes" if r["solver_improves"] else "no"))
    else:
        for col in ("point", "verdict", report["objective"], "bound", "gap"):
            table.add_column(col, justify="left" if col in ("point", "verdict") else "right")
        for r in report["points"]:
            table.add_row(r["label"], "feasible" if r["feasible"] else "INFEASIBLE", num(r["objective"]),
                          num(r["bound"]), pct(r["gap"]))
    show(table)
    holds = (report["points"][0].get("latency_bound_holds_for") if "latency_bound_source" in report
             else report.get("bound_holds_for"))
    if holds:
        console.print(f"the bounds hold for {holds}" + (
            f"; CP-SAT's over {report['class_holds_for']} in the JSON (*_class_*)"
            if "class_holds_for" in report else ""), highlight=False, markup=False)
    for wrong in report["errors"]:
        err_console.print(f"error: {wrong}", highlight=False, markup=False)
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=1, default=str) + "\n")
    exit_unless(all(r["feasible"] for r in report["points"]) and not report["errors"])
