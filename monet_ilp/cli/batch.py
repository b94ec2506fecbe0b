"""``monet-ilp batch``: run instance sets, summarise and plot their results (:mod:`monet_ilp.batch`).

User errors are raised as :class:`~monet_ilp.errors.MonetError`, which the CLI prints
on one line (exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from monet_ilp.batch.manifest import load_manifest
from monet_ilp.batch.results import latest_records, read_records
from monet_ilp.batch.runner import Observer, parse_scheduler, run_batch
from monet_ilp.batch.summary import TIME_SHIFT_S, summarize_records, write_csv
from monet_ilp.cli.render import console, err_console, show
from monet_ilp.errors import MonetError

if TYPE_CHECKING:
    from monet_ilp.batch.job import Job
    from monet_ilp.batch.manifest import Manifest

__all__ = ["batch"]


@click.group()
def batch() -> None:
    """Run instance sets (YAML manifests) locally or on Dask; summarise and plot the results."""


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


def _results_file(path: str) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / "results.jsonl"
    if not p.is_file():
        raise MonetError("no results.jsonl here", file=str(path),
                         fix="pass the --out directory of a `monet-ilp batch run`")
    return p


# ---------------------------------------------------------------------- run
class _Printer(Observer):
    """Progress of a run: a rich progress bar on a terminal, one line per job otherwise."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.live = not quiet and err_console.is_terminal
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        self.total = 0
        self.done = 0

    def started(self, total: int, skipped: int) -> None:
        self.total = total
        if skipped:
            self.note(f"resuming: {skipped} job{'s' if skipped != 1 else ''} already done, {total} to run")
        if self.live and total:
            self.bar = Progress(
                TextColumn("[bold]batch"), BarColumn(), MofNCompleteColumn(),
                TextColumn("done, {task.fields[running]} running, {task.fields[failed]} failed"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=err_console,
            )
            self.bar.start()
            self.task = self.bar.add_task("batch", total=total, running=0, failed=0)

    def progress(self, done: int, running: int, failed: int) -> None:
        self.done = done
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=done, running=running, failed=failed)

    def finished(self, job: Job, record: Mapping[str, Any]) -> None:
        if self.live or self.quiet:
            return
        gap = record.get("gap")
        err_console.print(
            f"[{self.done + 1}/{self.total}] {record['status']:<10} {job.describe()}"
            f"  obj={_fmt(record.get('objective'))} gap={'-' if gap is None else f'{100 * gap:.2f}%'}"
            f" {_fmt(record.get('wall_time_s'), '.2f')}s", markup=False, highlight=False, soft_wrap=True)

    def warn(self, text: str) -> None:
        self.note(f"warning: {text}", always=True)

    def note(self, text: str, always: bool = False) -> None:
        if always or not self.quiet:
            (self.bar.console if self.bar is not None else err_console).print(
                text, markup=False, highlight=False, soft_wrap=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


@batch.command("run")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--out", "-o", type=click.Path(file_okay=False),
              help="Results directory (default: results/<set name>).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Jobs at a time in the local pool (default: the number of CPUs).")
@click.option("--scheduler", metavar="local:N|tcp://HOST:PORT",
              help="Run on Dask: a LocalCluster of N workers, or a running scheduler.")
@click.option("--resume", is_flag=True, help="Skip the jobs already recorded in the results directory.")
@click.option("--retry-failed", is_flag=True, help="With --resume: run error and timeout jobs again.")
@click.option("--grace", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Seconds past its time limit before a solver is killed (recorded as timeout).")
@click.option("--build-timeout", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True,
              help="Seconds allowed to build one instance.")
@click.option("--dry-run", is_flag=True, help="List the jobs and what is already done; run nothing.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no per-job lines.")
def batch_run(manifest: str, out: str | None, jobs: int | None, scheduler: str | None, resume: bool,
              retry_failed: bool, grace: float, build_timeout: float, dry_run: bool, quiet: bool) -> None:
    """Solve every instance of a MANIFEST, appending each result to OUT/results.jsonl as it finishes."""
    if retry_failed and not resume:
        raise MonetError("--retry-failed needs --resume", field="--retry-failed", fix="add --resume")
    parse_scheduler(scheduler)  # reject a bad --scheduler before anything runs
    m = load_manifest(manifest)
    out = out or str(Path("results") / m.name)
    if m.duplicates and not quiet:
        err_console.print(f"note: {m.duplicates} duplicate job(s) in the grid, run once each")
    if dry_run:
        _print_jobs(m, out)
        return
    printer = _Printer(quiet)
    try:
        report = run_batch(m.jobs, out, workers=jobs, scheduler=scheduler, resume=resume,
                           retry_failed=retry_failed, grace=grace, build_timeout=build_timeout, observer=printer)
    except KeyboardInterrupt:
        printer.stop()
        err_console.print(f"interrupted: every finished job is in {Path(out) / 'results.jsonl'}; "
                          "run the same command with --resume to go on", markup=False, highlight=False)
        raise
    finally:
        printer.stop()
    if not quiet:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(report.counts.items())) or "nothing new"
        console.print(f"{m.name}: {report.ran} job(s) run in {report.elapsed_s:.1f} s ({counts}); "
                      f"{report.skipped} done before; results in {Path(out) / 'results.jsonl'}",
                      markup=False, highlight=False, soft_wrap=True)


