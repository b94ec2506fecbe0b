"""``monet-ilp evaluate`` and ``monet-ilp baseline``: the evaluator's verdict on a schedule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from monet_ilp.cli.render import console, err_console, exit_unless, show
from monet_ilp.evaluate import evaluate
from monet_ilp.heuristics import HEURISTICS
from monet_ilp.instance import Instance
from monet_ilp.schedule import load_schedule, save_schedule, stamped
from monet_ilp.units import human_bytes

if TYPE_CHECKING:
    from monet_ilp.evaluate import Metrics
    from monet_ilp.schedule import Schedule

__all__ = ["baseline_cmd", "busy", "evaluate_cmd", "pinned_per_memory", "print_metrics", "runs_per_core"]


def print_metrics(metrics: Metrics, inst: Instance, title: str) -> None:
    """The evaluator's verdict, latency, energy by part, peaks and the first violations."""
    table = Table(title=title)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("verdict", "feasible" if metrics.feasible
                  else f"INFEASIBLE ({sum(metrics.violation_counts.values())} violations)")
    table.add_row("latency (cycles)", f"{metrics.latency_cycles:,}")
    table.add_row("compute (cycles)", f"{metrics.compute_cycles:,}")
    for part in ("compute", "recompute", "sram", "dram", "link", "static", "total"):
        table.add_row(f"energy {part} (pJ)", f"{getattr(metrics.energy, part + '_pj'):,}")
    for mem, peak in metrics.peak_bytes.items():
        cap = inst.memory(mem).capacity_bytes
        table.add_row(f"peak {mem}", f"{human_bytes(peak)} / {human_bytes(cap)}")
    table.add_row("recomputations / transfers", f"{metrics.recomputations} / {metrics.transfers}")
    if len(inst.cores) > 1:
        table.add_row("runs per core", runs_per_core(metrics.schedule, inst))
        # Where the latency goes: the busiest core (or link) bounds it, an idle one could take work.
        table.add_row("busy per core (% of latency)", busy(metrics.schedule, inst, metrics.latency_cycles))
        if metrics.schedule.transfers:
            table.add_row("busy per link (% of latency)",
                          busy(metrics.schedule, inst, metrics.latency_cycles, links=True))
    if metrics.schedule.pinned:
        table.add_row("pinned per memory", pinned_per_memory(metrics.schedule, inst))
    table.add_row(f"objective ({inst.objective})", f"{metrics.objective_value:,}")
    show(table)
    for v in metrics.violations[:20]:
        console.print(f"  violation [{v.kind}] {v.message}", markup=False, highlight=False)
    if len(metrics.violations) > 20:
        console.print(f"  ... and {len(metrics.violations) - 20} more")


def runs_per_core(schedule: Schedule, inst: Instance) -> str:
    """``pe_0 120, pe_1 7, pe_2 0``: shows at a glance how a schedule uses the cores."""
    runs = {core.id: 0 for core in inst.cores}
    for run in schedule.ops:
        runs[run.core] = runs.get(run.core, 0) + 1
    return ", ".join(f"{core} {count}" for core, count in runs.items())


def busy(schedule: Schedule, inst: Instance, latency: int, *, links: bool = False) -> str:
    """``pe_0 223,340 (60 %), pe_1 369,132 (99 %)``: the cycles each core (or link) is busy.

    Runs on one core (transfers on one link) never overlap in a valid schedule, so the
    sum of their durations is the time it works; a core near 100 % is the bottleneck,
    and one far below it could take work.
    """
    spans = ([(x.link, x.end - x.start) for x in schedule.transfers] if links
             else [(run.core, run.end - run.start) for run in schedule.ops])
    cycles: dict[str, int] = {} if links else {core.id: 0 for core in inst.cores}
    for key, duration in spans:
        cycles[key] = cycles.get(key, 0) + duration
    return ", ".join(f"{key} {value:,} ({100 * value / max(1, latency):.0f} %)" for key, value in cycles.items())


def pinned_per_memory(schedule: Schedule, inst: Instance) -> str:
    """``pe_0.sram 512.0 KiB (3 tensors)``: the persistent bytes each SRAM holds all iteration."""
    size = {t.id: t.bytes for t in inst.graph.tensors}
    held: dict[str, list[int]] = {}
    for tensor, memory in schedule.pinned:
        held.setdefault(memory, []).append(size.get(tensor, 0))
    return ", ".join(f"{memory} {human_bytes(sum(sizes))} ({len(sizes)} tensors)" for memory, sizes in held.items())


@click.command("evaluate")
@click.argument("instance_path", type=click.Path(dir_okay=False))
@click.argument("schedule_path", type=click.Path(dir_okay=False))
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the metrics as JSON here.")
def evaluate_cmd(instance_path: str, schedule_path: str, json_out: str | None) -> None:
    """Check a schedule against an instance; print latency, energy, peaks and any violation.

    Exits with 1 if the schedule is infeasible, and with 2 if it was made for another
    instance (another graph or hardware).
    """
    inst = Instance.load(instance_path)
    metrics = evaluate(inst, load_schedule(schedule_path, inst))
    print_metrics(metrics, inst, f"{schedule_path} on {inst.name}")
    if json_out:
        Path(json_out).write_text(json.dumps(metrics.to_dict()) + "\n")
    exit_unless(metrics.feasible)


@click.command("baseline")
@click.argument("instance_path", type=click.Path(dir_okay=False))
@click.option("--heuristic", type=click.Choice(["store_all", "sqrt", "greedy"]), default="store_all",
              show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the schedule JSON here.")
def baseline_cmd(instance_path: str, heuristic: str, out: str | None) -> None:
    """Schedule an instance with a baseline (store-all, Chen sqrt(n), Chen greedy) and evaluate it."""
    inst = Instance.load(instance_path)
    schedule = HEURISTICS[heuristic](inst)
    metrics = evaluate(inst, schedule)
    if out:
        save_schedule(stamped(metrics.schedule, inst, f"heuristic:{heuristic}"), out)
        err_console.print(f"wrote {out}")
    print_metrics(metrics, inst, f"{heuristic} on {inst.name}")
    exit_unless(metrics.feasible)
