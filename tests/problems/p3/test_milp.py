"""P3 (joint allocation, remat, offload, pinning on several cores): the disjunctive MILP.

Every schedule goes through the evaluator, and every claimed objective must be the
evaluator's.  Instances: a one-layer MLP (12 ops) on a two-PE Edge TPU and on
hetero_quad (``make_instance(..., problem="P3")``), hand-built random DAGs on two cores,
and a four-op fork that shows the reading of K1 (``formulations/p3_milp.md`` §1).
The MILP is slow on anything bigger: the cross-check against CP-SAT is on tiny DAGs.
"""

from __future__ import annotations

import random

import highspy
import pulp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monet_ilp.errors import MonetError
from monet_ilp.evaluate import evaluate
from monet_ilp.graph import random_layered, zoo
from monet_ilp.graph.node_link import from_node_link
from monet_ilp.hardware.model import OpCost
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics.store_all import store_all_schedule
from monet_ilp.instance import CoreSpec, Instance, LinkSpec, MemorySpec, Objective, Problem
from monet_ilp.make import make_instance
from monet_ilp.problems.p3.data import p3_data
from monet_ilp.problems.p3.milp import P3Milp, core_automorphisms, solve_p3_milp, start_values
from monet_ilp.solve import BackendResult, Status, solve
from tests.conftest import verified

WORKERS = 1
TWO = {"n_pe_x": 2, "n_pe_y": 1}


# ===================================================================== helpers
def mlp(objective: str = "latency", *, hw=None, **kwargs) -> Instance:
    """A one-layer MLP (12 ops, 8 persistent tensors) on two Edge TPU PEs by default."""
    graph = zoo.mlp(depth=1, width=16, batch=4, in_features=16, classes=4)
    return make_instance(graph, hw or preset("edge_tpu", **TWO), problem="P3", objective=objective,
                         **kwargs)


def two_cores(graph, costs, capacity: int, objective: str = "latency", *, static: int = 0,
              noc: tuple[int, int] = (2, 1), runtime_limit: int | None = None) -> Instance:
    """Cores c0, c1 with SRAMs S0, S1 of ``capacity`` bytes, DRAM D; a NoC and a bus."""
    memories = (MemorySpec("S0", "sram", capacity, 10, 12),
                MemorySpec("S1", "sram", capacity, 10, 12), MemorySpec("D", "dram", 10**6, 50, 40))
    links = (LinkSpec("noc", ("S0", "S1"), noc[0], noc[1], 0, 20),
             LinkSpec("bus", ("S0", "S1", "D"), 1, 1, 0, 100))
    return Instance(name=f"{graph.name}_2c", problem=Problem.P3, objective=Objective(objective),
                    graph=graph, cores=(CoreSpec("c0", "S0"), CoreSpec("c1", "S1")),
                    memories=memories, links=links, costs=costs, input_home="D",
                    persistent_home="D", static_fj_per_cycle=static,
                    runtime_limit_cycles=runtime_limit)


def dag(n: int, seed: int, capacity: int = 10**6, objective: str = "latency", **kwargs) -> Instance:
    """A random layered DAG whose ops cost a little differently on the two cores."""
    graph = random_layered(n, seed=seed, duration=(1, 6), size=(1, 8))
    rng = random.Random(seed)
    costs = {op.id: {c: OpCost(max(1, int(op.cost) + rng.randint(-1, 2)),
                               compute_pj=rng.randint(1, 20)) for c in ("c0", "c1")}
             for op in graph.ops}
    return two_cores(graph, costs, capacity, objective, **kwargs)


def fork() -> Instance:
    """a feeds b and c, which feed d; a's output is big and the NoC slow, b's and c's small."""
    nodes = [{"id": "a", "cost_cpu": 4, "cost_ram": 8}, {"id": "b", "cost_cpu": 4, "cost_ram": 1},
             {"id": "c", "cost_cpu": 4, "cost_ram": 1}, {"id": "d", "cost_cpu": 1, "cost_ram": 1}]
    links = [{"source": "a", "target": "b"}, {"source": "a", "target": "c"},
             {"source": "b", "target": "d"}, {"source": "c", "target": "d"}]
    graph = from_node_link({"directed": True, "nodes": nodes, "links": links}, name="fork")
    costs = {op.id: {c: OpCost(int(op.cost), compute_pj=1) for c in ("c0", "c1")}
             for op in graph.ops}
    return two_cores(graph, costs, 100, noc=(1, 2))


