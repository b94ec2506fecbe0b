#!/usr/bin/env python
"""Fidelity of the zoo training graphs against PyTorch: FLOPs and saved activation bytes.

For each zoo model (``mlp``, ``resnet18`` (CIFAR, batch 4), ``gpt2_tiny``) this builds
the same architecture in PyTorch (fp32, same shapes; see ``notes/arch_spec.md``) and
runs one training step (forward + cross-entropy + backward, no optimizer):

* torch FLOPs: :class:`torch.utils.flop_counter.FlopCounterMode` around the whole
  step (it counts matmul / conv-like ops only, forward and backward);
* torch saved bytes: every tensor autograd saves during forward + loss, seen by a
  :func:`torch.autograd.graph.saved_tensors_hooks` pack hook, deduplicated by
  storage, parameters and buffers excluded.

Our side: ``2 * sum(op.macs)`` and ``sum(t.bytes for t in graph.saved_tensors())``
of the graph ``monet_ilp.graph.zoo.<model>(..., granularity=...)`` returns.

Run ``python scripts/fidelity_torch.py [--out fidelity.json] [--details]``; the table
goes to stdout, the rows (and, with ``--details``, a per-tensor breakdown) to JSON.
``tests/graph/test_fidelity_torch.py`` imports this file, so the two never drift.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from monet_ilp.graph import zoo

# Targets of the fidelity issue: forward+backward FLOPs within 2 %, saved bytes within 10 %.
FLOP_TOL = 0.02
SAVED_TOL = 0.10

MODELS = ("mlp", "resnet18", "gpt2_tiny")
GRANULARITIES = ("layer", "op")

# Model hyper-parameters (zoo defaults / presets, notes/arch_spec.md).
MLP_CFG = {"depth": 4, "width": 256, "batch": 64, "in_features": 784, "classes": 10}
RESNET_CFG = {"batch": 4, "classes": 10, "image": 32}
GPT2_TINY_CFG = {"n_layer": 2, "d_model": 128, "n_head": 4, "seq": 64, "vocab": 512, "batch": 4}

# Arguments of the zoo builders for each model (granularity is added per call).
ZOO_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "mlp": ("mlp", {}),
    "resnet18": ("resnet18", {"variant": "cifar", "batch": RESNET_CFG["batch"]}),
    "gpt2_tiny": ("gpt2", {"preset": "tiny"}),
}


# ============================================================== torch models
class MLP(nn.Module):
    """depth x [Linear(width) -> ReLU] -> Linear(classes)."""

    def __init__(self, depth: int, width: int, in_features: int, classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        prev = in_features
        for _ in range(depth):
            layers += [nn.Linear(prev, width), nn.ReLU()]
            prev = width
        layers.append(nn.Linear(prev, classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class BasicBlock(nn.Module):
    """Conv3x3(stride)-BN-ReLU-Conv3x3-BN, + skip (1x1/stride conv + BN when needed), ReLU."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout, eps=1e-5)
        self.relu1 = nn.ReLU(inplace=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-5)
        self.relu2 = nn.ReLU(inplace=False)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout, eps=1e-5)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = x if self.downsample is None else self.downsample(x)
        return self.relu2(out + skip)


