"""MONET's layer-fusion study, reproduced: layer by layer against the best fusion plan found.

ResNet-18 (CIFAR, batch 1) and GPT-2 tiny, training and inference, on the Edge-TPU-like
preset with 1 core and with 2x2 cores at the demo's SRAM (3 MiB per core); per
configuration and objective (latency, energy) the search of ``formulations/fusion.md``
FU.K2 (``monet_ilp.analysis.fusion.fusion_search``) screens plans with the list scheduler
and solves layer by layer and the best plans with ``auto``. Every schedule is verified by
the evaluator; each gap is against the bound ``auto`` proved for that plan's tiled
instance (class P3.K3 of that instance, FU.K1), not against other plans.

    python scripts/repro_monet_fusion.py [--time-limit 30] [--search-time 60] [--out results/monet_fusion]
        [--models resnet18,gpt2_tiny] [--phases training,inference] [--meshes "1 core,2x2"]

prints a table and writes ``fusion.json`` and ``fusion.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monet_ilp.analysis.fusion import FusionRow, FusionSearch, fusion_search
from monet_ilp.graph import zoo
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.hardware.presets import preset

MODELS = {
    "resnet18": lambda: zoo.resnet18(batch=1),
    "gpt2_tiny": lambda: zoo.gpt2(preset="tiny"),
}
MESHES = {"1 core": (1, 1), "2x2": (2, 2)}
SRAM = 3 * 2**20


def row_of(row: FusionRow, found: FusionSearch) -> dict[str, Any]:
    r, m = row.result, row.result.metrics
    return {
        "gap_every_plan": found.gap_every_plan(row),
        "plan": row.summary(), "strategy": row.strategy, "stacks": [s.to_dict() for s in row.plan.fused],
        "status": str(r.status), "source": r.source, "objective": r.objective, "bound": r.bound, "gap": r.gap,
        "bound_holds_for": r.bound_holds_for,
        "latency_cycles": None if m is None else m.latency_cycles,
        "energy_pj": None if m is None else m.energy.total_pj,
        "edp": None if m is None else m.latency_cycles * m.energy.total_pj,
        "dram_bytes": row.dram_bytes, "peak_sram_bytes": row.peak_sram_bytes,
        "ops": len(row.instance.graph.ops), "recomputations": None if m is None else m.recomputations,
        "transfers": None if m is None else m.transfers, "seconds": round(r.wall_time_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/monet_fusion")
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per solved plan")
    parser.add_argument("--search-time", type=float, default=60.0, help="seconds of greedy screening")
    parser.add_argument("--finalists", type=int, default=2)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--objectives", default="latency,energy")
    parser.add_argument("--phases", default="training,inference")
    parser.add_argument("--meshes", default=",".join(MESHES), help="of: " + ", ".join(MESHES))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    console = Console(width=200)
    began = time.perf_counter()
    records: list[dict[str, Any]] = []
    for model in args.models.split(","):
        training = MODELS[model]()
        for phase, graph in (("training", training), ("inference", inference_graph(training))):
            if phase not in args.phases.split(","):
                continue
            for mesh in args.meshes.split(","):
                nx, ny = MESHES[mesh]
                hw = preset("edge_tpu", n_pe_x=nx, n_pe_y=ny)
                for objective in args.objectives.split(","):
                    console.print(f"[bold]{model} {phase} on {mesh}, {objective}[/bold]")
                    found = fusion_search(graph, hw, sram_budget=SRAM, objective=objective,
                                          time_limit=args.time_limit, search_time=args.search_time,
                                          finalists=args.finalists, workers=args.workers,
                                          log=lambda line: console.print(line, markup=False, highlight=False))
                    records.append({
                        "model": model, "phase": phase, "mesh": mesh, "objective": objective,
                        "notes": list(found.notes), "screened": found.screened,
                        "seconds": round(found.seconds, 1),
                        "bound_every_plan": found.bound_every_plan, "errors": list(found.errors),
                        "layer_by_layer": row_of(found.layer_by_layer, found), "best": row_of(found.best, found),
                        "rows": [row_of(r, found) for r in found.rows],
                    })
                    (out / "fusion.json").write_text(json.dumps(
                        {"sram_bytes": SRAM, "time_limit": args.time_limit, "records": records}, indent=1) + "\n")
    table = Table(title=f"Layer fusion against layer by layer ({time.perf_counter() - began:.0f} s; "
                        f"{args.time_limit:g} s per solved plan, {args.workers} workers)")
    for col in ("model", "phase", "mesh", "objective", "layer by layer", "gap", "best fused plan", "value",
                "gap (its plan)", "gap (every plan)", "x", "latency", "energy (mJ)", "EDP x",
                "DRAM MiB (lbl -> fused)", "peak SRAM MiB"):
        table.add_column(col, justify="left" if col in ("model", "phase", "mesh", "objective", "best fused plan")
                         else "right")

    def pct(g: float | None) -> str:
        return "-" if g is None else f"{100 * g:.1f} %"

    for rec in records:
        lbl, best = rec["layer_by_layer"], rec["best"]
        ratio = (best["objective"] / lbl["objective"]) if lbl["objective"] and best["objective"] else None
        edp = (best["edp"] / lbl["edp"]) if lbl["edp"] and best["edp"] else None
        table.add_row(rec["model"], rec["phase"], rec["mesh"], rec["objective"],
                      f"{lbl['objective']:,}" if lbl["objective"] else "-", pct(lbl["gap"]),
                      best["plan"] if best["stacks"] else "(none better)",
                      f"{best['objective']:,}" if best["objective"] else "-", pct(best["gap"]),
                      pct(best["gap_every_plan"]),
                      "-" if ratio is None else f"{ratio:.2f}",
                      f"{best['latency_cycles']:,}" if best["latency_cycles"] else "-",
                      f"{best['energy_pj'] / 1e9:.3f}" if best["energy_pj"] else "-",
                      "-" if edp is None else f"{edp:.2f}",
                      f"{(lbl['dram_bytes'] or 0) / 2**20:.2f} -> {(best['dram_bytes'] or 0) / 2**20:.2f}",
                      f"{(best['peak_sram_bytes'] or 0) / 2**20:.2f}")
    console.print(table)
    for rec in records:
        for wrong in rec["errors"]:
            console.print(f"error: {rec['model']} {rec['phase']} {rec['mesh']}: {wrong}", markup=False)
    _plot(records, out / "fusion.png")
    console.print(f"wrote {out / 'fusion.json'} and {out / 'fusion.png'}")


def _plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib  # only for the figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, objective in zip(axes, ("latency", "energy"), strict=True):
        part = [r for r in records if r["objective"] == objective]
        labels = [f"{r['model']}\n{r['phase']}\n{r['mesh']}" for r in part]
        ratios = [(r["best"]["objective"] / r["layer_by_layer"]["objective"])
                  if r["layer_by_layer"]["objective"] and r["best"]["objective"] else 0 for r in part]
        ax.bar(range(len(part)), ratios, color="tab:blue")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(part)), labels, fontsize=7)
        ax.set_ylabel(f"{objective}: best fused / layer by layer")
        ax.set_title(f"{objective} (verified schedules)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
