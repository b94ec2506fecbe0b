"""A P4 model from a transformers ``config.json`` (``formulations/p4_problem.md`` P4.M5).

Read with the standard library (transformers is not needed), for the families whose
layers P4.M1 describes: GPT-2 (``n_embd``, ``n_layer``, ``n_head``, learned positions,
a tied head, dropout, MLP ``n_inner`` or ``4h``) and the Llama family as transformers
writes it (``llama``, ``mistral``, ``qwen2``, ``qwen3``: ``hidden_size``,
``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads`` for
grouped-query attention, ``intermediate_size`` of a gated MLP, rotary positions,
``tie_word_embeddings``).  Mixture-of-experts configurations are refused: P4's
layers are dense (P4.M5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from monet_ilp.errors import MonetError
from monet_ilp.problems.p4.model import TransformerConfig

__all__ = ["FAMILIES", "config_from_hf", "hf_config"]

#: ``model_type`` values read, and the family whose field names they use.
FAMILIES = {"gpt2": "gpt2", "llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama"}

#: Keys that mark a mixture-of-experts model (Mixtral, Qwen-MoE, DeepSeek, ...).
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")


def hf_config(path: str | Path, *, seq: int | None = None) -> TransformerConfig:
    """The model of the ``config.json`` at ``path`` (see :func:`config_from_hf`)."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise MonetError(f"no such file: {source}", file=source, field="--hf-config",
                         fix="give the path of a transformers config.json") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MonetError(f"not a JSON file: {err}", file=source, field="--hf-config",
                         fix="give a transformers config.json (as `save_pretrained` writes it)") from None
    return config_from_hf(data, seq=seq, source=source, name=Path(path).stem)


def config_from_hf(data: Any, *, seq: int | None = None, source: str = "config.json",
                   name: str | None = None) -> TransformerConfig:
    """A :class:`TransformerConfig` from a transformers configuration dictionary.

    ``seq`` is the training sequence length; without it, the configuration's
    ``max_position_embeddings`` (``n_positions`` for GPT-2).  The model's name is
    ``_name_or_path``, else ``name``, else its architecture.  Training is 16-bit mixed
    precision whatever ``torch_dtype`` says (P4.M1).
    """
    if not isinstance(data, dict):
        raise MonetError("a config.json holds one JSON object", file=source, field="(top level)",
                         fix="give a transformers config.json")
    moe = [k for k in _MOE_KEYS if data.get(k)]
    if moe:
        raise MonetError(f"a mixture-of-experts model ({moe[0]} = {data[moe[0]]}): P4 plans dense layers only",
                         file=source, field=moe[0],
                         fix="plan a dense model; experts, top-k routing and their all-to-all are not modelled")
    kind = data.get("model_type")
    family = FAMILIES.get(str(kind))
    if family is None:
        raise MonetError(f"model_type {kind!r} is not read", file=source, field="model_type",
                         fix=f"use a config of {', '.join(sorted(FAMILIES))}, or describe the model in a P4 "
                             "instance file (every TransformerConfig field)")

    def need(*names: str) -> int:
        for name in names:
            if name in data and data[name] is not None:
                value = data[name]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise MonetError(f"{name} = {value!r}", file=source, field=name, fix="give a positive integer")
                return value
        raise MonetError(f"{kind} config has no {names[0]!r}", file=source, field=names[0],
                         fix=f"add {names[0]} (an integer), as transformers writes it")

    name = str(data.get("_name_or_path") or name or (data.get("architectures") or [kind])[0])
    if family == "gpt2":
        hidden, layers, heads = need("n_embd"), need("n_layer"), need("n_head")
        positions = need("n_positions", "n_ctx")
        ffn = data.get("n_inner") or 4 * hidden
        length = seq or positions
        if length > positions:
            raise MonetError(f"sequence {length} above the {positions} learned positions", file=source,
                             field="n_positions", fix=f"train at most {positions} tokens per sequence")
        dropout = any(float(data.get(k, 0.1) or 0) > 0 for k in ("resid_pdrop", "attn_pdrop", "embd_pdrop"))
        return TransformerConfig(name, layers, hidden, heads, length, need("vocab_size"), int(ffn),
                                 gated=False, dropout=dropout,
                                 tied=bool(data.get("tie_word_embeddings", True)), learned_positions=True)
    hidden, layers, heads = need("hidden_size"), need("num_hidden_layers"), need("num_attention_heads")
    kv = need("num_key_value_heads") if data.get("num_key_value_heads") is not None else heads
    if heads % kv:
        raise MonetError(f"{kv} key/value heads do not divide {heads} attention heads", file=source,
                         field="num_key_value_heads", fix="give a divisor of num_attention_heads")
    head_dim = data.get("head_dim")
    if head_dim is not None and head_dim * heads != hidden:
        raise MonetError(f"head_dim {head_dim} x {heads} heads is not hidden_size {hidden}", file=source,
                         field="head_dim", fix="P4 takes heads of hidden_size / num_attention_heads")
    act = str(data.get("hidden_act", "silu"))
    if act not in ("silu", "swish"):
        raise MonetError(f"hidden_act {act!r}: the Llama family's MLP is gated by SiLU", file=source,
                         field="hidden_act", fix="use silu")
    length = seq or need("max_position_embeddings")
    dropout = float(data.get("attention_dropout", 0) or 0) > 0
    return TransformerConfig(name, layers, hidden, heads, length, need("vocab_size"), need("intermediate_size"),
                             gated=True, dropout=dropout, kv_heads=kv,
                             tied=bool(data.get("tie_word_embeddings", False)), learned_positions=False)