class ResNet18Cifar(nn.Module):
    """CIFAR ResNet-18: 3x3/s1 stem, no maxpool, 4 stages x 2 BasicBlocks, avgpool + Linear."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64, eps=1e-5)
        self.relu = nn.ReLU(inplace=False)
        stages = []
        cin = 64
        for i, cout in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _conv_bn_relu6(cin: int, cout: int, kernel: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=False))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion (t > 1), 3x3 depthwise, 1x1 linear projection, + skip."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [] if expand == 1 else [_conv_bn_relu6(cin, hidden, 1, 1)]
        layers += [_conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, 1, 0, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.use_res_connect = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision's MobileNetV2 layout and module names (``features.N``, ``classifier``),
    out-of-place ReLU6 as in the ResNet-18 twin; torchvision itself cannot load with the CPU
    build of torch here."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))

    def __init__(self, classes: int, dropout: float = 0.2) -> None:
        super().__init__()
        features: list[nn.Module] = [_conv_bn_relu6(3, 32, 3, 2)]
        cin = 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                features.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        features.append(_conv_bn_relu6(cin, 1280, 1, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, seq: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.dh = d_model // n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        mask = torch.triu(torch.full((seq, seq), -1e4), diagonal=1).view(1, 1, seq, seq)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=-1)
        q = q.view(b, s, self.n_head, self.dh).transpose(1, 2)
        k = k.view(b, s, self.n_head, self.dh).transpose(1, 2)
        v = v.view(b, s, self.n_head, self.dh).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.dh) + self.mask
        att = att.softmax(dim=-1)
        o = (att @ v).transpose(1, 2).reshape(b, s, d)
        return self.c_proj(o)


class GPT2Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, seq: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model, eps=1e-5)
        self.attn = CausalSelfAttention(d_model, n_head, seq)
        self.ln2 = nn.LayerNorm(d_model, eps=1e-5)
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.gelu = nn.GELU()  # exact (erf)
        self.c_fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.attn(self.ln1(h))
        return h + self.c_fc2(self.gelu(self.c_fc(self.ln2(h))))


class GPT2(nn.Module):
    def __init__(self, n_layer: int, d_model: int, n_head: int, seq: int, vocab: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq, d_model)
        self.register_buffer("pos_ids", torch.arange(seq), persistent=False)
        self.blocks = nn.ModuleList(GPT2Block(d_model, n_head, seq) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model, eps=1e-5)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.wte(ids) + self.wpe(self.pos_ids)
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))


@dataclass
class TorchCase:
    """A torch model with one batch of inputs and labels."""

    name: str
    model: nn.Module
    inputs: torch.Tensor
    labels: torch.Tensor

    def loss(self, logits: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.labels.reshape(-1))


def make_torch_case(name: str, seed: int = 0) -> TorchCase:
    """The torch twin of zoo model ``name`` (fp32, training mode) with random data."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    if name == "mlp":
        c = MLP_CFG
        model = MLP(c["depth"], c["width"], c["in_features"], c["classes"])
        x = torch.randn(c["batch"], c["in_features"], generator=gen)
        y = torch.randint(0, c["classes"], (c["batch"],), generator=gen)
    elif name == "resnet18":
        c = RESNET_CFG
        model = ResNet18Cifar(c["classes"])
        x = torch.randn(c["batch"], 3, c["image"], c["image"], generator=gen)
        y = torch.randint(0, c["classes"], (c["batch"],), generator=gen)
    elif name == "gpt2_tiny":
        c = GPT2_TINY_CFG
        model = GPT2(c["n_layer"], c["d_model"], c["n_head"], c["seq"], c["vocab"])
        x = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=gen)
        y = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=gen)
    else:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return TorchCase(name, model.float().train(), x, y)


# ======================================================= torch measurements
@dataclass
class SavedRecord:
    """One distinct storage autograd saved for backward."""

    module: str  # innermost module whose forward was running ("loss" for the loss)
    grad_fns: list[str]  # backward nodes that hold it
    shape: tuple[int, ...]
    dtype: str
    bytes: int  # storage bytes


@dataclass
class TorchMeasure:
    model: str
    flops: int
    flops_by_op: dict[str, int]
    saved_bytes: int
    saved: list[SavedRecord] = field(default_factory=list)
    excluded_param_bytes: int = 0  # saved storages that are parameters or buffers


def _storage_key(t: torch.Tensor) -> tuple[int, int]:
    st = t.untyped_storage()
    return (st.data_ptr(), st.nbytes())


