"""``monet-ilp backends``: the backend registry as a table (:mod:`monet_ilp.problems.registry`)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from monet_ilp.cli.render import show
from monet_ilp.instance import Objective, Problem
from monet_ilp.problems import registry

if TYPE_CHECKING:
    from monet_ilp.problems.registry import BackendSpec

__all__ = ["backends", "spec_record"]

#: Characters per line of the long cells (schedule class, options), so the table fits a terminal.
_CELL = 36


def spec_record(spec: BackendSpec) -> dict[str, Any]:
    """One registry row as JSON (what ``--json`` writes)."""
    return {"backend": spec.name, "problem": spec.problem.value,
            "objectives": [o.value for o in spec.objectives],
            "exact_over": spec.exact_over, "heuristic": spec.heuristic,
            "options": None if spec.options is None else list(spec.options), "model": spec.model}


def _cell(text: str) -> str:
    return "\n".join(textwrap.wrap(text, _CELL, break_on_hyphens=False)) or "-"


@click.command("backends")
@click.option("--problem", type=click.Choice([p.value for p in Problem]), default=None,
              help="Only the backends of this problem class.")
@click.option("--objective", type=click.Choice([o.value for o in Objective]), default=None,
              help="Only the backends that minimise this objective.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the rows as JSON here.")
def backends(problem: str | None, objective: str | None, json_out: str | None) -> None:
    """Which backend solves which problem class and objective, exactly over which schedules.

    One row per backend and class, from the registry that `monet-ilp solve` and
    `monet-ilp batch run` check their calls against: the objectives it minimises, the
    class of schedules over which its "optimal" is a proof (none for a heuristic), the
    options it takes, and where its model is written down.
    """
    rows = [s for s in registry.specs(problem=None if problem is None else Problem(problem))
            if objective is None or Objective(objective) in s.objectives]
    table = Table(title="the backend registry (monet_ilp/problems/registry.py)",
                  caption="exact over: the schedules over which \"optimal\" is a proof and a bound holds; "
                          "a heuristic proves neither")
    for col in ("backend", "class", "objectives", "exact over", "options", "model"):
        table.add_column(col)
    for s in rows:
        options = "any" if s.options is None else ", ".join(s.options)
        table.add_row(s.name, s.problem.value, ", ".join(o.value for o in s.objectives),
                      "- (heuristic)" if s.exact_over is None else _cell(s.exact_over), _cell(options), s.model)
    show(table)
    if json_out:
        Path(json_out).write_text(json.dumps({"backends": [spec_record(s) for s in rows]}, indent=1) + "\n")
