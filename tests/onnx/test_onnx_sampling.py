"""sf.onnx's GridSample, AffineGrid and RoiAlign converters (`stageflow/onnx/ops/sampling.py`)
against ONNX's NumPy reference (ONNX Runtime where the reference fails a case), compiled and
interpreted."""

from __future__ import annotations

import numpy as np
import pytest
from node_check import check, one_node_model
from onnx import helper

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(5)


def _image(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _grid(*shape: int) -> np.ndarray:
    """Normalized coordinates reaching well outside [-1, 1], for the padding modes."""
    return RNG.uniform(-2.5, 2.5, shape).astype(np.float32)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_2d_modes_and_paddings(mode: str, padding: str) -> None:
    inputs = {"x": _image(2, 3, 4, 5), "grid": _grid(2, 3, 4, 2)}
    for align in (0, 1):
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                                padding_mode=padding, align_corners=align)
        check(node, inputs, opset=20, jits=(False,), rtol=1e-4, atol=1e-5)


def test_grid_sample_volumetric_compiled() -> None:
    """3-D linear reflection and nearest zeros sampling, compiled."""
    inputs = {"x": _image(2, 2, 3, 4, 5), "grid": _grid(2, 2, 3, 4, 3)}
    for mode, padding in (("linear", "reflection"), ("nearest", "zeros")):
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                                padding_mode=padding)
        check(node, inputs, opset=22, jits=(True,), rtol=1e-4, atol=1e-5)


def test_grid_sample_opset_16_names() -> None:
    """Opset 16 names the modes bilinear and bicubic (checked against ONNX Runtime: the
    reference knows the new names only), and opset 20 refuses the old names."""
    inputs = {"x": _image(1, 2, 4, 5), "grid": _grid(1, 3, 4, 2)}
    for mode in ("bilinear", "bicubic"):
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode)
        check(node, inputs, opset=16, jits=(False,), rtol=1e-4, atol=1e-5, runtime=True)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="bilinear")
    with pytest.raises(OnnxError, match="mode must be one of linear, nearest, cubic"):
        sf.onnx.load(one_node_model(node, inputs, opset=20), jit=False)(*inputs.values())


@pytest.mark.filterwarnings("ignore:divide by zero")  # the reference's step for a 1-dim
@pytest.mark.parametrize("rank", [2, 3])
def test_affine_grid(rank: int) -> None:
    size = np.array([2, 3, 4, 1, 5][:rank + 2] if rank == 3 else [2, 3, 4, 5], np.int64)
    theta = _image(2, rank, rank + 1)
    for align in (0, 1):
        node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"],
                                align_corners=align)
        check(node, {"theta": theta}, weights={"size": size}, opset=20,
              jits=(True,) if align else (False,))


_ROIS = np.array([[0, 0, 8, 6], [1.3, 2.2, 4.1, 3.9], [-3, -2, 12, 11], [5, 5, 5.2, 5.1],
                  [2, 3, 30, 2.5]], np.float32)
_BATCH = np.array([0, 1, 1, 0, 1], np.int64)


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_adaptive_sampling_compiled(mode: str) -> None:
    """sampling_ratio 0: each box samples ceil(bin size) points a bin (a while_loop over
    the largest box's grid), an empty half_pixel box included."""
    inputs = {"x": _image(2, 3, 7, 9), "rois": _ROIS, "batch": _BATCH}
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], mode=mode,
                            output_height=3, output_width=2, spatial_scale=0.5)
    check(node, inputs, opset=22, jits=(True, False), rtol=1e-4, atol=1e-5)


def test_roi_align_fixed_sampling_and_opset_10_transform() -> None:
    inputs = {"x": _image(2, 3, 7, 9), "rois": _ROIS, "batch": _BATCH}
    for mode, transform in (("avg", "output_half_pixel"), ("max", "half_pixel")):
        node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], mode=mode,
                                coordinate_transformation_mode=transform, sampling_ratio=2,
                                output_height=2, output_width=3)
        check(node, inputs, opset=16, jits=(False,), rtol=1e-4, atol=1e-5)
    # before opset 16 RoiAlign had no coordinate_transformation_mode and behaved as
    # output_half_pixel (the reference assumes half_pixel: checked against ONNX Runtime)
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], output_height=2,
                            output_width=2)
    check(node, inputs, opset=13, jits=(False,), rtol=1e-4, atol=1e-5, runtime=True)
