"""Convolutions: Conv and ConvTranspose over 1, 2 and 3 spatial dims, strided, dilated,
padded (explicit pads or auto_pad) and grouped; ConvInteger; 2-D DeformConv.

ONNX images are channels-first (N, C, *spatial) and filters (O, I / group, *kernel); sf's
convolutions are channels-last (NHWC by HWIO). Every convolution here goes one way: the
input is transposed to channels-last, convolved by `sf.nn.conv2d` (or its transpose), the
bias added there, and the result transposed back. A filter known at import is transposed
at import. A 1-D convolution is a 2-D one of height 1; a 3-D one is a sum over the depth
taps of 2-D ones, the depth positions folded into the batch. A depthwise convolution (one
input channel per group) is `sf.nn.depthwise_conv2d`, with the same transposes and rank
rules; other groups are one grouped convolution (`sf.nn.conv2d` infers the groups from
the filters' input channels, as TensorFlow does). A ConvTranspose of several groups is one
transposed convolution per group, concatenated. Between two
convolutions, the transpose back and the next one's transpose meet past the elementwise
ops between them, and simplify's layout rules cancel them.

`window` resolves ONNX's geometry attributes (shared with the pooling ops) into explicit
(before, after) pads per spatial axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts

Pads = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Window:
    """A window's geometry along each spatial axis, its padding explicit."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: Pads

    def span(self, axis: int) -> int:
        """The dilated window's extent along `axis`."""
        return (self.kernel[axis] - 1) * self.dilations[axis] + 1

    def positions(self, axis: int, size: int) -> int:
        """How many windows fit along `axis` of `size` with its padding (floor mode)."""
        before, after = self.pads[axis]
        return (size + before + after - self.span(axis)) // self.strides[axis] + 1


def _ints(node: Node, name: str, rank: int, default: int) -> tuple[int, ...]:
    values = tuple(int(v) for v in node.attr(name, [default] * rank))
    if len(values) != rank:
        raise node.error(f"{name} has {len(values)} values for {rank} spatial dims")
    return values


def window(node: Node, sizes: Sequence[int | None], kernel: Sequence[int]) -> Window:
    """The node's strides, dilations and pads (attribute `pads`, or what `auto_pad` implies
    for input spatial `sizes`) for a window of `kernel`."""
    rank = len(sizes)
    kernel = tuple(int(k) for k in kernel)
    strides = _ints(node, "strides", rank, 1)
    dilations = _ints(node, "dilations", rank, 1)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        flat = _ints(node, "pads", 2 * rank, 0)
        if min(flat, default=0) < 0:
            raise node.error(f"negative pads {list(flat)} are not supported")
        pads = tuple((flat[a], flat[rank + a]) for a in range(rank))
    elif auto_pad == "VALID":
        pads = ((0, 0),) * rank
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = tuple(_same(node, sizes[a], kernel[a], strides[a], dilations[a],
                           auto_pad == "SAME_UPPER") for a in range(rank))
    else:
        raise node.error(f"auto_pad {auto_pad!r} is not one of NOTSET, SAME_UPPER, "
                         f"SAME_LOWER, VALID")
    return Window(kernel, strides, dilations, pads)


def _same(node: Node, size: int | None, kernel: int, stride: int, dilation: int,
          upper: bool) -> tuple[int, int]:
    """SAME padding: the output is ceil(size / stride); the odd pad goes after (UPPER) or
    before (LOWER)."""
    span = (kernel - 1) * dilation + 1
    if size is None:
        if stride != 1:
            raise node.error("auto_pad SAME with strides > 1 needs static spatial dims; give "
                             "the model's inputs static shapes (sf.onnx.load(..., "
                             "input_shapes={name: shape}))")
        total = span - 1
    else:
        total = max((math.ceil(size / stride) - 1) * stride + span - size, 0)
    small, large = total // 2, total - total // 2
    return (small, large) if upper else (large, small)


def _transpose(value: Value, perm: Sequence[int]) -> Value:
    """sf.transpose, or NumPy's for an array known at import (weights), so that the model's
    filters are stored in sf's layout instead of transposed on every call."""
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(np.transpose(value, perm))
    return sf.transpose(value, perm)


def _reshape(value: Value, shape: Sequence[int]) -> Value:
    return value.reshape(shape) if isinstance(value, np.ndarray) else sf.reshape(value, shape)


