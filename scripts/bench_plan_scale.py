"""P4's search at scale: the gap it certifies in a fixed time on large models and clusters.

GPT-3 175B (Korthikanti et al.'s shape) on 8 and 64 DGX-A100-like nodes, and the Llama 3
8B and 70B of their ``config.json`` (``instances/hf/``, grouped-query attention) on 1-32
DGX-H100-like nodes; per run the plan, its time, the bound over the class
(``formulations/p4_problem.md`` P4.S5), the gap, the candidates solved, pruned and left
open, and the search's seconds.

    python scripts/bench_plan_scale.py [--time-limit 120] [--only gpt3] [--out results/bench_plan_scale.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from monet_ilp.hardware.cluster import dgx_a100, dgx_h100
from monet_ilp.problems.p4.hf_config import hf_config
from monet_ilp.problems.p4.model import model_config
from monet_ilp.problems.p4.search import plan_search

#: (label, model, cluster preset, nodes, global batch in sequences)
RUNS = [
    ("gpt3", lambda: model_config("gpt3", preset="175b"), dgx_a100, 8, 64),
    ("gpt3", lambda: model_config("gpt3", preset="175b"), dgx_a100, 64, 1536),
    *[("llama8b", lambda: hf_config(ROOT / "instances/hf/llama3_8b.json"), dgx_h100, n, 512) for n in (1, 4, 32)],
    *[("llama70b", lambda: hf_config(ROOT / "instances/hf/llama3_70b.json"), dgx_h100, n, 512) for n in (4, 16, 32)],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per search")
    parser.add_argument("--only", default="", help="labels to run, comma-separated (gpt3, llama8b, llama70b)")
    parser.add_argument("--out", default="results/bench_plan_scale.json")
    args = parser.parse_args()
    wanted = {x for x in args.only.split(",") if x}
    console = Console(width=200)
    rows = []
    for label, make, preset, nodes, batch in RUNS:
        if wanted and label not in wanted:
            continue
        model, cluster = make(), preset(nodes=nodes)
        began = time.perf_counter()
        result = plan_search(model, cluster, global_batch=batch, time_limit=args.time_limit)
        rows.append({"model": model.name, "cluster": cluster.name, "nodes": nodes, "global_batch": batch,
                     "status": result.status, "value_s": result.value, "bound_s": result.bound, "gap": result.gap,
                     "plan": None if result.plan is None else result.plan.to_dict(),
                     "mfu": None if result.metrics is None else result.metrics.mfu,
                     "stats": result.stats, "seconds": round(time.perf_counter() - began, 1)})
        console.print(f"{model.name} on {nodes} x {cluster.name}: {result.status}, gap "
                      f"{'-' if result.gap is None else f'{100 * result.gap:.2f} %'}", highlight=False)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"time_limit": args.time_limit, "rows": rows}, indent=1) + "\n")
    table = Table(title=f"P4 search at scale ({args.time_limit:g} s per search, this machine)")
    for col in ("model", "nodes", "batch", "status", "d x p x t", "b x m", "s/iter", "bound", "gap", "MFU",
                "solved / pruned / open of", "search s"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        plan, st = r["plan"] or {}, r["stats"]
        table.add_row(r["model"], str(r["nodes"]), str(r["global_batch"]), r["status"],
                      f"{plan.get('data')} x {plan.get('pipeline')} x {plan.get('tensor')}",
                      f"{plan.get('micro_batch')} x {plan.get('micro_batches')}",
                      "-" if r["value_s"] is None else f"{r['value_s']:.3f}",
                      "-" if r["bound_s"] is None else f"{r['bound_s']:.3f}",
                      "-" if r["gap"] is None else f"{100 * r['gap']:.2f} %",
                      "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f} %",
                      f"{st.get('solved')} / {st.get('pruned')} / {st.get('unfinished')} of {st.get('candidates')}",
                      f"{r['seconds']:.0f}")
    console.print(table)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
