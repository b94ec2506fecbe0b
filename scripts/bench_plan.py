"""P4 against the literature: activation memory to the byte, MFU of published runs, and plans with gaps.

Three tables (``formulations/p4_problem.md``):

1. the activation bytes of one transformer layer (the GPT-3 175B shape) from our terms
   and from Korthikanti et al.'s closed forms (Table 2), for t = 1, 2, 4, 8, with and
   without sequence parallelism, none / selective / full recomputation;
2. the model FLOPs utilisation our evaluator predicts for published configurations,
   against the published figure: the 22B, 175B, 530B and 1T GPT-3-style models of
   Korthikanti et al. (Table 3 configurations: data-parallel size 1, micro-batch 1,
   sequence parallelism and selective recomputation; MFU as the Megatron-LM README
   reports it: 41.5, 51.4, 56.0, 56.3 %), and the 530B model on 2,240 A100s (d = 8):
   54.2 % with sequence parallelism and selective recomputation, 42.1 % with full
   recomputation (the paper's abstract);
3. ``plan_search`` on GPT-2 medium and a 1B Llama-style model on 1-4 DGX-A100-like nodes
   (with ``--large`` also GPT-3 175B on 8 and 64 nodes): the plan, its time, the bound
   over the class, the gap, and the search's seconds.

    python scripts/bench_plan.py --out bench_plan.json
"""

from __future__ import annotations

import argparse
import json
import time

from rich.console import Console
from rich.table import Table

from monet_ilp.hardware.cluster import dgx_a100
from monet_ilp.problems.p4.evaluate import evaluate_plan
from monet_ilp.problems.p4.memory import closed_form, layer_activations
from monet_ilp.problems.p4.model import model_config
from monet_ilp.problems.p4.plan import Plan
from monet_ilp.problems.p4.search import plan_search

#: (model preset, t, p, d, global batch, sequence parallel, recompute, published MFU %, source)
PUBLISHED = [
    ("22b", 8, 1, 1, 4, True, "selective", 41.5, "Korthikanti et al. Table 3 config; Megatron-LM README"),
    ("175b", 8, 8, 1, 64, True, "selective", 51.4, "Korthikanti et al. Table 3 config; Megatron-LM README"),
    ("530b", 8, 35, 1, 280, True, "selective", 56.0, "Korthikanti et al. Table 3 config; Megatron-LM README"),
    ("1t", 8, 64, 1, 512, True, "selective", 56.3, "Korthikanti et al. Table 3 config; Megatron-LM README"),
    ("530b", 8, 35, 8, 2240, True, "selective", 54.2, "Korthikanti et al. abstract, 2,240 A100s"),
    ("530b", 8, 35, 8, 2240, False, "full", 42.1, "Korthikanti et al. abstract, 2,240 A100s"),
]


def memory_rows() -> list[dict]:
    s, b, h, a = 2048, 1, 12288, 96
    rows = []
    for t in (1, 2, 4, 8):
        for sp in (False, True):
            if sp and t == 1:
                continue
            for rec in ("none", "selective", "full"):
                ours = layer_activations(seq=s, batch=b, hidden=h, heads=a, tp=t, sequence_parallel=sp,
                                         recompute=rec).bytes
                published = closed_form(seq=s, batch=b, hidden=h, heads=a, tp=t, sequence_parallel=sp,
                                        recompute=rec)
                rows.append({"t": t, "sequence_parallel": sp, "recompute": rec, "bytes": ours,
                             "closed_form": float(published), "equal": ours == published})
    return rows


