"""Windowed primitives over NHWC images: 2-D convolution, pooling (`reduce_window`), gradients
(max pooling's own: `max_pool_gradient`).

They are primitives, not composites of slices and matmuls, because every backend has a
dedicated fast path for them (im2col + GEMM on the CPU, cuDNN-style tiling on the GPU) that
a pile of small ops would hide. Both take *explicit* padding, ``((top, bottom), (left,
right))``: the public `sf.nn` functions resolve TensorFlow's "SAME"/"VALID" to numbers, so
the IR holds one meaning of padding and no backend has to re-derive TensorFlow's rule.

Layouts follow TensorFlow's defaults: images are NHWC, filters HWIO (height, width, input
channels, output channels). Batch and spatial dims may be unknown (``None``) while tracing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from stageflow.core import dtypes
from stageflow.core.dims import PYTHON, D, DimArith
from stageflow.core.op_facts import Cost, Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.primitives.autodiff import equal, floating_only, reshape, wanted, where
from stageflow.primitives.structural import pad_p, slice_p

Pair = tuple[int, int]
Padding = tuple[Pair, Pair]


def window_positions(d: DimArith[D, Any], size: D, window: D, stride: int, padding: Pair,
                     dilation: int = 1) -> D:
    """Positions of a (dilated) window sliding with `stride` over a padded axis:
    ``(size + lo + hi - (window - 1) * dilation - 1) // stride + 1``, clamped at 0 so that
    a window larger than its input never gives compiled code a negative dim to allocate
    (the op reports that input itself, as `check_window_fits` does while tracing)."""
    span = d.mul(d.sub(window, d.const(1)), d.const(dilation))
    free = d.sub(d.add(size, d.const(padding[0] + padding[1])), d.add(span, d.const(1)))
    count = d.add(d.floordiv(free, stride), d.const(1))
    return d.select(d.lt(free, d.const(0)), d.const(0), count)


def check_window_fits(size: int | None, window: int | None, padding: Pair,
                      dilation: int = 1) -> None:
    """Raise ``ValueError`` when the window does not fit even once, as TensorFlow does."""
    if size is None or window is None:
        return
    padded = size + padding[0] + padding[1]
    effective = (window - 1) * dilation + 1
    if padded < effective:
        raise ValueError(
            f"the window ({window}, dilated to {effective}) is larger than the padded "
            f"input ({size} + {padding[0]} + {padding[1]} = {padded})"
        )


def window_output_size(
    size: int | None, window: int | None, stride: int, padding: Pair, dilation: int = 1
) -> int | None:
    """Positions of a (dilated) window sliding with `stride` over a padded axis; None if unknown.

    Raises ``ValueError`` when the window does not fit even once, as TensorFlow does.
    """
    check_window_fits(size, window, padding, dilation)
    return window_positions(PYTHON, size, window, stride, padding, dilation)


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


def _conv2d_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *, strides: Pair,
                 padding: Padding, dilations: Pair, feature_group_count: int = 1) -> list[D]:
    """(batch, positions of the filters along height and width, output channels)."""
    x, w = operands
    spatial = [window_positions(d, x[1 + axis], w[axis], strides[axis], padding[axis],
                                dilations[axis]) for axis in (0, 1)]
    return [x[0], *spatial, w[3]]


def check_groups(op: str, groups: object) -> int:
    """`feature_group_count` as an int >= 1, else a ``ValueError`` naming `op`."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: feature_group_count must be an int >= 1, got {groups!r}")
    return groups


def _check_divides(op: str, groups: int, what: str, size: int | None, shapes: str) -> None:
    if size is not None and size % groups:
        raise ValueError(f"{op}: {what} ({size}) are not divisible by feature_group_count "
                         f"{groups}: {shapes}")


def grouped(groups: int) -> dict[str, int]:
    """The `feature_group_count` param to bind: none for one group, so that ungrouped
    convolutions print (and key) as they always did."""
    return {} if groups == 1 else {"feature_group_count": groups}


