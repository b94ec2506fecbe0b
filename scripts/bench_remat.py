"""P1 remat benchmark: cpsat and milp on random layered DAGs and zoo training graphs.

Prints a table (instance, n, |E|, budget, backend, status, objective, bound, gap,
seconds) and writes every row as JSON.  Every schedule is verified by the evaluator
(through ``monet_ilp.solve``).  No assertion about time: the figures are reported.

    python scripts/bench_remat.py --out bench_remat.json                  # the issue's full grid
    python scripts/bench_remat.py --quick --out bench_remat_quick.json    # a few minutes
"""

from __future__ import annotations

import argparse
import json
import math
import time

from rich.console import Console
from rich.table import Table

from monet_ilp.graph import random_layered, zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance, p1_instance
from monet_ilp.solve import solve

ZOO = ("vgg16", "resnet18", "mobilenet_v2", "gpt2_tiny")


def instances(sizes, models, budgets):
    pe = preset("edge_tpu", n_pe_x=1, n_pe_y=1)
    for n in sizes:
        g = random_layered(n, seed=0)
        for b in budgets:
            yield f"random_n{n}", g, b, p1_instance(g, b)
    for name in models:
        g = zoo.build(name)
        for b in budgets:
            yield name, g, b, make_instance(g, pe, problem="P1", budget=b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 250, 500, 1000])
    parser.add_argument("--models", nargs="*", default=list(ZOO))
    parser.add_argument("--budgets", type=float, nargs="*", default=[0.9, 0.8, 0.7, 0.6])
    parser.add_argument("--backends", nargs="*", default=["cpsat", "milp"])
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--milp-max-n", type=int, default=250, help="Skip milp above this many ops.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="n=100 and the zoo at 0.8/0.6, 60 s limits.")
    parser.add_argument("--out", default="bench_remat.json")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.budgets, args.time_limit = [100], [0.8, 0.6], 60.0
    rows = []
    console = Console(width=150)
    for label, graph, budget, inst in instances(args.sizes, args.models, args.budgets):
        n = len(graph.ops)
        edges = graph.to_networkx().number_of_edges()
        for backend in args.backends:
            if backend == "milp" and n > args.milp_max_n:
                continue
            start = time.perf_counter()
            result = solve(inst, backend, time_limit=args.time_limit, workers=args.workers)
            row = {
                "instance": label, "n": n, "edges": edges, "budget": budget,
                "budget_bytes": inst.budget_bytes, "backend": backend, "status": str(result.status),
                "objective": result.objective, "bound": result.bound, "gap": result.gap,
                "seconds": round(time.perf_counter() - start, 3),
                "verified": None if result.metrics is None else result.metrics.feasible,
                "recomputations": None if result.metrics is None else result.metrics.recomputations,
                "message": result.message,
            }
            rows.append(row)
            console.print(f"{label} n={n} budget={budget} {backend}: {row['status']} "
                          f"obj={row['objective']} bound={row['bound']} {row['seconds']} s")
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)
    table = Table(title=f"P1 remat, {args.workers} workers, time limit {args.time_limit:g} s")
    for col in ("instance", "n", "|E|", "budget", "backend", "status", "objective", "bound", "gap", "seconds"):
        table.add_column(col, justify="left" if col in ("instance", "backend", "status") else "right")
    for r in rows:
        gap = "-" if r["gap"] is None else f"{100 * r['gap']:.2f}%"
        table.add_row(r["instance"], str(r["n"]), str(r["edges"]), f"{r['budget']:g}", r["backend"], r["status"],
                      str(r["objective"]), str(r["bound"]), gap, f"{r['seconds']:.2f}")
    console.print(table)
    both = {}
    for r in rows:
        if r["status"] == "optimal":
            both.setdefault((r["instance"], r["budget"]), {})[r["backend"]] = r["seconds"]
    pairs = [v for v in both.values() if "cpsat" in v and "milp" in v]
    if pairs:
        ratio = math.exp(sum(math.log(max(p["milp"], 1e-3) / max(p["cpsat"], 1e-3)) for p in pairs) / len(pairs))
        console.print(f"geometric-mean speedup of cpsat over milp on {len(pairs)} instances both solve: {ratio:.1f}x")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
