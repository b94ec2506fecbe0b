"""P3 benchmark: joint allocation + remat + offload + pinning on multi-core accelerators.

Three parts, each a table, all rows in one JSON file (every schedule verified by the
evaluator through ``monet_ilp.solve``; no assertion about time):

* ``targets``: mlp depth 8 and a 2-block gpt2-tiny on a 2-core edge_tpu and on the
  4-core hetero_quad, latency and energy, with the store-all list schedule (greedy
  layer allocation) as the baseline: improvement in latency and energy, and whether
  the baseline breaks an SRAM capacity;
* ``resnet``: ResNet-18 (CIFAR, layer granularity, batch 1) on edge_tpu 2x2 at SRAM
  budgets where store-all does not fit;
* ``scaling``: mlp depth 4 to 32 on 2, 4 and 8 cores: seconds to optimal, or the gap
  at the time limit;
* ``ga_targets``: the targets of the GA-at-scale work: mlp depth 4 on hetero_quad
  (latency and energy, ``--time-limit``), mlp depth 16 and a 2-block gpt2-tiny at batch 1
  on 2 and 4 cores (latency, ``--resnet-time-limit``), and ResNet-18 at 3 MiB per core.

    python scripts/bench_joint.py --out bench_joint.json
    python scripts/bench_joint.py --quick --out bench_joint_quick.json   # a few minutes
"""

from __future__ import annotations

import argparse
import json
import time

from rich.console import Console
from rich.table import Table

from monet_ilp.evaluate import evaluate
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.make import make_instance
from monet_ilp.solve import solve

HARDWARE = {
    "edge_tpu_2x1": lambda: preset("edge_tpu", n_pe_x=2, n_pe_y=1),
    "edge_tpu_2x2": lambda: preset("edge_tpu", n_pe_x=2, n_pe_y=2),
    "edge_tpu_4x2": lambda: preset("edge_tpu", n_pe_x=4, n_pe_y=2),
    "hetero_quad": lambda: preset("hetero_quad"),
}


#: The backends each row runs (``--backends``): auto (CP-SAT, then the LNS on larger graphs).
BACKENDS = ["auto"]


def run(part, label, graph, hw_name, objective, time_limit, workers, rows, console, **make):
    for backend in BACKENDS:
        run_one(part, label, graph, hw_name, objective, time_limit, workers, rows, console, backend, **make)


def run_one(part, label, graph, hw_name, objective, time_limit, workers, rows, console, backend, **make):
    inst = make_instance(graph, HARDWARE[hw_name](), problem="P3", objective=objective, **make)
    base = evaluate(inst, store_all_schedule(inst, allocate="layer"))
    start = time.perf_counter()
    result = solve(inst, backend, time_limit=time_limit, workers=workers)
    seconds = time.perf_counter() - start
    m = result.metrics
    row = {
        "part": part, "backend": backend, "instance": label, "hardware": hw_name, "cores": len(inst.cores), "ops": len(graph.ops),
        "objective_kind": objective, "sram_budget": make.get("sram_budget"),
        "status": str(result.status), "objective": result.objective, "bound": result.bound, "gap": result.gap,
        "seconds": round(seconds, 2), "verified": None if m is None else m.feasible,
        "latency_cycles": None if m is None else m.latency_cycles,
        "energy_pj": None if m is None else m.energy.total_pj,
        "recomputations": None if m is None else m.recomputations,
        "transfers": None if m is None else m.transfers,
        "pins": None if result.schedule is None else len(result.schedule.pinned),
        "baseline_latency_cycles": base.latency_cycles, "baseline_energy_pj": base.energy.total_pj,
        "baseline_feasible": base.feasible, "baseline_violations": dict(base.violation_counts),
        "hint": result.stats.get("hint"), "solution": result.stats.get("solution", "solver"),
        "message": result.message,
    }
    if m is not None:
        row["latency_gain"] = 1 - m.latency_cycles / base.latency_cycles
        row["energy_gain"] = 1 - m.energy.total_pj / base.energy.total_pj
    rows.append(row)
    console.print(f"[{part}] {backend} {label} on {hw_name} ({objective}): {row['status']} obj={row['objective']} "
                  f"bound={row['bound']} {row['seconds']} s", highlight=False)
    return row


def pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


