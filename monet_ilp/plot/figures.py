"""What every figure of :mod:`monet_ilp.plot` shares: colours, resolution, the output file.

Figures are made on matplotlib's Agg canvas without pyplot, so no global backend is
set and no window opens.  :func:`check_output` refuses a path that cannot be written
before any drawing is done; :func:`save` writes the figure there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from monet_ilp.errors import MonetError

__all__ = ["CAPACITY_COLOR", "DPI", "OP_COLORS", "TRANSFER_COLORS", "UNKNOWN_COLOR", "check_output",
           "new_figure", "save"]

#: Bar colour of a run, by the kind of its op (``monet_ilp.graph.ir.OpKind``).
OP_COLORS: Mapping[str, str] = {
    "forward": "#4C72B0",
    "forward_tile": "#8FB3E0",   # a tile of a fused stack (formulations/fusion.md FU.T1)
    "weight_stage": "#55A868",   # a stack's weights staged into SRAM (FU.T4)
    "backward_data": "#DD8452",
    "backward_weight": "#C44E52",
    "loss": "#8172B3",
    "optimizer": "#937860",
}
#: Bar colour of a transfer, by direction: ``offload`` goes to a memory that is not an
#: SRAM, ``prefetch`` comes from one into an SRAM, ``core_to_core`` joins two SRAMs.
TRANSFER_COLORS: Mapping[str, str] = {
    "offload": "#E377C2",
    "prefetch": "#17BECF",
    "core_to_core": "#BCBD22",
}
#: A run of an op, or a transfer between memories, that the instance lacks.
UNKNOWN_COLOR = "#9A9A9A"
#: What breaks the instance: a memory's capacity line, an infeasible point.
CAPACITY_COLOR = "#D62728"
#: Resolution of every figure, in dots per inch.
DPI = 110


def new_figure(width_in: float, height_in: float) -> Figure:
    """An empty figure with constrained layout, on its own Agg canvas."""
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def check_output(path: str | Path | None) -> Path | None:
    """Refuse an output path that cannot be written before any drawing is done."""
    if path is None:
        return None
    path = Path(path)
    suffix = path.suffix.lower().lstrip(".")
    supported = FigureCanvasAgg.get_supported_filetypes()
    if suffix not in supported:
        choices = ", ".join("." + s for s in sorted(supported))
        raise MonetError(f"cannot write a {suffix or 'suffix-less'} figure", file=str(path),
                         field="output path", fix=f"end the path in one of {choices}")
    if not path.parent.is_dir():
        raise MonetError(f"directory {str(path.parent)!r} does not exist", file=str(path),
                         field="output path", fix="create the directory, or write elsewhere")
    return path


def save(fig: Figure, path: Path) -> None:
    try:
        fig.savefig(path)
    except OSError as err:
        raise MonetError(f"cannot write the figure ({err.strerror or err})", file=str(path),
                         field="output path", fix="write into a writable directory") from None
