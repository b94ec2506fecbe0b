"""What the command line prints: consoles, tables that never cut a number, option types.

Shared by every command group (``cli``, ``ga_commands``, ``batch.commands``, the
demo).  A table that is wider than the terminal is not squeezed (rich would cut its
numbers with an ellipsis): it is printed as one block of ``column: value`` lines per
row instead.  Output that is not a terminal gets :data:`PIPE_WIDTH` columns.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

#: Columns of output written to a file or a pipe, where no terminal sets them.
PIPE_WIDTH = 200

console = Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else PIPE_WIDTH)

class _Seconds(click.FloatRange):
    """A positive, finite number of seconds (``nan`` slips through a plain range)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        seconds = super().convert(value, param, ctx)
        if seconds != seconds:
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


#: Option types: a positive number of seconds, a positive count (threads, points, ...).
SECONDS = _Seconds(min=0, min_open=True, max=1e9)
POSITIVE = click.IntRange(min=1)


def exit_unless(ok: bool) -> None:
    """Exit with status 1 when a command's answer is negative (the rule in ``monet_ilp.cli``)."""
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
        for header, column in zip(headers, cells):
            record.add_row(f"{header}:", column[row])
        out.print(record)
        out.print()
    if table.caption:
        out.print(table.caption, style="dim", markup=False, highlight=False)