def mfu_rows() -> list[dict]:
    rows = []
    for preset, t, p, d, batch, sp, rec, published, source in PUBLISHED:
        model = model_config("gpt3", preset=preset)
        per = [model.layers // p + (1 if i < model.layers % p else 0) for i in range(p)]
        plan = Plan(d, p, t, sp, 1, batch // d, "1f1b", tuple(per), tuple([rec] * model.layers), 0)
        cluster = dgx_a100(nodes=-(-plan.devices // 8))
        metrics = evaluate_plan(model, cluster, plan)
        predicted = 100 * metrics.mfu
        rows.append({"model": f"gpt3-{preset}", "devices": plan.devices, "t": t, "p": p, "d": d,
                     "global_batch": batch, "sequence_parallel": sp, "recompute": rec,
                     "feasible": metrics.feasible, "time_per_iteration_s": metrics.time_s,
                     "predicted_mfu": predicted, "published_mfu": published,
                     "relative_error": (predicted - published) / published, "source": source})
    return rows


def plan_rows(time_limit: float, large: bool) -> list[dict]:
    rows = []
    runs = [("gpt2", "medium", nodes, 512) for nodes in (1, 2, 4)] + [("llama", "1b", nodes, 512) for nodes in (1, 2, 4)]
    if large:  # GPT-3 175B at Korthikanti et al.'s batch per 64 GPUs, and on 512 GPUs
        runs += [("gpt3", "175b", 8, 64), ("gpt3", "175b", 64, 1536)]
    for family, preset, nodes, batch in runs:
        model = model_config(family, preset=preset)
        began = time.perf_counter()
        result = plan_search(model, dgx_a100(nodes=nodes), global_batch=batch, time_limit=time_limit)
        plan = result.plan
        rows.append({"model": model.name, "nodes": nodes, "devices": 8 * nodes, "global_batch": batch,
                     "status": result.status, "time_per_iteration_s": result.value, "bound_s": result.bound,
                     "gap": result.gap, "mfu": None if result.metrics is None else result.metrics.mfu,
                     "plan": None if plan is None else plan.to_dict(), "seconds": time.perf_counter() - began,
                     "stats": result.stats})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per plan search")
    parser.add_argument("--large", action="store_true", help="also GPT-3 175B on 8 and 64 nodes")
    parser.add_argument("--out", default="bench_plan.json")
    args = parser.parse_args()
    console = Console(width=200)
    memory = memory_rows()
    table = Table(title="Activation bytes of one layer (s=2048, b=1, h=12288, a=96): ours and the closed form")
    for col in ("t", "sequence parallel", "recompute", "ours", "closed form", "equal"):
        table.add_column(col, justify="right")
    for r in memory:
        table.add_row(str(r["t"]), "yes" if r["sequence_parallel"] else "no", r["recompute"], f"{r['bytes']:,}",
                      f"{r['closed_form']:,.0f}", "yes" if r["equal"] else "NO")
    console.print(table)
    mfu = mfu_rows()
    table = Table(title="MFU: predicted by the evaluator (dgx_a100 preset) against published")
    for col in ("model", "GPUs", "t x p x d", "batch", "SP", "recompute", "s/iter", "predicted", "published",
                "rel. error"):
        table.add_column(col, justify="right")
    for r in mfu:
        table.add_row(r["model"], str(r["devices"]), f"{r['t']} x {r['p']} x {r['d']}", str(r["global_batch"]),
                      "yes" if r["sequence_parallel"] else "no", r["recompute"], f"{r['time_per_iteration_s']:.2f}",
                      f"{r['predicted_mfu']:.1f} %", f"{r['published_mfu']:.1f} %", f"{100 * r['relative_error']:+.1f} %")
    console.print(table)
    within = sum(abs(r["relative_error"]) <= 0.10 for r in mfu)
    console.print(f"within 10 % (relative) of the published MFU: {within} of {len(mfu)}", highlight=False)
    plans = plan_rows(args.time_limit, args.large)
    table = Table(title=f"plan_search, time objective, {args.time_limit:g} s limit (this machine)")
    for col in ("model", "nodes", "batch", "status", "d x p x t", "b x m", "schedule", "ZeRO", "s/iter", "bound", "gap",
                "MFU", "search s"):
        table.add_column(col, justify="right")
    for r in plans:
        plan = r["plan"] or {}
        table.add_row(r["model"], str(r["nodes"]), str(r["global_batch"]), r["status"],
                      f"{plan.get('data')} x {plan.get('pipeline')} x {plan.get('tensor')}"
                      + (" +SP" if plan.get("sequence_parallel") else ""),
                      f"{plan.get('micro_batch')} x {plan.get('micro_batches')}", str(plan.get("schedule")),
                      str(plan.get("zero")), f"{r['time_per_iteration_s']:.4f}", f"{r['bound_s']:.4f}",
                      f"{100 * r['gap']:.2f} %", f"{100 * r['mfu']:.1f} %", f"{r['seconds']:.1f}")
    console.print(table)
    with open(args.out, "w") as f:
        json.dump({"memory": memory, "mfu": mfu, "plans": plans}, f, indent=1)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
