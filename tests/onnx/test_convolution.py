"""sf.onnx's convolution and pooling converters (`stageflow/onnx/ops/convolution.py`,
`pooling.py`) against ONNX's NumPy reference, compiled and interpreted: the geometry the
node tests of ONNX's suite leave out (groups, depthwise, 1-D and 3-D, symbolic batch)."""

from __future__ import annotations

import numpy as np
import pytest
from node_check import check, one_node_model
from onnx import helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(3)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_grouped_strided_dilated_conv_with_asymmetric_pads_and_bias():
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=2, strides=[2, 1],
                            dilations=[1, 2], pads=[1, 0, 2, 1])
    check(node, {"x": _normal(2, 4, 7, 8)}, {"w": _normal(6, 2, 3, 2), "b": _normal(6)},
          jits=(True, False))


def test_a_grouped_conv_is_one_grouped_conv2d():
    """Not a split of the image, a conv per group and a concat: one `sf.conv2d` of
    feature_group_count groups (the ShuffleNet pattern: 1x1, group 4)."""
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=4)
    x, weights = {"x": _normal(1, 16, 5, 5)}, {"w": _normal(24, 4, 1, 1), "b": _normal(24)}
    traced = sf.onnx.load(one_node_model(node, x, weights)).get_concrete_function().ir(
        "traced")
    assert traced.count("sf.conv2d ") == 1 and "feature_group_count = 4" in traced
    assert "sf.concat" not in traced and "sf.slice" not in traced
    check(node, x, weights, jits=(True, False))


def test_grouped_conv_1d_and_3d_with_filters_computed_at_run_time_and_a_symbolic_batch():
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=2, strides=[2], pads=[1, 0])
    check(node, {"x": _normal(3, 4, 9), "w": _normal(6, 2, 3)}, shapes={"x": ["n", 4, 9]},
          jits=(True, False))
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=3, pads=[1, 0, 1, 1, 0, 1])
    check(node, {"x": _normal(1, 6, 4, 5, 4)}, {"w": _normal(3, 2, 2, 3, 2)},
          jits=(True, False))


@pytest.mark.parametrize("auto_pad", ["SAME_LOWER", "VALID"])
def test_conv_1d_with_auto_pad(auto_pad):
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[2], auto_pad=auto_pad)
    check(node, {"x": _normal(2, 3, 9)}, {"w": _normal(4, 3, 4)})


def test_conv_3d_strided_dilated_same_lower():
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[2, 1, 2],
                            auto_pad="SAME_LOWER", dilations=[2, 1, 1])
    check(node, {"x": _normal(1, 2, 7, 5, 6)}, {"w": _normal(3, 2, 2, 3, 2),
                                                 "b": _normal(3)})


@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_conv(multiplier):
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=3, strides=[2, 2],
                            pads=[1, 1, 1, 1])
    channels = 3 * multiplier
    check(node, {"x": _normal(2, 3, 6, 7)}, {"w": _normal(channels, 1, 3, 3),
                                             "b": _normal(channels)}, jits=(True, False))


@pytest.mark.parametrize("shape, kernel, attributes", [
    ((2, 4, 9), (3,), {"strides": [2], "dilations": [2], "pads": [1, 2]}),
    ((1, 2, 5, 6, 7), (2, 3, 2), {"strides": [2, 1, 2], "pads": [1, 0, 1, 1, 2, 0]}),
])
def test_depthwise_conv_1d_and_3d(shape, kernel, attributes):
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=shape[1], **attributes)
    channels = 2 * shape[1]
    check(node, {"x": _normal(*shape)}, {"w": _normal(channels, 1, *kernel),
                                         "b": _normal(channels)}, jits=(True, False))


def test_depthwise_conv_with_filters_computed_at_run_time_and_a_symbolic_batch():
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=4, pads=[1, 1, 1, 1])
    check(node, {"x": _normal(3, 4, 6, 5), "w": _normal(4, 1, 3, 3)},
          shapes={"x": ["n", 4, 6, 5]}, jits=(True, False))


def test_a_half_precision_depthwise_conv_adds_up_in_float32():
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=3, pads=[1, 1, 1, 1])
    x, w = _normal(1, 3, 5, 5).astype(np.float16), _normal(3, 1, 3, 3).astype(np.float16)
    (want,) = ReferenceEvaluator(one_node_model(node, {"x": x.astype(np.float32)},
                                                {"w": w.astype(np.float32)})).run(
        None, {"x": x.astype(np.float32)})
    got = np.asarray(sf.onnx.load(one_node_model(node, {"x": x}, {"w": w}))(x))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want.astype(np.float16))  # rounded once


