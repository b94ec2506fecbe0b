"""The latency bounds over every schedule on the P3 targets: BD.B9, BD.B12 and BD.B13.

For mlp depth 16 and a 2-block gpt2-tiny (batch 1) on edge_tpu 2x1 and hetero_quad, and
ResNet-18 (CIFAR, batch 1) on edge_tpu 2x2 at 3 MiB per core (the latency targets of
``bench_joint.py --parts ga_targets``): the pinned path LP (BD.B9), the placement MILP
(BD.B12, ``--placement-time`` seconds), then the contention relaxation (BD.B13, CP-SAT
with ``--workers``, ``--contention-time`` seconds, above BD.B12's value), each with its
method and seconds (``formulations/bounds.md``).  With ``--known FILE`` (a
``bench_joint.py`` JSON), each row also gives the best latency found there and the gap
each bound leaves to it.  No assertion about time.

    python scripts/bench_latency_bounds.py --out bench_latency_bounds.json
    python scripts/bench_latency_bounds.py --known bench_joint.json --instances gpt2_tiny_2blocks_b1
"""

from __future__ import annotations

import argparse
import json

from bench_joint import HARDWARE  # the same hardware as the targets' rows
from rich.console import Console
from rich.table import Table

from monet_ilp.engines.deadline import Deadline
from monet_ilp.graph import zoo
from monet_ilp.make import make_instance
from monet_ilp.problems.p3.contention import contention_bound
from monet_ilp.problems.p3.data import p3_data
from monet_ilp.problems.p3.latency import pinned_path_bound, placement_path_bound


def targets():
    """(label, graph builder, hardware, make options) of the latency targets."""
    for label, build in (("mlp_depth16", lambda: zoo.mlp(depth=16)),
                         ("gpt2_tiny_2blocks_b1", lambda: zoo.build("gpt2_tiny", n_layer=2, batch=1))):
        for hw in ("edge_tpu_2x1", "hetero_quad"):
            yield label, build, hw, {}
    yield "resnet18_cifar_b1", lambda: zoo.resnet18(batch=1), "edge_tpu_2x2", {"sram_budget": 3 * 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placement-time", type=float, default=30.0, help="seconds for BD.B12")
    parser.add_argument("--contention-time", type=float, default=30.0, help="seconds for BD.B13")
    parser.add_argument("--workers", type=int, default=2, help="CP-SAT's workers for BD.B13")
    parser.add_argument("--instances", nargs="*", default=None, help="only these labels")
    parser.add_argument("--known", default=None, help="a bench_joint.py JSON: the best latency per row")
    parser.add_argument("--out", default="bench_latency_bounds.json")
    args = parser.parse_args()
    known: dict[tuple[str, str], int] = {}
    if args.known:
        with open(args.known) as f:
            for row in json.load(f):
                if row.get("objective_kind") == "latency" and row.get("latency_cycles") and row.get("verified"):
                    key = (row["instance"], row["hardware"])
                    known[key] = min(known.get(key, row["latency_cycles"]), row["latency_cycles"])
    console = Console(width=160)
    rows = []
    for label, build, hw, make in targets():
        if args.instances and label not in args.instances:
            continue
        inst = make_instance(build(), HARDWARE[hw](), problem="P3", objective="latency", **make)
        data = p3_data(inst)
        pinned = pinned_path_bound(data)
        placed = placement_path_bound(data, Deadline(args.placement_time))
        floor = max(pinned or 0, placed.value or 0)
        contended = contention_bound(data, Deadline(args.contention_time), floor=floor, workers=args.workers)
        best = known.get((label, hw))
        row = {"instance": label, "hardware": hw, "ops": len(inst.graph.ops), "pinned_path": pinned,
               "placement_path": placed.value, "placement_method": placed.method,
               "placement_seconds": placed.seconds, "contention": contended.value,
               "contention_method": contended.method, "contention_relaxed": contended.relaxed,
               "contention_seconds": contended.seconds, "best_known": best}
        for name in ("placement_path", "contention"):
            row[f"{name}_gap"] = None if best is None or row[name] is None else (best - row[name]) / best
        rows.append(row)
        console.print(f"{label} on {hw}: BD.B12 {placed.value} ({placed.method}), BD.B13 {contended.value} "
                      f"({contended.method}, best makespan {contended.relaxed}, {contended.seconds} s)",
                      highlight=False)
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    table = Table(title=f"Latency bounds over every schedule (BD.B12 {args.placement_time:g} s, "
                        f"BD.B13 {args.contention_time:g} s with {args.workers} workers)")
    for col in ("instance", "hw", "ops", "BD.B9", "BD.B12", "BD.B13", "B13 best makespan", "B13 s",
                "best known", "gap B12", "gap B13"):
        table.add_column(col, justify="left" if col in ("instance", "hw") else "right")
    for r in rows:
        def pct(x):
            return "-" if x is None else f"{100 * x:.1f}%"
        table.add_row(r["instance"], r["hardware"], str(r["ops"]), f"{r['pinned_path'] or 0:,}",
                      f"{r['placement_path'] or 0:,} ({r['placement_method']})",
                      f"{r['contention'] or 0:,} ({r['contention_method']})",
                      "-" if r["contention_relaxed"] is None else f"{r['contention_relaxed']:,}",
                      f"{r['contention_seconds']:.1f}", "-" if r["best_known"] is None else f"{r['best_known']:,}",
                      pct(r["placement_path_gap"]), pct(r["contention_gap"]))
    console.print(table)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