def _print_jobs(m: Manifest, out: str) -> None:
    done = latest_records(read_records(Path(out) / "results.jsonl").records)
    table = Table(title=f"{m.name}: {len(m.jobs)} jobs" + (f" ({m.description})" if m.description else ""))
    for col in ("#", "key", "job", "time limit", "recorded"):
        table.add_column(col)
    for i, job in enumerate(m.jobs):
        record = done.get(job.key)
        table.add_row(str(i + 1), job.key, job.describe(), f"{job.time_limit:g} s",
                      record["status"] if record else "-")
    show(table)


# ------------------------------------------------------------------ summary
@batch.command("summary")
@click.argument("results", type=click.Path())
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Also write the table as CSV.")
def batch_summary(results: str, csv_path: str | None) -> None:
    """Per backend: jobs, solved (verified), optimal, mean gap, geometric-mean time."""
    path = _results_file(results)
    found = read_records(path)
    for number, reason in found.bad_lines:
        err_console.print(f"warning: {path}: line {number} skipped ({reason})", markup=False, highlight=False)
    records = list(latest_records(found.records).values())
    rows = summarize_records(records)
    sets = sorted({str(r.get("set")) for r in records})
    table = Table(title=f"{', '.join(sets) or path}: {len(records)} jobs")
    for col in ("backend", "jobs", "solved", "optimal", "infeasible", "unknown", "timeout", "error", "mean gap",
                "geo-mean time"):
        table.add_column(col, justify="left" if col == "backend" else "right")
    for row in rows:
        table.add_row(row.backend, str(row.jobs), str(row.solved), str(row.optimal), str(row.infeasible),
                      str(row.unknown), str(row.timeout), str(row.error),
                      "-" if row.mean_gap is None else f"{100 * row.mean_gap:.3f} %",
                      "-" if row.geomean_time_s is None else f"{row.geomean_time_s:.2f} s")
    table.caption = (f"solved = schedule verified by the evaluator; geo-mean time shifted by "
                     f"{TIME_SHIFT_S:g} s; mean gap over solved jobs with a bound")
    show(table)
    if csv_path:
        write_csv(rows, csv_path)
        err_console.print(f"wrote {csv_path}")


# --------------------------------------------------------------------- plot
@batch.command("plot")
@click.argument("results", type=click.Path())
@click.option("--out", "-o", "out_dir", type=click.Path(file_okay=False),
              help="Where to write the PNGs (default: RESULTS/plots).")
@click.option("--max-pareto", type=click.IntRange(min=0), default=50, show_default=True,
              help="At most this many per-instance Pareto plots.")
def batch_plot(results: str, out_dir: str | None, max_pareto: int) -> None:
    """Time-to-solve curves per backend, a gap histogram, per-instance Pareto fronts, and per-model
    design-space scatters (energy against latency per hardware point) (PNG)."""
    from monet_ilp.batch.plots import plot_results  # matplotlib is heavy: loaded only to plot

    path = _results_file(results)
    records = list(latest_records(read_records(path).records).values())
    out_dir = out_dir or str(path.parent / "plots")
    written = plot_results(records, out_dir, max_pareto=max_pareto)
    pareto = sum(1 for p in written if p.parent.name == "pareto")
    for p in written:
        if p.parent.name != "pareto":  # the curves, the histogram, the design-space scatters
            console.print(f"wrote {p}", markup=False, highlight=False)
    console.print(f"wrote {pareto} Pareto front(s) under {Path(out_dir) / 'pareto'}" if pareto
                  else "no instance was solved under several objectives: no Pareto front",
                  markup=False, highlight=False)
