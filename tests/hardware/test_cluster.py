"""Cluster presets and cluster YAML files (P4.H1-H4): the files are the presets, bad ones are user errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from monet_ilp.analysis.graph_plan import hardware_of
from monet_ilp.errors import MonetError
from monet_ilp.hardware.cluster import (
    cluster,
    dgx_a100,
    dgx_h100,
    edge_tpu_mesh,
    load_cluster,
)

FILES = Path(__file__).resolve().parents[2] / "instances" / "clusters"


@pytest.mark.parametrize(("name", "preset"), [
    ("dgx_a100x4_400g.yaml", lambda: dgx_a100(nodes=4, network_gbps=400)),
    ("dgx_h100.yaml", lambda: dgx_h100(nodes=1)),
    ("edge_tpu_mesh4.yaml", lambda: edge_tpu_mesh(chips=4)),
])
def test_the_files_are_the_presets(name, preset):
    spec, expected = load_cluster(FILES / name), preset()
    for field in dataclasses.fields(expected):
        got, want = getattr(spec, field.name), getattr(expected, field.name)
        if field.name == "name":
            continue
        if field.name == "device":
            for f in dataclasses.fields(want):
                if f.name != "name":
                    assert getattr(got, f.name) == pytest.approx(getattr(want, f.name), rel=1e-12)
        elif field.name == "hardware":  # the same hardware, however the file spells its parameters
            assert (hardware_of(spec) if want else None) == (hardware_of(expected) if want else None)
            assert bool(got) == bool(want)
        else:
            assert got == pytest.approx(want, rel=1e-12)


def test_groups_within_a_node_use_its_fabric():
    spec = dgx_a100(nodes=2)
    assert spec.devices == 16
    assert spec.link(8, 1) == (300e9, 5e-6)  # tensor group of 8 in one node
    assert spec.link(2, 8) == (25e9, 10e-6)  # neighbours 8 apart: across nodes


@pytest.mark.parametrize(("text", "field"), [
    ("name: x\ndevice: {name: d}\n", "devices_per_node"),
    ("name: x\ndevice: 3\n", "device"),
    ("name: x\ncolour: red\ndevice: {name: d}\n", "colour"),
    ("name: [unclosed\n", "cluster"),
])
def test_bad_files_name_the_file_and_the_field(tmp_path, text, field):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(MonetError) as err:
        load_cluster(path)
    assert str(path) in err.value.message and field in err.value.message


def test_bad_numbers_and_unknown_presets():
    base = (FILES / "dgx_h100.yaml").read_text()
    with pytest.raises(MonetError, match="intra_bandwidth"):
        import yaml

        from monet_ilp.hardware.cluster import cluster_from_dict
        data = yaml.safe_load(base)
        data["intra_bandwidth"] = "fast"
        cluster_from_dict(data, source="x.yaml")
    with pytest.raises(MonetError, match="dgx_a100"):
        cluster("dgx_a10")


def test_a_full_device_list_is_checked_too(tmp_path):
    text = (FILES / "dgx_h100.yaml").read_text().replace("  busy_w: 700\n", "")
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(MonetError, match="device.busy_w"):
        load_cluster(path)
