"""P1 on retention intervals: a CP-SAT model of size O(n C + |E| C^2) (``formulations/p1_interval.md``).

- :mod:`.plan`: the class's schedules as plain data (:class:`Plan`), to and from Sequences;
- :mod:`.model`: the model (P1I.V1-V6, P1I.C1-C11, P1I.O1), a plan as a full assignment;
- :mod:`.solve`: :func:`solve_interval`, the ``interval`` backend.

The LNS (:mod:`monet_ilp.problems.p1.lns`) re-optimises windows of a plan on this model.
"""

from monet_ilp.problems.p1.interval.model import (
    IntervalModel,
    assignment,
    build_interval_model,
    copies_per_node,
    plan_of_solution,
)
from monet_ilp.problems.p1.interval.plan import (
    OutsideClass,
    Plan,
    canonical_plan,
    computations_of,
    plan_of_sequence,
    sequence_of_plan,
)
from monet_ilp.problems.p1.interval.solve import (
    DEFAULT_PARAMS,
    INTERVAL_OPTIONS,
    class_text,
    hint_plan,
    solve_interval,
)

__all__ = [
    "DEFAULT_PARAMS",
    "INTERVAL_OPTIONS",
    "IntervalModel",
    "OutsideClass",
    "Plan",
    "assignment",
    "build_interval_model",
    "canonical_plan",
    "class_text",
    "computations_of",
    "copies_per_node",
    "hint_plan",
    "plan_of_sequence",
    "plan_of_solution",
    "sequence_of_plan",
    "solve_interval",
]
