"""`sf.sort`, `sf.argsort` and `sf.math.top_k`: composites of the `sort` primitive.

All sort along one axis (the last by default), stably: equal values keep their order.
Ascending order puts NaN last (NumPy's order); descending order is its exact reverse on the
reversed axis, NaN first (JAX's ``descending=True``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core.shapes import normalize_axis
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.shape import gather
from stageflow.frontend.tensor import Tensor
from stageflow.primitives.sorting import sort_p

__all__ = ["argsort", "sort", "top_k"]

_DIRECTIONS = {"ASCENDING": False, "DESCENDING": True}


def _descending(direction: str, op: str) -> bool:
    try:
        return _DIRECTIONS[direction]
    except KeyError:
        raise ValueError(f"{op}: direction must be 'ASCENDING' or 'DESCENDING', got "
                         f"{direction!r}") from None


def sort(values: Any, axis: int = -1, direction: str = "ASCENDING") -> Tensor:
    """`values` sorted along `axis` (TensorFlow's `tf.sort`).

    Numbers of any float or integer dtype and any shape of rank >= 1; the result has the
    same shape and dtype. ``sf.sort([3, 1, 2])`` -> ``[1, 2, 3]``;
    ``sf.sort([[3., 1.], [0., 2.]], direction="DESCENDING")`` -> ``[[3., 1.], [2., 0.]]``.
    Differentiable: a value's gradient goes back to where the value came from.

    >>> sf.sort([3, 1, 2])
    sf.Tensor([1, 2, 3], shape=(3,), dtype=int32)
    >>> sf.sort([[3.0, 1.0], [0.0, 2.0]], direction="DESCENDING")
    sf.Tensor([[3., 1.],
               [2., 0.]], shape=(2, 2), dtype=float32)
    """
    values = convert_to_tensor(values)
    return sort_p.bind(values, axis=normalize_axis(axis, values.ndim),
                       descending=_descending(direction, "sort"))[0]


def argsort(values: Any, axis: int = -1, direction: str = "ASCENDING",
            stable: bool = True) -> Tensor:
    """The int32 positions that sort `values` along `axis` (TensorFlow's `tf.argsort`):
    ``take_along_axis(values, argsort(values))`` is ``sort(values)``. Always stable (equal
    values keep their order; `stable` is accepted for TensorFlow's signature).

    Same shape as `values`. ``sf.argsort([3, 1, 2])`` -> ``[1, 2, 0]``.

    values: int or float tensor of any shape; returns int32 positions of its shape.

    >>> sf.argsort([3.0, 1.0, 2.0])
    sf.Tensor([1, 2, 0], shape=(3,), dtype=int32)
    >>> sf.argsort([3, 1, 2], direction="DESCENDING")
    sf.Tensor([0, 2, 1], shape=(3,), dtype=int32)
    """
    del stable
    values = convert_to_tensor(values)
    return sort_p.bind(values, axis=normalize_axis(axis, values.ndim),
                       descending=_descending(direction, "argsort"))[1]


@math_op
def top_k(input: Any, k: int = 1, sorted: bool = True) -> tuple[Tensor, Tensor]:  # noqa: A002
    """The `k` largest entries along the last axis and their int32 positions
    (TensorFlow's `tf.math.top_k`): ``(values, indices)``, each of shape
    ``input.shape[:-1] + (k,)``, largest first; of equal values the earlier position first.

    ``sf.math.top_k([1., 5., 3., 5.], k=2)`` -> ``([5., 5.], [1, 3])``.
    Differentiable in `values` (the gradient goes to the chosen positions).

    input: int or float tensor [..., n]; returns values [..., k] of its dtype and indices [...,
    k] int32.

    >>> values, indices = sf.math.top_k([1.0, 7.0, 3.0, 5.0], k=2)
    >>> values
    sf.Tensor([7., 5.], shape=(2,), dtype=float32)
    >>> indices
    sf.Tensor([1, 3], shape=(2,), dtype=int32)
    """
    del sorted  # always sorted, largest first
    input = convert_to_tensor(input)
    if input.ndim == 0:
        raise ValueError("top_k: needs a tensor of rank >= 1, got a scalar")
    last = input.shape[-1]
    if not isinstance(k, int) or k < 0 or (last is not None and k > last):
        raise ValueError(f"top_k: k must be an int in [0, {last}] (the last dim), got {k!r}")
    values, indices = sort_p.bind(input, axis=input.ndim - 1, descending=True)[:2]
    if last is None:  # a slice would clip to a shorter row: a gather refuses it at run time
        positions = np.arange(k, dtype=np.int32)
        return gather(values, positions, axis=-1), gather(indices, positions, axis=-1)
    return values[..., :k], indices[..., :k]
