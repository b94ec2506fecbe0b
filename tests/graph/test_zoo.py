"""The model zoo: valid ONNX, the spec's shapes and parameter counts, the registry, errors.

Reference figures are independent of the code: parameter counts are the published ones
(torchvision, the CIFAR ResNet-18 of kuangliu/pytorch-cifar, GPT-2 small) or worked out
by hand below, and MACs come from a textbook layer-by-layer sum.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from monet_ilp.errors import MonetError, UnknownModelError
from monet_ilp.graph import OpKind, TensorKind, zoo

HAVE_IMPORTER = importlib.util.find_spec("monet_ilp.graph.onnx_import") is not None
needs_importer = pytest.mark.skipif(
    not HAVE_IMPORTER, reason="monet_ilp.graph.onnx_import not written yet"
)


# ------------------------------------------------------------------- helpers
def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    onnx.checker.check_model(model)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Static shape of every value of an inferred model (inputs, outputs, value_info)."""
    out = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        out[vi.name] = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    return out


def _trainable(model: onnx.ModelProto) -> int:
    """Parameters: initializers, less the BatchNorm running statistics (inputs 3, 4)."""
    running = {
        i for n in model.graph.node if n.op_type == "BatchNormalization" for i in n.input[3:5]
    }
    return sum(math.prod(t.dims) for t in model.graph.initializer if t.name not in running)


def _const_values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {
        n.output[0]: numpy_helper.to_array(n.attribute[0].t)
        for n in model.graph.node
        if n.op_type == "Constant"
    }


def _nodes(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op_type]


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


# Small or medium configurations: each is checked and strictly shape-inferred.
VALID_CASES = {
    "mlp": ("mlp", {}, (64, 10)),
    "mlp_linear": ("mlp", {"depth": 0, "batch": 3}, (3, 10)),
    "resnet18_cifar": ("resnet18", {}, (32, 10)),
    "resnet18_imagenet": ("resnet18", {"variant": "imagenet", "batch": 2}, (2, 1000)),
    "vgg16_32px": ("vgg16", {"image": 32, "batch": 2, "classes": 10}, (2, 10)),
    "mobilenet_v2": ("mobilenet_v2", {}, (8, 1000)),
    "mobilenet_v2_half": ("mobilenet_v2", {"width_mult": 0.5, "image": 96, "batch": 2}, (2, 1000)),
    "gpt2_tiny": ("gpt2_tiny", {}, (4, 64, 512)),
    "gpt2_custom": (
        "gpt2",
        {"n_layer": 1, "d_model": 96, "n_head": 3, "seq": 16, "vocab": 100, "batch": 2},
        (2, 16, 100),
    ),
}

ALLOWED_OPS = {
    "Conv",
    "BatchNormalization",
    "Relu",
    "MaxPool",
    "GlobalAveragePool",
    "Flatten",
    "Gemm",
    "Clip",
    "Dropout",
    "Gather",
    "Add",
    "LayerNormalization",
    "MatMul",
    "Split",
    "Reshape",
    "Transpose",
    "Div",
    "Softmax",
    "Erf",
    "Mul",
    "Constant",
}


@pytest.fixture(scope="module")
def models() -> dict[str, onnx.ModelProto]:
    return {key: zoo.onnx_model(name, **params) for key, (name, params, _) in VALID_CASES.items()}


@pytest.fixture(scope="module")
def inferred(models) -> dict[str, onnx.ModelProto]:
    return {key: _infer(m) for key, m in models.items()}


# ------------------------------------------------------------ ONNX validity
@pytest.mark.parametrize("key", VALID_CASES)
def test_models_are_valid_onnx_with_right_logits(inferred, key):
    m = inferred[key]
    assert m.opset_import[0].version == 17 and m.ir_version <= onnx.IR_VERSION
    assert _shapes(m)["logits"] == VALID_CASES[key][2]
    assert [o.name for o in m.graph.output] == ["logits"]


