"""`sf.boolean_mask`, one-argument `sf.where` (`nonzero`), `sf.unique`, and ``x[mask]``: ops
whose result size depends on the values (see `stageflow.primitives.selection`)."""

from __future__ import annotations

from typing import Any

from stageflow.core import dtypes
from stageflow.core.shapes import format_shape, normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.nd_indexing import gather_nd
from stageflow.frontend.ops.shape import transpose
from stageflow.frontend.tensor import Tensor
from stageflow.primitives.selection import nonzero_p, unique_p

__all__ = ["boolean_mask", "nonzero", "unique"]


def nonzero(condition: Any) -> Tensor:
    """The positions of the true (non-zero) elements of `condition`, row-major, as an int64
    [count, rank] tensor (TensorFlow's one-argument ``tf.where``).
    ``sf.where([[True, False], [False, True]])`` -> ``[[0, 0], [1, 1]]``.

    >>> sf.nonzero([[True, False], [False, True]])
    sf.Tensor([[0, 0],
               [1, 1]], shape=(2, 2), dtype=int64)
    """
    return nonzero_p.bind(convert_to_tensor(condition))


def boolean_mask(tensor: Any, mask: Any, axis: int = 0) -> Tensor:
    """The elements (or slices) of `tensor` where the bool `mask` is true (TensorFlow's
    `tf.boolean_mask`, NumPy's ``x[mask]``): `mask` covers dims ``axis .. axis + k`` of
    `tensor`, which become one dim of unknown size, in row-major order.
    ``sf.boolean_mask([1, 2, 3], [True, False, True])`` -> ``[1, 3]``. Differentiable in
    `tensor` (a gather at the chosen positions).

    tensor: [n, ...] of any dtype; mask: bool [n]; returns [count, ...] of tensor's dtype.

    >>> sf.boolean_mask([1, 2, 3, 4], [True, False, True, False])
    sf.Tensor([1, 3], shape=(2,), dtype=int32)
    >>> sf.boolean_mask([[1, 2], [3, 4]], [False, True])
    sf.Tensor([[3, 4]], shape=(1, 2), dtype=int32)
    """
    tensor, mask = convert_to_tensor(tensor), convert_to_tensor(mask)
    if mask.dtype != dtypes.bool_:
        raise TypeError(f"boolean_mask: the mask must be bool, got {mask.dtype.name}"
                        f"{describe_location()}")
    axis = normalize_axis(axis, tensor.ndim)
    covered = tensor.shape[axis:axis + mask.ndim]
    if mask.ndim == 0 or len(covered) != mask.ndim or any(
            a is not None and b is not None and a != b
            for a, b in zip(covered, mask.shape, strict=True)):
        raise ValueError(f"boolean_mask: a mask of shape {format_shape(mask.shape)} does not "
                         f"cover dims {axis}.. of shape {format_shape(tensor.shape)}"
                         f"{describe_location()}")
    perm = [*range(axis, tensor.ndim), *range(axis)]
    moved = transpose(tensor, perm) if axis else tensor
    chosen = gather_nd(moved, nonzero(mask))
    if not axis:
        return chosen
    rest = tensor.ndim - axis - mask.ndim
    return transpose(chosen, [*range(1 + rest, 1 + rest + axis), *range(1 + rest)])


def unique(x: Any, out_idx: Any = dtypes.int32) -> tuple[Tensor, Tensor]:
    """The distinct values of 1-D `x` in the order they first occur, and for each element
    of `x` its position among them, so that ``y[idx] == x`` (TensorFlow's `tf.unique`).
    ``sf.unique([1, 1, 2, 4, 4, 4, 7, 8, 8])`` -> ``([1, 2, 4, 7, 8],
    [0, 0, 1, 2, 2, 2, 3, 4, 4])``.

    >>> values, idx = sf.unique([3, 1, 3, 2, 1])
    >>> values
    sf.Tensor([3, 1, 2], shape=(3,), dtype=int32)
    >>> idx
    sf.Tensor([0, 1, 0, 2, 1], shape=(5,), dtype=int32)
    """
    y, idx = unique_p.bind(convert_to_tensor(x), index_dtype=dtypes.as_dtype(out_idx))
    return y, idx
