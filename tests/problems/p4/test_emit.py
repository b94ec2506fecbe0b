"""Plans in the ecosystem's formats (``p4_problem.md`` P4.E): Megatron-LM arguments and
torchtitan TOML, checked against the plan they come from."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from monet_ilp.cli import main
from monet_ilp.errors import MonetError
from monet_ilp.problems.p4.emit import megatron_args, torchtitan_toml
from monet_ilp.problems.p4.hf_config import hf_config
from monet_ilp.problems.p4.model import model_config
from monet_ilp.problems.p4.plan import Plan

HF = Path(__file__).resolve().parents[3] / "instances" / "hf"
LLAMA = hf_config(HF / "llama3_8b.json", seq=4096)
GPT3 = model_config("gpt3", preset="175b")


def plan(**changes) -> Plan:
    base = {"data": 4, "pipeline": 4, "tensor": 2, "sequence_parallel": True, "micro_batch": 1, "micro_batches": 16,
            "schedule": "1f1b", "stages": (8, 8, 8, 8), "recompute": ("none",) * 32, "zero": 1, "placement": "tdp"}
    return Plan(**{**base, **changes})


def args_of(text: str) -> dict[str, str]:
    """``--flag value`` lines (a flag alone maps to '')."""
    out = {}
    for line in text.splitlines():
        if line.startswith("--"):
            flag, _, value = line.rstrip(" \\").partition(" ")
            out[flag] = value
    return out


def test_megatron_gets_the_degrees_the_batch_and_the_models_shape():
    p = plan()
    args = args_of(megatron_args(p, LLAMA).text)
    assert args["--tensor-model-parallel-size"] == "2" and args["--pipeline-model-parallel-size"] == "4"
    assert args["--micro-batch-size"] == "1" and args["--global-batch-size"] == str(p.global_batch) == "64"
    assert "--sequence-parallel" in args and "--use-distributed-optimizer" in args  # ZeRO-1, exactly
    assert "--recompute-granularity" not in args  # nothing recomputed
    assert args["--num-query-groups"] == "8" and "--group-query-attention" in args
    assert args["--ffn-hidden-size"] == "14336" and args["--seq-length"] == "4096"
    assert "--swiglu" in args and args["--position-embedding-type"] == "rope"
    assert "--untie-embeddings-and-output-weights" in args
    gpt = args_of(megatron_args(plan(zero=0, placement="tpd", recompute=("none",) * 96, stages=(24,) * 4), GPT3).text)
    assert "--use-distributed-optimizer" not in gpt and "--use-tp-pp-dp-mapping" in gpt
    assert "--group-query-attention" not in gpt and gpt["--position-embedding-type"] == "learned_absolute"


def test_megatron_recomputes_block_wise_and_takes_uneven_end_stages():
    recompute = ("full",) * 3 + ("none",) * 7 + ("full",) * 3 + ("none",) * 7 + ("none",) * 6 + ("full",) * 2 + \
        ("none",) * 4
    p = plan(stages=(10, 10, 10, 2), recompute=recompute)
    emitted = megatron_args(p, LLAMA)
    args = args_of(emitted.text)
    assert args["--recompute-granularity"] == "full" and args["--recompute-method"] == "block"
    assert args["--recompute-num-layers"] == "3"  # the most any stage recomputes: never less than the plan
    assert args["--decoder-last-pipeline-num-layers"] == "2" and "--decoder-first-pipeline-num-layers" not in args
    assert any("first 3 of every stage" in n for n in emitted.notes)
    whole = args_of(megatron_args(plan(recompute=("full",) * 32), LLAMA).text)
    assert (whole["--recompute-method"], whole["--recompute-num-layers"]) == ("uniform", "1")
    selective = args_of(megatron_args(plan(recompute=("selective",) * 32), LLAMA).text)
    assert selective["--recompute-granularity"] == "selective" and "--recompute-method" not in selective


@pytest.mark.parametrize("changes,field", [
    ({"stages": (9, 7, 9, 7)}, "stages"),
    ({"schedule": "gpipe"}, "schedule"),
    ({"zero": 3}, "zero"),
    ({"zero": 2}, "zero"),
    ({"recompute": ("offload",) * 4 + ("none",) * 28}, "recompute"),
])
def test_what_megatron_cannot_say_is_refused_with_the_fix(changes, field):
    with pytest.raises(MonetError) as raised:
        megatron_args(plan(**changes), LLAMA)
    assert raised.value.field == field and raised.value.fix


def test_torchtitan_sections_hold_the_plan():
    p = plan(zero=3, schedule="gpipe", stages=(9, 7, 9, 7), recompute=("full",) * 32)
    emitted = torchtitan_toml(p, LLAMA)
    toml = tomllib.loads(emitted.text)
    par, train = toml["parallelism"], toml["training"]
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"]) == (2, 4)
    assert (par["data_parallel_shard_degree"], par["data_parallel_replicate_degree"]) == (4, 1)
    assert par["fsdp_reshard_after_forward"] == "always" and par["pipeline_parallel_schedule"] == "GPipe"
    assert train["local_batch_size"] == 16 and par["pipeline_parallel_microbatch_size"] == 1
    assert train["global_batch_size"] == p.global_batch and train["seq_len"] == 4096
    parts = par["module_fqns_per_model_part"]
    assert [len([m for m in part if m.startswith("layers.")]) for part in parts] == [9, 7, 9, 7]
    assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "output"]
    assert toml["activation_checkpoint"]["mode"] == "full"
    flat = tomllib.loads(torchtitan_toml(plan(pipeline=1, stages=(32,), data=16, zero=0), LLAMA).text)
    assert flat["training"]["local_batch_size"] == 1 and flat["training"]["global_batch_size"] == 256
    assert flat["parallelism"]["data_parallel_replicate_degree"] == 16


def test_torchtitan_recomputes_every_nth_layer_never_fewer_than_the_plan():
    every_fourth = tuple("full" if (i + 1) % 4 == 0 else "none" for i in range(32))
    ac = tomllib.loads(torchtitan_toml(plan(recompute=every_fourth), LLAMA).text)["activation_checkpoint"]
    assert ac == {"mode": "selective", "selective_ac_option": "4"}
    first_ten = ("full",) * 10 + ("none",) * 22
    emitted = torchtitan_toml(plan(recompute=first_ten), LLAMA)
    n = int(tomllib.loads(emitted.text)["activation_checkpoint"]["selective_ac_option"])
    assert 32 // n >= 10 and emitted.notes
    with pytest.raises(MonetError) as raised:
        torchtitan_toml(plan(recompute=("offload",) * 32), LLAMA)
    assert raised.value.field == "recompute"


def test_the_cli_emits_the_plan_it_found(tmp_path, capsys):
    out, emitted = tmp_path / "plan.json", tmp_path / "titan.toml"
    args = ["plan", "--hf-config", str(HF / "gpt2.json"), "--global-batch", "64", "--time-limit", "10",
            "--json", str(out), "--emit", "torchtitan", "--emit-out", str(emitted)]
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    found = json.loads(out.read_text())["plan"]
    toml = tomllib.loads(emitted.read_text())
    assert toml["parallelism"]["tensor_parallel_degree"] == found["tensor"]
    assert toml["parallelism"]["data_parallel_shard_degree" if found["zero"] else "data_parallel_replicate_degree"] \
        == found["data"]
    assert toml["parallelism"]["pipeline_parallel_degree"] == found["pipeline"]
    assert toml["training"]["global_batch_size"] == 64


def test_the_cli_plans_within_the_zero_stages_megatron_runs(capsys):
    args = ["plan", "--hf-config", str(HF / "gpt2.json"), "--global-batch", "64", "--time-limit", "10",
            "--zero", "0,1", "--emit", "megatron"]
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "--micro-batch-size" in out and "ZeRO 0, 1" in out