def _conv2d_rule(
    x: ShapedType, w: ShapedType, *, strides: Pair, padding: Padding, dilations: Pair,
    feature_group_count: int = 1
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
    groups = check_groups("conv2d", feature_group_count)
    channels, in_channels = x.shape[3], w.shape[2]
    shapes = f"input {format_shape(x.shape)}, filters {format_shape(w.shape)}"
    if channels is not None and in_channels is not None and channels != in_channels * groups:
        expected = (f"{in_channels}" if groups == 1 else
                    f"{in_channels} per group in {groups} groups ({in_channels * groups})")
        raise ValueError(f"conv2d: the input has {channels} channels but the filters expect "
                         f"{expected}: {shapes}")
    _check_divides("conv2d", groups, "the filters' output channels", w.shape[3], shapes)
    for axis in (0, 1):
        check_window_fits(x.shape[1 + axis], w.shape[axis], padding[axis], dilations[axis])
    shape = _conv2d_dims(PYTHON, [x.shape, w.shape], strides=strides, padding=padding,
                         dilations=dilations)
    return ShapedType(tuple(shape), x.dtype)


def compute_dtype(dtype: np.dtype) -> type | np.dtype:
    """16-bit floats are computed in float32 and rounded once at the end."""
    return np.float32 if dtype.itemsize < 4 else dtype


def im2col(x, window: Pair, strides: Pair, padding: Padding, dilations: Pair):
    """im2col: every window of the padded `x` as a row of kh*kw*C elements (taps in HWI
    order), (N*Ho*Wo, kh*kw*C), and (N, Ho, Wo). The window view costs nothing; the reshape
    copies it once."""
    if any(p for pair in padding for p in pair):
        x = np.pad(x, ((0, 0), padding[0], padding[1], (0, 0)))
    (kh, kw), channels = window, x.shape[3]
    (sh, sw), (dh, dw) = strides, dilations
    effective = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
    windows = sliding_window_view(x, effective, axis=(1, 2))[:, ::sh, ::sw, :, ::dh, ::dw]
    positions = windows.shape[:3]
    rows = positions[0] * positions[1] * positions[2]  # (not -1: no channels leave it open)
    columns = windows.transpose(0, 1, 2, 4, 5, 3).reshape(rows, kh * kw * channels)
    return columns, positions


def columns_by_group(columns, taps: int, groups: int):
    """im2col's (rows, taps*C) matrix as one (rows, taps*C/G) matrix per group, (G, rows,
    taps*C/G): group g's windows hold its block of channels only."""
    rows, per_group = columns.shape[0], columns.shape[1] // (taps * groups)
    split = columns.reshape(rows, taps, groups, per_group).transpose(2, 0, 1, 3)
    return split.reshape(groups, rows, taps * per_group)


def filters_by_group(w, groups: int):
    """HWIO filters (kh, kw, C/G, O) as one (kh*kw*C/G, O/G) matrix per group."""
    kh, kw, channels, out_channels = w.shape
    split = w.reshape(kh * kw * channels, groups, out_channels // groups)
    return split.transpose(1, 0, 2)


def _conv2d(x, w, *, strides, padding, dilations, feature_group_count=1):
    """im2col, then one GEMM: (N*Ho*Wo, kh*kw*C) @ (kh*kw*C, O), the matmul in BLAS; one
    per group where the channels are grouped."""
    dtype = x.dtype
    compute = compute_dtype(dtype)
    w = np.asarray(w, dtype=compute)
    kh, kw, channels, out_channels = w.shape
    columns, positions = im2col(np.asarray(x, dtype=compute), (kh, kw), strides, padding,
                                  dilations)
    groups = feature_group_count
    if groups == 1:
        result = columns @ w.reshape(kh * kw * channels, out_channels)
    else:
        products = columns_by_group(columns, kh * kw, groups) @ filters_by_group(w, groups)
        result = products.transpose(1, 0, 2).reshape(columns.shape[0], out_channels)
    return result.reshape(*positions, out_channels).astype(dtype, copy=False)


conv2d_p = Primitive(
    "conv2d",
    shape_rule=_conv2d_rule,
    kernel=_conv2d,
    dims=_conv2d_dims,
    summary="2-D cross-correlation of an NHWC image with HWIO filters, explicit padding; "
            "feature_group_count groups of channels, each convolved with its block of filters",
    family=Family.LINALG,
    lowered_by=LoweredBy.OP_RULE,
)

# --------------------------------------------------------------------------- reduce_window

_WINDOW_KINDS = ("max", "sum")
_WINDOW_DTYPES = dtypes.FLOATING + dtypes.INTEGER


def _reduce_window_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                        window: Pair, strides: Pair, padding: Padding, **_: object) -> list[D]:
    """(batch, positions of the window along height and width, channels)."""
    (x,) = operands
    spatial = [window_positions(d, x[1 + axis], d.const(window[axis]), strides[axis],
                                padding[axis]) for axis in (0, 1)]
    return [x[0], *spatial, x[3]]


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
    for axis in (0, 1):
        check_window_fits(x.shape[1 + axis], window[axis], padding[axis])
    shape = _reduce_window_dims(PYTHON, [x.shape], window=window, strides=strides,
                                padding=padding)
    return ShapedType(tuple(shape), x.dtype)


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
    dims=_reduce_window_dims,
    summary="max or sum over (height, width) windows of an NHWC input, explicit padding",
    family=Family.LINALG,
    cost=Cost.REDUCTION,
    lowered_by=LoweredBy.OP_RULE,
)

