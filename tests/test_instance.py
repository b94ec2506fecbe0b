"""Instance: integer scaling, budgets, validation and JSON round trip."""

from __future__ import annotations

import json

import pytest

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.graph import Op, OpKind, Tensor, TensorKind, TrainingGraph, random_layered, store_all_peak
from monet_ilp.instance import (
    CoreSpec, Instance, LinkSpec, MemorySpec, Objective, Problem, budget_bytes_of, link_spec, p1_instance, pj_of,
)
from monet_ilp.hardware.model import OpCost


def tiny_graph(cost=(1, 2)) -> TrainingGraph:
    tensors = [Tensor("a", TensorKind.ACTIVATION, 10), Tensor("b", TensorKind.ACTIVATION, 20)]
    ops = [Op("A", OpKind.FORWARD, "node", outputs=("a",), cost=cost[0]),
           Op("B", OpKind.FORWARD, "node", inputs=("a",), outputs=("b",), cost=cost[1])]
    return TrainingGraph.build("tiny", ops, tensors)


def test_link_integer_formulas():
    # 2.5 bytes/cycle is kept exactly as 5/2: 11 bytes take ceil(11 * 2 / 5) = 5 cycles, plus latency 3.
    link = link_spec("l", ["m1", "m2"], 2.5, 0.35, latency_cycles=3)
    assert (link.bandwidth_num, link.bandwidth_den, link.fj_per_byte) == (5, 2, 350)
    assert link.transfer_cycles(11) == 8
    assert link.transfer_cycles(10) == 7
    # 11 bytes at 350 fJ/B = 3850 fJ = 3.85 pJ -> 4 pJ (half up); 1 byte = 0.35 pJ -> 0.
    assert link.transfer_pj(11) == 4 and link.transfer_pj(1) == 0
    assert pj_of(3, 500) == 2  # 1.5 pJ rounds half up
    assert link.connects("m1", "m2") and not link.connects("m1", "m1")


def test_p1_instance_from_graph_costs():
    inst = p1_instance(tiny_graph(), budget=30)
    assert inst.problem is Problem.P1 and inst.objective is Objective.COMPUTE
    assert inst.cost("B", "core0").cycles == 2
    assert inst.budget_bytes == 30 and inst.meta["cost_scale"] == 1


def test_fractional_costs_are_scaled_once():
    inst = p1_instance(tiny_graph(cost=(0.5, 1.25)), budget=30)
    assert inst.meta["cost_scale"] == 1000
    assert [inst.cost(op, "core0").cycles for op in ("A", "B")] == [500, 1250]


def test_budget_fraction_of_store_all_peak():
    g = random_layered(40, seed=2)
    peak = store_all_peak(g).activation_bytes
    assert budget_bytes_of(g, 0.5) == int(0.5 * peak)
    assert budget_bytes_of(g, 1234) == 1234
    for bad in (0, -1, 0.0, True, "x"):
        with pytest.raises(MonetError, match="budget"):
            budget_bytes_of(g, bad)


def test_json_round_trip(tmp_path):
    inst = p1_instance(random_layered(30, seed=1), budget=0.7)
    path = tmp_path / "inst.json"
    inst.save(path)
    assert Instance.load(path) == inst


def test_validation_names_the_field():
    g = tiny_graph()
    base = dict(name="x", problem=Problem.P2, objective=Objective.LATENCY, graph=g,
                cores=(CoreSpec("c", "c.sram"),), memories=(MemorySpec("c.sram", "sram", 100),),
                links=(), costs={"A": {"c": OpCost(1)}, "B": {"c": OpCost(1)}}, input_home="c.sram")
    Instance(**base)
    with pytest.raises(MonetError, match="can run on no core"):
        Instance(**{**base, "costs": {"A": {"c": OpCost(1)}}})
    with pytest.raises(MonetError, match="unknown memory"):
        Instance(**{**base, "cores": (CoreSpec("c", "nowhere"),)})
    with pytest.raises(MonetError, match="capacity"):
        Instance(**{**base, "memories": (MemorySpec("c.sram", "sram", 0),)})
    with pytest.raises(MonetError, match="unknown memory"):
        Instance(**{**base, "links": (LinkSpec("l", ("c.sram", "dram"), 1),)})
    with pytest.raises(MonetError, match="negative"):
        Instance(**{**base, "costs": {"A": {"c": OpCost(-1)}, "B": {"c": OpCost(1)}}})


def test_load_errors(tmp_path):
    path = tmp_path / "inst.json"
    path.write_text('{"format": "monet-ilp/instance", "version": 1')
    with pytest.raises(InputFormatError, match="malformed JSON"):
        Instance.load(path)
    data = p1_instance(tiny_graph(), budget=30).to_dict()
    del data["cores"]
    path.write_text(json.dumps(data))
    with pytest.raises(InputFormatError, match="cores") as err:
        Instance.load(path)
    assert str(path) in str(err.value)
    path.write_text(json.dumps({"format": "monet-ilp/training-graph"}))
    with pytest.raises(InputFormatError, match="not a monet-ilp instance"):
        Instance.load(path)