@pytest.mark.parametrize("key", VALID_CASES)
def test_spec_rules_for_nodes_and_constants(models, key):
    m = models[key]
    names = [n.name for n in m.graph.node]
    assert all(names) and len(set(names)) == len(names)
    assert {n.op_type for n in m.graph.node} <= ALLOWED_OPS
    # Trainable parameters and running stats are float initializers with > 1 element;
    # everything else (shapes, scalars, masks, ids, bounds) is a Constant node.
    for t in m.graph.initializer:
        assert t.data_type == onnx.TensorProto.FLOAT and math.prod(t.dims) > 1, t.name
    inits = {t.name for t in m.graph.initializer}
    consts = {n.output[0] for n in _nodes(m, "Constant")}
    for op_type, slots in {"Reshape": [1], "Split": [1], "Clip": [1, 2], "Dropout": [1]}.items():
        for n in _nodes(m, op_type):
            assert all(n.input[s] in consts for s in slots), n.name
    for n in _nodes(m, "Gemm"):
        assert _attr(n, "transB") == 1
    for n in _nodes(m, "BatchNormalization") + _nodes(m, "LayerNormalization"):
        assert _attr(n, "epsilon") == pytest.approx(1e-5)
        assert all(i in inits for i in n.input[1:])


def test_resnet18_shapes_and_structure(inferred):
    cifar, imagenet = _shapes(inferred["resnet18_cifar"]), _shapes(inferred["resnet18_imagenet"])
    assert cifar["relu"] == (32, 64, 32, 32)  # no max-pool on CIFAR
    assert cifar["layer4.1.relu2"] == (32, 512, 4, 4)
    assert imagenet["maxpool"] == (2, 64, 56, 56)
    assert imagenet["layer4.1.relu2"] == (2, 512, 7, 7)
    m = inferred["resnet18_cifar"]
    convs = _nodes(m, "Conv")
    assert len(convs) == 1 + 16 + 3 and all(len(n.input) == 2 for n in convs)  # no conv bias
    assert sorted(n.name for n in convs if "downsample" in n.name) == [
        "layer2.0.downsample.0",
        "layer3.0.downsample.0",
        "layer4.0.downsample.0",
    ]
    assert len(_nodes(m, "Add")) == 8 and not _nodes(m, "MaxPool")


def test_vgg16_and_mobilenet_structure(inferred):
    vgg = inferred["vgg16_32px"]
    assert _shapes(vgg)["flatten"] == (2, 512)  # image 32: 512 features into fc6
    assert all(len(n.input) == 3 for n in _nodes(vgg, "Conv"))  # convs with bias
    assert len(_nodes(vgg, "Conv")) == 13 and len(_nodes(vgg, "MaxPool")) == 5
    assert len(_nodes(vgg, "Dropout")) == 2
    mob = inferred["mobilenet_v2"]
    consts = _const_values(mob)
    clips = _nodes(mob, "Clip")
    assert len(clips) == 1 + 1 + 2 * 16 + 1  # stem, block 1 (t=1: dw only), expand + dw x 16, last
    assert all(float(consts[n.input[1]]) == 0.0 and float(consts[n.input[2]]) == 6.0 for n in clips)
    depthwise = [n for n in _nodes(mob, "Conv") if _attr(n, "group", 1) > 1]
    assert len(depthwise) == 17 and all(len(n.input) == 2 for n in _nodes(mob, "Conv"))
    assert len(_nodes(mob, "Add")) == 10  # residuals: stride 1 and in == out channels
    shapes = _shapes(mob)
    assert shapes["features.18.relu6"] == (8, 1280, 7, 7)
    assert _shapes(inferred["mobilenet_v2_half"])["features.18.relu6"] == (2, 1280, 3, 3)


