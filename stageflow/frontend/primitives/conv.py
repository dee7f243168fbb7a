"""Windowed primitives over NHWC images: 2-D convolution and pooling (`reduce_window`).

They are primitives, not composites of slices and matmuls, because every backend has a
dedicated fast path for them (im2col + GEMM on the CPU, cuDNN-style tiling on the GPU) that
a pile of small ops would hide. Both take *explicit* padding, ``((top, bottom), (left,
right))``: the public `sf.nn` functions resolve TensorFlow's "SAME"/"VALID" to numbers, so
the IR holds one meaning of padding and no backend has to re-derive TensorFlow's rule.

Layouts follow TensorFlow's defaults: images are NHWC, filters HWIO (height, width, input
channels, output channels). Batch and spatial dims may be unknown (``None``) while tracing.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from stageflow.frontend import dtypes
from stageflow.frontend.primitives.base import Primitive, ShapedType
from stageflow.frontend.primitives.shapes import format_shape

Pair = tuple[int, int]
Padding = tuple[Pair, Pair]


def window_output_size(
    size: int | None, window: int | None, stride: int, padding: Pair, dilation: int = 1
) -> int | None:
    """Positions of a (dilated) window sliding with `stride` over a padded axis; None if unknown.

    Raises ``ValueError`` when the window does not fit even once, as TensorFlow does.
    """
    if size is None or window is None:
        return None
    padded = size + padding[0] + padding[1]
    effective = (window - 1) * dilation + 1
    if padded < effective:
        raise ValueError(
            f"the window ({window}, dilated to {effective}) is larger than the padded "
            f"input ({size} + {padding[0]} + {padding[1]} = {padded})"
        )
    return (padded - effective) // stride + 1


def _check_pairs(name: str, value: tuple, minimum: int) -> None:
    if len(value) != 2 or any(not isinstance(v, int) or v < minimum for v in value):
        raise ValueError(f"{name} must be two ints >= {minimum}, got {value!r}")


def _check_padding(padding: Padding) -> None:
    ok = len(padding) == 2 and all(
        len(pair) == 2 and all(isinstance(p, int) and p >= 0 for p in pair) for pair in padding
    )
    if not ok:
        raise ValueError(
            f"padding must be ((top, bottom), (left, right)) of ints >= 0, got {padding!r}"
        )


# --------------------------------------------------------------------------- conv2d


def _conv2d_rule(
    x: ShapedType, w: ShapedType, *, strides: Pair, padding: Padding, dilations: Pair
) -> ShapedType:
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"expected an NHWC input and HWIO filters (both rank 4), got input "
            f"{format_shape(x.shape)} and filters {format_shape(w.shape)}"
        )
    if x.dtype != w.dtype:
        raise TypeError(
            f"input and filters have different dtypes {x.dtype.name} and {w.dtype.name}"
        )
    if not dtypes.is_floating(x.dtype):
        raise TypeError(f"dtype {x.dtype.name} is not supported (expected a floating dtype)")
    _check_pairs("strides", strides, 1)
    _check_pairs("dilations", dilations, 1)
    _check_padding(padding)
    batch, height, width, channels = x.shape
    kh, kw, in_channels, out_channels = w.shape
    if channels is not None and in_channels is not None and channels != in_channels:
        raise ValueError(
            f"the input has {channels} channels but the filters expect {in_channels}: "
            f"input {format_shape(x.shape)}, filters {format_shape(w.shape)}"
        )
    out_h = window_output_size(height, kh, strides[0], padding[0], dilations[0])
    out_w = window_output_size(width, kw, strides[1], padding[1], dilations[1])
    return ShapedType((batch, out_h, out_w, out_channels), x.dtype)


def _conv2d(x, w, *, strides, padding, dilations):
    """Pad, view every window in place, then one GEMM: (N*Ho*Wo, kh*kw*C) @ (kh*kw*C, O).

    The window view costs nothing; the reshape copies it once (im2col), and the matmul goes
    to BLAS. 16-bit floats are computed in float32 and rounded once at the end.
    """
    dtype = x.dtype
    compute = np.float32 if dtype.itemsize < 4 else dtype
    x = np.asarray(x, dtype=compute)
    w = np.asarray(w, dtype=compute)
    if any(p for pair in padding for p in pair):
        x = np.pad(x, ((0, 0), padding[0], padding[1], (0, 0)))
    kh, kw, channels, out_channels = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    effective = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
    windows = sliding_window_view(x, effective, axis=(1, 2))[:, ::sh, ::sw, :, ::dh, ::dw]
    batch, out_h, out_w = windows.shape[:3]
    columns = windows.transpose(0, 1, 2, 4, 5, 3).reshape(
        batch * out_h * out_w, kh * kw * channels
    )
    result = columns @ w.reshape(kh * kw * channels, out_channels)
    return result.reshape(batch, out_h, out_w, out_channels).astype(dtype, copy=False)


conv2d_p = Primitive(
    "conv2d",
    shape_rule=_conv2d_rule,
    kernel=_conv2d,
    summary="2-D cross-correlation of an NHWC image with HWIO filters, explicit padding",
)

# --------------------------------------------------------------------------- reduce_window

_WINDOW_KINDS = ("max", "sum")
_WINDOW_DTYPES = dtypes.FLOATING + dtypes.INTEGER


def _reduce_window_rule(
    x: ShapedType, *, kind: str, window: Pair, strides: Pair, padding: Padding
) -> ShapedType:
    if kind not in _WINDOW_KINDS:
        raise ValueError(f"kind must be one of {_WINDOW_KINDS}, got {kind!r}")
    if x.ndim != 4:
        raise ValueError(f"expected an NHWC input (rank 4), got {format_shape(x.shape)}")
    if x.dtype not in _WINDOW_DTYPES:
        raise TypeError(f"dtype {x.dtype.name} is not supported")
    _check_pairs("window", window, 1)
    _check_pairs("strides", strides, 1)
    _check_padding(padding)
    batch, height, width, channels = x.shape
    out_h = window_output_size(height, window[0], strides[0], padding[0])
    out_w = window_output_size(width, window[1], strides[1], padding[1])
    return ShapedType((batch, out_h, out_w, channels), x.dtype)


def _pad_value(kind: str, dtype: np.dtype):
    """The identity of the reduction, so that padding never wins a max or changes a sum."""
    if kind == "sum":
        return 0
    return -np.inf if dtypes.is_floating(dtype) else np.iinfo(dtype).min


def _reduce_axis(x, axis: int, window: int, stride: int, ufunc):
    """Reduce windows along one axis by combining `window` strided views of the input.

    max and sum are separable, so a 2-D window is one pass per axis: kh + kw whole-array
    ufunc calls instead of a Python loop over pixels, or NumPy reducing tiny inner axes.
    """
    count = (x.shape[axis] - window) // stride + 1
    index: list[slice] = [slice(None)] * x.ndim

    def tap(offset: int):
        index[axis] = slice(offset, offset + (count - 1) * stride + 1, stride)
        return x[tuple(index)]

    if window == 1:
        return tap(0)
    result = ufunc(tap(0), tap(1))
    for offset in range(2, window):
        ufunc(result, tap(offset), out=result)
    return result


def _reduce_window(x, *, kind, window, strides, padding):
    x = np.asarray(x)
    if any(p for pair in padding for p in pair):
        pads = ((0, 0), padding[0], padding[1], (0, 0))
        x = np.pad(x, pads, constant_values=_pad_value(kind, x.dtype))
    ufunc = np.maximum if kind == "max" else np.add
    x = _reduce_axis(x, 1, window[0], strides[0], ufunc)
    return _reduce_axis(x, 2, window[1], strides[1], ufunc)


reduce_window_p = Primitive(
    "reduce_window",
    shape_rule=_reduce_window_rule,
    kernel=_reduce_window,
    summary="max or sum over (height, width) windows of an NHWC input, explicit padding",
)
