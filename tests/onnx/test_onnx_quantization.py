"""sf.onnx's quantization converters (`stageflow/onnx/ops/quantization.py`) and
CausalConvWithState (`causal_conv.py`) against ONNX's NumPy reference: rounding half to even,
saturation, per-axis and blocked scales, the integer products of QLinearMatMul and
QLinearConv, compiled and interpreted.

(Named test_onnx_quantization: test file names are unique across the test folders.)"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf

RNG = np.random.default_rng(35)


def _model(nodes: Sequence[onnx.NodeProto], inputs: dict[str, np.ndarray],
           outputs: Sequence[str], weights: dict[str, np.ndarray] | None = None,
           opset: int = 21, shapes: dict[str, Sequence] | None = None) -> onnx.ModelProto:
    shapes = shapes or {}
    graph = helper.make_graph(
        list(nodes), "g",
        [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                       shapes.get(name, a.shape)) for name, a in inputs.items()],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        [numpy_helper.from_array(a, name) for name, a in (weights or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, inputs: dict[str, np.ndarray],
           jits: Sequence[bool] = (True, False), atol: float = 0) -> None:
    expected = ReferenceEvaluator(model).run(None, inputs)
    for jit in jits:
        got = sf.onnx.load(model, jit=jit)(*inputs.values())
        got = got if isinstance(got, list | tuple) else (got,)
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).dtype == e.dtype
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-6, atol=atol)


def test_quantize_rounds_half_to_even_saturates_per_axis_and_blocked():
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 300.0],
                  [-300.0, 3.49, 4.5, 5.5, 1e5, -1e5]], np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z8"], ["q8"]),
             helper.make_node("QuantizeLinear", ["x", "v", "zv"], ["qaxis"], axis=0),
             helper.make_node("QuantizeLinear", ["x", "b"], ["q16"], axis=1, block_size=4,
                              output_dtype=TensorProto.INT16),
             helper.make_node("DequantizeLinear", ["q8", "s", "z8"], ["d8"]),
             helper.make_node("DequantizeLinear", ["q16", "b"], ["d16"], axis=1,
                              block_size=4)]
    weights = {"s": np.float32(1.0).reshape(()), "z8": np.int8(3).reshape(()),
               "v": np.array([0.5, 2.0], np.float32), "zv": np.array([128, 0], np.uint8),
               "b": np.array([[0.25, 1.0], [0.5, 0.001]], np.float32)}
    model = _model(nodes, {"x": x}, ["q8", "qaxis", "q16", "d8", "d16"], weights)
    _check(model, {"x": x})


def test_quantize_of_an_unknown_scale_blocked_and_dequantize_to_float16():
    x = RNG.normal(size=(2, 5)).astype(np.float32)
    scale = np.array([[0.1, 0.2], [0.3, 0.05]], np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"], axis=1,
                              block_size=3),
             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"], axis=1,
                              block_size=3, output_dtype=TensorProto.FLOAT16)]
    model = _model(nodes, {"x": x, "scale": scale}, ["q", "y"],
                   {"zero": np.array([[1, -2], [0, 5]], np.int8)}, opset=23)
    _check(model, {"x": x, "scale": scale}, jits=(True,), atol=1e-3)


def test_dynamic_quantize_linear():
    x = np.array([[-1.0, 0.5, 2.25], [3.0, -0.125, 0.0]], np.float32)
    model = _model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
                   {"x": x}, ["y", "s", "z"], opset=13)
    _check(model, {"x": x})


def test_qlinear_matmul_and_conv_per_row_column_and_channel():
    a = RNG.integers(-128, 128, (3, 4)).astype(np.int8)
    b = RNG.integers(-128, 128, (4, 2)).astype(np.int8)
    x = RNG.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    nodes = [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                              ["mm"]),
             helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yzu",
                                              "bias"], ["conv"], pads=[1, 1, 1, 1],
                              strides=[2, 1])]
    weights = {"as": np.array([[0.02], [0.05], [0.01]], np.float32),
               "az": np.array([[1], [-3], [0]], np.int8),
               "bs": np.array([[0.03, 0.04]], np.float32), "bz": np.array([[2, 0]], np.int8),
               "ys": np.float32(0.07).reshape(()), "yz": np.int8(-5).reshape(()),
               "xs": np.float32(0.02).reshape(()), "xz": np.uint8(128).reshape(()),
               "w": RNG.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8),
               "ws": np.array([0.01, 0.02, 0.005], np.float32),
               "wz": np.array([120, 128, 131], np.uint8), "yzu": np.uint8(100).reshape(()),
               "bias": np.array([300, -200, 0], np.int32)}
    model = _model(nodes, {"a": a, "b": b, "x": x}, ["mm", "conv"], weights)
    _check(model, {"a": a, "b": b, "x": x}, jits=(True,))


def test_quantizing_to_a_type_stageflow_lacks_is_refused():
    model = _model([helper.make_node("QuantizeLinear", ["x", "s"], ["y"],
                                     output_dtype=TensorProto.FLOAT6E2M3)],
                   {"x": np.ones(3, np.float32)}, ["y"], {"s": np.float32(1).reshape(())})
    with pytest.raises(sf.onnx.OnnxError, match="FLOAT6E2M3, which stageflow has no"):
        sf.onnx.load(model)(np.ones(3, np.float32))


@pytest.mark.parametrize("activation", ["none", "silu"])
def test_causal_conv_with_state_carries_the_state(activation):
    x = RNG.normal(size=(2, 3, 5)).astype(np.float32)
    past = RNG.normal(size=(2, 3, 2)).astype(np.float32)
    node = helper.make_node("CausalConvWithState", ["x", "w", "bias", "past"], ["y", "state"],
                            activation=activation)
    weights = {"w": RNG.normal(size=(3, 1, 3)).astype(np.float32),
               "bias": np.array([0.5, -1.0, 0.0], np.float32)}
    model = _model([node], {"x": x, "past": past}, ["y", "state"], weights, opset=27,
                   shapes={"x": ["n", 3, "length"], "past": ["n", 3, 2]})
    _check(model, {"x": x, "past": past}, atol=1e-6)


@pytest.mark.parametrize("dtype", [ml_dtypes.float4_e2m1fn, ml_dtypes.int4, ml_dtypes.uint2,
                                   ml_dtypes.float8_e5m2])
def test_quantizing_to_narrow_types_and_back(dtype):
    """Per-axis scales; a float4 zero point is added before the cast (onnx's reference), an
    integer one saturates with the rest, float8 saturates to its range; back through
    DequantizeLinear: the bytes of onnx's reference, compiled and interpreted."""
    x = np.array([[0.3, -1.7, 2.5, 100.0], [-0.05, 6.1, -7.9, 0.74]], np.float32)
    zero = np.array([1, 0], dtype) if dtype != ml_dtypes.float8_e5m2 else np.zeros(2, dtype)
    weights = {"s": np.array([0.5, 2.0], np.float32), "z": zero}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)]
    model = _model(nodes, {"x": x}, ["q", "y"], weights, opset=25)
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    for jit in (True, False):
        got = sf.onnx.load(model, jit=jit)(x)
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).dtype == e.dtype
            np.testing.assert_array_equal(np.asarray(g).view(np.uint8), e.view(np.uint8))
