"""Depthwise 2-D convolution: each input channel of an NHWC image convolved with filters of
its own (TensorFlow's `tf.nn.depthwise_conv2d`, ONNX's Conv with one input channel per
group).

A primitive, not a sum over the window's taps of strided slices times filter rows: a
compiled program ran each of those slices as a step of its own (kh * kw copies of the
image per convolution), where one loop over the output pixels reads each input pixel from
the cache (`codegen.lowered.depthwise`). The filter is [kh, kw, C, M] (M filters per input
channel); output channel ``c * M + m`` is input channel c convolved with
``filter[:, :, c, m]``. Padding is explicit, as for `conv2d`.

Its gradients are existing ops. The input's: the cotangent with stride - 1 zeros after each
row and column (the positions no window started at), padded so that each input pixel sees
the windows that read it, convolved (depthwise, stride 1, the filter's dilation) with the
filter flipped in height and width, its M outputs per input channel summed. The filter's:
per tap, the padded input's strided slice that the tap read times the cotangent, summed
over the batch and the positions; kh * kw elementwise products and sums, which the fusion
pass fuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core.dims import PYTHON, D, DimArith
from stageflow.core.op_facts import Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.primitives.autodiff import floating_only, reshape, wanted
from stageflow.primitives.conv import (
    Padding,
    Pair,
    check_conv_operands,
    check_geometry,
    check_window_fits,
    compute_dtype,
    dilate,
    window_positions,
)
from stageflow.primitives.reduction import reduce_sum_p
from stageflow.primitives.structural import concat_p, pad_p, slice_p

_OP = "depthwise_conv2d"


def _dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *, strides: Pair,
          padding: Padding, dilations: Pair) -> list[D]:
    """(batch, positions of the window along height and width, channels * multiplier)."""
    x, w = operands
    spatial = [window_positions(d, x[1 + axis], w[axis], strides[axis], padding[axis],
                                dilations[axis]) for axis in (0, 1)]
    return [x[0], *spatial, d.mul(w[2], w[3])]


def _rule(x: ShapedType, w: ShapedType, *, strides: Pair, padding: Padding,
          dilations: Pair) -> ShapedType:
    check_conv_operands(_OP, x, w, ("the input", "the filter"))
    check_geometry(_OP, strides, padding, dilations)
    channels, filtered = x.shape[3], w.shape[2]
    if channels is not None and filtered is not None and channels != filtered:
        raise ValueError(f"{_OP}: the input has {channels} channels but the filter "
                         f"[kh, kw, C, M] expects {filtered}: input {format_shape(x.shape)}, "
                         f"filter {format_shape(w.shape)}")
    for axis in (0, 1):
        check_window_fits(x.shape[1 + axis], w.shape[axis], padding[axis], dilations[axis])
    shape = _dims(PYTHON, [x.shape, w.shape], strides=strides, padding=padding,
                  dilations=dilations)
    return ShapedType(tuple(shape), x.dtype)


def _kernel(x, w, *, strides, padding, dilations):
    """One multiply-add of a strided view of the padded input per tap, into (N, Ho, Wo, C,
    M); 16-bit floats in float32, rounded once."""
    dtype = x.dtype
    compute = compute_dtype(dtype)
    x, w = np.asarray(x, dtype=compute), np.asarray(w, dtype=compute)
    if any(p for pair in padding for p in pair):
        x = np.pad(x, ((0, 0), padding[0], padding[1], (0, 0)))
    kh, kw, channels, multiplier = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    ho = (x.shape[1] - (kh - 1) * dh - 1) // sh + 1
    wo = (x.shape[2] - (kw - 1) * dw - 1) // sw + 1
    total = np.zeros((x.shape[0], ho, wo, channels, multiplier), compute)
    for a in range(kh):
        for b in range(kw):
            tap = x[:, a * dh: a * dh + (ho - 1) * sh + 1: sh,
                    b * dw: b * dw + (wo - 1) * sw + 1: sw, :, None]
            total += tap * w[a, b]
    return total.reshape(x.shape[0], ho, wo, channels * multiplier).astype(dtype, copy=False)


depthwise_conv2d_p = Primitive(
    _OP,
    shape_rule=_rule,
    kernel=_kernel,
    dims=_dims,
    summary="each channel of an NHWC image convolved with its own [kh, kw, C, M] filters, "
            "explicit padding",
    family=Family.LINALG,
    lowered_by=LoweredBy.OP_RULE,
)


def _static(dims: Sequence[int | None], what: str, whole: Sequence[int | None]) -> None:
    if None in dims:
        raise NotImplementedError(f"the gradient of {_OP} needs a static {what}, got "
                                  f"{format_shape(tuple(whole))}")


def input_gradient(g, w, shape: Sequence[int | None], strides: Pair, padding: Padding,
                   dilations: Pair):
    """The gradient of ``depthwise_conv2d(x, w)`` with respect to an `x` of `shape`, given
    the result's cotangent `g`: a stride-1 depthwise convolution of the dilated, padded
    cotangent by the flipped filter, each input channel's M results summed.

    Along one axis output i read padded input i * s + a * d, so input h gets
    ``sum_a w[a] * t[h + lo - a * d]`` of the cotangent t dilated by s; with the filter
    flipped (a -> k - 1 - a) that is a stride-1 correlation of t padded by
    ``(k - 1) * d - lo`` before (cropped where negative) and up to the input's size after."""
    _static(shape[1:3], "input height and width", shape)
    _static(w.shape, "filter", w.shape)
    kh, kw, channels, multiplier = w.shape
    t = dilate(g, strides)
    window = (kh, kw)
    pads, crops = [], []
    for axis in (0, 1):
        before = (window[axis] - 1) * dilations[axis] - padding[axis][0]
        after = shape[1 + axis] + padding[axis][0] - t.shape[1 + axis]
        pads.append((max(before, 0), max(after, 0)))
        crops.append(max(-before, 0))
    flipped = slice_p.bind(w, slices=((None, None, -1), (None, None, -1), (None, None, None),
                                      (None, None, None)))
    result = depthwise_conv2d_p.bind(t, reshape(flipped, (kh, kw, channels * multiplier, 1)),
                                     strides=(1, 1), padding=tuple(pads), dilations=dilations)
    (top, left), (height, width) = crops, shape[1:3]
    if (top, left) != (0, 0) or result.shape[1:3] != (height, width):
        result = result[:, top: top + height, left: left + width, :]
    if multiplier == 1:
        return result
    split = reshape(result, (result.shape[0], height, width, channels, multiplier))
    return reduce_sum_p.bind(split, axes=(4,), keepdims=False)


