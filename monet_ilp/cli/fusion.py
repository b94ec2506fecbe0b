"""``monet-ilp fusion``: layer fusion (``formulations/fusion.md``): what can be fused, and the
search for the best fusion plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from monet_ilp.analysis.fusion import fusion_exact, fusion_search
from monet_ilp.cli.hardware import load_hw
from monet_ilp.cli.instance import graph_from
from monet_ilp.cli.render import POSITIVE, F, err_console, exit_unless, import_options, show
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.graph.fusion import Axis, chains, fusable
from monet_ilp.graph.ir import OpKind
from monet_ilp.hardware.schema import parse_size
from monet_ilp.results import Status
from monet_ilp.units import human_bytes

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.hardware.model import Hardware

__all__ = ["fusion"]


def _graph_options(f: F) -> F:
    """``--model``/``-p``/``--graph``, ``--phase`` and the import options."""
    f = import_options(f)
    f = click.option("--phase", type=click.Choice(["training", "inference"]), default="training",
                     show_default=True, help="The training step, or its forward part only.")(f)
    f = click.option("--graph", "graph_path", type=click.Path(dir_okay=False),
                     help="A graph file (ONNX or JSON) instead of --model.")(f)
    f = click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="Zoo model parameter.")(f)
    f = click.option("--model", help="Zoo model name (see `monet-ilp graph build --help`).")(f)
    return f


def _instance_options(f: F) -> F:
    """``--hw``/``--set``, ``--problem``, ``--sram-budget``/``--budget``, ``--objective`` and ``--axis``."""
    f = click.option("--axis", type=click.Choice([a.value for a in Axis]), default="rows", show_default=True)(f)
    f = click.option("--objective", type=click.Choice(["latency", "energy", "weighted"]), default="latency",
                     show_default=True)(f)
    f = click.option("--budget", type=float, help="P1/P2: the budget as a fraction of the store-all peak.")(f)
    f = click.option("--sram-budget", help="P3: every core's SRAM capacity in bytes (e.g. 3MiB).")(f)
    f = click.option("--problem", type=click.Choice(["P1", "P2", "P3"]), default="P3", show_default=True)(f)
    f = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Hardware preset parameter.")(f)
    f = click.option("--hw", "hw_source", required=True, help="Hardware preset or YAML file.")(f)
    return f


@click.group()
def fusion() -> None:
    """Layer fusion: fused stacks run tile by tile (formulations/fusion.md)."""


@fusion.command("chains")
@_graph_options
@click.option("--axis", type=click.Choice([a.value for a in Axis]), default="rows", show_default=True)
def chains_cmd(model: str | None, params: tuple[str, ...], graph_path: str | None, phase: str, axis: str,
               optimizer: str, granularity: str, dtype: str | None) -> None:
    """Which forward ops can be fused along an axis, the chains stacks are cut from, and why
    the others cannot."""
    g = graph_from(model, params, graph_path, optimizer, granularity, dtype)
    if phase == "inference":
        g = inference_graph(g)
    runs = chains(g, Axis(axis))
    table = Table(title=f"{g.name}: chains of fusable forward ops along {axis}")
    table.add_column("chain", justify="right")
    table.add_column("ops")
    table.add_column("first .. last")
    for i, run in enumerate(runs):
        table.add_row(str(i), str(len(run)), f"{run[0]} .. {run[-1]}")
    show(table)
    for op in g.ops:
        if op.kind is OpKind.FORWARD:
            why = fusable(op, g, Axis(axis))
            if why is not None:
                err_console.print(f"not fusable: {op.id}: {why}", markup=False, highlight=False, soft_wrap=True)


@fusion.command("search")
@_graph_options
@_instance_options
@click.option("--tiles", default="2,4,8", show_default=True, help="The tile counts to try, comma-separated.")
@click.option("--backend", default="auto", show_default=True, help="The backend that solves the finalists.")
@click.option("--time-limit", type=POSITIVE, default=60, show_default=True, help="Seconds per finalist.")
@click.option("--screen-backend", default="heuristic:memory_aware", show_default=True,
              help="The backend that screens every candidate plan.")
@click.option("--search-time", type=POSITIVE, default=None, help="Seconds of greedy screening (default: until no move improves).")
@click.option("--finalists", type=POSITIVE, default=3, show_default=True)
@click.option("--workers", type=POSITIVE, default=None)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the best plan (JSON) here.")
def search_cmd(model: str | None, params: tuple[str, ...], graph_path: str | None, phase: str, hw_source: str,
               sets: tuple[str, ...], problem: str, sram_budget: str | None, budget: float | None, objective: str,
               axis: str, tiles: str, backend: str, time_limit: int, screen_backend: str, search_time: int | None,
               finalists: int, workers: int | None, out: str | None, optimizer: str, granularity: str,
               dtype: str | None) -> None:
    """Search fusion plans (layer by layer, whole chains, Stream's rule, a greedy) and solve the best.

    Every schedule is verified by the evaluator; each row's bound holds for the schedules
    of its own tiled instance in the backend's class (fusion.md FU.K1), not for other plans.
    """
    g = graph_from(model, params, graph_path, optimizer, granularity, dtype)
    if phase == "inference":
        g = inference_graph(g)
    hardware = load_hw(hw_source, sets)
    counts = _counts(tiles)
    found = fusion_search(g, hardware, problem=problem, objective=objective,
                          sram_budget=parse_size(sram_budget, field="--sram-budget") if sram_budget else None,
                          budget=budget, axis=axis, tiles=counts, backend=backend, time_limit=time_limit,
                          screen_backend=screen_backend, search_time=search_time, finalists=finalists,
                          workers=workers,
                          log=lambda line: err_console.print(line, markup=False, highlight=False))
    for note in found.notes:
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    table = Table(title=f"{g.name} on {hardware.name}: fusion plans ({objective}), "
                        f"{found.screened} screened in {found.seconds:.0f} s")
    every = found.bound_every_plan
    for col in ("plan", "from", "status", objective, "bound (its plan)", "gap", "gap (every plan)", "latency",
                "energy (pJ)", "DRAM bytes", "peak SRAM"):
        table.add_column(col, justify="left" if col in ("plan", "from", "status") else "right")
    errors = False
    for row in found.rows:
        r, m = row.result, row.result.metrics
        errors |= r.status is Status.ERROR
        table.add_row(row.summary(), row.strategy, str(r.status),
                      "-" if r.objective is None else f"{r.objective:,}",
                      "-" if r.bound is None else f"{r.bound:,}",
                      "-" if r.gap is None else f"{100 * r.gap:.1f} %",
                      _percent(found.gap_every_plan(row)),
                      "-" if m is None else f"{m.latency_cycles:,}",
                      "-" if m is None else f"{m.energy.total_pj:,}",
                      "-" if row.dram_bytes is None else human_bytes(row.dram_bytes),
                      "-" if row.peak_sram_bytes is None else human_bytes(row.peak_sram_bytes))
    show(table)
    if every is not None:
        err_console.print(f"bound over every schedule of every fusion plan (FU.B): {every:,} "
                          f"({found.bound.compute_cycles:,} compute cycles on {found.bound.cores} cores)",
                          markup=False, highlight=False)
    for wrong in found.errors:
        err_console.print(f"error: {wrong}", markup=False, highlight=False, soft_wrap=True)
    if out:
        Path(out).write_text(json.dumps(found.best.plan.to_dict(), indent=1) + "\n")
        err_console.print(f"wrote {out} (the best plan: {found.best.summary()})")
    exit_unless(not errors and not found.errors)



@fusion.command("exact")
@_graph_options
@_instance_options
@click.option("--tiles", default="2,4,8", show_default=True, help="The tile counts of the class, comma-separated.")
@click.option("--backend", default="cpsat", show_default=True, help="The exact backend that solves every plan.")
@click.option("--time-limit", type=POSITIVE, default=60, show_default=True, help="Seconds per plan.")
@click.option("--max-plans", type=POSITIVE, default=64, show_default=True,
              help="Refuse a class with more plans than this.")
@click.option("--workers", type=POSITIVE, default=None)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the best plan (JSON) here.")
def exact_cmd(model: str | None, params: tuple[str, ...], graph_path: str | None, phase: str, hw_source: str,
              sets: tuple[str, ...], problem: str, sram_budget: str | None, budget: float | None, objective: str,
              axis: str, tiles: str, backend: str, time_limit: int, max_plans: int, workers: int | None,
              out: str | None, optimizer: str, granularity: str, dtype: str | None) -> None:
    """Solve every fusion plan of the class with an exact backend (fusion.md FU.X): the best
    schedule over the class, and a bound over every schedule of every plan of the class.
    """
    g = graph_from(model, params, graph_path, optimizer, granularity, dtype)
    if phase == "inference":
        g = inference_graph(g)
    hardware = load_hw(hw_source, sets)
    found = fusion_exact(g, hardware, problem=problem, objective=objective,
                         sram_budget=parse_size(sram_budget, field="--sram-budget") if sram_budget else None,
                         budget=budget, axis=axis, tiles=_counts(tiles), backend=backend, time_limit=time_limit,
                         workers=workers, max_plans=max_plans,
                         log=lambda line: err_console.print(line, markup=False, highlight=False))
    table = Table(title=f"{g.name} on {hardware.name}: every fusion plan of the class ({objective}), "
                        f"{found.plans} plans in {found.seconds:.0f} s")
    for col in ("plan", "status", objective, "bound (its plan)", "latency", "energy (pJ)", "DRAM bytes",
                "peak SRAM"):
        table.add_column(col, justify="left" if col in ("plan", "status") else "right")
    for row in found.rows:
        r, m = row.result, row.result.metrics
        table.add_row(row.summary(), str(r.status), "-" if r.objective is None else f"{r.objective:,}",
                      "-" if r.bound is None else f"{r.bound:,}",
                      "-" if m is None else f"{m.latency_cycles:,}",
                      "-" if m is None else f"{m.energy.total_pj:,}",
                      "-" if row.dram_bytes is None else human_bytes(row.dram_bytes),
                      "-" if row.peak_sram_bytes is None else human_bytes(row.peak_sram_bytes))
    show(table)
    for why in found.unschedulable:
        err_console.print(f"no schedule: {why}", markup=False, highlight=False, soft_wrap=True)
    best = found.best
    if best is None:
        err_console.print("no plan of the class has a schedule" if found.proven else
                          "no schedule found within the time limits (no proof that none exists)",
                          markup=False, highlight=False)
    else:
        verdict = "optimal over the class (FU.X4)" if found.proven else f"gap {_percent(found.gap)}"
        bound = "-" if found.class_bound is None else f"{found.class_bound:,}"
        err_console.print(f"best: {best.summary()}: {best.objective:,}; bound over the class (FU.X3) {bound}; "
                          f"{verdict}; it holds for {found.bound_holds_for}", markup=False, highlight=False,
                          soft_wrap=True)
    for wrong in found.errors:
        err_console.print(f"error: {wrong}", markup=False, highlight=False, soft_wrap=True)
    if out and best is not None:
        Path(out).write_text(json.dumps(best.plan.to_dict(), indent=1) + "\n")
        err_console.print(f"wrote {out} (the best plan: {best.summary()})")
    exit_unless(best is not None and not found.errors)


@fusion.command("ga")
@_graph_options
@click.option("--hw", "hw_source", required=True, help="Hardware preset or YAML file.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Hardware preset parameter.")
@click.option("--sram-budget", required=True, help="Every core's SRAM capacity in bytes (e.g. 3MiB).")
@click.option("--objectives", default="latency,energy", show_default=True)
@click.option("--axis", type=click.Choice([a.value for a in Axis]), default="rows", show_default=True)
@click.option("--tiles", default="1,2,4,8", show_default=True, help="The counts a tile gene chooses from.")
@click.option("--generations", type=POSITIVE, default=50, show_default=True)
@click.option("--population", type=POSITIVE, default=48, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--time-limit", type=POSITIVE, default=None, help="Seconds; stop after the generation past it.")
@click.option("--grade", "grade_time", type=POSITIVE, default=None,
              help="Grade each point against the bounds of its tiled instance, with this many seconds each.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the front (JSON) here.")
def ga_cmd(model: str | None, params: tuple[str, ...], graph_path: str | None, phase: str, hw_source: str,
           sets: tuple[str, ...], sram_budget: str, objectives: str, axis: str, tiles: str, generations: int,
           population: int, seed: int, time_limit: int | None, grade_time: int | None, out: str | None,
           optimizer: str, granularity: str, dtype: str | None) -> None:
    """The GA with fusion genes (fusion.md FU.G): NSGA-II over fusion plans, cores, policies and pins.

    Every point is a schedule of its plan's tiled instance, evaluated by the evaluator.
    """
    from monet_ilp.ga.fusion import run_fusion_ga  # pymoo: only when the GA runs

    g = graph_from(model, params, graph_path, optimizer, granularity, dtype)
    if phase == "inference":
        g = inference_graph(g)
    hardware = load_hw(hw_source, sets)
    options = {"problem": "P3", "sram_budget": parse_size(sram_budget, field="--sram-budget")}
    wanted = tuple(o.strip() for o in objectives.split(",") if o.strip())
    front = run_fusion_ga(g, hardware, options, objectives=wanted, generations=generations,
                          population=population, seed=seed, time_limit=time_limit, axis=axis,
                          tiles=_counts(tiles))
    table = Table(title=f"{g.name} on {hardware.name}: fusion GA front ({front['evaluations']} evaluations, "
                        f"{front['plans']} plans, {front['seconds']:.0f} s)")
    for col in ("latency", "energy (pJ)", "stacks", "plan") + (("bound (its plan)", "gap") if grade_time else ()):
        table.add_column(col, justify="left" if col == "plan" else "right")
    errors = False
    for point in front["points"]:
        stacks = point["fusion"]["stacks"]
        cells = [f"{point['latency_cycles']:,}", f"{point['energy_pj']:,}", str(len(stacks)),
                 "; ".join(f"{len(s['ops'])} ops x {s['tiles']}" for s in stacks) or "layer by layer"]
        if grade_time:
            bound, gap, wrong = _graded(g, hardware, options, point, grade_time)
            point["bound"], point["gap"] = bound, gap
            errors |= wrong
            cells += ["-" if bound is None else f"{bound:,}", "-" if gap is None else f"{100 * gap:.1f} %"]
        table.add_row(*cells)
    show(table)
    if out:
        Path(out).write_text(json.dumps(front, indent=1) + "\n")
        err_console.print(f"wrote {out}")
    exit_unless(bool(front["points"]) and not errors)


def _percent(gap: float | None) -> str:
    return "-" if gap is None else f"{100 * gap:.1f} %"


def _counts(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in text.split(","))
    except ValueError:
        raise click.BadParameter("give tile counts as integers, e.g. 1,2,4,8", param_hint="--tiles") from None


def _graded(graph: TrainingGraph, hardware: Hardware, options: dict[str, Any], point: dict[str, Any],
            seconds: int) -> tuple[int | None, float | None, bool]:
    """The best bound over every schedule of the point's tiled instance (on latency, the
    first objective), its gap, and whether it is wrongly above the point (BD.C1)."""
    from monet_ilp.analysis.bounds import lower_bounds  # the solver bounds: only with --grade
    from monet_ilp.graph.fusion import FusionPlan
    from monet_ilp.make import make_instance

    inst = make_instance(graph, hardware, fusion=FusionPlan.from_dict(point["fusion"]), **options)
    found = lower_bounds(inst, time_limit=seconds, solver=False)
    bound = found.get("best_all")
    if bound is None:
        return None, None, False
    value = point["latency_cycles"]
    if bound > value:
        err_console.print(f"error: a bound over every schedule ({bound}) is above a verified schedule "
                          f"({value}); this is a bug (BD.C1)")
        return bound, None, True
    return bound, (value - bound) / value if value else 0.0, False
