"""``monet-ilp plot``: the command-line face of :mod:`monet_ilp.plot` (Gantt charts, Pareto fronts)."""

from __future__ import annotations

import click

from monet_ilp.plot import gantt, pareto

__all__ = ["plot"]


@click.group()
def plot() -> None:
    """Draw schedules (Gantt chart with memory occupancy) and Pareto fronts."""


@plot.command("gantt")
@click.argument("schedule_path", type=click.Path(dir_okay=False))
@click.option("--instance", "instance_path", type=click.Path(dir_okay=False), required=True,
              help="The instance the schedule solves (a monet-ilp instance JSON).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True,
              help="Write the figure here (.png, .pdf, .svg, ...).")
@click.option("--title", help="Figure title (default: instance, latency, energy, verdict).")
def gantt_cmd(schedule_path: str, instance_path: str, out: str, title: str | None) -> None:
    """Draw a schedule: core and link lanes, then memory occupancy.

    One lane per core and per link that carries a transfer, then each memory's
    occupancy against its capacity (a memory that holds nothing says why).  Works on
    timed schedules (P1, P2, P3) and P1 sequences (drawn as the evaluator times them).
    Recomputations are hatched; transfers are coloured by direction.
    """
    gantt(instance_path, schedule_path, path=out, title=title)
    click.echo(f"wrote {out}", err=True)


@plot.command("pareto")
@click.argument("front_path", type=click.Path(dir_okay=False))
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True,
              help="Write the figure here (.png, .pdf, .svg, ...).")
def pareto_cmd(front_path: str, out: str) -> None:
    """Draw a latency/energy Pareto front.

    The non-dominated points joined as a step front, their certified lower bounds,
    dominated points in grey and infeasible ones as red crosses.  FRONT_PATH is the
    JSON written by `monet-ilp pareto` or by `monet-ilp ga --out` (both formats are in
    the monet_ilp.plot docstring).  Each axis is in the unit its values call for
    (kcycles, Mcycles, nJ, mJ, ...).
    """
    pareto(front_path, path=out)
    click.echo(f"wrote {out}", err=True)
