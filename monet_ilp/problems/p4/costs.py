"""What each layer of a P4 plan costs: time, memory and communication, from the model and the cluster.

The data both the searches and the evaluator read, as op costs are for P1-P3
(``formulations/p4_problem.md`` P4.C1-C8): for fixed degrees ``(d, p, t)``, sequence
parallelism, micro-batch and ZeRO stage, the forward and backward time of a layer under
each recomputation option, its activation and parameter bytes per device, and the
time of the collectives around it.  Times are integer nanoseconds (rounded up),
memory integer bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from monet_ilp.errors import MonetError
from monet_ilp.problems.p4.memory import RECOMPUTE, layer_activations, stage_extra_bytes

if TYPE_CHECKING:
    from monet_ilp.hardware.cluster import ClusterSpec, DeviceSpec
    from monet_ilp.problems.p4.model import TransformerConfig

__all__ = ["ADAM_BYTES_PER_PARAM", "LayerCost", "PlanCosts", "StageEnd", "all_gather_s", "all_reduce_s", "gemm_s",
           "layer_products", "plan_costs"]

#: Mixed-precision Adam (P4.C5): 16-bit weights (2) and gradients (2), and fp32 master
#: weights, momentum and variance (12) per parameter.
ADAM_BYTES_PER_PARAM = (2, 2, 12)


def all_reduce_s(n: int, nbytes: float, bandwidth: float, latency_s: float) -> float:
    """Ring all-reduce of ``nbytes`` over ``n`` devices: ``2(n-1)/n · bytes/bw + 2(n-1)·α`` (P4.C3)."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bandwidth + 2 * (n - 1) * latency_s


def all_gather_s(n: int, nbytes: float, bandwidth: float, latency_s: float) -> float:
    """Ring all-gather (or reduce-scatter) of ``nbytes`` in all: ``(n-1)/n · bytes/bw + (n-1)·α``."""
    if n <= 1:
        return 0.0
    return (n - 1) / n * nbytes / bandwidth + (n - 1) * latency_s


def _ns(seconds: float) -> int:
    return math.ceil(seconds * 1e9 - 1e-6)


@dataclass(frozen=True)
class LayerCost:
    """One transformer layer under one recomputation option, per device and micro-batch."""

    recompute: str
    forward_ns: int
    backward_ns: int  # recomputation included
    activation_bytes: int  # kept from its forward to its backward
    transient_bytes: int  # held only while its backward runs (full recomputation rebuilds the rest)
    host_bytes: int  # kept in host memory instead (offload)
    compute_ns: int  # the part of forward + backward spent in matrix products and element-wise ops
    flops: int  # forward + backward FLOPs (recomputation included), per device


@dataclass(frozen=True)
class StageEnd:
    """What an end of the pipeline adds to its stage (P4.C6): the embedding on the first,
    the head and the loss on the last; per device and micro-batch."""

    param_bytes: int
    forward_ns: int
    backward_ns: int
    activation_bytes: int
    sync_ns: int
    optimizer_ns: int

    @property
    def work_ns(self) -> int:
        return self.forward_ns + self.backward_ns

    @property
    def step_ns(self) -> int:
        """Its gradient synchronisation and optimizer step."""
        return self.sync_ns + self.optimizer_ns


@dataclass(frozen=True)
class PlanCosts:
    """The costs of every part of a plan with fixed degrees (P4.C1-C8)."""

    layer: dict[str, LayerCost]
    layer_param_bytes: int  # weights, gradients and optimizer state of one layer, per device
    layer_sync_ns: int  # its gradients' data-parallel synchronisation
    layer_optimizer_ns: int  # its optimizer step
    first: StageEnd  # the embedding, on the first stage
    last: StageEnd  # the head (a copy of the embedding when p > 1), the final norm and the loss
    p2p_ns: int  # one activation (or its gradient) between neighbouring stages
    capacity_bytes: int
    host_capacity_bytes: int

    def ends(self, stage: int, stages: int) -> list[StageEnd]:
        """The ends of the pipeline on ``stage`` of ``stages``: the first, the last, both, or none."""
        return [end for end, here in ((self.first, stage == 0), (self.last, stage == stages - 1)) if here]


