"""Activation memory of one transformer layer under tensor and sequence parallelism and recomputation.

The closed forms of Korthikanti et al. (MLSys 2023, section 4 and Table 2), built from
the tensors the backward pass keeps (``formulations/p4_problem.md`` P4.A1-A4), so
that every term can be named and the sum checked against the published expressions:
16-bit activations (2 bytes), 1-byte dropout masks, per device of a tensor-parallel
group of ``t``.

    no recomputation          s·b·h·(10 + 24/t + 5as/(ht))      (34/t + 5as/(ht) with sequence parallelism)
    selective recomputation   s·b·h·(10 + 24/t)                  (34/t with sequence parallelism)
    full recomputation        2·s·b·h                            (the layer's input only; 2sbh/t with it)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from monet_ilp.errors import MonetError

__all__ = ["RECOMPUTE", "ActivationTerm", "LayerActivations", "closed_form", "layer_activations",
           "stage_extra_bytes"]

Recompute = Literal["none", "selective", "full"]
#: The recomputation options of a layer (P4.A3).
RECOMPUTE: tuple[Recompute, ...] = ("none", "selective", "full")


@dataclass(frozen=True)
class ActivationTerm:
    """One saved tensor: its name, bytes per device, and where the term comes from."""

    name: str
    bytes: int
    split: str  # "tensor" (divided by t), "sequence" (divided by t under sequence parallelism), "none"


@dataclass(frozen=True)
class LayerActivations:
    """What one layer keeps for its backward pass, per device, per micro-batch."""

    terms: tuple[ActivationTerm, ...]
    recompute: Recompute

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.terms)


def layer_activations(*, seq: int, batch: int, hidden: int, heads: int, tp: int = 1,
                      sequence_parallel: bool = False, recompute: str = "none", ffn: int | None = None,
                      gated: bool = False, dropout: bool = True, kv_heads: int | None = None) -> LayerActivations:
    """The saved tensors of one layer (P4.A1-A3), per device of a tensor-parallel group.

    Parameters
    ----------
    seq, batch, hidden, heads
        ``s``, ``b`` (the micro-batch), ``h``, ``a``.
    tp
        ``t``: the tensor-parallel degree.  ``heads``, ``hidden`` and ``ffn`` must be
        multiples of it, and ``seq`` too with ``sequence_parallel``.
    sequence_parallel
        Split the layer norms, dropouts and the inputs of the two linear blocks along the
        sequence (Korthikanti et al., section 4.2.2).
    recompute
        ``none``, ``selective`` (the attention core, ``5as²b/t``, is recomputed) or
        ``full`` (only the layer's input is kept).
    ffn, gated, dropout
        The MLP's inner width (default ``4h``), a gated MLP (two inner activations), and
        whether the layer has dropout (masks of one byte per element).
    kv_heads
        Key/value heads (grouped-query attention, P4.A5; default ``heads``): K and V are
        ``kv_heads · h / heads`` wide.  A multiple of ``tp``.
    """
    f = 4 * hidden if ffn is None else ffn
    t = tp
    if recompute not in RECOMPUTE:
        raise MonetError(f"recompute = {recompute!r}", field="recompute", fix=f"use one of {', '.join(RECOMPUTE)}")
    kv = heads if not kv_heads else kv_heads
    if t < 1 or heads % t or hidden % t or f % t or kv % t:
        raise MonetError(f"tensor parallelism {t} does not divide heads {heads}, key/value heads {kv}, hidden "
                         f"{hidden} and ffn {f}", field="tp",
                         fix="choose a degree that divides the heads, the key/value heads, the hidden size and the "
                             "MLP width")
    if heads % kv:
        raise MonetError(f"{kv} key/value heads do not divide {heads} heads", field="kv_heads",
                         fix="give a divisor of heads")
    if sequence_parallel and seq % t:
        raise MonetError(f"sequence parallelism over {t} does not divide the sequence {seq}",
                         field="sequence_parallel", fix="choose a degree dividing the sequence length")
    if min(seq, batch, hidden, heads) < 1:
        raise MonetError("seq, batch, hidden and heads must be positive", field="batch", fix="give positive sizes")
    s, b, h, a = seq, batch, hidden, heads
    sbh = s * b * h
    seq_div = t if sequence_parallel else 1

    def seq_term(name: str, nbytes: int) -> ActivationTerm:
        return ActivationTerm(name, nbytes // seq_div, "sequence" if sequence_parallel else "none")

    def tensor_term(name: str, nbytes: int) -> ActivationTerm:
        return ActivationTerm(name, nbytes // t, "tensor")

    if recompute == "full":
        return LayerActivations((seq_term("layer input", 2 * sbh),), "full")
    terms = [
        seq_term("layer norm 1 input", 2 * sbh),
        seq_term("QKV input", 2 * sbh),
        tensor_term("Q and K", 2 * sbh + 2 * s * b * (h // a * kv)),
    ]
    if recompute == "none":
        terms += [
            tensor_term("softmax output", 2 * a * s * s * b),
            tensor_term("softmax dropout mask", a * s * s * b),
            tensor_term("attention dropout output", 2 * a * s * s * b),
        ]
    terms += [tensor_term("V", 2 * s * b * (h // a * kv)), tensor_term("projection input", 2 * sbh)]
    if dropout:
        terms.append(seq_term("attention dropout mask", sbh))
    terms += [seq_term("layer norm 2 input", 2 * sbh), seq_term("MLP input", 2 * sbh)]
    sbf = s * b * f
    if gated:
        terms += [tensor_term("gate and up outputs", 4 * sbf), tensor_term("down projection input", 2 * sbf)]
    else:
        terms += [tensor_term("activation input", 2 * sbf), tensor_term("second linear input", 2 * sbf)]
    if dropout:
        terms.append(seq_term("MLP dropout mask", sbh))
    return LayerActivations(tuple(terms), recompute)


def closed_form(*, seq: int, batch: int, hidden: int, heads: int, tp: int = 1, sequence_parallel: bool = False,
                recompute: str = "none") -> Fraction:
    """Korthikanti et al.'s Table 2, as printed (GPT layers: ``f = 4h``, dropout)."""
    s, b, h, a, t = seq, batch, hidden, heads, tp
    sbh = Fraction(s * b * h)
    if recompute == "full":
        return 2 * sbh / (t if sequence_parallel else 1)
    attention = Fraction(5 * a * s, h * t) if recompute == "none" else Fraction(0)
    if sequence_parallel:
        return sbh * (Fraction(34, t) + attention)
    return sbh * (10 + Fraction(24, t) + attention)


def stage_extra_bytes(*, seq: int, batch: int, hidden: int, vocab: int, tp: int = 1,
                      sequence_parallel: bool = False, first: bool, last: bool, dropout: bool = True) -> int:
    """What the first and last pipeline stages keep beyond their layers, per micro-batch (P4.A4).

    First stage: the embedding's dropout mask (``sbh``).  Last stage: the final layer
    norm's input (``2sbh``), the output projection's input (``2sbh``) and the fp32
    logits the cross-entropy keeps (``4sbV/t``), as Korthikanti et al. section 4.3.
    """
    sbh = seq * batch * hidden
    div = tp if sequence_parallel else 1
    out = 0
    if first and dropout:
        out += sbh // div
    if last:
        out += 4 * sbh // div + 4 * seq * batch * vocab // tp
    return out