def test_conv_with_filters_computed_at_run_time_and_a_symbolic_batch():
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    model = one_node_model(node, {"x": _normal(1, 2, 5, 5), "w": _normal(3, 2, 3, 3)},
                           shapes={"x": ["n", 2, 5, 5]})
    run = sf.onnx.load(model)
    x, w = _normal(4, 2, 5, 5), _normal(3, 2, 3, 3)
    from_padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(from_padded, (3, 3), axis=(2, 3))
    np.testing.assert_allclose(np.asarray(run(x, w)),
                               np.einsum("nchwij,ocij->nohw", windows, w), rtol=1e-5,
                               atol=1e-5)


def test_grouped_conv_transpose_with_output_padding_and_bias():
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=2, strides=[2, 3],
                            output_padding=[1, 2], pads=[1, 0, 0, 2], dilations=[1, 2])
    check(node, {"x": _normal(2, 4, 3, 4)}, {"w": _normal(4, 3, 3, 2), "b": _normal(6)},
          jits=(True, False), runtime=True)


def test_conv_transpose_3d_to_an_output_shape():
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 1, 2],
                            output_shape=[6, 4, 8])
    check(node, {"x": _normal(1, 2, 3, 3, 4)}, {"w": _normal(2, 3, 2, 2, 3)}, runtime=True)


def test_a_conv_of_four_spatial_dims_is_refused():
    node = helper.make_node("Conv", ["x", "w"], ["y"])
    model = one_node_model(node, {"x": _normal(1, 1, 2, 2, 2, 2)},
                           {"w": _normal(1, 1, 1, 1, 1, 1)})
    with pytest.raises(OnnxError, match="1-D, 2-D and 3-D"):
        sf.onnx.load(model)(_normal(1, 1, 2, 2, 2, 2))


def test_max_pool_indices_with_ceil_mode_dilations_and_column_major_order():
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 3],
                            strides=[2, 2], dilations=[2, 1], pads=[1, 0, 0, 1],
                            ceil_mode=1, storage_order=1)
    check(node, {"x": _normal(2, 3, 8, 7)}, jits=(True, False))


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_3d_with_pads_and_ceil_mode(count_include_pad):
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3, 2],
                            strides=[2, 2, 1], pads=[1, 1, 0, 0, 1, 1], ceil_mode=1,
                            count_include_pad=count_include_pad)
    check(node, {"x": _normal(1, 2, 5, 6, 4)})


def test_max_pool_of_integers_and_lp_pool():
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3], pads=[1, 1])
    check(node, {"x": RNG.integers(-100, 100, (2, 3, 7)).astype(np.int8)}, runtime=True)
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], p=3,
                            auto_pad="SAME_UPPER", strides=[2, 2])
    check(node, {"x": _normal(1, 2, 5, 5)}, rtol=1e-4)


def test_global_lp_pool():
    check(helper.make_node("GlobalLpPool", ["x"], ["y"], p=3), {"x": _normal(2, 3, 4, 5)},
          rtol=1e-4, runtime=True)


def test_max_unpool_inverts_max_pool_indices():
    pool = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])
    x = _normal(2, 3, 4, 6)
    values, indices = sf.onnx.load(one_node_model(pool, {"x": x}))(x)
    unpool = helper.make_node("MaxUnpool", ["v", "i", "shape"], ["z"], kernel_shape=[2, 2],
                              strides=[2, 2])
    check(unpool, {"v": np.asarray(values), "i": np.asarray(indices)},
          {"shape": np.array([2, 3, 5, 6], np.int64)})


def test_deform_conv_grouped_strided_with_mask():
    node = helper.make_node("DeformConv", ["x", "w", "offset", "b", "mask"], ["y"], group=2,
                            offset_group=2, strides=[2, 1], pads=[1, 0, 1, 1],
                            dilations=[1, 2])
    offset = RNG.uniform(-1.5, 1.5, (1, 2 * 2 * 2 * 2, 3, 4)).astype(np.float32)
    check(node, {"x": _normal(1, 4, 4, 5), "offset": offset,
                 "mask": RNG.random((1, 2 * 2 * 2, 3, 4)).astype(np.float32)},
          {"w": _normal(2, 2, 2, 2), "b": _normal(2)}, rtol=1e-4, opset=19)


def test_conv_with_weights_as_variables():
    """Filters read from variables are transposed in the graph, to the same result."""
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=2, pads=[1, 1, 1, 1])
    x, weights = _normal(1, 4, 5, 5), {"w": _normal(4, 2, 3, 3), "b": _normal(4)}
    model = one_node_model(node, {"x": x}, weights)
    (expected,) = ReferenceEvaluator(model).run(None, {"x": x, **weights})
    np.testing.assert_allclose(np.asarray(sf.onnx.load(model, weights="variables")(x)),
                               expected, rtol=1e-5, atol=1e-5)