def check_counts(instance: Instance, result: BackendResult) -> BackendResult:
    """:func:`verified`; a schedule comes with its objective, and its recomputations and
    transfers in ``stats`` are the evaluator's."""
    metrics = verified(instance, result)
    if metrics is not None:
        assert result.objective is not None
        assert result.stats["recomputations"] == metrics.recomputations
        assert result.stats["transfers"] == metrics.transfers
    return result


def milp(instance: Instance, **kwargs) -> BackendResult:
    return check_counts(instance, solve_p3_milp(instance, workers=WORKERS, **kwargs))


def file_optimum(path) -> float:
    """The optimum of a model file, solved by HiGHS."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h.getInfo().objective_function_value


# ============================================================== the MLP cases
def test_latency_optimum_through_solve_beats_store_all():
    inst = mlp()
    result = solve(inst, "milp", time_limit=None, workers=WORKERS)
    assert result.metrics.feasible and result.status is Status.OPTIMAL and result.gap == 0
    assert result.stats["model"] == "p3_milp"
    base = evaluate(inst, store_all_schedule(inst))
    assert base.feasible and result.objective <= base.latency_cycles
    assert result.objective >= p3_data(inst).critical_path_cycles()
    assert result.stats["lp_bound"] <= result.objective


def test_energy_under_a_runtime_limit():
    free = milp(mlp("energy"), time_limit=None)
    fast = milp(mlp("latency"), time_limit=None)
    assert free.status is fast.status is Status.OPTIMAL
    limit = fast.objective
    limited = mlp("energy", runtime_limit_cycles=limit)
    capped = milp(limited, time_limit=None)
    assert capped.status is Status.OPTIMAL
    assert evaluate(limited, capped.schedule).latency_cycles <= limit
    assert capped.objective >= free.objective
    too_tight = milp(mlp("energy", runtime_limit_cycles=limit - 1), time_limit=None)
    assert too_tight.status is Status.INFEASIBLE and "runtime limit" in too_tight.message


def test_weighted_objective_claims_the_evaluators_value():
    inst = mlp("weighted")
    result = solve(inst, "milp", time_limit=None, workers=WORKERS)
    assert result.metrics.feasible and result.status is Status.OPTIMAL
    assert isinstance(result.objective, float) and result.objective <= 1.0


def test_an_sram_that_no_op_fits_is_infeasible_with_the_minimum():
    need = p3_data(mlp()).min_sram_bytes()
    result = milp(mlp(sram_budget=need - 1))
    assert result.status is Status.INFEASIBLE and result.schedule is None
    assert f"at least {need} bytes" in result.message


def test_colocating_layers_never_beats_the_free_allocation():
    build = lambda: dag(6, 1)  # a layer is a rank of the DAG
    free = milp(build(), time_limit=None)
    layer = milp(build(), time_limit=None, colocate="layer")
    assert free.status is layer.status is Status.OPTIMAL
    assert layer.objective > free.objective
    first = {}
    for run in sorted(layer.schedule.ops, key=lambda r: (r.start, r.end)):  # the evaluator's order
        first.setdefault(run.op, run.core)
    graph = build().graph
    cores_of_layer: dict[str, set[str]] = {}
    for op_id, core in first.items():
        cores_of_layer.setdefault(graph.op(op_id).layer, set()).add(core)
    assert all(len(cores) == 1 for layer_id, cores in cores_of_layer.items() if layer_id)


def test_heterogeneous_cores():
    inst = mlp(hw=preset("hetero_quad"))
    result = milp(inst, time_limit=None, allow_pin=False, max_computes=1)
    assert result.status is Status.OPTIMAL
    assert result.objective <= evaluate(inst, store_all_schedule(inst)).latency_cycles
    assert not result.schedule.pinned


# ============================================================ small DAG cases
@pytest.mark.slow  # HiGHS proves this one in 10-15 s; the other MILP proofs here take about a second
def test_a_budget_below_store_all_still_has_a_schedule():
    inst = dag(5, 4, capacity=15)  # every op fits in 15 bytes; store-all needs 16 on a core
    assert not evaluate(inst, store_all_schedule(inst)).feasible
    result = milp(inst, time_limit=None)
    assert result.status is Status.OPTIMAL
    assert result.stats["transfers"] + result.stats["recomputations"] > 0
    peaks = evaluate(inst, result.schedule).peak_bytes
    assert max(peaks["S0"], peaks["S1"]) <= 15


def test_a_recomputation_may_run_while_the_first_computation_runs():
    """K1 read as the evaluator numbers runs (by start): a computed on both cores at once."""
    wide = milp(fork(), time_limit=None, recompute_after_first=False)
    narrow = milp(fork(), time_limit=None)  # K3's L4, the default
    assert wide.status is narrow.status is Status.OPTIMAL
    assert (wide.objective, narrow.objective) == (10, 13)
    runs = sorted((r.start, r.core) for r in wide.schedule.ops if r.op == "a")
    assert runs == [(0, "c0"), (0, "c1")]


@pytest.mark.parametrize("n, seed, capacity, objective, options", [
    (4, 1, 20, "latency", {}),
    # HiGHS takes 10-15 s to prove this one (as in test_a_budget_below_store_all_still_has_a_schedule).
    pytest.param(5, 4, 15, "latency", {}, marks=pytest.mark.slow),
    (3, 8656, 13, "latency", {"max_transfers": 2}),
    (4, 7090, 21, "energy", {"max_computes": 3}),
    (5, 3374, 13, "latency", {"allow_offload": False}),
])
def test_milp_and_cpsat_agree_on_tiny_dags(n, seed, capacity, objective, options):
    from monet_ilp.problems.p3.cpsat import solve_p3_cpsat

    static = 1500 if objective == "energy" else 0
    inst = dag(n, seed, capacity, objective, static=static)
    exact = check_counts(inst, solve_p3_cpsat(inst, workers=WORKERS, time_limit=None, **options))
    mine = milp(inst, time_limit=None, recompute_after_first=True, **options)
    assert exact.status is mine.status is Status.OPTIMAL
    assert exact.objective == mine.objective


def test_cbc_agrees_with_highs():
    inst = dag(4, 2, capacity=19)
    highs = milp(inst, time_limit=None)
    cbc = milp(inst, time_limit=None, milp_solver="cbc")
    assert highs.status is cbc.status is Status.OPTIMAL
    assert highs.objective == cbc.objective


# ================================================================== machinery
def test_a_solution_reads_back_as_a_warm_start():
    inst = dag(4, 2, capacity=19)
    result = milp(inst, time_limit=None)
    model = P3Milp(p3_data(inst), horizon=result.objective)
    assert start_values(model, result.schedule) is not None
    assert pulp.value(model.primary) == result.objective
    # a schedule outside the horizon is refused
    shorter = P3Milp(p3_data(inst), horizon=result.objective - 1)
    assert start_values(shorter, result.schedule) is None


def test_interchangeable_cores_are_found():
    assert len(core_automorphisms(p3_data(mlp()))) == 2
    assert len(core_automorphisms(p3_data(mlp(hw=preset("hetero_quad"))))) == 2
    assert len(core_automorphisms(p3_data(dag(5, 1)))) == 1


def test_export_and_option_errors(tmp_path):
    inst = dag(4, 1)
    result = milp(inst, export=tmp_path / "p3.lp")
    assert result.status is Status.OPTIMAL and result.stats["export"] == str(tmp_path / "p3.lp")
    milp(inst, export=tmp_path / "p3.mps")
    for suffix in (".lp", ".mps"):  # the full-horizon model: its optimum is the latency's
        assert file_optimum(tmp_path / f"p3{suffix}") == pytest.approx(result.objective)
    with pytest.raises(MonetError, match="model format"):
        solve_p3_milp(inst, export=tmp_path / "p3.txt")
    with pytest.raises(MonetError, match="unknown option"):
        solve_p3_milp(inst, passes=2)
    with pytest.raises(MonetError, match="unknown MILP solver"):
        solve_p3_milp(inst, milp_solver="gurobi")


# ====================================================== property: cpsat == milp

@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(3, 5), seed=st.integers(0, 10_000), tight=st.booleans(),
       objective=st.sampled_from(["latency", "energy"]))
def test_property_cpsat_and_milp_reach_the_same_optimum(n, seed, tight, objective):
    """On random tiny two-core DAGs, both P3 backends prove the same optimum over K3."""
    from monet_ilp.problems.p3.cpsat import solve_p3_cpsat

    roomy = dag(n, seed, objective=objective, static=1500 if objective == "energy" else 0)
    need = p3_data(roomy).min_sram_bytes()
    inst = dag(n, seed, need + (2 if tight else 40), objective, static=1500 if objective == "energy" else 0)
    exact = check_counts(inst, solve_p3_cpsat(inst, workers=WORKERS, time_limit=None))
    mine = milp(inst, time_limit=None, hint=exact.schedule)
    assert exact.status is Status.OPTIMAL and mine.status is Status.OPTIMAL
    assert exact.objective == mine.objective
