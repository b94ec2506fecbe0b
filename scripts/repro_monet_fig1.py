"""MONET's design-space figure (Morlier et al., Fig. 1): run it, plot it, say what it shows.

Runs ``instances/monet_design_space.yaml`` (ResNet-18 and a small GPT-2, each for a
training step and for an inference, on 64 points of MONET's Edge-TPU design space)
with ``monet-ilp batch run`` into ``--out`` (``--resume`` finishes an interrupted run),
draws the scatters with ``monet-ilp batch plot`` (``design_space_<model>.png``), and
prints per model and phase: the spread of latency and energy, the Pareto-optimal
configurations, and how latency follows the compute per PE (U x L), the PE count and
the SRAM per PE (Spearman rank correlations).  The rows go to ``<out>/fig1.json``.

    python scripts/repro_monet_fig1.py --out results/monet_fig1
    python scripts/repro_monet_fig1.py --fusion --out results/monet_fig1_fused

``--fusion`` runs ``instances/monet_design_space_fused.yaml`` instead, the same grid with a
fusion axis (layer by layer, and every chain fused whole in 4 tiles,
``formulations/fusion.md``); the rows are then given twice, from the layer-by-layer
schedules alone and from the better of the two per configuration.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from monet_ilp.batch.plots import design_space_records, phase_of
from monet_ilp.batch.results import latest_records, read_records
from monet_ilp.results import non_dominated

MANIFEST = Path(__file__).resolve().parent.parent / "instances" / "monet_design_space.yaml"
FUSED_MANIFEST = MANIFEST.with_name("monet_design_space_fused.yaml")


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when one side is constant."""
    def ranks(v: list[float]) -> np.ndarray:
        values = np.asarray(v, dtype=float)
        order = values.argsort(kind="stable")
        r = np.empty(len(values))
        r[order] = np.arange(len(values), dtype=float)
        for value in np.unique(values):  # ties share their mean rank
            tied = values == value
            r[tied] = r[tied].mean()
        return r
    a, b = ranks(x), ranks(y)
    if a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def hardware(record: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = record["params"]["hardware"]["params"]
    return params


def describe(model: str, phase: str, group: list[dict[str, Any]]) -> dict[str, Any]:
    lat = [r["latency_cycles"] for r in group]
    energy = [r["energy_pj"] for r in group]
    per_pe = [hardware(r)["simd_units"] * hardware(r)["lanes"] for r in group]
    pes = [hardware(r)["n_pe_x"] * hardware(r)["n_pe_y"] for r in group]
    sram = [hardware(r)["pe_sram_bytes"] for r in group]
    front = non_dominated(group, key=lambda r: (r["latency_cycles"], r["energy_pj"]), keep_equal=False)
    return {
        "model": model, "phase": phase, "configurations": len(group),
        "latency_min": min(lat), "latency_max": max(lat), "latency_spread": max(lat) / min(lat),
        "energy_min": min(energy), "energy_max": max(energy), "energy_spread": max(energy) / min(energy),
        "rho_latency_per_pe_compute": spearman(per_pe, lat), "rho_latency_pes": spearman(pes, lat),
        "rho_latency_sram": spearman(sram, lat), "rho_energy_pes": spearman(pes, energy),
        "front": [{"hardware": r["params"]["hardware"]["name"], "latency_cycles": r["latency_cycles"],
                   "energy_pj": r["energy_pj"], **{k: hardware(r)[k] for k in
                                                   ("simd_units", "lanes", "pe_sram_bytes", "n_pe_x", "n_pe_y")}}
                  for r in front],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/monet_fig1", help="the batch results directory")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--resume", action="store_true", help="finish an interrupted run")
    parser.add_argument("--no-run", action="store_true", help="only read --out and plot")
    parser.add_argument("--fusion", action="store_true", help="the grid with a fusion axis")
    args = parser.parse_args()
    manifest = FUSED_MANIFEST if args.fusion else MANIFEST
    out = Path(args.out)
    console = Console(width=180)
    began = time.perf_counter()
    if not args.no_run:
        cmd = [sys.executable, "-m", "monet_ilp", "batch", "run", str(manifest), "--jobs", str(args.jobs),
               "--out", str(out)] + (["--resume"] if args.resume else [])
        subprocess.run(cmd, check=True)
    ran = time.perf_counter() - began
    subprocess.run([sys.executable, "-m", "monet_ilp", "batch", "plot", str(out)], check=True)
    records = list(latest_records(read_records(out / "results.jsonl").records).values())
    rows = []
    variants = [("layer by layer", [r for r in records if not r["params"].get("fusion")])]
    if any(r["params"].get("fusion") for r in records):
        variants.append(("with fusion", records))  # per configuration, the better schedule of the two
    for variant, chosen in variants:
        for model, group in design_space_records(chosen).items():
            for phase in ("training", "inference"):
                part = [dict(r) for r in group if phase_of(r) == phase]
                if part:
                    row = describe(model, phase, part)
                    row["variant"] = variant
                    row["fused_best"] = sum(1 for r in part if r["params"].get("fusion"))
                    rows.append(row)
    table = Table(title=f"MONET Fig. 1: {len(records)} records, {ran:.0f} s of batch run")
    for col in ("schedules", "model", "phase", "configs", "fused best", "latency (Mcycles)", "x spread",
                "energy (mJ)", "x spread", "rho(lat, U*L)", "rho(lat, PEs)", "rho(lat, SRAM)", "rho(energy, PEs)",
                "Pareto-optimal"):
        table.add_column(col, justify="left" if col in ("schedules", "model", "phase", "Pareto-optimal")
                         else "right")

    def rho(v: float | None) -> str:
        return "-" if v is None else f"{v:+.2f}"

    for r in rows:
        table.add_row(r["variant"], r["model"], r["phase"], str(r["configurations"]), str(r["fused_best"]),
                      f"{r['latency_min'] / 1e6:.2f}-{r['latency_max'] / 1e6:.2f}", f"{r['latency_spread']:.1f}",
                      f"{r['energy_min'] / 1e9:.3f}-{r['energy_max'] / 1e9:.3f}", f"{r['energy_spread']:.3f}",
                      rho(r["rho_latency_per_pe_compute"]), rho(r["rho_latency_pes"]), rho(r["rho_latency_sram"]),
                      rho(r["rho_energy_pes"]),
                      ", ".join(f["hardware"].removeprefix("edge_tpu_") for f in r["front"]))
    console.print(table)
    (out / "fig1.json").write_text(json.dumps({"batch_seconds": round(ran, 1), "rows": rows}, indent=1) + "\n")
    console.print(f"wrote {out / 'fig1.json'} and {out / 'plots'}/design_space_*.png")


if __name__ == "__main__":
    main()
