"""TensorFlow's safe and named arithmetic of `tf.math`, as composites of elementwise ops:
`floormod`, `truediv`, `divide_no_nan`, `multiply_no_nan`, `squared_difference`, `xlogy`,
`log_sigmoid`, `polyval`, and `softplus` (the `sf.nn` op) under `sf.math`. Being composites,
they broadcast, differentiate and compile as the ops they are made of do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.ops.creation import zeros_like
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.nn import softplus
from stageflow.frontend.tensor import Tensor

__all__ = ["divide_no_nan", "floormod", "log_sigmoid", "multiply_no_nan", "polyval",
           "squared_difference", "truediv", "xlogy"]

math_op(softplus)  # `tf.math.softplus` is `tf.nn.softplus`


@math_op
def floormod(x: Any, y: Any) -> Tensor:
    """The remainder of floor division, with the sign of `y` (TensorFlow's
    ``tf.math.floormod``, the same op as ``tf.math.mod``): ``x - floor(x / y) * y``.

    >>> sf.math.floormod([-7, 7], 3)
    sf.Tensor([2, 1], shape=(2,), dtype=int32)
    """
    return ew.mod(x, y)


@math_op
def truediv(x: Any, y: Any) -> Tensor:
    """``x / y`` always as real division (TensorFlow's ``tf.math.truediv``): int operands
    are divided in floating point (int8/int16 in float32, int32/int64 in float64).

    >>> sf.math.truediv(sf.constant([1, 2]), sf.constant([2, 4]))
    sf.Tensor([0.5, 0.5], shape=(2,), dtype=float64)
    """
    return ew.divide(x, y)


def _float_operands(op: str, x: Any, y: Any) -> tuple[Tensor, Tensor]:
    x, y = binary_operands(x, y)
    if not (x.dtype.kind in "fc" or x.dtype.name == "bfloat16"):
        raise TypeError(f"{op}: needs float or complex tensors, got {x.dtype.name}"
                        f"{describe_location()}")
    return x, y


@math_op
def divide_no_nan(x: Any, y: Any) -> Tensor:
    """``x / y``, but 0 where `y` is 0 (TensorFlow's ``tf.math.divide_no_nan``): a mean
    over a count that may be empty; the gradient is 0 there too, never NaN.

    x, y: float tensors that broadcast; returns their broadcast shape and dtype.

    >>> sf.math.divide_no_nan([1.0, 2.0], [0.0, 4.0])
    sf.Tensor([0. , 0.5], shape=(2,), dtype=float32)
    """
    x, y = _float_operands("divide_no_nan", x, y)
    zero = ew.equal(y, 0)
    return ew.where(zero, zeros_like(x), x / ew.where(zero, ew.cast(1, y.dtype), y))


@math_op
def multiply_no_nan(x: Any, y: Any) -> Tensor:
    """``x * y``, but 0 where `y` is 0 even if `x` is infinite or NaN (TensorFlow's
    ``tf.math.multiply_no_nan``): a mask that also clears non-finite values.

    >>> sf.math.multiply_no_nan([float("inf"), 2.0], [0.0, 3.0])
    sf.Tensor([0., 6.], shape=(2,), dtype=float32)
    """
    x, y = _float_operands("multiply_no_nan", x, y)
    zero = ew.equal(y, 0)  # x cleared first: inf * 0 would be NaN
    return ew.where(zero, zeros_like(x), x) * y


@math_op
def squared_difference(x: Any, y: Any) -> Tensor:
    """``(x - y) ** 2`` elementwise, broadcasting (TensorFlow's
    ``tf.math.squared_difference``): the terms of a squared error.

    >>> sf.math.squared_difference([1.0, 5.0], 3.0)
    sf.Tensor([4., 4.], shape=(2,), dtype=float32)
    """
    x, y = binary_operands(x, y)
    return ew.square(x - y)


@math_op
def xlogy(x: Any, y: Any) -> Tensor:
    """``x * log(y)``, but 0 where `x` is 0, whatever `y` (TensorFlow's ``tf.math.xlogy``):
    the terms of an entropy, where ``0 * log(0)`` counts as 0.

    >>> sf.math.xlogy([0.0, 2.0], [0.0, 1.0])
    sf.Tensor([0., 0.], shape=(2,), dtype=float32)
    """
    x, y = _float_operands("xlogy", x, y)
    zero = ew.equal(x, 0)
    product = x * ew.log(ew.where(zero, ew.cast(1, y.dtype), y))
    return ew.where(zero, zeros_like(product), product)


@math_op
def log_sigmoid(x: Any) -> Tensor:
    """``log(sigmoid(x))``, computed as ``-softplus(-x)`` so that it neither underflows
    for very negative `x` nor loses precision (TensorFlow's ``tf.math.log_sigmoid``).

    >>> sf.math.log_sigmoid([0.0, -100.0])
    sf.Tensor([  -0.6931472, -100.       ], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(x)
    return -softplus(-x)


@math_op
def polyval(coeffs: Sequence[Any], x: Any) -> Tensor:
    """The polynomial ``coeffs[0] * x**(n-1) + ... + coeffs[n-1]`` at `x`, by Horner's rule
    (TensorFlow's ``tf.math.polyval``: highest power first, as NumPy's ``polyval``); no
    coefficients give zeros.

    >>> sf.math.polyval([1.0, 2.0, 3.0], sf.constant(2.0))
    sf.Tensor(11., shape=(), dtype=float32)
    """
    x = convert_to_tensor(x)
    if not isinstance(coeffs, (list, tuple)):
        raise ValueError(f"polyval: coeffs must be a list of coefficients, got "
                         f"{type(coeffs).__name__}{describe_location()}")
    if not coeffs:
        return zeros_like(x)
    total = convert_to_tensor(coeffs[0], x.dtype) + zeros_like(x)
    for coefficient in coeffs[1:]:
        total = total * x + convert_to_tensor(coefficient, x.dtype)
    return total