def test_gpt2_attention_shapes_and_constants(inferred):
    m = inferred["gpt2_tiny"]
    s = _shapes(m)
    assert s["h.0.attn.q_transpose"] == (4, 4, 64, 32)
    assert s["h.0.attn.k_transpose"] == (4, 4, 32, 64)
    assert s["h.1.attn.scores"] == (4, 4, 64, 64)
    assert s["h.1.attn.merge_reshape"] == (4, 64, 128)
    assert s["h.1.mlp.gelu"] == (4, 64, 512)
    consts = _const_values(m)
    mask = consts["attn_mask"]
    assert mask.shape == (1, 1, 64, 64)
    assert np.array_equal(mask[0, 0] == 0, np.tril(np.ones((64, 64), bool)))
    assert np.all(mask[0, 0][np.triu_indices(64, 1)] == np.float32(-1e4))
    assert np.array_equal(consts["pos_ids"], np.arange(64))
    assert float(consts["attn_scale"]) == pytest.approx(math.sqrt(32))
    assert [n.input[0] for n in _nodes(m, "Gather")] == ["wte.weight", "wpe.weight"]
    lm_head = next(n for n in m.graph.node if n.name == "lm_head")
    assert lm_head.op_type == "MatMul" and len(lm_head.input) == 2  # no bias, untied
    assert {i.name: i.type.tensor_type.elem_type for i in m.graph.input} == {
        "input_ids": onnx.TensorProto.INT64
    }


# ---------------------------------------------------------- parameter counts
def test_parameter_counts_small_models(models):
    assert _trainable(models["resnet18_cifar"]) == 11_173_962
    assert _trainable(zoo.resnet18_onnx("imagenet", batch=1)) == 11_689_512
    assert _trainable(models["mobilenet_v2"]) == 3_504_872
    assert _trainable(models["mlp"]) == 784 * 256 + 256 + 3 * (256 * 256 + 256) + 256 * 10 + 10


def test_parameter_count_vgg16():
    assert _trainable(zoo.vgg16_onnx()) == 138_357_544


def test_parameter_count_gpt2_small():
    # Its build time is scripts/bench_graphs.py's (onnx_build_s), not an assertion here.
    m = zoo.gpt2_onnx(preset="small")
    V, T, d, L = 50257, 1024, 768, 12
    block = (
        2 * d  # ln_1
        + d * 3 * d
        + 3 * d  # c_attn
        + d * d
        + d  # attn.c_proj
        + 2 * d  # ln_2
        + d * 4 * d
        + 4 * d  # mlp.c_fc
        + 4 * d * d
        + d
    )  # mlp.c_proj
    assert block == 7_087_872
    expected = V * d + T * d + L * block + 2 * d + d * V
    # GPT-2 small as published (124,439,808, head tied to wte) plus an untied head.
    assert expected == 124_439_808 + V * d == 163_037_184
    assert _trainable(m) == expected
    assert m.graph.name == "gpt2_small"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vgg16", "gpt2_small"])
def test_large_models_are_valid_onnx_and_import(name):
    m = _infer(zoo.onnx_model(name))
    assert _shapes(m)["logits"] == {"vgg16": (8, 1000), "gpt2_small": (1, 1024, 50257)}[name]
    if HAVE_IMPORTER:
        g = zoo.build(name)
        assert g.name == name
        assert sum(t.numel for t in g.tensors_of_kind(TensorKind.WEIGHT)) == _trainable(m)


# --------------------------------------------------------- presets, weights
def test_gpt2_presets_and_overrides():
    assert zoo.GPT2_PRESETS["tiny"] == {
        "n_layer": 2, "d_model": 128, "n_head": 4, "seq": 64, "vocab": 512, "batch": 4
    }
    default, tiny = zoo.gpt2_onnx(), zoo.gpt2_onnx(preset="tiny")
    assert default.graph.name == "gpt2" and tiny.graph.name == "gpt2_tiny"
    assert default.graph.node == tiny.graph.node
    m = zoo.gpt2_onnx(preset="small", n_layer=1, seq=32, vocab=1000, batch=2)
    s = _shapes(_infer(m))
    assert s["logits"] == (2, 32, 1000)
    assert s["h.0.attn.scores"] == (2, 12, 32, 32)  # 12 heads and d_model 768 kept from the preset
    assert not any(n.name.startswith("h.1.") for n in m.graph.node)


