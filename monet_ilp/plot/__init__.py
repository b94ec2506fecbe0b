"""Plots of verified results: the Gantt chart of a schedule and the Pareto front of a sweep.

This module sits after the evaluator in the pipeline: :func:`gantt` draws what
:func:`~monet_ilp.evaluate.evaluate` rebuilt from a schedule (runs, transfers, memory
profiles), and :func:`pareto` draws the points of a latency/energy sweep or of a GA
run.  Figures are made on matplotlib's Agg canvas without pyplot, so no global backend
is set and no window opens.

Axes show cycles and picojoules in the unit that keeps tick labels short (kcycles,
Mcycles, nJ, µJ, mJ, ..., :func:`pick_unit`, chosen from the largest value drawn),
and name the unit in the axis label; memory panels use B, KiB, MiB or GiB the same
way.

:func:`pareto` and ``monet-ilp plot pareto`` read two formats.  A Pareto front file
(``monet-ilp pareto`` writes it)::

    {
      "instance": "mlp_p3",                 # name shown in the title
      "objective_x": "latency",             # optional; must be "latency" if given
      "objective_y": "energy",              # optional; must be "energy" if given
      "points": [
        {
          "latency_cycles": 123456,         # int: the evaluator's latency of the schedule
          "energy_pj": 7890123,             # int: the evaluator's total energy
          "energy_bound_pj": 7000000,       # int or null: certified lower bound on energy
          "latency_bound_cycles": null,     # int or null: certified lower bound on latency
          "status": "optimal",              # the solve status of the point
          "schedule": "front/p0.json",      # str or null: where the schedule was saved
          "feasible": true                  # optional, default true: the evaluator's verdict
        }
      ]
    }

and a GA result (``monet-ilp ga --out`` writes it; :func:`monet_ilp.ga.nsga2.run_ga`
documents it): a JSON object with ``"format": "monet-ilp/ga"``, ``instance`` and
``points``, each point with ``latency_cycles``, ``energy_pj``, ``feasible`` and its
schedule inline (an object, not read here).  GA points have no bounds; a feasible
one counts as status ``"feasible"`` (not proven), an infeasible one as
``"infeasible"``.

Extra keys are allowed anywhere and ignored.  A point whose sweep step found no
schedule may give ``null`` for both ``latency_cycles`` and ``energy_pj`` and is not
drawn.  A bound above its point's value is an error.  Points with status
``"optimal"`` are drawn filled, the other feasible ones hollow; dominated points are
grey.  Infeasible points (``feasible``: false, e.g. the least-violating individual of
a GA run that found no feasible schedule) are never on the front: they are drawn as
red crosses and left out of the non-dominated set.
"""

from monet_ilp.plot.axes import UNITS, pick_unit, quantity, unit_axis
from monet_ilp.plot.figures import OP_COLORS, TRANSFER_COLORS, new_figure
from monet_ilp.plot.gantt import gantt, transfer_direction
from monet_ilp.plot.pareto import pareto, read_front
from monet_ilp.results import non_dominated

__all__ = ["OP_COLORS", "TRANSFER_COLORS", "UNITS", "gantt", "new_figure", "non_dominated", "pareto",
           "pick_unit", "quantity", "read_front", "transfer_direction", "unit_axis"]