def _conv_backward_flop(grad_out_shape: Any, x_shape: Any, w_shape: Any, _bias: Any, _stride: Any,
                        _padding: Any, _dilation: Any, transposed: bool, _output_padding: Any, _groups: int,
                        output_mask: Any, out_shape: Any, **kwargs: Any) -> int:
    """A convolution's backward FLOPs by definition, grouped ones included: the input and
    the weight gradient each take the forward's MACs (``numel(Y) * C_in/G * kernel``, or
    ``numel(X) * C_out/G * kernel`` when transposed).  torch's own formula leaves the
    groups out of the weight gradient (see :func:`grouped_conv_reference`)."""
    per = math.prod(w_shape[1:])  # C_in/G * kernel (C_out/G * kernel for a transposed one)
    forward_macs = math.prod(x_shape if transposed else grad_out_shape) * per
    return 2 * forward_macs * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _cpu_sdpa_flop(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> int:
    return int(sdpa_flop_count(query, key, value))


def _cpu_sdpa_backward_flop(grad_out: Any, query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> int:
    return int(sdpa_backward_flop_count(grad_out, query, key, value))


def flop_counter() -> FlopCounterMode:
    """torch's counter, with the convolution backward counted by definition and the CPU's
    fused attention counted with torch's own attention formulas (the counter registers
    them for the GPU kernels only, so a timm ViT's attention counted nothing)."""
    mapping: dict[Any, Any] = {torch.ops.aten.convolution_backward: _conv_backward_flop}
    forward = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    backward = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if forward is not None and backward is not None:
        mapping[forward] = _cpu_sdpa_flop
        mapping[backward] = _cpu_sdpa_backward_flop
    return FlopCounterMode(display=False, custom_mapping=mapping)


def _fused_dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
                   ) -> torch.Tensor:
    """Dropout as accelerators run it: ``native_dropout``, which saves a one-byte mask.

    On the CPU, ``F.dropout`` multiplies by a float mask of the input's type and autograd
    saves that (4 bytes an element in fp32); CUDA runs the fused ``native_dropout``.
    The training graph models the fused kernel (TG.T1), and so does the reference.
    """
    if not training or p == 0:
        return input
    return torch.native_dropout(input, p, True)[0]


@contextlib.contextmanager
def fused_dropout() -> Any:
    """Run ``F.dropout`` as :func:`_fused_dropout` inside the block."""
    plain = F.dropout
    F.dropout = _fused_dropout
    try:
        yield
    finally:
        F.dropout = plain


def measure_torch_case(case: TorchCase) -> TorchMeasure:
    """One training step of ``case``: FLOPs (whole step) and saved activation bytes."""
    with fused_dropout():
        return _measure_torch_case(case)


def _measure_torch_case(case: TorchCase) -> TorchMeasure:
    model = case.model
    model.zero_grad(set_to_none=True)
    persistent = {
        t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())
    }

    # Which module is running when autograd saves a tensor (for the breakdown).
    stack: list[str] = []
    names = {m: n or case.name for n, m in model.named_modules()}

    def enter(m: nn.Module, args: Any) -> None:
        stack.append(names[m])

    def leave(m: nn.Module, args: Any, out: Any) -> None:
        stack.pop()

    handles = [
        *(m.register_forward_pre_hook(enter) for m in names),
        *(m.register_forward_hook(leave) for m in names),
    ]

    packed: list[tuple[torch.Tensor, str]] = []
    unpacked_by: list[int] = []  # index into packed, filled while walking the graph

    def pack(t: torch.Tensor) -> int:
        packed.append((t, stack[-1] if stack else "loss"))
        return len(packed) - 1

    def unpack(i: int) -> torch.Tensor:
        unpacked_by.append(i)
        return packed[i][0]

    # Two passes from the same random state: FLOPs under the counter, saved tensors
    # without it.  The counter is a dispatch mode, under which PyTorch decomposes some
    # ops (dropout becomes a multiply by a float mask, which autograd then saves in
    # place of native_dropout's one-byte mask), so the saved set must be seen outside it.
    counter = flop_counter()
    rng = torch.get_rng_state()
    with counter:
        case.loss(model(case.inputs)).backward()
    model.zero_grad(set_to_none=True)
    torch.set_rng_state(rng)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            logits = model(case.inputs)
            loss = case.loss(logits)
        holders = _saved_holders(loss, unpacked_by)
        loss.backward()
    finally:
        for h in handles:
            h.remove()

    by_storage: dict[tuple[int, int], SavedRecord] = {}
    excluded: dict[int, int] = {}
    for i, (t, module) in enumerate(packed):
        key = _storage_key(t)
        if key[0] in persistent:
            excluded[key[0]] = key[1]
            continue
        rec = by_storage.get(key)
        if rec is None:
            rec = by_storage[key] = SavedRecord(
                module, [], tuple(t.shape), str(t.dtype).removeprefix("torch."), key[1]
            )
        for fn in holders.get(i, ()):
            if fn not in rec.grad_fns:
                rec.grad_fns.append(fn)
    flops_by_op: Counter[str] = Counter()
    for op, n in counter.get_flop_counts().get("Global", {}).items():
        flops_by_op[str(op)] += int(n)
    return TorchMeasure(
        model=case.name,
        flops=int(counter.get_total_flops()),
        flops_by_op=dict(flops_by_op),
        saved_bytes=sum(r.bytes for r in by_storage.values()),
        saved=list(by_storage.values()),
        excluded_param_bytes=sum(excluded.values()),
    )


