"""The analytical cost model: the worked examples of formulations/cost_model.md and its properties."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monet_ilp.errors import MonetError
from monet_ilp.graph import Op, OpKind, Tensor, TensorKind, TrainingGraph, random_layered, zoo
from monet_ilp.hardware import Core, OpCost
from monet_ilp.hardware.cost import (
    CostModelError,
    anchor_type,
    can_run,
    cost_breakdown,
    dram_bandwidth_of,
    op_cost,
)
from monet_ilp.hardware.presets import preset
from monet_ilp.hardware.schema import hardware_from_dict, hardware_to_dict


@pytest.fixture(scope="module")
def edge():
    return preset("edge_tpu")


@pytest.fixture(scope="module")
def resnet():
    return zoo.resnet18(variant="cifar", batch=4)


@pytest.fixture(scope="module")
def mobilenet():
    return zoo.mobilenet_v2(batch=1)


# The table of formulations/cost_model.md, section 4:
# (graph, op, pinned, MACs, P, R, tiles, steps, utilisation, MAC, vector, SRAM, DRAM cycles, cycles, bound)
WORKED = [
    ("resnet", "F:conv1", False, 7_077_888, 64, 3, 1, 36_864, Fraction(3, 4), 36_864, 24_576, 16_772, 232, 61_440,
     "compute"),
    ("resnet", "F:layer1.0.conv1", False, 150_994_944, 64, 64, 16, 36_864, Fraction(1), 589_824, 24_576, 24_580,
     4_624, 614_400, "compute"),
    ("resnet", "F:fc", False, 20_480, 10, 512, 128, 4, Fraction(5, 32), 512, 1, 66, 642, 642, "dram"),
    ("resnet", "dX:fc", False, 20_480, 512, 10, 24, 4, Fraction(5, 6), 96, 0, 66, 640, 640, "dram"),
    ("mobilenet", "F:features.1.dw.conv", False, 3_612_672, 32, 1, 1, 112_896, Fraction(1, 8), 112_896, 43_904,
     50_178, 44, 156_800, "compute"),
    ("mobilenet", "F:features.1.project.conv", False, 6_422_528, 16, 32, 8, 12_544, Fraction(1, 4), 100_352,
     15_680, 25_089, 68, 116_032, "compute"),
    ("mobilenet", "dX:features.1.project.conv", False, 6_422_528, 32, 16, 4, 12_544, Fraction(1, 2), 50_176,
     25_088, 31_361, 66, 75_264, "compute"),
    ("resnet", "opt:layer4.1.conv2.weight", False, 0, 0, 0, 0, 0, Fraction(0), 0, 73_728, 0, 884_736, 884_736,
     "dram"),
    ("resnet", "opt:layer4.1.conv2.weight", True, 0, 0, 0, 0, 0, Fraction(0), 0, 73_728, 221_184, 0, 221_184,
     "sram"),
]


@pytest.mark.parametrize("row", WORKED, ids=lambda r: f"{r[1]}{'-pinned' if r[2] else ''}")
def test_worked_example(row, edge, resnet, mobilenet):
    graph_name, op_id, pinned, macs, p, r, tiles, steps, util, mac, vec, sram, dram, cycles, bound = row
    graph = {"resnet": resnet, "mobilenet": mobilenet}[graph_name]
    b = cost_breakdown(graph.op(op_id), graph, edge.cores[0], edge, pinned=pinned)
    assert (b.macs, b.parallel, b.reduction, b.tiles, b.steps) == (macs, p, r, tiles, steps)
    assert b.utilisation == util
    assert (b.mac_core_cycles, b.vector_core_cycles, b.sram_cycles, b.dram_cycles) == (mac, vec, sram, dram)
    assert (b.cycles, b.bound) == (cycles, bound)
    assert op_cost(graph.op(op_id), graph, edge.cores[0], edge, pinned=pinned) == b.to_cost()


def test_stem_conv_by_hand(edge, resnet):
    """Example 1 of cost_model.md, every intermediate and the three energies (C11)."""
    b = cost_breakdown(resnet.op("F:conv1"), resnet, edge.cores[0], edge)
    assert b.spatial_utilisation == Fraction(3, 4) and b.mac_scale == 1
    assert b.vector_flops == 1_572_864
    assert (b.sram_read_bytes, b.sram_write_bytes, b.dram_read_bytes, b.dram_write_bytes) == (49_152, 2_097_664,
                                                                                              7_424, 0)
    assert b.dram_bandwidth_bytes_per_cycle == 32
    assert b.to_cost() == OpCost(cycles=61_440, compute_pj=33_973_862, sram_pj=3_184_660, dram_pj=928_000)


def test_stem_conv_dx_has_no_macs(edge, resnet):
    b = cost_breakdown(resnet.op("dX:conv1"), resnet, edge.cores[0], edge)
    assert b.mapping == "none" and b.mac_core_cycles == 0 and b.vector_core_cycles > 0


def test_dw_keeps_the_forward_mapping(edge, resnet):
    fwd = cost_breakdown(resnet.op("F:layer2.0.conv1"), resnet, edge.cores[0], edge)
    dw = cost_breakdown(resnet.op("dW:layer2.0.conv1"), resnet, edge.cores[0], edge)
    assert (dw.parallel, dw.reduction, dw.tiles, dw.mac_core_cycles) == (
        fwd.parallel, fwd.reduction, fwd.tiles, fwd.mac_core_cycles)
    assert dw.dram_write_bytes > 0 and dw.dram_read_bytes == 0  # writes the weight gradient


def test_attention_dx_counts_both_operands():
    g = zoo.gpt2(preset="tiny")
    hw = preset("edge_tpu")
    fwd = cost_breakdown(g.op("F:h.0.attn.scores"), g, hw.cores[0], hw)
    dx = cost_breakdown(g.op("dX:h.0.attn.scores"), g, hw.cores[0], hw)
    assert dx.mac_scale == 2 and dx.macs == 2 * fwd.macs
    assert dx.utilisation <= 1


@pytest.mark.parametrize("op", ["scores", "context"])
def test_attention_dx_costs_each_product_on_its_own_tiles(op):
    """CM.C5b: dA = dY.B^T on CM.C3d's tiles, dB = A^T.dY on the forward's (CM.C3c)."""
    g = zoo.gpt2(preset="tiny")
    hw = preset("edge_tpu")
    core = hw.cores[0]
    dx = cost_breakdown(g.op(f"dX:h.0.attn.{op}"), g, core, hw)
    k, n = dx.parallel, dx.reduction  # dA's unrolling: P = K, R = N
    tiles_a = -(-k // core.simd_units) * -(-n // core.lanes)
    tiles_b = -(-n // core.simd_units) * -(-k // core.lanes)
    assert dx.tiles == tiles_a and tiles_a != tiles_b  # GPT-2 tiny: the two differ
    assert dx.mac_core_cycles == dx.steps * (tiles_a + tiles_b)  # u = 1 on this preset
    assert dx.spatial_utilisation == Fraction(dx.macs, dx.steps * (tiles_a + tiles_b) * core.macs_per_cycle)


# --------------------------------------------------------------------- C1 / errors
def _core(**changes) -> Core:
    base = preset("edge_tpu").cores[0]
    return dataclasses.replace(base, **changes)


def test_can_run(resnet):
    conv, loss, opt = resnet.op("F:conv1"), resnet.op("F:loss"), resnet.op("opt:fc.weight")
    gemm, dx = resnet.op("F:fc"), resnet.op("dX:layer1.0.conv1")
    assert anchor_type(conv) == "Conv"
    anything = _core()
    assert all(can_run(op, anything) for op in (conv, loss, opt, gemm, dx))
    conv_only = _core(op_types=("Conv",))
    assert can_run(conv, conv_only) and can_run(dx, conv_only)
    assert not can_run(gemm, conv_only) and not can_run(loss, conv_only) and not can_run(opt, conv_only)
    with_kinds = _core(op_types=("Gemm", "loss", "optimizer"))
    assert can_run(gemm, with_kinds) and can_run(loss, with_kinds) and can_run(opt, with_kinds)
    assert not can_run(conv, with_kinds)
    assert can_run(opt, _core(op_types=("sgd",)))


def test_op_cost_refuses_excluded_pairs(resnet, edge):
    with pytest.raises(CostModelError) as info:
        op_cost(resnet.op("F:fc"), resnet, _core(op_types=("Conv",)), edge)
    assert "op_types" in info.value.field


def test_node_link_ops_have_no_hardware_meaning(edge):
    g = random_layered(10, seed=1)
    with pytest.raises(MonetError) as info:
        op_cost(g.ops[0], g, edge.cores[0], edge)
    assert "node-link" in info.value.message and info.value.fix


# ----------------------------------------------------------------- C9 / C10
def test_dram_bandwidth_is_the_widest_path():
    hw = preset("edge_tpu", n_pe_x=2, n_pe_y=1, dram_bandwidth_bytes_per_cycle=16, noc_bandwidth_bytes_per_cycle=64)
    assert dram_bandwidth_of(hw, hw.cores[0]) == 16
    data = hardware_to_dict(hw)
    # Without its own bus, pe_1 reaches DRAM through pe_0: the bottleneck of noc (8) and bus (16).
    data["links"] = [dict(l, bandwidth_bytes_per_cycle=8) if l["id"] == "noc_0_1" else l for l in data["links"]]
    data["links"][-1]["endpoints"] = ["pe_0.sram", "dram"]
    narrow = hardware_from_dict(data)
    assert dram_bandwidth_of(narrow, narrow.cores[0]) == 16
    assert dram_bandwidth_of(narrow, narrow.cores[1]) == 8


def test_core_clock_converts_to_the_reference_clock(resnet):
    hw = preset("edge_tpu")
    data = hardware_to_dict(hw)
    data["cores"][0]["clock_hz"] = 400_000_000  # half the reference clock: twice the cycles
    slow = hardware_from_dict(data)
    op = resnet.op("F:layer1.0.conv1")
    fast_b = cost_breakdown(op, resnet, hw.cores[0], hw)
    slow_b = cost_breakdown(op, resnet, slow.cores[0], slow)
    assert slow_b.compute_core_cycles == fast_b.compute_core_cycles
    assert slow_b.cycles == 2 * fast_b.cycles


def test_utilisation_factor_slows_mac_work(resnet):
    hw = preset("hetero_quad")
    op = resnet.op("F:layer1.0.conv1")
    b = cost_breakdown(op, resnet, hw.core("big_0"), hw)
    assert b.utilisation_factor == Fraction(9, 10)
    assert b.mac_core_cycles == -(-b.tiles * b.steps * 10 // 9)
    assert b.utilisation <= Fraction(9, 10)


# ---------------------------------------------------------------- properties
def conv_graph(b, k, c, g, oy, ox, fy, fx, kind=OpKind.FORWARD, extra_flops=0):
    """One conv op (forward, dX or dW) with its tensors, as the importer would describe it."""
    x = Tensor("x", TensorKind.ACTIVATION, 4 * b * c * g * oy * ox)
    w = Tensor("w", TensorKind.WEIGHT, 4 * k * c * fy * fx)
    y = Tensor("y", TensorKind.ACTIVATION, 4 * b * k * oy * ox)
    gw = Tensor("gw", TensorKind.WEIGHT_GRAD, 4 * k * c * fy * fx)
    macs = b * k * c * oy * ox * fy * fx
    dims = {"B": b, "K": k, "C": c, "G": g, "OY": oy, "OX": ox, "FY": fy, "FX": fx}
    if kind is OpKind.BACKWARD_WEIGHT:
        inputs, outputs = ("x", "y"), ("gw",)
    else:
        inputs, outputs = ("x", "w"), ("y",)
    op = Op("v", kind, "Conv+Relu", inputs, outputs, macs=macs, flops=2 * macs + extra_flops, dims=dims)
    return TrainingGraph.build("conv", [op], [x, w, y, gw])


conv_dims = st.tuples(
    st.integers(1, 4),  # B
    st.integers(1, 300),  # K
    st.integers(1, 300),  # C
    st.sampled_from([1, 1, 1, 2, 4]),  # G (K must be a multiple: see below)
    st.integers(1, 20),  # OY
    st.integers(1, 20),  # OX
    st.sampled_from([1, 3, 5]),  # FY
    st.sampled_from([1, 3, 5]),  # FX
)
kinds = st.sampled_from([OpKind.FORWARD, OpKind.BACKWARD_DATA, OpKind.BACKWARD_WEIGHT])


def array_core(simd_units, lanes, **changes):
    return _core(simd_units=simd_units, lanes=lanes, vector_ops_per_cycle=simd_units, **changes)


@settings(max_examples=60, deadline=None)
@given(conv_dims, kinds, st.sampled_from([16, 32, 64, 128]), st.sampled_from([1, 2, 4, 8]),
       st.integers(0, 10_000), st.sampled_from([0.5, 0.9, 1.0]))
def test_utilisation_at_most_one_and_cycles_at_least_one(dims, kind, u, l, extra, factor):
    b, k, c, g, *_ = dims
    k = k * g
    graph = conv_graph(b, k, c, g, *dims[4:], kind=kind, extra_flops=extra)
    hw = preset("edge_tpu", simd_units=u, lanes=l)
    core = dataclasses.replace(hw.cores[0], utilisation={"Conv": factor, "default": 1.0})
    for pinned in (False, True):
        br = cost_breakdown(graph.ops[0], graph, core, hw, pinned=pinned)
        assert br.cycles >= 1
        assert 0 < br.utilisation <= br.spatial_utilisation * br.utilisation_factor <= 1
        assert br.cycles >= br.mac_core_cycles >= br.macs / (u * l)
        cost = br.to_cost()
        assert min(cost.compute_pj, cost.sram_pj, cost.dram_pj) >= 0


@settings(max_examples=60, deadline=None)
@given(conv_dims, kinds, st.sampled_from([16, 32, 64, 128]), st.sampled_from([1, 2, 4]))
def test_more_lanes_never_slower(dims, kind, u, l):
    b, k, c, g, *_ = dims
    k = k * g
    c = max(c, 2 * l)  # C >= lanes
    graph = conv_graph(b, k, c, g, *dims[4:], kind=kind)
    hw = preset("edge_tpu", simd_units=u, lanes=l)
    narrow = op_cost(graph.ops[0], graph, array_core(u, l), hw)
    wide = op_cost(graph.ops[0], graph, array_core(u, 2 * l), hw)
    assert wide.cycles <= narrow.cycles
    wider_units = op_cost(graph.ops[0], graph, array_core(2 * u, l), hw)
    assert cost_breakdown(graph.ops[0], graph, array_core(2 * u, l), hw).mac_core_cycles <= cost_breakdown(
        graph.ops[0], graph, array_core(u, l), hw).mac_core_cycles
    assert wider_units.compute_pj == narrow.compute_pj  # energy does not depend on the array shape


@settings(max_examples=60, deadline=None)
@given(conv_dims, kinds)
def test_pinned_never_uses_more_dram_energy(dims, kind):
    b, k, c, g, *_ = dims
    graph = conv_graph(b, k * g, c, g, *dims[4:], kind=kind)
    hw = preset("edge_tpu")
    streamed = op_cost(graph.ops[0], graph, hw.cores[0], hw)
    pinned = op_cost(graph.ops[0], graph, hw.cores[0], hw, pinned=True)
    assert pinned.dram_pj <= streamed.dram_pj and pinned.dram_pj == 0
    assert pinned.compute_pj == streamed.compute_pj
    assert pinned.sram_pj >= streamed.sram_pj


def test_every_zoo_op_is_costed_on_every_preset(resnet):
    g = zoo.gpt2(preset="tiny")
    for name in ("edge_tpu", "hetero_quad", "datacenter_gpu"):
        hw = preset(name)
        for graph in (resnet, g):
            for op in graph.ops:
                for core in hw.cores:
                    b = cost_breakdown(op, graph, core, hw)
                    assert b.cycles >= 1 and b.utilisation <= 1