def table(console, rows, part, title):
    t = Table(title=title)
    for col in ("backend", "instance", "hw", "ops", "objective", "status", "value", "bound", "gap", "s",
                "latency gain", "energy gain", "baseline", "remat/xfer/pins"):
        t.add_column(col, justify="left" if col in ("backend", "instance", "hw", "objective", "status", "baseline")
                     else "right")
    for r in rows:
        if r["part"] != part:
            continue
        value = "-" if r["objective"] is None else f"{r['objective']:,}"
        bound = "-" if r["bound"] is None else f"{r['bound']:,}"
        base = "fits" if r["baseline_feasible"] else "over SRAM (" + ", ".join(
            f"{k} x{v}" for k, v in r["baseline_violations"].items()) + ")"
        t.add_row(r["backend"], r["instance"], r["hardware"], str(r["ops"]), r["objective_kind"], r["status"], value, bound,
                  pct(r["gap"]), f"{r['seconds']:.1f}", pct(r.get("latency_gain")), pct(r.get("energy_gain")), base,
                  f"{r['recomputations']}/{r['transfers']}/{r['pins']}")
    console.print(t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="*", default=["targets", "resnet", "scaling"],
                        choices=["targets", "resnet", "scaling", "ga_targets"])
    parser.add_argument("--time-limit", type=float, default=60.0, help="Seconds per solve (targets, scaling).")
    parser.add_argument("--resnet-time-limit", type=float, default=120.0)
    parser.add_argument("--depths", type=int, nargs="*", default=[4, 8, 16, 32])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="Targets only, 20 s limits.")
    parser.add_argument("--backends", nargs="*", default=["auto"], help="P3 backends to run on every row")
    parser.add_argument("--out", default="bench_joint.json")
    args = parser.parse_args()
    BACKENDS[:] = args.backends
    if args.quick:
        args.parts, args.time_limit = ["targets"], 20.0
    console = Console(width=170)
    rows: list[dict] = []

    def save():
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)

    if "targets" in args.parts:
        models = {"mlp_depth8": zoo.mlp(depth=8), "gpt2_tiny_2blocks_b1": zoo.build("gpt2_tiny", n_layer=2, batch=1)}
        for label, graph in models.items():
            for hw in ("edge_tpu_2x1", "hetero_quad"):
                for objective in ("latency", "energy"):
                    run("targets", label, graph, hw, objective, args.time_limit, args.workers, rows, console)
                    save()
    if "resnet" in args.parts:
        graph = zoo.resnet18(batch=1)
        for budget in (5 * 2**19, 3 * 2**20):  # 2.5 MiB and 3 MiB per core
            run("resnet", "resnet18_cifar_b1", graph, "edge_tpu_2x2", "latency", args.resnet_time_limit,
                args.workers, rows, console, sram_budget=budget)
            save()
    if "ga_targets" in args.parts:
        mlp4 = zoo.mlp(depth=4)
        for objective in ("latency", "energy"):
            run("ga_targets", "mlp_depth4", mlp4, "hetero_quad", objective, args.time_limit, args.workers, rows,
                console)
            save()
        for label, graph in {"mlp_depth16": zoo.mlp(depth=16),
                             "gpt2_tiny_2blocks_b1": zoo.build("gpt2_tiny", n_layer=2, batch=1)}.items():
            for hw in ("edge_tpu_2x1", "hetero_quad"):
                run("ga_targets", label, graph, hw, "latency", args.resnet_time_limit, args.workers, rows, console)
                save()
        run("ga_targets", "resnet18_cifar_b1", zoo.resnet18(batch=1), "edge_tpu_2x2", "latency",
            args.resnet_time_limit, args.workers, rows, console, sram_budget=3 * 2**20)
        save()
    if "scaling" in args.parts:
        for depth in args.depths:
            graph = zoo.mlp(depth=depth)
            for hw in ("edge_tpu_2x1", "edge_tpu_2x2", "edge_tpu_4x2"):
                run("scaling", f"mlp_depth{depth}", graph, hw, "latency", args.time_limit, args.workers, rows,
                    console)
                save()
    table(console, rows, "targets", f"P3 targets ({', '.join(args.backends)}, {args.workers} workers, {args.time_limit:g} s)")
    table(console, rows, "ga_targets", f"GA-at-scale targets ({', '.join(args.backends)}, {args.workers} workers; mlp depth 4: "
                                       f"{args.time_limit:g} s, the others {args.resnet_time_limit:g} s)")
    table(console, rows, "resnet", f"ResNet-18 CIFAR b1 on edge_tpu 2x2, SRAM below store-all ({args.resnet_time_limit:g} s)")
    table(console, rows, "scaling", f"Scaling: mlp depth x cores, latency ({args.time_limit:g} s)")
    save()
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
