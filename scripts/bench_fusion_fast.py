"""The GA's fast path against the evaluator on random fused decisions (``fusion.md`` FU.G2).

Random gene vectors of :class:`monet_ilp.ga.fusion.FusionGenome` (decisions and fusion
genes) on GPT-2 tiny (training and inference) and ResNet-18 inference (CIFAR, batch 1), on
the Edge-TPU-like preset with 2x2 cores at 3 MiB per core, latency and energy: each vector
is scored by the fast path and decoded and evaluated by the evaluator; latency, energy,
every SRAM peak, feasibility and the objective must agree.

    python scripts/bench_fusion_fast.py [--decisions 2000] [--out results/bench_fusion_fast.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monet_ilp.evaluate import evaluate
from monet_ilp.ga.fusion import FusionGenome
from monet_ilp.graph import zoo
from monet_ilp.graph.analysis import inference_graph
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.fast import fast_metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=2000, help="random vectors in all")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="results/bench_fusion_fast.json")
    args = parser.parse_args()
    gpt = zoo.gpt2(preset="tiny")
    cases = [("gpt2_tiny training", gpt, "latency"), ("gpt2_tiny training", gpt, "energy"),
             ("gpt2_tiny inference", inference_graph(gpt), "latency"),
             ("resnet18 inference", inference_graph(zoo.resnet18(batch=1)), "energy")]
    hw = preset("edge_tpu", n_pe_x=2, n_pe_y=2)
    per_case = -(-args.decisions // len(cases))
    rows = []
    for name, graph, objective in cases:
        genome = FusionGenome(graph, hw, {"problem": "P3", "sram_budget": 3 * 2**20, "objective": objective})
        rng = np.random.default_rng(args.seed)
        agree = fused = feasible = 0
        fast_s = ref_s = 0.0
        mismatches = []
        for _ in range(per_case):
            x = rng.integers(genome.lower, genome.upper + 1)
            plan = genome.plan(x)
            tiled = genome.tiled(plan)
            if isinstance(tiled, Exception):
                continue
            inst, g = tiled
            xt = genome.tiled_genes(x, g)
            t0 = time.perf_counter()
            try:
                fast = fast_metrics(inst, g.decode_raw(xt))
            except Exception as exc:  # noqa: BLE001 - an unschedulable plan, counted apart
                mismatches.append(f"decoder: {exc}")
                continue
            t1 = time.perf_counter()
            ref = evaluate(inst, g.decode(xt, tidy=False))
            t2 = time.perf_counter()
            fast_s, ref_s = fast_s + t1 - t0, ref_s + t2 - t1
            same = (fast.latency_cycles == ref.latency_cycles and fast.energy.total_pj == ref.energy.total_pj
                    and fast.feasible == ref.feasible and fast.objective_value == ref.objective_value
                    and all(fast.peak_bytes.get(m.id, 0) == ref.peak_bytes.get(m.id, 0) for m in inst.memories))
            agree += same
            fused += bool(plan.fused)
            feasible += ref.feasible
            if not same and len(mismatches) < 5:
                mismatches.append(f"{plan.to_dict()}: fast {fast.latency_cycles}/{fast.energy.total_pj}, "
                                  f"evaluator {ref.latency_cycles}/{ref.energy.total_pj}")
        rows.append({"case": name, "objective": objective, "vectors": per_case, "fused": fused,
                     "feasible": feasible, "agree": agree, "plans": len(genome._tiled),  # noqa: SLF001
                     "fast_ms": round(1000 * fast_s / max(1, per_case), 2),
                     "evaluator_ms": round(1000 * ref_s / max(1, per_case), 2), "mismatches": mismatches})
    table = Table(title="fast path vs evaluator on random fused decisions (2x2 edge_tpu, 3 MiB per core)")
    for col in ("case", "objective", "vectors", "fused", "feasible", "agree", "plans", "fast ms", "evaluator ms"):
        table.add_column(col, justify="left" if col in ("case", "objective") else "right")
    for r in rows:
        table.add_row(r["case"], r["objective"], str(r["vectors"]), str(r["fused"]), str(r["feasible"]),
                      str(r["agree"]), str(r["plans"]), f"{r['fast_ms']:.2f}", f"{r['evaluator_ms']:.2f}")
    console = Console(width=160)
    console.print(table)
    for r in rows:
        for m in r["mismatches"]:
            console.print(f"{r['case']} {r['objective']}: {m}", markup=False)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    console.print(f"wrote {args.out}")
    if any(r["agree"] != r["vectors"] - len([m for m in r["mismatches"] if m.startswith("decoder")])
           for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
