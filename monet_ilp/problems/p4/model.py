"""The model P4 plans for: a stack of identical transformer layers with an embedding and a head.

P4 works at layer granularity (``formulations/p4_problem.md``, P4.M1-M4): what a
plan needs of a layer is its parameters, its FLOPs per micro-batch and its activation
memory (:mod:`.memory`), all closed forms of the configuration below.  Presets follow
the published configurations (GPT-2, a 1B Llama-style model, and the GPT-3-style
models of Korthikanti et al. and Narayanan et al.).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Any

from monet_ilp.errors import MonetError

__all__ = ["MODELS", "TransformerConfig", "model_config"]


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer (P4.M1).

    Attributes
    ----------
    layers, hidden, heads
        ``L``, ``h``, ``a``.
    seq
        Sequence length ``s``.
    vocab
        Vocabulary ``V`` (the embedding and the logits).
    ffn
        The MLP's inner width ``f`` (``4h`` for GPT).
    gated
        A gated MLP (SwiGLU, Llama): three ``h x f`` matrices instead of two.
    dropout
        Dropout after attention and MLP (GPT; Llama has none): 1-byte masks to keep.
    dtype_bytes
        Bytes per activation and weight element (2: fp16/bf16).
    kv_heads
        Key/value heads (grouped-query attention, P4.M5): ``0`` means ``heads``.
    tied
        The head reuses the token embedding (GPT-2); ``False``: a head matrix of its own.
    learned_positions
        A learned position embedding of ``s x h`` (GPT-2); ``False``: rotary (Llama).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn: int
    gated: bool = False
    dropout: bool = True
    dtype_bytes: int = 2
    kv_heads: int = 0
    tied: bool = True
    learned_positions: bool = True

    def __post_init__(self) -> None:
        for field in ("layers", "hidden", "heads", "seq", "vocab", "ffn", "dtype_bytes"):
            if getattr(self, field) < 1:
                raise MonetError(f"model {self.name!r}: {field} = {getattr(self, field)}", field=field,
                                 fix="give a positive integer")
        if self.hidden % self.heads:
            raise MonetError(f"model {self.name!r}: hidden {self.hidden} is not a multiple of heads {self.heads}",
                             field="heads", fix="choose heads dividing hidden")
        if self.kv_heads < 0 or self.heads % self.kv:
            raise MonetError(f"model {self.name!r}: {self.kv_heads} key/value heads do not divide {self.heads} heads",
                             field="kv_heads", fix="give a divisor of heads (0: as many as heads)")

    @property
    def kv(self) -> int:
        """Key/value heads (``heads`` without grouped-query attention)."""
        return self.kv_heads or self.heads

    @property
    def kv_hidden(self) -> int:
        """The width of K and of V: ``kv · h / a`` (``h`` without grouped-query attention)."""
        return self.hidden // self.heads * self.kv

    # ------------------------------------------------------------------ parameters (P4.M2)
    def layer_params(self) -> int:
        """Parameters of one layer: attention ``2h² + 2h·h_kv + 2h + 2h_kv`` (``4h² + 4h``
        without grouped-query attention), MLP, two layer norms ``4h``."""
        h, f, kv = self.hidden, self.ffn, self.kv_hidden
        mlp = 3 * h * f if self.gated else 2 * h * f + f + h
        return 2 * h * h + 2 * h * kv + 2 * h + 2 * kv + mlp + 4 * h

    def embedding_params(self) -> int:
        """Token and (learned) position embeddings, ``Vh + sh``, on the first stage."""
        return self.vocab * self.hidden + (self.seq * self.hidden if self.learned_positions else 0)

    def head_params(self) -> int:
        """The head's own matrix (``Vh``), none when it is tied to the token embedding."""
        return 0 if self.tied else self.vocab * self.hidden

    def params(self) -> int:
        return self.layers * self.layer_params() + self.embedding_params() + self.head_params() + 2 * self.hidden

    # ------------------------------------------------------------------ FLOPs (P4.M3)
    def layer_forward_flops(self, batch: int) -> int:
        """Forward FLOPs of one layer on ``batch`` sequences: the matrix products.

        ``QKV 2bsh(h + 2h_kv) + QKᵀ 2bs²h + AV 2bs²h + projection 2bsh² + MLP 4bshf``
        (6bshf gated): ``24bsh² + 4bs²h`` for GPT (``f = 4h``, ``h_kv = h``), as Narayanan
        et al. count.
        """
        b, s, h, f = batch, self.seq, self.hidden, self.ffn
        mlp = (6 if self.gated else 4) * b * s * h * f
        return 4 * b * s * h * h + 4 * b * s * h * self.kv_hidden + 4 * b * s * s * h + mlp

    def attention_core_flops(self, batch: int) -> int:
        """``QKᵀ`` and ``AV``: what selective recomputation runs again (``4bs²h``)."""
        return 4 * batch * self.seq * self.seq * self.hidden

    def head_forward_flops(self, batch: int) -> int:
        """The logits: ``2bshV``."""
        return 2 * batch * self.seq * self.hidden * self.vocab

    def model_flops(self, batch: int) -> int:
        """FLOPs of one training iteration on ``batch`` sequences without recomputation:
        three times the forward (backward = twice the forward), layers and head.

        Equal to ``72 B s L h² (1 + s/6h + V/12hL)`` (Korthikanti et al., eq. for model
        FLOPs) for GPT; MFU divides this by time x devices x peak.
        """
        return 3 * (self.layers * self.layer_forward_flops(batch) + self.head_forward_flops(batch))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _gpt(name: str, layers: int, hidden: int, heads: int, *, seq: int = 1024, vocab: int = 50257) -> TransformerConfig:
    return TransformerConfig(name, layers, hidden, heads, seq, vocab, 4 * hidden)


