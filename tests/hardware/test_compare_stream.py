"""``scripts/compare_stream.py``: the quad-core and the workloads as it describes them to Stream.

The description tests need no Stream.  The parse test needs an interpreter with
``stream-dse`` 0.0.8: this one, or ``$MONET_STREAM_PYTHON`` (Stream 0.0.8 needs ZigZag 2,
so it usually lives in a venv of its own; see the script's docstring); it skips without.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monet_ilp.graph.fusion import FusionPlan, Stack

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load_script():
    name = "compare_stream"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / "compare_stream.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _stream_python() -> str:
    if os.environ.get("MONET_STREAM_PYTHON"):
        return os.environ["MONET_STREAM_PYTHON"]
    pytest.importorskip("stream", reason="stream-dse is not installed (nor $MONET_STREAM_PYTHON set)")
    return sys.executable


def test_description_keeps_the_preset_quad_core():
    script = _load_script()
    hw = script.hardware()
    desc = script.stream_description(hw, sram_bytes=3 * 2**20, bits=32)
    assert [c["id"] for c in desc["cores"]] == [0, 1, 2, 3]
    for core, ours in zip(desc["cores"], hw.cores, strict=True):
        assert (core["simd_units"], core["lanes"]) == (ours.simd_units, ours.lanes) == (64, 4)
        assert core["sram_bytes"] == 3 * 2**20
        assert core["mac_pj"] == ours.mac_pj
    assert sorted(tuple(sorted(link["between"])) for link in desc["mesh"]) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert desc["dram"]["bandwidth_bytes_per_cycle"] == hw.dram.bandwidth_bytes_per_cycle


def test_gpt2_layers_have_the_graphs_macs():
    script = _load_script()
    graph = script.MODELS["gpt2"]()
    work = script.gpt2_layers(graph, cores=4)
    macs: dict[str, int] = {}
    for lid, layer in work["layers"].items():
        op = work["op_of_layer"][lid]
        macs[op] = macs.get(op, 0) + math.prod(layer["loop_dim_size"].values())
    assert macs == {op.id: op.macs for op in graph.ops if op.macs}


def test_mirrored_plan_cuts_ranges_where_the_tile_count_changes():
    script = _load_script()
    plan = FusionPlan((Stack(("F:b", "F:c"), 4),))
    hints = script.hints_for(plan, {0: "F:a", 3: "F:b", 5: "F:b", 8: "F:c", 9: "F:d"})
    assert hints == {"per_range": [[], [["OY", 4]], []], "cutoffs": [3, 9]}
    assert script.hints_for(FusionPlan(), {0: "F:a"}) == {"loops": []}


def test_stream_parses_the_description(tmp_path):
    python = _stream_python()
    script = _load_script()
    desc = script.stream_description(script.hardware(), sram_bytes=3 * 2**20, bits=32)
    path = tmp_path / "accelerator.json"
    path.write_text(json.dumps(desc))
    done = subprocess.run([python, "-W", "ignore", str(SCRIPTS / "compare_stream_run.py"), "--check", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    parsed = json.loads(done.stdout)
    cores = {c["id"]: c for c in parsed["cores"]}
    assert parsed["offchip_core_id"] == 6  # 4 compute cores, then the SIMD, pooling and off-chip cores
    for i in range(4):
        assert cores[i]["array"] == [64, 4]
        assert set(cores[i]["top_memory_bits"].values()) == {3 * 2**20 * 8}
