"""The model zoo: builders that write each model of ``notes/arch_spec.md`` as an ONNX
``ModelProto`` and pass it through the ONNX importer (:func:`.onnx_import.from_onnx`),
the zoo's only road to a :class:`~monet_ilp.graph.ir.TrainingGraph`.

Only shapes matter: weights are zeros (or seeded random values), trainable parameters
are initializers, every other constant is a ``Constant`` node, and node names
(``layer1.0.conv1``, ``h.3.attn.c_attn``) become the importer's layer ids.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from monet_ilp.errors import MonetError, UnknownModelError
from monet_ilp.graph.onnx_import import from_onnx

if TYPE_CHECKING:
    from monet_ilp.graph.ir import TrainingGraph

__all__ = [
    "BERT_PRESETS",
    "GPT2_PRESETS",
    "IMPORT_OPTIONS",
    "LLAMA_PRESETS",
    "MODELS",
    "OPSET",
    "VIT_PRESETS",
    "bert",
    "bert_onnx",
    "build",
    "gpt2",
    "gpt2_onnx",
    "llama",
    "llama_onnx",
    "mlp",
    "mlp_onnx",
    "mobilenet_v2",
    "mobilenet_v2_onnx",
    "onnx_model",
    "parse_params",
    "resnet18",
    "resnet18_onnx",
    "resnet50",
    "resnet50_onnx",
    "split_params",
    "vgg16",
    "vgg16_onnx",
    "vit",
    "vit_onnx",
]

#: ONNX opset of every zoo model (LayerNormalization exists, Gelu does not).
OPSET = 17
#: IR version written into the models: the one that introduced opset 17.
IR_VERSION = 8

#: Options of :func:`from_onnx` that :func:`build` and the graph builders forward.
#: (``batch``, ``input_shapes`` and ``output`` are left out: zoo models are static
#: and have one output; ``batch`` is a model parameter.)  The graph builders also
#: take ``name``, the graph's name (default: the ONNX graph's name).
IMPORT_OPTIONS = ("optimizer", "granularity", "dtype", "loss", "allow_unknown")

#: GPT-2 presets of the spec; ``gpt2_onnx()`` without a preset uses ``"tiny"``'s values.
GPT2_PRESETS: Mapping[str, Mapping[str, int]] = {
    "tiny": {"n_layer": 2, "d_model": 128, "n_head": 4, "seq": 64, "vocab": 512, "batch": 4},
    "small": {"n_layer": 12, "d_model": 768, "n_head": 12, "seq": 1024, "vocab": 50257, "batch": 1},
    "medium": {"n_layer": 24, "d_model": 1024, "n_head": 16, "seq": 1024, "vocab": 50257, "batch": 1},
}

_FLOAT = TensorProto.FLOAT
_INT64 = TensorProto.INT64


# ====================================================================== builder
class _Onnx:
    """Writes one model straight into a ``ModelProto`` (no copies of big weights)."""

    def __init__(self, name: str, seed: int | None):
        self.model = onnx.ModelProto()
        self.model.ir_version = IR_VERSION
        self.model.producer_name = "monet_ilp.zoo"
        opset = self.model.opset_import.add()
        opset.domain = ""
        opset.version = OPSET
        self.graph = self.model.graph
        self.graph.name = name
        self._rng = np.random.default_rng(seed) if seed is not None else None
        self._zeros: dict[int, bytes] = {}  # one zero buffer per byte size, shared
        self._nodes: set[str] = set()
        self._tensors: set[str] = set()
        #: Write no weight data (see :meth:`param`).
        self.shapes_only = False

    # ------------------------------------------------------------- tensors
    def _new_tensor(self, name: str) -> str:
        if name in self._tensors:  # a bug in a builder, never a user error
            raise AssertionError(f"zoo: tensor {name!r} defined twice")
        self._tensors.add(name)
        return name

    def input(self, name: str, shape: Sequence[int], elem: int = _FLOAT) -> str:
        self.graph.input.append(
            helper.make_tensor_value_info(self._new_tensor(name), elem, list(shape))
        )
        return name

    def output(self, name: str, shape: Sequence[int], elem: int = _FLOAT) -> None:
        self.graph.output.append(helper.make_tensor_value_info(name, elem, list(shape)))

    def param(self, name: str, shape: Sequence[int], fill: str = "weight") -> str:
        """A float32 initializer: ``fill`` is ``"weight"``, ``"zeros"`` or ``"ones"``.

        With :attr:`shapes_only` (set for models too large to hold their weights in
        memory) the initializer has its dims and type and points at an external data
        file that is never written: the training graph needs only shapes, and the
        importer never reads a weight's data.
        """
        shape = [int(d) for d in shape]
        n = math.prod(shape)
        if self.shapes_only:
            t = self.graph.initializer.add()
            t.name = self._new_tensor(name)
            t.data_type = _FLOAT
            t.dims.extend(shape)
            t.data_location = TensorProto.EXTERNAL
            for key, value in (("location", f"{self.graph.name}.weights-not-written"), ("offset", "0"),
                               ("length", str(4 * n))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            return name
        if fill == "ones":
            data = np.ones(n, dtype="<f4").tobytes()
        elif fill == "weight" and self._rng is not None:
            data = (
                (self._rng.standard_normal(n, dtype=np.float32) * np.float32(0.02))
                .astype("<f4")
                .tobytes()
            )
        else:
            zeros = self._zeros.get(4 * n)
            if zeros is None:
                zeros = self._zeros[4 * n] = bytes(4 * n)  # shared by same-size tensors
            data = zeros
        t = self.graph.initializer.add()
        t.name = self._new_tensor(name)
        t.data_type = _FLOAT
        t.dims.extend(shape)
        t.raw_data = data
        return name

    def const(self, name: str, value: Any, dtype: Any = np.float32) -> str:
        """A ``Constant`` node named ``name`` whose output tensor is also ``name``."""
        array = np.asarray(value, dtype=dtype)
        self.node("Constant", [], name, value=numpy_helper.from_array(array, name))
        return name

    # --------------------------------------------------------------- nodes
    def node(
        self,
        op: str,
        inputs: Sequence[str],
        name: str,
        output: str | None = None,
        **attrs: Any,
    ) -> str:
        """Add a node; its output is named after it unless ``output`` says otherwise."""
        return self.node_outputs(op, inputs, name, [name if output is None else output], **attrs)[0]

    def node_outputs(
        self, op: str, inputs: Sequence[str], name: str, outputs: Sequence[str], **attrs: Any
    ) -> list[str]:
        """Add a node with several outputs."""
        if name in self._nodes:
            raise AssertionError(f"zoo: node {name!r} defined twice")
        self._nodes.add(name)
        outs = [self._new_tensor(o) for o in outputs]
        self.graph.node.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs

    # ------------------------------------------------------ common layers
    def conv(
        self,
        x: str,
        name: str,
        cin: int,
        cout: int,
        k: int,
        stride: int = 1,
        pad: int = 0,
        group: int = 1,
        bias: bool = False,
    ) -> str:
        w = self.param(f"{name}.weight", (cout, cin // group, k, k))
        inputs = [x, w] + ([self.param(f"{name}.bias", (cout,), "zeros")] if bias else [])
        attrs: dict[str, Any] = {
            "kernel_shape": [k, k],
            "strides": [stride, stride],
            "pads": [pad] * 4,
        }
        if group != 1:
            attrs["group"] = group
        return self.node("Conv", inputs, name, **attrs)

    def bn(self, x: str, name: str, c: int) -> str:
        inputs = [
            x,
            self.param(f"{name}.weight", (c,), "ones"),
            self.param(f"{name}.bias", (c,), "zeros"),
            self.param(f"{name}.running_mean", (c,), "zeros"),
            self.param(f"{name}.running_var", (c,), "ones"),
        ]
        return self.node("BatchNormalization", inputs, name, epsilon=1e-5)

    def gemm(self, x: str, name: str, cin: int, cout: int, output: str | None = None) -> str:
        w = self.param(f"{name}.weight", (cout, cin))
        b = self.param(f"{name}.bias", (cout,), "zeros")
        return self.node("Gemm", [x, w, b], name, output, transB=1)

    def linear(self, x: str, name: str, cin: int, cout: int, output: str) -> str:
        """GPT-2 style ``x @ W + b`` with ``W`` of shape (in, out): MatMul then Add."""
        y = self.node("MatMul", [x, self.param(f"{name}.weight", (cin, cout))], name)
        return self.node(
            "Add", [y, self.param(f"{name}.bias", (cout,), "zeros")], f"{name}.bias_add", output
        )

    def layernorm(self, x: str, name: str, d: int) -> str:
        scale = self.param(f"{name}.weight", (d,), "ones")
        bias = self.param(f"{name}.bias", (d,), "zeros")
        return self.node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=1e-5)

    def dropout(self, x: str, name: str, ratio: str) -> str:
        """Dropout in training mode: the training step drops, and saves its one-byte mask."""
        training = self.const(f"{name}.training_mode", True, np.bool_)
        return self.node("Dropout", [x, ratio, training], name)


# =================================================================== validation
def _int(value: Any, field: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        if minimum == 2:  # classes, vocab: a bias of one element would not even be trained
            what += " (cross-entropy needs two classes)"
        raise MonetError(
            f"{field.split('.')[-1]}={value!r} is not {what}", field=field, fix=f"pass {what}"
        )
    return int(value)


def _float(value: Any, field: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise MonetError(
            f"{field.split('.')[-1]}={value!r} is not a positive number",
            field=field,
            fix="pass a positive number",
        )
    return float(value)


def _seed(value: Any, field: str) -> int | None:
    return None if value is None else _int(value, field, minimum=0)


# =================================================================== the models
def _configured(model: str, presets: Mapping[str, Mapping[str, int]], preset: str | None,
                given: Mapping[str, Any]) -> dict[str, Any]:
    """The preset's values (``"tiny"``'s without one), overridden by the arguments given."""
    if preset is not None and preset not in presets:
        raise MonetError(f"unknown preset {preset!r}", field=f"{model}.preset",
                         fix=f"use one of: {', '.join(presets)} (or none)")
    cfg: dict[str, Any] = dict(presets[preset or "tiny"])
    cfg.update({k: v for k, v in given.items() if v is not None})
    return cfg


def mlp_onnx(
    depth: int = 4,
    width: int = 256,
    batch: int = 64,
    in_features: int = 784,
    classes: int = 10,
    *,
    seed: int | None = None,
) -> onnx.ModelProto:
    """A multi-layer perceptron with ReLU activations, as ONNX.

    Parameters
    ----------
    depth
        Number of hidden ``Gemm -> Relu`` layers (0 gives a linear classifier).
    width
        Width of every hidden layer.
    batch, in_features, classes
        Input is ``(batch, in_features)``, output logits ``(batch, classes)``
        (``classes`` at least 2; every other size positive).
    seed
        ``None`` for zero weights, else the seed of small random weights.

    Returns
    -------
    onnx.ModelProto
        Input ``input``, output ``logits``; nodes ``fc1``, ``relu1``, ..., ``head``.
    """
    depth = _int(depth, "mlp.depth", minimum=0)
    width, batch = _int(width, "mlp.width"), _int(batch, "mlp.batch")
    in_features, classes = (
        _int(in_features, "mlp.in_features"),
        _int(classes, "mlp.classes", minimum=2),
    )
    b = _Onnx("mlp", _seed(seed, "mlp.seed"))
    x = b.input("input", (batch, in_features))
    prev = in_features
    for i in range(1, depth + 1):
        x = b.gemm(x, f"fc{i}", prev, width)
        x = b.node("Relu", [x], f"relu{i}")
        prev = width
    b.gemm(x, "head", prev, classes, output="logits")
    b.output("logits", (batch, classes))
    return b.model


def resnet18_onnx(
    variant: str = "cifar", batch: int = 32, classes: int | None = None, *, seed: int | None = None
) -> onnx.ModelProto:
    """ResNet-18 (BasicBlocks, 2-2-2-2), as ONNX.

    Parameters
    ----------
    variant
        ``"cifar"``: input ``(batch, 3, 32, 32)``, 3x3 stem, no max-pool.
        ``"imagenet"``: input ``(batch, 3, 224, 224)``, 7x7/s2 stem and 3x3/s2 max-pool.
    batch
        Batch size.
    classes
        Number of classes (at least 2); ``None`` means 10 (cifar) or 1000 (imagenet).
    seed
        ``None`` for zero weights, else the seed of small random weights.

    Returns
    -------
    onnx.ModelProto
        Input ``input``, output ``logits`` ``(batch, classes)``; nodes named like
        torchvision's modules (``conv1``, ``layer2.0.downsample.0``, ``fc``).
    """
    if variant not in ("cifar", "imagenet"):
        raise MonetError(
            f"unknown variant {variant!r}",
            field="resnet18.variant",
            fix="use variant=cifar or variant=imagenet",
        )
    batch = _int(batch, "resnet18.batch")
    classes = _int(
        10 if classes is None and variant == "cifar" else 1000 if classes is None else classes,
        "resnet18.classes",
        minimum=2,
    )
    b = _Onnx(f"resnet18_{variant}", _seed(seed, "resnet18.seed"))
    image = 32 if variant == "cifar" else 224
    x = b.input("input", (batch, 3, image, image))
    if variant == "cifar":
        x = b.conv(x, "conv1", 3, 64, 3, 1, 1)
    else:
        x = b.conv(x, "conv1", 3, 64, 7, 2, 3)
    x = b.bn(x, "bn1", 64)
    x = b.node("Relu", [x], "relu")
    if variant == "imagenet":
        x = b.node(
            "MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
        )
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            p = f"layer{stage}.{block}"
            y = b.conv(x, f"{p}.conv1", cin, cout, 3, stride, 1)
            y = b.bn(y, f"{p}.bn1", cout)
            y = b.node("Relu", [y], f"{p}.relu1")
            y = b.conv(y, f"{p}.conv2", cout, cout, 3, 1, 1)
            y = b.bn(y, f"{p}.bn2", cout)
            skip = x
            if stride != 1 or cin != cout:
                skip = b.conv(x, f"{p}.downsample.0", cin, cout, 1, stride, 0)
                skip = b.bn(skip, f"{p}.downsample.1", cout)
            y = b.node("Add", [y, skip], f"{p}.add")
            x = b.node("Relu", [y], f"{p}.relu2")
            cin = cout
    x = b.node("GlobalAveragePool", [x], "avgpool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    b.gemm(x, "fc", 512, classes, output="logits")
    b.output("logits", (batch, classes))
    return b.model


#: ResNet-50 stages: (bottleneck width, blocks); each block outputs ``4 * width`` channels.
RESNET50_STAGES = ((64, 3), (128, 4), (256, 6), (512, 3))
#: Output channels of a Bottleneck block over its width (torchvision's ``expansion``).
BOTTLENECK_EXPANSION = 4


def resnet50_onnx(
    batch: int = 8, image: int = 224, classes: int = 1000, *, seed: int | None = None
) -> onnx.ModelProto:
    """ResNet-50 as torchvision builds it (Bottleneck blocks 3-4-6-3, "v1.5"), as ONNX.

    The stem is a 7x7/s2 conv, BN, ReLU and a 3x3/s2 max-pool.  Each Bottleneck block
    is ``conv1`` 1x1 -> ``bn1`` -> ReLU -> ``conv2`` 3x3 (with the block's stride, as in
    torchvision's v1.5) -> ``bn2`` -> ReLU -> ``conv3`` 1x1 to ``4 * width`` channels ->
    ``bn3``, plus the skip (``downsample.0`` 1x1 conv with the stride and
    ``downsample.1`` BN on the first block of each stage), then Add and ReLU.  Stages
    have widths 64, 128, 256, 512 and strides 1, 2, 2, 2; a global average pool and one
    fully connected layer end the network.  Convs have no bias; every conv is followed
    by a BatchNorm.

    Parameters
    ----------
    batch
        Batch size.
    image
        Input side (224 for ImageNet).  Every conv and pool is padded and the pool at
        the end is global, so any positive side gives valid shapes.
    classes
        Number of classes (at least 2).
    seed
        ``None`` for zero weights, else the seed of small random weights.

    Returns
    -------
    onnx.ModelProto
        Input ``input`` ``(batch, 3, image, image)``, output ``logits``
        ``(batch, classes)``; nodes named like torchvision's modules (``conv1``,
        ``layer3.0.conv2``, ``layer3.0.downsample.0``, ``fc``).  25,557,032 trainable
        parameters at 1000 classes, as torchvision publishes.
    """
    batch, image = _int(batch, "resnet50.batch"), _int(image, "resnet50.image")
    classes = _int(classes, "resnet50.classes", minimum=2)
    b = _Onnx("resnet50", _seed(seed, "resnet50.seed"))
    x = b.input("input", (batch, 3, image, image))
    x = b.node("Relu", [b.bn(b.conv(x, "conv1", 3, 64, 7, 2, 3), "bn1", 64)], "relu")
    x = b.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (width, blocks) in enumerate(RESNET50_STAGES, start=1):
        cout = width * BOTTLENECK_EXPANSION
        for block in range(blocks):
            stride = 2 if stage > 1 and block == 0 else 1
            p = f"layer{stage}.{block}"
            y = b.bn(b.conv(x, f"{p}.conv1", cin, width, 1), f"{p}.bn1", width)
            y = b.node("Relu", [y], f"{p}.relu1")
            y = b.bn(b.conv(y, f"{p}.conv2", width, width, 3, stride, 1), f"{p}.bn2", width)
            y = b.node("Relu", [y], f"{p}.relu2")
            y = b.bn(b.conv(y, f"{p}.conv3", width, cout, 1), f"{p}.bn3", cout)
            skip = x
            if block == 0:  # stride 2, or 64 -> 256 channels in layer1
                skip = b.conv(x, f"{p}.downsample.0", cin, cout, 1, stride, 0)
                skip = b.bn(skip, f"{p}.downsample.1", cout)
            y = b.node("Add", [y, skip], f"{p}.add")
            x = b.node("Relu", [y], f"{p}.relu3")
            cin = cout
    x = b.node("GlobalAveragePool", [x], "avgpool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    b.gemm(x, "fc", cin, classes, output="logits")
    b.output("logits", (batch, classes))
    return b.model


#: VGG-16 configuration D: output channels of the 3x3 convs, "M" for 2x2/s2 max-pools.
VGG16_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def vgg16_onnx(
    batch: int = 8, image: int = 224, classes: int = 1000, *, seed: int | None = None
) -> onnx.ModelProto:
    """VGG-16 (configuration D, no batch norm), as ONNX.

    Parameters
    ----------
    batch
        Batch size.
    image
        Input side; at least 32.  The five max-pools leave ``image // 32`` pixels a
        side, so the first FC layer has ``512 * (image // 32) ** 2`` inputs (25088
        at 224; there is no adaptive pool).
    classes
        Number of classes (at least 2).
    seed
        ``None`` for zero weights, else the seed of small random weights.

    Returns
    -------
    onnx.ModelProto
        Input ``input`` ``(batch, 3, image, image)``, output ``logits``; nodes
        ``conv1_1`` ... ``conv5_3``, ``pool1`` ... ``pool5``, ``fc6``, ``fc7``, ``fc8``.
    """
    batch, classes = _int(batch, "vgg16.batch"), _int(classes, "vgg16.classes", minimum=2)
    image = _int(image, "vgg16.image")
    if image < 32:
        raise MonetError(
            f"image={image} is smaller than 32: the five max-pools leave nothing",
            field="vgg16.image",
            fix="use image >= 32 (224 for the ImageNet model)",
        )
    b = _Onnx("vgg16", _seed(seed, "vgg16.seed"))
    x = b.input("input", (batch, 3, image, image))
    cin, block, idx, side = 3, 1, 1, image
    for item in VGG16_CFG:
        if isinstance(item, str):  # "M": a max-pool
            x = b.node("MaxPool", [x], f"pool{block}", kernel_shape=[2, 2], strides=[2, 2])
            block, idx, side = block + 1, 1, side // 2
            continue
        x = b.conv(x, f"conv{block}_{idx}", cin, item, 3, 1, 1, bias=True)
        x = b.node("Relu", [x], f"relu{block}_{idx}")
        cin, idx = item, idx + 1
    x = b.node("Flatten", [x], "flatten", axis=1)
    ratio = b.const("dropout_ratio", 0.5)
    x = b.gemm(x, "fc6", 512 * side * side, 4096)
    x = b.dropout(b.node("Relu", [x], "relu6"), "drop6", ratio)
    x = b.gemm(x, "fc7", 4096, 4096)
    x = b.dropout(b.node("Relu", [x], "relu7"), "drop7", ratio)
    b.gemm(x, "fc8", 4096, classes, output="logits")
    b.output("logits", (batch, classes))
    return b.model


#: MobileNetV2 inverted-residual settings (expansion t, channels c, repeats n, stride s).
MOBILENET_V2_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's channel rounding: nearest multiple of ``divisor``, never below 90 %."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def mobilenet_v2_onnx(
    batch: int = 8,
    image: int = 224,
    classes: int = 1000,
    width_mult: float = 1.0,
    *,
    seed: int | None = None,
) -> onnx.ModelProto:
    """MobileNetV2 as in torchvision (ReLU6 = ``Clip(0, 6)``), as ONNX.

    Parameters
    ----------
    batch
        Batch size.
    image
        Input side.
    classes
        Number of classes (at least 2).
    width_mult
        Channel multiplier; channels are rounded to multiples of 8 as torchvision does,
        and the last conv has ``1280 * max(1, width_mult)`` channels (rounded).
    seed
        ``None`` for zero weights, else the seed of small random weights.

    Returns
    -------
    onnx.ModelProto
        Input ``input`` ``(batch, 3, image, image)``, output ``logits``; nodes
        ``features.0.conv``, ``features.{i}.expand|dw|project.*``, ``features.18.*``,
        ``classifier.fc``.
    """
    batch, image = _int(batch, "mobilenet_v2.batch"), _int(image, "mobilenet_v2.image")
    classes = _int(classes, "mobilenet_v2.classes", minimum=2)
    width_mult = _float(width_mult, "mobilenet_v2.width_mult")
    b = _Onnx("mobilenet_v2", _seed(seed, "mobilenet_v2.seed"))
    lo, hi = b.const("relu6_min", 0.0), b.const("relu6_max", 6.0)

    def relu6(x: str, name: str) -> str:
        return b.node("Clip", [x, lo, hi], name)

    def conv_bn_relu6(
        x: str, p: str, cin: int, cout: int, k: int, stride: int, group: int = 1
    ) -> str:
        x = b.conv(x, f"{p}.conv", cin, cout, k, stride, (k - 1) // 2, group)
        return relu6(b.bn(x, f"{p}.bn", cout), f"{p}.relu6")

    x = b.input("input", (batch, 3, image, image))
    cin = _make_divisible(32 * width_mult)
    last = _make_divisible(1280 * max(1.0, width_mult))
    x = conv_bn_relu6(x, "features.0", 3, cin, 3, 2)
    index = 1
    for t, c, n, s in MOBILENET_V2_SETTINGS:
        cout = _make_divisible(c * width_mult)
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"features.{index}"
            hidden = round(cin * t)
            y = x
            if t != 1:
                y = conv_bn_relu6(y, f"{p}.expand", cin, hidden, 1, 1)
            y = conv_bn_relu6(y, f"{p}.dw", hidden, hidden, 3, stride, group=hidden)
            y = b.bn(b.conv(y, f"{p}.project.conv", hidden, cout, 1), f"{p}.project.bn", cout)
            if stride == 1 and cin == cout:
                y = b.node("Add", [x, y], f"{p}.add")
            x, cin, index = y, cout, index + 1
    x = conv_bn_relu6(x, f"features.{index}", cin, last, 1, 1)
    x = b.node("GlobalAveragePool", [x], "avgpool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    x = b.dropout(x, "classifier.dropout", b.const("dropout_ratio", 0.2))
    b.gemm(x, "classifier.fc", last, classes, output="logits")
    b.output("logits", (batch, classes))
    return b.model


def gpt2_onnx(
    n_layer: int | None = None,
    d_model: int | None = None,
    n_head: int | None = None,
    seq: int | None = None,
    vocab: int | None = None,
    batch: int | None = None,
    preset: str | None = None,
    *,
    seed: int | None = None,
) -> onnx.ModelProto:
    """A GPT-2 style decoder (pre-norm blocks, untied LM head), as ONNX.

    Parameters
    ----------
    n_layer, d_model, n_head, seq, vocab, batch
        Blocks, model width, attention heads (must divide ``d_model``), sequence
        length, vocabulary size (at least 2) and batch size.  Each left at ``None`` takes the
        preset's value; without a preset the defaults are ``2, 128, 4, 64, 512, 4``
        (the ``"tiny"`` preset).
    preset
        ``"tiny"``, ``"small"`` (GPT-2 small: 12 layers, 768 wide, 12 heads, 1024
        tokens, 50257 words, batch 1) or ``"medium"`` (24 layers, 1024 wide, 16 heads;
        406 M parameters with the untied head, so written as shapes only); explicit
        arguments override it.
    seed
        ``None`` for zero weights, else the seed of small random weights.

    Returns
    -------
    onnx.ModelProto
        Input ``input_ids`` ``(batch, seq)`` int64, output ``logits``
        ``(batch, seq, vocab)``; nodes named like Hugging Face's modules (``wte``,
        ``h.3.attn.c_attn``, ``h.3.mlp.c_fc``, ``ln_f``, ``lm_head``).
    """
    cfg = _configured("gpt2", GPT2_PRESETS, preset, {"n_layer": n_layer, "d_model": d_model, "n_head": n_head,
                                                     "seq": seq, "vocab": vocab, "batch": batch})
    L, d, H, T, B = (
        _int(cfg[k], f"gpt2.{k}") for k in ("n_layer", "d_model", "n_head", "seq", "batch")
    )
    V = _int(cfg["vocab"], "gpt2.vocab", minimum=2)
    if d % H:
        raise MonetError(
            f"n_head={H} does not divide d_model={d}",
            field="gpt2.n_head",
            fix="choose n_head dividing d_model",
        )
    dh = d // H
    b = _Onnx(f"gpt2_{preset}" if preset else "gpt2", _seed(seed, "gpt2.seed"))
    b.shapes_only = V * d + T * d + L * 12 * d * d + d * V > SHAPES_ONLY_PARAMS

    ids = b.input("input_ids", (B, T), _INT64)
    pos_ids = b.const("pos_ids", np.arange(T), np.int64)
    mask = b.const(
        "attn_mask", np.triu(np.full((T, T), -1e4, dtype=np.float32), k=1).reshape(1, 1, T, T)
    )
    heads_shape = b.const("heads_shape", [B, T, H, dh], np.int64)
    merge_shape = b.const("merge_shape", [B, T, d], np.int64)
    qkv_split = b.const("qkv_split", [d, d, d], np.int64)
    scale = b.const("attn_scale", math.sqrt(dh))
    sqrt2, one, half = (
        b.const("gelu_sqrt2", math.sqrt(2.0)),
        b.const("gelu_one", 1.0),
        b.const("gelu_half", 0.5),
    )

    tok = b.node("Gather", [b.param("wte.weight", (V, d)), ids], "wte", axis=0)
    pos = b.node("Gather", [b.param("wpe.weight", (T, d)), pos_ids], "wpe", axis=0)
    h = b.node("Add", [tok, pos], "embed")
    for i in range(L):
        p = f"h.{i}"
        a = b.layernorm(h, f"{p}.ln_1", d)
        qkv = b.linear(a, f"{p}.attn.c_attn", d, 3 * d, output=f"{p}.attn.qkv")
        q, k, v = b.node_outputs(
            "Split",
            [qkv, qkv_split],
            f"{p}.attn.split",
            [f"{p}.attn.q", f"{p}.attn.k", f"{p}.attn.v"],
            axis=-1,
        )
        heads = {}
        for name, t, perm in (
            ("q", q, [0, 2, 1, 3]),
            ("k", k, [0, 2, 3, 1]),
            ("v", v, [0, 2, 1, 3]),
        ):
            r = b.node("Reshape", [t, heads_shape], f"{p}.attn.{name}_reshape")
            heads[name] = b.node("Transpose", [r], f"{p}.attn.{name}_transpose", perm=perm)
        s = b.node("MatMul", [heads["q"], heads["k"]], f"{p}.attn.scores")
        s = b.node("Div", [s, scale], f"{p}.attn.scale")
        s = b.node("Add", [s, mask], f"{p}.attn.mask")
        pr = b.node("Softmax", [s], f"{p}.attn.softmax", axis=-1)
        o = b.node("MatMul", [pr, heads["v"]], f"{p}.attn.context")
        o = b.node("Transpose", [o], f"{p}.attn.merge_transpose", perm=[0, 2, 1, 3])
        o = b.node("Reshape", [o, merge_shape], f"{p}.attn.merge_reshape")
        o = b.linear(o, f"{p}.attn.c_proj", d, d, output=f"{p}.attn.out")
        h = b.node("Add", [h, o], f"{p}.residual_1")
        m = b.layernorm(h, f"{p}.ln_2", d)
        f = b.linear(m, f"{p}.mlp.c_fc", d, 4 * d, output=f"{p}.mlp.fc")
        g = b.node("Div", [f, sqrt2], f"{p}.mlp.gelu.div")
        g = b.node("Erf", [g], f"{p}.mlp.gelu.erf")
        g = b.node("Add", [g, one], f"{p}.mlp.gelu.add_one")
        g = b.node("Mul", [f, g], f"{p}.mlp.gelu.mul_x")
        g = b.node("Mul", [g, half], f"{p}.mlp.gelu.mul_half", f"{p}.mlp.gelu")
        f = b.linear(g, f"{p}.mlp.c_proj", 4 * d, d, output=f"{p}.mlp.out")
        h = b.node("Add", [h, f], f"{p}.residual_2")
    h = b.layernorm(h, "ln_f", d)
    b.node("MatMul", [h, b.param("lm_head.weight", (d, V))], "lm_head", "logits")
    b.output("logits", (B, T, V))
    return b.model


#: Llama-style presets: ``"tiny"`` for tests, ``"1b"`` with TinyLlama-1.1B's shape (22
#: layers, 2048 wide, 32 heads, 5632 MLP, 32000 words) but full multi-head attention, so
#: 1.26 B parameters, at 2048 tokens.
LLAMA_PRESETS: Mapping[str, Mapping[str, int]] = {
    "tiny": {"n_layer": 2, "d_model": 128, "n_head": 4, "d_ff": 344, "seq": 64, "vocab": 512, "batch": 4},
    "1b": {"n_layer": 22, "d_model": 2048, "n_head": 32, "d_ff": 5632, "seq": 2048, "vocab": 32000, "batch": 1},
}
#: Above this many parameters the zoo writes shapes only (:meth:`_Onnx.param`).
SHAPES_ONLY_PARAMS = 200_000_000


def llama_onnx(
    n_layer: int | None = None,
    d_model: int | None = None,
    n_head: int | None = None,
    d_ff: int | None = None,
    seq: int | None = None,
    vocab: int | None = None,
    batch: int | None = None,
    preset: str | None = None,
    *,
    seed: int | None = None,
) -> onnx.ModelProto:
    """A Llama-style decoder as ONNX: RMSNorm, rotary embeddings, SiLU-gated MLP.

    Written as the exporters write it (RMSNorm as ``Pow, ReduceMean, Add, Sqrt,
    Reciprocal, Mul, Mul``; rotary ``q·cos + rotate_half(q)·sin`` with ``Slice, Neg,
    Concat``; SiLU as ``x·Sigmoid(x)``), so it exercises the importer's fusions.
    Multi-head attention (no grouped keys), untied LM head.

    Parameters
    ----------
    n_layer, d_model, n_head, d_ff, seq, vocab, batch
        Blocks, width, heads (dividing ``d_model`` into an even head size), MLP width,
        tokens, vocabulary and batch; each left at ``None`` takes the preset's value.
    preset
        ``"tiny"`` (the default values) or ``"1b"`` (:data:`LLAMA_PRESETS`).
    seed
        ``None`` for zero weights, else the seed of small random weights.  Models above
        :data:`SHAPES_ONLY_PARAMS` parameters carry no weight data at all.

    Returns
    -------
    onnx.ModelProto
        Input ``input_ids`` ``(batch, seq)`` int64, output ``logits`` ``(batch, seq,
        vocab)``; nodes named like Hugging Face's modules (``layers.3.self_attn.q_proj``).
    """
    cfg = _configured("llama", LLAMA_PRESETS, preset, {"n_layer": n_layer, "d_model": d_model, "n_head": n_head,
                                                        "d_ff": d_ff, "seq": seq, "vocab": vocab, "batch": batch})
    L, d, H, F, T, B = (_int(cfg[k], f"llama.{k}") for k in ("n_layer", "d_model", "n_head", "d_ff", "seq", "batch"))
    V = _int(cfg["vocab"], "llama.vocab", minimum=2)
    if d % H or (d // H) % 2:
        raise MonetError(f"n_head={H} does not divide d_model={d} into an even head size", field="llama.n_head",
                         fix="choose n_head so that d_model / n_head is even (rotary pairs)")
    dh = d // H
    b = _Onnx(f"llama_{preset}" if preset else "llama", _seed(seed, "llama.seed"))
    b.shapes_only = 2 * V * d + L * (4 * d * d + 3 * d * F) > SHAPES_ONLY_PARAMS

    ids = b.input("input_ids", (B, T), _INT64)
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, dh, 2, dtype=np.float64) / dh))
    freqs = np.outer(np.arange(T), inv_freq)
    angles = np.concatenate([freqs, freqs], axis=-1).reshape(1, 1, T, dh)
    cos = b.const("rotary_cos", np.cos(angles))
    sin = b.const("rotary_sin", np.sin(angles))
    mask = b.const("attn_mask", np.triu(np.full((T, T), -1e4, dtype=np.float32), k=1).reshape(1, 1, T, T))
    heads_shape = b.const("heads_shape", [B, T, H, dh], np.int64)
    merge_shape = b.const("merge_shape", [B, T, d], np.int64)
    scale = b.const("attn_scale", math.sqrt(dh))
    two, eps = b.const("rms_two", 2.0), b.const("rms_eps", 1e-6)
    last_axis = b.const("rms_axes", [-1], np.int64)
    half_lo, half_hi, end = (b.const("rot_lo", [0], np.int64), b.const("rot_mid", [dh // 2], np.int64),
                             b.const("rot_end", [dh], np.int64))
    rot_axis = b.const("rot_axis", [-1], np.int64)

    def rmsnorm(x: str, name: str) -> str:
        sq = b.node("Pow", [x, two], f"{name}.pow")
        var = b.node("ReduceMean", [sq, last_axis], f"{name}.mean", keepdims=1)
        r = b.node("Sqrt", [b.node("Add", [var, eps], f"{name}.add_eps")], f"{name}.sqrt")
        inv = b.node("Reciprocal", [r], f"{name}.rsqrt")
        normed = b.node("Mul", [x, inv], f"{name}.normalize")
        return b.node("Mul", [normed, b.param(f"{name}.weight", (d,), "ones")], name)

    def rotary(x: str, name: str) -> str:
        lo = b.node("Slice", [x, half_lo, half_hi, rot_axis], f"{name}.x1")
        hi = b.node("Slice", [x, half_hi, end, rot_axis], f"{name}.x2")
        rotated = b.node("Concat", [b.node("Neg", [hi], f"{name}.neg_x2"), lo], f"{name}.rotate_half", axis=-1)
        return b.node("Add", [b.node("Mul", [x, cos], f"{name}.mul_cos"),
                              b.node("Mul", [rotated, sin], f"{name}.mul_sin")], f"{name}.rotary")

    def proj(x: str, name: str, cin: int, cout: int) -> str:
        return b.node("MatMul", [x, b.param(f"{name}.weight", (cin, cout))], name)

    h = b.node("Gather", [b.param("embed_tokens.weight", (V, d)), ids], "embed_tokens", axis=0)
    for i in range(L):
        p = f"layers.{i}"
        a = rmsnorm(h, f"{p}.input_layernorm")
        heads = {}
        for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 1, 3]), ("v", [0, 2, 1, 3])):
            t = proj(a, f"{p}.self_attn.{name}_proj", d, d)
            t = b.node("Reshape", [t, heads_shape], f"{p}.self_attn.{name}_heads")
            heads[name] = b.node("Transpose", [t], f"{p}.self_attn.{name}_transpose", perm=perm)
        q = rotary(heads["q"], f"{p}.self_attn.q")
        k = rotary(heads["k"], f"{p}.self_attn.k")
        kt = b.node("Transpose", [k], f"{p}.self_attn.k_t", perm=[0, 1, 3, 2])
        s = b.node("MatMul", [q, kt], f"{p}.self_attn.scores")
        s = b.node("Add", [b.node("Div", [s, scale], f"{p}.self_attn.scale"), mask], f"{p}.self_attn.mask")
        pr = b.node("Softmax", [s], f"{p}.self_attn.softmax", axis=-1)
        o = b.node("MatMul", [pr, heads["v"]], f"{p}.self_attn.context")
        o = b.node("Transpose", [o], f"{p}.self_attn.merge_transpose", perm=[0, 2, 1, 3])
        o = b.node("Reshape", [o, merge_shape], f"{p}.self_attn.merge")
        h = b.node("Add", [h, proj(o, f"{p}.self_attn.o_proj", d, d)], f"{p}.residual_1")
        m = rmsnorm(h, f"{p}.post_attention_layernorm")
        gate = proj(m, f"{p}.mlp.gate_proj", d, F)
        act = b.node("Mul", [gate, b.node("Sigmoid", [gate], f"{p}.mlp.act.sigmoid")], f"{p}.mlp.act")
        up = proj(m, f"{p}.mlp.up_proj", d, F)
        down = proj(b.node("Mul", [act, up], f"{p}.mlp.gated"), f"{p}.mlp.down_proj", F, d)
        h = b.node("Add", [h, down], f"{p}.residual_2")
    h = rmsnorm(h, "norm")
    b.node("MatMul", [h, b.param("lm_head.weight", (d, V))], "lm_head", "logits")
    b.output("logits", (B, T, V))
    return b.model


#: BERT-style encoder presets: ``"tiny"`` for tests, ``"base"`` (BERT-base: 12 layers,
#: 768 wide, 12 heads, 3072 MLP, 512 tokens, 30522 words, batch 8).
BERT_PRESETS: Mapping[str, Mapping[str, int]] = {
    "tiny": {"n_layer": 2, "d_model": 128, "n_head": 4, "d_ff": 512, "seq": 64, "vocab": 512, "batch": 4},
    "base": {"n_layer": 12, "d_model": 768, "n_head": 12, "d_ff": 3072, "seq": 512, "vocab": 30522, "batch": 8},
}


def bert_onnx(
    n_layer: int | None = None,
    d_model: int | None = None,
    n_head: int | None = None,
    d_ff: int | None = None,
    seq: int | None = None,
    vocab: int | None = None,
    batch: int | None = None,
    preset: str | None = None,
    *,
    seed: int | None = None,
) -> onnx.ModelProto:
    """A BERT-style encoder with its masked-LM head, as ONNX: post-norm blocks, Erf GELU,
    dropout 0.1 in training mode after the embeddings, the attention probabilities and
    each block's two outputs (as Hugging Face's ``BertForMaskedLM``).

    Parameters
    ----------
    n_layer, d_model, n_head, d_ff, seq, vocab, batch
        As in :func:`llama_onnx`; each left at ``None`` takes the preset's value.
    preset
        ``"tiny"`` (the default values) or ``"base"`` (:data:`BERT_PRESETS`).
    seed
        ``None`` for zero weights, else the seed of small random weights.

    Returns
    -------
    onnx.ModelProto
        Input ``input_ids`` ``(batch, seq)`` int64, output ``logits`` ``(batch, seq, vocab)``.
    """
    cfg = _configured("bert", BERT_PRESETS, preset, {"n_layer": n_layer, "d_model": d_model, "n_head": n_head,
                                                        "d_ff": d_ff, "seq": seq, "vocab": vocab, "batch": batch})
    L, d, H, F, T, B = (_int(cfg[k], f"bert.{k}") for k in ("n_layer", "d_model", "n_head", "d_ff", "seq", "batch"))
    V = _int(cfg["vocab"], "bert.vocab", minimum=2)
    if d % H:
        raise MonetError(f"n_head={H} does not divide d_model={d}", field="bert.n_head",
                         fix="choose n_head dividing d_model")
    dh = d // H
    b = _Onnx(f"bert_{preset}" if preset else "bert", _seed(seed, "bert.seed"))
    b.shapes_only = (V + T + 2) * d + L * (4 * d * d + 2 * d * F) + d * d + d * V > SHAPES_ONLY_PARAMS

    ids = b.input("input_ids", (B, T), _INT64)
    pos_ids = b.const("pos_ids", np.arange(T).reshape(1, T), np.int64)
    type_ids = b.const("token_type_ids", np.zeros((B, T)), np.int64)
    heads_shape = b.const("heads_shape", [B, T, H, dh], np.int64)
    merge_shape = b.const("merge_shape", [B, T, d], np.int64)
    scale = b.const("attn_scale", math.sqrt(dh))
    ratio = b.const("dropout_ratio", 0.1)
    sqrt2, one, half = b.const("gelu_sqrt2", math.sqrt(2.0)), b.const("gelu_one", 1.0), b.const("gelu_half", 0.5)

    def gelu(x: str, name: str) -> str:
        g = b.node("Erf", [b.node("Div", [x, sqrt2], f"{name}.div")], f"{name}.erf")
        g = b.node("Mul", [x, b.node("Add", [g, one], f"{name}.add_one")], f"{name}.mul_x")
        return b.node("Mul", [g, half], f"{name}.mul_half", name)

    e = b.node("Add", [b.node("Gather", [b.param("embeddings.word_embeddings.weight", (V, d)), ids],
                              "embeddings.word_embeddings", axis=0),
                       b.node("Gather", [b.param("embeddings.position_embeddings.weight", (T, d)), pos_ids],
                              "embeddings.position_embeddings", axis=0)], "embeddings.add_position")
    e = b.node("Add", [e, b.node("Gather", [b.param("embeddings.token_type_embeddings.weight", (2, d)), type_ids],
                                 "embeddings.token_type_embeddings", axis=0)], "embeddings.add_type")
    h = b.dropout(b.layernorm(e, "embeddings.LayerNorm", d), "embeddings.dropout", ratio)
    for i in range(L):
        p = f"encoder.layer.{i}"
        heads = {}
        for name, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])):
            t = b.linear(h, f"{p}.attention.self.{name}", d, d, output=f"{p}.attention.self.{name}.out")
            t = b.node("Reshape", [t, heads_shape], f"{p}.attention.self.{name}_heads")
            heads[name] = b.node("Transpose", [t], f"{p}.attention.self.{name}_transpose", perm=perm)
        s = b.node("MatMul", [heads["query"], heads["key"]], f"{p}.attention.self.scores")
        pr = b.node("Softmax", [b.node("Div", [s, scale], f"{p}.attention.self.scale")],
                    f"{p}.attention.self.softmax", axis=-1)
        pr = b.dropout(pr, f"{p}.attention.self.dropout", ratio)
        o = b.node("MatMul", [pr, heads["value"]], f"{p}.attention.self.context")
        o = b.node("Transpose", [o], f"{p}.attention.self.merge_transpose", perm=[0, 2, 1, 3])
        o = b.node("Reshape", [o, merge_shape], f"{p}.attention.self.merge")
        o = b.linear(o, f"{p}.attention.output.dense", d, d, output=f"{p}.attention.output.dense.out")
        o = b.dropout(o, f"{p}.attention.output.dropout", ratio)
        h = b.layernorm(b.node("Add", [o, h], f"{p}.attention.output.residual"), f"{p}.attention.output.LayerNorm", d)
        m = b.linear(h, f"{p}.intermediate.dense", d, F, output=f"{p}.intermediate.dense.out")
        m = gelu(m, f"{p}.intermediate.gelu")
        m = b.linear(m, f"{p}.output.dense", F, d, output=f"{p}.output.dense.out")
        m = b.dropout(m, f"{p}.output.dropout", ratio)
        h = b.layernorm(b.node("Add", [m, h], f"{p}.output.residual"), f"{p}.output.LayerNorm", d)
    t = b.linear(h, "cls.predictions.transform.dense", d, d, output="cls.predictions.transform.dense.out")
    t = b.layernorm(gelu(t, "cls.predictions.transform.gelu"), "cls.predictions.transform.LayerNorm", d)
    b.linear(t, "cls.predictions.decoder", d, V, output="logits")
    b.output("logits", (B, T, V))
    return b.model


#: ViT presets: ``"tiny"`` for tests (32x32 images, 8x8 patches), ``"ti16"`` (ViT-Ti/16)
#: and ``"b16"`` (ViT-B/16) at 224x224, 1000 classes.
VIT_PRESETS: Mapping[str, Mapping[str, int]] = {
    "tiny": {"image": 32, "patch": 8, "dim": 64, "depth": 2, "heads": 4, "classes": 10, "batch": 2},
    "ti16": {"image": 224, "patch": 16, "dim": 192, "depth": 12, "heads": 3, "classes": 1000, "batch": 8},
    "b16": {"image": 224, "patch": 16, "dim": 768, "depth": 12, "heads": 12, "classes": 1000, "batch": 8},
}


def vit_onnx(
    image: int | None = None,
    patch: int | None = None,
    dim: int | None = None,
    depth: int | None = None,
    heads: int | None = None,
    classes: int | None = None,
    batch: int | None = None,
    preset: str | None = None,
    *,
    seed: int | None = None,
) -> onnx.ModelProto:
    """A Vision Transformer in timm's layout, as ONNX: patch convolution, a class token
    expanded over the batch and concatenated, a learned position embedding, pre-norm
    blocks with a fused qkv, the head on the class token.

    Parameters
    ----------
    image, patch, dim, depth, heads, classes, batch
        Image side (a multiple of ``patch``), patch side, width, blocks, heads (dividing
        ``dim``), classes and batch; each left at ``None`` takes the preset's value.
    preset
        ``"tiny"`` (the default values), ``"ti16"`` or ``"b16"`` (:data:`VIT_PRESETS`).
    seed
        ``None`` for zero weights, else the seed of small random weights.

    Returns
    -------
    onnx.ModelProto
        Input ``x`` ``(batch, 3, image, image)``, output ``logits`` ``(batch, classes)``.
    """
    cfg = _configured("vit", VIT_PRESETS, preset, {"image": image, "patch": patch, "dim": dim, "depth": depth,
                                                   "heads": heads, "classes": classes, "batch": batch})
    S, P, d, L, H, C, B = (_int(cfg[k], f"vit.{k}", minimum=2 if k == "classes" else 1)
                           for k in ("image", "patch", "dim", "depth", "heads", "classes", "batch"))
    if S % P or d % H:
        raise MonetError(f"image={S} must be a multiple of patch={P}, and heads={H} must divide dim={d}",
                         field="vit.patch", fix="choose a patch dividing the image and heads dividing dim")
    N, dh = (S // P) ** 2 + 1, d // H
    b = _Onnx(f"vit_{preset}" if preset else "vit", _seed(seed, "vit.seed"))
    b.shapes_only = 3 * P * P * d + (N + 1) * d + L * 12 * d * d + d * C > SHAPES_ONLY_PARAMS

    x = b.input("x", (B, 3, S, S))
    tokens_shape = b.const("tokens_shape", [B, d, N - 1], np.int64)
    cls_shape = b.const("cls_shape", [B, 1, d], np.int64)
    qkv_shape = b.const("qkv_shape", [B, N, 3, H, dh], np.int64)
    merge_shape = b.const("merge_shape", [B, N, d], np.int64)
    scale = b.const("attn_scale", math.sqrt(dh))
    cls_index = b.const("cls_index", 0, np.int64)
    sqrt2, one, half = b.const("gelu_sqrt2", math.sqrt(2.0)), b.const("gelu_one", 1.0), b.const("gelu_half", 0.5)
    split = b.const("qkv_split", [1, 1, 1], np.int64)

    t = b.node("Conv", [x, b.param("patch_embed.proj.weight", (d, 3, P, P)), b.param("patch_embed.proj.bias", (d,),
               "zeros")], "patch_embed.proj", strides=[P, P])
    t = b.node("Transpose", [b.node("Reshape", [t, tokens_shape], "patch_embed.flatten")], "patch_embed.transpose",
               perm=[0, 2, 1])
    cls = b.node("Expand", [b.param("cls_token", (1, 1, d), "zeros"), cls_shape], "cls_token.expand")
    h = b.node("Add", [b.node("Concat", [cls, t], "cat_cls", axis=1), b.param("pos_embed", (1, N, d))],
               "pos_embed.add")
    for i in range(L):
        p = f"blocks.{i}"
        a = b.layernorm(h, f"{p}.norm1", d)
        qkv = b.linear(a, f"{p}.attn.qkv", d, 3 * d, output=f"{p}.attn.qkv.out")
        qkv = b.node("Transpose", [b.node("Reshape", [qkv, qkv_shape], f"{p}.attn.qkv_heads")],
                     f"{p}.attn.qkv_permute", perm=[2, 0, 3, 1, 4])
        q, k, v = b.node_outputs("Split", [qkv, split], f"{p}.attn.unbind",
                                 [f"{p}.attn.q5", f"{p}.attn.k5", f"{p}.attn.v5"], axis=0)
        squeeze_axes = b.const(f"{p}.attn.squeeze_axes", [0], np.int64)
        q, k, v = (b.node("Squeeze", [t5, squeeze_axes], f"{p}.attn.{n}") for t5, n in ((q, "q"), (k, "k"), (v, "v")))
        kt = b.node("Transpose", [k], f"{p}.attn.k_t", perm=[0, 1, 3, 2])
        pr = b.node("Softmax", [b.node("Div", [b.node("MatMul", [q, kt], f"{p}.attn.scores"), scale],
                                       f"{p}.attn.scale")], f"{p}.attn.softmax", axis=-1)
        o = b.node("Transpose", [b.node("MatMul", [pr, v], f"{p}.attn.context")], f"{p}.attn.merge_transpose",
                   perm=[0, 2, 1, 3])
        o = b.linear(b.node("Reshape", [o, merge_shape], f"{p}.attn.merge"), f"{p}.attn.proj", d, d,
                     output=f"{p}.attn.proj.out")
        h = b.node("Add", [h, o], f"{p}.residual_1")
        m = b.linear(b.layernorm(h, f"{p}.norm2", d), f"{p}.mlp.fc1", d, 4 * d, output=f"{p}.mlp.fc1.out")
        g = b.node("Erf", [b.node("Div", [m, sqrt2], f"{p}.mlp.gelu.div")], f"{p}.mlp.gelu.erf")
        g = b.node("Mul", [b.node("Mul", [m, b.node("Add", [g, one], f"{p}.mlp.gelu.add_one")], f"{p}.mlp.gelu.mul_x"),
                           half], f"{p}.mlp.gelu.mul_half")
        h = b.node("Add", [h, b.linear(g, f"{p}.mlp.fc2", 4 * d, d, output=f"{p}.mlp.fc2.out")], f"{p}.residual_2")
    h = b.node("Gather", [b.layernorm(h, "norm", d), cls_index], "cls_pool", axis=1)
    b.linear(h, "head", d, C, output="logits")
    b.output("logits", (B, C))
    return b.model


# =============================================================== graph builders
def _import_graph(
    model: onnx.ModelProto, where: str, import_options: dict[str, Any]
) -> TrainingGraph:
    unknown = sorted(set(import_options) - {*IMPORT_OPTIONS, "name"})
    if unknown:
        raise MonetError(
            f"unknown import option {unknown[0]!r}",
            field=f"{where}.{unknown[0]}",
            fix=f"use one of: {', '.join(IMPORT_OPTIONS)}, name",
        )
    options = dict(import_options)
    options.setdefault("name", model.graph.name)
    return from_onnx(model, **options)


def mlp(
    depth: int = 4,
    width: int = 256,
    batch: int = 64,
    in_features: int = 784,
    classes: int = 10,
    **import_options: Any,
) -> TrainingGraph:
    """The training graph of :func:`mlp_onnx` (``import_options`` go to ``from_onnx``).

    Parameters
    ----------
    depth, width, batch, in_features, classes
        As in :func:`mlp_onnx`.
    **import_options
        ``optimizer``, ``granularity``, ``dtype``, ``loss``, ``allow_unknown``, and
        ``name`` (the graph's name).

    Returns
    -------
    TrainingGraph
        Named ``mlp`` unless ``name`` is given.
    """
    return _import_graph(mlp_onnx(depth, width, batch, in_features, classes), "mlp", import_options)


def resnet18(
    variant: str = "cifar", batch: int = 32, classes: int | None = None, **import_options: Any
) -> TrainingGraph:
    """The training graph of :func:`resnet18_onnx` (``import_options`` go to ``from_onnx``).

    Parameters
    ----------
    variant, batch, classes
        As in :func:`resnet18_onnx`.
    **import_options
        ``optimizer``, ``granularity``, ``dtype``, ``loss``, ``allow_unknown``, and
        ``name`` (the graph's name).

    Returns
    -------
    TrainingGraph
        Named ``resnet18_cifar`` or ``resnet18_imagenet`` unless ``name`` is given.
    """
    return _import_graph(resnet18_onnx(variant, batch, classes), "resnet18", import_options)


def resnet50(
    batch: int = 8, image: int = 224, classes: int = 1000, **import_options: Any
) -> TrainingGraph:
    """The training graph of :func:`resnet50_onnx` (``import_options`` go to ``from_onnx``).

    Parameters
    ----------
    batch, image, classes
        As in :func:`resnet50_onnx`.
    **import_options
        ``optimizer``, ``granularity``, ``dtype``, ``loss``, ``allow_unknown``, and
        ``name`` (the graph's name).

    Returns
    -------
    TrainingGraph
        Named ``resnet50`` unless ``name`` is given.
    """
    return _import_graph(resnet50_onnx(batch, image, classes), "resnet50", import_options)


def vgg16(
    batch: int = 8, image: int = 224, classes: int = 1000, **import_options: Any
) -> TrainingGraph:
    """The training graph of :func:`vgg16_onnx` (``import_options`` go to ``from_onnx``).

    Parameters
    ----------
    batch, image, classes
        As in :func:`vgg16_onnx`.
    **import_options
        ``optimizer``, ``granularity``, ``dtype``, ``loss``, ``allow_unknown``, and
        ``name`` (the graph's name).

    Returns
    -------
    TrainingGraph
        Named ``vgg16`` unless ``name`` is given.
    """
    return _import_graph(vgg16_onnx(batch, image, classes), "vgg16", import_options)


def mobilenet_v2(
    batch: int = 8,
    image: int = 224,
    classes: int = 1000,
    width_mult: float = 1.0,
    **import_options: Any,
) -> TrainingGraph:
    """The training graph of :func:`mobilenet_v2_onnx` (``import_options`` go to ``from_onnx``).

    Parameters
    ----------
    batch, image, classes, width_mult
        As in :func:`mobilenet_v2_onnx`.
    **import_options
        ``optimizer``, ``granularity``, ``dtype``, ``loss``, ``allow_unknown``, and
        ``name`` (the graph's name).

    Returns
    -------
    TrainingGraph
        Named ``mobilenet_v2`` unless ``name`` is given.
    """
    return _import_graph(
        mobilenet_v2_onnx(batch, image, classes, width_mult), "mobilenet_v2", import_options
    )


def gpt2(
    n_layer: int | None = None,
    d_model: int | None = None,
    n_head: int | None = None,
    seq: int | None = None,
    vocab: int | None = None,
    batch: int | None = None,
    preset: str | None = None,
    **import_options: Any,
) -> TrainingGraph:
    """The training graph of :func:`gpt2_onnx` (``import_options`` go to ``from_onnx``).

    Parameters
    ----------
    n_layer, d_model, n_head, seq, vocab, batch, preset
        As in :func:`gpt2_onnx`.
    **import_options
        ``optimizer``, ``granularity``, ``dtype``, ``loss``, ``allow_unknown``, and
        ``name`` (the graph's name).

    Returns
    -------
    TrainingGraph
        Named ``gpt2``, ``gpt2_tiny`` or ``gpt2_small`` unless ``name`` is given.
    """
    model = gpt2_onnx(n_layer, d_model, n_head, seq, vocab, batch, preset)
    return _import_graph(model, "gpt2", import_options)


def llama(
    n_layer: int | None = None,
    d_model: int | None = None,
    n_head: int | None = None,
    d_ff: int | None = None,
    seq: int | None = None,
    vocab: int | None = None,
    batch: int | None = None,
    preset: str | None = None,
    **import_options: Any,
) -> TrainingGraph:
    """The training graph of :func:`llama_onnx` (``import_options`` go to ``from_onnx``)."""
    model = llama_onnx(n_layer, d_model, n_head, d_ff, seq, vocab, batch, preset)
    return _import_graph(model, "llama", import_options)


def bert(
    n_layer: int | None = None,
    d_model: int | None = None,
    n_head: int | None = None,
    d_ff: int | None = None,
    seq: int | None = None,
    vocab: int | None = None,
    batch: int | None = None,
    preset: str | None = None,
    **import_options: Any,
) -> TrainingGraph:
    """The training graph of :func:`bert_onnx` (``import_options`` go to ``from_onnx``)."""
    return _import_graph(bert_onnx(n_layer, d_model, n_head, d_ff, seq, vocab, batch, preset), "bert",
                         import_options)


def vit(
    image: int | None = None,
    patch: int | None = None,
    dim: int | None = None,
    depth: int | None = None,
    heads: int | None = None,
    classes: int | None = None,
    batch: int | None = None,
    preset: str | None = None,
    **import_options: Any,
) -> TrainingGraph:
    """The training graph of :func:`vit_onnx` (``import_options`` go to ``from_onnx``)."""
    return _import_graph(vit_onnx(image, patch, dim, depth, heads, classes, batch, preset), "vit", import_options)


# ===================================================================== registry
#: Zoo name -> (ONNX builder, graph builder, fixed arguments).
_ENTRIES: dict[str, tuple[Callable[..., onnx.ModelProto], Callable[..., Any], dict[str, Any]]] = {
    "mlp": (mlp_onnx, mlp, {}),
    "resnet18": (resnet18_onnx, resnet18, {}),
    "resnet50": (resnet50_onnx, resnet50, {}),
    "vgg16": (vgg16_onnx, vgg16, {}),
    "mobilenet_v2": (mobilenet_v2_onnx, mobilenet_v2, {}),
    "gpt2": (gpt2_onnx, gpt2, {}),
    "gpt2_tiny": (gpt2_onnx, gpt2, {"preset": "tiny"}),
    "gpt2_small": (gpt2_onnx, gpt2, {"preset": "small"}),
    "gpt2_medium": (gpt2_onnx, gpt2, {"preset": "medium"}),
    "bert": (bert_onnx, bert, {}),
    "bert_tiny": (bert_onnx, bert, {"preset": "tiny"}),
    "bert_base": (bert_onnx, bert, {"preset": "base"}),
    "vit": (vit_onnx, vit, {}),
    "vit_tiny": (vit_onnx, vit, {"preset": "tiny"}),
    "vit_ti16": (vit_onnx, vit, {"preset": "ti16"}),
    "vit_b16": (vit_onnx, vit, {"preset": "b16"}),
    "llama": (llama_onnx, llama, {}),
    "llama_tiny": (llama_onnx, llama, {"preset": "tiny"}),
    "llama_1b": (llama_onnx, llama, {"preset": "1b"}),
}


def _registered(graph_builder: Callable[..., Any], fixed: dict[str, Any]) -> Callable[..., Any]:
    if not fixed:
        return graph_builder
    wrapped = functools.partial(graph_builder, **fixed)
    functools.update_wrapper(wrapped, graph_builder)
    return wrapped


#: Zoo name -> graph builder (``MODELS["gpt2_small"](granularity="op")``).
MODELS: dict[str, Callable[..., TrainingGraph]] = {
    name: _registered(graph_builder, fixed) for name, (_, graph_builder, fixed) in _ENTRIES.items()
}


def _entry(name: Any) -> tuple[Callable[..., onnx.ModelProto], dict[str, Any]]:
    if not isinstance(name, str) or name not in _ENTRIES:
        known = ", ".join(_ENTRIES)
        close = difflib.get_close_matches(str(name), list(_ENTRIES), n=1, cutoff=0.4)
        fix = f"did you mean {close[0]!r}?" if close else f"use one of: {known}"
        raise UnknownModelError(
            f"unknown zoo model {name!r}; known models: {known}", field="model", fix=fix
        )
    onnx_builder, _, fixed = _ENTRIES[name]
    return onnx_builder, fixed


def _model_param_names(onnx_builder: Callable[..., Any], fixed: Mapping[str, Any]) -> list[str]:
    return [p for p in inspect.signature(onnx_builder).parameters if p not in fixed]


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``params`` into model parameters and import options (:data:`IMPORT_OPTIONS`).

    Parameters
    ----------
    params
        Mixed keyword arguments, e.g. from :func:`parse_params`.

    Returns
    -------
    tuple of dict
        ``(model_params, import_options)``; ``batch`` is a model parameter.
    """
    model = {k: v for k, v in params.items() if k not in IMPORT_OPTIONS}
    options = {k: v for k, v in params.items() if k in IMPORT_OPTIONS}
    return model, options


def onnx_model(name: str, **params: Any) -> onnx.ModelProto:
    """The ONNX model of zoo entry ``name``.

    Parameters
    ----------
    name
        A key of :data:`MODELS`.
    **params
        Parameters of the entry's ONNX builder (e.g. ``batch=8``, ``seed=0``).

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    UnknownModelError
        ``name`` is not in the zoo (the message suggests the closest name).
    MonetError
        A parameter is unknown or invalid.
    """
    onnx_builder, fixed = _entry(name)
    _check_model_params(name, onnx_builder, fixed, params, also_valid=())
    return onnx_builder(**fixed, **params)


def _check_model_params(name: str, onnx_builder: Callable[..., Any], fixed: Mapping[str, Any],
                        params: Mapping[str, Any], also_valid: Sequence[str]) -> None:
    valid = _model_param_names(onnx_builder, fixed)
    for key in params:
        if key not in valid:
            raise MonetError(
                f"unknown parameter {key!r} for model {name!r}",
                field=f"{name}.{key}",
                fix=f"use one of: {', '.join(valid + list(also_valid))}",
            )


def build(name: str, **params: Any) -> TrainingGraph:
    """The training graph of zoo entry ``name``.

    Parameters
    ----------
    name
        A key of :data:`MODELS`.
    **params
        Model parameters (as for :func:`onnx_model`) and import options
        (:data:`IMPORT_OPTIONS`: ``optimizer``, ``granularity``, ``dtype``, ...).

    Returns
    -------
    TrainingGraph
        Named after the model (``mlp``, ``resnet18_cifar``, ``gpt2_small``, ...);
        to choose another name call ``MODELS[name](..., name=...)``.

    Raises
    ------
    UnknownModelError
        ``name`` is not in the zoo (the message suggests the closest name).
    MonetError
        A parameter is unknown or invalid.
    """
    onnx_builder, fixed = _entry(name)
    model_params, options = split_params(params)
    _check_model_params(name, onnx_builder, fixed, model_params, also_valid=IMPORT_OPTIONS)
    return _import_graph(onnx_builder(**fixed, **model_params), name, options)


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """Turn CLI ``KEY=VALUE`` strings into a dict of ints, floats, booleans, None or strings.

    Parameters
    ----------
    items
        E.g. ``["batch=8", "variant=imagenet", "width_mult=0.5"]``.

    Returns
    -------
    dict
        ``{"batch": 8, "variant": "imagenet", "width_mult": 0.5}``; ``true``/``false``
        become booleans and ``none``/``null`` become ``None``.

    Raises
    ------
    MonetError
        An item has no ``=``, an empty key, or repeats a key.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = str(item).partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key:
            raise MonetError(
                f"cannot read parameter {item!r}",
                field="--param",
                fix="write KEY=VALUE, e.g. batch=8",
            )
        if key in out:
            raise MonetError(
                f"parameter {key!r} given twice",
                field=f"--param {key}",
                fix="give each parameter once",
            )
        out[key] = _parse_value(text)
    return out


def _parse_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text
