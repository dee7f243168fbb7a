"""TensorFlow's n-dimensional indexing: `gather_nd`, `scatter_nd`,
`tensor_scatter_nd_update`, `tensor_scatter_nd_add` and `unsorted_segment_sum`, over the
primitives of `stageflow.primitives.nd_indexing`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core.errors import StagingError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor, is_tensor
from stageflow.frontend.ops.creation import zeros
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.shape import broadcast_to, concat, expand_dims, gather, pad
from stageflow.frontend.tensor import Tensor
from stageflow.primitives import nd_indexing as nd

__all__ = ["gather_nd", "scatter_nd", "segment_sum", "tensor_scatter_nd_add",
           "tensor_scatter_nd_sub", "tensor_scatter_nd_update", "unsorted_segment_sum"]


def _indices(indices: Any, op: str) -> Tensor:
    indices = convert_to_tensor(indices)
    if indices.dtype not in nd.INDEX_DTYPES:
        raise TypeError(f"{op}: indices must be int32 or int64, got {indices.dtype.name}"
                        f"{describe_location()}")
    if indices.ndim == 0 or indices.shape[-1] is None:
        raise ValueError(f"{op}: indices must be [..., k] with a known k, got shape "
                         f"{indices.shape}{describe_location()}")
    return indices


def gather_nd(params: Any, indices: Any) -> Tensor:
    """The slices of `params` at the index tuples of `indices` (``[..., k]``): the result
    is ``indices.shape[:-1] + params.shape[k:]``.

    >>> sf.gather_nd([[1, 2], [3, 4]], [[0, 1], [1, 0]])
    sf.Tensor([2, 3], shape=(2,), dtype=int32)
    """
    params = convert_to_tensor(params)
    indices = _indices(indices, "gather_nd")
    return nd.gather_nd_p.bind(params, indices, width=indices.shape[-1])


def gather_rows(params: Any, indices: Any) -> Tensor:
    """``sf.gather(params, indices)`` along the first axis, as a `gather_nd` of one-column
    index tuples: its gradient, a scatter-add, needs no known sizes (the index count of a
    ragged tensor's values is known only when the function runs); string tensors, which
    `gather_nd` does not take, through `gather`. Indices must be non-negative."""
    params, indices = convert_to_tensor(params), convert_to_tensor(indices)
    if params.dtype.kind == "O":
        return gather(params, indices)
    return gather_nd(params, expand_dims(indices, -1))


def with_default_row(values: Tensor, default: Any) -> Tensor:
    """`values` with one more row, of `default`: padded (a pad differentiates whatever the
    number of values), or for strings, which do not pad, and a default given as a tensor,
    joined."""
    if values.dtype.kind == "O" or isinstance(default, Tensor):
        fill = convert_to_tensor(default, values.dtype)
        return concat([values, broadcast_to(fill, (1, *values.shape[1:]))], 0)
    number = np.asarray(default, values.dtype).item()
    return pad(values, [(0, 1)] + [(0, 0)] * (values.ndim - 1), constant_values=number)


def tensor_scatter_nd_update(tensor: Any, indices: Any, updates: Any) -> Tensor:
    """`tensor` with the slices at the index tuples replaced by `updates`.

    tensor: any shape; indices: int [..., k]; updates: indices.shape[:-1] + tensor.shape[k:];
    returns tensor's shape and dtype.

    >>> sf.tensor_scatter_nd_update([[0, 0], [0, 0]], [[1]], [[3, 4]])
    sf.Tensor([[0, 0],
               [3, 4]], shape=(2, 2), dtype=int32)
    """
    tensor = convert_to_tensor(tensor)
    indices = _indices(indices, "tensor_scatter_nd_update")
    return nd.scatter_nd_update_p.bind(tensor, indices, convert_to_tensor(updates, tensor.dtype),
                                       width=indices.shape[-1])


def tensor_scatter_nd_add(tensor: Any, indices: Any, updates: Any) -> Tensor:
    """`tensor` with `updates` added at the index tuples (duplicates accumulate).

    tensor: any shape; indices: int [..., k]; updates: indices.shape[:-1] + tensor.shape[k:];
    returns tensor's shape and dtype.

    >>> sf.tensor_scatter_nd_add([1, 1, 1], [[0], [2], [0]], [5, 6, 7])
    sf.Tensor([13,  1,  7], shape=(3,), dtype=int32)
    """
    tensor = convert_to_tensor(tensor)
    indices = _indices(indices, "tensor_scatter_nd_add")
    return nd.scatter_nd_add_p.bind(tensor, indices, convert_to_tensor(updates, tensor.dtype),
                                    width=indices.shape[-1])


def tensor_scatter_nd_sub(tensor: Any, indices: Any, updates: Any) -> Tensor:
    """`tensor` with `updates` subtracted at the index tuples (duplicates accumulate): the
    scatter-add of the negated updates.

    >>> sf.tensor_scatter_nd_sub([5, 5, 5], [[0], [2]], [1, 2])
    sf.Tensor([4, 5, 3], shape=(3,), dtype=int32)
    """
    tensor = convert_to_tensor(tensor)
    updates = convert_to_tensor(updates, tensor.dtype)
    return tensor_scatter_nd_add(tensor, indices, -updates)


def scatter_nd(indices: Any, updates: Any, shape: Sequence[int]) -> Tensor:
    """Zeros of `shape` with `updates` added at the index tuples (TensorFlow's rule:
    duplicates are summed).

    indices: int [..., k]; updates: indices.shape[:-1] + shape[k:]; returns `shape` of updates'
    dtype.

    >>> sf.scatter_nd([[1], [3], [1]], [5.0, 6.0, 7.0], [4])
    sf.Tensor([ 0., 12.,  0.,  6.], shape=(4,), dtype=float32)
    """
    updates = convert_to_tensor(updates)
    return tensor_scatter_nd_add(zeros(tuple(int(d) for d in shape), updates.dtype), indices,
                                 updates)


@math_op
def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: int) -> Tensor:
    """Sums of the slices of `data` by segment: ``out[s] = sum of data[i] where
    segment_ids[i] == s``, for ``num_segments`` segments (`segment_ids` of the leading
    dims of `data`).

    data: [n, ...] numeric; segment_ids: int [n]; returns [num_segments, ...] of data's dtype.

    >>> sf.unsorted_segment_sum([1.0, 2.0, 3.0, 4.0], [0, 1, 0, 1], num_segments=3)
    sf.Tensor([4., 6., 0.], shape=(3,), dtype=float32)
    """
    data = convert_to_tensor(data)
    ids = convert_to_tensor(segment_ids)  # of any length, also one known only at run time
    index = _indices(expand_dims(ids, -1), "unsorted_segment_sum")
    shape = (int(num_segments), *data.shape[ids.ndim:])
    if None in shape:
        raise ValueError(f"unsorted_segment_sum: the segments' dims must be known, got "
                         f"{shape}{describe_location()}")
    return scatter_nd(index, data, shape)


@math_op
def segment_sum(data: Any, segment_ids: Any) -> Tensor:
    """`unsorted_segment_sum` over sorted `segment_ids` (TensorFlow's ``segment_sum``): as
    many segments as the last id + 1, which the ids' values decide, so they must be known
    (eager, or constants in a staged function).

    data: [n, ...] numeric; segment_ids: int [n], non-decreasing, >= 0.

    >>> sf.math.segment_sum([1.0, 2.0, 3.0, 4.0], [0, 0, 1, 3])
    sf.Tensor([3., 3., 0., 4.], shape=(4,), dtype=float32)
    """
    ids = _indices(segment_ids, "segment_sum")
    try:
        values = np.asarray(segment_ids.numpy() if is_tensor(segment_ids) else segment_ids)
    except StagingError:
        raise ValueError(f"segment_sum: the number of segments comes from the values of "
                         f"segment_ids, which a trace does not have: call "
                         f"sf.math.unsorted_segment_sum(data, segment_ids, num_segments)"
                         f"{describe_location()}") from None
    if values.ndim != 1 or np.any(values[:1] < 0) or np.any(np.diff(values) < 0):
        raise ValueError(f"segment_sum: segment_ids must be a non-decreasing list of ids "
                         f">= 0, got {values.tolist()[:16]}{describe_location()}")
    return unsorted_segment_sum(data, ids, int(values[-1]) + 1 if values.size else 0)
