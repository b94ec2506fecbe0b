"""Numbers for people: bytes in binary units, counts with a decimal prefix.

The one byte formatter and the one count formatter of the package (tables, plot
labels, preset names).  Bottom layer: imports nothing from the package.
"""

from __future__ import annotations


def human_bytes(n: int) -> str:
    """``n`` bytes in binary units (``1.50 MiB``)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{n} B"


def human_count(n: int) -> str:
    """``n`` with a decimal prefix (``1.234 G``)."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3f} {unit}"
    return str(n)
