"""sf.onnx's spatial converters (`stageflow/onnx/ops/spatial.py`) against ONNX's NumPy
reference: Resize's modes on several axes at once, DepthToSpace and SpaceToDepth."""

from __future__ import annotations

import numpy as np
import pytest
from node_check import check, one_node_model
from onnx import helper

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(13)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(("attributes", "target"), [
    ({"mode": "linear"}, {"scales": np.array([1, 1, 1.5, 0.6], np.float32)}),
    ({"mode": "cubic", "antialias": 1, "coordinate_transformation_mode": "pytorch_half_pixel"},
     {"sizes": np.array([2, 3, 3, 7], np.int64)}),
    ({"mode": "nearest", "nearest_mode": "ceil",
      "coordinate_transformation_mode": "align_corners"},
     {"scales": np.array([1, 1, 2.5, 1.3], np.float32)}),
])
def test_resize(attributes, target):
    inputs = ["x", "", *(["scales"] if "scales" in target else ["", "sizes"])]
    check(helper.make_node("Resize", inputs, ["y"], **attributes), {"x": _normal(2, 3, 4, 5)},
          target, rtol=1e-4, atol=1e-5)


def test_resize_of_integers_by_nearest_on_chosen_axes():
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], axes=[3, 1],
                            keep_aspect_ratio_policy="not_larger")
    check(node, {"x": RNG.integers(0, 9, (1, 3, 2, 4)).astype(np.int32)},
          {"sizes": np.array([7, 5], np.int64)})


def test_linear_resize_of_integers_is_refused():
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    model = one_node_model(node, {"x": np.zeros((1, 1, 2, 2), np.int32)},
                           {"scales": np.array([1, 1, 2, 2], np.float32)})
    with pytest.raises(OnnxError, match="linear interpolation of int32"):
        sf.onnx.load(model)(np.zeros((1, 1, 2, 2), np.int32))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_inverts_space_to_depth(mode):
    check(helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode=mode),
          {"x": _normal(2, 8, 2, 3)}, jits=(True, False))
    check(helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2),
          {"x": _normal(2, 2, 4, 6)})


def test_col2im_strided_dilated_and_padded():
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=[2, 1],
                            dilations=[1, 2], pads=[1, 0, 0, 1])
    image, block = np.array([5, 6], np.int64), np.array([2, 3], np.int64)
    check(node, {"x": _normal(2, 2 * 6, 3 * 3)}, {"image": image, "block": block})


def test_linear_resize_of_a_symbolic_batch():
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    check(node, {"x": _normal(2, 3, 4, 5)}, {"scales": np.array([1, 1, 2, 0.5], np.float32)},
          shapes={"x": ["n", 3, 4, 5]}, rtol=1e-4, atol=1e-5)
