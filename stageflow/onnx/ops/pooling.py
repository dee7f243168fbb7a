"""Pooling: MaxPool (with its Indices), AveragePool, LpPool, their global forms, MaxUnpool.

The input is padded with the reduction's identity (-inf for max, 0 for sums, ceil_mode's
last windows included). 1-D and 2-D windows without dilation then go the way of the
convolutions: transposed to channels-last, pooled by sf.nn's max_pool2d or avg_pool2d
unpadded, transposed back; between a convolution and a pooling the transposes meet, and
simplify's layout rules cancel them. Other windows (3-D, dilated) are reduced on
channels-first data one spatial axis at a time (max and sum are separable) over the
window's taps, each a strided slice. The average divides the sum by a constant of
per-position counts (padding counted or not, as `count_include_pad` says; ceil_mode's
extension never). MaxPool's Indices output compares every tap with the best so far
instead (argmax is not separable)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.convolution import Window, tap_slices, window
from stageflow.primitives.conv import reduce_window_p


def _static_sizes(node: Node, x: Value) -> tuple[int, ...]:
    sizes = tuple(x.shape[2:])
    if x.ndim < 3 or None in sizes:
        raise node.error(f"needs an input (N, C, *spatial) of static spatial dims, got shape "
                         f"{x.shape}; give the model's inputs static shapes (sf.onnx.load(..., "
                         f"input_shapes={{name: shape}}))")
    return sizes


def _geometry(node: Node, sizes: Sequence[int]) -> tuple[Window, list[int], list[int]]:
    """The window, the output's spatial sizes, and the extra padding after each axis that
    ceil_mode's last windows need beyond the declared pads."""
    kernel = [int(k) for k in node.attr("kernel_shape")]
    if len(kernel) != len(sizes):
        raise node.error(f"kernel_shape {kernel} for {len(sizes)} spatial dims")
    geometry = window(node, sizes, kernel)
    ceil = bool(node.attr("ceil_mode", 0))
    outputs, extra = [], []
    for axis, size in enumerate(sizes):
        before, after = geometry.pads[axis]
        free = size + before + after - geometry.span(axis)
        if free < 0:
            raise node.error(f"the window {kernel} does not fit the padded input of spatial "
                             f"shape {list(sizes)}")
        stride = geometry.strides[axis]
        count = -(-free // stride) + 1 if ceil else free // stride + 1
        if ceil and (count - 1) * stride >= size + before:
            count -= 1  # the last window must start inside the input or the pads before
        outputs.append(count)
        extra.append(max((count - 1) * stride + geometry.span(axis) - size - before - after, 0))
    return geometry, outputs, extra


def _identity(kind: str, dtype: np.dtype) -> float | int:
    if kind == "sum":
        return 0
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else -np.inf


def _padded(x: Value, geometry: Window, extra: Sequence[int], kind: str) -> Value:
    pads = [(lo, hi + e) for (lo, hi), e in zip(geometry.pads, extra, strict=True)]
    if not any(lo or hi for lo, hi in pads):
        return x
    return sf.pad(x, [(0, 0), (0, 0), *pads], constant_values=_identity(kind, _dtype(x)))


def _dtype(x: Value) -> np.dtype:
    return np.dtype(x.dtype) if isinstance(x, np.ndarray) else np.dtype(x.dtype.name)


def reduce_windows(x: Value, geometry: Window, outputs: Sequence[int], extra: Sequence[int],
                   kind: str) -> Value:
    """max or sum over each window of channels-first `x`, padded by the window's pads and
    `extra` after: in 1-D and 2-D one `reduce_window`, whose padding is the reduction's
    identity (no padded copy of the input), else strided slices of the padded input."""
    rank = len(outputs)
    if rank > 2 or any(d > 1 for d in geometry.dilations):
        return _reduce_slices(_padded(x, geometry, extra, kind), geometry, outputs, kind)
    kernel, strides = list(geometry.kernel), list(geometry.strides)
    pads = [(lo, hi + e) for (lo, hi), e in zip(geometry.pads, extra, strict=True)]
    if rank == 1:  # the 2-D window of height 1
        kernel, strides, pads, x = [1, *kernel], [1, *strides], [(0, 0), *pads], \
            sf.expand_dims(x, 2)
    images = sf.transpose(x, (0, 2, 3, 1))
    y = reduce_window_p.bind(images, kind=kind, window=tuple(kernel), strides=tuple(strides),
                             padding=tuple(pads))
    y = sf.transpose(y, (0, 3, 1, 2))
    if rank == 1:
        y = sf.squeeze(y, 2)
    if tuple(y.shape[2:]) != tuple(outputs):  # ceil_mode dropped a last window
        y = y[(slice(None), slice(None), *(slice(0, n) for n in outputs))]
    return y


def _reduce_slices(x: Value, geometry: Window, outputs: Sequence[int], kind: str) -> Value:
    """max or sum over each window of the padded channels-first `x`, one axis at a time."""
    combine = sf.maximum if kind == "max" else sf.add
    for axis, count in enumerate(outputs):
        taps = None
        for tap in range(geometry.kernel[axis]):
            start = tap * geometry.dilations[axis]
            index = [slice(None)] * x.ndim
            index[2 + axis] = slice(start, start + (count - 1) * geometry.strides[axis] + 1,
                                    geometry.strides[axis])
            piece = x[tuple(index)]
            taps = piece if taps is None else combine(taps, piece)
        x = taps
    return x


def _counts(sizes: Sequence[int], geometry: Window, outputs: Sequence[int],
            include_pad: bool) -> np.ndarray:
    """How many elements each window averages, shaped (*outputs): those of the input, or
    with include_pad those of the declared padding too (never ceil_mode's extension)."""
    counts = np.ones((), np.int64)
    for axis, (size, count) in enumerate(zip(sizes, outputs, strict=True)):
        before, after = geometry.pads[axis]
        lo, hi = (-before, size + after) if include_pad else (0, size)
        starts = np.arange(count) * geometry.strides[axis] - before
        taps = starts[:, None] + np.arange(geometry.kernel[axis]) * geometry.dilations[axis]
        counts = np.multiply.outer(counts, ((taps >= lo) & (taps < hi)).sum(axis=1))
    return counts


@converts("MaxPool")
def max_pool(node: Node, x: Value) -> Value | list[Value]:
    sizes = _static_sizes(node, x)
    geometry, outputs, extra = _geometry(node, sizes)
    if not node.wants(1):
        return reduce_windows(x, geometry, outputs, extra, "max")
    padded = _padded(x, geometry, extra, "max")
    return list(_max_with_indices(node, padded, x.shape, geometry, outputs))


def _max_with_indices(node: Node, padded: Value, shape: Sequence[int | None],
                      geometry: Window, outputs: Sequence[int]) -> tuple[Value, Value]:
    """The maximum of each window and the flat index (into the input, row-major or
    column-major over the spatial axes as storage_order says) of its first maximum."""
    if None in shape[:2]:
        raise node.error(f"the Indices output needs a static batch and channel count, got "
                         f"input shape {tuple(shape)}")
    order = int(node.attr("storage_order", 0))
    sizes = list(shape[2:])
    steps = np.cumprod([1, *sizes[::-1]])[:-1][::-1] if order == 0 else \
        np.cumprod([1, *sizes])[:-1]
    planes = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(
        shape[0], shape[1], *[1] * len(sizes)) * int(np.prod(sizes))
    best: Value | None = None
    indices: Value | None = None
    for index in np.ndindex(*geometry.kernel):
        tap = padded[(slice(None), slice(None), *tap_slices(geometry, index, outputs))]
        positions = [np.arange(n) * s - lo + i * d for n, s, (lo, _), i, d in
                     zip(outputs, geometry.strides, geometry.pads, index, geometry.dilations,
                         strict=True)]
        flat = planes + _outer_sum([p * step for p, step in zip(positions, steps,
                                                                  strict=True)])
        if best is None:
            best, indices = tap, flat
        else:
            better = sf.greater(tap, best)
            indices = sf.where(better, flat, indices)
            best = sf.where(better, tap, best)
    return best, indices


def _outer_sum(parts: Sequence[np.ndarray]) -> np.ndarray:
    """parts[0][:, None, ...] + parts[1][None, :, ...] + ...: each axis its own part."""
    total = np.zeros((), np.int64)
    for part in parts:
        total = np.add.outer(total, part)
    return total


@converts("AveragePool", "LpPool")
def average_pool(node: Node, x: Value) -> Value:
    sizes = _static_sizes(node, x)
    geometry, outputs, extra = _geometry(node, sizes)
    if node.op_type == "LpPool":
        p = int(node.attr("p", 2))
        powered = sf.abs(x) if p == 1 else sf.pow(sf.abs(x), float(p))
        total = reduce_windows(powered, geometry, outputs, extra, "sum")
        return total if p == 1 else sf.pow(total, 1.0 / p)
    total = reduce_windows(x, geometry, outputs, extra, "sum")
    counts = _counts(sizes, geometry, outputs, bool(node.attr("count_include_pad", 0)))
    return total / counts.astype(_dtype(x))


@converts("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(node: Node, x: Value) -> Value:
    axes = tuple(range(2, x.ndim))
    if node.op_type == "GlobalAveragePool":
        return sf.reduce_mean(x, axis=axes, keepdims=True)
    if node.op_type == "GlobalMaxPool":
        return sf.reduce_max(x, axis=axes, keepdims=True)
    p = float(node.attr("p", 2))
    return sf.pow(sf.reduce_sum(sf.pow(sf.abs(x), p), axis=axes, keepdims=True), 1.0 / p)


@converts("MaxUnpool")
def max_unpool(node: Node, x: Value, indices: Value,
               output_shape: Value | None = None) -> Value:
    """Zeros with each value of `x` written at its flat index, into the shape that MaxPool's
    geometry implies, then zero-padded after to `output_shape` where it is larger (as
    ONNX's reference reads the indices)."""
    sizes = _static_sizes(node, x)
    if None in x.shape[:2]:
        raise node.error(f"needs a static batch and channel count, got input shape {x.shape}")
    geometry = window(node, sizes, node.attr("kernel_shape"))
    implied = [x.shape[0], x.shape[1]] + [
        (size - 1) * stride - before - after + kernel for size, stride, (before, after), kernel
        in zip(sizes, geometry.strides, geometry.pads, geometry.kernel, strict=True)]
    total = int(np.prod(implied))
    flat = sf.tensor_scatter_nd_update(sf.zeros((total,), x.dtype),
                                       sf.reshape(indices, (-1, 1)), sf.reshape(x, (-1,)))
    y = sf.reshape(flat, implied)
    if output_shape is None:
        return y
    wanted = [int(d) for d in node.const(output_shape, "the output_shape input")]
    if len(wanted) != len(implied) or any(w < i for w, i in zip(wanted, implied, strict=True)):
        raise node.error(f"output_shape {wanted} is smaller than the unpooled shape {implied}")
    return sf.pad(y, [(0, w - i) for w, i in zip(wanted, implied, strict=True)])
