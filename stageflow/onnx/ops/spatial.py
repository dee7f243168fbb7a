"""Spatial rearrangements: Resize (and the older Upsample), DepthToSpace, SpaceToDepth,
Col2Im.

Resize is separable: each resized axis is one gather of the input rows each output
position reads and, for the interpolating modes, a sum of those rows weighted by their
coefficients. Which rows and which weights depends only on the shapes and attributes, so
they are computed at import (following ONNX's reference resize, axis by axis: coordinate
transformation, neighbour indices clamped to the edge, coefficients of the nearest, linear
or cubic kernel, antialias, exclude_outside, tf_crop_and_resize's extrapolation); the
graph holds a gather, a multiply and a sum per axis. Nearest mode is a gather alone, so it
is exact for every dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.convolution import spread, window

Coefficients = Callable[[float, float], np.ndarray]


def _nearest(rounding: str) -> Coefficients:
    def coefficients(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        if rounding == "round_prefer_floor":
            return np.array([ratio <= 0.5, ratio > 0.5], np.float64)
        if rounding == "round_prefer_ceil":
            return np.array([ratio < 0.5, ratio >= 0.5], np.float64)
        return np.array([1.0, 0.0] if rounding == "floor" else [0.0, 1.0])
    return coefficients


def _linear(antialias: bool) -> Coefficients:
    def coefficients(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        taps = (np.arange(start, 2 - start) - ratio) * scale
        weights = np.clip(1 - np.abs(taps), 0, 1)
        return weights / weights.sum()
    return coefficients


def _cubic(a: float, antialias: bool) -> Coefficients:
    def kernel(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
        if x < 2:
            return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
        return 0.0

    def coefficients(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([kernel(ratio + 1), kernel(ratio), kernel(1 - ratio),
                             kernel(2 - ratio)])
        scale = min(scale, 1.0)
        start = int(np.floor(-2 / scale) + 1)
        weights = np.array([kernel(scale * (i - ratio)) for i in range(start, 2 - start)])
        return weights / weights.sum()
    return coefficients


@dataclass(frozen=True)
class _Resampling:
    """How an output axis reads its input axis: rows (out, taps) into the input, their
    weights, and the positions that take the extrapolation value (or None)."""

    rows: np.ndarray
    weights: np.ndarray
    outside: np.ndarray | None


_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
          "asymmetric", "tf_crop_and_resize")


def _source(mode: str, out: np.ndarray, scale: float, size: int, length: float,
            count: int, roi: tuple[float, float]) -> np.ndarray:
    """Each output position's coordinate in the input, as `coordinate_transformation_mode`
    maps it (`length`: scale * size, the output's unrounded length)."""
    if mode == "align_corners":
        return np.zeros(count) if length == 1 else out * (size - 1) / (length - 1)
    if mode == "asymmetric":
        return out / scale
    if mode == "tf_crop_and_resize":
        start, stop = roi
        spread = np.full(count, (stop - start) * (size - 1) / 2) if length == 1 else \
            out * (stop - start) * (size - 1) / (length - 1)
        return spread + start * (size - 1)
    if mode == "pytorch_half_pixel":
        return np.full(count, -0.5) if length == 1 else (out + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (out + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = size / 2 * (1 - count / length)
        return offset + (out + 0.5) / scale - 0.5
    raise AssertionError(mode)  # `resize` checks the mode first


def _resampling(coefficients: Coefficients, mode: str, size: int, scale: float, count: int,
                roi: tuple[float, float], exclude_outside: bool) -> _Resampling:
    source = _source(mode, np.arange(count, dtype=np.float64), scale, size, scale * size,
                     count, roi)
    floor = np.floor(source)
    ratios = np.where(source == floor, 1.0, source - floor)
    weights = np.stack([coefficients(float(r), scale) for r in ratios])
    taps = weights.shape[1]
    # The `taps` indices nearest the source coordinate, ties to the smaller ones.
    pad = math.ceil(taps / 2)
    shifted = source + pad
    base = np.floor(shifted)
    fraction = shifted - base
    if taps % 2 == 0:
        offsets = np.where(fraction == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        offsets = np.where(fraction <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    rows = (base + offsets).astype(np.int64)[:, None] + np.arange(taps) - pad
    if exclude_outside:
        weights = np.where((rows < 0) | (rows >= size), 0.0, weights)
        totals = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(totals == 0, 1.0, totals)
    outside = (source < 0) | (source > size - 1) if mode == "tf_crop_and_resize" else None
    return _Resampling(np.clip(rows, 0, size - 1), weights, outside)


def _static_shape(node: Node, x: Value) -> tuple[int, ...]:
    if None in x.shape:
        raise node.error(f"needs an input of static shape, got {x.shape}; give the model's "
                         f"inputs static shapes (sf.onnx.load(..., input_shapes={{name: "
                         f"shape}}))")
    return tuple(x.shape)


def _unknown(node: Node, shape: Sequence[int | None], axis: int) -> Exception:
    return node.error(f"resizes axis {axis} of unknown length (input shape {tuple(shape)}); "
                      f"give the model's inputs static shapes (sf.onnx.load(..., "
                      f"input_shapes={{name: shape}}))")


@converts("Resize")
def resize(node: Node, x: Value, roi: Value | None = None, scales: Value | None = None,
           sizes: Value | None = None) -> Value:
    shape = tuple(x.shape)
    if sum(d is None for d in shape) > 1:
        raise node.error(f"needs an input of at most one unknown dim, got {shape}; give the "
                         f"model's inputs static shapes (sf.onnx.load(..., input_shapes="
                         f"{{name: shape}}))")
    rank = len(shape)
    axes = [int(a) % rank for a in node.attr("axes", range(rank))]
    scale_list, counts = _targets(node, shape, axes, scales, sizes)
    bounds = [(0.0, 1.0)] * rank
    mode = node.attr("coordinate_transformation_mode", "half_pixel")
    if mode not in _MODES:
        raise node.error(f"coordinate_transformation_mode {mode!r} is not one of "
                         f"{', '.join(_MODES)}")
    if roi is not None and mode == "tf_crop_and_resize":
        values = node.const(roi, "the roi input").astype(np.float64)
        for i, axis in enumerate(axes):
            bounds[axis] = (float(values[i]), float(values[len(axes) + i]))
    kind = node.attr("mode", "nearest")
    antialias = bool(node.attr("antialias", 0))
    if kind == "nearest":
        coefficients = _nearest(node.attr("nearest_mode", "round_prefer_floor"))
    elif kind == "linear":
        coefficients = _linear(antialias)
    elif kind == "cubic":
        coefficients = _cubic(float(node.attr("cubic_coeff_a", -0.75)), antialias)
    else:
        raise node.error(f"mode {kind!r} is not one of nearest, linear, cubic")
    dtype = np.dtype(x.dtype) if isinstance(x, np.ndarray) else np.dtype(x.dtype.name)
    if kind != "nearest" and not np.issubdtype(dtype, np.floating) and \
            dtype.name != "bfloat16":
        raise node.error(f"{kind} interpolation of {dtype.name} is not supported; cast the "
                         f"input to a float type first")
    fill = float(node.attr("extrapolation_value", 0.0))
    for axis in axes:
        if counts[axis] == shape[axis] and math.isclose(scale_list[axis], 1.0) and \
                bounds[axis] == (0.0, 1.0):
            continue
        if shape[axis] is None:
            raise _unknown(node, shape, axis)
        plan = _resampling(coefficients, mode, shape[axis], scale_list[axis], counts[axis],
                           bounds[axis], bool(node.attr("exclude_outside", 0)))
        x = _resample(x, axis, plan, kind == "nearest", dtype, fill)
    return x


def _targets(node: Node, shape: Sequence[int | None], axes: Sequence[int],
             scales: Value | None, sizes: Value | None) -> tuple[list[float], list[int | None]]:
    """Each axis' scale and output length, from `scales` or `sizes` (with
    keep_aspect_ratio_policy) over `axes`; an axis of unknown length only kept as it is."""
    rank = len(shape)
    scale_list, counts = [1.0] * rank, list(shape)
    if sizes is not None and np.size(node.const(sizes, "the sizes input")):
        wanted = node.const(sizes, "the sizes input").astype(np.int64)
        for i, axis in enumerate(axes):
            if shape[axis] is None:
                raise _unknown(node, shape, axis)
            counts[axis] = int(wanted[i])
            scale_list[axis] = counts[axis] / shape[axis]
        policy = node.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            chosen = [scale_list[a] for a in axes]
            scale = min(chosen) if policy == "not_larger" else max(chosen)
            for axis in axes:
                scale_list[axis] = scale
                counts[axis] = int(scale * shape[axis] + 0.5)
        return scale_list, counts
    if scales is None or not np.size(node.const(scales, "the scales input")):
        raise node.error("needs scales or sizes")
    factors = node.const(scales, "the scales input").astype(np.float64)
    for i, axis in enumerate(axes):
        scale_list[axis] = float(factors[i])
        if shape[axis] is None and factors[i] != 1:
            raise _unknown(node, shape, axis)
        if shape[axis] is not None:
            counts[axis] = int(factors[i] * shape[axis])
    return scale_list, counts


def _resample(x: Value, axis: int, plan: _Resampling, nearest: bool, dtype: np.dtype,
              fill: float) -> Value:
    """`x` resampled along `axis` by `plan`: a gather of the rows, weighted and summed
    unless the mode is nearest (one row each, the one of weight 1)."""
    count, taps = plan.rows.shape
    if nearest:
        rows = plan.rows[np.arange(count), np.argmax(plan.weights, axis=1)]
        y = sf.gather(x, rows, axis=axis)
    else:
        gathered = sf.gather(x, plan.rows.reshape(-1), axis=axis)
        shape = [-1 if d is None else d for d in (*x.shape[:axis], count, taps,
                                                   *x.shape[axis + 1:])]
        weights = plan.weights.astype(np.float32 if dtype.name == "bfloat16" else dtype)
        weights = weights.reshape((count, taps) + (1,) * (x.ndim - axis - 1))
        if dtype.name == "bfloat16":
            weights = sf.cast(weights, sf.bfloat16)
        y = sf.reduce_sum(sf.reshape(gathered, shape) * weights, axis=axis + 1)
    if plan.outside is not None and plan.outside.any():
        mask = plan.outside.reshape((count,) + (1,) * (x.ndim - axis - 1))
        y = sf.where(mask, sf.cast(fill, y.dtype), y)
    return y


@converts("Upsample")
def upsample(node: Node, x: Value, scales: Value) -> Value:
    """Upsample (deprecated since opset 10): Resize with asymmetric coordinates, nearest
    rounding down."""
    shape = _static_shape(node, x)
    factors = node.const(scales, "the scales input").astype(np.float64)
    kind = node.attr("mode", "nearest")
    if kind not in ("nearest", "linear"):
        raise node.error(f"mode {kind!r} is not one of nearest, linear")
    coefficients = _nearest("floor") if kind == "nearest" else _linear(False)
    dtype = np.dtype(x.dtype) if isinstance(x, np.ndarray) else np.dtype(x.dtype.name)
    for axis, (size, scale) in enumerate(zip(shape, factors, strict=True)):
        if scale != 1.0:
            plan = _resampling(coefficients, "asymmetric", size, float(scale),
                               int(size * scale), (0.0, 1.0), False)
            x = _resample(x, axis, plan, kind == "nearest", dtype, 0.0)
    return x


def _blocks(node: Node, x: Value) -> tuple[int, int, int, int, int]:
    """(batch, channels, height, width, blocksize); the batch -1, for reshapes, as it may
    be unknown."""
    if x.ndim != 4 or None in x.shape[1:]:
        raise node.error(f"needs an input (N, C, H, W) of static C, H, W, got {x.shape}")
    _, channels, height, width = x.shape
    return -1, channels, height, width, int(node.attr("blocksize"))


@converts("DepthToSpace")
def depth_to_space(node: Node, x: Value) -> Value:
    batch, channels, height, width, block = _blocks(node, x)
    if channels % (block * block):
        raise node.error(f"channels {channels} are not a multiple of blocksize {block} squared")
    depth = channels // (block * block)
    if node.attr("mode", "DCR") == "DCR":
        y = sf.reshape(x, (batch, block, block, depth, height, width))
        y = sf.transpose(y, (0, 3, 4, 1, 5, 2))
    else:
        y = sf.reshape(x, (batch, depth, block, block, height, width))
        y = sf.transpose(y, (0, 1, 4, 2, 5, 3))
    return sf.reshape(y, (batch, depth, height * block, width * block))


@converts("SpaceToDepth")
def space_to_depth(node: Node, x: Value) -> Value:
    batch, channels, height, width, block = _blocks(node, x)
    if height % block or width % block:
        raise node.error(f"height {height} and width {width} are not multiples of blocksize "
                         f"{block}")
    y = sf.reshape(x, (batch, channels, height // block, block, width // block, block))
    perm = (0, 3, 5, 1, 2, 4) if node.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    y = sf.transpose(y, perm)
    return sf.reshape(y, (batch, channels * block * block, height // block, width // block))


@converts("Col2Im")
def col2im(node: Node, x: Value, image_shape: Value, block_shape: Value) -> Value:
    """The inverse of im2col: each column's block added back into the image, where the
    block's window sits. Each block tap's values (one per window position) are spread to
    the positions it read, strided and dilated, in the padded image; the pads are then
    cropped."""
    image = [int(d) for d in node.const(image_shape, "the image_shape input")]
    block = [int(d) for d in node.const(block_shape, "the block_shape input")]
    taps = int(np.prod(block))
    if x.ndim != 3 or x.shape[1] is None or x.shape[1] % taps:
        raise node.error(f"needs an input (N, C * {taps}, L) for blocks {block}, got shape "
                         f"{x.shape}")
    geometry = window(node, image, block)
    positions = [geometry.positions(a, size) for a, size in enumerate(image)]
    if x.shape[2] is not None and x.shape[2] != int(np.prod(positions)):
        raise node.error(f"{x.shape[2]} columns, where the image {image} has "
                         f"{int(np.prod(positions))} block positions")
    channels = x.shape[1] // taps
    padded = [size + lo + hi for size, (lo, hi) in zip(image, geometry.pads, strict=True)]
    columns = sf.reshape(x, (-1, channels, taps, *positions))
    total = None
    for tap, index in enumerate(np.ndindex(*block)):
        placed = columns[:, :, tap]
        for axis, offset in enumerate(index):
            placed = spread(placed, 2 + axis, geometry.strides[axis],
                            offset * geometry.dilations[axis], padded[axis])
        total = placed if total is None else total + placed
    crop = tuple(slice(lo, lo + size) for size, (lo, _) in zip(image, geometry.pads,
                                                                strict=True))
    return total[(slice(None), slice(None), *crop)]
