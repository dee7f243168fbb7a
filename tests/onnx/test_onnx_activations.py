"""sf.onnx's activation, softmax-family and Dropout converters
(`stageflow/onnx/ops/activations.py`) against ONNX's NumPy reference: attributes away from
their defaults, float16, ties for Hardmax, unknown dims, Dropout's inference-only rule."""

from __future__ import annotations

import numpy as np
import pytest
from node_check import check, one_node_model
from onnx import helper

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(7)
X = (RNG.standard_normal((3, 8)) * 3).astype(np.float32)


@pytest.mark.parametrize("op, attributes", [
    ("LeakyRelu", {"alpha": 0.3}),
    ("Elu", {"alpha": 0.7}),
    ("Selu", {"alpha": 1.5, "gamma": 2.0}),
    ("Celu", {"alpha": 2.0}),
    ("Gelu", {"approximate": "tanh"}),
    ("Gelu", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", {}),
    ("Mish", {}),
    ("Shrink", {"bias": 0.5, "lambd": 1.0}),
    ("Softplus", {}),
    ("Softsign", {}),
    ("Swish", {"alpha": 0.5}),
    ("ThresholdedRelu", {"alpha": 0.5}),
    ("Sigmoid", {}),
    ("Tanh", {}),
    ("Relu", {}),
])
def test_activation_with_its_attributes(op, attributes):
    opset = 24 if op == "Swish" else 20
    check(helper.make_node(op, ["x"], ["y"], **attributes), {"x": X}, opset=opset)


def test_activations_in_float16_compiled_and_interpreted():
    x = X.astype(np.float16)
    for op in ("Selu", "HardSwish", "Softsign"):
        check(helper.make_node(op, ["x"], ["y"]), {"x": x}, jits=(True, False), rtol=2e-3,
              atol=2e-3)


def test_shrink_of_integers():
    x = np.arange(-5, 6, dtype=np.int32)
    check(helper.make_node("Shrink", ["x"], ["y"], bias=1.5, lambd=2.0), {"x": x})


def test_prelu_slope_broadcasts_to_the_input():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    check(helper.make_node("PRelu", ["x", "slope"], ["y"]), {"x": x},
          weights={"slope": np.array([[0.1], [0.2], [0.3]], np.float32)}, jits=(True, False))


def test_prelu_of_opset_6_takes_a_slope_per_channel():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    model = one_node_model(helper.make_node("PRelu", ["x", "slope"], ["y"]), {"x": x},
                           weights={"slope": slope}, opset=6)
    expected = np.where(x < 0, x * slope[:, None], x)
    np.testing.assert_allclose(np.asarray(sf.onnx.load(model)(x)), expected, rtol=1e-6)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_family_over_one_axis(op, axis):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    check(helper.make_node(op, ["x"], ["y"], axis=axis), {"x": x})


def test_hardmax_marks_the_first_of_tied_maxima_with_unknown_dims():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, -1, 5, 5]], np.float32)
    node = helper.make_node("Hardmax", ["x"], ["y"], axis=1)
    model = one_node_model(node, {"x": x}, shapes={"x": ["n", "k"]})
    for jit in (True, False):
        np.testing.assert_array_equal(np.asarray(sf.onnx.load(model, jit=jit)(x)),
                                      [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]])


def test_dropout_at_inference_passes_data_and_a_mask_of_ones():
    node = helper.make_node("Dropout", ["x", "ratio"], ["y", "mask"])
    check(node, {"x": X}, weights={"ratio": np.array(0.4, np.float32)}, jits=(True, False))
    training = helper.make_node("Dropout", ["x", "ratio", "training"], ["y", "mask"])
    check(training, {"x": X}, weights={"ratio": np.array(0.0, np.float32),
                                       "training": np.array(True)})


def test_dropout_in_training_mode_is_refused():
    node = helper.make_node("Dropout", ["x", "ratio", "training"], ["y"])
    model = one_node_model(node, {"x": X}, weights={"ratio": np.array(0.5, np.float32),
                                                    "training": np.array(True)})
    with pytest.raises(OnnxError, match="training_mode is true with ratio 0.5"):
        sf.onnx.load(model)(X)


def test_gelu_refuses_an_unknown_approximation():
    model = one_node_model(helper.make_node("Gelu", ["x"], ["y"], approximate="erf"),
                           {"x": X}, opset=20)
    with pytest.raises(OnnxError, match="approximate must be 'none' or 'tanh'"):
        sf.onnx.load(model)(X)