#: Model presets (``--model``, ``-p preset=...``).  GPT-3-style sizes are the
#: configurations of Korthikanti et al. (2023), Table 3 (seq 2048, vocab 51200).
MODELS: dict[str, dict[str, TransformerConfig]] = {
    "gpt2": {
        "small": _gpt("gpt2-small", 12, 768, 12),
        "medium": _gpt("gpt2-medium", 24, 1024, 16),
        "large": _gpt("gpt2-large", 36, 1280, 20),
        "xl": _gpt("gpt2-xl", 48, 1600, 25),
    },
    "llama": {
        "1b": TransformerConfig("llama-1b", 16, 2048, 32, 2048, 128256, 8192, gated=True, dropout=False),
        "8b": TransformerConfig("llama-8b", 32, 4096, 32, 4096, 128256, 14336, gated=True, dropout=False),
    },
    "gpt3": {
        "22b": _gpt("gpt3-22b", 48, 6144, 64, seq=2048, vocab=51200),
        "175b": _gpt("gpt3-175b", 96, 12288, 96, seq=2048, vocab=51200),
        "530b": _gpt("gpt3-530b", 105, 20480, 128, seq=2048, vocab=51200),
        "1t": _gpt("gpt3-1t", 128, 25600, 160, seq=2048, vocab=51200),
    },
}


def model_config(name: str, *, preset: str | None = None, seq: int | None = None) -> TransformerConfig:
    """A model preset: ``gpt2`` (small/medium/large/xl), ``llama`` (1b/8b), ``gpt3`` (22b/175b/530b/1t)."""
    family = MODELS.get(name)
    if family is None:
        close = difflib.get_close_matches(name, MODELS, n=1)
        raise MonetError(f"unknown model {name!r}", field="model",
                         fix=f"use one of {', '.join(sorted(MODELS))}" + (f" (did you mean {close[0]!r}?)"
                                                                          if close else ""))
    key = (preset or next(iter(family))).lower()
    if key not in family:
        raise MonetError(f"model {name!r} has no preset {preset!r}", field="preset",
                         fix=f"use one of {', '.join(family)}")
    config = family[key]
    return config if seq is None else replace(config, seq=seq)
