"""What the command line prints: the consoles, tables that never cut a number, option types,
spinners and progress bars.

The one rendering module of :mod:`monet_ilp.cli`: every command module prints through
it.  A table that is wider than the terminal is not squeezed (rich would cut its
numbers with an ellipsis): it is printed as one block of ``column: value`` lines per
row instead.  Output that is not a terminal gets :data:`PIPE_WIDTH` columns.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from monet_ilp import progress

__all__ = ["DTYPE", "GRANULARITY", "OPTIMIZER", "PIPE_WIDTH", "POSITIVE", "SECONDS", "console", "err_console",
           "exit_unless", "import_options", "progress_bar", "show", "working"]

#: Columns of output written to a file or a pipe, where no terminal sets them.
PIPE_WIDTH = 200

console = Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else PIPE_WIDTH)


class _Seconds(click.FloatRange):
    """A positive, finite number of seconds (``nan`` slips through a plain range)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


#: Option types: a positive number of seconds, a positive count (threads, points, ...).
SECONDS = _Seconds(min=0, min_open=True, max=1e9)
POSITIVE = click.IntRange(min=1)
#: How a model becomes a training graph (:func:`import_options`).
GRANULARITY = click.Choice(["layer", "op"])
OPTIMIZER = click.Choice(["sgd", "momentum", "adam"])
DTYPE = click.Choice(["fp32", "bf16", "fp16", "int8"])

F = TypeVar("F", bound=Callable[..., Any])


def import_options(f: F) -> F:
    """``--optimizer``, ``--granularity`` and ``--dtype``: how a model becomes a training graph."""
    f = click.option("--optimizer", type=OPTIMIZER, default="sgd", show_default=True,
                     help="Optimizer whose update ops and state tensors the graph gets.")(f)
    f = click.option("--granularity", type=GRANULARITY, default="layer", show_default=True,
                     help="layer: each conv/matmul absorbs its elementwise tail; op: one node per ONNX op.")(f)
    f = click.option("--dtype", type=DTYPE, default=None,
                     help="Element type of every float tensor (default: the model's).")(f)
    return f


def exit_unless(ok: bool) -> None:
    """Exit with status 1 when a command's answer is negative (the rule in :mod:`monet_ilp.cli`)."""
    if not ok:
        sys.exit(1)


def show(table: Table, to: Console | None = None) -> None:
    """Print ``table`` at its natural width, or row by row if that does not fit.

    Every column of a table that fits is as wide as its widest cell, so no value is
    wrapped or cut; one that does not fit becomes a list of records.
    """
    out = to or console
    unbounded = out.options.update(max_width=10**6)  # measure as if the terminal had no edge
    natural = Measurement.get(out, unbounded, table).maximum
    if natural <= out.width:
        for column in table.columns:
            column.no_wrap = True
        out.print(table)
        return
    if table.title:
        out.print(table.title, style="italic", markup=False, highlight=False)
    headers = [str(column.header) for column in table.columns]
    cells = [list(column.cells) for column in table.columns]
    for row in range(table.row_count):
        record = Table.grid(padding=(0, 1))
        record.add_column(style="bold", no_wrap=True)
        record.add_column(overflow="fold")
        for header, values in zip(headers, cells, strict=True):
            record.add_row(f"{header}:", values[row])
        out.print(record)
        out.print()
    if table.caption:
        out.print(table.caption, style="dim", markup=False, highlight=False)


@contextmanager
def working(message: str) -> Iterator[None]:
    """A spinner on stderr for steps that may take more than a second.

    What the step reports through :mod:`monet_ilp.progress` replaces the spinner's text.
    """
    if err_console.is_terminal:
        with err_console.status(message) as status, progress.listening(
                lambda step: status.update(f"{message}: {step}")):
            yield
    else:
        yield


@contextmanager
def progress_bar(description: str, total: int, *,
                 counts: bool = False) -> Iterator[Callable[[int, int, str], None]]:
    """A transient progress bar on stderr; yields the ``progress(done, total, message)`` callback
    that the library's long loops (Pareto sweep, grading, GA) call.

    ``counts`` shows ``done/total`` and the elapsed time instead of rich's default columns.
    """
    columns = ((TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
               if counts else ())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done, _total, message: bar.update(task, completed=done, description=message)
