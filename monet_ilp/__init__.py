"""monet-ilp: exact and certified optimisation of neural-network training schedules.

The pipeline runs one way: graph builders -> TrainingGraph -> (hardware, costs)
-> Instance -> formulations -> Schedule -> evaluator.  The front door names its main
jobs, each the function of the module that does it::

    import monet_ilp

    graph = monet_ilp.zoo.build("mlp")                          # or load_graph(kind, source)
    instance = monet_ilp.make_instance(graph, monet_ilp.preset("edge_tpu"), problem="P3")
    result = monet_ilp.solve(instance, "auto", time_limit=10)   # verified by the evaluator
    metrics = monet_ilp.evaluate(instance, result.schedule)
    report = monet_ilp.lower_bounds(instance)                   # grade(), pareto_front() alike

P4, training on many devices, has its own: ``plan_search(model_config("gpt2"),
cluster("dgx_h100"), global_batch=64)``.  The names are imported on first use
(PEP 562), so ``import monet_ilp`` loads no solver, graph or plotting library.
``monet_ilp.solve`` and ``monet_ilp.evaluate`` are the functions; their modules are
reached with ``from monet_ilp.solve import ...``.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from monet_ilp._native import prefer_fresh
from monet_ilp.errors import MonetError

if TYPE_CHECKING:
    from monet_ilp.analysis.bounds import lower_bounds
    from monet_ilp.analysis.grade import grade
    from monet_ilp.analysis.pareto import pareto_front
    from monet_ilp.evaluate import evaluate
    from monet_ilp.graph import zoo
    from monet_ilp.graph.load import load_graph
    from monet_ilp.hardware.cluster import cluster
    from monet_ilp.hardware.presets import preset
    from monet_ilp.instance import Instance
    from monet_ilp.make import make_instance, p1_instance
    from monet_ilp.problems.p4.model import model_config
    from monet_ilp.problems.p4.search import plan_search
    from monet_ilp.solve import solve

prefer_fresh()  # compiled modules only while they match their source (setup.py)

__version__ = "0.1.0"

#: Each name of the front door -> the module that defines it (``zoo`` is a module).
_EXPORTS = {
    "zoo": "monet_ilp.graph",
    "load_graph": "monet_ilp.graph.load",
    "preset": "monet_ilp.hardware.presets",
    "make_instance": "monet_ilp.make",
    "p1_instance": "monet_ilp.make",
    "Instance": "monet_ilp.instance",
    "solve": "monet_ilp.solve",
    "evaluate": "monet_ilp.evaluate",
    "lower_bounds": "monet_ilp.analysis.bounds",
    "grade": "monet_ilp.analysis.grade",
    "pareto_front": "monet_ilp.analysis.pareto",
    "model_config": "monet_ilp.problems.p4.model",
    "cluster": "monet_ilp.hardware.cluster",
    "plan_search": "monet_ilp.problems.p4.search",
}

__all__ = [
    "Instance",
    "MonetError",
    "__version__",
    "cluster",
    "evaluate",
    "grade",
    "load_graph",
    "lower_bounds",
    "make_instance",
    "model_config",
    "p1_instance",
    "pareto_front",
    "plan_search",
    "preset",
    "solve",
    "zoo",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'monet_ilp' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """This package's module object: a function of the front door keeps its name.

    Importing a submodule sets it as an attribute of its package; ``monet_ilp.solve``
    and ``monet_ilp.evaluate`` would then be the modules or the functions depending on
    what was imported first.  Dropping that attribute leaves the name to
    :func:`__getattr__` (the module stays in ``sys.modules``).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
