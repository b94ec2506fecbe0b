"""``monet-ilp ga`` and ``monet-ilp grade``: the command line of :mod:`monet_ilp.ga.nsga2` and the decoder.

Registered by :mod:`monet_ilp.cli`, which also uses :func:`load_hint` for
``monet-ilp solve --hint`` (a schedule, a GA result or a decisions file).  pymoo and
the solvers are imported only when a command runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.terminal import POSITIVE, SECONDS, console, err_console, exit_unless, show


def load_hint(path: str | Path, instance):
    """A warm start for ``instance`` from ``path``: a schedule, a GA result or decisions.

    * a schedule file (``"format": "monet-ilp/schedule"``) as it is;
    * a GA result (``"monet-ilp/ga"``): the schedule of its point that the evaluator
      accepts with the best value of the instance's objective;
    * decisions (``"monet-ilp/decisions"``): checked against the instance and decoded.

    Raises
    ------
    MonetError
        Another format, a GA result without a feasible point for this instance, or
        decisions that name something the instance does not have.
    """
    from monet_ilp.ga.nsga2 import FORMAT_NAME as GA
    from monet_ilp.graph.ir import read_json
    from monet_ilp.heuristics.decisions import FORMAT_NAME as DECISIONS
    from monet_ilp.heuristics.decisions import decisions_from_dict, decode
    from monet_ilp.schedule import FORMAT_NAME as SCHEDULE
    from monet_ilp.schedule import check_made_for, schedule_from_dict

    data = read_json(path)
    kind = data.get("format") if isinstance(data, dict) else None
    if kind == SCHEDULE:
        schedule = schedule_from_dict(data, source=str(path))
        check_made_for(schedule, instance, source=str(path))
        return schedule
    if kind == DECISIONS:
        return decode(instance, decisions_from_dict(data, source=str(path), instance=instance))
    if kind == GA:
        return _best_point(data, instance, str(path))
    raise InputFormatError(f"not a schedule, GA result or decisions file (format {kind!r})",
                           file=str(path), field="format",
                           fix=f'give a file whose "format" is "{SCHEDULE}", "{GA}" or "{DECISIONS}"')


def _best_point(data: dict, instance, source: str):
    from monet_ilp.evaluate import evaluate
    from monet_ilp.schedule import check_made_for, schedule_from_dict

    best, best_value = None, None
    points = data.get("points")
    if not isinstance(points, list):
        raise InputFormatError("a GA result needs a list of points", file=source, field="points",
                               fix="pass the file written by `monet-ilp ga --out`")
    for k, point in enumerate(points):
        try:
            schedule = schedule_from_dict(point["schedule"], source=source)
        except (KeyError, TypeError):
            raise InputFormatError(f"point {k} has no schedule", file=source,
                                   field=f"points[{k}].schedule",
                                   fix="pass the file written by `monet-ilp ga --out`") from None
        check_made_for(schedule, instance, source=f"{source}: points[{k}]")
        metrics = evaluate(instance, schedule)
        if metrics.feasible and (best_value is None or metrics.objective_value < best_value):
            best, best_value = schedule, metrics.objective_value
    if best is None:
        raise MonetError(f"no point of this GA result is feasible for instance {instance.name!r}",
                         file=source, field="points",
                         fix="run `monet-ilp ga` on this instance, or pass another hint")
    return best


def _load_instance(path: str):
    from monet_ilp.instance import Instance

    return Instance.load(path)


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
@click.option("--out", "-o", type=click.Path(dir_okay=False), default="ga.json", show_default=True,
              help="Write the front (JSON, with each point's decisions and schedule) here.")
def ga(instance_path, objectives, generations, population, seed, time_limit, workers, seed_paths, out):
    """MONET-style GA: NSGA-II over keep/offload/recompute and layer-to-core genes (P3).

    Every individual is decoded into a schedule by list scheduling and scored by the
    evaluator; the front of verified, non-dominated points goes to --out.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from monet_ilp.ga.nsga2 import run_ga

    inst = _load_instance(instance_path)
    names = tuple(o.strip() for o in objectives.split(",") if o.strip())
    seeds = [load_hint(p, inst) for p in seed_paths]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("GA", total=generations)
        result = run_ga(inst, names, generations=generations, population=population, seed=seed,
                        seed_schedules=seeds, time_limit=time_limit, workers=workers,
                        progress=lambda done, _, msg: bar.update(task, completed=done, description=msg))
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
    console.print(f"{result['evaluations']:,} evaluations (decode + evaluator) in "
                  f"{result['seconds']:.2f} s: {rate:,.0f} per second; {result['cache_hits']:,} "
                  f"repeats answered from the cache; stopped by {result['stopped']}", highlight=False)
    err_console.print(f"wrote {out}")
    exit_unless(any(p["feasible"] for p in result["points"]))