def test_weights_zero_by_default_and_seeded_random():
    zero = zoo.mlp_onnx(depth=1, width=8, in_features=4, classes=3)
    assert all(not numpy_helper.to_array(t).any() for t in zero.graph.initializer)
    a, b = (zoo.mlp_onnx(depth=1, width=8, in_features=4, classes=3, seed=7) for _ in range(2))
    wa, wb = (numpy_helper.to_array(m.graph.initializer[0]) for m in (a, b))
    assert wa.shape == (8, 4) and wa.any() and np.array_equal(wa, wb)
    seeded = zoo.onnx_model("mobilenet_v2", image=32, batch=1, seed=1)
    bn_var = next(t for t in seeded.graph.initializer if t.name == "features.0.bn.running_var")
    assert np.all(numpy_helper.to_array(bn_var) == 1.0)
    _infer(seeded)


# ------------------------------------------------------------------ registry
def test_registry_names():
    assert set(zoo.MODELS) == {
        "mlp",
        "resnet18",
        "resnet50",
        "vgg16",
        "mobilenet_v2",
        "gpt2",
        "gpt2_tiny",
        "gpt2_small",
        "gpt2_medium",
        "bert",
        "bert_tiny",
        "bert_base",
        "vit",
        "vit_tiny",
        "vit_ti16",
        "vit_b16",
        "llama",
        "llama_tiny",
        "llama_1b",
    }
    assert all(callable(f) for f in zoo.MODELS.values())


@pytest.mark.parametrize(
    "bad, suggestion",
    [("resnet-50", "resnet50"), ("resnet_18", "resnet18"), ("gpt2-small", "gpt2_small"),
     ("mobilenet", "mobilenet_v2")],
)
def test_unknown_model_lists_names_and_suggests(bad, suggestion):
    for call in (zoo.onnx_model, zoo.build):
        with pytest.raises(UnknownModelError) as info:
            call(bad)
        msg = str(info.value)
        assert all(name in msg for name in zoo.MODELS)
        assert f"did you mean {suggestion!r}" in msg


def test_unknown_model_without_close_match():
    with pytest.raises(UnknownModelError, match="use one of: mlp"):
        zoo.onnx_model("transformerxl9000")


def test_unknown_parameter_names_the_valid_ones():
    with pytest.raises(MonetError, match=r"unknown parameter 'depht'.*depth, width, batch") as info:
        zoo.onnx_model("mlp", depht=3)
    assert info.value.field == "mlp.depht"
    with pytest.raises(MonetError, match=r"unknown parameter 'preset'"):
        zoo.onnx_model("gpt2_tiny", preset="small")  # fixed by the entry
    with pytest.raises(MonetError, match=r"unknown parameter 'colour'.*optimizer, granularity"):
        zoo.build("vgg16", colour="red")
    with pytest.raises(MonetError, match=r"unknown import option 'colour'"):
        zoo.resnet18(colour="red")


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: zoo.mlp_onnx(batch=0), "mlp.batch"),
        (lambda: zoo.mlp_onnx(width=-4), "mlp.width"),
        (lambda: zoo.mlp_onnx(depth=2.5), "mlp.depth"),
        (lambda: zoo.mlp_onnx(classes=1), "mlp.classes"),
        (lambda: zoo.onnx_model("mlp", batch="8"), "mlp.batch"),
        (lambda: zoo.resnet18_onnx(batch=True), "resnet18.batch"),
        (lambda: zoo.resnet18_onnx(variant="imagenette"), "resnet18.variant"),
        (lambda: zoo.vgg16_onnx(image=16), "vgg16.image"),
        (lambda: zoo.mobilenet_v2_onnx(width_mult=0), "mobilenet_v2.width_mult"),
        (lambda: zoo.gpt2_onnx(n_head=5), "gpt2.n_head"),
        (lambda: zoo.gpt2_onnx(preset="huge"), "gpt2.preset"),
        (lambda: zoo.onnx_model("gpt2_small", d_model=100), "gpt2.n_head"),
        (lambda: zoo.gpt2_onnx(seed=-1), "gpt2.seed"),
    ],
)
def test_bad_values_name_field_and_fix(call, field):
    with pytest.raises(MonetError) as info:
        call()
    assert info.value.field == field
    assert info.value.fix
    assert field in str(info.value)


