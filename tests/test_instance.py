"""Instance: integer scaling, budgets, validation and JSON round trip."""

from __future__ import annotations

import json

import pytest

from monet_ilp.errors import InputFormatError, MonetError
from monet_ilp.graph import (
    Op,
    OpKind,
    Tensor,
    TensorKind,
    TrainingGraph,
    random_layered,
    store_all_peak,
)
from monet_ilp.hardware.model import OpCost
from monet_ilp.instance import (
    CoreSpec,
    Instance,
    LinkSpec,
    MemorySpec,
    Objective,
    Problem,
    link_spec,
    pj_of,
)
from monet_ilp.make import budget_bytes_of, p1_instance


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
    base = {"name": "x", "problem": Problem.P2, "objective": Objective.LATENCY, "graph": g,
                "cores": (CoreSpec("c", "c.sram"),), "memories": (MemorySpec("c.sram", "sram", 100),),
                "links": (), "costs": {"A": {"c": OpCost(1)}, "B": {"c": OpCost(1)}}, "input_home": "c.sram"}
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


# --------------------------------------------------------- with hardware
def _mlp():
    from monet_ilp.graph import zoo

    return zoo.mlp(depth=2, width=64, batch=8)


def test_make_instance_p1_p2_p3_from_presets():
    from monet_ilp.hardware.presets import preset
    from monet_ilp.make import make_instance

    g = _mlp()
    edge = preset("edge_tpu", n_pe_x=2, n_pe_y=1)
    p1 = make_instance(g, edge, problem="P1", budget=0.8)
    assert [c.id for c in p1.cores] == ["pe_0"] and p1.objective is Objective.COMPUTE
    assert p1.budget_bytes == int(0.8 * store_all_peak(g).activation_bytes)
    assert p1.persistent_home is None and not p1.links

    p2 = make_instance(g, edge, problem="P2", budget=0.5, objective="energy", runtime_limit_cycles=10**9)
    assert {m.id for m in p2.memories} == {"pe_0.sram", "dram"}
    assert [l.id for l in p2.links] == ["dram_bus"] and p2.links[0].endpoints == ("pe_0.sram", "dram")

    p3 = make_instance(g, edge, problem="P3", sram_budget=1 << 20)
    assert [c.id for c in p3.cores] == ["pe_0", "pe_1"]
    assert all(p3.memory(c.memory).capacity_bytes == 1 << 20 for c in p3.cores)
    assert p3.input_home == p3.persistent_home == "dram"
    # Pinning a layer's weights trades DRAM energy for SRAM capacity.
    op = next(op.id for op in g.ops if op.id.startswith("F:"))
    assert p3.cost(op, "pe_0", pinned=True).dram_pj < p3.cost(op, "pe_0").dram_pj
    assert Instance.from_dict(p3.to_dict()) == p3

    gpu = make_instance(g, preset("datacenter_gpu"), problem="P2", offload="host")
    assert {m.id for m in gpu.memories} == {"gpu.sram", "host"}


def test_make_instance_errors():
    from monet_ilp.hardware.presets import preset
    from monet_ilp.make import make_instance

    g = _mlp()
    with pytest.raises(MonetError, match="needs a hardware"):
        make_instance(g, None, problem="P3")
    with pytest.raises(MonetError, match="no 'host' memory"):
        make_instance(g, preset("edge_tpu"), problem="P2", offload="host")
    with pytest.raises(MonetError, match="unknown core"):
        make_instance(g, preset("edge_tpu"), problem="P1", core="pe_99")
    with pytest.raises(MonetError, match="problem"):
        make_instance(g, preset("edge_tpu"), problem="P9")
    with pytest.raises(MonetError, match="node-link"):
        make_instance(random_layered(10, seed=0), preset("edge_tpu"), problem="P1")
