"""Fusion as a batch axis (``fusion:`` in a manifest, ``formulations/fusion.md``)."""

from __future__ import annotations

import json

import pytest

from monet_ilp.batch.job import build_instance
from monet_ilp.batch.manifest import ManifestError, parse_manifest

BASE = """
name: fusion_axis
models:
  - zoo: gpt2
    params: {n_layer: 1, d_model: 32, n_head: 2, seq: 16, vocab: 64, batch: 2}
hardware:
  - preset: edge_tpu
    params: {n_pe_x: 2, n_pe_y: 2}
problems: P3
budgets: [1MiB]
backends: [heuristic:memory_aware]
"""


def test_each_fusion_entry_is_a_point_and_layer_by_layer_keeps_its_old_key(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps({"stacks": [{"ops": ["F:h.0.ln_1", "F:h.0.attn.c_attn"],
                                                                 "tiles": 2}]}))
    fused = parse_manifest(BASE + "fusion: [null, {chains: 4}, {stream: 2, axis: batch}, {file: plan.json}]\n",
                           base=tmp_path)
    plain = parse_manifest(BASE)
    assert len(fused.jobs) == 4 and len(plain.jobs) == 1
    assert fused.jobs[0].key == plain.jobs[0].key  # no fusion key: results from before stay valid
    stacks = [build_instance(job.params, job.paths).graph.meta.get("fusion", {"stacks": []})["stacks"]
              for job in fused.jobs]
    assert stacks[0] == [] and all(s["tiles"] == 4 for s in stacks[1])
    assert stacks[2] and all(s["axis"] == "batch" for s in stacks[2])
    assert stacks[3] == [{"ops": ["F:h.0.ln_1", "F:h.0.attn.c_attn"], "tiles": 2, "axis": "rows"}]


@pytest.mark.parametrize("entry,key,says", [
    ("{chains: 0}", "fusion[0].chains", "not a positive tile count"),
    ("{chains: 2, stream: 2}", "fusion[0]", "exactly one of"),
    ("{chain: 2}", "fusion[0].chain", "unknown key"),
    ("{chains: 2, axis: cols}", "fusion[0].axis", "unknown axis"),
    ("{file: missing.json}", "fusion[0].file", "cannot read"),
    ("fused", "fusion[0]", "unknown fusion entry"),
])
def test_a_bad_fusion_entry_names_the_line_and_the_key(tmp_path, entry, key, says):
    with pytest.raises(ManifestError) as caught:
        parse_manifest(BASE + f"fusion: [{entry}]\n", source="m.yaml", base=tmp_path)
    text = str(caught.value)
    assert key in text and says in text and "m.yaml" in text and "line 12" in text
