"""Axes of the plots: cycles, picojoules and bytes in the unit that keeps tick labels short.

Axes show cycles and picojoules in the unit that keeps tick labels short (kcycles,
Mcycles, nJ, µJ, mJ, ..., :func:`pick_unit`, chosen from the largest value drawn),
and name the unit in the axis label; memory panels use B, KiB, MiB or GiB the same
way (:func:`unit_axis`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
from matplotlib.ticker import Formatter, MaxNLocator

from monet_ilp.units import human_bytes

if TYPE_CHECKING:
    from matplotlib.axis import Axis

__all__ = ["UNITS", "pick_unit", "quantity", "unit_axis"]

#: Units of each base quantity, smallest first: (factor, name).  Energies are in
#: picojoules and times in cycles everywhere in monet-ilp (instance.py).
UNITS: Mapping[str, tuple[tuple[int, str], ...]] = {
    "cycles": ((1, "cycles"), (10**3, "kcycles"), (10**6, "Mcycles"), (10**9, "Gcycles")),
    "pJ": ((1, "pJ"), (10**3, "nJ"), (10**6, "µJ"), (10**9, "mJ"), (10**12, "J"), (10**15, "kJ")),
    "B": ((1, "B"), (1024, "KiB"), (1024**2, "MiB"), (1024**3, "GiB"), (1024**4, "TiB")),
}
# Tick steps MaxNLocator may pick (times a power of ten): 2.5 is left out, since its
# ticks (0, 2.5, 5, 7.5) need a decimal more than the step's own order of magnitude.
_TICK_STEPS = (1, 2, 5, 10)


def pick_unit(top: float, base: str) -> tuple[int, str]:
    """The largest unit of ``base`` (a key of :data:`UNITS`) not above ``|top|``.

    ``top`` in that unit is below 1000 (1024 for bytes) unless the ladder ends first,
    so tick labels have at most three digits before the point.  Values below the
    smallest unit get the smallest.

    Examples
    --------
    >>> pick_unit(6_217_177, "cycles")
    (1000000, 'Mcycles')
    >>> pick_unit(42_854_725_770, "pJ")
    (1000000000, 'mJ')
    """
    chosen = UNITS[base][0]
    for factor, name in UNITS[base]:
        if abs(top) >= factor:
            chosen = (factor, name)
    return chosen


def quantity(value: float, base: str) -> str:
    """``value`` in its own unit with four significant digits: ``"6.217 Mcycles"``.

    Bytes are written by the package's one byte formatter,
    :func:`monet_ilp.units.human_bytes` (``"1.50 MiB"``).
    """
    if base == "B":
        return human_bytes(int(value))
    factor, name = pick_unit(value, base)
    if factor == 1:
        return f"{value:,.0f} {name}"
    return f"{value / factor:.4g} {name}"


class _ScaledFormatter(Formatter):
    """Tick labels divided by a unit factor, with as few decimals as the ticks need."""

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.decimals = 0

    def set_locs(self, locs: list[float]) -> None:
        super().set_locs(locs)
        values = [v / self.factor for v in locs]
        # The fewest decimals (up to 3) at which every tick label is exact.
        self.decimals = next((d for d in range(4) if all(abs(v * 10**d - round(v * 10**d)) < 1e-6
                                                          for v in values)), 3)

    def __call__(self, x: float, pos: int | None = None) -> str:
        text = f"{x / self.factor:.{self.decimals}f}"
        return "0" if float(text) == 0 else text  # no "-0" or "0.0"


class _ScaledLocator(MaxNLocator):
    """MaxNLocator's round steps counted in a unit: ticks at 1 MiB, not at 1,000,000 B."""

    def __init__(self, factor: float, **kwargs: Any) -> None:  # MaxNLocator's own keywords
        super().__init__(**kwargs)
        self.factor = factor

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        ticks = np.asarray(super().tick_values(vmin / self.factor, vmax / self.factor)) * self.factor
        return cast("Sequence[float]", ticks)  # an array, as MaxNLocator's own


def unit_axis(axis: Axis, top: float, base: str, label: str,
              nbins: int | Literal["auto"] = "auto") -> str:
    """Scale a matplotlib axis to the unit of ``top`` and name the unit in its label.

    Parameters
    ----------
    axis
        ``ax.xaxis`` or ``ax.yaxis``.
    top
        The largest value drawn on it, in the base unit.
    base
        A key of :data:`UNITS`: ``"cycles"``, ``"pJ"`` or ``"B"``.
    label
        The quantity, e.g. ``"latency"``; the axis label becomes ``"latency (Mcycles)"``.
    nbins
        At most this many tick intervals (matplotlib's ``MaxNLocator``).

    Returns
    -------
    str
        The unit's name.
    """
    factor, name = pick_unit(top, base)
    axis.set_major_locator(_ScaledLocator(factor, nbins=nbins, steps=list(_TICK_STEPS)))
    axis.set_major_formatter(_ScaledFormatter(factor))
    axis.set_label_text(f"{label} ({name})")
    return name