def test_n_head_message():
    with pytest.raises(
        MonetError, match=r"n_head=5 does not divide d_model=128.*choose n_head dividing d_model"
    ):
        zoo.gpt2_onnx(n_head=5)


def test_split_params():
    params = {
        "batch": 8,
        "variant": "imagenet",
        "optimizer": "adam",
        "granularity": "op",
        "dtype": "bf16",
    }
    assert zoo.split_params(params) == (
        {"batch": 8, "variant": "imagenet"},
        {"optimizer": "adam", "granularity": "op", "dtype": "bf16"},
    )


# ---------------------------------------------------------------- parse_params
def test_parse_params_types():
    got = zoo.parse_params(
        [
            "batch=8",
            "variant=imagenet",
            "width_mult=0.5",
            "classes=none",
            " seq = 32 ",
            "allow_unknown=true",
            "lr=1e-3",
            "name=a=b",
        ]
    )
    assert got == {
        "batch": 8,
        "variant": "imagenet",
        "width_mult": 0.5,
        "classes": None,
        "seq": 32,
        "allow_unknown": True,
        "lr": 1e-3,
        "name": "a=b",
    }
    assert type(got["batch"]) is int and type(got["width_mult"]) is float
    assert zoo.parse_params([]) == {}


@pytest.mark.parametrize("items", [["batch"], ["=8"], ["batch=8", "batch=4"]])
def test_parse_params_errors(items):
    with pytest.raises(MonetError, match="--param|given twice"):
        zoo.parse_params(items)


def test_parsed_params_drive_the_builders():
    m = zoo.onnx_model(
        "resnet18", **zoo.parse_params(["batch=8", "variant=imagenet", "classes=none"])
    )
    assert _shapes(_infer(m))["logits"] == (8, 1000)


# ------------------------------------------------- training graphs (importer)
def _resnet18_cifar_macs(batch: int = 1, classes: int = 10) -> int:
    """Textbook MAC count of CIFAR ResNet-18: sum over convs of Cin*Cout*k*k*H_out*W_out."""

    def conv(cin, cout, k, side):
        return cin * cout * k * k * side * side

    macs, cin, side = conv(3, 64, 3, 32), 64, 32
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage and block == 0 else 1
            side //= stride
            macs += conv(cin, cout, 3, side) + conv(cout, cout, 3, side)
            if stride != 1 or cin != cout:
                macs += conv(cin, cout, 1, side)
            cin = cout
    return batch * (macs + 512 * classes)


@needs_importer
def test_resnet18_cifar_forward_macs_match_textbook():
    expected = _resnet18_cifar_macs()
    assert expected == pytest.approx(0.556e9, rel=2e-3)  # the usual "0.56 GMACs" figure
    g = zoo.resnet18(variant="cifar", batch=1)
    assert g.name == "resnet18_cifar"
    assert sum(op.macs for op in g.ops if op.kind is OpKind.FORWARD) == expected


@needs_importer
def test_graph_weights_are_the_trainable_parameters():
    g = zoo.build("resnet18", batch=2)
    weights = g.tensors_of_kind(TensorKind.WEIGHT)
    assert sum(t.numel for t in weights) == 11_173_962  # running statistics are not trained
    assert not any("running" in t.id for t in weights)