def _split(value: Value, parts: int) -> list[Value]:
    """`value` split into `parts` along its last axis."""
    if isinstance(value, np.ndarray):
        return [np.ascontiguousarray(p) for p in np.split(value, parts, axis=-1)]
    return sf.split(value, parts, axis=-1)


def channels_last(x: Value) -> Value:
    """(N, C, *spatial) as (N, *spatial, C)."""
    return sf.transpose(x, (0, *range(2, x.ndim), 1))


def channels_first(x: Value) -> Value:
    """(N, *spatial, C) as (N, C, *spatial)."""
    return sf.transpose(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))


def _spatial_rank(node: Node, x: Value, w: Value) -> int:
    rank = x.ndim - 2
    if rank not in (1, 2, 3) or w.ndim != x.ndim:
        raise node.error(f"input of shape {x.shape} and filters of shape {w.shape}: "
                         f"stageflow converts 1-D, 2-D and 3-D convolutions")
    if None in w.shape:
        raise node.error(f"the filters' shape {w.shape} must be static")
    if rank == 3 and None in x.shape[2:]:
        raise node.error(f"a 3-D convolution needs static spatial dims, got input shape "
                         f"{x.shape}; give the model's inputs static shapes (sf.onnx.load(..., "
                         f"input_shapes={{name: shape}}))")
    dtype = np.dtype(x.dtype) if isinstance(x, np.ndarray) else np.dtype(x.dtype.name)
    if not np.issubdtype(dtype, np.floating) and dtype.name != "bfloat16":
        raise node.error(f"expects a floating input, got {dtype.name} (integer convolutions "
                         f"are ConvInteger's)")
    return rank


def _check_kernel(node: Node, w: Value) -> None:
    if "kernel_shape" in node.attributes and \
            tuple(node.attr("kernel_shape")) != tuple(w.shape[2:]):
        raise node.error(f"kernel_shape {node.attr('kernel_shape')} differs from the "
                         f"filters' spatial shape {tuple(w.shape[2:])}")


@converts("Conv")
def conv(node: Node, x: Value, w: Value, b: Value | None = None) -> Value:
    _spatial_rank(node, x, w)
    _check_kernel(node, w)
    geometry = window(node, x.shape[2:], w.shape[2:])
    group = int(node.attr("group", 1))
    channels, out_channels = w.shape[1] * group, w.shape[0]
    if x.shape[1] is not None and x.shape[1] != channels or out_channels % group:
        raise node.error(f"input of shape {x.shape}, filters of shape {w.shape} and group "
                         f"{group} do not match")
    image = channels_last(x)
    if group > 1 and w.shape[1] == 1:
        y = _depthwise(image, w, geometry, group)
        return channels_first(y if b is None else y + b)
    if group > 1 and x.shape[1] is None:
        raise node.error(f"a grouped Conv (group {group}) needs the input's channels known, "
                         f"got input shape {x.shape}; give the model's inputs static shapes "
                         f"(sf.onnx.load(..., input_shapes={{name: shape}}))")
    filters = _transpose(w, (*range(2, w.ndim), 1, 0))  # (*kernel, I / group, O)
    y = _conv_last(image, filters, geometry)
    if b is not None:
        y = y + b
    return channels_first(y)


@converts("ConvInteger")
def conv_integer(node: Node, x: Value, w: Value, x_zero_point: Value | None = None,
                 w_zero_point: Value | None = None) -> Value:
    """(x - x_zero_point) convolved with (w - w_zero_point), in int32: computed in float64,
    exact for 8-bit operands (every sum stays far below 2 ** 53)."""
    x = sf.cast(x, sf.float64)
    if x_zero_point is not None:
        x = x - sf.cast(x_zero_point, sf.float64)
    w = w.astype(np.float64) if isinstance(w, np.ndarray) else sf.cast(w, sf.float64)
    if w_zero_point is not None:
        point = _reshape(w_zero_point, (-1,) + (1,) * (w.ndim - 1))
        w = w - (point.astype(np.float64) if isinstance(point, np.ndarray)
                 else sf.cast(point, sf.float64))
    return sf.cast(conv(node, x, w), sf.int32)


