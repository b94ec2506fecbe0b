"""The pipeline schedule of a P4 plan: each stage's forwards and backwards over one iteration.

Drawn from the evaluator's timeline (:func:`monet_ilp.problems.p4.evaluate.evaluate_plan`),
one row per pipeline stage, forwards and backwards in two colours, each block labelled
with its micro-batch while there is room; the bubble is the white space.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monet_ilp.plot.figures import check_output, new_figure, save

if TYPE_CHECKING:
    from pathlib import Path

    from matplotlib.figure import Figure

    from monet_ilp.problems.p4.evaluate import PlanMetrics

__all__ = ["pipeline"]

_COLORS = {"F": "#4c78a8", "B": "#f58518"}


def pipeline(metrics: PlanMetrics, *, title: str = "", out: str | Path | None = None) -> Figure:
    """Draw the timeline of ``metrics`` (one row per stage); save it to ``out`` if given."""
    path = check_output(out)
    stages = 1 + max((t[0] for t in metrics.timeline), default=0)
    fig = new_figure(10, 1.2 + 0.45 * stages)
    ax = fig.add_subplot()
    end = max((t[4] for t in metrics.timeline), default=1)
    scale, unit = (1e6, "ms") if end >= 1e6 else (1e3, "µs")
    few = len(metrics.timeline) <= 400
    for stage, kind, micro, start, stop in metrics.timeline:
        ax.barh(stage, (stop - start) / scale, left=start / scale, height=0.8, color=_COLORS[kind],
                edgecolor="white", linewidth=0.3)
        if few:
            ax.text((start + stop) / 2 / scale, stage, str(micro), ha="center", va="center", fontsize=6,
                    color="white")
    ax.set_yticks(range(stages), [f"stage {s}" for s in range(stages)])
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit}); forwards blue, backwards orange; gradient sync and optimizer step follow")
    ax.set_title(title or f"pipeline: {metrics.time_s:.3f} s per iteration, MFU {100 * metrics.mfu:.1f} %")
    if path is not None:
        save(fig, path)
    return fig