def _saved_holders(loss: torch.Tensor, unpacked_by: list[int]) -> dict[int, list[str]]:
    """Map packed-tensor index -> names of the backward nodes that saved it.

    Walks the autograd graph and reads every ``_saved_*`` attribute of every node;
    reading one runs the unpack hook, which reports the index it was packed under.
    """
    holders: dict[int, list[str]] = defaultdict(list)
    seen: set[int] = set()
    todo = [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = type(node).__name__
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            del unpacked_by[:]
            try:
                getattr(node, attr)
            except Exception:  # noqa: BLE001, S112  (some saved fields cannot be read back)
                continue
            for i in unpacked_by:
                holders[i].append(f"{name}.{attr.removeprefix('_saved_')}")
        todo.extend(fn for fn, _ in node.next_functions)
    return dict(holders)


@functools.cache
def measure_torch(name: str) -> TorchMeasure:
    """Torch measurement of model ``name`` (cached: each model runs once per process)."""
    return measure_torch_case(make_torch_case(name))


# ========================================================= our measurements
@dataclass
class OurSaved:
    id: str
    layer: str
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    read_by: list[str]  # backward ops (op_type) that read it


@dataclass
class OurMeasure:
    model: str
    granularity: str
    flops: int
    saved_bytes: int
    saved: list[OurSaved] = field(default_factory=list)


def build_graph(name: str, granularity: str = "layer"):
    """Our zoo graph of model ``name`` at ``granularity``."""
    builder, kwargs = ZOO_CALLS[name]
    return getattr(zoo, builder)(**kwargs, granularity=granularity)


def measure_graph(graph, name: str = "", granularity: str = "") -> OurMeasure:
    saved = []
    for t in graph.saved_tensors():
        readers = [
            graph.op(c).op_type for c in dict.fromkeys(t.consumers) if graph.op(c).is_backward
        ]
        saved.append(OurSaved(t.id, t.layer, tuple(t.shape), str(t.dtype), t.bytes, readers))
    return OurMeasure(
        model=name or graph.name,
        granularity=granularity,
        flops=2 * sum(op.macs for op in graph.ops),
        saved_bytes=sum(t.bytes for t in saved),
        saved=saved,
    )


@functools.cache
def measure_ours(name: str, granularity: str = "layer") -> OurMeasure:
    return measure_graph(build_graph(name, granularity), name, granularity)


# ================================================================ comparison
def deviation(ours: int, ref: int) -> float:
    """Relative deviation of ``ours`` from ``ref`` (signed; +0.01 means 1 % above)."""
    return (ours - ref) / ref if ref else (0.0 if ours == 0 else math.inf)


def compare(name: str, granularity: str = "layer") -> dict[str, Any]:
    """One table row: our and torch's FLOPs and saved bytes, with deviations."""
    return _row(name, granularity, measure_ours(name, granularity), measure_torch(name), SAVED_TOL)


def _row(name: str, granularity: str, ours: OurMeasure, ref: TorchMeasure, saved_tol: float) -> dict[str, Any]:
    flop_dev = deviation(ours.flops, ref.flops)
    saved_dev = deviation(ours.saved_bytes, ref.saved_bytes)
    return {
        "model": name,
        "granularity": granularity,
        "our_flops": ours.flops,
        "torch_flops": ref.flops,
        "flops_dev_pct": 100 * flop_dev,
        "our_saved_bytes": ours.saved_bytes,
        "torch_saved_bytes": ref.saved_bytes,
        "saved_dev_pct": 100 * saved_dev,
        "flops_ok": abs(flop_dev) <= FLOP_TOL,
        "saved_ok": abs(saved_dev) <= saved_tol,
    }


def size_histogram_diff(name: str, granularity: str = "layer") -> list[dict[str, Any]]:
    """Saved tensors grouped by byte size, where torch and our counts differ.

    Layer names differ between the two sides, but tensor sizes do not: a size that
    torch saves k times and we save k' != k times points at the op that differs.
    """
    ref = measure_torch(name)
    ours = measure_ours(name, granularity)
    t_by: dict[int, list[SavedRecord]] = defaultdict(list)
    o_by: dict[int, list[OurSaved]] = defaultdict(list)
    for r in _merge_aux_outputs(ref.saved):
        t_by[r.bytes].append(r)
    for s in ours.saved:
        o_by[s.bytes].append(s)
    rows = []
    for size in sorted(set(t_by) | set(o_by), reverse=True):
        tl, ol = t_by.get(size, []), o_by.get(size, [])
        if len(tl) == len(ol):
            continue
        rows.append(
            {
                "bytes": size,
                "torch_count": len(tl),
                "our_count": len(ol),
                "delta_bytes": size * (len(ol) - len(tl)),
                "torch": sorted(
                    {f"{r.module}: {'/'.join(r.grad_fns) or '?'} {list(r.shape)}" for r in tl}
                ),
                "ours": sorted(
                    {f"{s.layer}: {s.id} {list(s.shape)} read by {','.join(s.read_by)}" for s in ol}
                ),
            }
        )
    return rows


def _merge_aux_outputs(records: list[SavedRecord]) -> list[SavedRecord]:
    """Merge the auxiliary outputs one torch op saves (``resultN``, N >= 1) into one record.

    BatchNorm saves its batch mean and inverse std (``result1``, ``result2``),
    LayerNorm its mean and rstd, as separate tensors; our importer keeps each op's
    backward-only outputs as one ``<op>.stats`` tensor of the same total size.
    """
    merged: list[SavedRecord] = []
    aux: dict[tuple[str, str], SavedRecord] = {}
    for r in records:
        nodes = {fn.split(".", 1)[0] for fn in r.grad_fns}
        slots = {fn.split(".", 1)[1] for fn in r.grad_fns}
        is_aux = len(nodes) == 1 and all(
            s.startswith("result") and s[6:].isdigit() and int(s[6:]) >= 1 for s in slots
        )
        if not is_aux:
            merged.append(r)
            continue
        key = (r.module, nodes.pop())
        if key not in aux:
            aux[key] = SavedRecord(r.module, [], (), r.dtype, 0)
            merged.append(aux[key])
        agg = aux[key]
        agg.grad_fns += r.grad_fns
        agg.shape += (r.shape,)  # type: ignore[operator]  (a tuple of the parts' shapes)
        agg.bytes += r.bytes
    return merged


def format_size_diff(rows: list[dict[str, Any]], limit: int = 12) -> str:
    lines = []
    for row in rows:
        lines.append(
            f"  {row['bytes']} B: torch x{row['torch_count']}, ours x{row['our_count']}"
            f" ({row['delta_bytes']:+d} B)"
        )
        for side in ("torch", "ours"):
            for item in row[side][:limit]:
                lines.append(f"      {side:5s} {item}")
            if len(row[side]) > limit:
                lines.append(f"      {side:5s} ... {len(row[side]) - limit} more")
    return "\n".join(lines) if lines else "  (same multiset of saved sizes)"


def format_table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'model':10s} {'gran':5s} {'our FLOPs':>14s} {'torch FLOPs':>14s} {'dev %':>8s}"
        f" {'our saved B':>12s} {'torch saved B':>13s} {'dev %':>8s}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['model']:10s} {r['granularity']:5s} {r['our_flops']:14d} {r['torch_flops']:14d}"
            f" {r['flops_dev_pct']:+8.4f} {r['our_saved_bytes']:12d} {r['torch_saved_bytes']:13d}"
            f" {r['saved_dev_pct']:+8.4f}"
            + ("" if r["flops_ok"] and r["saved_ok"] else "  <- off target")
        )
    return "\n".join(lines)


