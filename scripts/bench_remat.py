"""P1 remat benchmark: auto, cpsat, milp and lns on zoo graphs and the literature's random DAGs.

Instances (issue 12's grid):

* the zoo at layer granularity on one Edge-TPU PE (costs from the cost model): mlp,
  vgg16, gpt2_tiny, resnet18 (<= 150 ops), mobilenet_v2, resnet50 and gpt2_small;
* random layered DAGs in the literature's parameterisation
  (``random_layered_literature``, ``formulations/random_dags.md``), n = 250, 500, 1000;

at budgets that are fractions of the store-all peak.  Each solve runs in a fresh child
process (so that its peak memory is its own, ``peak_rss_mb``), and every schedule is
verified by the evaluator (through ``monet_ilp.solve``).  For each row: the status, the
objective, the bound the backend reports and the class it holds for, the gap to it,
the bound over every P1 schedule (``relax.all_schedules_bound``) and the gap to that,
the seconds and the peak memory.  Rows are appended to ``--out`` (JSON lines) as soon
as they exist; a rerun skips the rows already there.  No assertion about time.

    python scripts/bench_remat.py --out bench_remat.jsonl                    # the full grid, 180 s
    python scripts/bench_remat.py --quick --out bench_remat_quick.jsonl      # a few minutes
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import resource
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from monet_ilp.graph import random_layered_literature, zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance, p1_instance
from monet_ilp.problems.p1.relax import all_schedules_bound
from monet_ilp.solve import solve

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph
    from monet_ilp.instance import Instance

SMALL_ZOO = ("mlp", "vgg16", "gpt2_tiny", "resnet18")
LARGE_ZOO = ("mobilenet_v2", "resnet50", "gpt2_small")
#: Above this many ops a backend is left out of the default grid (it does not build in time).
MAX_OPS = {"cpsat": 450, "milp": 450, "interval": 300}


def graph_of(name: str) -> TrainingGraph:
    if name.startswith("random_n"):
        return random_layered_literature(int(name.removeprefix("random_n")), seed=0)
    return zoo.build(name)


def instance_of(name: str, budget: float) -> Instance:
    graph = graph_of(name)
    if name.startswith("random_n"):
        return p1_instance(graph, budget)
    return make_instance(graph, preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P1", budget=budget)


def run_one(name: str, budget: float, backend: str, time_limit: float, workers: int) -> dict[str, Any]:
    """One solve, in the child process that calls it."""
    inst = instance_of(name, budget)
    result = solve(inst, backend, time_limit=time_limit, workers=workers)
    # solve's own clock: model building and the evaluator's check, not the imports a
    # fresh process makes the first time (they differ from backend to backend).
    seconds = result.wall_time_s
    stats = dict(result.stats)
    bound_all = stats.get("bound_all")
    if bound_all is None and result.objective is not None:
        # Backends other than auto: the same all-schedules bound, outside their time.
        found = all_schedules_bound(inst, time_limit=min(60.0, time_limit), workers=1)
        bound_all = found.value
    # The stage form's bound (milp/cpsat members of auto): the gap within that class.
    stage = next((v for k, v in (stats.get("bound_by_class") or {}).items() if "stage form" in k), None)
    if stage is None and backend in ("milp", "cpsat"):
        stage = result.bound
    graph = inst.graph
    return {
        "instance": name, "n": len(graph.ops), "edges": graph.to_networkx().number_of_edges(),
        "budget": budget, "budget_bytes": inst.budget_bytes, "backend": backend,
        "status": str(result.status), "source": result.source, "objective": result.objective,
        "bound": result.bound, "gap": result.gap,
        "bound_class": stats.get("bound_class"),
        "bound_all": bound_all,
        "bound_stage": stage,
        "gap_stage": None if result.objective is None or stage is None
        else max(0.0, (result.objective - stage) / result.objective),
        "gap_all": None if result.objective is None or bound_all is None
        else max(0.0, (result.objective - bound_all) / result.objective),
        "seconds": round(seconds, 3),
        "verified": None if result.metrics is None else result.metrics.feasible,
        "recomputations": None if result.metrics is None else result.metrics.recomputations,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "members": stats.get("members"), "message": result.message,
    }


def grid(args: argparse.Namespace) -> list[tuple[str, float, str]]:
    rows = []
    for name in args.models:
        budgets = args.random_budgets if name.startswith("random_n") else args.budgets
        n = len(graph_of(name).ops)
        for budget in budgets:
            for backend in args.backends:
                if n <= MAX_OPS.get(backend, math.inf):
                    rows.append((name, budget, backend))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*",
                        default=[*SMALL_ZOO, *LARGE_ZOO, "random_n250", "random_n500", "random_n1000"],
                        help="zoo names, or random_n<N> for the literature's random layered DAGs")
    parser.add_argument("--budgets", type=float, nargs="*", default=[0.9, 0.8, 0.7],
                        help="fractions of the store-all peak for the zoo")
    parser.add_argument("--random-budgets", type=float, nargs="*", default=[0.9, 0.8])
    parser.add_argument("--backends", nargs="*", default=["auto", "cpsat", "milp", "lns"])
    parser.add_argument("--time-limit", type=float, default=180.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="the small zoo at 0.8 and random_n250 at 0.9, auto and milp, 30 s limits")
    parser.add_argument("--out", default="bench_remat.jsonl")
    args = parser.parse_args()
    if args.quick:
        args.models, args.budgets, args.random_budgets = [*SMALL_ZOO, "random_n250"], [0.8], [0.9]
        args.backends, args.time_limit = ["auto", "milp"], 30.0
    out = Path(args.out)
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()] if out.exists() else []
    done = {(r["instance"], r["budget"], r["backend"]) for r in rows}
    console = Console(width=200)
    context = multiprocessing.get_context("spawn")
    for name, budget, backend in grid(args):
        if (name, budget, backend) in done:
            continue
        with context.Pool(1, maxtasksperchild=1) as pool:
            row = pool.apply(run_one, (name, budget, backend, args.time_limit, args.workers))
        rows.append(row)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        console.print(f"{name} n={row['n']} budget={budget} {backend}: {row['status']} obj={row['objective']} "
                      f"bound={row['bound']} all={row['bound_all']} {row['seconds']} s "
                      f"{row['peak_rss_mb']} MB", highlight=False)
    show(rows, args, console)


def show(rows: list[dict[str, Any]], args: argparse.Namespace, console: Console) -> None:
    table = Table(title=f"P1 remat, {args.workers} workers, time limit {args.time_limit:g} s")
    for col in ("instance", "n", "|E|", "budget", "backend", "status", "objective", "bound", "gap (class)",
                "gap (stage form)", "bound all", "gap (all)", "seconds", "MB"):
        table.add_column(col, justify="left" if col in ("instance", "backend", "status") else "right")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.2f}%"

    for r in rows:
        table.add_row(r["instance"], str(r["n"]), str(r["edges"]), f"{r['budget']:g}", r["backend"], r["status"],
                      str(r["objective"]), str(r["bound"]), pct(r["gap"]), pct(r.get("gap_stage")),
                      str(r["bound_all"]),
                      pct(r["gap_all"]), f"{r['seconds']:.1f}", f"{r['peak_rss_mb']:.0f}")
    console.print(table)
    # auto against the faster of cpsat and milp where both prove the optimum.
    by: dict[tuple[str, float], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["instance"], r["budget"]), {})[r["backend"]] = r
    slower, worse = [], []
    for key, found in by.items():
        auto = found.get("auto")
        proven = [found[b] for b in ("cpsat", "milp") if b in found and found[b]["status"] == "optimal"]
        if auto is None:
            continue
        if proven and auto["status"] == "optimal":
            fastest = min(p["seconds"] for p in proven)
            slower.append((key, auto["seconds"] / max(fastest, 1e-3)))
        for b in ("cpsat", "milp", "lns"):
            other = found.get(b)
            if other and other["objective"] is not None and (auto["objective"] is None
                                                              or auto["objective"] > other["objective"]):
                worse.append((key, b))
    if slower:
        ratios = [s for _, s in slower]
        console.print(f"auto / the faster of cpsat and milp, where both prove: worst {max(ratios):.2f}x, "
                      f"geometric mean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x "
                      f"over {len(ratios)} instances")
    console.print(f"auto returned less than another backend on: {worse or 'none'}")
    console.print(f"rows in {args.out}")


if __name__ == "__main__":
    main()
