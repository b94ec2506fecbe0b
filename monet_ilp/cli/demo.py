"""``monet-ilp demo``: ResNet-18 on a 2x2 edge_tpu, scheduled four ways and graded (:mod:`monet_ilp.demo`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click
from rich.table import Table

from monet_ilp.cli.render import SECONDS, console, err_console, exit_unless, show
from monet_ilp.demo import DemoRow, demo_rows
from monet_ilp.hardware.schema import parse_size

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["demo", "run_demo"]


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def run_demo(*, sram_bytes: int = 3 * 2**20, time_limit: float = 45.0,
             out_dir: str | Path = "monet_demo") -> list[DemoRow]:
    """Run :func:`monet_ilp.demo.demo_rows` and print its table, its bounds and the files it wrote."""
    began = time.perf_counter()
    with console.status("ResNet-18 on edge_tpu 2x2: store-all, Chen sqrt(n), GA, auto ..."):
        rows, info = demo_rows(sram_bytes=sram_bytes, time_limit=time_limit, out_dir=out_dir)
    table = Table(title=f"ResNet-18 (CIFAR, batch 1) training step on an analytical Edge-TPU-like 2x2 mesh, "
                        f"{sram_bytes / 2**20:g} MiB SRAM per core: evaluator-verified, graded against bounds")
    for col in ("method", "verdict", "latency Mcycles", "energy uJ", "peak SRAM MiB", "latency gap",
                "energy gap", "latency gap in K3", "seconds"):
        table.add_column(col, justify="left" if col in ("method", "verdict") else "right")
    for r in rows:
        verdict = "feasible" if r.feasible else "over SRAM" if "capacity" in r.violations else "INFEASIBLE"
        table.add_row(r.method, verdict, f"{r.latency_cycles / 1e6:.3f}", f"{r.energy_pj / 1e6:,.1f}",
                      f"{r.peak_sram_bytes / 2**20:.2f}", _percent(r.latency_gap), _percent(r.energy_gap),
                      _percent(r.class_gap), f"{r.seconds:.1f}")
    show(table, console)
    also = ", and auto's bound" if info["class"].startswith("every") else ""
    console.print(f"lower bounds over every schedule (they grade every row): latency >= "
                  f"{info['latency_bound'] / 1e6:.3f} Mcycles (best of the critical path, the work bound{also}), energy >= "
                  f"{info['energy_bound'] / 1e6:,.1f} uJ (cheapest run of every op, pinning "
                  f"knapsack, input moves). Gaps are (value - bound) / value.", highlight=False, markup=False)
    if info["class_bound"] is not None:
        console.print(f"within {info['class']} only: latency >= {info['class_bound'] / 1e6:.3f} Mcycles "
                      f"(auto's bound; {info['auto']} ended {info['solve_status']}); it grades the auto row "
                      f"alone, whose schedule is a solution of that model", highlight=False, markup=False)
    for wrong in info["errors"]:
        err_console.print(f"error: {wrong}", highlight=False, markup=False)
    console.print(f"GA: {info['ga_evaluations']} evaluations"
                  + (f" at {info['ga_rate']:.0f} per second" if info.get("ga_rate") else ""), highlight=False)
    for what, path in info["files"].items():
        console.print(f"wrote {what}: {path}", highlight=False)
    console.print(f"demo finished in {time.perf_counter() - began:.0f} s", highlight=False)
    exit_unless(not info["errors"])  # BD.C1: a bound above a verified row is a bug
    return rows


@click.command("demo")
@click.option("--sram", "sram", default="3MiB", show_default=True, help="SRAM per core (store-all needs 4.6 MiB).")
@click.option("--time-limit", type=SECONDS, default=45.0, show_default=True, help="Seconds for cpsat.")
@click.option("--out-dir", type=click.Path(file_okay=False), default="monet_demo", show_default=True,
              help="Where the Gantt chart and the Pareto plot go.")
def demo(sram: str, time_limit: float, out_dir: str) -> None:
    """ResNet-18 (CIFAR) on a 2x2 edge_tpu: store-all, Chen sqrt(n), GA and auto, graded against bounds."""
    run_demo(sram_bytes=parse_size(sram, field="--sram"), time_limit=time_limit, out_dir=out_dir)
