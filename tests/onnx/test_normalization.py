"""sf.onnx's normalization converters (`stageflow/onnx/ops/normalization.py`) against
ONNX's NumPy reference: statistics known at import and computed at run time, the optional
outputs, opset-dependent parameters."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from node_check import check, graph_model
from onnx import TensorProto, helper

import stageflow as sf

RNG = np.random.default_rng(5)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _batch_norm_parameters(channels: int) -> dict[str, np.ndarray]:
    return {"s": _normal(channels), "b": _normal(channels), "m": _normal(channels),
            "v": RNG.random(channels).astype(np.float32) + 0.5}


@pytest.mark.parametrize("known", [True, False])
def test_batch_normalization_inference(known):
    """Statistics as initializers (folded into one multiply-add) or as graph inputs."""
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            epsilon=1e-3)
    parameters = _batch_norm_parameters(3)
    inputs = {"x": _normal(2, 3, 4, 5)}
    if known:
        check(node, inputs, parameters, jits=(True, False))
    else:
        check(node, {**inputs, **parameters})


def test_batch_normalization_training_mode_running_statistics():
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                            ["y", "running_mean", "running_var"], training_mode=1,
                            momentum=0.8)
    check(node, {"x": _normal(4, 3, 5)}, _batch_norm_parameters(3), rtol=1e-4, atol=1e-5)


def test_instance_normalization():
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)
    check(node, {"x": _normal(2, 3, 4, 2)}, {"s": _normal(3), "b": _normal(3)}, rtol=1e-4,
          atol=1e-5)


def test_layer_normalization_with_mean_and_inverse_deviation():
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"],
                            axis=1, epsilon=1e-3)
    check(node, {"x": _normal(2, 3, 4)}, {"s": _normal(3, 4), "b": _normal(3, 4)},
          opset=17, rtol=1e-4, atol=1e-5, jits=(True, False))


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_affine_per_group_then_per_channel(opset):
    parameters = 2 if opset < 21 else 4
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                            epsilon=1e-3)
    check(node, {"x": _normal(3, 4, 2, 3)}, {"s": _normal(parameters),
                                             "b": _normal(parameters)},
          opset=opset, rtol=1e-4, atol=1e-5)


def test_local_response_normalization_of_an_even_size():
    """As many images as channels: the NumPy reference sums the channels below the batch
    size only (ONNX Runtime takes odd sizes only)."""
    node = helper.make_node("LRN", ["x"], ["y"], size=4, alpha=0.01, beta=0.6, bias=1.5)
    check(node, {"x": _normal(4, 4, 3, 3)}, rtol=1e-4)


def test_local_response_normalization_between_convolutions_runs_channels_last():
    """AlexNet's Conv, LRN, MaxPool, Conv: the LRN runs in the convolutions' NHWC layout,
    so the program transposes the model's input and its output only, and its power of
    -0.75 (a float32 constant of whole quarters) takes square roots, not libm's pow."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["a"], ["n"], size=5, alpha=1e-2, beta=0.75, bias=2.0),
             helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w2"], ["y"])]
    weights = {"w1": _normal(8, 3, 3, 3), "w2": _normal(4, 8, 1, 1)}
    model = graph_model(nodes, {"x": (TensorProto.FLOAT, [2, 3, 6, 6])}, ["y"], weights)
    x = _normal(2, 3, 6, 6)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    [expected] = session.run(None, {"x": x})  # (ONNX's reference sums too few channels)
    function = sf.onnx.load(model)
    np.testing.assert_allclose(function(x).numpy(), expected, rtol=1e-4, atol=1e-5)
    optimized = function.get_concrete_function().ir("optimized")
    assert optimized.count("sf.transpose ") == 2
    assert "sf.pow" in optimized and "llvm.pow" not in function.get_concrete_function().ir("llvm")


def test_mean_variance_and_lp_normalization():
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2])
    check(node, {"x": _normal(3, 2, 4)}, rtol=1e-4, atol=1e-5)
    x = _normal(3, 4)
    x[1] = 0.0
    for p in (1, 2):  # ONNX Runtime's L1 norm sums magnitudes, the NumPy reference values
        node = helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=p)
        check(node, {"x": x}, rtol=1e-5, runtime=True)
