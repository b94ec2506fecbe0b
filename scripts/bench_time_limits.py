"""Time limits: the wall time of whole ``solve()`` calls against their limit, every backend.

``formulations/time_limits.md`` states the bound a solve keeps (the time limit plus a
small overhead) and what counts towards the limit; this script measures it.  The
instances are the ones of issue 16:

* ``p3_resnet18``: ResNet-18 (CIFAR, batch 1, layer granularity) on an edge_tpu 2x2,
  3 MiB SRAM per core, latency (P3);
* ``p2_resnet18``: the same graph on one edge_tpu core, budget 0.8 of the store-all
  peak, offload to DRAM (P2; at 0.5 every backend proves it infeasible at once);
* ``p1_random250``: a random layered DAG of 250 nodes (seed 3), budget 0.5, costs of
  the graph (P1): infeasible (the peak lower bound is above the budget), so the time
  goes to the minimum-budget explanation;
* ``p1_random250_b09``: the same DAG at budget 0.9, where the solvers have to search;
* ``p1_mlp_chain``: an MLP of depth 50 (a training chain, 257 ops) on one edge_tpu
  core, budget 0.5 (P1; the only instance the ``dp`` backend applies to).

Every run is one ``monet_ilp.solve.solve`` call, timed from the call to its return:
the backend (model building, bounds, solver, fallbacks) and the evaluator's check.
Backend modules are imported before the clock starts (an import is paid once per
process, not per solve).  No assertion about time: the table and the JSON rows are
the result.

    python scripts/bench_time_limits.py --out bench_time_limits.json
    python scripts/bench_time_limits.py --quick --out bench_time_limits_quick.json   # 10 s limits only
"""

from __future__ import annotations

import argparse
import importlib
import json
import time

from rich.console import Console
from rich.table import Table

from monet_ilp.graph import zoo
from monet_ilp.graph.random_dag import random_layered
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance
from monet_ilp.solve import solve

#: (label, backend, options) per problem class; ``dp`` only runs on the chain.
RUNS = {
    "P1": [("cpsat", "cpsat", {}), ("milp-highs", "milp", {"milp_solver": "highs"}),
           ("milp-cbc", "milp", {"milp_solver": "cbc"}), ("lp-round", "heuristic:lp-round", {})],
    "P2": [("cpsat", "cpsat", {}), ("milp-highs", "milp", {"milp_solver": "highs"}),
           ("milp-cbc", "milp", {"milp_solver": "cbc"})],
    "P3": [("cpsat", "cpsat", {}), ("milp-highs", "milp", {"milp_solver": "highs"}),
           ("milp-cbc", "milp", {"milp_solver": "cbc"})],
    "chain": [("dp", "dp", {})],
}

#: Modules the backends import lazily; imported here so that no run pays for them.
BACKEND_MODULES = ("monet_ilp.problems.p1.cpsat", "monet_ilp.problems.p2.cpsat",
                   "monet_ilp.problems.p3.cpsat", "monet_ilp.problems.p1.milp",
                   "monet_ilp.problems.p2.milp", "monet_ilp.problems.p3.milp",
                   "monet_ilp.problems.p1.dp", "monet_ilp.evaluate")


def instances() -> dict[str, tuple[str, object]]:
    """The instances, by label, with the row set of :data:`RUNS` they take."""
    resnet = zoo.resnet18(batch=1)
    return {
        "p3_resnet18": ("P3", make_instance(resnet, preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3",
                                            sram_budget=3 * 2**20)),
        "p2_resnet18": ("P2", make_instance(resnet, preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P2",
                                            budget=0.8)),
        "p1_random250": ("P1", make_instance(random_layered(250, seed=3), None, problem="P1", budget=0.5)),
        "p1_random250_b09": ("P1", make_instance(random_layered(250, seed=3), None, problem="P1",
                                                 budget=0.9)),
        "p1_mlp_chain": ("chain", make_instance(zoo.mlp(depth=50), preset("edge_tpu"), problem="P1",
                                                budget=0.5)),
    }


def run(label, inst, name, backend, options, limit, workers, console) -> dict:
    start = time.perf_counter()
    result = solve(inst, backend, time_limit=limit, workers=workers, **options)
    wall = time.perf_counter() - start
    row = {
        "instance": label, "backend": name, "limit_s": limit, "wall_s": round(wall, 2),
        "over_s": round(wall - limit, 2), "backend_wall_s": round(result.wall_time_s, 2),
        "status": str(result.status), "source": result.source, "objective": result.objective,
        "bound": result.bound, "gap": result.gap, "message": result.message,
        "build_s": result.stats.get("build_seconds"), "solve_s": result.stats.get("solve_seconds"),
    }
    console.print(f"{label} {name} {limit:g} s: wall {wall:.2f} s ({wall - limit:+.2f}), {row['status']} "
                  f"[{row['source']}] obj={row['objective']} bound={row['bound']}", highlight=False)
    return row


def table(console, rows) -> None:
    t = Table(title="solve() wall time against the time limit")
    for col in ("instance", "backend", "limit", "wall", "over", "status", "source", "objective", "bound"):
        t.add_column(col, justify="right" if col in ("limit", "wall", "over", "objective", "bound") else "left")
    for r in rows:
        t.add_row(r["instance"], r["backend"], f"{r['limit_s']:g}", f"{r['wall_s']:.2f}", f"{r['over_s']:+.2f}",
                  r["status"], r["source"], "-" if r["objective"] is None else f"{r['objective']:,}",
                  "-" if r["bound"] is None else f"{r['bound']:,}")
    console.print(t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", type=float, nargs="*", default=[10.0, 20.0], help="Time limits, seconds.")
    parser.add_argument("--instances", nargs="*", default=None,
                        help="p3_resnet18, p2_resnet18, p1_random250, p1_random250_b09, p1_mlp_chain "
                             "(default: all).")
    parser.add_argument("--backends", nargs="*", default=None,
                        help="Row labels to run (cpsat, milp-highs, milp-cbc, lp-round, dp; default: all).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="Only the 10 s limit.")
    parser.add_argument("--out", default="bench_time_limits.json")
    args = parser.parse_args()
    if args.quick:
        args.limits = [10.0]
    console = Console(width=170)
    for module in BACKEND_MODULES:
        importlib.import_module(module)
    rows: list[dict] = []
    for label, (kind, inst) in instances().items():
        if args.instances and label not in args.instances:
            continue
        for name, backend, options in RUNS[kind]:
            if args.backends and name not in args.backends:
                continue
            for limit in args.limits:
                rows.append(run(label, inst, name, backend, options, limit, args.workers, console))
                with open(args.out, "w") as f:
                    json.dump(rows, f, indent=1)
    table(console, rows)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
