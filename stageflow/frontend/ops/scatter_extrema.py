"""TensorFlow's `tensor_scatter_nd_min` and `tensor_scatter_nd_max`: a tensor with the
slices at index tuples lowered (raised) to the updates, duplicates taking their extreme.

They are composed of the n-dimensional indexing primitives (`gather_nd`, the scatter
`update`) and elementwise ops, so they stage, run and lower wherever those do: the updates
meeting at one tuple are found by comparing every tuple with every other (work and memory
of ``n * n`` update slices for ``n`` tuples), so that each duplicate writes the same
extreme and the order of the writes cannot matter. Their gradient is TensorFlow's: an
output's gradient goes to the inputs that equal it, split evenly between ties.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.math_ops import reduce_all
from stageflow.frontend.ops.nd_indexing import _indices as checked_indices
from stageflow.frontend.ops.nd_indexing import (
    gather_nd,
    scatter_nd,
    tensor_scatter_nd_update,
)
from stageflow.frontend.ops.reductions import reduce_max, reduce_min
from stageflow.frontend.ops.shape import expand_dims, reshape
from stageflow.frontend.ops.shape_of import shape as shape_of
from stageflow.frontend.tape import custom_gradient
from stageflow.frontend.tensor import Tensor

__all__ = ["tensor_scatter_nd_max", "tensor_scatter_nd_min"]


def _operands(op: str, tensor: Any, indices: Any, updates: Any
              ) -> tuple[Tensor, Tensor, Tensor]:
    """The checked operands: a real-number tensor, ``[..., k]`` indices and updates of
    ``indices.shape[:-1] + tensor.shape[k:]`` in the tensor's dtype."""
    tensor = convert_to_tensor(tensor)
    if tensor.dtype.kind not in "iuf" and tensor.dtype.name != "bfloat16":
        raise TypeError(f"{op}: the tensor must be of a real-number dtype (floats or "
                        f"integers), got {tensor.dtype.name}{describe_location()}")
    indices = checked_indices(indices, op)
    updates = convert_to_tensor(updates, tensor.dtype)
    width = indices.shape[-1]
    if width > tensor.ndim:
        raise ValueError(f"{op}: index tuples of {width} for a tensor of rank {tensor.ndim}"
                         f"{describe_location()}")
    want = (*indices.shape[:-1], *tensor.shape[width:])
    if updates.ndim != len(want) or any(a is not None and b is not None and a != b
                                        for a, b in zip(updates.shape, want, strict=True)):
        raise ValueError(f"{op}: updates must be {format_shape(want)} for indices "
                         f"{format_shape(indices.shape)} into a tensor "
                         f"{format_shape(tensor.shape)}, got {format_shape(updates.shape)}"
                         f"{describe_location()}")
    return tensor, indices, updates


def _scatter_extreme(tensor: Tensor, indices: Tensor, updates: Tensor, lowest: bool
                     ) -> Tensor:
    """The forward computation: each tuple's extreme of its updates and the tensor's slice,
    written at every duplicate of the tuple."""
    width = indices.shape[-1]
    inner = tensor.shape[width:]
    if None in inner:
        raise ValueError(f"tensor_scatter_nd_{'min' if lowest else 'max'}: the dims of the "
                         f"slices, {format_shape(tensor.shape)}[{width}:], must be known"
                         f"{describe_location()}")
    flat = reshape(indices, (-1, width))
    bounds = ew.cast(shape_of(tensor)[:width], indices.dtype)
    flat = ew.where(ew.less(flat, 0), ew.add(flat, bounds), flat)  # -1 is the last
    rows = reshape(updates, (-1, *inner))
    same = reduce_all(ew.equal(expand_dims(flat, 1), expand_dims(flat, 0)), axis=-1)
    same = _trailing(same, len(inner))
    # row i's candidates: the rows at the same tuple, its own value elsewhere
    candidates = ew.where(same, expand_dims(rows, 0), expand_dims(rows, 1))
    extreme = (reduce_min if lowest else reduce_max)(candidates, axis=1)
    current = gather_nd(tensor, flat)
    merged = (ew.minimum if lowest else ew.maximum)(current, extreme)
    return tensor_scatter_nd_update(tensor, flat, merged)


def _trailing(mask: Tensor, count: int) -> Tensor:
    """`mask` with `count` more dims of 1, to broadcast over the slices' dims."""
    for _ in range(count):
        mask = expand_dims(mask, -1)
    return mask


def _with_gradient(tensor: Tensor, indices: Tensor, updates: Tensor, lowest: bool) -> Tensor:
    """`_scatter_extreme` with TensorFlow's gradient (floating dtypes)."""

    @custom_gradient
    def scatter_extreme(tensor: Tensor, indices: Tensor, updates: Tensor) -> Any:
        output = _scatter_extreme(tensor, indices, updates, lowest)

        def grad(dy: Tensor) -> list[Any]:
            at_tensor = ew.cast(ew.equal(tensor, output), dy.dtype)
            at_updates = ew.cast(ew.equal(updates, gather_nd(output, indices)), dy.dtype)
            ties = ew.add(at_tensor, scatter_nd(indices, at_updates, tensor.shape))
            shared = ew.divide(dy, ties)  # ties >= 1 everywhere
            return [ew.multiply(shared, at_tensor), None,
                    ew.multiply(gather_nd(shared, indices), at_updates)]

        return output, grad

    return scatter_extreme(tensor, indices, updates)


def _scatter(op: str, tensor: Any, indices: Any, updates: Any, lowest: bool) -> Tensor:
    tensor, indices, updates = _operands(op, tensor, indices, updates)
    if np.issubdtype(tensor.dtype, np.floating) or tensor.dtype.name == "bfloat16":
        return _with_gradient(tensor, indices, updates, lowest)
    return _scatter_extreme(tensor, indices, updates, lowest)


def tensor_scatter_nd_min(tensor: Any, indices: Any, updates: Any) -> Tensor:
    """`tensor` with each slice at the index tuples lowered to the updates there: the
    elementwise minimum of the slice and all its updates (duplicates included).

    tensor: any shape, real numbers; indices: int [..., k]; updates:
    indices.shape[:-1] + tensor.shape[k:]; returns tensor's shape and dtype.

    >>> sf.tensor_scatter_nd_min([1, 5, 3], [[0], [2], [0]], [0, 7, -2])
    sf.Tensor([-2,  5,  3], shape=(3,), dtype=int32)
    """
    return _scatter("tensor_scatter_nd_min", tensor, indices, updates, lowest=True)


def tensor_scatter_nd_max(tensor: Any, indices: Any, updates: Any) -> Tensor:
    """`tensor` with each slice at the index tuples raised to the updates there: the
    elementwise maximum of the slice and all its updates (duplicates included).

    tensor: any shape, real numbers; indices: int [..., k]; updates:
    indices.shape[:-1] + tensor.shape[k:]; returns tensor's shape and dtype.

    >>> sf.tensor_scatter_nd_max([[1, 5], [3, 3]], [[1]], [[9, 0]])
    sf.Tensor([[1, 5],
               [9, 3]], shape=(2, 2), dtype=int32)
    """
    return _scatter("tensor_scatter_nd_max", tensor, indices, updates, lowest=False)
