"""GA scoring speed: the fast path against the reference evaluator; print a table and write JSON.

For each instance it times, on one core (the process is pinned to one CPU where the
system allows it):

* ``reference``: decode a random gene vector into a schedule and run the reference
  evaluator on it (what the GA did before the fast path);
* ``fast``: decode into field tuples and compute the metrics on the fast path
  (``monet_ilp.heuristics.fast``), after checking on the same vectors that both give the same
  metrics; both timings decode each vector as a GA's new individual (the decoder's
  cache of per-core-map tables emptied first);
* both with the GA's pin genes and without them (``--genes``): pinned weights fill the
  SRAMs, so the decoded schedules evict and move more, and take longer on both paths;
* ``ga``: whole NSGA-II runs (``run_ga``, one process) with each scoring, their
  evaluations per second as the GA reports them (pymoo's own work included), and whether
  their fronts are the same.  Every point a GA run returns has been evaluated again by
  the reference evaluator (``run_ga`` raises if a fast score differs from it).

The decoder and the fast path run compiled when the package was installed with mypyc
(``setup.py``); the table's title says which ran.  For the figures of the pure-Python
sources, run it with ``MONET_ILP_PURE_PYTHON=1``.

    python scripts/bench_ga.py --out bench_ga.json
    python scripts/bench_ga.py --quick          # ResNet-18 only, shorter runs
    MONET_ILP_PURE_PYTHON=1 python scripts/bench_ga.py --quick   # the sources, not compiled
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from monet_ilp import _native
from monet_ilp.evaluate import evaluate
from monet_ilp.ga.genome import Genome
from monet_ilp.ga.nsga2 import run_ga
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.decisions import plan_of
from monet_ilp.heuristics.fast import fast_metrics
from monet_ilp.make import make_instance

INSTANCES = {
    "resnet18_cifar_b1 edge_tpu 2x2 3MiB": lambda: make_instance(
        zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=2, n_pe_y=2), problem="P3", objective="latency",
        sram_budget=3 * 2**20),
    "mlp_d4 hetero_quad": lambda: make_instance(zoo.mlp(depth=4), preset("hetero_quad"), problem="P3",
                                                objective="energy"),
    "gpt2_tiny edge_tpu 2x1": lambda: make_instance(zoo.gpt2(preset="tiny"), preset("edge_tpu", n_pe_x=2, n_pe_y=1),
                                                    problem="P3", objective="latency"),
}


def per_call_ms(fn, items, repeats: int) -> float:
    """The best of ``repeats`` passes over ``items``, in milliseconds per item."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, (time.perf_counter() - start) / len(items))
    return best * 1e3


