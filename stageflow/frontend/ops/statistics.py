"""TensorFlow's statistical reductions of `tf.math`, as composites of reductions and
elementwise ops: `reduce_variance`, `reduce_std`, `reduce_euclidean_norm`, `count_nonzero`,
`cumulative_logsumexp`, and `l2_normalize` (the `sf.nn` op) under `sf.math`."""

from __future__ import annotations

from typing import Any

from stageflow.core import dtypes
from stageflow.core.shapes import normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.math_ops import cumsum
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.normalization import l2_normalize
from stageflow.frontend.ops.reductions import reduce_max, reduce_mean, reduce_sum
from stageflow.frontend.tensor import Tensor

__all__ = ["count_nonzero", "cumulative_logsumexp", "reduce_euclidean_norm", "reduce_std",
           "reduce_variance"]

math_op(l2_normalize)  # `tf.math.l2_normalize` is `tf.nn.l2_normalize`


def _floating(op: str, x: Any) -> Tensor:
    x = convert_to_tensor(x)
    if not dtypes.is_floating(x.dtype):
        raise TypeError(f"{op}: needs a float tensor, got {x.dtype.name}{describe_location()}")
    return x


@math_op
def reduce_variance(input_tensor: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The population variance over `axis` (all axes by default): the mean of the squared
    distances from the mean (TensorFlow's ``tf.math.reduce_variance``; float only).

    >>> sf.math.reduce_variance([[1.0, 2.0], [3.0, 6.0]], axis=0)
    sf.Tensor([1., 4.], shape=(2,), dtype=float32)
    """
    x = _floating("reduce_variance", input_tensor)
    mean = reduce_mean(x, axis, keepdims=True)
    return reduce_mean(ew.square(x - mean), axis, keepdims=keepdims)


@math_op
def reduce_std(input_tensor: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The population standard deviation over `axis`: the square root of
    `reduce_variance` (TensorFlow's ``tf.math.reduce_std``; float only).

    >>> sf.math.reduce_std([[1.0, 2.0], [3.0, 6.0]], axis=0)
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """
    return ew.sqrt(reduce_variance(input_tensor, axis, keepdims))


@math_op
def reduce_euclidean_norm(input_tensor: Any, axis: Any = None,
                          keepdims: bool = False) -> Tensor:
    """``sqrt(sum(x**2))`` over `axis` (TensorFlow's ``tf.math.reduce_euclidean_norm``); an
    int tensor's norm is computed in float64 and truncated to its dtype, as TensorFlow's.

    >>> sf.math.reduce_euclidean_norm([[3.0, 4.0], [5.0, 12.0]], axis=1)
    sf.Tensor([ 5., 13.], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(input_tensor)
    if dtypes.is_floating(x.dtype):
        return ew.sqrt(reduce_sum(ew.square(x), axis, keepdims=keepdims))
    wide = ew.cast(x, dtypes.float64)
    return ew.cast(ew.sqrt(reduce_sum(ew.square(wide), axis, keepdims=keepdims)), x.dtype)


@math_op
def count_nonzero(input: Any, axis: Any = None, keepdims: bool = False,  # noqa: A002
                  dtype: Any = dtypes.int64) -> Tensor:
    """How many elements over `axis` are not zero (not False for bools), as `dtype`
    (TensorFlow's ``tf.math.count_nonzero``: int64 by default).

    >>> sf.math.count_nonzero([[0, 1], [2, 3]], axis=1)
    sf.Tensor([1, 2], shape=(2,), dtype=int64)
    """
    x = convert_to_tensor(input)
    nonzero = ew.not_equal(x, ew.cast(0, x.dtype)) if x.dtype.kind != "b" else x
    return reduce_sum(ew.cast(nonzero, dtypes.as_dtype(dtype)), axis, keepdims=keepdims)


@math_op
def cumulative_logsumexp(x: Any, axis: int = 0, exclusive: bool = False,
                         reverse: bool = False) -> Tensor:
    """``log(cumsum(exp(x)))`` along `axis` without overflow (TensorFlow's
    ``tf.math.cumulative_logsumexp``; `exclusive` and `reverse` as `cumsum`'s, an empty
    exclusive sum being ``-inf``): the exponentials are taken relative to the line's
    maximum, so a partial sum whose terms all lie far below it (beyond the dtype's exponent
    range) underflows to ``-inf``, where TensorFlow's running scan keeps it.

    >>> sf.math.cumulative_logsumexp([0.0, 1.0, 2.0])
    sf.Tensor([0.       , 1.3132617, 2.4076061], shape=(3,), dtype=float32)
    """
    x = _floating("cumulative_logsumexp", x)
    axis = normalize_axis(axis, x.ndim)
    peak = reduce_max(x, axis, keepdims=True)
    # An all -inf (or empty) line shifts by 0: subtracting -inf would give NaN.
    shift = ew.where(ew.logical_and(ew.greater(peak, float("-inf")),
                                    ew.less(peak, float("inf"))), peak, ew.cast(0, x.dtype))
    total = cumsum(ew.exp(x - shift), axis=axis, exclusive=exclusive, reverse=reverse)
    return ew.log(total) + shift
