"""Time the start-up of the ``monet-ilp`` command and of ``import monet_ilp.solve``; print a table and write JSON.

Each case is a fresh interpreter, timed from the parent's ``perf_counter`` (wall time,
start-up and exit included): ``--help``, ``backends``, a bad-input error (a missing
instance file), ``solve`` on the default zoo MLP (depth 4: 27 ops, P1 at 0.9 of its
store-all peak; the solve itself takes a few hundredths of a second), and the bare
import of :mod:`monet_ilp.solve`.  One untimed warm-up run per case fills the file
cache and the bytecode; the median of ``--runs`` timed runs is reported, with the
load average when the runs ended (the figures grow with the load).

    python scripts/bench_startup.py --out bench_startup.json
    python scripts/bench_startup.py --src /tmp/old-checkout   # another checkout's package
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

MLP = ["instance", "make", "--model", "mlp", "--budget", "0.9"]


def cases(instance: Path, missing: Path) -> list[tuple[str, list[str]]]:
    """``(name, argv)`` for each case: a ``monet-ilp`` command, or a bare Python import."""
    return [
        ("monet-ilp --help", ["--help"]),
        ("monet-ilp backends", ["backends"]),
        ("monet-ilp solve missing.json", ["solve", str(missing)]),
        ("monet-ilp solve mlp (27 ops)", ["solve", str(instance)]),
        ("import monet_ilp.solve", []),
    ]


def command(argv: list[str]) -> list[str]:
    """The interpreter line of a case: the CLI's entry point (as the console script runs it), or the import."""
    if not argv:
        return [sys.executable, "-c", "import monet_ilp.solve"]
    return [sys.executable, "-c", "import sys; from monet_ilp.cli import main; main(sys.argv[1:])", *argv]


def time_once(line: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(line, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench_startup.json")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per case (median reported)")
    parser.add_argument("--src", type=Path, default=None,
                        help="import monet_ilp from this checkout (put first on PYTHONPATH)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(args.src.resolve()), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    work = Path(tempfile.mkdtemp(prefix="bench_startup_"))
    try:
        instance = work / "mlp.json"
        made = subprocess.run(command([*MLP, "--out", str(instance)]), env=env, capture_output=True, text=True,
                              check=False)
        if made.returncode != 0:
            sys.exit(f"instance make failed:\n{made.stderr}")
        rows = []
        for name, argv in cases(instance, work / "missing.json"):
            line = command(argv)
            _, status = time_once(line, env)  # warm-up: file cache and bytecode
            times = [time_once(line, env)[0] for _ in range(args.runs)]
            rows.append({
                "case": name,
                "exit_status": status,
                "median_s": round(statistics.median(times), 3),
                "min_s": round(min(times), 3),
                "max_s": round(max(times), 3),
                "runs": args.runs,
            })
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = [round(x, 2) for x in os.getloadavg()]
    src = str(args.src) if args.src is not None else "installed package"
    table = Table(title=f"start-up wall time, median of {args.runs}: {src}, load average {load[0]:.2f} on "
                        f"{os.cpu_count()} CPUs")
    for col in ("case", "exit", "median s", "min s", "max s"):
        table.add_column(col, justify="left" if col == "case" else "right")
    for r in rows:
        table.add_row(r["case"], str(r["exit_status"]), f"{r['median_s']:.3f}", f"{r['min_s']:.3f}",
                      f"{r['max_s']:.3f}")
    Console(width=140, soft_wrap=True).print(table)
    with open(args.out, "w") as f:
        json.dump({"source": src, "load_average": load, "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
