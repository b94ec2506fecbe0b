"""ONNX import: autodiff rules, fusion, views, constants and every bad-input case."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from monet_ilp.errors import GraphError, InputFormatError, MonetError, UnsupportedOpError
from monet_ilp.graph import OpKind, TensorKind, from_onnx
from monet_ilp.graph.ir import DType

from . import onnx_builders as ob


def _forward(g):
    return [op for op in g.ops if op.kind is OpKind.FORWARD]


@pytest.mark.parametrize("granularity", ["layer", "op"])
def test_mlp_ops_and_saved_tensors(granularity):
    g = from_onnx(ob.mlp(), granularity=granularity)
    fwd = _forward(g)
    assert len(fwd) == (3 if granularity == "layer" else 5)
    # The first layer reads the input, which needs no gradient: no MACs for it in dX.
    assert "grad(x)" not in {t.id for t in g.tensors}
    assert all(op.macs == 0 for op in g.ops if op.id == "dX:fc0")
    assert {t.id for t in g.saved_tensors()} == {"x", "a0", "a1", "labels", "loss.log_probs"}
    # Forward MACs are the sum of the three products; backward doubles them, minus fc0's dX.
    fwd_macs = 8 * (16 * 32 + 32 * 32 + 32 * 4)
    assert sum(op.macs for op in fwd) == fwd_macs
    assert sum(op.macs for op in g.ops if op.is_backward) == 2 * fwd_macs - 8 * 16 * 32


def test_granularities_agree_on_work_and_saved_bytes():
    layer, op = (from_onnx(ob.residual_block(), granularity=k) for k in ("layer", "op"))
    assert sum(o.macs for o in layer.ops) == sum(o.macs for o in op.ops)
    assert sum(t.bytes for t in layer.saved_tensors()) == sum(t.bytes for t in op.saved_tensors())
    assert len(_forward(layer)) < len(_forward(op))


def test_layer_fusion_absorbs_tails_and_stops_at_branches():
    g = from_onnx(ob.residual_block(), granularity="layer")
    members = {op.id: op.members for op in _forward(g)}
    assert members["F:stem"] == ("stem", "stem_bn", "stem_relu")
    # conv1's tail runs through the residual add and the relu.
    assert members["F:conv1"] == ("conv1", "bn1", "add", "relu1", "pool")
    # Both readers of the stem's output sit in one layer: one gradient comes back.
    assert [t for t in g.op("dX:stem").inputs if t.startswith("grad(r0)")] == ["grad(r0)"]
    # Per op, the stem's output feeds conv1 and the skip: two partial gradients, both summed.
    per_op = from_onnx(ob.residual_block(), granularity="op")
    partials = [t for t in per_op.op("dX:stem_relu").inputs if t.startswith("grad(r0)")]
    assert sorted(partials) == ["grad(r0)@add", "grad(r0)@conv1"]


def test_batchnorm_saves_input_and_statistics():
    g = from_onnx(ob.residual_block(), granularity="op")
    saved = {t.id for t in g.saved_tensors()}
    assert {"c0", "stem_bn.stats", "c1", "bn1.stats"} <= saved
    stats = g.tensor("bn1.stats")
    assert stats.bytes == 2 * 4 * 4  # mean and invstd, 4 channels, fp32
    # Running statistics are buffers, not trained weights.
    weights = {t.id for t in g.tensors_of_kind(TensorKind.WEIGHT)}
    assert "m0" not in weights and "g0" in weights


@pytest.mark.parametrize(("half_first", "order"), [(False, "x_first"), (True, "x_first"), (False, "half_then_x")])
def test_erf_gelu_decomposition_is_one_gelu(half_first, order):
    g = from_onnx(ob.gelu_decomposed(half_first=half_first, order=order), granularity="op")
    types = [op.op_type for op in _forward(g)]
    assert types == ["MatMul", "Gelu", "MatMul"]
    gelu = next(op for op in _forward(g) if op.op_type == "Gelu")
    assert len(gelu.members) == 5
    # GELU saves its input (the matmul output).
    assert "h" in {t.id for t in g.saved_tensors()}


@pytest.mark.parametrize("opset", [17])
def test_layernorm_decomposition_is_one_layernorm(opset):
    g = from_onnx(ob.layernorm_decomposed(opset=opset), granularity="op")
    fwd = _forward(g)
    assert [op.op_type for op in fwd] == ["LayerNormalization", "MatMul"]
    ln = fwd[0]
    assert set(ln.inputs) == {"x", "gamma", "beta"}
    assert len(ln.members) == 9
    dw = g.op(f"dW:{ln.layer}")
    assert {"grad(gamma)", "grad(beta)"} == set(dw.outputs)


def test_views_alias_and_shape_arithmetic_folds():
    g = from_onnx(ob.attention_with_views(), granularity="op")
    types = [op.op_type for op in _forward(g)]
    assert types == ["MatMul", "MatMul", "Div", "Softmax", "MatMul", "MatMul"]
    # Split/Reshape/Transpose are views of qkv: q, k and v are all the qkv tensor.
    scores = next(op for op in _forward(g) if op.id == "F:scores")
    assert scores.inputs == ("qkv",)
    assert scores.macs == 2 * 2 * 4 * 4 * 4  # batch*heads, T x T, dh
    assert {"qkv", "p"} <= {t.id for t in g.saved_tensors()}


def test_layer_granularity_fuses_attention_scores_with_softmax():
    g = from_onnx(ob.attention_with_views(), granularity="layer")
    assert [op.op_type for op in _forward(g)] == ["MatMul", "MatMul+Div+Softmax", "MatMul", "MatMul"]


@pytest.mark.parametrize("optimizer,states", [("sgd", 0), ("momentum", 1), ("adam", 2)])
def test_optimizer_state_per_weight(optimizer, states):
    g = from_onnx(ob.mlp(), optimizer=optimizer)
    weights = g.tensors_of_kind(TensorKind.WEIGHT)
    assert len(g.tensors_of_kind(TensorKind.OPTIMIZER_STATE)) == states * len(weights)
    updates = g.ops_of_kind(OpKind.OPTIMIZER)
    assert len(updates) == len(weights)
    for op in updates:
        assert op.updates[0] in {w.id for w in weights} and len(op.updates) == 1 + states
    assert sum(t.bytes for t in g.tensors_of_kind(TensorKind.WEIGHT_GRAD)) == sum(w.bytes for w in weights)


def test_dtype_override_scales_float_tensors_only():
    fp32 = from_onnx(ob.mlp())
    bf16 = from_onnx(ob.mlp(), dtype="bf16")
    assert bf16.tensor("a0").bytes * 2 == fp32.tensor("a0").bytes
    assert bf16.tensor("labels").bytes == fp32.tensor("labels").bytes  # int64 stays


def test_loaded_from_file_and_round_trips(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(ob.mlp(), path)
    g = from_onnx(path)
    assert g.name == "mlp"
    again = type(g).from_dict(g.to_dict())
    assert again == g


# ----------------------------------------------------------------- bad input
def test_unknown_op_names_type_and_node():
    m = ob.mlp()
    m.graph.node[1].op_type = "Swish"
    with pytest.raises(UnsupportedOpError) as err:
        from_onnx(m)
    assert "'Swish'" in str(err.value) and "relu0" in str(err.value) and "--allow-unknown" in str(err.value)


def test_allow_unknown_treats_op_as_elementwise():
    m = ob.mlp()
    m.graph.node[1].op_type = "Swish"
    g = from_onnx(m, allow_unknown=True, granularity="op")
    assert g.meta["unknown_ops"] == ["relu0:Swish"]
    assert g.op("F:relu0").op_type == "Elementwise"


def _topk_model() -> onnx.ModelProto:
    """x -> Gemm -> TopK (a standard op without an autodiff rule, two outputs) -> Relu."""
    nodes = [
        helper.make_node("Gemm", ["x", "W"], ["h"], name="fc"),
        helper.make_node("TopK", ["h", "k"], ["values", "indices"], name="topk"),
        helper.make_node("Relu", ["values"], ["y"], name="relu"),
    ]
    k = helper.make_tensor("k", onnx.TensorProto.INT64, [1], [8])
    return ob.model(nodes, [("x", [4, 8])], [("y", [4, 8])], [ob.weight("W", [8, 8]), k])


@pytest.mark.parametrize("from_file", [False, True])
def test_allow_unknown_emits_no_python_warning(tmp_path, from_file):
    """The unknown op is reported in meta only; the CLI prints its own note from it."""
    model = _topk_model()
    if from_file:
        onnx.save(model, tmp_path / "topk.onnx")
        model = tmp_path / "topk.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning, from us, onnx or numpy, fails
        g = from_onnx(model, allow_unknown=True, granularity="op")
    assert g.meta["unknown_ops"] == ["topk:TopK"]
    assert g.op("F:topk").op_type == "Elementwise"


def test_truncated_onnx_file(tmp_path):
    path = tmp_path / "cut.onnx"
    data = ob.mlp().SerializeToString()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(InputFormatError) as err:
        from_onnx(path)
    assert str(path) in str(err.value) and "fix:" in str(err.value)


def test_garbage_onnx_file(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\xff\x00 this is not protobuf \x13\x37" * 10)
    with pytest.raises(InputFormatError, match="junk.onnx"):
        from_onnx(path)


def test_missing_file():
    with pytest.raises(InputFormatError, match="file not found"):
        from_onnx("/nonexistent/model.onnx")


def test_cycle_is_reported_with_node_names():
    m = ob.mlp()
    # fc0 now reads relu1's output: fc0 -> relu0 -> fc1 -> relu1 -> fc0.
    m.graph.node[0].input[0] = "a1"
    with pytest.raises(GraphError, match="cycle") as err:
        from_onnx(m)
    assert "fc0" in str(err.value)


def test_symbolic_batch_needs_a_static_shape():
    m = ob.mlp()
    dim = m.graph.input[0].type.tensor_type.shape.dim[0]
    dim.Clear()
    dim.dim_param = "N"
    with pytest.raises(GraphError, match="symbolic") as err:
        from_onnx(m)
    assert "--batch" in str(err.value)
    assert from_onnx(m, batch=8).tensor("x").shape == (8, 16)
    assert from_onnx(m, input_shapes={"x": [3, 16]}).tensor("x").shape == (3, 16)


def test_zero_size_input_is_rejected():
    m = ob.mlp()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 0
    with pytest.raises(GraphError, match="zero"):
        from_onnx(m)


def test_missing_required_input():
    m = ob.mlp()
    del m.graph.node[0].input[1:]  # Gemm without B
    with pytest.raises(MonetError, match="fc0"):
        from_onnx(m)


def test_dead_node_has_no_path_to_loss():
    m = ob.mlp()
    m.graph.node.append(helper.make_node("Relu", ["a0"], ["dead"], name="dead_relu"))
    with pytest.raises(GraphError, match="no path to the loss") as err:
        from_onnx(m, granularity="op")
    assert "dead_relu" in str(err.value)


def test_several_outputs_need_a_choice():
    m = ob.mlp()
    m.graph.output.append(helper.make_tensor_value_info("a0", onnx.TensorProto.FLOAT, [8, 32]))
    with pytest.raises(GraphError, match="2 outputs"):
        from_onnx(m)
    with pytest.raises(MonetError, match="not a model output"):
        from_onnx(m, output="nope")
    # Choosing the logits leaves a0 feeding fc1 as before.
    assert from_onnx(m, output="y").has_loss


def test_bad_options():
    with pytest.raises(MonetError, match="granularity"):
        from_onnx(ob.mlp(), granularity="block")
    with pytest.raises(MonetError, match="optimizer"):
        from_onnx(ob.mlp(), optimizer="lion")
    with pytest.raises(MonetError, match="dtype"):
        from_onnx(ob.mlp(), dtype="int64")


@pytest.mark.parametrize("granularity", ["layer", "op"])
def test_every_supported_op_imports(granularity):
    g = from_onnx(ob.every_op(), granularity=granularity)
    ops = {m for op in _forward(g) for m in op.members}
    compute = {"conv", "sigmoid", "tanh", "gate", "leaky", "avgpool", "maxpool", "sub", "concat", "gap",
               "gelu", "div", "fc"}
    assert ops == compute  # views (identity, dropout, slice, squeeze, unsqueeze) leave no op
    saved = {t.id for t in g.saved_tensors()}
    # Sigmoid and tanh save outputs, the gate product saves both, leaky ReLU and
    # average pooling their input, max pooling input and indices, GELU its input
    # (a squeezed view of the pooled tensor, so the pooled tensor itself).
    assert {"sg", "th", "gate", "lr", "maxpool.indices", "gap"} <= saved
    # Sub and Concat save nothing; the concatenation is saved only as the pooled input.
    assert "diff" not in saved and "cat" in saved
    assert g.tensor("maxpool.indices").dtype.value == "int64"


def _reshaping_mlp() -> onnx.ModelProto:
    """A Gemm whose output a Reshape reads with its target shape in an int64 initializer:
    the constant the importer must read even when the exporter moved it to a data file."""
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="fc", transB=1),
             helper.make_node("Reshape", ["h", "shape"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    inits = [ob.weight("W", (16, 8)), ob.weight("b", (16,)),
             numpy_helper.from_array(np.array([4, 8, 4], np.int64), "shape")]
    return ob.model(nodes, [("x", [2, 8])], [("y", [4, 8, 4])], inits)


@pytest.mark.parametrize("one_file", [True, False])
def test_weights_in_external_data_files_next_to_the_model(tmp_path, one_file):
    """Issue: torch's dynamo exporter writes every initializer to a data file; the
    importer read the constants without it ("not a regular file")."""
    inline = from_onnx(_reshaping_mlp())
    path = tmp_path / "model.onnx"
    onnx.save_model(_reshaping_mlp(), str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
                    location="model.onnx.data", size_threshold=0)
    assert onnx.load(str(path), load_external_data=False).graph.initializer[2].data_location == \
        onnx.TensorProto.EXTERNAL
    graph = from_onnx(path)
    assert [(op.id, op.flops) for op in graph.ops] == [(op.id, op.flops) for op in inline.ops]
    assert [(t.id, t.shape, t.bytes) for t in graph.tensors] == [(t.id, t.shape, t.bytes) for t in inline.tensors]


def test_a_missing_external_data_file_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save_model(_reshaping_mlp(), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(InputFormatError) as err:
        from_onnx(path)
    assert "weights.bin" in str(err.value) and "next to the model" in str(err.value)
    assert err.value.field == "graph.initializer.shape"


def _token_type_embedding(batch=2, t=5, d=8) -> onnx.ModelProto:
    """The shape arithmetic TorchScript exports for BERT's token-type ids: a buffer sliced
    and expanded to the run-time shape of the input ids (Shape -> Gather -> Unsqueeze ->
    Concat, then torch's -1 handling Equal/Where -> Expand), then an embedding lookup.
    Every shape is static given the ids', but ONNX's data propagation stops at Where."""
    n = helper.make_node
    nodes = [
        n("Gather", ["W_tok", "ids"], ["tok"], name="tok_embed"),
        n("Shape", ["ids"], ["ids_shape"], name="shape"),
        ob.const("zero", 0, np.int64), ob.const("one", 1, np.int64), ob.const("axes0", [0], np.int64),
        n("Gather", ["ids_shape", "zero"], ["b"], name="get_b", axis=0),
        n("Gather", ["ids_shape", "one"], ["s"], name="get_s", axis=0),
        n("Unsqueeze", ["b", "axes0"], ["b1"], name="unsq_b"),
        n("Unsqueeze", ["s", "axes0"], ["s1"], name="unsq_s"),
        ob.const("starts", [0], np.int64), ob.const("axes1", [1], np.int64),
        n("Slice", ["buffer", "starts", "s1", "axes1"], ["sliced"], name="slice"),
        n("Concat", ["b1", "s1"], ["dims"], name="concat", axis=0),
        # torch's expand(-1 -> keep): where(dims == -1, 1, dims), ones from the dims' shape
        n("Shape", ["dims"], ["dims_shape"], name="dims_shape"),
        n("ConstantOfShape", ["dims_shape"], ["ones"], name="ones",
          value=numpy_helper.from_array(np.array([1], np.int64))),
        ob.const("minus_one", -1, np.int64),
        n("Mul", ["ones", "minus_one"], ["negs"], name="negs"),
        n("Equal", ["dims", "negs"], ["is_neg"], name="is_neg"),
        n("Where", ["is_neg", "ones", "dims"], ["target"], name="where"),
        n("Expand", ["sliced", "target"], ["type_ids"], name="expand"),
        n("Gather", ["W_type", "type_ids"], ["typ"], name="type_embed"),
        n("Add", ["tok", "typ"], ["y"], name="add"),
    ]
    inits = [ob.weight("W_tok", (32, d)), ob.weight("W_type", (2, d)),
             numpy_helper.from_array(np.zeros((1, 16), np.int64), "buffer")]
    g = helper.make_graph(nodes, "tt", [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [batch, t])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_shape_subgraphs_are_folded_so_their_results_have_static_shapes():
    """Issue: BERT's TorchScript export failed with a Gather output of "no static shape"
    although every input shape is static (pipeline step 1, _fold_constants)."""
    graph = from_onnx(_token_type_embedding())
    typ = next(op for op in graph.ops if op.id.endswith("type_embed") or "type_embed" in op.members)
    assert graph.tensor(typ.outputs[0]).shape == (2, 5, 8)
    assert not any("shape" in op.members or "expand" in op.members for op in graph.ops)  # constants, not ops


def test_dropout_in_training_mode_saves_a_one_byte_mask_and_not_its_input():
    """As the fused kernel (native_dropout) saves it; the backward reads only the mask."""
    g = from_onnx(ob.dropout_mlp(training=True), granularity="op")
    assert [op.op_type for op in _forward(g)] == ["MatMul", "Dropout", "Relu", "MatMul"]
    drop = next(op for op in _forward(g) if op.op_type == "Dropout")
    mask = g.tensor(drop.outputs[1])
    assert mask.dtype is DType.BOOL and mask.shape == (4, 8) and mask.bytes == 32
    saved = {t.id for t in g.saved_tensors()}
    assert mask.id in saved and "h" not in saved  # the Relu saves its output, not h
    assert any(mask.id in op.inputs for op in g.ops if op.is_backward)


def test_dropout_saves_noise_of_the_input_type_as_torch_on_the_cpu():
    """torch's eager CPU dropout saves the scaled noise it multiplies by, not a bool mask."""
    g = from_onnx(ob.dropout_mlp(training=True), granularity="op", dropout_mask="noise")
    drop = next(op for op in _forward(g) if op.op_type == "Dropout")
    mask = g.tensor(drop.outputs[1])
    assert mask.dtype is DType.FP32 and mask.bytes == 4 * 32
    with pytest.raises(MonetError, match="dropout_mask"):
        from_onnx(ob.dropout_mlp(training=True), dropout_mask="float")


def test_dropout_in_eval_mode_is_a_view():
    g = from_onnx(ob.dropout_mlp(training=False), granularity="op")
    assert [op.op_type for op in _forward(g)] == ["MatMul", "Relu", "MatMul"]


def _rotary_like(batch=2, t=4, d=8) -> onnx.ModelProto:
    """q = x W; y = q * cos + q (cos a float table the exporter folded into an initializer)."""
    n = helper.make_node
    nodes = [n("MatMul", ["x", "W"], ["q"], name="proj"),
             n("Mul", ["q", "cos"], ["qc"], name="rot"),
             n("Add", ["qc", "q"], ["y"], name="add")]
    inits = [ob.weight("W", (d, d)), numpy_helper.from_array(np.ones((1, t, d), np.float32), "cos")]
    return ob.model(nodes, [("x", [batch, t, d])], [("y", [batch, t, d])], inits)


def test_trainable_names_make_other_float_initializers_constants():
    """A folded rotary table is no weight: with the trained names given (or recorded in the
    model's metadata by export_for_training), it gets no gradient and the Mul saves nothing
    for it; by default (any float initializer with > 1 element) it is a weight."""
    guessed = from_onnx(_rotary_like(), granularity="op")
    assert {t.id for t in guessed.tensors_of_kind(TensorKind.WEIGHT)} == {"W", "cos"}
    assert "q" in {t.id for t in guessed.saved_tensors()}  # for cos's gradient
    told = from_onnx(_rotary_like(), granularity="op", trainable=["W"])
    assert {t.id for t in told.tensors_of_kind(TensorKind.WEIGHT)} == {"W"}
    assert "q" not in {t.id for t in told.saved_tensors()}
    proto = _rotary_like()
    proto.metadata_props.add(key="monet_ilp.trainable", value='["W"]')
    recorded = from_onnx(proto, granularity="op")
    assert {t.id for t in recorded.tensors_of_kind(TensorKind.WEIGHT)} == {"W"}


@pytest.mark.parametrize(("names", "message"), [(["W", "nope"], "not initializers"), (["W", "cos", 3], "list")])
def test_bad_trainable_names_say_which(names, message):
    with pytest.raises(InputFormatError) as err:
        from_onnx(_rotary_like(), trainable=names)
    assert message in str(err.value) and err.value.field == "trainable"


def test_silu_rsqrt_and_no_op_casts_are_what_pytorch_saves():
    """x * Sigmoid(x) is one SiLU saving x; Sqrt -> Reciprocal one rsqrt saving its output;
    a Cast to the type a tensor has is a view (torch's .to(dtype) returns the tensor)."""
    n = helper.make_node
    to_float = onnx.TensorProto.FLOAT
    nodes = [n("MatMul", ["x", "W"], ["h"], name="fc"),
             n("Sigmoid", ["h"], ["s"], name="act/sigmoid"), n("Mul", ["h", "s"], ["a"], name="act/mul"),
             n("Cast", ["a"], ["ac"], name="cast", to=to_float),
             n("Mul", ["ac", "ac"], ["sq"], name="square"),
             n("Sqrt", ["sq"], ["r"], name="norm/sqrt"), n("Reciprocal", ["r"], ["inv"], name="norm/recip"),
             n("Mul", ["ac", "inv"], ["y"], name="scale")]
    g = from_onnx(ob.model(nodes, [("x", [2, 8])], [("y", [2, 8])], [ob.weight("W", (8, 8))]), granularity="op")
    types = [op.op_type for op in _forward(g)]
    assert types == ["MatMul", "Silu", "Mul", "Rsqrt", "Mul"]
    saved = {t.id for t in g.saved_tensors()}
    assert "h" in saved and "s" not in saved and "r" not in saved and "inv" in saved
    assert "ac" not in {t.id for t in g.tensors}  # the Cast made no tensor


def test_split_to_sequence_and_sequence_at_are_views():
    """torch's dynamo exporter without its optimiser writes tensor.split as
    SplitToSequence + SequenceAt: both alias their input, like Split."""
    n = helper.make_node
    nodes = [n("MatMul", ["x", "W"], ["qk"], name="proj"),
             ob.const("four", [4, 4], np.int64), ob.const("zero", 0, np.int64), ob.const("one", 1, np.int64),
             n("SplitToSequence", ["qk", "four"], ["seq"], name="split", axis=1),
             n("SequenceAt", ["seq", "zero"], ["q"], name="at0"),
             n("SequenceAt", ["seq", "one"], ["k"], name="at1"),
             n("Mul", ["q", "k"], ["y"], name="mul")]
    g = from_onnx(ob.model(nodes, [("x", [2, 8])], [("y", [2, 4])], [ob.weight("W", (8, 8))]), granularity="op")
    assert [op.op_type for op in _forward(g)] == ["MatMul", "Mul"]
    mul = _forward(g)[1]
    assert mul.inputs == ("qk",) or set(mul.inputs) == {"qk"}


def _between_matmuls(op_nodes, out="y", out_shape=(2, 8), extra_inits=()):
    """x -> MatMul(W) -> h (and h2 = x W2) -> op_nodes -> ``out`` -> MatMul(V) -> logits."""
    n = helper.make_node
    second = any("h2" in node.input for node in op_nodes)
    nodes = [n("MatMul", ["x", "W"], ["h"], name="fc"),
             *([n("MatMul", ["x", "W2"], ["h2"], name="fc2")] if second else []),
             *op_nodes, n("MatMul", [out, "V"], ["logits"], name="head")]
    inits = [ob.weight("W", (8, 8)), *([ob.weight("W2", (8, 8))] if second else []),
             ob.weight("V", (out_shape[-1], 4)), *extra_inits]
    return ob.model(nodes, [("x", [2, 8])], [("logits", [2, 4])], inits, opset=18)


_N = helper.make_node
#: op -> (its nodes, the tensors its backward reads besides x and the head's input y)
RULE_CASES = {
    "HardSwish": ([_N("HardSwish", ["h"], ["y"], name="op")], {"h"}),
    "HardSigmoid": ([_N("HardSigmoid", ["h"], ["y"], name="op")], {"h"}),
    "Softplus": ([_N("Softplus", ["h"], ["y"], name="op")], {"h"}),
    "Mish": ([_N("Mish", ["h"], ["y"], name="op")], {"h"}),
    "Max": ([_N("Max", ["h", "h2"], ["y"], name="op")], {"h", "h2"}),
    "Min": ([_N("Min", ["h", "h2"], ["y"], name="op")], {"h", "h2"}),
    "Where": ([_N("Greater", ["h", "h2"], ["c"], name="cmp"), _N("Where", ["c", "h", "h2"], ["y"], name="op")],
              {"c"}),
    "Pad": ([ob.const("pads", [0, 0, 0, 0], np.int64), _N("Pad", ["h", "pads"], ["y"], name="op")], set()),
    "Trilu": ([_N("Trilu", ["h"], ["y"], name="op")], set()),
    "GatherElements": ([ob.const("idx", np.zeros((2, 8)), np.int64),
                        _N("GatherElements", ["h", "idx"], ["y"], name="op", axis=1)], set()),
    "ScatterND": ([ob.const("where", [[0]], np.int64),
                   _N("Slice", ["h2", "s0", "s1"], ["row"], name="row"),
                   _N("Reshape", ["row", "shape8"], ["upd"], name="upd"),
                   ob.const("s0", [0], np.int64), ob.const("s1", [1], np.int64), ob.const("shape8", [1, 8], np.int64),
                   _N("ScatterND", ["h", "where", "upd"], ["y"], name="op")], set()),
}


@pytest.mark.parametrize("op", sorted(RULE_CASES))
def test_autodiff_rules_save_what_pytorch_saves(op):
    """TG.T1's rows for the ops transformers, vision and recommender exports use."""
    nodes, expected = RULE_CASES[op]
    g = from_onnx(_between_matmuls(nodes), granularity="op")
    assert any(o.op_type == op for o in _forward(g))
    saved = {t.id for t in g.saved_tensors()} - {"x", "y", "labels", "loss.log_probs"}
    assert saved == expected


def test_reduce_max_saves_its_input_and_result_and_expand_is_a_view():
    n = helper.make_node
    nodes = [ob.const("axes", [1], np.int64), n("ReduceMax", ["h", "axes"], ["m"], name="op", keepdims=1),
             ob.const("shape", [2, 8], np.int64), n("Expand", ["m", "shape"], ["y"], name="expand")]
    g = from_onnx(_between_matmuls(nodes), granularity="op")
    assert [o.op_type for o in _forward(g)] == ["MatMul", "MatMul", "ReduceMax", "MatMul"] or \
        [o.op_type for o in _forward(g)] == ["MatMul", "ReduceMax", "MatMul"]
    saved = {t.id for t in g.saved_tensors()}
    assert {"h", "m"} <= saved and "y" not in {t.id for t in g.tensors}  # Expand made no tensor


def test_an_inference_export_is_recognised_and_a_training_one_is_not():
    """Issue: eval-mode exports (BatchNorm folded into the convolutions, Dropout off)
    imported silently with 34-52 % fewer saved bytes."""
    folded = from_onnx(ob.folded_residual_block())
    assert any("BatchNorm folded" in reason for reason in folded.meta["inference_export"])
    assert "inference_export" not in from_onnx(ob.residual_block()).meta
    assert "inference_export" not in from_onnx(ob.dropout_mlp(training=True)).meta
    assert any("inference mode" in reason for reason in from_onnx(ob.dropout_mlp(training=False)).meta[
        "inference_export"])


def _image_op(nodes, inits, out_shape, opset=18):
    """x (2, 4, 6, 6) -> nodes -> ``y`` -> GlobalAveragePool -> Flatten -> Gemm (10 classes)."""
    n = helper.make_node
    channels = out_shape[1]
    tail = [n("GlobalAveragePool", ["y"], ["p"], name="pool"), n("Flatten", ["p"], ["f"], name="flatten"),
            n("Gemm", ["f", "wf"], ["logits"], name="fc", transB=1)]
    return ob.model([*nodes, *tail], [("x", [2, 4, 6, 6])], [("logits", [2, 10])],
                    [*inits, ob.weight("wf", (10, channels))], opset=opset)


def test_conv_transpose_counts_macs_per_input_element_and_saves_like_a_conv():
    n = helper.make_node
    model = _image_op([n("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2])],
                      [ob.weight("w", (4, 3, 2, 2))], (2, 3, 12, 12))
    g = from_onnx(model, granularity="op")
    up = next(op for op in _forward(g) if op.op_type == "ConvTranspose")
    assert up.macs == 2 * 4 * 6 * 6 * 3 * 2 * 2  # numel(x) * C_out * kernel
    assert "x" in {t.id for t in g.saved_tensors()}


@pytest.mark.parametrize(("op", "attrs", "groups"), [("InstanceNormalization", {}, 2 * 4),
                                                     ("GroupNormalization", {"num_groups": 2}, 2 * 2)])
def test_instance_and_group_norm_save_input_and_two_statistics_per_group(op, attrs, groups):
    n = helper.make_node
    size = 2 if op == "GroupNormalization" else 4  # opset 18's GroupNorm: scale and bias per group
    model = _image_op([n(op, ["x", "s", "b"], ["y"], name="norm", **attrs)],
                      [ob.weight("s", (size,)), ob.weight("b", (size,))], (2, 4, 6, 6))
    g = from_onnx(model, granularity="op")
    stats = g.tensor("norm.stats")
    assert stats.shape == (2, groups) and {"x", "norm.stats"} <= {t.id for t in g.saved_tensors()}


def test_lrn_saves_what_pytorchs_composite_saves():
    n = helper.make_node
    model = _image_op([n("Conv", ["x", "wc"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                       n("LRN", ["c"], ["y"], name="lrn", size=3)], [ob.weight("wc", (4, 4, 3, 3))], (2, 4, 6, 6))
    g = from_onnx(model, granularity="op")
    saved = {t.id for t in g.saved_tensors()}
    assert {"c", "lrn.base", "lrn.denominator"} <= saved
    assert g.tensor("lrn.base").bytes == g.tensor("c").bytes


@pytest.mark.parametrize(("equation", "macs"), [("bij,bjk->bik", 2 * 8 * 8 * 8), ("...ij,...jk->...ik", 2 * 8 * 8 * 8)])
def test_einsum_is_a_contraction(equation, macs):
    n = helper.make_node
    nodes = [n("MatMul", ["x", "W"], ["h"], name="fc"), n("MatMul", ["x", "W2"], ["h2"], name="fc2"),
             ob.const("shape", [2, 8, 1], np.int64), n("Reshape", ["h", "shape"], ["a"], name="ra"),
             ob.const("shape2", [2, 1, 8], np.int64), n("Reshape", ["h2", "shape2"], ["b"], name="rb"),
             n("Einsum", ["a", "b"], ["e"], name="outer", equation=equation),
             n("Einsum", ["e", "e"], ["y"], name="op", equation=equation),
             ob.const("flat", [2, 64], np.int64), n("Reshape", ["y", "flat"], ["yf"], name="rf"),
             n("MatMul", ["yf", "V"], ["logits"], name="head")]
    inits = [ob.weight("W", (8, 8)), ob.weight("W2", (8, 8)), ob.weight("V", (64, 4))]
    g = from_onnx(ob.model(nodes, [("x", [2, 8])], [("logits", [2, 4])], inits, opset=18), granularity="op")
    square = next(op for op in _forward(g) if op.op_type == "Einsum" and "op" in op.members)
    assert square.macs == macs
    assert "e" in {t.id for t in g.saved_tensors()}


def test_a_gather_at_a_scalar_index_is_a_select_view():
    """x[:, 0] (a ViT's class token) is PyTorch's select: a view keeping its base alive;
    a gather of several indices stays a copy."""
    n = helper.make_node
    nodes = [ob.const("zero", 0, np.int64), ob.const("shape", [2, 2, 4], np.int64),
             n("Reshape", ["h", "shape"], ["h3"], name="r"),
             n("Gather", ["h3", "zero"], ["y"], name="select", axis=1)]
    g = from_onnx(_between_matmuls(nodes, out_shape=(2, 4)), granularity="op")
    assert [op.op_type for op in _forward(g)] == ["MatMul", "MatMul"]
    head = _forward(g)[-1]
    assert "h" in head.inputs  # the head reads the whole base


def test_the_sdpa_decomposition_is_one_fused_attention_saving_no_attention_matrix():
    """torch's scaled_dot_product_attention as exporters write it (the scale's root on q
    and on kᵀ) is one Attention op that saves q, k, v, the output and the row log-sum-exp,
    as PyTorch's fused kernel does; eager attention (the scale on the scores) is not."""
    n = helper.make_node
    nodes = [ob.const("shape", [2, 2, 2, 4], np.int64), ob.const("root", 0.5),
             n("Reshape", ["h", "shape"], ["q"], name="q"), n("Reshape", ["h2", "shape"], ["k"], name="k"),
             n("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
             n("Mul", ["q", "root"], ["qs"], name="attn/mul_q"), n("Mul", ["kt", "root"], ["ks"], name="attn/mul_k"),
             n("MatMul", ["qs", "ks"], ["scores"], name="attn/scores"),
             n("Softmax", ["scores"], ["p"], name="attn/softmax", axis=-1),
             n("MatMul", ["p", "q"], ["o"], name="attn/context"),
             ob.const("flat", [2, 8], np.int64), n("Reshape", ["o", "flat"], ["y"], name="merge")]
    g = from_onnx(_between_matmuls(nodes), granularity="op")
    attention = next(op for op in _forward(g) if op.op_type == "Attention")
    assert len(attention.members) == 5
    saved = {t.id for t in g.saved_tensors()}
    assert "p" not in saved and "scores" not in saved
    assert {"h", "h2", "o", attention.outputs[1]} <= saved  # q, k, v (views of h, h2), out, logsumexp
    assert g.tensor(attention.outputs[1]).shape == (2, 2, 2)


def test_a_reshape_of_a_broadcast_is_a_copy():
    """Grouped-query attention's repeat_kv: Unsqueeze -> Expand (grows) -> clone -> Reshape.
    PyTorch cannot view the broadcast, so the reshape copies: a tensor of its own, which
    the next matmul saves; an Expand alone stays a view."""
    n = helper.make_node
    nodes = [ob.const("axes", [1], np.int64), ob.const("wide", [2, 2, 8], np.int64), ob.const("flat", [2, 16], np.int64),
             n("Unsqueeze", ["h", "axes"], ["u"], name="unsqueeze"),
             n("Expand", ["u", "wide"], ["e"], name="expand"),
             n("Identity", ["e"], ["c"], name="clone"),
             n("Reshape", ["c", "flat"], ["y"], name="repeat")]
    g = from_onnx(_between_matmuls(nodes, out_shape=(2, 16)), granularity="op")
    copy = next(op for op in _forward(g) if op.outputs[0] == "y")
    assert copy.op_type == "Reshape" and copy.inputs == ("h",) and g.tensor("y").shape == (2, 16)
    assert "y" in {t.id for t in g.saved_tensors()}
