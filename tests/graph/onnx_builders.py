"""Small ONNX models for importer tests, written with the real onnx helper API."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def weight(name: str, shape) -> onnx.TensorProto:
    return numpy_helper.from_array(np.full(shape, 0.01, np.float32), name)


def const(name: str, value, dtype=np.float32) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [name], name=f"const_{name}", value=numpy_helper.from_array(np.asarray(value, dtype))
    )


def model(nodes, inputs, outputs, initializers=(), opset=17) -> onnx.ModelProto:
    def info(name, shape, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, shape)

    g = helper.make_graph(
        nodes,
        "test",
        [info(*spec) for spec in inputs],
        [info(*spec) for spec in outputs],
        list(initializers),
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def mlp(batch=8, sizes=(16, 32, 32, 4)) -> onnx.ModelProto:
    nodes, inits = [], []
    prev = "x"
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"b{i}"], [f"h{i}"], name=f"fc{i}", transB=1))
        inits += [weight(f"W{i}", (fan_out, fan_in)), weight(f"b{i}", (fan_out,))]
        prev = f"h{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [prev], [f"a{i}"], name=f"relu{i}"))
            prev = f"a{i}"
    nodes[-1].output[0] = "y"
    return model(nodes, [("x", [batch, sizes[0]])], [("y", [batch, sizes[-1]])], inits)


def residual_block(batch=2, c=4, hw=8) -> onnx.ModelProto:
    """conv-bn-relu -> conv-bn (+skip) -> relu -> GAP -> flatten -> gemm."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w0"], ["c0"], name="stem", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c0", "g0", "b0", "m0", "v0"], ["n0"], name="stem_bn"),
        n("Relu", ["n0"], ["r0"], name="stem_relu"),
        n("Conv", ["r0", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "g1", "b1", "m1", "v1"], ["n1"], name="bn1"),
        n("Add", ["n1", "r0"], ["s1"], name="add"),
        n("Relu", ["s1"], ["r1"], name="relu1"),
        n("GlobalAveragePool", ["r1"], ["p"], name="pool"),
        n("Flatten", ["p"], ["f"], name="flatten"),
        n("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    inits = [weight("w0", (c, 3, 3, 3)), weight("w1", (c, c, 3, 3)), weight("wf", (10, c)), weight("bf", (10,))]
    for i in (0, 1):
        inits += [weight(f"g{i}", (c,)), weight(f"b{i}", (c,)), weight(f"m{i}", (c,)), weight(f"v{i}", (c,))]
    return model(nodes, [("x", [batch, 3, hw, hw])], [("y", [batch, 10])], inits)


def gelu_decomposed(batch=2, d=8, half_first=False, order="x_first") -> onnx.ModelProto:
    """Linear -> Erf-GELU (the two products in any order) -> Linear.

    ``half_first``: ``(x * 0.5) * (1 + erf)``; ``order="half_then_x"``: torch's dynamo
    export, ``x * (0.5 * (1 + erf))``; otherwise ``(x * (1 + erf)) * 0.5``.
    """
    n = helper.make_node
    nodes = [const("sqrt2", np.sqrt(2.0)), const("one", 1.0), const("half", 0.5),
             n("MatMul", ["x", "w0"], ["h"], name="fc0")]
    if order == "half_then_x":
        nodes += [n("Div", ["h", "sqrt2"], ["hs"], name="gelu/div"),
                  n("Erf", ["hs"], ["he"], name="gelu/erf"),
                  n("Add", ["he", "one"], ["ha"], name="gelu/add"),
                  n("Mul", ["half", "ha"], ["hm"], name="gelu/mul_half"),
                  n("Mul", ["h", "hm"], ["g"], name="gelu/mul")]
    elif half_first:
        nodes += [n("Mul", ["h", "half"], ["hh"], name="gelu/mul_half"),
                  n("Div", ["h", "sqrt2"], ["hs"], name="gelu/div"),
                  n("Erf", ["hs"], ["he"], name="gelu/erf"),
                  n("Add", ["he", "one"], ["ha"], name="gelu/add"),
                  n("Mul", ["hh", "ha"], ["g"], name="gelu/mul")]
    else:
        nodes += [n("Div", ["h", "sqrt2"], ["hs"], name="gelu/div"),
                  n("Erf", ["hs"], ["he"], name="gelu/erf"),
                  n("Add", ["he", "one"], ["ha"], name="gelu/add"),
                  n("Mul", ["h", "ha"], ["hm"], name="gelu/mul"),
                  n("Mul", ["hm", "half"], ["g"], name="gelu/mul_half")]
    nodes.append(n("MatMul", ["g", "w1"], ["y"], name="fc1"))
    return model(nodes, [("x", [batch, d])], [("y", [batch, 4])], [weight("w0", (d, d)), weight("w1", (d, 4))])


def layernorm_decomposed(batch=2, t=3, d=8, opset=17) -> onnx.ModelProto:
    """The ReduceMean/Sub/Pow/Sqrt/Div decomposition of LayerNorm, then a matmul."""
    n = helper.make_node
    nodes = [
        const("two", 2.0), const("eps", 1e-5),
        n("ReduceMean", ["x"], ["mu"], name="ln/mean", axes=[-1]),
        n("Sub", ["x", "mu"], ["xc"], name="ln/sub"),
        n("Pow", ["xc", "two"], ["sq"], name="ln/pow"),
        n("ReduceMean", ["sq"], ["var"], name="ln/var", axes=[-1]),
        n("Add", ["var", "eps"], ["ve"], name="ln/add"),
        n("Sqrt", ["ve"], ["std"], name="ln/sqrt"),
        n("Div", ["xc", "std"], ["xn"], name="ln/div"),
        n("Mul", ["xn", "gamma"], ["xg"], name="ln/mul"),
        n("Add", ["xg", "beta"], ["xb"], name="ln/add_beta"),
        n("MatMul", ["xb", "w"], ["y"], name="fc"),
    ]
    return model(nodes, [("x", [batch, t, d])], [("y", [batch, t, 5])],
                 [weight("gamma", (d,)), weight("beta", (d,)), weight("w", (d, 5))], opset=opset)


def attention_with_views(batch=2, t=4, d=8, heads=2) -> onnx.ModelProto:
    """qkv matmul, Split and Reshape/Transpose views, shape arithmetic, softmax(QK^T) V."""
    n = helper.make_node
    dh = d // heads
    nodes = [
        n("MatMul", ["x", "w_qkv"], ["qkv"], name="c_attn"),
        const("split", [d, d, d], np.int64),
        n("Split", ["qkv", "split"], ["q", "k", "v"], name="split", axis=-1),
        # Shape arithmetic that must fold away: the target shape of the reshapes.
        n("Shape", ["x"], ["x_shape"], name="shape"),
        const("idx01", [0, 1], np.int64),
        n("Gather", ["x_shape", "idx01"], ["bt"], name="gather_bt"),
        const("hd", [heads, dh], np.int64),
        n("Concat", ["bt", "hd"], ["heads_shape"], name="concat_shape", axis=0),
        n("Reshape", ["q", "heads_shape"], ["q4"], name="q_reshape"),
        n("Reshape", ["k", "heads_shape"], ["k4"], name="k_reshape"),
        n("Reshape", ["v", "heads_shape"], ["v4"], name="v_reshape"),
        n("Transpose", ["q4"], ["qh"], name="q_t", perm=[0, 2, 1, 3]),
        n("Transpose", ["k4"], ["kh"], name="k_t", perm=[0, 2, 3, 1]),
        n("Transpose", ["v4"], ["vh"], name="v_t", perm=[0, 2, 1, 3]),
        n("MatMul", ["qh", "kh"], ["s"], name="scores"),
        const("scale", np.sqrt(dh)),
        n("Div", ["s", "scale"], ["ss"], name="scale_div"),
        n("Softmax", ["ss"], ["p"], name="softmax", axis=-1),
        n("MatMul", ["p", "vh"], ["o"], name="context"),
        n("Transpose", ["o"], ["ot"], name="o_t", perm=[0, 2, 1, 3]),
        const("flat", [batch, t, d], np.int64),
        n("Reshape", ["ot", "flat"], ["of"], name="o_reshape"),
        n("MatMul", ["of", "w_o"], ["y"], name="proj"),
    ]
    return model(nodes, [("x", [batch, t, d])], [("y", [batch, t, d])],
                 [weight("w_qkv", (d, 3 * d)), weight("w_o", (d, d))])


def every_op(batch=2) -> onnx.ModelProto:
    """One model touching every supported op type not covered by the models above."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        n("Sigmoid", ["c"], ["sg"], name="sigmoid"),
        n("Tanh", ["c"], ["th"], name="tanh"),
        n("Mul", ["sg", "th"], ["gate"], name="gate"),             # product of two activations
        n("LeakyRelu", ["gate"], ["lr"], name="leaky", alpha=0.1),
        n("AveragePool", ["lr"], ["ap"], name="avgpool", kernel_shape=[2, 2], strides=[2, 2]),
        n("MaxPool", ["lr"], ["mp"], name="maxpool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Sub", ["ap", "mp"], ["diff"], name="sub"),
        n("Concat", ["ap", "diff"], ["cat"], name="concat", axis=1),
        n("Identity", ["cat"], ["cat_id"], name="identity"),
        const("ratio", 0.1),
        n("Dropout", ["cat_id", "ratio"], ["drop"], name="dropout"),
        const("starts", [0], np.int64), const("ends", [4], np.int64), const("axes", [1], np.int64),
        n("Slice", ["drop", "starts", "ends", "axes"], ["sl"], name="slice"),
        n("GlobalAveragePool", ["sl"], ["gap"], name="gap"),
        const("sq_axes", [2, 3], np.int64),
        n("Squeeze", ["gap", "sq_axes"], ["flat"], name="squeeze"),
        n("Gelu", ["flat"], ["ge"], name="gelu"),
        const("two", 2.0),
        n("Div", ["ge", "two"], ["half"], name="div"),
        n("Gemm", ["half", "wf"], ["logits2d"], name="fc", transB=1),
        const("un_axes", [1], np.int64),
        n("Unsqueeze", ["logits2d", "un_axes"], ["u"], name="unsqueeze"),
        n("Squeeze", ["u", "un_axes"], ["y"], name="squeeze_back"),
    ]
    return model(nodes, [("x", [batch, 3, 8, 8])], [("y", [batch, 5])],
                 [weight("w", (4, 3, 3, 3)), weight("wf", (5, 4))], opset=20)


def dropout_mlp(batch=4, d=8, training=True, opset=17) -> onnx.ModelProto:
    """Linear -> Dropout(0.1, training_mode) -> Relu -> Linear."""
    n = helper.make_node
    nodes = [const("ratio", 0.1), const("training", training, np.bool_),
             n("MatMul", ["x", "w0"], ["h"], name="fc0"),
             n("Dropout", ["h", "ratio", "training"], ["hd"], name="drop"),
             n("Relu", ["hd"], ["r"], name="relu"),
             n("MatMul", ["r", "w1"], ["y"], name="fc1")]
    return model(nodes, [("x", [batch, d])], [("y", [batch, 4])], [weight("w0", (d, d)), weight("w1", (d, 4))],
                 opset=opset)


def folded_residual_block(batch=2, c=4, hw=8) -> onnx.ModelProto:
    """residual_block as an inference export writes it: BatchNorm folded into biased convs."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w0", "cb0"], ["c0"], name="stem", pads=[1, 1, 1, 1]),
        n("Relu", ["c0"], ["r0"], name="stem_relu"),
        n("Conv", ["r0", "w1", "cb1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("Add", ["c1", "r0"], ["s1"], name="add"),
        n("Relu", ["s1"], ["r1"], name="relu1"),
        n("GlobalAveragePool", ["r1"], ["p"], name="pool"),
        n("Flatten", ["p"], ["f"], name="flatten"),
        n("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    inits = [weight("w0", (c, 3, 3, 3)), weight("cb0", (c,)), weight("w1", (c, c, 3, 3)), weight("cb1", (c,)),
             weight("wf", (10, c)), weight("bf", (10,))]
    return model(nodes, [("x", [batch, 3, hw, hw])], [("y", [batch, 10])], inits)
