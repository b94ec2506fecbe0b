"""P4 models from transformers ``config.json`` files (``p4_problem.md`` P4.M5): grouped-query
attention, untied heads, rotary positions, any MLP width; dense models only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monet_ilp.errors import MonetError
from monet_ilp.problems.p4.hf_config import config_from_hf, hf_config
from monet_ilp.problems.p4.memory import layer_activations
from monet_ilp.problems.p4.model import model_config
from tests.conftest import cli_code

HF = Path(__file__).resolve().parents[3] / "instances" / "hf"

@pytest.mark.parametrize("name,billions", [("llama3_8b", 8.03), ("llama3_70b", 70.55), ("mistral_7b", 7.24),
                                           ("qwen2_7b", 7.62), ("gpt2", 0.1244)])
def test_parameters_match_the_published_sizes(name, billions):
    config = hf_config(HF / f"{name}.json")
    assert config.params() / 1e9 == pytest.approx(billions, rel=2e-3)


def test_grouped_query_attention_narrows_k_and_v_in_flops_parameters_and_memory():
    data = json.loads((HF / "llama3_8b.json").read_text())
    gqa = config_from_hf(data, seq=4096)
    mha = config_from_hf({**data, "num_key_value_heads": 32}, seq=4096)
    h, s, b = gqa.hidden, gqa.seq, 1
    assert gqa.kv == 8 and gqa.kv_hidden == h // 4 and mha.kv_hidden == h
    narrower = h - gqa.kv_hidden  # the columns K and V lose, each
    assert mha.layer_params() - gqa.layer_params() == 2 * h * narrower + 2 * narrower
    assert mha.layer_forward_flops(b) - gqa.layer_forward_flops(b) == 4 * b * s * h * narrower
    keep = {"seq": s, "batch": b, "hidden": h, "heads": 32, "ffn": gqa.ffn, "gated": True, "dropout": False}
    for tp in (1, 2, 8):
        full = layer_activations(**keep, tp=tp).bytes
        grouped = layer_activations(**keep, tp=tp, kv_heads=8).bytes
        assert full - grouped == 2 * 2 * s * b * narrower // tp  # K and V, 2 bytes each
    with pytest.raises(MonetError, match="key/value heads") as raised:
        layer_activations(**keep, tp=16, kv_heads=8)  # 16 does not divide 8 groups
    assert raised.value.field == "tp"


def test_an_untied_head_and_rotary_positions_change_only_the_ends():
    config = hf_config(HF / "llama3_8b.json")
    assert not config.tied and not config.learned_positions
    assert config.embedding_params() == config.vocab * config.hidden  # no position table
    assert config.head_params() == config.vocab * config.hidden
    gpt = hf_config(HF / "gpt2.json")
    assert gpt.tied and gpt.head_params() == 0 and gpt.dropout and gpt.ffn == 4 * gpt.hidden
    preset = model_config("gpt2", preset="small")  # the preset and the config agree
    assert (gpt.layers, gpt.hidden, gpt.heads, gpt.seq, gpt.vocab, gpt.ffn) == (
        preset.layers, preset.hidden, preset.heads, preset.seq, preset.vocab, preset.ffn)
    assert gpt.params() == preset.params() and gpt.layer_forward_flops(4) == preset.layer_forward_flops(4)


@pytest.mark.parametrize("change,field", [
    ({"hidden_size": None}, "hidden_size"),
    ({"num_key_value_heads": 5}, "num_key_value_heads"),
    ({"num_local_experts": 8, "num_experts_per_tok": 2}, "num_local_experts"),
    ({"model_type": "t5"}, "model_type"),
    ({"num_hidden_layers": -2}, "num_hidden_layers"),
    ({"hidden_act": "gelu"}, "hidden_act"),
])
def test_a_bad_config_names_the_file_the_field_and_the_fix(tmp_path, capsys, change, field):
    data = {**json.loads((HF / "llama3_8b.json").read_text()), **change}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    with pytest.raises(MonetError) as raised:
        hf_config(path)
    assert raised.value.field == field and raised.value.file == str(path) and raised.value.fix
    assert cli_code(["plan", "--hf-config", str(path), "--global-batch", "8"]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


def test_the_cli_plans_a_model_from_its_config_and_its_instance_round_trips(tmp_path, capsys):
    saved = tmp_path / "p4.json"
    out = tmp_path / "plan.json"
    code = cli_code(["plan", "--hf-config", str(HF / "gpt2.json"), "-p", "seq=512", "--global-batch", "32",
                "--time-limit", "10", "--json", str(out), "--save-instance", str(saved)])
    assert code == 0, capsys.readouterr().err
    instance = json.loads(saved.read_text())
    assert instance["model"]["seq"] == 512 and instance["model"]["tied"] is True
    assert json.loads(out.read_text())["plan"]["data"] >= 1
    assert cli_code(["solve", str(saved), "--time-limit", "10"]) == 0
    assert cli_code(["plan", "--model", "gpt2", "--hf-config", str(HF / "gpt2.json"), "--global-batch", "8"]) == 2
