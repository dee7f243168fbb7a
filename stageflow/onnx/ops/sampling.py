"""Sampling an image at computed positions: GridSample (opsets 16, 20 and 22), AffineGrid
(opset 20) and RoiAlign (opsets 10 to 22).

The positions are data (a grid, boxes), so the taps each output reads are computed in the
graph: per spatial axis the tap indices and their weights (nearest, linear or cubic, ONNX's
padding modes applied to the coordinate and to each tap), then one `sf.gather_nd` of the
(batch, flat position) pairs from the image with its channels last, and a weighted sum over
the taps. GridSample's axes are separable, so the taps of all axes are the outer product of
each axis's taps. RoiAlign averages (or takes the max of) bilinear samples on a regular grid
in each bin; its grid has a fixed size when `sampling_ratio` is set, and otherwise one per
box that depends on the box's size, sampled by an `sf.while_loop` over the largest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import stageflow as sf
from stageflow.core.dtypes import is_floating
from stageflow.onnx.converters import Node, Value, converts

_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_ALPHA = -0.75


def _static(node: Node, dims: Sequence[int | None], what: str) -> tuple[int, ...]:
    if any(d is None for d in dims):
        raise node.error(f"{what} must be static, got {tuple(dims)}; give the model's inputs "
                         f"static shapes (sf.onnx.load(..., input_shapes={{name: shape}}))")
    return tuple(int(d) for d in dims)


def _batch_index(like: Value) -> Value:
    """0, 1, ... along axis 0 of `like` (an int tensor), broadcast over its other axes: the
    batch coordinate of a gather, whether the batch size is known or not."""
    return sf.cumsum(sf.ones_like(like), axis=0) - 1


def _channels_last(x: Value) -> Value:
    """(N, C, *spatial) as (N, *spatial, C)."""
    return sf.transpose(x, (0, *range(2, x.ndim), 1))


def _flatten_spatial(node: Node, image: Value, positions: int) -> Value:
    """(N, *spatial, C) as (N, positions, C)."""
    batch, channels = image.shape[0], image.shape[-1]
    if batch is None and channels is None:
        raise node.error("X needs a static batch size or channel count; give the model's "
                         "inputs static shapes (sf.onnx.load(..., input_shapes={name: "
                         "shape}))")
    return sf.reshape(image, (-1 if batch is None else batch, positions,
                              -1 if channels is None else channels))


def _reflect(x: Value, low: float, high: float) -> Value:
    """`x` reflected by the nearer border until it lies in [low, high] (ONNX's reference
    `_gs_reflect`)."""
    span = high - low
    if span == 0:
        return sf.zeros_like(x) + low
    below = sf.less(x, low)
    distance = sf.where(below, low - x, x - high)
    folds = sf.floor(distance / span)
    rest = distance - folds * span
    even = sf.equal(folds - 2 * sf.floor(folds / 2), 0)
    inside_low, inside_high = low + rest, high - rest
    reflected = sf.where(below, sf.where(even, inside_low, inside_high),
                         sf.where(even, inside_high, inside_low))
    return sf.where(sf.logical_or(below, sf.greater(x, high)), reflected, x)


def _cubic_weights(t: Value) -> list[Value]:
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for the fraction `t`."""
    a = _CUBIC_ALPHA

    def far(d: Value) -> Value:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    def near(d: Value) -> Value:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _axis_taps(coordinate: Value, size: int, mode: str, padding: str,
               align_corners: bool) -> tuple[list[Value], list[Value | None], list[Value]]:
    """For one spatial axis of `size`: each tap's index into the axis (int64, in range),
    weight (None for nearest) and validity (False where zeros padding reads outside)."""
    if align_corners:
        x = (coordinate + 1) / 2 * (size - 1)
        low, high = 0.0, size - 1.0
    else:
        x = ((coordinate + 1) * size - 1) / 2
        low, high = -0.5, size - 0.5
    if mode == "nearest":
        x = sf.round(x)
    outside = sf.logical_or(sf.less(x, low), sf.greater(x, high))
    if padding == "border":
        x = sf.where(outside, sf.clip_by_value(x, 0.0, size - 1.0), x)
    elif padding == "reflection":
        x = sf.where(outside, _reflect(x, low, high), x)
    if mode == "nearest":
        starts, weights = [sf.cast(x, sf.int64)], [None]
    else:
        floor = sf.floor(x)
        t = x - floor
        first = sf.cast(floor, sf.int64)
        if mode == "linear":
            starts, weights = [first, first + 1], [1 - t, t]
        else:
            starts = [first - 1, first, first + 1, first + 2]
            weights = _cubic_weights(t)
    indices, valid = [], []
    for index in starts:
        if padding == "zeros":
            valid.append(sf.logical_and(sf.greater_equal(index, 0), sf.less(index, size)))
        elif padding == "reflection":
            index = sf.cast(_reflect(sf.cast(index, x.dtype), low, high), sf.int64)
        indices.append(sf.clip_by_value(index, np.int64(0), np.int64(size - 1)))
    return indices, weights, valid