# ----------------------------------------------------------------------- max_pool_gradient
# The gradient of max pooling as one op (TensorFlow's MaxPoolGrad, JAX's
# select_and_scatter_add): each window's cotangent goes to its first element, in row-major
# order, equal to the window's maximum (padding never chosen; a window whose maximum is NaN
# passes nothing on). As a composite it was one strided view, comparison, select and
# scatter of an input-sized tensor per tap of the window.


def _max_pool_gradient_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]],
                            **_: object) -> list[D]:
    """The input's dims."""
    return list(operands[0])


def _max_pool_gradient_rule(x: ShapedType, out: ShapedType, g: ShapedType, *, window: Pair,
                            strides: Pair, padding: Padding) -> ShapedType:
    op = "max_pool_gradient"
    pooled = _reduce_window_rule(x, kind="max", window=window, strides=strides,
                                 padding=padding)
    if not dtypes.is_floating(x.dtype):
        raise TypeError(f"{op}: dtype {x.dtype.name} is not supported (expected a floating "
                        "dtype)")
    shapes = (f"input {format_shape(x.shape)}, pooled {format_shape(out.shape)}, cotangent "
              f"{format_shape(g.shape)}")
    for name, value in (("pooled", out), ("cotangent", g)):
        if value.dtype != x.dtype:
            raise TypeError(f"{op}: the {name} dtype {value.dtype.name} is not the input's "
                            f"{x.dtype.name}")
        if value.ndim != 4:
            raise ValueError(f"{op}: expected a {name} of rank 4: {shapes}")
        for axis in range(4):
            _check_same(op, f"the {name} and the pooling's result dims", pooled.shape[axis],
                        value.shape[axis], shapes)
    return ShapedType(x.shape, x.dtype)


def _max_pool_gradient(x, out, g, *, window, strides, padding):
    """Per tap of the window, in row-major order, the positions whose element equals the
    maximum and no earlier tap's did take the cotangent. The padding is NaN, which equals
    nothing."""
    x, out, g = np.asarray(x), np.asarray(out), np.asarray(g)
    padded = np.pad(x, ((0, 0), padding[0], padding[1], (0, 0)), constant_values=np.nan)
    grad = np.zeros(padded.shape, g.dtype)
    (ho, wo), (sh, sw) = out.shape[1:3], strides
    if out.size:
        taken = np.zeros(out.shape, bool)
        for a in range(window[0]):
            for b in range(window[1]):
                view = (slice(None), slice(a, a + (ho - 1) * sh + 1, sh),
                        slice(b, b + (wo - 1) * sw + 1, sw))
                hit = (padded[view] == out) & ~taken
                taken |= hit
                grad[view] += np.where(hit, g, np.zeros((), g.dtype))
    top, left = padding[0][0], padding[1][0]
    return np.ascontiguousarray(grad[:, top : top + x.shape[1], left : left + x.shape[2]])