def gemm_s(dev: DeviceSpec, rows: float, cols: float, depth: float, batch: float = 1) -> float:
    """P4.C1b: seconds of ``batch`` products of a ``rows x depth`` and a ``depth x cols``
    matrix: ``2 · rows · cols · depth · batch`` FLOPs at ``η Π``, over the share of the
    device's tile waves that the output fills (1 without ``sm_count``)."""
    flops = 2 * rows * cols * depth * batch
    if dev.sm_count <= 0:
        return flops / (dev.peak_flops * dev.gemm_efficiency)
    tile = dev.gemm_tile
    tiles = math.ceil(rows / tile) * math.ceil(cols / tile) * math.ceil(batch)
    waves = math.ceil(tiles / dev.sm_count)
    filled = rows * cols * batch / (waves * dev.sm_count * tile * tile)
    return flops / (dev.peak_flops * dev.gemm_efficiency * filled)


def _data_grad(shape: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """The product that gives the first operand's gradient: ``dA = dY · Bᵀ``."""
    rows, cols, depth, batch = shape
    return rows, depth, cols, batch


def _weight_grad(shape: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """The product that gives the second operand's gradient: ``dB = Aᵀ · dY``."""
    rows, cols, depth, batch = shape
    return depth, cols, rows, batch


def layer_products(model: TransformerConfig, batch: int, tp: int) -> dict[str, tuple[float, float, float, float]]:
    """P4.C1b: the matrix products of one layer's forward on one device of a tensor group,
    as ``(rows, cols, depth, batch)``; their FLOPs add up to P4.M3's over ``t``."""
    s, h, a, f = model.seq, model.hidden, model.heads, model.ffn
    tokens, head_dim, heads = s * batch, h // a, a / tp
    return {
        "qkv": (tokens, (h + 2 * model.kv_hidden) / tp, h, 1),
        "scores": (s, s, head_dim, batch * heads),
        "context": (s, head_dim, s, batch * heads),
        "projection": (tokens, h, h / tp, 1),
        "mlp_in": (tokens, (2 if model.gated else 1) * f / tp, h, 1),
        "mlp_out": (tokens, h, f / tp, 1),
    }


def plan_costs(model: TransformerConfig, cluster: ClusterSpec, *, data: int, pipeline: int, tensor: int,
               sequence_parallel: bool, micro_batch: int, zero: int = 0, placement: str = "tdp") -> PlanCosts:
    """The costs for degrees ``(data, pipeline, tensor)`` (P4.C1-C8 of ``p4_problem.md``).

    Raises
    ------
    MonetError
        Degrees the model or the cluster cannot take (tensor parallelism not dividing
        the heads, more devices than the cluster has, ...).
    """
    d, p, t, b = data, pipeline, tensor, micro_batch
    if d * p * t > cluster.devices:
        raise MonetError(f"{d} x {p} x {t} = {d * p * t} devices, more than the cluster's {cluster.devices}",
                         field="devices", fix="lower a degree or add nodes")
    if p > model.layers:
        raise MonetError(f"pipeline degree {p} above the {model.layers} layers", field="pipeline",
                         fix="use at most one stage per layer")
    dev = cluster.device
    s, h, a, v = model.seq, model.hidden, model.heads, model.vocab
    tp_bw, tp_lat = cluster.link(t, 1)
    # P4.D1: the data group's members are t apart (tdp) or t p apart (tpd); pipeline
    # neighbours t d apart (tdp) or t apart (tpd).
    dp_bw, dp_lat = cluster.link(d, t if placement == "tdp" else t * p)
    pp_bw, pp_lat = cluster.link(2, t * d if placement == "tdp" else t)

    def acts_of(option: str) -> int:
        return layer_activations(seq=s, batch=b, hidden=h, heads=a, tp=t, sequence_parallel=sequence_parallel,
                                 recompute=option, ffn=model.ffn, gated=model.gated, dropout=model.dropout,
                                 kv_heads=model.kv).bytes

    kept = acts_of("none")
    # P4.C2: tensor-parallel collectives, two in the forward and two in the backward of a
    # layer, each on the layer's 2sbh-byte activation (all-reduce; with sequence
    # parallelism an all-gather and a reduce-scatter, the same volume).
    tp_comm = 2 * all_reduce_s(t, 2 * s * b * h, tp_bw, tp_lat)
    layer_params = model.layer_params() / t
    weights_bytes, grads_bytes, state_bytes = ADAM_BYTES_PER_PARAM
    shard = {"w": d if zero >= 3 else 1, "g": d if zero >= 2 else 1, "o": d if zero >= 1 else 1}

    def param_bytes(params: float) -> int:
        return math.ceil(params * (weights_bytes / shard["w"] + grads_bytes / shard["g"] + state_bytes / shard["o"]))

    def sync_s(params: float) -> float:
        # P4.C4: gradients all-reduced over d (ZeRO 2-3: reduce-scatter then all-gather of
        # the updated weights, the same volume).
        return all_reduce_s(d, params * grads_bytes, dp_bw, dp_lat)

    def optimizer_s(params: float) -> float:
        # P4.C5: Adam reads and writes its 16 bytes per parameter it owns.
        return params / shard["o"] * 2 * sum(ADAM_BYTES_PER_PARAM) / dev.memory_bandwidth

    gather = all_gather_s(d, layer_params * weights_bytes, dp_bw, dp_lat) if zero >= 3 else 0.0
    forward_flops = model.layer_forward_flops(b) / t
    products = layer_products(model, b, t)
    forward_gemm = sum(gemm_s(dev, *shape) for shape in products.values())
    backward_gemm = sum(gemm_s(dev, *_data_grad(shape)) + gemm_s(dev, *_weight_grad(shape))
                        for shape in products.values())
    forward_compute = forward_gemm + kept / dev.memory_bandwidth
    forward = forward_compute + tp_comm + gather
    layer: dict[str, LayerCost] = {}
    for option in RECOMPUTE:
        acts = acts_of(option)
        compute = backward_gemm + 2 * kept / dev.memory_bandwidth
        extra = 0.0
        flops = 3 * forward_flops
        if option == "selective":  # the attention core again: QKᵀ, AV, softmax and dropout
            core = model.attention_core_flops(b) / t
            extra = (gemm_s(dev, *products["scores"]) + gemm_s(dev, *products["context"])
                     + 5 * a * s * s * b / t / dev.memory_bandwidth)
            flops += core
        elif option == "full":
            extra = forward
            flops += forward_flops
        backward = compute + tp_comm + gather + extra
        layer[option] = LayerCost(option, _ns(forward), _ns(backward), acts,
                                  kept - acts if option == "full" else 0, 0,
                                  _ns(forward_compute + compute), math.ceil(flops))
    if cluster.host_bandwidth > 0:
        # P4.C9 offload: every activation P4.A1 keeps goes to host memory after the forward
        # and comes back before the backward, over the device's PCIe link, not overlapped.
        move = kept / cluster.host_bandwidth
        backward = backward_gemm + 2 * kept / dev.memory_bandwidth + tp_comm + gather + move
        layer["offload"] = LayerCost("offload", _ns(forward + move), _ns(backward), 0, kept, kept,
                                     _ns(forward_compute + backward_gemm + 2 * kept / dev.memory_bandwidth),
                                     math.ceil(3 * forward_flops))
    # P4.C6: the embedding on the first stage, the head and the loss on the last.
    sbh = s * b * h
    embed_params = model.embedding_params() / t
    lookup = 2 * sbh / dev.memory_bandwidth + all_reduce_s(t, 2 * sbh, tp_bw, tp_lat)
    # a tied head on its own stage holds a copy of the token embedding; an untied one its own matrix
    head_params = (model.vocab * h / t if p > 1 or not model.tied else 0) + 2 * h
    head = (s * b, v // t if v % t == 0 else v / t, h, 1)  # the logits: tokens x V/t, over h
    loss = 4 * s * b * v / t / dev.memory_bandwidth
    extra_first = stage_extra_bytes(seq=s, batch=b, hidden=h, vocab=v, tp=t, sequence_parallel=sequence_parallel,
                                    first=True, last=False, dropout=model.dropout)
    extra_last = stage_extra_bytes(seq=s, batch=b, hidden=h, vocab=v, tp=t, sequence_parallel=sequence_parallel,
                                   first=False, last=True, dropout=model.dropout)
    p2p_bytes = 2 * sbh / (t if sequence_parallel else 1)
    return PlanCosts(
        layer=layer,
        layer_param_bytes=param_bytes(layer_params),
        layer_sync_ns=_ns(sync_s(layer_params)),
        layer_optimizer_ns=_ns(optimizer_s(layer_params)),
        first=StageEnd(param_bytes(embed_params), _ns(lookup), _ns(2 * lookup), extra_first,
                       _ns(sync_s(embed_params)), _ns(optimizer_s(embed_params))),
        last=StageEnd(param_bytes(head_params), _ns(gemm_s(dev, *head) + loss
                                                    + all_reduce_s(t, 4 * s * b, tp_bw, tp_lat)),
                      _ns(gemm_s(dev, *_data_grad(head)) + gemm_s(dev, *_weight_grad(head)) + loss), extra_last,
                      _ns(sync_s(head_params)),
                      _ns(optimizer_s(head_params))),
        p2p_ns=_ns(p2p_bytes / pp_bw + pp_lat) if p > 1 else 0,
        capacity_bytes=dev.memory_bytes,
        host_capacity_bytes=cluster.host_memory_bytes,
    )
