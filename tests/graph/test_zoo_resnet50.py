"""ResNet-50 in the zoo: torchvision's structure, its published parameter count and MACs.

Reference figures are independent of the code: 25,557,032 parameters is torchvision's
published count for ``resnet50`` (ImageNet, 1000 classes), 4.09 GFLOPs (multiply-adds)
its published cost at 224 x 224, and the MACs are also worked out below by a
layer-by-layer sum written from the architecture (He et al., 2016, Table 1, with the
stride on the 3x3 conv as torchvision's v1.5).
"""

from __future__ import annotations

import math
from collections import Counter

import onnx
import pytest

from monet_ilp.errors import MonetError
from monet_ilp.graph import OpKind, TensorKind, zoo


def _trainable(model: onnx.ModelProto) -> int:
    """Parameters: initializers, less the BatchNorm running statistics (inputs 3, 4)."""
    running = {
        i for n in model.graph.node if n.op_type == "BatchNormalization" for i in n.input[3:5]
    }
    return sum(math.prod(t.dims) for t in model.graph.initializer if t.name not in running)


def _textbook_macs(image: int = 224, classes: int = 1000) -> int:
    """Forward multiply-adds of conv and FC layers for one image, from the architecture."""

    def conv(cin: int, cout: int, k: int, side: int) -> int:
        return cin * cout * k * k * side * side

    side = (image + 1) // 2  # 7x7/s2 conv, padding 3
    macs = conv(3, 64, 7, side)
    side = (side + 1) // 2  # 3x3/s2 max-pool, padding 1
    cin = 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for block in range(blocks):
            out_side = (side + 1) // 2 if stage > 0 and block == 0 else side
            macs += conv(cin, width, 1, side)  # conv1 at the input resolution
            macs += conv(width, width, 3, out_side)  # conv2 carries the stride
            macs += conv(width, 4 * width, 1, out_side)
            if block == 0:
                macs += conv(cin, 4 * width, 1, out_side)  # downsample
            cin, side = 4 * width, out_side
    return macs + 2048 * classes


def test_parameter_count_is_torchvisions():
    assert _trainable(zoo.resnet50_onnx(batch=1)) == 25_557_032
    assert _trainable(zoo.resnet50_onnx(batch=1, classes=10)) == 25_557_032 - 2049 * 990


def test_structure_is_torchvisions_v1_5():
    m = onnx.shape_inference.infer_shapes(zoo.resnet50_onnx(batch=2), strict_mode=True)
    onnx.checker.check_model(m)
    ops = Counter(n.op_type for n in m.graph.node)
    assert ops == {
        "Conv": 53, "BatchNormalization": 53, "Relu": 49, "Add": 16, "MaxPool": 1,
        "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1,
    }
    shapes = {
        vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        for vi in list(m.graph.value_info) + list(m.graph.output)
    }
    assert shapes["logits"] == (2, 1000)
    assert shapes["maxpool"] == (2, 64, 56, 56)
    # v1.5: the 3x3 conv strides, the 1x1 before it does not.
    assert shapes["layer2.0.conv1"] == (2, 128, 56, 56)
    assert shapes["layer2.0.conv2"] == (2, 128, 28, 28)
    assert shapes["layer2.0.downsample.1"] == (2, 512, 28, 28)
    assert shapes["layer4.2.relu3"] == (2, 2048, 7, 7)
    downsamples = sorted(n.name for n in m.graph.node if n.name.endswith("downsample.0"))
    assert downsamples == [f"layer{i}.0.downsample.0" for i in range(1, 5)]
    blocks = {n.name.rsplit(".", 1)[0] for n in m.graph.node if n.name.startswith("layer")}
    assert sorted(b for b in blocks if not b.endswith("downsample")) == sorted(
        f"layer{s}.{i}" for s, n in enumerate((3, 4, 6, 3), start=1) for i in range(n)
    )


def test_forward_macs_match_textbook_and_torchvision():
    expected = _textbook_macs()
    assert expected == pytest.approx(4.09e9, rel=2e-3)  # torchvision: 4.09 GFLOPs (MACs)
    g = zoo.build("resnet50", batch=1)
    assert sum(op.macs for op in g.ops if op.kind is OpKind.FORWARD) == expected
    g4 = zoo.resnet50(batch=4, image=160, classes=100)
    assert sum(op.macs for op in g4.ops if op.kind is OpKind.FORWARD) == 4 * _textbook_macs(
        160, 100
    )


def test_training_graph_at_layer_granularity():
    g = zoo.build("resnet50")  # batch 8, 224 x 224, SGD, layer granularity
    assert g.name == "resnet50"
    kinds = Counter(op.kind for op in g.ops)
    # One forward op per conv (absorbing its BN/ReLU/Add tail) and the FC; one update per
    # weight tensor (53 convs, 53 BN scale/shift pairs, FC weight and bias).
    assert kinds == {
        OpKind.FORWARD: 54, OpKind.BACKWARD_DATA: 55, OpKind.BACKWARD_WEIGHT: 54,
        OpKind.LOSS: 1, OpKind.OPTIMIZER: 161,
    }
    assert len(g.ops) == 325
    assert g.tensor("input").shape == (8, 3, 224, 224)
    weights = g.tensors_of_kind(TensorKind.WEIGHT)
    assert sum(t.numel for t in weights) == 25_557_032
    assert not any("running" in t.id for t in weights)


def test_registered_and_parameters_checked():
    assert "resnet50" in zoo.MODELS
    assert zoo.MODELS["resnet50"] is zoo.resnet50
    assert zoo.build("resnet50", **zoo.parse_params(["batch=2", "image=64", "classes=10"])).tensor(
        "logits"
    ).shape == (2, 10)
    with pytest.raises(MonetError) as info:
        zoo.build("resnet50", variant="imagenet")
    assert info.value.field == "resnet50.variant"
    for bad, field in (({"batch": 0}, "resnet50.batch"), ({"classes": 1}, "resnet50.classes"),
                       ({"image": 2.5}, "resnet50.image")):
        with pytest.raises(MonetError) as info:
            zoo.resnet50_onnx(**bad)
        assert info.value.field == field
