"""P2 (remat + offload on one core): the CP-SAT interval model and the stage MILP.

Every schedule goes through the evaluator, and every claimed objective must be the
evaluator's.  The cross-check: over the MILP's stage class (``p2_milp.md``) the MILP
and ``solve_p2_cpsat(staged=True)`` (the interval model restricted to that class)
reach the same optimum, and the unrestricted interval model is never worse.
Instances are small MLPs on a 1x1 Edge TPU and hand-built random DAGs (one core,
S and D, one link, integer costs).
"""

from __future__ import annotations

import dataclasses
import math
import random

import highspy
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, store_all_peak, zoo
from monet_ilp.hardware.model import OpCost
from monet_ilp.hardware.presets import preset
from monet_ilp.instance import CoreSpec, Instance, LinkSpec, MemorySpec, Objective, Problem
from monet_ilp.make import make_instance, p1_instance
from monet_ilp.problems.p2.cpsat import solve_p2_cpsat
from monet_ilp.problems.p2.data import p2_data, paging_schedule
from monet_ilp.problems.p2.milp import P2StageMilp, solve_p2_milp
from monet_ilp.solve import BackendResult, Status, solve
from tests.conftest import verified

WORKERS = 2
BACKENDS = {
    "cpsat": lambda inst, **kw: solve_p2_cpsat(inst, workers=WORKERS, **kw),
    "milp": lambda inst, **kw: solve_p2_milp(inst, workers=WORKERS, **kw),
}


# ===================================================================== helpers
def check_counts(instance: Instance, result: BackendResult) -> BackendResult:
    """:func:`verified`; a schedule comes with its objective, and its recomputations and
    transfers in ``stats`` are the evaluator's."""
    metrics = verified(instance, result)
    if metrics is not None:
        assert result.objective is not None
        assert result.stats["recomputations"] == metrics.recomputations
        assert result.stats["transfers"] == metrics.transfers
    return result


def mlp_instance(budget: float = 0.9, objective: str = "latency", *, link_den: int = 1,
                 runtime_limit: int | None = None) -> Instance:
    """A 2-layer MLP (17 ops) on one Edge TPU PE; ``link_den`` slows the DRAM link only."""
    graph = zoo.mlp(depth=2, width=16, batch=4, in_features=16)
    inst = make_instance(graph, preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P2",
                         budget=budget, objective=objective, runtime_limit_cycles=runtime_limit)
    link = dataclasses.replace(inst.links[0], bandwidth_den=link_den)
    return dataclasses.replace(inst, links=(link,))


def dag_instance(n: int, seed: int, slack: float, *, objective: str = "latency",
                 bandwidth: tuple[int, int] = (1, 1), link_latency: int = 0, static: int = 0,
                 runtime_limit: int | None = None) -> Instance:
    """A random layered DAG on one core with S, D and one link, built by hand.

    The budget is ``slack`` of the way from the smallest feasible-looking budget (the
    backends' lower bound) to the store-all peak.
    """
    graph = random_layered(n, seed=seed, duration=(1, 6), size=(1, 8))
    rng = random.Random(seed)
    costs = {op.id: {"c": OpCost(int(op.cost), compute_pj=rng.randint(1, 20))} for op in graph.ops}
    peak = store_all_peak(graph).activation_bytes

    def build(capacity: int) -> Instance:
        return Instance(
            name=f"dag{n}_{seed}", problem=Problem.P2, objective=Objective(objective), graph=graph,
            cores=(CoreSpec("c", "S"),),
            memories=(MemorySpec("S", "sram", capacity, 10, 12),
                      MemorySpec("D", "dram", 10**6, 50, 40)),
            links=(LinkSpec("l", ("S", "D"), bandwidth[0], bandwidth[1], link_latency, 100),),
            costs=costs, input_home="S", static_fj_per_cycle=static,
            runtime_limit_cycles=runtime_limit)

    low = p2_data(build(peak)).min_budget_bytes()
    return build(low + int(slack * (peak - low)))


def op_cycles(instance: Instance) -> int:
    core = instance.cores[0].id
    return sum(instance.cost(op.id, core).cycles for op in instance.graph.ops)


# ============================================================== the P2 cases
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_full_budget_runs_every_op_once_back_to_back(backend):
    inst = mlp_instance(budget=1.0)
    result = check_counts(inst, BACKENDS[backend](inst))
    assert result.status is Status.OPTIMAL
    assert result.objective == op_cycles(inst)
    assert result.stats["recomputations"] == result.stats["transfers"] == 0


