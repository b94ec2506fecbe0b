"""P4 for training graphs (``formulations/p4_problem.md`` P4.G): CNNs and a ViT from the zoo
on MONET's Edge-TPU mesh of 4 chips and on one DGX-A100-like node.

Per run: the plan (devices, data x pipeline, micro-batching, stages), its time per
iteration from the verified P3 schedules of its stages, the bound over the class
(P4.G7), the gap, the best one-device plan (P3 on one device, P4.G8) and the search's
seconds.  On the mesh each chip is the ``edge_tpu`` preset with 3 MiB of SRAM per PE (at
the preset's 2 MiB no op of these networks' backward fits at micro-batch 1); ResNet-50
takes 32 x 32 images there (at 224 x 224 its first convolution alone needs 9 MB).

    python scripts/bench_graph_plan.py [--time-limit 60] [--only resnet18] [--out results/bench_graph_plan.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from monet_ilp.analysis.graph_plan import graph_plan_search, hardware_of
from monet_ilp.graph import zoo
from monet_ilp.hardware.cluster import cluster

MESH_SRAM = ("pe_sram_bytes=3MiB",)

#: (label, zoo model, its parameters, cluster preset, hardware parameters, samples per iteration)
RUNS: list[tuple[str, str, dict[str, Any], str, tuple[str, ...], int]] = [
    ("resnet18", "resnet18", {}, "edge_tpu_mesh", MESH_SRAM, 8),
    ("resnet50", "resnet50", {"image": 32}, "edge_tpu_mesh", MESH_SRAM, 8),
    ("vit", "vit", {}, "edge_tpu_mesh", MESH_SRAM, 8),
    ("resnet18", "resnet18", {}, "dgx_a100", (), 64),
    ("resnet50", "resnet50", {}, "dgx_a100", (), 64),
    ("vit", "vit", {}, "dgx_a100", (), 64),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--only", default=None, help="Run only the rows of this model.")
    parser.add_argument("--out", default="results/bench_graph_plan.json")
    args = parser.parse_args()
    rows = []
    for label, model, params, preset, sets, total in RUNS:
        if args.only and label != args.only:
            continue
        spec = cluster(preset)
        hardware = hardware_of(spec, None, sets)
        start = time.perf_counter()
        result = graph_plan_search(lambda b, model=model, params=params: zoo.build(model, batch=b, **params), spec,
                                   hardware, global_batch=total,
                                   micro_batches=[b for b in range(1, total + 1) if total % b == 0],
                                   time_limit=args.time_limit)
        wall = time.perf_counter() - start
        plan = result.plan
        rows.append({"model": label, "params": params, "cluster": spec.name, "hardware": sets,
                     "samples": total, "wall_s": wall, **result.to_dict()})
        print(f"{label} on {spec.name}: {result.status} {None if plan is None else plan.to_dict()} "
              f"{result.value} >= {result.bound} one device {result.one_device} in {wall:.1f} s", flush=True)
    table = Table(title=f"P4 plans for training graphs ({args.time_limit:g} s each)")
    for col in ("model", "cluster", "status", "devices (d x p)", "b x m", "stages", "time/iter (s)", "bound (s)",
                "gap", "one device (s)", "wall (s)"):
        table.add_column(col, justify="left" if col in ("model", "cluster", "status") else "right")
    for r in rows:
        p = r["plan"]
        table.add_row(r["model"], r["cluster"], r["status"],
                      "-" if p is None else f"{p['data'] * p['pipeline']} ({p['data']} x {p['pipeline']})",
                      "-" if p is None else f"{p['micro_batch']} x {p['micro_batches']}",
                      "-" if p is None else " ".join(map(str, p["stages"])),
                      "-" if r["value"] is None else f"{r['value']:.6f}",
                      "-" if r["bound"] is None else f"{r['bound']:.6f}",
                      "-" if r["gap"] is None else f"{100 * r['gap']:.1f} %",
                      "-" if r["one_device_s"] is None else f"{r['one_device_s']:.6f}", f"{r['wall_s']:.1f}")
    Console(width=200).print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
