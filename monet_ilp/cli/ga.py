"""``monet-ilp ga``: the command line of :mod:`monet_ilp.ga.nsga2` (NSGA-II over decisions, P3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from monet_ilp.cli.render import (
    POSITIVE,
    SECONDS,
    console,
    err_console,
    exit_unless,
    progress_bar,
    show,
)
from monet_ilp.ga.nsga2 import run_ga
from monet_ilp.ga.refine import refine as refine_loop
from monet_ilp.instance import Instance
from monet_ilp.solve import load_hint

if TYPE_CHECKING:
    from monet_ilp.schedule import Schedule, Sequence

__all__ = ["ga"]


@click.command("ga")
@click.argument("instance_path", type=click.Path(dir_okay=False))
@click.option("--objectives", default="latency,energy", show_default=True,
              help="Comma-separated: latency, energy (the evaluator's values).")
@click.option("--generations", type=POSITIVE, default=100, show_default=True)
@click.option("--population", type=click.IntRange(min=2), default=64, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True,
              help="Random seed (same seed, same result).")
@click.option("--time-limit", type=SECONDS, default=None,
              help="Seconds; stop after the generation that exceeds it.")
@click.option("--workers", type=POSITIVE, default=1, show_default=True,
              help="Processes that decode and evaluate (the result does not depend on it).")
@click.option("--seed-schedule", "seed_paths", multiple=True, type=click.Path(dir_okay=False),
              help="Seed the population with a schedule, GA result or decisions file (repeatable).")
@click.option("--refine", type=click.IntRange(min=0), default=0, show_default=True,
              help="Rounds of GA then the solver (auto: CP-SAT on P2/P3): each round's best point hints "
                   "the solver, whose schedule seeds the next round (0: the GA alone).")
@click.option("--refine-time", type=SECONDS, default=30.0, show_default=True,
              help="Seconds of the solver per --refine round.")
@click.option("--no-pins", is_flag=True,
              help="No pin genes: weights stay in DRAM (as in MONET's GA); faster decoding.")
@click.option("--reference-scoring", is_flag=True,
              help="Score every individual with the evaluator itself, not the fast path (slower; "
                   "the same result).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default="ga.json", show_default=True,
              help="Write the front (JSON, with each point's decisions and schedule) here.")
def ga(instance_path: str, objectives: str, generations: int, population: int, seed: int,
       time_limit: float | None, workers: int, seed_paths: tuple[str, ...], refine: int, refine_time: float,
       no_pins: bool, reference_scoring: bool, out: str) -> None:
    """MONET-style GA: NSGA-II over keep/offload/recompute, layer-to-core and pin genes.

    On P3 every gene; on P2 (one core) keep/offload/recompute; on P1 keep/recompute.

    Every individual is decoded by list scheduling and scored on the fast path (the
    evaluator's metrics without building the schedule); the front of non-dominated
    points, each evaluated again by the evaluator, goes to --out.
    """
    inst = Instance.load(instance_path)
    names = tuple(o.strip() for o in objectives.split(",") if o.strip())
    seeds = [load_hint(p, inst) for p in seed_paths]
    if refine:
        _refine(inst, names, refine, refine_time, generations, population, seed, workers, seeds, out)
        return
    with progress_bar("GA", generations, counts=True) as progress:
        result = run_ga(inst, names, generations=generations, population=population, seed=seed,
                        seed_schedules=seeds, time_limit=time_limit, workers=workers, progress=progress,
                        fast=not reference_scoring, pins=not no_pins)
    Path(out).write_text(json.dumps(result) + "\n")
    table = Table(title=f"GA front on {inst.name} ({result['generations']} generations x {population}, "
                        f"seed {seed})")
    for col in ("latency (cycles)", "energy (pJ)", f"objective ({inst.objective})", "recomputations",
                "transfers", "source"):
        table.add_column(col, justify="right")
    for p in result["points"]:
        table.add_row(f"{p['latency_cycles']:,}", f"{p['energy_pj']:,}", f"{p['objective_value']:,}",
                      str(p["recomputations"]), str(p["transfers"]),
                      p["source"] + ("" if p["feasible"] else " (INFEASIBLE)"))
    show(table)
    rate = result["evaluations_per_second"] or 0
    how = "decode + evaluator" if result["scoring"] == "reference" else "decode + fast scoring"
    console.print(f"{result['evaluations']:,} evaluations ({how}) in "
                  f"{result['seconds']:.2f} s: {rate:,.0f} per second; {result['cache_hits']:,} "
                  f"repeats answered from the cache; stopped by {result['stopped']}", highlight=False)
    err_console.print(f"wrote {out}")
    exit_unless(any(p["feasible"] for p in result["points"]))


def _refine(inst: Instance, names: tuple[str, ...], rounds: int, solver_time: float, generations: int,
            population: int, seed: int, workers: int, seeds: list[Schedule | Sequence], out: str) -> None:
    """``ga --refine``: GA rounds and solver runs in one loop (:mod:`monet_ilp.ga.refine`)."""
    with progress_bar("GA + solver", rounds, counts=True) as progress:
        result = refine_loop(inst, rounds, names, generations=generations, population=population, seed=seed,
                             solver_time=solver_time, workers=workers, seed_schedules=seeds, progress=progress)
    Path(out).write_text(json.dumps(result) + "\n")
    table = Table(title=f"GA + solver on {inst.name}: {rounds} rounds of {generations} generations x "
                        f"{population} and {solver_time:g} s of the solver ({inst.objective})")
    for col in ("round", "GA best", "solver", "solver objective", "solver bound", "best so far",
                "gap (every schedule)"):
        table.add_column(col, justify="right")
    for row in result["refine"]:
        table.add_row(str(row["round"]), _num(row["ga_best"]), row["solver_status"], _num(row["solver_objective"]),
                      _num(row["solver_bound"]), _num(row["best"]),
                      "-" if row["gap"] is None else f"{100 * row['gap']:.2f} %")
    show(table)
    console.print(f"{len(result['points'])} points on the front ({', '.join(sorted({p['source'] for p in result['points']}))}); "
                  f"every one checked by the evaluator; the gap is to the bound over every schedule, "
                  f"{_num(result['bound'])}", highlight=False)
    for wrong in result["errors"]:
        err_console.print(f"error: {wrong}", highlight=False, markup=False)
    err_console.print(f"wrote {out}")
    exit_unless(any(p["feasible"] for p in result["points"]) and not result["errors"])


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,}"
