"""Time the evaluator on store-all schedules of zoo graphs; print a table and write JSON.

For ResNet-18 (CIFAR) and GPT-2 small (layer granularity, P1 instance with the
store-all peak as budget) it times ``evaluate()`` on the store-all Sequence and on
its timed Schedule form: the median of ``--runs`` calls after a warm-up (the warm-up
also builds the evaluator's per-instance index, which is cached).

    python scripts/bench_evaluator.py --out bench_evaluator.json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time

from rich.console import Console
from rich.table import Table

from monet_ilp.evaluate import evaluate
from monet_ilp.graph import TrainingGraph, zoo
from monet_ilp.make import p1_instance
from monet_ilp.schedule import Compute, Release, Sequence

MODELS = [
    ("resnet18", {"variant": "cifar"}),
    ("gpt2", {"preset": "small"}),
]


def store_all(graph: TrainingGraph) -> Sequence:
    """Every op in graph order, each non-persistent tensor released right after its last reader."""
    last: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs + op.outputs:
            last[t] = i
    after: dict[int, list[str]] = {}
    for t in graph.tensors:
        if not t.persistent:
            after.setdefault(last.get(t.id, -1), []).append(t.id)
    steps: list = [Release(t) for t in after.get(-1, [])]
    for i, op in enumerate(graph.ops):
        steps.append(Compute(op.id))
        steps.extend(Release(t) for t in after.get(i, []))
    return Sequence(tuple(steps))


def median_ms(fn, runs: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure(name: str, params: dict, runs: int, warmup: int) -> list[dict]:
    graph = zoo.build(name, **params)
    instance = p1_instance(graph, budget=1.0)
    sequence = store_all(graph)
    start = time.perf_counter()
    first = evaluate(instance, sequence)  # builds and caches the per-instance index
    first_ms = (time.perf_counter() - start) * 1e3
    timed = first.schedule
    rows = []
    for form, schedule in (("sequence", sequence), ("timed", timed)):
        metrics = evaluate(instance, schedule)
        rows.append({
            "model": name + "".join(f" {k}={v}" for k, v in params.items()),
            "form": form,
            "ops": len(graph.ops),
            "tensors": len(graph.tensors),
            "steps": len(sequence.steps) if form == "sequence" else len(timed.ops) + len(timed.frees),
            "feasible": metrics.feasible,
            "peak_bytes": metrics.peak_bytes[instance.cores[0].memory],
            "median_ms": round(median_ms(functools.partial(evaluate, instance, schedule), runs, warmup), 4),
            "first_call_ms": round(first_ms, 4) if form == "sequence" else None,
            "runs": runs,
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench_evaluator.json")
    parser.add_argument("--runs", type=int, default=200, help="timed calls per case (median reported)")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    rows = [r for name, params in MODELS for r in measure(name, params, args.runs, args.warmup)]
    table = Table(title=f"evaluate() on store-all schedules (median of {args.runs})")
    for col in ("model", "form", "ops", "steps", "feasible", "peak MiB", "ms / eval", "first call ms"):
        table.add_column(col, justify="left" if col in ("model", "form") else "right")
    for r in rows:
        table.add_row(r["model"], r["form"], str(r["ops"]), str(r["steps"]), str(r["feasible"]),
                      f"{r['peak_bytes'] / 2**20:.1f}", f"{r['median_ms']:.3f}",
                      "" if r["first_call_ms"] is None else f"{r['first_call_ms']:.3f}")
    Console(width=140).print(table)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