@needs_importer
def test_import_options_are_forwarded():
    sgd = zoo.build("gpt2_tiny")
    adam = zoo.build("gpt2_tiny", optimizer="adam", granularity="op", dtype="bf16")
    assert sgd.name == adam.name == "gpt2_tiny"
    assert not sgd.tensors_of_kind(TensorKind.OPTIMIZER_STATE)
    assert len(adam.tensors_of_kind(TensorKind.OPTIMIZER_STATE)) == 2 * len(
        adam.tensors_of_kind(TensorKind.WEIGHT)
    )
    assert len(adam.ops_of_kind(OpKind.FORWARD)) > len(sgd.ops_of_kind(OpKind.FORWARD))
    assert adam.tensor("wte.weight").bytes == 512 * 128 * 2
    # The importer recognises the spec's Erf-GELU decomposition, once per block.
    assert sum(op.op_type == "Gelu" for op in adam.ops_of_kind(OpKind.FORWARD)) == 2
    assert zoo.mlp(depth=1, name="tiny_mlp").name == "tiny_mlp"


@needs_importer
@pytest.mark.parametrize(
    "name, params",
    [
        ("mlp", {"depth": 2, "width": 32}),
        ("resnet18", {"variant": "imagenet", "batch": 1}),
        ("resnet50", {"image": 64, "batch": 1}),
        ("vgg16", {"image": 32, "batch": 1}),
        ("mobilenet_v2", {"image": 64, "batch": 2}),
        ("gpt2", {"n_layer": 1, "d_model": 64, "n_head": 2, "seq": 8, "vocab": 50, "batch": 2}),
        ("gpt2_tiny", {"batch": 1}),
        ("gpt2_small", {"n_layer": 1, "seq": 16, "vocab": 64}),
    ],
)
def test_every_registered_model_builds(name, params):
    g = zoo.MODELS[name](**params, granularity="layer")
    model = zoo.onnx_model(name, **params)
    assert g.has_loss
    assert sum(t.numel for t in g.tensors_of_kind(TensorKind.WEIGHT)) == _trainable(model)


def test_llama_decoder_uses_the_fusions_and_the_1b_preset_is_shapes_only():
    """The Llama-style zoo entry: RMSNorm's rsqrt and the SiLU gate are fused as the
    importer fuses exported models; the 1B preset (1.26 B parameters) carries no weight
    data and imports in about a second (scripts figure, not asserted)."""
    from monet_ilp.graph import zoo as z

    tiny = z.build("llama_tiny", granularity="op")
    types = {op.op_type for op in tiny.ops}
    assert {"Silu", "Rsqrt", "Softmax", "Concat", "Neg"} <= types
    model = z.onnx_model("llama_1b")
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    graph = z.build("llama_1b")
    params = sum(t.bytes for t in graph.tensors if t.kind is TensorKind.WEIGHT) // 4
    assert 1_200_000_000 < params < 1_300_000_000
    with pytest.raises(MonetError, match="even head size"):
        z.llama_onnx(d_model=96, n_head=32)


@pytest.mark.parametrize("name", ["bert_tiny", "bert_base", "vit_tiny", "vit_ti16", "vit_b16"])
def test_bert_and_vit_build_and_import(name):
    """The encoder and the vision transformer of the zoo, at test and at trained sizes."""
    graph = zoo.build(name)
    forward = [op for op in graph.ops if op.kind is OpKind.FORWARD]
    assert forward and graph.meta.get("inference_export") is None
    weights = sum(t.bytes for t in graph.tensors if t.kind is TensorKind.WEIGHT) // 4
    expected = {"bert_base": (100e6, 140e6), "vit_b16": (80e6, 90e6), "vit_ti16": (5e6, 6e6)}
    if name in expected:
        lo, hi = expected[name]
        assert lo < weights < hi
