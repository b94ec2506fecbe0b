"""``scripts/bench_costs.py``'s comparison with ZigZag, on one ResNet-18 conv (needs the zigzag extra).

The test loads the script itself, so it checks the function the benchmark's table is
made of; it skips when ZigZag is not installed (``pip install -e ".[zigzag]"``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from monet_ilp.hardware.presets import preset

pytest.importorskip("zigzag")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_costs.py"


def _load_script():
    name = "bench_costs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def test_compare_gives_both_tools_latency_and_energy():
    bench = _load_script()
    graph = bench.MODELS["resnet18"]()
    hw = preset("edge_tpu", n_pe_x=1, n_pe_y=1)
    op = graph.op("F:conv1")
    # A small LOMA search (the benchmark uses 6): the test checks the plumbing, not the optimum.
    row = bench.compare(op, graph, hw.cores[0], hw, lpf_limit=3)
    for side in ("ours", "zigzag"):
        assert row[side]["cycles"] > 0
        assert row[side]["energy_pj"] > 0
    assert row["zigzag_macs"] == op.macs
    # The same MAC array and energy per MAC on both sides.
    assert row["zigzag"]["mac_pj"] == pytest.approx(row["ours"]["compute_pj"], rel=1e-6)