def _details(name: str, granularity: str) -> dict[str, Any]:
    ref = measure_torch(name)
    ours = measure_ours(name, granularity)
    return {
        "torch_flops_by_op": ref.flops_by_op,
        "torch_saved": [asdict(r) for r in ref.saved],
        "torch_excluded_param_bytes": ref.excluded_param_bytes,
        "our_saved": [asdict(s) for s in ours.saved],
        "size_diff": size_histogram_diff(name, granularity),
    }


# ================================================ third-party models, exported
#: Transformers models (random weights, small configs) and the exporters each goes
#: through: torch's TorchScript exporter fails inside torch on GPT-2 and Llama
#: (transformers' masks use ``aten::diff``, which it cannot export), so those go
#: through the dynamo exporter only.
THIRD_PARTY: dict[str, tuple[str, ...]] = {
    "gpt2-hf": ("dynamo",),
    "bert-hf": ("dynamo", "torchscript"),
    "llama-hf": ("dynamo",),
    "vit": ("dynamo", "torchscript"),
    "resnet50-tv": ("dynamo", "torchscript"),
    "mobilenet_v2-tv": ("dynamo", "torchscript"),
    "mobilenet_v3-tv": ("dynamo", "torchscript"),
    "efficientnet_b0-tv": ("dynamo", "torchscript"),
    "convnext_t-tv": ("dynamo", "torchscript"),
}
#: timm models (random weights, 10 classes, 64x64 images), both exporters.
TIMM_BUILDERS = {"vit_tiny-timm": "vit_tiny_patch16_224", "deit_tiny-timm": "deit_tiny_patch16_224"}
THIRD_PARTY.update({name: ("dynamo", "torchscript") for name in TIMM_BUILDERS})
#: torchvision models (random weights, 10 classes) at this image side and batch.
TV_IMAGE, TV_BATCH = 64, 2
TV_BUILDERS = {"resnet50-tv": "resnet50", "mobilenet_v2-tv": "mobilenet_v2",
               "mobilenet_v3-tv": "mobilenet_v3_small", "efficientnet_b0-tv": "efficientnet_b0",
               "convnext_t-tv": "convnext_tiny"}
