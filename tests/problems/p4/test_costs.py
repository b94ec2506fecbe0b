"""Matrix products on a device (``p4_problem.md`` P4.C1b): tile and wave quantisation."""

from __future__ import annotations

import dataclasses

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.hardware.cluster import A100_80GB, DeviceSpec, load_cluster
from monet_ilp.problems.p4.costs import gemm_s, layer_products
from monet_ilp.problems.p4.model import model_config

PLAIN = dataclasses.replace(A100_80GB, sm_count=0, gemm_tile=0)


def ideal(rows, cols, depth, batch=1):
    return 2 * rows * cols * depth * batch / (A100_80GB.peak_flops * A100_80GB.gemm_efficiency)


def test_a_full_wave_of_whole_tiles_runs_at_the_sustained_peak():
    rows, cols = 128 * 12, 128 * 9  # 108 tiles: one wave on 108 SMs
    assert gemm_s(A100_80GB, rows, cols, 4096) == pytest.approx(ideal(rows, cols, 4096))
    assert gemm_s(PLAIN, 100, 100, 100) == pytest.approx(ideal(100, 100, 100))


def test_a_partial_tile_and_a_partial_wave_cost_whole_ones():
    # one row more: a second tile row of 9 tiles (117 tiles, two waves)
    rows, cols = 128 * 12 + 1, 128 * 9
    assert gemm_s(A100_80GB, rows, cols, 4096) == pytest.approx(
        ideal(rows, cols, 4096) * (2 * 108 * 128 * 128) / (rows * cols))
    # batched products share the waves: 216 single-tile heads are two full waves
    assert gemm_s(A100_80GB, 128, 128, 64, 216) == pytest.approx(ideal(128, 128, 64, 216))
    assert gemm_s(A100_80GB, 64, 64, 64, 1) == pytest.approx(ideal(64, 64, 64) * 108 * 4)


@pytest.mark.parametrize("family,preset,t", [("gpt3", "175b", 8), ("llama", "8b", 4), ("gpt2", "medium", 1)])
def test_a_layers_products_add_up_to_its_flops(family, preset, t):
    model = model_config(family, preset=preset)
    flops = sum(2 * r * c * d * b for r, c, d, b in layer_products(model, 2, t).values())
    assert flops == pytest.approx(model.layer_forward_flops(2) / t)


def test_the_quantisation_parameters_are_checked_and_read_from_files():
    with pytest.raises(MonetError) as raised:
        DeviceSpec("x", 1e12, 0.5, 2**30, 1e11, 100.0, 10.0, sm_count=8, gemm_tile=0)
    assert raised.value.field == "sm_count"
    from pathlib import Path

    spec = load_cluster(Path(__file__).resolve().parents[3] / "instances" / "clusters" / "dgx_a100x4_400g.yaml")
    assert (spec.device.sm_count, spec.device.gemm_tile) == (108, 128)
    assert spec.device == A100_80GB
