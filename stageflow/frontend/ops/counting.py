"""Counting ops of TensorFlow, as segment sums: `sf.math.bincount`,
`sf.math.confusion_matrix` and `sf.histogram_fixed_width`. Where the output's length comes
from the values (the largest id), those must be known: eagerly always, in a staged function
through the length arguments."""

from __future__ import annotations

from typing import Any

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones_like
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.nd_indexing import scatter_nd, unsorted_segment_sum
from stageflow.frontend.ops.shape import reshape, stack
from stageflow.frontend.ops.static_value import get_static_value
from stageflow.frontend.tensor import Tensor

__all__ = ["bincount", "confusion_matrix", "histogram_fixed_width"]


def _largest(op: str, tensors: list[Tensor], hint: str) -> int:
    """The largest value of `tensors` (-1 when empty), which must be known now."""
    values = [get_static_value(t) for t in tensors]
    if any(v is None for v in values):
        raise ValueError(f"{op}: the output's length comes from the values, which a trace "
                         f"does not have: {hint}{describe_location()}")
    return max((int(v.max()) for v in values if v.size), default=-1)


@math_op
def bincount(arr: Any, weights: Any = None, minlength: int | None = None,
             maxlength: int | None = None, dtype: Any = dtypes.int32,
             binary_output: bool = False) -> Tensor:
    """How often each value ``0, 1, ...`` occurs in the non-negative ints `arr` (TensorFlow's
    ``tf.math.bincount``): ``max(arr) + 1`` bins, at least `minlength`, at most `maxlength`
    (larger values are dropped). With `weights` (of arr's shape) each occurrence adds its
    weight, and the result has their dtype; `binary_output` gives 1 for any occurrence.

    In a staged function pass ``minlength == maxlength``: the length is then known.

    >>> sf.math.bincount([1, 1, 3])
    sf.Tensor([0, 2, 0, 1], shape=(4,), dtype=int32)
    >>> sf.math.bincount([1, 1, 3], weights=[0.5, 1.0, 2.0], minlength=6)
    sf.Tensor([0. , 1.5, 0. , 2. , 0. , 0. ], shape=(6,), dtype=float32)
    """
    arr = convert_to_tensor(arr)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"bincount: arr must be ints, got {arr.dtype.name}{describe_location()}")
    if minlength is not None and minlength == maxlength:
        length = int(minlength)
    else:
        length = _largest("bincount", [arr], "pass minlength == maxlength") + 1
        length = max(length, int(minlength or 0))
        length = length if maxlength is None else min(length, int(maxlength))
    flat = reshape(arr, (-1,))
    if weights is None or binary_output:
        counts = ones_like(flat, dtypes.as_dtype(dtype))
    else:
        counts = reshape(convert_to_tensor(weights), (-1,))
    kept = ew.less(flat, length)  # values beyond maxlength are dropped
    counts = ew.where(kept, counts, ew.cast(0, counts.dtype))
    result = unsorted_segment_sum(counts, ew.where(kept, flat, ew.cast(0, flat.dtype)), length)
    if binary_output:
        return ew.cast(ew.greater(result, 0), result.dtype)
    return result


@math_op
def confusion_matrix(labels: Any, predictions: Any, num_classes: int | None = None,
                     weights: Any = None, dtype: Any = dtypes.int32) -> Tensor:
    """The [num_classes, num_classes] matrix counting each (label, prediction) pair: rows
    are the true labels, columns the predictions (TensorFlow's ``tf.math.confusion_matrix``;
    `num_classes` defaults to the largest class + 1, and must be given when staged).

    >>> sf.math.confusion_matrix([0, 1, 2, 1], [0, 2, 2, 1])
    sf.Tensor([[1, 0, 0],
               [0, 1, 1],
               [0, 0, 1]], shape=(3, 3), dtype=int32)
    """
    labels = reshape(convert_to_tensor(labels), (-1,))
    predictions = reshape(convert_to_tensor(predictions), (-1,))
    if num_classes is None:
        num_classes = _largest("confusion_matrix", [labels, predictions],
                               "pass num_classes") + 1
    dtype = dtypes.as_dtype(dtype)
    counts = (ones_like(labels, dtype) if weights is None
              else ew.cast(reshape(convert_to_tensor(weights), (-1,)), dtype))
    pairs = stack([labels, ew.cast(predictions, labels.dtype)], axis=1)
    return scatter_nd(pairs, counts, (int(num_classes), int(num_classes)))


def histogram_fixed_width(values: Any, value_range: Any, nbins: int = 100,
                          dtype: Any = dtypes.int32) -> Tensor:
    """How many `values` fall in each of `nbins` equal bins spanning ``value_range =
    [low, high]`` (TensorFlow's ``tf.histogram_fixed_width``): values below `low` count in
    the first bin, values at or above `high` in the last.

    >>> sf.histogram_fixed_width([-1.0, 0.0, 1.5, 2.0, 5.0, 15.0], [0.0, 5.0], nbins=5)
    sf.Tensor([2, 1, 1, 0, 2], shape=(5,), dtype=int32)
    """
    values = convert_to_tensor(values)
    value_range = convert_to_tensor(value_range, values.dtype)
    low, high = value_range[0], value_range[1]
    scaled = (values - low) / (high - low) * ew.cast(nbins, values.dtype)
    bins = ew.clip_by_value(ew.cast(ew.floor(scaled), dtypes.int32), 0, int(nbins) - 1)
    flat = reshape(bins, (-1,))
    return unsorted_segment_sum(ones_like(flat, dtypes.as_dtype(dtype)), flat, int(nbins))