def _expand_taps(values: list[list[Value]], rank: int) -> list[Value]:
    """Per axis, its taps stacked on a new axis of their own (axis k of `rank` tap axes),
    so that the axes' taps broadcast to their outer product."""
    result = []
    for axis, taps in enumerate(values):
        stacked = sf.stack(taps, axis=-1)
        for _ in range(axis):
            stacked = sf.expand_dims(stacked, -2)
        for _ in range(rank - axis - 1):
            stacked = sf.expand_dims(stacked, -1)
        result.append(stacked)
    return result


def _mode(node: Node) -> str:
    mode = node.attr("mode", "bilinear" if node.opset < 20 else "linear")
    names = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"} \
        if node.opset < 20 else {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}
    if mode not in names:
        raise node.error(f"mode must be one of {', '.join(names)} at opset {node.opset}, "
                         f"got {mode!r}")
    return names[mode]


@converts("GridSample")
def grid_sample(node: Node, x: Value, grid: Value) -> Value:
    """Y[n, c, *p] = X[n, c] interpolated at grid[n, *p], whose last axis holds the
    normalized coordinates in [-1, 1], the last spatial axis first."""
    mode = _mode(node)
    padding = node.attr("padding_mode", "zeros")
    if padding not in _PADDINGS:
        raise node.error(f"padding_mode must be one of {', '.join(_PADDINGS)}, got "
                         f"{padding!r}")
    align_corners = bool(node.attr("align_corners", 0))
    rank = x.ndim - 2
    if rank < 1 or grid.ndim != rank + 2 or grid.shape[-1] not in (rank, None):
        raise node.error(f"X of shape {tuple(x.shape)} needs a grid of shape (N, "
                         f"{', '.join(['...'] * rank)}, {rank}), got {tuple(grid.shape)}")
    if node.opset < 20 and rank != 2:
        raise node.error(f"GridSample-{node.opset} samples 4-D inputs only (opset 20 "
                         f"samples N-D ones), got shape {tuple(x.shape)}")
    sizes = _static(node, x.shape[2:], "the spatial dims of X")
    if mode != "nearest" and not is_floating(np.dtype(x.dtype)):
        raise node.error(f"{mode} interpolation needs a floating X, got "
                         f"{np.dtype(x.dtype)}; cast X to float first")
    if not is_floating(np.dtype(grid.dtype)):
        raise node.error(f"the grid must be floating, got {np.dtype(grid.dtype)}")
    coordinates = grid if np.dtype(grid.dtype) == np.float64 else sf.cast(grid, sf.float32)
    indices, weights, valid = [], [], []
    for axis, size in enumerate(sizes):
        taps = _axis_taps(coordinates[..., rank - 1 - axis], size, mode, padding,
                          align_corners)
        indices.append(taps[0])
        weights.append(taps[1])
        valid.append(taps[2])
    strides = [int(np.prod(sizes[axis + 1:])) for axis in range(rank)]
    flat = sum(i * np.int64(s) for i, s in
               zip(_expand_taps(indices, rank), strides, strict=True))
    batch = _batch_index(flat)
    image = _flatten_spatial(node, _channels_last(x), int(np.prod(sizes)))
    values = sf.gather_nd(image, sf.stack([batch, flat], axis=-1))  # (N, *out, *taps, C)
    if padding == "zeros":
        inside = None
        for taps in _expand_taps(valid, rank):
            inside = taps if inside is None else sf.logical_and(inside, taps)
        values = sf.where(sf.expand_dims(inside, -1), values,
                          np.zeros((), np.dtype(x.dtype)))
    tap_axes = tuple(range(grid.ndim - 1, grid.ndim - 1 + rank))
    if mode == "nearest":
        result = sf.squeeze(values, tap_axes)
    else:
        weight = None
        for taps in _expand_taps(weights, rank):
            weight = taps if weight is None else weight * taps
        weight = sf.cast(weight, x.dtype)
        result = sf.reduce_sum(values * sf.expand_dims(weight, -1), axis=tap_axes)
    return sf.transpose(result, (0, result.ndim - 1, *range(1, result.ndim - 1)))