#: The ViT: timm's ViT-Tiny layout (class token, learned position embedding, pre-norm
#: blocks, fused qkv) at a small size.  timm itself needs torchvision, which the CPU
#: build of torch here cannot load, so the module is written out below.
VIT_CFG = {"image": 32, "patch": 8, "dim": 64, "depth": 2, "heads": 4, "classes": 10, "batch": 2}


class ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        att = (q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, c))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    """timm's VisionTransformer layout: patch conv, class token, position embedding."""

    def __init__(self, image: int, patch: int, dim: int, depth: int, heads: int, classes: int) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(ViTBlock(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])
#: Targets of the real-models issue: forward+backward FLOPs within 2 %, saved bytes within 5 %.
THIRD_PARTY_SAVED_TOL = 0.05
HF_BATCH, HF_SEQ, HF_VOCAB = 2, 16, 256


class LogitsOf(nn.Module):
    """A transformers model called on token ids, returning the logits alone."""

    def __init__(self, model: nn.Module, decoder: bool) -> None:
        super().__init__()
        self.m = model
        self.decoder = decoder

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.decoder:
            return self.m(input_ids=ids, use_cache=False, return_dict=False)[0]
        return self.m(input_ids=ids, return_dict=False)[0]


def _image_case(name: str, net: nn.Module, seed: int, batch: int, side: int, classes: int) -> TorchCase:
    gen = torch.Generator().manual_seed(seed + 1)
    images = torch.randn(batch, 3, side, side, generator=gen)
    return TorchCase(name, net.float().train(), images, torch.randint(0, classes, (batch,), generator=gen))


