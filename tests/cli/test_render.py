"""Tables on narrow and wide consoles: every number printed whole."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from monet_ilp.cli.render import show
from monet_ilp.units import human_bytes

NUMBERS = ["41,263,731,307", "12,456,038", "7,687,888,503"]


def wide_table() -> Table:
    table = Table(title="energy breakdown")
    for col in ("method", "verdict", "latency (cycles)", "energy (pJ)", "peak SRAM", "latency gap",
                "energy gap", "seconds"):
        table.add_column(col, justify="right")
    table.add_row("store-all", "over SRAM", NUMBERS[1], NUMBERS[0], "4.64 MiB", "12.50 %", "41.20 %", "0.1")
    table.add_row("cpsat", "feasible", NUMBERS[1], NUMBERS[2], "2.99 MiB", "5.10 %", "0.00 %", "45.0")
    return table


def render(width: int) -> str:
    out = io.StringIO()
    show(wide_table(), Console(file=out, width=width, color_system=None))
    return out.getvalue()


def test_a_table_that_fits_is_printed_at_its_natural_width():
    text = render(200)
    for number in NUMBERS:
        assert number in text
    assert "…" not in text
    assert text.count("energy (pJ)") == 1  # one header row: printed as a table


def test_a_table_too_wide_for_the_terminal_becomes_records_with_whole_numbers():
    text = render(60)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 60
    for number in NUMBERS:
        assert number in text
    assert text.count("energy (pJ):") == 2  # one record per row
    assert "energy breakdown" in text


def test_human_bytes():
    assert human_bytes(512) == "512 B"
    assert human_bytes(3 * 2**20) == "3.00 MiB"
