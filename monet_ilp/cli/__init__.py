"""The ``monet-ilp`` command line: the outermost layer, which only calls the package.

One module per command group (:mod:`.graph`, :mod:`.hardware`, :mod:`.instance`,
:mod:`.evaluate`, :mod:`.solve`, :mod:`.ga`, :mod:`.plot`, :mod:`.batch`,
:mod:`.demo`, :mod:`.backends`, :mod:`.plan`), all printing through :mod:`.render`.  The root group
imports a command's module only when that command runs (:class:`.lazy.LazyGroup`).

Tables go to the terminal and JSON to files.  Exit status, the same for every command:

* 0: the command did its job and every schedule it reports is feasible (a solve
  ended ``optimal`` or ``feasible``);
* 1: it did its job, but the answer is negative: a schedule the evaluator rejects
  (``evaluate``, ``baseline``, ``grade``), a solve that ended ``infeasible``,
  ``unknown`` or ``error``, a GA or Pareto sweep without a feasible point;
* 2: bad input.  Every error a user can cause is a
  :class:`~monet_ilp.errors.MonetError`, printed on one line without a traceback.
"""

from __future__ import annotations

import sys

import click

from monet_ilp.cli.lazy import LazyGroup
from monet_ilp.cli.render import err_console
from monet_ilp.errors import MonetError

__all__ = ["COMMANDS", "cli", "main"]

#: Every top-level command: where it lives, and the summary ``monet-ilp --help`` lists.
COMMANDS: dict[str, tuple[str, str]] = {
    "graph": ("monet_ilp.cli.graph:graph", "Build, import, inspect and export training graphs."),
    "hw": ("monet_ilp.cli.hardware:hw", "Show and validate hardware descriptions (presets or YAML files)."),
    "instance": ("monet_ilp.cli.instance:instance",
                 "Build problem instances (graph + hardware + budget + objective)."),
    "evaluate": ("monet_ilp.cli.evaluate:evaluate_cmd",
                 "Check a schedule against an instance; print latency, energy, peaks and any violation."),
    "baseline": ("monet_ilp.cli.evaluate:baseline_cmd",
                 "Schedule an instance with a baseline (store-all, Chen sqrt(n), Chen greedy) and evaluate it."),
    "solve": ("monet_ilp.cli.solve:solve_cmd",
              "Solve an instance (or a graph, as P1) and verify the schedule with the evaluator."),
    "min-budget": ("monet_ilp.cli.solve:min_budget_cmd",
                   "The smallest memory budget for which any schedule exists (proven by CP-SAT when it can)."),
    "pareto": ("monet_ilp.cli.solve:pareto_cmd",
               "Latency/energy Pareto front by ε-constraint: verified schedules, each with its energy bound."),
    "bound": ("monet_ilp.cli.solve:bound_cmd",
              "The best certified lower bound on the objective, and where each bound comes from."),
    "grade": ("monet_ilp.cli.solve:grade_cmd",
              "Grade a GA result, outside decisions or a schedule against certified lower bounds."),
    "ga": ("monet_ilp.cli.ga:ga",
           "MONET-style GA: NSGA-II over keep/offload/recompute, layer-to-core and pin genes."),
    "fusion": ("monet_ilp.cli.fusion:fusion",
               "Layer fusion: fused stacks run tile by tile (formulations/fusion.md)."),
    "plot": ("monet_ilp.cli.plot:plot", "Draw schedules (Gantt chart with memory occupancy) and Pareto fronts."),
    "batch": ("monet_ilp.cli.batch:batch",
              "Run instance sets (YAML manifests) locally or on Dask; summarise and plot the results."),
    "demo": ("monet_ilp.cli.demo:demo",
             "ResNet-18 (CIFAR) on a 2x2 edge_tpu: store-all, Chen sqrt(n), GA and auto, graded against bounds."),
    "plan": ("monet_ilp.cli.plan:plan_cmd",
             "Plan training on many devices: degrees, stages, micro-batches, recomputation (P4)."),
    "torch-checkpoint": ("monet_ilp.cli.torch_checkpoint:torch_checkpoint_cmd",
                         "Choose the modules of a PyTorch model to checkpoint for a memory budget (torch extra)."),
    "layer-memory": ("monet_ilp.cli.plan:layer_memory_cmd",
                     "Activation bytes one transformer layer keeps for its backward pass, per device."),
    "backends": ("monet_ilp.cli.backends:backends",
                 "Which backend solves which problem class and objective, exactly over which schedules."),
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="monet-ilp")
def cli() -> None:
    """Exact optimisation of neural-network training schedules on multi-core accelerators."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning user errors into one line and exit status 2."""
    try:
        cli.main(args=argv, prog_name="monet-ilp", standalone_mode=False)
    except MonetError as err:
        err_console.print(f"error: {err.message}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except click.exceptions.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