def make_third_party_case(name: str, seed: int = 0) -> TorchCase:
    """A small third-party model (random weights) in training mode: transformers (eager
    attention), torchvision, timm, or the ViT above."""
    torch.manual_seed(seed)
    if name in TIMM_BUILDERS:
        import timm

        net = timm.create_model(TIMM_BUILDERS[name], pretrained=False, num_classes=10, img_size=TV_IMAGE)
        return _image_case(name, net, seed, TV_BATCH, TV_IMAGE, 10)
    if name in TV_BUILDERS:
        import torchvision

        net = getattr(torchvision.models, TV_BUILDERS[name])(num_classes=10)
        return _image_case(name, net, seed, TV_BATCH, TV_IMAGE, 10)
    if name == "vit":
        c = VIT_CFG
        vit = ViT(c["image"], c["patch"], c["dim"], c["depth"], c["heads"], c["classes"])
        return _image_case(name, vit, seed, c["batch"], c["image"], c["classes"])
    import transformers as hf

    small = {"vocab_size": HF_VOCAB, "attn_implementation": "eager"}
    if name == "gpt2-hf":
        model: nn.Module = hf.GPT2LMHeadModel(hf.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64,
                                                          bos_token_id=0, eos_token_id=0, **small))
    elif name == "bert-hf":
        model = hf.BertForMaskedLM(hf.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                 intermediate_size=128, max_position_embeddings=64, **small))
    elif name == "llama-hf":
        # Grouped-query attention (two key/value heads for four query heads), as Llama 3.
        model = hf.LlamaForCausalLM(hf.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                   num_key_value_heads=2, intermediate_size=128,
                                                   max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
                                                   **small))
    else:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(THIRD_PARTY)}")
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, HF_VOCAB, (HF_BATCH, HF_SEQ), generator=gen)
    labels = torch.randint(0, HF_VOCAB, (HF_BATCH, HF_SEQ), generator=gen)
    return TorchCase(name, LogitsOf(model, decoder=name != "bert-hf").float().train(), ids, labels)


def compare_exported(name: str, exporter: str, folder: Path, opset: int = 18) -> dict[str, Any]:
    """One row: ``name`` exported by ``exporter`` (at ``opset``) into ``folder``, imported,
    against torch."""
    from monet_ilp.graph import from_onnx
    from monet_ilp.graph.torch_export import export_for_training

    case = make_third_party_case(name)
    path = export_for_training(case.model, (case.inputs,), folder / f"{name}-{exporter}-{opset}.onnx",
                               exporter=exporter, opset=opset)
    ours = measure_graph(from_onnx(path), name, "layer")
    return _row(name, f"{exporter}/{opset}", ours, measure_torch_case(case), THIRD_PARTY_SAVED_TOL)


