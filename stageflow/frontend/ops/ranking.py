"""Rank tests of TensorFlow, as comparisons and counts: `sf.math.in_top_k` (also
`sf.nn.in_top_k`) and `sf.searchsorted`."""

from __future__ import annotations

from typing import Any

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.math_ops import is_finite
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.reductions import reduce_sum
from stageflow.frontend.ops.shape import expand_dims
from stageflow.frontend.ops.shape import one_hot as _one_hot
from stageflow.frontend.tensor import Tensor

__all__ = ["in_top_k", "searchsorted"]


@math_op
def in_top_k(targets: Any, predictions: Any, k: int) -> Tensor:
    """Whether each row's target class is among its `k` highest predictions (TensorFlow's
    ``tf.math.in_top_k``): fewer than `k` predictions are strictly higher, so ties at the
    boundary all count; a non-finite target prediction, or a target out of range, does not.

    targets: int [batch]; predictions: float [batch, classes]; returns bool [batch].

    >>> sf.math.in_top_k([1, 0], [[0.1, 0.9, 0.0], [0.2, 0.5, 0.3]], k=1)
    sf.Tensor([ True, False], shape=(2,), dtype=bool)
    """
    predictions = convert_to_tensor(predictions)
    targets = convert_to_tensor(targets)
    if predictions.ndim != 2 or targets.ndim != 1:
        raise ValueError(f"in_top_k: needs targets [batch] and predictions [batch, classes], "
                         f"got {list(targets.shape)} and {list(predictions.shape)}"
                         f"{describe_location()}")
    chosen = _one_hot(targets, predictions.shape[1], True, False, dtype=dtypes.bool_)
    found = reduce_sum(ew.cast(chosen, dtypes.int32), axis=1) > 0
    zero = ew.cast(0, predictions.dtype)
    target = reduce_sum(ew.where(chosen, predictions, zero), axis=1)
    higher = reduce_sum(ew.cast(ew.greater(predictions, expand_dims(target, 1)), dtypes.int32),
                        axis=1)
    return ew.logical_and(ew.logical_and(found, is_finite(target)), ew.less(higher, int(k)))


def searchsorted(sorted_sequence: Any, values: Any, side: str = "left",
                 out_type: Any = dtypes.int32) -> Tensor:
    """Where each of `values` would be inserted in its row of `sorted_sequence` to keep it
    sorted (TensorFlow's ``tf.searchsorted``): before equal entries (`side` "left") or
    after them ("right").

    sorted_sequence: [..., n] sorted along the last axis; values: [..., m] with the same
    leading dims; returns [..., m] of `out_type` (int32 or int64).

    >>> sf.searchsorted([[1, 3, 5]], [[0, 3, 6]])
    sf.Tensor([[0, 1, 3]], shape=(1, 3), dtype=int32)
    >>> sf.searchsorted([[1, 3, 5]], [[0, 3, 6]], side="right")
    sf.Tensor([[0, 2, 3]], shape=(1, 3), dtype=int32)
    """
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}"
                         f"{describe_location()}")
    sequence = convert_to_tensor(sorted_sequence)
    values = convert_to_tensor(values, sequence.dtype)
    if sequence.ndim < 1 or values.ndim != sequence.ndim:
        raise ValueError(f"searchsorted: sorted_sequence and values need the same rank >= 1, "
                         f"got {list(sequence.shape)} and {list(values.shape)}"
                         f"{describe_location()}")
    compare = ew.less if side == "left" else ew.less_equal
    below = compare(expand_dims(sequence, -2), expand_dims(values, -1))  # [..., m, n]
    return reduce_sum(ew.cast(below, dtypes.as_dtype(out_type)), axis=-1)