max_pool_gradient_p = Primitive(
    "max_pool_gradient",
    shape_rule=_max_pool_gradient_rule,
    kernel=_max_pool_gradient,
    dims=_max_pool_gradient_dims,
    summary="the input gradient of max pooling: each window's cotangent to its first "
            "maximal element (input, pooled result, cotangent)",
    family=Family.LINALG,
    cost=Cost.REDUCTION,
    lowered_by=LoweredBy.OP_RULE,
)


# --------------------------------------------------------------------------- gradients
# Along one spatial axis (size H, window k, stride s, padding (lo, hi)), output i of a
# pooling reads padded input i*s + a. The input gradient of sum pooling is therefore a
# stride-1 sum pooling of the cotangent with s - 1 zeros after each element ("dilated"),
# padded by k - 1 - lo before and H + lo - len(dilated) after; negative pads become crops.


def dilate(g, strides: Pair):
    """NHWC `g` with stride - 1 zeros after each row and column (reshape, pad, reshape)."""
    if strides == (1, 1):
        return g
    (sh, sw), (n, h, w, c) = strides, g.shape
    g = reshape(g, (n, h, 1, w, 1, c))
    g = pad_p.bind(g, pads=((0, 0), (0, 0), (0, sh - 1), (0, 0), (0, sw - 1), (0, 0)),
                   value=0)
    return reshape(g, (n, h * sh, w * sw, c))


def _sum_pool_gradient(g, shape, window: Pair, strides: Pair, padding: Padding):
    """The input gradient of sum pooling: a stride-1 sum pooling of the dilated cotangent."""
    if None in shape[1:3] or None in g.shape[1:3]:
        raise NotImplementedError("the gradient of pooling needs a static height and width, "
                                  f"got input {format_shape(shape)}")
    t = dilate(g, strides)
    pads, crops = [], []
    for axis in (0, 1):
        before = window[axis] - 1 - padding[axis][0]
        after = shape[1 + axis] + padding[axis][0] - t.shape[1 + axis]
        pads.append((max(before, 0), max(after, 0)))
        crops.append(max(-before, 0))
    result = reduce_window_p.bind(t, kind="sum", window=window, strides=(1, 1),
                                  padding=tuple(pads))
    (top, left), (height, width) = crops, shape[1:3]
    if (top, left) == (0, 0) and result.shape[1:3] == (height, width):
        return result
    return result[:, top : top + height, left : left + width, :]


def check_conv_operands(op: str, a: ShapedType, b: ShapedType, names: tuple[str, str]) -> None:
    """Both operands NHWC-shaped (rank 4) and of one floating dtype, else an error naming
    `op` and the operands (`names`)."""
    if a.ndim != 4 or b.ndim != 4:
        raise ValueError(f"{op}: expected {names[0]} and {names[1]} of rank 4, got "
                         f"{format_shape(a.shape)} and {format_shape(b.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: {names[0]} and {names[1]} have different dtypes "
                        f"{a.dtype.name} and {b.dtype.name}")
    if not dtypes.is_floating(a.dtype):
        raise TypeError(f"{op}: dtype {a.dtype.name} is not supported (expected a floating "
                        "dtype)")


def _check_same(op: str, what: str, x: int | None, y: int | None, shapes: str) -> None:
    if x is not None and y is not None and x != y:
        raise ValueError(f"{op}: {what} differ ({x} and {y}): {shapes}")


def check_geometry(op: str, strides: Pair, padding: Padding, dilations: Pair) -> None:
    """Strides and dilations pairs of ints >= 1, padding two pairs of ints >= 0."""
    _check_pairs(f"{op}: strides", strides, 1)
    _check_pairs(f"{op}: dilations", dilations, 1)
    _check_padding(padding)


def _check_positions(op: str, image: Sequence[int | None], window: Sequence[int | None],
                     positions: Sequence[int | None], strides: Pair, padding: Padding,
                     dilations: Pair, shapes: str) -> None:
    """The cotangent's height and width must be those of the forward conv's result."""
    for axis in (0, 1):
        check_window_fits(image[axis], window[axis], padding[axis], dilations[axis])
        if None in (image[axis], window[axis]):
            continue
        expected = window_output_size(image[axis], window[axis], strides[axis],
                                      padding[axis], dilations[axis])
        _check_same(op, "the result's and the cotangent's spatial dims", expected,
                    positions[axis], shapes)