def grouped_conv_reference(folder: Path, groups: int = 8) -> dict[str, int]:
    """Grouped convolutions: our FLOPs, torch's counter, and a count by definition.

    A depthwise convolution (``groups`` = channels) then a pointwise one, the input
    needing no gradient.  By definition the weight gradient of a convolution,
    ``dW[k, c, i, j] = sum over n, oy, ox of dY[n, k, oy, ox] X[n, group(k) + c, ...]``,
    takes ``numel(dW) * N * OY * OX = numel(Y) * C_in/G * kernel`` MACs: its forward
    MACs, for any ``G``; so does the input gradient.  The reference is then
    ``2 * (fwd_1 + fwd_2 + dW_1 + dX_2 + dW_2)``.  torch's ``FlopCounterMode`` agrees on
    the forward; for the backward it counts the depthwise weight gradient without
    dividing by the groups (``G`` times too much), which is why MobileNet and
    EfficientNet looked 84-92 % off against it.
    """
    from monet_ilp.graph import from_onnx
    from monet_ilp.graph.torch_export import export_for_training

    channels, batch, side = groups, 2, 6
    model = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, groups=groups, bias=False),
                          nn.Conv2d(channels, 4, 1, bias=False), nn.Flatten(), nn.Linear(4 * side * side, 3))
    x = torch.randn(batch, channels, side, side)
    depthwise = batch * channels * side * side * (channels // groups) * 9
    pointwise = batch * 4 * side * side * channels
    linear = batch * 4 * side * side * 3
    reference = 2 * (depthwise + pointwise + linear) + 2 * (depthwise + 2 * pointwise + 2 * linear)
    with FlopCounterMode(display=False) as forward:
        model(x)
    with FlopCounterMode(display=False) as step:  # torch's own formula, as shipped
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    with flop_counter() as corrected:
        model(x).sum().backward()
    graph = from_onnx(export_for_training(model, (x,), folder / "grouped.onnx", exporter="torchscript"), loss="mse")
    return {"ours": 2 * sum(op.macs for op in graph.ops),
            "ours_forward": 2 * sum(op.macs for op in graph.ops if op.kind.value == "forward"),
            "reference": reference, "torch_forward": int(forward.get_total_flops()),
            "torch": int(step.get_total_flops()), "corrected": int(corrected.get_total_flops())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="fidelity.json", help="JSON output path")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument(
        "--granularity", nargs="+", default=list(GRANULARITIES), choices=GRANULARITIES
    )
    parser.add_argument(
        "--details", action="store_true", help="print and save per-tensor breakdowns"
    )
    parser.add_argument("--third-party", action="store_true",
                        help="also export transformers' GPT-2, BERT and a Llama decoder and import them")
    args = parser.parse_args(argv)

    rows, details = [], {}
    if args.third_party:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            grouped = grouped_conv_reference(Path(folder))
            print(f"grouped convolution (depthwise 8 groups, then pointwise and linear): ours {grouped['ours']}, "
                  f"by definition {grouped['reference']}, torch's counter {grouped['torch']} "
                  f"(forward: ours {grouped['ours_forward']}, torch {grouped['torch_forward']})")
            for name, exporters in THIRD_PARTY.items():
                for exporter in exporters:
                    for opset in (17, 18):
                        rows.append(compare_exported(name, exporter, Path(folder), opset))
    for name in args.models:
        for gran in args.granularity:
            row = compare(name, gran)
            rows.append(row)
            if args.details or not (row["flops_ok"] and row["saved_ok"]):
                details[f"{name}/{gran}"] = _details(name, gran)
    print(format_table(rows))
    print(f"targets: FLOPs within {100 * FLOP_TOL:.0f} %, saved bytes within {100 * SAVED_TOL:.0f} % "
          f"(exported third-party models: {100 * THIRD_PARTY_SAVED_TOL:.0f} %; the column 'gran' "
          "names their exporter)")
    for key, d in details.items():
        print(f"\n{key}: saved sizes that differ (torch vs ours)")
        print(format_size_diff(d["size_diff"]))
    out = {
        "targets": {"flops_rel": FLOP_TOL, "saved_rel": SAVED_TOL},
        "torch_version": torch.__version__,
        "rows": rows,
    }
    if details:
        out["details"] = details
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0 if all(r["flops_ok"] and r["saved_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
