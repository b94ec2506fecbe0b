"""Presets: MONET's edge_tpu sweep, the shipped YAML files, parameters and --set parsing."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.hardware import Hardware, MemoryKind
from monet_ilp.hardware.presets import (
    PRESETS,
    datacenter_gpu,
    edge_tpu,
    hetero_quad,
    parse_set,
    preset,
)
from monet_ilp.hardware.schema import hardware_from_dict, hardware_to_dict, load_hardware

HARDWARE_DIR = Path(__file__).parents[2] / "instances" / "hardware"

# MONET's design-space sweep of the Edge-TPU-like accelerator.
SWEEP_U = (16, 32, 64, 128)
SWEEP_L = (1, 2, 4, 8)
SWEEP_SRAM = ("512KiB", "1MiB", "2MiB", "4MiB")
SWEEP_SIDE = tuple(range(1, 9))
SWEEP = list(itertools.product(SWEEP_U, SWEEP_L, SWEEP_SRAM, SWEEP_SIDE, SWEEP_SIDE))


def _corners():
    ends = [(a[0], a[-1]) for a in (SWEEP_U, SWEEP_L, SWEEP_SRAM, SWEEP_SIDE, SWEEP_SIDE)]
    return list(itertools.product(*ends))


def _fast_points():
    """The 32 corners, every value of every axis, and a seeded sample of the rest."""
    points = set(_corners())
    for i in range(8):  # every value of each axis appears
        points.add((SWEEP_U[i % 4], SWEEP_L[(i + 1) % 4], SWEEP_SRAM[(i + 2) % 4], SWEEP_SIDE[i], SWEEP_SIDE[7 - i]))
    points.update(random.Random(2603).sample(SWEEP, 60))
    return sorted(points)


def check_edge_tpu(u, l, sram, x, y) -> Hardware:
    hw = preset("edge_tpu", simd_units=u, lanes=l, pe_sram_bytes=sram, n_pe_x=x, n_pe_y=y)
    n = x * y
    assert [c.id for c in hw.cores] == [f"pe_{i}" for i in range(n)]
    assert all(c.macs_per_cycle == u * l and c.vector_ops_per_cycle == u for c in hw.cores)
    noc = [link for link in hw.links if link.id.startswith("noc_")]
    assert len(noc) == x * (y - 1) + y * (x - 1)
    bus = hw.link("dram_bus")
    assert set(bus.endpoints) == {f"pe_{i}.sram" for i in range(n)} | {"dram"}
    # Validation is the schema's own: the explicit form rebuilds the same hardware.
    assert hardware_from_dict(hardware_to_dict(hw)) == hw
    return hw


@pytest.mark.parametrize("point", _fast_points(), ids=lambda p: "U{}-L{}-{}-{}x{}".format(*p))
def test_monet_sweep_point_builds_and_validates(point):
    check_edge_tpu(*point)


@pytest.mark.slow
def test_every_monet_sweep_point():
    for point in SWEEP:
        check_edge_tpu(*point)


def test_edge_tpu_mesh_neighbours():
    hw = edge_tpu(n_pe_x=3, n_pe_y=2)
    assert hw.name == "edge_tpu_3x2"
    pairs = {tuple(l.endpoints) for l in hw.links if l.id != "dram_bus"}
    assert pairs == {("pe_0.sram", "pe_1.sram"), ("pe_1.sram", "pe_2.sram"), ("pe_3.sram", "pe_4.sram"),
                     ("pe_4.sram", "pe_5.sram"), ("pe_0.sram", "pe_3.sram"), ("pe_1.sram", "pe_4.sram"),
                     ("pe_2.sram", "pe_5.sram")}
    assert hw.link("noc_2_5").endpoints == ("pe_2.sram", "pe_5.sram")
    assert edge_tpu(n_pe_x=1, n_pe_y=1).links[0].id == "dram_bus"


def test_edge_tpu_names_and_params():
    hw = preset("edge_tpu", simd_units=32, pe_sram_bytes="512KiB")
    assert hw.name == "edge_tpu_2x2_U32_sram512KiB"
    assert hw.params["preset"] == "edge_tpu"
    assert hw.params["pe_sram_bytes"] == 512 * 1024 and hw.params["clock_hz"] == 800_000_000
    assert hw.cores[0].sram_bytes == 512 * 1024 and hw.clock_hz == 800_000_000
    rebuilt = preset("edge_tpu", **{k: v for k, v in hw.params.items() if k != "preset"})
    assert rebuilt == hw


@pytest.mark.parametrize(
    "name, filename", [("edge_tpu", "edge_tpu_2x2"), ("hetero_quad", "hetero_quad"), ("datacenter_gpu", "datacenter_gpu")]
)
def test_yaml_file_equals_preset(name, filename):
    assert load_hardware(HARDWARE_DIR / f"{filename}.yaml") == preset(name)


def test_hetero_quad_structure():
    hw = hetero_quad()
    big, little = hw.core("big_0"), hw.core("little_1")
    assert big.macs_per_cycle == 1024 and little.macs_per_cycle == 128
    assert big.sram_bytes > little.sram_bytes
    # Core.utilisation_of takes the exact key; the cost model passes the anchor type (C1).
    assert big.utilisation_of("Conv+BatchNormalization") == 1.0
    assert big.utilisation_of("Conv") == 0.9 and little.utilisation_of("Conv") == 1.0
    assert hw.link("noc_0_1").endpoints == ("big_0.sram", "big_1.sram")
    assert len(hw.links_between("little_0.sram", "dram")) == 1


def test_datacenter_gpu_structure():
    hw = datacenter_gpu()
    (gpu,) = hw.cores
    assert gpu.macs_per_cycle == 432 * 256
    assert hw.dram.capacity_bytes == 40 * 2**30 and hw.host.kind is MemoryKind.HOST
    assert [l.id for l in hw.links_between("gpu.sram", "host")] == ["pcie"]
    assert [l.id for l in hw.links_between("gpu.sram", "dram")] == ["hbm"]


def test_presets_table_lists_defaults():
    assert set(PRESETS) == {"edge_tpu", "hetero_quad", "datacenter_gpu"}
    assert PRESETS["edge_tpu"]["n_pe_x"] == 2 and PRESETS["edge_tpu"]["pe_sram_bytes"] == "2MiB"
    for name in PRESETS:
        assert isinstance(preset(name), Hardware)


def test_unknown_preset_suggests_the_closest():
    with pytest.raises(MonetError) as info:
        preset("edge_tpuu")
    assert "did you mean 'edge_tpu'" in info.value.message


def test_unknown_parameter_suggests_the_closest():
    with pytest.raises(MonetError) as info:
        preset("edge_tpu", n_pe_xx=4)
    assert info.value.field == "edge_tpu.n_pe_xx" and "did you mean 'n_pe_x'" in info.value.message


@pytest.mark.parametrize(
    "params, field",
    [
        ({"n_pe_x": 0}, "edge_tpu.n_pe_x"),
        ({"lanes": 2.5}, "edge_tpu.lanes"),
        ({"pe_sram_bytes": "2Mb"}, "edge_tpu.pe_sram_bytes"),
        ({"pe_sram_bytes": 0}, "edge_tpu.pe_sram_bytes"),
        ({"mac_pj": -1}, "edge_tpu.mac_pj"),
        ({"dram_bandwidth_bytes_per_cycle": 0}, "edge_tpu.dram_bandwidth_bytes_per_cycle"),
        ({"clock_hz": "fast"}, "edge_tpu.clock_hz"),
    ],
)
def test_bad_parameter_values(params, field):
    with pytest.raises(MonetError) as info:
        preset("edge_tpu", **params)
    assert info.value.field == field and info.value.fix


def test_bad_utilisation_parameter():
    with pytest.raises(MonetError) as info:
        preset("hetero_quad", big_conv_utilisation=1.2)
    assert info.value.field == "hetero_quad.big_conv_utilisation"


def test_parse_set():
    assert parse_set(["n_pe_x=4", "pe_sram_bytes=2MiB", "mac_pj=0.5", "clock_hz = 1GHz"]) == {
        "n_pe_x": 4, "pe_sram_bytes": "2MiB", "mac_pj": 0.5, "clock_hz": "1GHz"}
    hw = preset("edge_tpu", **parse_set(["n_pe_x=4", "n_pe_y=1", "pe_sram_bytes=1MiB"]))
    assert len(hw.cores) == 4 and hw.cores[0].sram_bytes == 2**20


@pytest.mark.parametrize("items", [["n_pe_x"], ["=4"], ["n_pe_x="], ["a=1", "a=2"], ["a=[1, 2]"]])
def test_parse_set_rejects(items):
    with pytest.raises(MonetError) as info:
        parse_set(items)
    assert info.value.fix