def test_offload_beats_recompute_with_a_fast_link(p2_small):
    """Recomputing F:fc1 costs 34 cycles; paging its output out and back hides behind compute."""
    inst = p2_small
    both = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS))
    remat_only = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, allow_offload=False))
    paging_only = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, allow_recompute=False))
    assert both.status is remat_only.status is paging_only.status is Status.OPTIMAL
    assert both.objective < remat_only.objective
    assert both.objective == paging_only.objective
    assert both.stats["transfers"] > 0 and both.stats["recomputations"] == 0
    assert op_cycles(inst) < both.objective  # the budget does cost something


def test_recompute_beats_offload_with_a_slow_link():
    inst = mlp_instance(budget=0.9, link_den=100)  # 256 bytes now take 25600 cycles
    both = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS))
    remat_only = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, allow_offload=False))
    paging_only = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, allow_recompute=False))
    assert both.status is Status.OPTIMAL
    assert both.objective == remat_only.objective < paging_only.objective
    assert both.stats["recomputations"] >= 1 and both.stats["transfers"] == 0
    milp = check_counts(inst, solve_p2_milp(inst, workers=WORKERS))
    assert milp.status is Status.OPTIMAL and milp.objective == both.objective


def test_energy_under_a_runtime_limit():
    """POET's setting: paging is cheaper in energy but slower; the limit forces recomputation."""
    free = mlp_instance(budget=0.9, objective="energy", link_den=16)
    unlimited = check_counts(free, solve_p2_cpsat(free, workers=WORKERS))
    assert unlimited.status is Status.OPTIMAL and unlimited.stats["transfers"] > 0
    fast = evaluate(free, unlimited.schedule).latency_cycles

    latency = mlp_instance(budget=0.9, objective="latency", link_den=16)
    best = check_counts(latency, solve_p2_cpsat(latency, workers=WORKERS)).objective
    assert best < fast

    limited = mlp_instance(budget=0.9, objective="energy", link_den=16, runtime_limit=best)
    results = {name: check_counts(limited, run(limited)) for name, run in BACKENDS.items()}
    for result in results.values():
        assert result.status is Status.OPTIMAL
        assert result.objective > unlimited.objective
        assert evaluate(limited, result.schedule).latency_cycles <= best
    assert results["cpsat"].objective == results["milp"].objective

    too_tight = mlp_instance(budget=0.9, objective="energy", link_den=16, runtime_limit=best - 1)
    for name, run in BACKENDS.items():
        assert run(too_tight).status is Status.INFEASIBLE, name


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_budget_below_the_bound_is_infeasible(backend):
    inst = mlp_instance(budget=0.5)
    result = BACKENDS[backend](inst)
    assert result.status is Status.INFEASIBLE and result.schedule is None
    assert "bytes" in result.message


@pytest.mark.parametrize("objective", ["latency", "energy"])
def test_staged_cpsat_and_milp_agree_on_an_mlp(objective):
    inst = mlp_instance(budget=0.834, objective=objective)
    timed = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS))
    staged = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, staged=True))
    highs = check_counts(inst, solve_p2_milp(inst, workers=WORKERS))
    cbc = check_counts(inst, solve_p2_milp(inst, workers=1, milp_solver="cbc"))
    assert staged.status is highs.status is cbc.status is timed.status is Status.OPTIMAL
    assert staged.objective == highs.objective == cbc.objective
    assert timed.objective <= staged.objective


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(4, 7), seed=st.integers(0, 10_000), slack=st.sampled_from([0.0, 0.1, 0.2]),
       objective=st.sampled_from(["latency", "energy", "compute"]),
       bandwidth=st.sampled_from([(1, 1), (2, 1), (1, 2)]), static=st.sampled_from([0, 1500]))