# The gradients of conv2d are primitives of their own (TensorFlow's Conv2DBackpropInput
# and Conv2DBackpropFilter), not convolutions of transposed, dilated and padded operands:
# as windows of the forward geometry they share its im2col, and a stride-2 conv's input
# gradient multiplies no zeros (the composite convolved a cotangent with three zeros in
# every four elements), its filter gradient transposes nothing.


def _input_gradient_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                         input_size: Pair, feature_group_count: int = 1,
                         **_: object) -> list[D]:
    """(batch of the cotangent, the input's height and width, the filters' input channels
    times the groups)."""
    g, w = operands
    channels = w[2] if feature_group_count == 1 else d.mul(w[2], d.const(feature_group_count))
    return [g[0], d.const(input_size[0]), d.const(input_size[1]), channels]


def _input_gradient_rule(g: ShapedType, w: ShapedType, *, input_size: Pair, strides: Pair,
                         padding: Padding, dilations: Pair,
                         feature_group_count: int = 1) -> ShapedType:
    op = "conv2d_input_gradient"
    check_conv_operands(op, g, w, ("the cotangent", "the filters"))
    groups = check_groups(op, feature_group_count)
    _check_pairs(f"{op}: input_size", input_size, 0)
    check_geometry(op, strides, padding, dilations)
    shapes = f"cotangent {format_shape(g.shape)}, filters {format_shape(w.shape)}"
    _check_same(op, "the cotangent's channels and the filters' output channels",
                g.shape[3], w.shape[3], shapes)
    _check_divides(op, groups, "the filters' output channels", w.shape[3], shapes)
    _check_positions(op, input_size, w.shape[:2], g.shape[1:3], strides, padding, dilations,
                     shapes)
    channels = None if w.shape[2] is None else w.shape[2] * groups
    return ShapedType((g.shape[0], *input_size, channels), g.dtype)


def _input_gradient(g, w, *, input_size, strides, padding, dilations, feature_group_count=1):
    """col2im: the cotangent's rows times the filters' transpose give every window's
    contribution (N*Ho*Wo, kh*kw*C); each tap's is added into the padded input's strided
    positions it was read from, one slice per tap; then the padding is cropped. Grouped,
    each group's cotangent channels by its filters give its block of the window's channels."""
    dtype = g.dtype
    compute = compute_dtype(dtype)
    g = np.asarray(g, dtype=compute)
    w = np.asarray(w, dtype=compute)
    kh, kw, per_group, out_channels = w.shape
    batch, ho, wo, _ = g.shape
    groups = feature_group_count
    channels = per_group * groups
    if groups == 1:
        columns = g.reshape(-1, out_channels) @ w.reshape(-1, out_channels).T
    else:
        count = batch * ho * wo
        rows = g.reshape(count, groups, out_channels // groups).transpose(1, 0, 2)
        products = rows @ filters_by_group(w, groups).transpose(0, 2, 1)
        columns = products.reshape(groups, count, kh * kw, per_group).transpose(1, 2, 0, 3)
    columns = columns.reshape(batch, ho, wo, kh, kw, channels)
    (top, bottom), (left, right) = padding
    (sh, sw), (dh, dw) = strides, dilations
    height, width = input_size
    padded = np.zeros((batch, height + top + bottom, width + left + right, channels), compute)
    for a in range(kh):
        for b in range(kw):
            padded[:, a * dh: a * dh + (ho - 1) * sh + 1: sh,
                   b * dw: b * dw + (wo - 1) * sw + 1: sw, :] += columns[:, :, :, a, b, :]
    return padded[:, top: top + height, left: left + width, :].astype(dtype, copy=False)


conv2d_input_gradient_p = Primitive(
    "conv2d_input_gradient",
    shape_rule=_input_gradient_rule,
    kernel=_input_gradient,
    dims=_input_gradient_dims,
    summary="conv2d's gradient with respect to its input (TensorFlow's conv2d_transpose)",
    family=Family.LINALG,
    lowered_by=LoweredBy.OP_RULE,
)


def _filter_gradient_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                          filter_size: Pair, feature_group_count: int = 1,
                          **_: object) -> list[D]:
    """(the filters' height and width, the input's channels per group, the cotangent's
    channels)."""
    x, g = operands
    channels = x[3] if feature_group_count == 1 else d.floordiv(x[3], feature_group_count)
    return [d.const(filter_size[0]), d.const(filter_size[1]), channels, g[3]]