def _conv_last(x: Value, w: Value, geometry: Window,
               planar: Callable[..., Value] = sf.nn.conv2d) -> Value:
    """A channels-last convolution of 1, 2 or 3 spatial dims by `planar`, the 2-D op
    (`sf.nn.conv2d` of (*kernel, I, O) filters, or `sf.nn.depthwise_conv2d` of (*kernel,
    C, M)): 1-D as 2-D of height 1, 3-D as a sum over the depth taps of 2-D ones."""
    rank = x.ndim - 2
    if rank == 1:
        y = _conv_last(sf.expand_dims(x, 1), sf.expand_dims(w, 0), _raise_rank(geometry),
                       planar)
        return sf.squeeze(y, 1)
    if rank == 2:
        return planar(x, w, geometry.strides, geometry.pads, dilations=geometry.dilations)
    depth = geometry.positions(0, x.shape[1])
    padded = sf.pad(x, [(0, 0), geometry.pads[0], (0, 0), (0, 0), (0, 0)])
    planes = Window(geometry.kernel[1:], geometry.strides[1:], geometry.dilations[1:],
                    geometry.pads[1:])
    total = None
    for tap in range(geometry.kernel[0]):
        start = tap * geometry.dilations[0]
        rows = padded[:, start:start + (depth - 1) * geometry.strides[0] + 1:
                      geometry.strides[0]]
        flat = sf.reshape(rows, (-1, *rows.shape[2:]))
        y = _conv_last(flat, w[tap], planes, planar)
        total = y if total is None else total + y
    assert total is not None
    return sf.reshape(total, (-1, depth, *total.shape[1:]))


def _raise_rank(geometry: Window) -> Window:
    """A 1-D window as the 2-D one of height 1."""
    return Window((1, *geometry.kernel), (1, *geometry.strides), (1, *geometry.dilations),
                  ((0, 0), *geometry.pads))


def tap_slices(geometry: Window, index: Sequence[int], outputs: Sequence[int]) -> tuple:
    """The strided slices (over the spatial axes) of the padded input that window tap
    `index` reads for the `outputs` positions along each axis."""
    return tuple(slice(i * d, i * d + (n - 1) * s + 1, s) for i, d, s, n in
                 zip(index, geometry.dilations, geometry.strides, outputs, strict=True))


def _depthwise(x: Value, w: Value, geometry: Window, group: int) -> Value:
    """A convolution with one input channel per group, of channels-last `x` by ONNX's
    (C * M, 1, *kernel) filters: `sf.nn.depthwise_conv2d` of (*kernel, C, M) filters."""
    multiplier = w.shape[0] // group
    rank = x.ndim - 2
    filters = _transpose(_reshape(w, (group, multiplier, *geometry.kernel)),
                         (*range(2, 2 + rank), 0, 1))
    if rank == 3 and x.dtype in (sf.float16, sf.bfloat16):  # the depth taps add in float32
        return sf.cast(_conv_last(sf.cast(x, sf.float32), sf.cast(filters, sf.float32),
                                  geometry, sf.nn.depthwise_conv2d), x.dtype)
    return _conv_last(x, filters, geometry, sf.nn.depthwise_conv2d)


@converts("ConvTranspose")
def conv_transpose(node: Node, x: Value, w: Value, b: Value | None = None) -> Value:
    _spatial_rank(node, x, w)
    _check_kernel(node, w)
    sizes = x.shape[2:]
    if None in x.shape[:1] + sizes:
        raise node.error(f"needs static batch and spatial dims, got input shape {x.shape}; "
                         f"give the model's inputs static shapes (sf.onnx.load(..., "
                         f"input_shapes={{name: shape}}))")
    group = int(node.attr("group", 1))
    if x.shape[1] != w.shape[0] or w.shape[0] % group:
        raise node.error(f"input of shape {x.shape}, filters of shape {w.shape} and group "
                         f"{group} do not match")
    geometry, outputs = _transposed_window(node, sizes, w.shape[2:])
    filters = _transpose(w, (*range(2, w.ndim), 1, 0))  # (*kernel, O / group, I)
    image = channels_last(x)
    if group == 1:
        y = _transpose_last(image, filters, geometry)
    else:
        images = sf.split(image, group, axis=-1)
        banks = _split(filters, group)
        y = sf.concat([_transpose_last(i, f, geometry)
                       for i, f in zip(images, banks, strict=True)], axis=-1)
    y = _place(y, geometry.pads, outputs)
    if b is not None:
        y = y + b
    return channels_first(y)