def measure(name: str, samples: int, repeats: int, generations: int, population: int, *,
            pins: bool) -> dict[str, Any]:
    instance = INSTANCES[name]()
    genome = Genome(instance, pins=pins)
    rng = np.random.default_rng(0)
    rows = [rng.integers(genome.lower, genome.upper + 1) for _ in range(samples)]
    mismatches = 0
    for x in rows:  # the same metrics on both paths (tests/ga/test_fast.py checks thousands more)
        fast = fast_metrics(instance, genome.decode_raw(x))
        ref = evaluate(instance, genome.decode(x, tidy=False))
        mismatches += (fast.latency_cycles, fast.energy, fast.feasible, dict(fast.peak_bytes)) != (
            ref.latency_cycles, ref.energy, ref.feasible, dict(ref.peak_bytes))
    # Each timed call decodes as for a new individual: the decoder's cache of per-core-map
    # tables (DecoderPlan.reads_by_core) is emptied first, or the repeated passes over the
    # same vectors would find every map there (0.1 ms a call less than a GA sees).
    cache = plan_of(instance).reads_cache

    def fresh(score):
        def call(x):
            cache.clear()
            return score(x)
        return call

    reference_ms = per_call_ms(fresh(lambda x: evaluate(instance, genome.decode(x, tidy=False))), rows, repeats)
    fast_ms = per_call_ms(fresh(lambda x: fast_metrics(instance, genome.decode_raw(x))), rows, repeats)
    runs = {}
    for scoring in ("fast", "reference"):
        result = run_ga(instance, generations=generations, population=population, seed=1,
                        fast=scoring == "fast", pins=pins)
        runs[scoring] = result
    same_front = ([(p["latency_cycles"], p["energy_pj"]) for p in runs["fast"]["points"]]
                  == [(p["latency_cycles"], p["energy_pj"]) for p in runs["reference"]["points"]])
    return {
        "instance": name, "pin_genes": len(genome.pin_layers), "ops": len(instance.graph.ops), "cores": len(instance.cores), "genes": genome.size,
        "samples": samples, "mismatches": mismatches,
        "reference_ms": round(reference_ms, 4), "fast_ms": round(fast_ms, 4),
        "reference_per_s": round(1e3 / reference_ms, 1), "fast_per_s": round(1e3 / fast_ms, 1),
        "speedup": round(reference_ms / fast_ms, 2),
        "ga_generations": generations, "ga_population": population,
        "ga_evaluations": runs["fast"]["evaluations"],
        "ga_fast_per_s": runs["fast"]["evaluations_per_second"],
        "ga_reference_per_s": runs["reference"]["evaluations_per_second"],
        "ga_fast_seconds": runs["fast"]["seconds"], "ga_reference_seconds": runs["reference"]["seconds"],
        "ga_points": len(runs["fast"]["points"]), "same_front": same_front,
        # Every returned point was evaluated again by the reference evaluator (run_ga does it,
        # and raises if the fast score differs); how many of them it found feasible.
        "ga_feasible_points": sum(p["feasible"] for p in runs["fast"]["points"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", nargs="*", default=list(INSTANCES), choices=list(INSTANCES))
    parser.add_argument("--samples", type=int, default=300, help="random gene vectors timed per instance")
    parser.add_argument("--repeats", type=int, default=5, help="passes over them; the best is reported")
    parser.add_argument("--generations", type=int, default=100)
    parser.add_argument("--population", type=int, default=64)
    parser.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU")
    parser.add_argument("--genes", nargs="*", default=["pins", "no-pins"], choices=["pins", "no-pins"],
                        help="with the GA's pin genes, without them, or both (default)")
    parser.add_argument("--quick", action="store_true", help="ResNet-18 only, 100 samples, 30 generations")
    parser.add_argument("--out", help="write the rows as JSON")
    args = parser.parse_args()
    if args.quick:
        args.instances, args.samples, args.repeats, args.generations = [next(iter(INSTANCES))], 100, 3, 30
    pinned = None
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        pinned = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {pinned})
    console = Console(width=180)
    rows = []
    for name in args.instances:
        for genes in args.genes:
            rows.append(measure(name, args.samples, args.repeats, args.generations, args.population,
                                pins=genes == "pins"))
            console.print(f"{name} ({genes}): fast {rows[-1]['fast_per_s']:,.0f}/s, "
                          f"GA {rows[-1]['ga_fast_per_s']:,.0f}/s", highlight=False)
    status = _native.status()
    compiled = sorted({v.split(":")[0] for v in status.values()})
    table = Table(title=f"GA scoring, one process{'' if pinned is None else f' pinned to CPU {pinned}'}; "
                        f"decoder and fast path: {' / '.join(compiled)}")
    for col in ("instance", "ops", "genes (pin)", "reference ms", "fast ms", "speedup", "fast evals/s",
                "GA evals/s (fast)", "GA evals/s (reference)", "same front", "front (feasible)", "mismatches"):
        table.add_column(col, justify="left" if col == "instance" else "right")
    for r in rows:
        table.add_row(r["instance"], str(r["ops"]), f"{r['genes']} ({r['pin_genes']})", f"{r['reference_ms']:.3f}",
                      f"{r['fast_ms']:.3f}", f"{r['speedup']:.2f}x", f"{r['fast_per_s']:,.0f}",
                      f"{r['ga_fast_per_s']:,.0f}", f"{r['ga_reference_per_s']:,.0f}", str(r["same_front"]),
                      f"{r['ga_points']} ({r['ga_feasible_points']})", str(r["mismatches"]))
    console.print(table)
    console.print(f"median speedup {statistics.median(r['speedup'] for r in rows):.2f}x", highlight=False)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"pinned_cpu": pinned, "compiled": status, "rows": rows}, fh, indent=1)
        console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