def _base_coordinates(size: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates of an axis's `size` samples."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size)
    return (2 * np.arange(size) + 1) / size - 1


@converts("AffineGrid")
def affine_grid(node: Node, theta: Value, size: Value) -> Value:
    """grid[n, *p] = theta[n] @ (x, y[, z], 1) of output position p: the sampling grid of
    GridSample for a batch of affine maps, (N, H, W, 2) or (N, D, H, W, 3)."""
    dims = [int(d) for d in node.const(size, "the size input")]
    if len(dims) not in (4, 5):
        raise node.error(f"size must be (N, C, H, W) or (N, C, D, H, W), got {dims}")
    spatial = dims[2:]
    rank = len(spatial)
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (rank, rank + 1):
        raise node.error(f"theta must be (N, {rank}, {rank + 1}) for a {rank}-D size, got "
                         f"{tuple(theta.shape)}")
    align_corners = bool(node.attr("align_corners", 0))
    axes = [_base_coordinates(s, align_corners) for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    # (x, y[, z], 1) per position: the last spatial axis first
    base = np.stack([*reversed(mesh), np.ones(spatial)], axis=-1).reshape(-1, rank + 1)
    base = base.astype(np.dtype(theta.dtype))
    grid = sf.matmul(base, theta, transpose_b=True)  # (N, positions, rank)
    return sf.reshape(grid, (dims[0], *spatial, rank))


_ROI_MODES = ("avg", "max")
_ROI_TRANSFORMS = ("half_pixel", "output_half_pixel")


def _bilinear_terms(image: Value, rois_batch: Value, y: Value, x: Value, height: int,
                    width: int) -> list[Value]:
    """The four weighted corner values w * X[b, :, y, x] of RoiAlign's bilinear sample at
    each (y, x), ONNX's reference's rules at the borders: (*points, C) each."""
    dtype = np.dtype(image.dtype)
    zero = np.zeros((), dtype)
    outside = sf.logical_or(sf.logical_or(sf.less(y, -1.0), sf.greater(y, float(height))),
                            sf.logical_or(sf.less(x, -1.0), sf.greater(x, float(width))))
    corners = []
    for value, size in ((y, height), (x, width)):
        value = sf.maximum(value, zero)
        low = sf.cast(sf.floor(value), sf.int64)
        top = sf.greater_equal(low, size - 1)
        low = sf.clip_by_value(low, np.int64(0), np.int64(size - 1))  # NaN positions too
        high = sf.minimum(sf.where(top, low, low + 1), np.int64(size - 1))
        fraction = sf.where(top, zero, value - sf.cast(low, dtype))
        corners.append((low, high, 1 - fraction, fraction))
    (y_low, y_high, hy, ly), (x_low, x_high, hx, lx) = corners
    points = sf.zeros_like(y_low) + sf.zeros_like(x_low)
    batch = rois_batch + points
    terms = []
    for rows, wy in ((y_low, hy), (y_high, ly)):
        for cols, wx in ((x_low, hx), (x_high, lx)):
            weight = sf.where(outside, zero, wy * wx)
            pixel = sf.gather_nd(image, sf.stack([batch, rows + points, cols + points],
                                                 axis=-1))
            terms.append(sf.expand_dims(weight, -1) * pixel)
    return terms


def _combine(terms: list[Value], mode: str) -> Value:
    """One sample's value: the sum of its weighted corners (avg) or their max."""
    result = terms[0]
    for term in terms[1:]:
        result = result + term if mode == "avg" else sf.maximum(result, term)
    return result


@converts("RoiAlign")
def roi_align(node: Node, x: Value, rois: Value, batch_indices: Value) -> Value:
    """Y[r, c] = the (output_height, output_width) bins of box r of X[batch_indices[r], c],
    each the average (or max) of bilinear samples on a regular grid in the bin."""
    mode = node.attr("mode", "avg")
    if mode not in _ROI_MODES:
        raise node.error(f"mode must be one of {', '.join(_ROI_MODES)}, got {mode!r}")
    transform = node.attr("coordinate_transformation_mode",
                          "half_pixel" if node.opset >= 16 else "output_half_pixel")
    if transform not in _ROI_TRANSFORMS:
        raise node.error(f"coordinate_transformation_mode must be one of "
                         f"{', '.join(_ROI_TRANSFORMS)}, got {transform!r}")
    out_h, out_w = node.attr("output_height", 1), node.attr("output_width", 1)
    ratio = node.attr("sampling_ratio", 0)
    scale = node.attr("spatial_scale", 1.0)
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] not in (4, None):
        raise node.error(f"X must be (N, C, H, W) and rois (num_rois, 4), got "
                         f"{tuple(x.shape)} and {tuple(rois.shape)}")
    if out_h < 1 or out_w < 1 or ratio < 0:
        raise node.error(f"output_height ({out_h}) and output_width ({out_w}) must be "
                         f"positive and sampling_ratio ({ratio}) nonnegative")
    if not is_floating(np.dtype(x.dtype)):
        raise node.error(f"X must be floating, got {np.dtype(x.dtype)}")
    height, width = _static(node, x.shape[2:], "the spatial dims of X")
    dtype = np.dtype(x.dtype)
    half = transform == "half_pixel"
    boxes = sf.cast(rois, dtype) * np.asarray(scale, dtype) - np.asarray(0.5 if half else 0,
                                                                         dtype)
    start_w, start_h, end_w, end_h = (sf.reshape(boxes[:, i], (-1, 1, 1, 1))
                                      for i in range(4))
    roi_w, roi_h = end_w - start_w, end_h - start_h
    if not half:
        roi_w, roi_h = sf.maximum(roi_w, np.ones((), dtype)), sf.maximum(roi_h,
                                                                        np.ones((), dtype))
    bin_h, bin_w = roi_h / out_h, roi_w / out_w
    rows = np.arange(out_h, dtype=dtype).reshape(1, out_h, 1, 1)
    cols = np.arange(out_w, dtype=dtype).reshape(1, 1, out_w, 1)
    image = _channels_last(x)
    rois_batch = sf.reshape(sf.cast(batch_indices, sf.int64), (-1, 1, 1, 1))

    def terms(iy: Value, ix: Value, grid_h: Value, grid_w: Value) -> list[Value]:
        """The weighted corners at sample (iy, ix) of each bin: (R, out_h, out_w, S, C)."""
        y = start_h + rows * bin_h + (iy + 0.5) * bin_h / grid_h
        x_ = start_w + cols * bin_w + (ix + 0.5) * bin_w / grid_w
        return _bilinear_terms(image, rois_batch, y, x_, height, width)

    if ratio > 0:
        grid = np.arange(ratio, dtype=dtype)
        samples = _combine(terms(np.repeat(grid, ratio), np.tile(grid, ratio),
                                 np.asarray(ratio, dtype), np.asarray(ratio, dtype)), mode)
        pooled = sf.reduce_sum(samples, axis=3) / (ratio * ratio) if mode == "avg" else \
            sf.reduce_max(samples, axis=3)
    else:
        # (R, out_h, out_w, 1, C) zeros: the accumulator of one sample per bin
        empty = sf.expand_dims(sf.zeros_like(start_h + rows + cols), -1) + \
            sf.reshape(sf.zeros_like(image[:1, :1, :1, :]), (1, 1, 1, 1, -1))
        pooled = _adaptive_pool(terms, empty, bin_h, bin_w, mode)
    return sf.transpose(pooled, (0, 3, 1, 2))


def _adaptive_pool(terms: Callable[..., list[Value]], empty: Value, bin_h: Value,
                   bin_w: Value, mode: str) -> Value:
    """RoiAlign's pooling where each box samples ceil(bin size) points a bin along each
    axis: an `sf.while_loop` over the largest box's grid, each box taking its own points
    (`empty` is the zero accumulator of one sample per bin)."""
    dtype = np.dtype(empty.dtype)
    grid_h, grid_w = sf.ceil(bin_h), sf.ceil(bin_w)  # (R, 1, 1, 1)
    most_h = sf.cast(sf.reduce_max(grid_h), sf.int64)
    most_w = sf.maximum(sf.cast(sf.reduce_max(grid_w), sf.int64), np.int64(1))
    start = empty if mode == "avg" else empty + np.asarray(-np.inf, dtype)

    def more(s: Value, total: Value) -> Value:
        return sf.less(s, most_h * most_w)

    one = np.ones((), dtype)
    # a box of no samples (an empty half_pixel box) divides by 1: its samples are not taken
    divisor_h, divisor_w = sf.maximum(grid_h, one), sf.maximum(grid_w, one)

    def step(s: Value, total: Value) -> tuple[Value, Value]:
        iy, ix = sf.cast(s // most_w, dtype), sf.cast(s % most_w, dtype)
        sample = _combine(terms(sf.reshape(iy, (1,)), sf.reshape(ix, (1,)), divisor_h,
                                divisor_w), mode)
        taken = sf.expand_dims(sf.logical_and(sf.less(iy, grid_h), sf.less(ix, grid_w)), -1)
        combined = total + sample if mode == "avg" else sf.maximum(total, sample)
        return s + 1, sf.where(taken, combined, total)

    _, total = sf.while_loop(more, step, (sf.constant(np.int64(0)), start))
    total = sf.squeeze(total, 3)
    count = grid_h * grid_w  # (R, 1, 1, 1) against (R, out_h, out_w, C)
    if mode == "avg":
        return total / sf.maximum(count, one)
    return sf.where(sf.greater(count, np.zeros((), dtype)), total, np.zeros((), dtype))