def _transposed_window(node: Node, sizes: Sequence[int], kernel: Sequence[int]
                       ) -> tuple[Window, list[int]]:
    """ConvTranspose's geometry: its pads (which may be negative: they crop or extend the
    full result) and output spatial sizes, from `pads`, `output_padding`, `output_shape`
    and `auto_pad`, as ONNX's reference computes them."""
    rank = len(sizes)
    kernel = tuple(int(k) for k in kernel)
    strides = _ints(node, "strides", rank, 1)
    dilations = _ints(node, "dilations", rank, 1)
    extra = _ints(node, "output_padding", rank, 0)
    full = [s * (n - 1) + e + (k - 1) * d + 1
            for n, s, e, k, d in zip(sizes, strides, extra, kernel, dilations, strict=True)]
    auto_pad = node.attr("auto_pad", "NOTSET")
    shape = node.attr("output_shape", None)
    if shape is not None:
        shape = [int(v) for v in shape][-rank:]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER") or (shape is not None and
                                                    "pads" not in node.attributes):
        outputs = shape if shape is not None else [n * s for n, s in
                                                   zip(sizes, strides, strict=True)]
        totals = [f - o for f, o in zip(full, outputs, strict=True)]
        pads = tuple((t // 2, t - t // 2) if auto_pad == "SAME_UPPER" else (t - t // 2, t // 2)
                     for t in totals)
    elif auto_pad in ("NOTSET", "VALID"):
        flat = _ints(node, "pads", 2 * rank, 0) if auto_pad == "NOTSET" else (0,) * 2 * rank
        pads = tuple((flat[a], flat[rank + a]) for a in range(rank))
        outputs = shape if shape is not None else [f - lo - hi for f, (lo, hi) in
                                                   zip(full, pads, strict=True)]
    else:
        raise node.error(f"auto_pad {auto_pad!r} is not one of NOTSET, SAME_UPPER, "
                         f"SAME_LOWER, VALID")
    if min(outputs) < 1:
        raise node.error(f"the output's spatial shape {outputs} is empty")
    return Window(kernel, strides, dilations, pads), outputs


def _transpose_last(x: Value, w: Value, geometry: Window) -> Value:
    """The full (unpadded) transposed convolution of channels-last `x` by (*kernel, O, I)
    filters: spatial size stride * (n - 1) + the dilated kernel."""
    rank = x.ndim - 2
    if rank == 1:
        y = _transpose_last(sf.expand_dims(x, 1), sf.expand_dims(w, 0), _raise_rank(geometry))
        return sf.squeeze(y, 1)
    full = [geometry.strides[a] * (x.shape[1 + a] - 1) + geometry.span(a)
            for a in range(rank)]
    if rank == 2:
        return sf.nn.conv2d_transpose(x, w, (x.shape[0], *full, w.shape[-2]),
                                      geometry.strides, ((0, 0), (0, 0)),
                                      dilations=geometry.dilations)
    planes = Window(geometry.kernel[1:], geometry.strides[1:], geometry.dilations[1:],
                    geometry.pads[1:])
    batch, depth = x.shape[:2]
    flat = sf.reshape(x, (batch * depth, *x.shape[2:]))
    total = None
    for tap in range(geometry.kernel[0]):
        y = _transpose_last(flat, w[tap], planes)
        y = sf.reshape(y, (batch, depth, *y.shape[1:]))
        placed = spread(y, 1, geometry.strides[0], tap * geometry.dilations[0], full[0])
        total = placed if total is None else total + placed
    return total


def spread(x: Value, axis: int, stride: int, start: int, length: int) -> Value:
    """`length` positions along `axis`, zeros but for x's rows at start, start + stride,
    ...: where the taps of a strided window at offset `start` write (axis > 0; x's dims
    static but the first)."""
    count = x.shape[axis]
    if stride > 1:
        wide = sf.expand_dims(x, axis + 1)
        pads = [(0, 0)] * wide.ndim
        pads[axis + 1] = (0, stride - 1)
        wide = sf.pad(wide, pads)
        x = sf.reshape(wide, (-1, *x.shape[1:axis], count * stride, *x.shape[axis + 1:]))
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, (count - 1) * stride + 1)
        x = x[tuple(index)]
    pads = [(0, 0)] * x.ndim
    pads[axis] = (start, length - start - x.shape[axis])
    return sf.pad(x, pads)


