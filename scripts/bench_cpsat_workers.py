"""CP-SAT on one worker: its default search against the objective lower-bound search.

With one worker CP-SAT runs a single search and none of the subsolvers a backend adds
(``extra_subsolvers``).  :func:`monet_ilp.engines.cpsat.configured_solver` then makes the
objective lower-bound search, which the backends ask for as a subsolver, the one
search's own strategy (``use_objective_lb_search``).  This script measures both on the
P1 stage model: the ``cpsat`` backend on one worker and with no hint, as ``auto`` runs
it beside the MILP on small graphs when no heuristic start fits, on the small zoo at
budgets 0.8 and 0.7 and the literature's random DAGs at 0.9 and 0.8.  Every schedule is verified by the evaluator (through ``monet_ilp.solve``).
Prints a table and writes JSON; no assertion about time.

    python scripts/bench_cpsat_workers.py --out bench_cpsat_workers.json
"""

from __future__ import annotations

import argparse
import json
import time

from bench_remat import instance_of
from rich.console import Console
from rich.table import Table

from monet_ilp.solve import solve

CASES = [*((m, b) for m in ("vgg16", "gpt2_tiny", "resnet18") for b in (0.8, 0.7)),
         *((f"random_n{n}", b) for n in (40, 60, 80) for b in (0.9, 0.8))]
SEARCHES = {"default": {"use_objective_lb_search": False}, "lb_search": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--out", default="bench_cpsat_workers.json")
    args = parser.parse_args()
    console = Console(width=160)
    rows = []
    for name, budget in CASES:
        inst = instance_of(name, budget)
        for search, params in SEARCHES.items():
            began = time.perf_counter()
            result = solve(inst, "cpsat", time_limit=args.time_limit, workers=1, params=params,
                           use_baseline_hint=False)
            rows.append({"instance": name, "budget": budget, "search": search, "status": str(result.status),
                         "objective": result.objective, "bound": result.bound,
                         "seconds": round(time.perf_counter() - began, 2),
                         "verified": result.metrics is not None and result.metrics.feasible})
            console.print(rows[-1], highlight=False)
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    table = Table(title=f"P1 cpsat, one worker, {args.time_limit:g} s")
    for col in ("instance", "budget", "search", "status", "objective", "bound", "seconds"):
        table.add_column(col, justify="left" if col in ("instance", "search", "status") else "right")
    for r in rows:
        table.add_row(r["instance"], f"{r['budget']:g}", r["search"], r["status"], str(r["objective"]),
                      str(r["bound"]), f"{r['seconds']:.1f}")
    console.print(table)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
