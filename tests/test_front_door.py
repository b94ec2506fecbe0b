"""The front door: ``import monet_ilp`` names the main jobs, each loaded on first use."""

from __future__ import annotations

import importlib
import inspect
import types

import monet_ilp
from monet_ilp.results import Status


def test_every_name_of_the_front_door_resolves():
    assert "MonetError" in monet_ilp.__all__ and "__version__" in monet_ilp.__all__
    for name in monet_ilp.__all__:
        value = getattr(monet_ilp, name)
        assert value is not None, name
        if name not in ("MonetError", "__version__", "zoo", "Instance"):
            assert inspect.isfunction(value), name
    assert set(dir(monet_ilp)) >= set(monet_ilp.__all__)


def test_a_function_keeps_its_name_after_its_module_is_imported():
    module = importlib.import_module("monet_ilp.solve")
    importlib.import_module("monet_ilp.evaluate")
    assert isinstance(module, types.ModuleType)
    assert monet_ilp.solve is module.solve
    from monet_ilp import evaluate, solve

    assert solve is module.solve and evaluate is importlib.import_module("monet_ilp.evaluate").evaluate


def test_an_unknown_name_is_an_attribute_error():
    try:
        monet_ilp.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("monet_ilp.no_such_name resolved")


def test_build_solve_evaluate_through_the_front_door():
    graph = monet_ilp.zoo.build("mlp", depth=2, width=16, batch=4, in_features=16)
    instance = monet_ilp.p1_instance(graph, budget=0.9)
    result = monet_ilp.solve(instance, "auto", time_limit=10, workers=1)
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE), result.message
    metrics = monet_ilp.evaluate(instance, result.schedule)
    assert metrics.feasible
    assert metrics.objective_value == result.objective
