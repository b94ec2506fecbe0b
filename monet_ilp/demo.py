"""The demo: a real training graph on a real hardware description, scheduled and verified.

ResNet-18 (CIFAR) on a 2x2 Edge-TPU-like mesh: the store-all list schedule on all
four PEs (P3), and store-all, Chen sqrt(n) and Chen greedy on one PE under a memory
budget (P1).  Every schedule goes through the evaluator; the table shows its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table


@dataclass(frozen=True)
class DemoRow:
    schedule: str
    problem: str
    cores: int
    feasible: bool
    latency_cycles: int
    energy_pj: int
    peak_bytes: int
    capacity_bytes: int
    recomputations: int


def demo_rows(budget: float = 0.7, batch: int = 8) -> list[DemoRow]:
    """Build, schedule and evaluate; one row per schedule."""
    from monet_ilp.evaluate import evaluate
    from monet_ilp.graph import zoo
    from monet_ilp.hardware.presets import preset
    from monet_ilp.heuristics import HEURISTICS, store_all_schedule
    from monet_ilp.instance import make_instance

    graph = zoo.resnet18(variant="cifar", batch=batch)
    hardware = preset("edge_tpu", n_pe_x=2, n_pe_y=2)
    rows = []
    # Each op goes to the PE that finishes it first (a whole layer per PE keeps a chain on one PE).
    spread = lambda inst: store_all_schedule(inst, allocate="op")  # noqa: E731
    runs = [("store-all, list-scheduled", make_instance(graph, hardware, problem="P3"), spread)]
    one_pe = make_instance(graph, hardware, problem="P1", budget=budget, objective="latency")
    runs += [(name, one_pe, HEURISTICS[key]) for name, key in
             (("store-all", "store_all"), ("Chen sqrt(n)", "sqrt"), ("Chen greedy", "greedy"))]
    for name, inst, scheduler in runs:
        metrics = evaluate(inst, scheduler(inst))
        sram = [m.id for m in inst.memories if m.kind == "sram"]
        worst = max(sram, key=lambda m: metrics.peak_bytes.get(m, 0) / inst.memory(m).capacity_bytes)
        rows.append(DemoRow(name, str(inst.problem), len(inst.cores), metrics.feasible, metrics.latency_cycles,
                            metrics.energy.total_pj, metrics.peak_bytes.get(worst, 0),
                            inst.memory(worst).capacity_bytes, metrics.recomputations))
    return rows


def run_demo(console: Console, budget: float = 0.7, batch: int = 8) -> list[DemoRow]:
    rows = demo_rows(budget=budget, batch=batch)
    table = Table(title=f"ResNet-18 (CIFAR, batch {batch}) training step on edge_tpu 2x2, evaluator-verified")
    for col in ("schedule", "problem", "cores", "verdict", "Mcycles", "energy uJ", "peak MiB", "budget MiB",
                "recomputes"):
        table.add_column(col, justify="left" if col in ("schedule", "problem", "verdict") else "right")
    for r in rows:
        table.add_row(r.schedule, r.problem, str(r.cores), "feasible" if r.feasible else "over budget",
                      f"{r.latency_cycles / 1e6:.3f}", f"{r.energy_pj / 1e6:.1f}",
                      f"{r.peak_bytes / 2**20:.2f}", f"{r.capacity_bytes / 2**20:.2f}", str(r.recomputations))
    table.caption = (f"P1 rows: one PE, budget {budget:g} x the store-all activation peak. P3 row: four PEs, "
                     "each with its 2 MiB SRAM (peak and budget of the fullest). Exact solvers come next.")
    console.print(table)
    return rows
