"""TensorFlow's unsorted segment reductions beside the sum (`sf.math.unsorted_segment_sum`):
mean, max and min, as composites of the segment sum and the extrema scatters, so that they
differentiate as those do (a max's gradient goes to the elements that reach it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import fill, ones_like
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.nd_indexing import unsorted_segment_sum
from stageflow.frontend.ops.scatter_extrema import tensor_scatter_nd_max, tensor_scatter_nd_min
from stageflow.frontend.ops.shape import expand_dims, reshape
from stageflow.frontend.tensor import Tensor

__all__ = ["unsorted_segment_max", "unsorted_segment_mean", "unsorted_segment_min"]


@math_op
def unsorted_segment_mean(data: Any, segment_ids: Any, num_segments: int) -> Tensor:
    """The mean of the slices of `data` in each segment, 0 for an empty one (TensorFlow's
    ``tf.math.unsorted_segment_mean``).

    data: float [n, ...]; segment_ids: int [n]; returns [num_segments, ...] of data's dtype.

    >>> sf.math.unsorted_segment_mean([1.0, 2.0, 3.0, 4.0], [0, 1, 0, 1], num_segments=3)
    sf.Tensor([2., 3., 0.], shape=(3,), dtype=float32)
    """
    data = convert_to_tensor(data)
    ids = convert_to_tensor(segment_ids)
    total = unsorted_segment_sum(data, ids, num_segments)
    counts = unsorted_segment_sum(ones_like(ids, data.dtype), ids, num_segments)
    counts = reshape(counts, (int(num_segments),) + (1,) * (total.ndim - 1))
    return total / ew.maximum(counts, ew.cast(1, data.dtype))


def _extreme(data: Any, segment_ids: Any, num_segments: int, lowest: bool) -> Tensor:
    data = convert_to_tensor(data)
    ids = convert_to_tensor(segment_ids)
    dtype = data.dtype
    info = np.finfo(dtype) if dtypes.is_floating(dtype) else np.iinfo(dtype)
    # An empty segment holds the dtype's lowest value (max) or its highest (min), as TF's.
    start = fill((int(num_segments), *data.shape[ids.ndim:]), info.min if lowest else info.max,
                 dtype)
    scatter = tensor_scatter_nd_max if lowest else tensor_scatter_nd_min
    return scatter(start, expand_dims(ids, -1), data)


@math_op
def unsorted_segment_max(data: Any, segment_ids: Any, num_segments: int) -> Tensor:
    """The elementwise maximum of the slices of `data` in each segment (TensorFlow's
    ``tf.math.unsorted_segment_max``); an empty segment holds the dtype's lowest value.

    data: [n, ...] numeric; segment_ids: int [n]; returns [num_segments, ...] of data's dtype.

    >>> sf.math.unsorted_segment_max([1, 2, 3, 4], [0, 1, 0, 1], num_segments=2)
    sf.Tensor([3, 4], shape=(2,), dtype=int32)
    """
    return _extreme(data, segment_ids, num_segments, lowest=True)


@math_op
def unsorted_segment_min(data: Any, segment_ids: Any, num_segments: int) -> Tensor:
    """The elementwise minimum of the slices of `data` in each segment (TensorFlow's
    ``tf.math.unsorted_segment_min``); an empty segment holds the dtype's highest value.

    data: [n, ...] numeric; segment_ids: int [n]; returns [num_segments, ...] of data's dtype.

    >>> sf.math.unsorted_segment_min([1, 2, 3, 4], [0, 1, 0, 1], num_segments=2)
    sf.Tensor([1, 2], shape=(2,), dtype=int32)
    """
    return _extreme(data, segment_ids, num_segments, lowest=False)