def filter_gradient(x, g, window: Sequence[int | None], strides: Pair, padding: Padding,
                    dilations: Pair):
    """The gradient of ``depthwise_conv2d(x, w)`` with respect to a filter [kh, kw, C, M]
    (`window` its shape), given the result's cotangent `g`: per tap, the strided slice of
    the padded input it read times the cotangent, summed over the batch and positions."""
    _static(window, "filter", window)
    _static(g.shape[1:3], "result height and width", g.shape)
    kh, kw, channels, multiplier = window
    ho, wo = g.shape[1:3]
    (sh, sw), (dh, dw) = strides, dilations
    padded = pad_p.bind(x, pads=((0, 0), *padding, (0, 0)), value=0)
    per_channel = reshape(g, (g.shape[0], ho, wo, channels, multiplier))
    full = (None, None, None)
    taps = []
    for a in range(kh):
        for b in range(kw):
            view = (full, (a * dh, a * dh + (ho - 1) * sh + 1, sh),
                    (b * dw, b * dw + (wo - 1) * sw + 1, sw), full)
            tap = reshape(slice_p.bind(padded, slices=view), (x.shape[0], ho, wo, channels, 1))
            total = reduce_sum_p.bind(tap * per_channel, axes=(0, 1, 2), keepdims=False)
            taps.append(reshape(total, (1, channels, multiplier)))
    stacked = taps[0] if len(taps) == 1 else concat_p.bind(*taps, axis=0)
    return reshape(stacked, (kh, kw, channels, multiplier))


@depthwise_conv2d_p.def_vjp
@floating_only
def _vjp(cotangents, inputs, outputs, *, strides, padding, dilations):
    (g,), (x, w), (dx, dw) = cotangents, inputs, wanted(inputs)
    geometry = (strides, padding, dilations)
    return [input_gradient(g, w, x.shape, *geometry) if dx else None,
            filter_gradient(x, g, w.shape, *geometry) if dw else None]
