"""Throughput of the batch runner: 1 vs 2 local workers, and a Dask LocalCluster against the local pool.

The set: 40 P1 jobs of cpsat (one solver thread each) on random layered DAGs of 60
and 80 nodes at 0.9 of the store-all peak, with a 5 s time limit, so that each
solve takes 5 to 10 s (CP-SAT's clock starts after its model is built).  It is run
three times, each as a fresh ``monet-ilp batch run`` process into a fresh results
directory, as a user runs it (start-up included: the fork server, the cluster): on
the local pool with 1 and with 2 jobs at a time, and on a 2-worker Dask
LocalCluster.  Printed and written as JSON:

* throughput (jobs per minute) and the speed-up of 2 workers over 1;
* the overhead of the LocalCluster relative to the local pool, per instance:
  ``(T_dask - T_pool) / T_pool`` over the whole command;
* the harness overhead per job on each executor: the job's elapsed time (worker
  start to result) minus the solver's and the instance builder's.

The machine's load average is recorded, since other processes share the cores.
No assertion is made about time.

    python scripts/bench_batch.py --out bench_batch.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from monet_ilp.batch import parse_manifest, read_records

MANIFEST = """
name: bench_batch
models:
  - random: {{}}
    sweep:
      n: [60, 80]
      seed: {seeds}
budgets: 0.9
objectives: compute
backends: [cpsat]
time_limits: {time_limit}
workers: 1
"""


def measure(label: str, manifest: Path, out: Path, *options: str) -> dict:
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "monet_ilp", "batch", "run", str(manifest), "--out", str(out),
                    "--quiet", *options], check=True)
    seconds = time.monotonic() - start
    records = read_records(out / "results.jsonl").records
    solve = [r["wall_time_s"] or 0.0 for r in records]
    overhead = [r["elapsed_s"] - (r["wall_time_s"] or 0.0) - (r["build_s"] or 0.0) for r in records
                if r.get("elapsed_s") is not None]
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {
        "run": label,
        "options": list(options),
        "jobs": len(records),
        "seconds": round(seconds, 2),
        "jobs_per_min": round(60 * len(records) / seconds, 3),
        "seconds_per_job": round(seconds / len(records), 3),
        "mean_solve_s": round(statistics.mean(solve), 3),
        "min_solve_s": round(min(solve), 3),
        "max_solve_s": round(max(solve), 3),
        "mean_harness_overhead_s": round(statistics.mean(overhead), 3),
        "median_harness_overhead_s": round(statistics.median(overhead), 3),
        "statuses": statuses,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=40, help="Jobs in the set (even; default 40).")
    parser.add_argument("--time-limit", type=float, default=5.0, help="cpsat's time limit per job (s).")
    parser.add_argument("--work", help="Where the results directories go (default: a temporary folder).")
    parser.add_argument("--out", default="bench_batch.json", help="JSON output.")
    args = parser.parse_args()

    seeds = list(range(args.instances // 2))
    text = MANIFEST.format(seeds=seeds, time_limit=args.time_limit)
    jobs = parse_manifest(text, source="bench_batch").jobs
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_batch_"))
    work.mkdir(parents=True, exist_ok=True)
    manifest = work / "bench_batch.yaml"
    manifest.write_text(text)
    console = Console(width=120)
    console.print(f"{len(jobs)} jobs, results under {work}")
    runs = []
    for label, options in (("local pool, 1 worker", ("--jobs", "1")),
                           ("local pool, 2 workers", ("--jobs", "2")),
                           ("Dask LocalCluster, 2 workers", ("--scheduler", "local:2"))):
        console.print(f"running: {label}")
        out = work / label.replace(" ", "_").replace(",", "")
        shutil.rmtree(out, ignore_errors=True)
        runs.append(measure(label, manifest, out, *options))

    one, two, dask = runs
    speedup = two["jobs_per_min"] / one["jobs_per_min"]
    dask_overhead = (dask["seconds"] - two["seconds"]) / two["seconds"]
    table = Table(title=f"batch throughput: {len(jobs)} cpsat jobs of {args.time_limit:g} s time limit")
    for col in ("run", "seconds", "jobs/min", "s/job", "mean solve s", "overhead s/job (mean, median)", "load"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for r in runs:
        table.add_row(r["run"], f"{r['seconds']:.1f}", f"{r['jobs_per_min']:.2f}", f"{r['seconds_per_job']:.2f}",
                      f"{r['mean_solve_s']:.2f}",
                      f"{r['mean_harness_overhead_s']:.3f}, {r['median_harness_overhead_s']:.3f}",
                      f"{r['load_before']:.1f} -> {r['load_after']:.1f}")
    console.print(table)
    console.print(f"speed-up of 2 workers over 1: {speedup:.2f}x (target >= 1.8x)")
    console.print(f"LocalCluster overhead per instance relative to the local pool: {100 * dask_overhead:+.2f} % "
                  f"({(dask['seconds'] - two['seconds']) / len(jobs):+.3f} s per instance; target < 5 %)")
    result = {
        "instances": len(jobs),
        "time_limit_s": args.time_limit,
        "cpus": os.cpu_count(),
        "runs": runs,
        "speedup_2_over_1": round(speedup, 3),
        "dask_overhead_relative": round(dask_overhead, 4),
        "dask_overhead_s_per_instance": round((dask["seconds"] - two["seconds"]) / len(jobs), 4),
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