def _place(y: Value, pads: Pads, outputs: Sequence[int]) -> Value:
    """The window of the full result `y` (channels-last) that begins `pads[a][0]` into each
    spatial axis and spans `outputs`: cropped where it lies inside, zeros where beyond."""
    crops, fills = [], []
    for axis, ((before, _), size) in enumerate(zip(pads, outputs, strict=True)):
        start = max(before, 0)
        stop = min(start + size - max(-before, 0), y.shape[1 + axis])
        crops.append(slice(start, stop))
        fills.append((max(-before, 0), size - max(-before, 0) - (stop - start)))
    y = y[(slice(None), *crops)]
    if any(f != (0, 0) for f in fills):
        y = sf.pad(y, [(0, 0), *fills, (0, 0)])
    return y


@converts("DeformConv")
def deform_conv(node: Node, x: Value, w: Value, offset: Value, b: Value | None = None,
                mask: Value | None = None) -> Value:
    """A 2-D convolution whose taps read the input at learned fractional offsets: each
    tap's sample is interpolated bilinearly (zero outside the image) from four gathered
    neighbours and scaled by its mask, and the samples of each group are then multiplied
    by the filters as a matrix."""
    _spatial_rank(node, x, w)
    if x.ndim != 4 or None in x.shape or None in offset.shape:
        raise node.error(f"stageflow converts 2-D deformable convolutions of static shapes, "
                         f"got input {x.shape} and offsets {offset.shape}")
    batch, channels, height, width = x.shape
    geometry = window(node, (height, width), w.shape[2:])
    group, groups = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    kh, kw = geometry.kernel
    taps, (oh, ow) = kh * kw, offset.shape[2:]
    out_channels = w.shape[0]
    positions = (geometry.positions(0, height), geometry.positions(1, width))
    if channels != w.shape[1] * group or channels % groups or \
            offset.shape[1] != groups * taps * 2 or (oh, ow) != positions:
        raise node.error(f"input {x.shape}, filters {w.shape}, offsets {offset.shape}, group "
                         f"{group}, offset_group {groups} and {positions} output positions "
                         f"do not match")
    dtype = np.dtype(x.dtype)
    offsets = sf.reshape(offset, (batch, groups, kh, kw, 2, oh, ow))
    rows = (np.arange(oh) * geometry.strides[0] - geometry.pads[0][0])[:, None] + \
        np.zeros((1, ow))
    columns = (np.arange(ow) * geometry.strides[1] - geometry.pads[1][0])[None, :] + \
        np.zeros((oh, 1))
    tap_rows = (np.arange(kh) * geometry.dilations[0])[:, None, None, None]
    tap_columns = (np.arange(kw) * geometry.dilations[1])[None, :, None, None]
    h = offsets[:, :, :, :, 0] + (rows + tap_rows).astype(dtype)  # (N, G, kh, kw, oh, ow)
    v = offsets[:, :, :, :, 1] + (columns + tap_columns).astype(dtype)
    top, left = sf.floor(h), sf.floor(v)
    down, right = h - top, v - left
    planes = np.arange(batch * channels, dtype=np.int64).reshape(
        batch, groups, channels // groups, 1, 1, 1, 1) * (height * width)
    flat = sf.reshape(x, (-1,))
    samples = None
    for dh, weight_h in ((0, 1 - down), (1, down)):
        for dw, weight_w in ((0, 1 - right), (1, right)):
            r, c = sf.cast(top, sf.int64) + dh, sf.cast(left, sf.int64) + dw
            inside = sf.logical_and(sf.logical_and(r >= 0, r < height),
                                    sf.logical_and(c >= 0, c < width))
            index = sf.clip_by_value(r, 0, height - 1) * width + \
                sf.clip_by_value(c, 0, width - 1)
            weight = sf.where(inside, weight_h * weight_w, 0.0)
            values = sf.gather(flat, sf.expand_dims(index, 2) + planes)
            term = values * sf.expand_dims(weight, 2)  # (N, G, C / G, kh, kw, oh, ow)
            samples = term if samples is None else samples + term
    assert samples is not None
    if mask is not None:
        samples = samples * sf.expand_dims(sf.reshape(mask, (batch, groups, kh, kw, oh, ow)),
                                           2)
    matrix = sf.reshape(samples, (batch, group, channels // group * taps, oh * ow))
    filters = _reshape(w, (group, out_channels // group, channels // group * taps))
    y = sf.reshape(sf.matmul(filters, matrix), (batch, out_channels, oh, ow))
    return y if b is None else y + _reshape(b, (out_channels, 1, 1))
