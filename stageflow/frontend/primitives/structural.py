"""Structural primitives: broadcast, reshape, transpose, slice, concat, pad, gather, iota.

They move or replicate elements without arithmetic. Their NumPy kernels return views where
NumPy can (tensors are immutable, so sharing memory is safe).
"""

from __future__ import annotations

import numpy as np

from stageflow.frontend import dtypes
from stageflow.frontend.primitives.base import Primitive, ShapedType
from stageflow.frontend.primitives.shapes import (
    broadcast_shapes,
    format_shape,
    normalize_axis,
    num_elements,
)


def _broadcast_rule(x: ShapedType, *, shape: tuple[int | None, ...]) -> ShapedType:
    if len(shape) < x.ndim:
        raise ValueError(f"cannot broadcast to the lower rank shape {format_shape(shape)}")
    if broadcast_shapes(x.shape, shape) != tuple(shape):
        raise ValueError(f"cannot broadcast {format_shape(x.shape)} to {format_shape(shape)}")
    return ShapedType(tuple(shape), x.dtype)


broadcast_to_p = Primitive(
    "broadcast_to",
    shape_rule=_broadcast_rule,
    kernel=lambda x, *, shape: np.broadcast_to(x, shape),
    summary="replicate x along new leading dims and dims of size 1",
)


def _reshape_rule(x: ShapedType, *, shape: tuple[int, ...]) -> ShapedType:
    if sum(1 for d in shape if d == -1) > 1:
        raise ValueError(f"at most one -1 allowed in the new shape {shape}")
    if any(d < -1 for d in shape):
        raise ValueError(f"negative dim in the new shape {shape}")
    total = num_elements(x.shape)
    known = num_elements([d for d in shape if d != -1])
    if -1 in shape:
        if total is None:
            result = tuple(None if d == -1 else d for d in shape)
        elif known == 0 or total % known:
            raise ValueError(f"cannot reshape {format_shape(x.shape)} into {shape}")
        else:
            result = tuple(total // known if d == -1 else d for d in shape)
    else:
        if total is not None and total != known:
            raise ValueError(
                f"cannot reshape {format_shape(x.shape)} ({total} elements) into "
                f"{format_shape(shape)} ({known} elements)"
            )
        result = tuple(shape)
    return ShapedType(result, x.dtype)


reshape_p = Primitive(
    "reshape",
    shape_rule=_reshape_rule,
    kernel=lambda x, *, shape: np.reshape(x, shape),
    summary="the same elements in row-major order with a new shape (one dim may be -1)",
)


def _transpose_rule(x: ShapedType, *, perm: tuple[int, ...]) -> ShapedType:
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"perm {tuple(perm)} is not a permutation of the {x.ndim} axes")
    return ShapedType(tuple(x.shape[p] for p in perm), x.dtype)


transpose_p = Primitive(
    "transpose",
    shape_rule=_transpose_rule,
    kernel=lambda x, *, perm: np.transpose(x, perm),
    summary="permute the axes: result dim i is operand dim perm[i]",
)

Slice = tuple[int | None, int | None, int | None]


def _slice_rule(x: ShapedType, *, slices: tuple[Slice, ...]) -> ShapedType:
    if len(slices) != x.ndim:
        raise ValueError(f"{len(slices)} slices for a rank-{x.ndim} operand")
    shape = []
    for dim, (start, stop, step) in zip(x.shape, slices, strict=True):
        if step == 0:
            raise ValueError("slice step cannot be zero")
        known = dim is not None
        shape.append(len(range(*slice(start, stop, step).indices(dim))) if known else None)
    return ShapedType(tuple(shape), x.dtype)


slice_p = Primitive(
    "slice",
    shape_rule=_slice_rule,
    kernel=lambda x, *, slices: x[tuple(slice(*s) for s in slices)],
    summary="x[start:stop:step] along every axis, with Python's slice semantics",
)


def _concat_rule(*xs: ShapedType, axis: int) -> ShapedType:
    if not xs:
        raise ValueError("needs at least one operand")
    first = xs[0]
    if first.ndim == 0:
        raise ValueError("cannot concatenate 0-d tensors")
    axis = normalize_axis(axis, first.ndim)
    total: int | None = 0
    for x in xs:
        if x.dtype != first.dtype:
            raise TypeError(f"operands have different dtypes {first.dtype.name}, {x.dtype.name}")
        same_rank = x.ndim == first.ndim
        if not same_rank or any(
            a != b and None not in (a, b)
            for i, (a, b) in enumerate(zip(x.shape, first.shape, strict=True))
            if i != axis
        ):
            shapes = ", ".join(format_shape(y.shape) for y in xs)
            raise ValueError(f"shapes {shapes} differ outside axis {axis}")
        total = None if total is None or x.shape[axis] is None else total + x.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return ShapedType(tuple(shape), first.dtype)


concat_p = Primitive(
    "concat",
    shape_rule=_concat_rule,
    kernel=lambda *xs, axis: np.concatenate(xs, axis=axis),
    summary="join operands along an existing axis",
)


def _pad_rule(x: ShapedType, *, pads: tuple[tuple[int, int], ...], value: float) -> ShapedType:
    if len(pads) != x.ndim:
        raise ValueError(f"{len(pads)} pad pairs for a rank-{x.ndim} operand")
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise ValueError(f"negative padding {pads}")
    shape = tuple(
        None if d is None else d + lo + hi for d, (lo, hi) in zip(x.shape, pads, strict=True)
    )
    return ShapedType(shape, x.dtype)


pad_p = Primitive(
    "pad",
    shape_rule=_pad_rule,
    kernel=lambda x, *, pads, value: np.pad(x, pads, constant_values=value),
    summary="surround x with `value`: pads[i] = (before, after) along axis i",
)


def _gather_rule(params: ShapedType, indices: ShapedType, *, axis: int) -> ShapedType:
    if indices.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"indices must be int32 or int64, got {indices.dtype.name}")
    if params.ndim == 0:
        raise ValueError("cannot gather from a 0-d tensor")
    axis = normalize_axis(axis, params.ndim)
    shape = params.shape[:axis] + indices.shape + params.shape[axis + 1 :]
    return ShapedType(shape, params.dtype)


def _gather(params, indices, *, axis):
    size = params.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise IndexError(f"an index is out of range [{-size}, {size}) for axis {axis}")
    return np.take(params, indices, axis=axis)


gather_p = Primitive(
    "gather",
    shape_rule=_gather_rule,
    kernel=_gather,
    summary="params indexed by `indices` along `axis` (negative indices count from the end)",
)


def _iota_rule(*, shape: tuple[int, ...], dtype: np.dtype, dimension: int) -> ShapedType:
    if not 0 <= dimension < len(shape):
        raise ValueError(f"dimension {dimension} is out of range for shape {shape}")
    return ShapedType(tuple(shape), dtypes.as_dtype(dtype))


def _iota(*, shape, dtype, dimension):
    line = np.arange(shape[dimension], dtype=dtype)
    line = line.reshape([-1 if i == dimension else 1 for i in range(len(shape))])
    return np.broadcast_to(line, shape)


iota_p = Primitive(
    "iota",
    shape_rule=_iota_rule,
    kernel=_iota,
    summary="0, 1, 2, ... counting along `dimension`, constant along the others",
)


def _constant_rule(*, value: np.ndarray) -> ShapedType:
    return ShapedType(value.shape, dtypes.as_dtype(value.dtype))


constant_p = Primitive(
    "constant",
    shape_rule=_constant_rule,
    kernel=lambda *, value: value,
    summary="a tensor value fixed at trace time",
)
