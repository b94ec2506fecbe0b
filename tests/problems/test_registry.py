"""The backend registry: every row loads, declares what its function takes, and is enforced by solve()."""

from __future__ import annotations

import inspect

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.instance import Objective, Problem
from monet_ilp.problems import registry
from monet_ilp.results import BackendResult, Status
from monet_ilp.solve import register_backend, solve

_COMMON = {"time_limit", "workers", "hint"}


@pytest.mark.parametrize("spec", registry.BACKENDS, ids=lambda s: f"{s.name}-{s.problem}")
def test_every_row_loads_and_declares_the_keywords_of_its_function(spec):
    run = spec.load()
    parameters = inspect.signature(run).parameters
    assert _COMMON <= set(parameters) or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    named = {n for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY} - _COMMON
    if named:  # a function that names its options names exactly the declared ones
        assert named == set(spec.options), (spec.name, spec.problem)
    assert spec.objectives and set(spec.objectives) <= set(Objective)
    assert spec.model


def test_every_class_has_an_exact_backend_for_each_of_its_objectives():
    for problem in Problem:
        exact = [s for s in registry.BACKENDS if s.problem is problem and not s.heuristic]
        assert exact, problem
        for objective in {o for s in exact for o in s.objectives}:
            assert any(objective in s.objectives for s in exact)


def test_p3_energy_is_solved_by_cpsat_milp_lns_and_auto():
    able = {s.name for s in registry.BACKENDS  # the built-in rows (tests may register plugins)
            if s.problem is Problem.P3 and Objective.ENERGY in s.objectives and not s.heuristic}
    assert able == {"auto", "cpsat", "lns", "milp"}  # auto runs cpsat, then lns, on P3


def test_a_backend_on_a_class_it_does_not_solve_is_refused_with_the_alternatives(p2_small):
    with pytest.raises(MonetError, match=r"backend 'dp' does not solve P2 \(it solves P1\)") as err:
        solve(p2_small, "dp")
    assert "cpsat" in err.value.fix and "milp" in err.value.fix


@pytest.mark.parametrize("backend", ["cpsat", "milp", "dp", "heuristic:lp-round", "heuristic:store_all"])
def test_an_unknown_option_gives_the_same_error_on_every_backend(backend, p1_small):
    with pytest.raises(MonetError, match=f"backend '{backend}' on P1 has no option 'nope'") as err:
        solve(p1_small, backend, nope=1)
    assert err.value.field == "nope" and "monet-ilp backends" in err.value.fix


def test_an_objective_the_backend_does_not_minimise_names_one_that_does(p1_small):
    import dataclasses

    energy = dataclasses.replace(p1_small, objective=Objective.ENERGY)
    with pytest.raises(MonetError, match="does not minimise the energy objective") as err:
        solve(energy, "milp")
    assert err.value.field == "objective" and "use the compute or latency objective" in err.value.fix


def test_a_plugin_backend_is_a_row_of_the_registry(p1_small):
    def load():
        def run(instance, **options):
            return BackendResult(Status.UNKNOWN, None, message=f"options {sorted(options)}")

        return run

    register_backend("test:registry-plugin", load, problems=[Problem.P1], options=["knob"])
    try:
        (spec,) = registry.specs("test:registry-plugin")
        assert spec.problem is Problem.P1 and not spec.heuristic and spec.options == ("knob",)
        assert solve(p1_small, "test:registry-plugin", knob=2).status is Status.UNKNOWN
        with pytest.raises(MonetError, match="has no option 'other'"):
            solve(p1_small, "test:registry-plugin", other=2)
        with pytest.raises(MonetError, match="does not solve P2"):
            registry.find("test:registry-plugin", Problem.P2)
    finally:
        registry.unregister("test:registry-plugin")
    assert "test:registry-plugin" not in registry.names()
