"""``monet-ilp ga``: the command line of :mod:`monet_ilp.ga.nsga2` (NSGA-II over decisions, P3)."""

from __future__ import annotations

import json
from pathlib import Path

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
from monet_ilp.instance import Instance
from monet_ilp.solve import load_hint

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
@click.option("--reference-scoring", is_flag=True,
              help="Score every individual with the evaluator itself, not the fast path (slower; "
                   "the same result).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default="ga.json", show_default=True,
              help="Write the front (JSON, with each point's decisions and schedule) here.")
def ga(instance_path: str, objectives: str, generations: int, population: int, seed: int,
       time_limit: float | None, workers: int, seed_paths: tuple[str, ...], reference_scoring: bool,
       out: str) -> None:
    """MONET-style GA: NSGA-II over keep/offload/recompute and layer-to-core genes (P3).

    Every individual is decoded by list scheduling and scored on the fast path (the
    evaluator's metrics without building the schedule); the front of non-dominated
    points, each evaluated again by the evaluator, goes to --out.
    """
    inst = Instance.load(instance_path)
    names = tuple(o.strip() for o in objectives.split(",") if o.strip())
    seeds = [load_hint(p, inst) for p in seed_paths]
    with progress_bar("GA", generations, counts=True) as progress:
        result = run_ga(inst, names, generations=generations, population=population, seed=seed,
                        seed_schedules=seeds, time_limit=time_limit, workers=workers, progress=progress,
                        fast=not reference_scoring)
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
    how = "decode + evaluator" if reference_scoring else "decode + fast scoring"
    console.print(f"{result['evaluations']:,} evaluations ({how}) in "
                  f"{result['seconds']:.2f} s: {rate:,.0f} per second; {result['cache_hits']:,} "
                  f"repeats answered from the cache; stopped by {result['stopped']}", highlight=False)
    err_console.print(f"wrote {out}")
    exit_unless(any(p["feasible"] for p in result["points"]))