# Cases where the stage class pages or recomputes and the timed model does better or not:
@example(n=6, seed=2471, slack=0.1, objective="compute", bandwidth=(1, 1), static=0)
@example(n=6, seed=7628, slack=0.2, objective="energy", bandwidth=(2, 1), static=1500)
@example(n=7, seed=9388, slack=0.1, objective="energy", bandwidth=(1, 2), static=1500)
@example(n=6, seed=3191, slack=0.0, objective="latency", bandwidth=(2, 1), static=0)
@example(n=7, seed=6865, slack=0.0, objective="latency", bandwidth=(1, 2), static=1500)
def test_cpsat_equals_milp_on_random_dags(n, seed, slack, objective, bandwidth, static):
    inst = dag_instance(n, seed, slack, objective=objective, bandwidth=bandwidth, static=static)
    # No time limit: on at most 7 nodes each model proves its answer in well under a second.
    staged = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, staged=True, time_limit=None))
    milp = check_counts(inst, solve_p2_milp(inst, workers=WORKERS, time_limit=None))
    timed = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, time_limit=None))
    proven = (Status.OPTIMAL, Status.INFEASIBLE)
    assert staged.status in proven and milp.status in proven and timed.status in proven
    assert staged.status is milp.status
    assert staged.objective == milp.objective
    if milp.status is Status.INFEASIBLE:
        assert staged.schedule is None
    if timed.status is Status.OPTIMAL:
        for other in (staged, milp):
            if other.objective is not None:
                assert timed.objective <= other.objective
    if timed.status is Status.INFEASIBLE:
        assert staged.schedule is None and milp.schedule is None


@settings(max_examples=6, deadline=None, derandomize=True)
@given(n=st.integers(4, 8), seed=st.integers(0, 10_000), slack=st.sampled_from([0.0, 0.1, 0.2]))
@example(n=9, seed=138, slack=0.2)
def test_pure_remat_staged_equals_stage_model(n, seed, slack):
    """Without a link (a P1 instance) the stage class is Checkmate's remat with C = 2.

    The unrestricted model may be better: it recomputes in any order within a stage
    (e.g. n=9, seed=138, slack=0.2: 46 against 47, the values of an exhaustive search
    in any order and in index order).
    """
    graph = random_layered(n, seed=seed, duration=(1, 6), size=(1, 8))
    peak = store_all_peak(graph).activation_bytes
    low = p2_data(p1_instance(graph, peak)).min_budget_bytes()
    inst = p1_instance(graph, low + int(slack * (peak - low)))
    # No time limit: on at most 9 nodes each model proves its answer in well under a second.
    staged = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, staged=True, time_limit=None))
    milp = check_counts(inst, solve_p2_milp(inst, workers=WORKERS, time_limit=None))
    timed = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, time_limit=None))
    proven = (Status.OPTIMAL, Status.INFEASIBLE)
    assert staged.status in proven and milp.status in proven and timed.status in proven
    assert (staged.status, staged.objective) == (milp.status, milp.objective)
    if timed.status is Status.OPTIMAL and milp.objective is not None:
        assert timed.objective <= milp.objective


@pytest.mark.slow  # 8-14 s: the slow tier (CI runs it after the default one)
def test_time_limit_returns_the_best_schedule_and_a_bound_and_takes_a_hint():
    inst = dag_instance(16, 1, 0.3, objective="latency")  # does not close in 30 s
    first = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, time_limit=1))
    assert first.status is Status.FEASIBLE and first.stats["hint"] == "baseline"
    assert first.bound < first.objective
    again = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, time_limit=1, hint=first.schedule))
    assert again.stats["hint"] == "given"
    assert again.objective <= first.objective  # a complete hint is kept or improved
    # 10 s: the model is built (in well under a second unloaded) before the warm start is tried;
    # CI on a loaded machine ran out of a 1 s limit while building.
    milp = check_counts(inst, solve_p2_milp(inst, workers=WORKERS, time_limit=10, hint=first.schedule))
    assert milp.status in (Status.FEASIBLE, Status.UNKNOWN, Status.OPTIMAL)
    assert milp.stats["warm_start"] is False  # the timed schedule is not in the stage class


def test_host_offload_on_the_datacenter_gpu():
    graph = zoo.mlp(depth=2, width=64, batch=8, in_features=64)
    inst = make_instance(graph, preset("datacenter_gpu"), problem="P2", budget=0.8, offload="host",
                         objective="energy")
    assert inst.links[0].id == "pcie"
    stuck = solve_p2_cpsat(inst, workers=WORKERS)  # the input cannot leave S
    assert stuck.status is Status.INFEASIBLE
    result = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, offload_inputs=True, time_limit=20))
    assert result.status is Status.OPTIMAL and result.stats["transfers"] > 0


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), seed=st.integers(0, 10_000))
def test_paging_baseline_fits_the_smallest_budget(n, seed):
    inst = dag_instance(n, seed, 0.0)
    data = p2_data(inst)
    assert inst.budget_bytes == data.min_budget_bytes()
    metrics = evaluate(inst, paging_schedule(data))
    assert metrics.feasible, dict(metrics.violation_counts)


