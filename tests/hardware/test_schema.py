"""Hardware YAML schema: units, round trips, topology shorthand and every error case."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from monet_ilp.hardware import Hardware, MemoryKind
from monet_ilp.hardware.presets import preset
from monet_ilp.hardware.schema import (
    HardwareError,
    hardware_from_dict,
    hardware_to_dict,
    load_hardware,
    parse_frequency,
    parse_size,
    validate_hardware_file,
)

if TYPE_CHECKING:
    from monet_ilp.errors import MonetError

CORE = {
    "id": "pe",
    "array": {"simd_units": 8, "lanes": 2},
    "sram_bytes": "64KiB",
    "sram_bandwidth_bytes_per_cycle": 16,
    "sram_read_pj_per_byte": 1.0,
    "sram_write_pj_per_byte": 1.2,
    "mac_pj": 0.5,
    "vector_ops_per_cycle": 8,
    "vector_op_pj": 0.1,
}
DRAM = {"capacity_bytes": "1GiB", "bandwidth_bytes_per_cycle": 8, "read_pj_per_byte": 100, "write_pj_per_byte": 110}


def minimal() -> dict:
    return {
        "name": "tiny",
        "clock_hz": "1GHz",
        "cores": [copy.deepcopy(CORE)],
        "dram": dict(DRAM),
        "links": [{"id": "bus", "endpoints": ["pe.sram", "dram"], "bandwidth_bytes_per_cycle": 8, "pj_per_byte": 0}],
    }


def errors_of(data, tmp_path: Path, text: str | None = None) -> list[MonetError]:
    path = tmp_path / "hw.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(data, sort_keys=False))
    return validate_hardware_file(path)


def only_error(data, tmp_path, text=None) -> MonetError:
    errors = errors_of(data, tmp_path, text)
    assert len(errors) == 1, [e.message for e in errors]
    assert str(tmp_path / "hw.yaml") in errors[0].message
    return errors[0]


# ----------------------------------------------------------------------- units
@pytest.mark.parametrize(
    "text, expected",
    [
        (2097152, 2097152),
        ("2MiB", 2 * 2**20),
        ("512KiB", 512 * 1024),
        ("1GiB", 2**30),
        ("4MB", 4_000_000),
        ("4kB", 4000),
        ("64B", 64),
        ("0.5MiB", 2**19),
        ("2 MiB", 2 * 2**20),
        ("1_024", 1024),
        (1024.0, 1024),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["2Mb", "2 MiBs", "lots", "-1", "1.5B", True, None, [1], "2XiB"])
def test_parse_size_rejects(text):
    with pytest.raises(HardwareError) as info:
        parse_size(text, field="cores[0].sram_bytes")
    assert "cores[0].sram_bytes" in info.value.message
    assert info.value.fix


@pytest.mark.parametrize(
    "text, expected",
    [("800MHz", 800_000_000), ("1GHz", 10**9), ("1.41GHz", 1_410_000_000), (10**9, 10**9), ("1e9", 10**9)],
)
def test_parse_frequency(text, expected):
    assert parse_frequency(text) == expected


@pytest.mark.parametrize("text", ["0Hz", "1.5Hz", "fast", "-1GHz", "1GB"])
def test_parse_frequency_rejects(text):
    with pytest.raises(HardwareError):
        parse_frequency(text)


# ------------------------------------------------------------------ building
def test_minimal_hardware():
    hw = hardware_from_dict(minimal())
    assert isinstance(hw, Hardware)
    assert hw.clock_hz == 10**9
    (core,) = hw.cores
    assert (core.simd_units, core.lanes, core.sram_bytes, core.clock_hz) == (8, 2, 65536, 10**9)
    assert core.utilisation_of("Conv") == 1.0
    assert [m.id for m in hw.memories] == ["pe.sram", "dram"]
    assert hw.memory("pe.sram").kind is MemoryKind.SRAM
    assert hw.memory("pe.sram").capacity_bytes == 65536
    assert hw.dram.write_pj_per_byte == 110
    assert hw.links_between("pe.sram", "dram")[0].id == "bus"


def test_count_replicates_cores_and_topology_matches_explicit_links():
    data = minimal()
    data["cores"][0]["count"] = 6
    del data["links"]
    data["topology"] = {
        "kind": "mesh", "rows": 2, "cols": 3, "noc_bandwidth_bytes_per_cycle": 4, "noc_pj_per_byte": 0.5,
        "dram_bus_bandwidth_bytes_per_cycle": 8, "dram_bus_pj_per_byte": 0.0,
    }
    hw = hardware_from_dict(data)
    assert [c.id for c in hw.cores] == [f"pe_{i}" for i in range(6)]
    assert [l.id for l in hw.links] == ["noc_0_1", "noc_0_3", "noc_1_2", "noc_1_4", "noc_2_5", "noc_3_4",
                                        "noc_4_5", "dram_bus"]
    assert hw.link("dram_bus").endpoints == tuple(f"pe_{i}.sram" for i in range(6)) + ("dram",)
    explicit = hardware_to_dict(hw)
    assert "topology" not in explicit and all("count" not in c for c in explicit["cores"])
    assert hardware_from_dict(explicit) == hw


@pytest.mark.parametrize("name", ["edge_tpu", "hetero_quad", "datacenter_gpu"])
def test_round_trip_through_yaml_text(name):
    hw = preset(name)
    text = yaml.safe_dump(hardware_to_dict(hw), sort_keys=False)
    assert hardware_from_dict(yaml.safe_load(text)) == hw


def test_optional_core_keys():
    data = minimal()
    data["cores"][0].update(clock_hz="500MHz", rf_bytes="1KiB", static_mw=3, utilisation={"Conv": 0.5},
                            op_types=["Conv", "loss"])
    data["host"] = dict(DRAM)
    data["links"].append({"id": "pcie", "endpoints": ["pe.sram", "host"], "bandwidth_bytes_per_cycle": 2,
                          "pj_per_byte": 5, "latency_cycles": 100})
    hw = hardware_from_dict(data)
    core = hw.cores[0]
    assert (core.clock_hz, core.rf_bytes, core.static_mw, core.op_types) == (500_000_000, 1024, 3.0, ("Conv", "loss"))
    assert core.utilisation_of("Conv") == 0.5 and core.utilisation_of("Gemm") == 1.0  # no default given: 1.0
    assert hw.host.id == "host" and hw.link("pcie").latency_cycles == 100
    assert hardware_from_dict(hardware_to_dict(hw)) == hw


@pytest.mark.parametrize("f", ["edge_tpu_2x2", "hetero_quad", "datacenter_gpu"])
def test_shipped_yaml_files_are_valid(f):
    path = Path(__file__).parents[2] / "instances" / "hardware" / f"{f}.yaml"
    assert validate_hardware_file(path) == []
    assert isinstance(load_hardware(path), Hardware)


# -------------------------------------------------------------------- errors
def test_bad_yaml_names_the_line(tmp_path):
    err = only_error(None, tmp_path, "name: x\ncores:\n  - id: a\n   bad: 1\n")
    assert "line 4" in err.message and err.field == "line 4"


def test_unclosed_bracket(tmp_path):
    err = only_error(None, tmp_path, "name: x\ncores: [\nclock_hz: 1\n")
    assert "line" in err.field and "YAML" in err.message


def test_duplicate_yaml_key(tmp_path):
    err = only_error(None, tmp_path, "name: a\nclock_hz: 1GHz\nname: b\n")
    assert "duplicate key 'name'" in err.message and err.field == "line 3"


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_empty_file(tmp_path, text):
    assert "empty" in only_error(None, tmp_path, text).message


def test_missing_file(tmp_path):
    (err,) = validate_hardware_file(tmp_path / "nope.yaml")
    assert "not found" in err.message
    with pytest.raises(HardwareError):
        load_hardware(tmp_path / "nope.yaml")


def test_top_level_not_a_mapping(tmp_path):
    assert "mapping" in only_error(None, tmp_path, "- a\n- b\n").message


def test_unknown_key_suggests_the_closest(tmp_path):
    data = minimal()
    data["cores"][0]["sram_bandwith_bytes_per_cycle"] = data["cores"][0].pop("sram_bandwidth_bytes_per_cycle")
    errors = errors_of(data, tmp_path)
    messages = [e.message for e in errors]
    assert any("cores[0].sram_bandwith_bytes_per_cycle: unknown key" in m
               and "did you mean 'sram_bandwidth_bytes_per_cycle'" in m for m in messages)
    assert any("cores[0].sram_bandwidth_bytes_per_cycle: missing key" in m for m in messages)


def test_unknown_top_level_key(tmp_path):
    data = minimal()
    data["link"] = data.pop("links")
    messages = [e.message for e in errors_of(data, tmp_path)]
    assert any("link: unknown key 'link'" in m and "did you mean 'links'" in m for m in messages)


@pytest.mark.parametrize("key", ["name", "clock_hz", "cores", "dram"])
def test_missing_top_level_key(tmp_path, key):
    data = minimal()
    del data[key]
    assert any(f"missing key {key!r}" in e.message for e in errors_of(data, tmp_path))


def test_size_strings_and_bad_sizes(tmp_path):
    data = minimal()
    data["cores"][0]["sram_bytes"] = "2Mb"
    err = only_error(data, tmp_path)
    assert err.field == "cores[0].sram_bytes" and "2MiB" in err.fix
    data["cores"][0]["sram_bytes"] = 0
    assert "not positive" in only_error(data, tmp_path).message
    data["cores"][0]["sram_bytes"] = "1.5MiB"
    assert hardware_from_dict(data).cores[0].sram_bytes == 3 * 2**19


def test_negative_energy(tmp_path):
    data = minimal()
    data["cores"][0]["mac_pj"] = -0.5
    err = only_error(data, tmp_path)
    assert err.field == "cores[0].mac_pj" and "negative" in err.message
    data = minimal()
    data["dram"]["read_pj_per_byte"] = -1
    assert only_error(data, tmp_path).field == "dram.read_pj_per_byte"


def test_non_positive_bandwidth(tmp_path):
    data = minimal()
    data["links"][0]["bandwidth_bytes_per_cycle"] = 0
    assert only_error(data, tmp_path).field == "links.bus.bandwidth_bytes_per_cycle"


@pytest.mark.parametrize("value", [[1], "fast", True, None])
def test_wrong_type(tmp_path, value):
    data = minimal()
    data["cores"][0]["vector_op_pj"] = value
    err = only_error(data, tmp_path)
    assert err.field == "cores[0].vector_op_pj" and "must be a number" in err.message


def test_integer_fields_reject_floats(tmp_path):
    data = minimal()
    data["cores"][0]["array"]["lanes"] = 2.5
    assert only_error(data, tmp_path).field == "cores[0].array.lanes"


@pytest.mark.parametrize("value", [0, 1.5, -0.1, "high"])
def test_utilisation_outside_unit_interval(tmp_path, value):
    data = minimal()
    data["cores"][0]["utilisation"] = {"Conv": value, "default": 1.0}
    assert only_error(data, tmp_path).field == "cores[0].utilisation.Conv"


def test_duplicate_core_ids(tmp_path):
    data = minimal()
    data["cores"].append(copy.deepcopy(CORE))
    err = only_error(data, tmp_path)
    assert err.field == "cores[1].id" and "duplicate core id 'pe'" in err.message


def test_duplicate_core_ids_after_count(tmp_path):
    data = minimal()
    data["cores"][0]["count"] = 2
    other = copy.deepcopy(CORE)
    other["id"] = "pe_1"
    data["cores"].append(other)
    data["links"][0]["endpoints"] = ["pe_0.sram", "pe_1.sram", "dram"]
    assert "duplicate core id 'pe_1'" in only_error(data, tmp_path).message


def test_duplicate_link_ids(tmp_path):
    data = minimal()
    data["links"].append(dict(data["links"][0]))
    err = only_error(data, tmp_path)
    assert err.field == "links.bus" and "duplicate link id" in err.message


def test_unknown_link_endpoint(tmp_path):
    data = minimal()
    data["links"][0]["endpoints"] = ["pe_0.sram", "dram"]
    errors = errors_of(data, tmp_path)
    assert errors[0].field == "links.bus.endpoints"
    assert "unknown memory 'pe_0.sram'" in errors[0].message and "did you mean 'pe.sram'" in errors[0].fix


def test_link_needs_two_distinct_endpoints(tmp_path):
    data = minimal()
    data["links"][0]["endpoints"] = ["pe.sram"]
    assert "at least two" in errors_of(data, tmp_path)[0].message
    data["links"][0]["endpoints"] = ["pe.sram", "pe.sram", "dram"]
    assert "repeat" in errors_of(data, tmp_path)[0].message


def test_core_without_path_to_dram(tmp_path):
    data = minimal()
    other = copy.deepcopy(CORE)
    other["id"] = "island"
    data["cores"].append(other)
    err = only_error(data, tmp_path)
    assert err.field == "cores[1]" and "no path" in err.message and "island.sram" in err.fix


def test_path_to_dram_may_go_through_another_core(tmp_path):
    data = minimal()
    other = copy.deepcopy(CORE)
    other["id"] = "far"
    data["cores"].append(other)
    data["links"].append({"id": "noc", "endpoints": ["far.sram", "pe.sram"], "bandwidth_bytes_per_cycle": 4,
                          "pj_per_byte": 0})
    assert errors_of(data, tmp_path) == []


def test_unreachable_host(tmp_path):
    data = minimal()
    data["host"] = dict(DRAM)
    assert only_error(data, tmp_path).field == "host"


def test_topology_errors(tmp_path):
    data = minimal()
    data["cores"][0]["count"] = 3
    del data["links"]
    data["topology"] = {"kind": "mesh", "rows": 2, "cols": 2, "noc_bandwidth_bytes_per_cycle": 4,
                        "noc_pj_per_byte": 0, "dram_bus_bandwidth_bytes_per_cycle": 8, "dram_bus_pj_per_byte": 0}
    assert only_error(data, tmp_path).field == "topology.rows"
    data["topology"].update(rows=1, cols=3, kind="mesj")
    err = only_error(data, tmp_path)
    assert err.field == "topology.kind" and "did you mean 'mesh'" in err.fix
    data["topology"]["kind"] = "mesh"
    del data["topology"]["dram_bus_pj_per_byte"]
    assert only_error(data, tmp_path).field == "topology.dram_bus_pj_per_byte"


def test_core_id_with_a_dot(tmp_path):
    data = minimal()
    data["cores"][0]["id"] = "pe.0"
    assert any(e.field == "cores[0].id" and "'.'" in e.message for e in errors_of(data, tmp_path))


def test_every_error_is_collected_and_the_first_raised(tmp_path):
    data = minimal()
    data["cores"][0]["mac_pj"] = -1
    data["cores"][0]["lanes"] = 4
    data["dram"]["bandwidth_bytes_per_cycle"] = -8
    errors = errors_of(data, tmp_path)
    assert len(errors) == 3
    assert all(isinstance(e, HardwareError) and e.fix for e in errors)
    with pytest.raises(HardwareError) as info:
        load_hardware(tmp_path / "hw.yaml")
    assert info.value.field == errors[0].field and "2 more errors" in info.value.message