def _filter_gradient_rule(x: ShapedType, g: ShapedType, *, filter_size: Pair, strides: Pair,
                          padding: Padding, dilations: Pair,
                          feature_group_count: int = 1) -> ShapedType:
    op = "conv2d_filter_gradient"
    check_conv_operands(op, x, g, ("the input", "the cotangent"))
    groups = check_groups(op, feature_group_count)
    _check_pairs(f"{op}: filter_size", filter_size, 1)
    check_geometry(op, strides, padding, dilations)
    shapes = f"input {format_shape(x.shape)}, cotangent {format_shape(g.shape)}"
    _check_same(op, "the input's and the cotangent's batch", x.shape[0], g.shape[0], shapes)
    _check_divides(op, groups, "the input's channels", x.shape[3], shapes)
    _check_divides(op, groups, "the cotangent's channels", g.shape[3], shapes)
    _check_positions(op, x.shape[1:3], filter_size, g.shape[1:3], strides, padding, dilations,
                     shapes)
    channels = None if x.shape[3] is None else x.shape[3] // groups
    return ShapedType((*filter_size, channels, g.shape[3]), x.dtype)


def _filter_gradient(x, g, *, filter_size, strides, padding, dilations,
                     feature_group_count=1):
    """im2col of the input as the forward conv does, transposed, times the cotangent's rows:
    (kh*kw*C, N*Ho*Wo) @ (N*Ho*Wo, O); grouped, each group's windows by its cotangent
    channels."""
    dtype = x.dtype
    compute = compute_dtype(dtype)
    columns, _ = im2col(np.asarray(x, dtype=compute), filter_size, strides, padding,
                          dilations)
    out_channels, groups = g.shape[3], feature_group_count
    rows = np.asarray(g, dtype=compute).reshape(-1, out_channels)
    if groups == 1:
        result = columns.T @ rows
    else:
        by_group = columns_by_group(columns, filter_size[0] * filter_size[1], groups)
        products = by_group.transpose(0, 2, 1) @ rows.reshape(
            rows.shape[0], groups, out_channels // groups).transpose(1, 0, 2)
        result = products.transpose(1, 0, 2).reshape(columns.shape[1] // groups,
                                                     out_channels)
    return result.reshape(*filter_size, x.shape[3] // groups, out_channels).astype(
        dtype, copy=False)


conv2d_filter_gradient_p = Primitive(
    "conv2d_filter_gradient",
    shape_rule=_filter_gradient_rule,
    kernel=_filter_gradient,
    dims=_filter_gradient_dims,
    summary="conv2d's gradient with respect to its filters",
    family=Family.LINALG,
    lowered_by=LoweredBy.OP_RULE,
)


def _static_pair(shape: Sequence[int | None], what: str, whole: Sequence[int | None]) -> Pair:
    if None in shape:
        raise NotImplementedError(f"the gradient of conv2d needs a static {what}, got "
                                  f"{format_shape(tuple(whole))}")
    return (int(shape[0]), int(shape[1]))


def conv2d_input_gradient(g, w, shape, strides: Pair, padding: Padding, dilations: Pair,
                          groups: int = 1):
    """The gradient of ``conv2d(x, w)`` (of `groups` feature groups) with respect to an `x`
    of `shape`, given the result's cotangent `g` (also TensorFlow's ``conv2d_transpose`` of
    `g`)."""
    return conv2d_input_gradient_p.bind(
        g, w, input_size=_static_pair(shape[1:3], "input height and width", shape),
        strides=strides, padding=padding, dilations=dilations, **grouped(groups))


def conv2d_filter_gradient(x, g, window, strides: Pair, padding: Padding, dilations: Pair,
                           groups: int = 1):
    """The gradient of ``conv2d(x, w)`` (of `groups` feature groups) with respect to filters
    of height and width `window`, given the result's cotangent `g`."""
    return conv2d_filter_gradient_p.bind(
        x, g, filter_size=_static_pair(window, "filter height and width", window),
        strides=strides, padding=padding, dilations=dilations, **grouped(groups))


@conv2d_p.def_vjp
@floating_only
def _conv2d_vjp(cotangents, inputs, outputs, *, strides, padding, dilations,
                feature_group_count=1):
    (g,), (x, w), (dx, dw) = cotangents, inputs, wanted(inputs)
    geometry = (strides, padding, dilations, feature_group_count)
    return [conv2d_input_gradient(g, w, x.shape, *geometry) if dx else None,
            conv2d_filter_gradient(x, g, w.shape[:2], *geometry) if dw else None]


# Both gradients are bilinear in their operands, as conv2d is: <c, dx(g, w)> = <conv2d(c, w), g>
# and <c, dw(x, g)> = <conv2d(x, c), g>, so each one's gradients are the other two ops.


@conv2d_input_gradient_p.def_vjp
@floating_only
def _input_gradient_vjp(cotangents, inputs, outputs, *, input_size, strides, padding,
                        dilations, feature_group_count=1):
    (c,), (g, w), (dg, dw) = cotangents, inputs, wanted(inputs)
    groups = feature_group_count
    return [conv2d_p.bind(c, w, strides=strides, padding=padding, dilations=dilations,
                          **grouped(groups)) if dg else None,
            conv2d_filter_gradient(c, g, w.shape[:2], strides, padding, dilations, groups)
            if dw else None]


@conv2d_filter_gradient_p.def_vjp
@floating_only
def _filter_gradient_vjp(cotangents, inputs, outputs, *, filter_size, strides, padding,
                         dilations, feature_group_count=1):
    (c,), (x, g), (dx, dg) = cotangents, inputs, wanted(inputs)
    groups = feature_group_count
    return [conv2d_input_gradient(g, c, x.shape, strides, padding, dilations, groups)
            if dx else None,
            conv2d_p.bind(x, c, strides=strides, padding=padding, dilations=dilations,
                          **grouped(groups)) if dg else None]


@reduce_window_p.def_vjp
@floating_only
def _reduce_window_vjp(cotangents, inputs, outputs, *, kind, window, strides, padding):
    (g,), (x,), (out,) = cotangents, inputs, outputs
    if kind == "sum":
        return [_sum_pool_gradient(g, x.shape, window, strides, padding)]
    return [max_pool_gradient_p.bind(x, out, g, window=window, strides=strides,
                                     padding=padding)]


@max_pool_gradient_p.def_vjp
@floating_only
def _max_pool_gradient_vjp(cotangents, inputs, outputs, *, window, strides, padding):
    """Linear in the cotangent g, constant elsewhere (the choice of element is piecewise
    constant): its transpose reads, for each window, the cotangent at the element the
    window chose; one strided view per tap, as the forward kernel walks them."""
    (c,), (x, out, _), (_, _, dg) = cotangents, inputs, wanted(inputs)
    if not dg:
        return [None, None, None]
    if None in out.shape[1:3]:
        raise NotImplementedError("the second derivative of max pooling needs a static "
                                  f"height and width, got input {format_shape(x.shape)}")
    full = (None, None, None)
    pads = ((0, 0), padding[0], padding[1], (0, 0))
    padded = pad_p.bind(x, pads=pads, value=np.nan)
    padded_c = pad_p.bind(c, pads=pads, value=0)
    (ho, wo), (sh, sw) = out.shape[1:3], strides
    taken, total = None, None
    for a in range(window[0]):
        for b in range(window[1]):
            view = (full, (a, a + (ho - 1) * sh + 1, sh), (b, b + (wo - 1) * sw + 1, sw), full)
            hit = equal(slice_p.bind(padded, slices=view), out)
            if taken is not None:
                hit, taken = hit & ~taken, taken | hit
            else:
                taken = hit
            part = where(hit, slice_p.bind(padded_c, slices=view), 0.0)
            total = part if total is None else total + part
    return [None, None, total]