@pytest.mark.parametrize("suffix", (".mps", ".lp"))
def test_export_writes_the_stage_milp_with_its_constant(tmp_path, suffix):
    """``export`` (what ``monet-ilp solve --export`` passes): the file's optimum is the
    MILP's, ``weight * compute cost + moves`` with moves < weight, constant included."""
    inst = mlp_instance(0.9, "compute")
    path = tmp_path / f"p2{suffix}"
    result = solve(inst, "milp", workers=WORKERS, export=str(path))
    assert result.status is Status.OPTIMAL and result.stats["export"] == str(path)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.run()
    weight = P2StageMilp(p2_data(inst)).weight
    assert math.floor(h.getInfo().objective_function_value / weight + 1e-9) == result.objective
    with pytest.raises(MonetError, match=r"\.mps or \.lp"):
        solve_p2_milp(inst, export=tmp_path / "p2.txt")


def test_bad_options_and_instances_are_refused(p2_small):
    inst = p2_small
    with pytest.raises(MonetError, match="unknown option"):
        solve_p2_cpsat(inst, encoding="stages")
    with pytest.raises(MonetError, match="unknown option"):
        solve_p2_milp(inst, bogus=1)
    with pytest.raises(MonetError, match="milp_solver|MILP solver"):
        solve_p2_milp(inst, milp_solver="gurobi")
    with pytest.raises(MonetError, match="fixed_order"):
        solve_p2_cpsat(inst, fixed_order=False)
    with pytest.raises(MonetError, match="max_computes"):
        solve_p2_cpsat(inst, max_computes=0)
    with pytest.raises(MonetError, match="weighted"):
        solve_p2_milp(dataclasses.replace(inst, objective=Objective.WEIGHTED))
    second = dataclasses.replace(inst.links[0], id="x")
    two_links = dataclasses.replace(inst, links=inst.links + (second,))
    with pytest.raises(MonetError, match="one link"):
        solve_p2_cpsat(two_links)


@pytest.mark.parametrize("budget", [0.9, 0.8])
@pytest.mark.parametrize("objective", ["latency", "energy"])
def test_deeper_mlp_both_backends(budget, objective):
    """A 4-layer MLP (27 ops): both close in about a second; the stage class is never better."""
    graph = zoo.mlp(depth=4, width=64, batch=8, in_features=8)
    inst = make_instance(graph, preset("edge_tpu", n_pe_x=1, n_pe_y=1), problem="P2",
                         budget=budget, objective=objective)
    timed = check_counts(inst, solve_p2_cpsat(inst, workers=WORKERS, time_limit=None))
    milp = check_counts(inst, solve_p2_milp(inst, workers=WORKERS, time_limit=None))
    assert timed.status is Status.OPTIMAL
    assert milp.status in (Status.OPTIMAL, Status.INFEASIBLE)
    if milp.status is Status.OPTIMAL:
        assert timed.objective <= milp.objective


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(4, 8), seed=st.integers(0, 10_000),
       slack=st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.5]),
       objective=st.sampled_from(["latency", "energy", "compute"]),
       bandwidth=st.sampled_from([(1, 1), (2, 1), (1, 2), (4, 1)]), link_latency=st.integers(0, 1),
       static=st.sampled_from([0, 1500]), limit_slack=st.one_of(st.none(), st.integers(0, 6)),
       max_computes=st.sampled_from([2, 3]), max_prefetches=st.sampled_from([1, 2]))
def test_cpsat_equals_milp_on_many_random_dags(n, seed, slack, objective, bandwidth, link_latency,
                                               static, limit_slack, max_computes, max_prefetches):
    """The cross-check of ``test_cpsat_equals_milp_on_random_dags``, wider (a few minutes)."""
    inst = dag_instance(n, seed, slack, objective=objective, bandwidth=bandwidth,
                        link_latency=link_latency, static=static)
    if limit_slack is not None:
        inst = dataclasses.replace(inst, runtime_limit_cycles=op_cycles(inst) + limit_slack)
    kw = {"workers": WORKERS, "time_limit": 30, "max_computes": max_computes,
          "max_prefetches": max_prefetches}
    staged = check_counts(inst, solve_p2_cpsat(inst, staged=True, **kw))
    milp = check_counts(inst, solve_p2_milp(inst, **kw))
    timed = check_counts(inst, solve_p2_cpsat(inst, **kw))
    proven = (Status.OPTIMAL, Status.INFEASIBLE)
    if staged.status in proven and milp.status in proven:
        assert (staged.status, staged.objective) == (milp.status, milp.objective)
    if timed.status is Status.OPTIMAL:
        for other in (staged, milp):
            if other.objective is not None:
                assert timed.objective <= other.objective
