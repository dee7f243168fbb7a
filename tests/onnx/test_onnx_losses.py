"""sf.onnx's loss and extra normalisation converters (`stageflow/onnx/ops/losses.py`,
`normalization_extra.py`) against ONNX's NumPy reference, compiled and interpreted.

(Named test_onnx_losses: test file names are unique across the test folders.)"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(7)


def _model(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                            a.shape) for name, a in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output]
    graph = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int,
           jits: tuple[bool, ...] = (True,)) -> None:
    model = _model(node, feeds, opset)
    expected = ReferenceEvaluator(model).run(None, feeds)
    for jit in jits:
        got = sf.onnx.load(model, jit=jit)(*feeds.values())
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_softmax_cross_entropy_weights_ignore_index_log_prob(reduction):
    scores = RNG.standard_normal((3, 5, 2)).astype(np.float32)
    labels = np.array([[0, 4], [2, -1], [-1, 3]], np.int64)
    weights = RNG.random(5).astype(np.float32)
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "y", "w"], ["z", "log_prob"],
                            reduction=reduction, ignore_index=-1)
    _check(node, {"x": scores, "y": labels, "w": weights}, 13,
           jits=(True, False) if reduction == "mean" else (True,))


def test_negative_log_likelihood_mean_without_weights_skips_ignored():
    log_prob = np.log(RNG.random((2, 4, 3)).astype(np.float32))
    target = np.array([[1, 2, 2], [3, 2, 0]], np.int64)
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["loss"],
                            ignore_index=2)
    _check(node, {"x": log_prob, "t": target}, 22)


def test_negative_log_likelihood_with_minus_infinity_elsewhere_in_the_row():
    """A -inf log-probability of a class not taken stays out of the loss (no 0 * -inf)."""
    log_prob = np.array([[-np.inf, -0.5, -1.0], [-0.2, -np.inf, -3.0]], np.float32)
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["loss"],
                            reduction="none")
    _check(node, {"x": log_prob, "t": np.array([1, 2], np.int32)}, 22)


def test_a_bad_reduction_is_named():
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["loss"],
                            reduction="max")
    model = _model(node, {"x": np.zeros((2, 3), np.float32),
                          "t": np.zeros(2, np.int64)}, 22)
    with pytest.raises(OnnxError, match="reduction must be one of"):
        sf.onnx.load(model)(np.zeros((2, 3), np.float32), np.zeros(2, np.int64))


@pytest.mark.parametrize("axis", [-1, 1])
def test_rms_normalization_in_float32_for_half_inputs(axis):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float16)
    scale = RNG.standard_normal(x.shape[axis:]).astype(np.float16)
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=axis,
                            epsilon=1e-3)
    model = _model(node, {"x": x, "s": scale}, 23)
    expected = ReferenceEvaluator(model).run(None, {"x": x, "s": scale})[0]
    got = sf.onnx.load(model)(x, scale)
    assert got.dtype == sf.float16
    np.testing.assert_allclose(np.asarray(got, np.float32), expected.astype(np.float32),
                               rtol=2e-3, atol=2e-3)


def test_swiglu_alpha():
    a, b = (RNG.standard_normal((3, 6)).astype(np.float32) for _ in range(2))
    _check(helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=0.5), {"a": a, "b": b}, 28,
           jits=(True, False))


def test_rms_normalization_rejects_an_integer_stash_type():
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"],
                            stash_type=TensorProto.INT32)
    x = np.ones((2, 3), np.float32)
    with pytest.raises(OnnxError, match="stash_type"):
        sf.onnx.load(_model(node, {"x": x, "s": x[0]}, 23))(x, x[0])
