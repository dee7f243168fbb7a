"""Elementwise primitives: unary, binary, comparisons, select and cast.

Binary ops broadcast their operands as NumPy does (like TensorFlow's `AddV2`), so the IR
needs no explicit broadcast for the common case; both operands must have the same dtype.
"""

from __future__ import annotations

import math

import numpy as np

from stageflow.frontend import dtypes
from stageflow.frontend.primitives.base import Primitive, ShapedType
from stageflow.frontend.primitives.shapes import broadcast_shapes

NUMERIC = dtypes.FLOATING + dtypes.INTEGER
ALL = dtypes.ALL
BOOL = (dtypes.bool_,)


def _check_dtype(aval: ShapedType, allowed: tuple[np.dtype, ...]) -> None:
    if aval.dtype not in allowed:
        names = ", ".join(d.name for d in allowed)
        raise TypeError(f"dtype {aval.dtype.name} is not supported (expected one of {names})")


class ElementwisePrimitive(Primitive):
    """A primitive applied element by element; `operand_dtypes` are the dtypes it accepts."""

    def __init__(self, name: str, *, operand_dtypes: tuple[np.dtype, ...], **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.operand_dtypes = frozenset(operand_dtypes)


def unary(name: str, kernel, summary: str, allowed=NUMERIC) -> ElementwisePrimitive:
    def shape_rule(x: ShapedType) -> ShapedType:
        _check_dtype(x, allowed)
        return x

    return ElementwisePrimitive(
        name, shape_rule=shape_rule, kernel=kernel, summary=summary, operand_dtypes=allowed
    )


def binary(
    name: str, kernel, summary: str, allowed=NUMERIC, result_dtype=None
) -> ElementwisePrimitive:
    """A broadcasting binary op; `result_dtype(dtype)` gives the result dtype (default: same)."""

    def shape_rule(x: ShapedType, y: ShapedType) -> ShapedType:
        if x.dtype != y.dtype:
            raise TypeError(
                f"operands have different dtypes {x.dtype.name} and {y.dtype.name}; "
                "stageflow does not promote silently, use sf.cast"
            )
        _check_dtype(x, allowed)
        dtype = x.dtype if result_dtype is None else result_dtype(x.dtype)
        return ShapedType(broadcast_shapes(x.shape, y.shape), dtype)

    return ElementwisePrimitive(
        name, shape_rule=shape_rule, kernel=kernel, summary=summary, operand_dtypes=allowed
    )


def _to_bool(_: np.dtype) -> np.dtype:
    return dtypes.bool_


def _true_divide_dtype(dtype: np.dtype) -> np.dtype:
    return dtype if dtypes.is_floating(dtype) else dtypes.float64


def _logistic(x):
    # 0.5 * tanh(x / 2) + 0.5 is exact in exact arithmetic and never overflows.
    half = x.dtype.type(0.5)
    return np.tanh(x * half) * half + half


_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    return _erf_scalar(x).astype(x.dtype)


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


F = dtypes.FLOATING

negative_p = unary("negative", np.negative, "-x")
abs_p = unary("abs", np.abs, "|x|")
sign_p = unary("sign", np.sign, "-1, 0 or 1 by the sign of x")
exp_p = unary("exp", np.exp, "e**x", F)
expm1_p = unary("expm1", np.expm1, "e**x - 1, accurate near 0", F)
log_p = unary("log", np.log, "natural logarithm", F)
log1p_p = unary("log1p", np.log1p, "log(1 + x), accurate near 0", F)
sqrt_p = unary("sqrt", np.sqrt, "square root", F)
rsqrt_p = unary("rsqrt", _rsqrt, "1 / sqrt(x)", F)
sin_p = unary("sin", np.sin, "sine", F)
cos_p = unary("cos", np.cos, "cosine", F)
tanh_p = unary("tanh", np.tanh, "hyperbolic tangent", F)
logistic_p = unary("logistic", _logistic, "1 / (1 + e**-x)", F)
erf_p = unary("erf", _erf, "the error function", F)
floor_p = unary("floor", np.floor, "round towards -inf", F)
ceil_p = unary("ceil", np.ceil, "round towards +inf", F)
round_p = unary("round", np.rint, "round half to even", F)
logical_not_p = unary("logical_not", np.logical_not, "not x", BOOL)

add_p = binary("add", np.add, "x + y")
subtract_p = binary("subtract", np.subtract, "x - y")
multiply_p = binary("multiply", np.multiply, "x * y")
divide_p = binary("divide", np.true_divide, "x / y (integers divide to float64)",
                  result_dtype=_true_divide_dtype)
floordiv_p = binary("floordiv", np.floor_divide, "floor(x / y)")
mod_p = binary("mod", np.remainder, "x - floor(x / y) * y (sign of y, as Python)")
pow_p = binary("pow", np.power, "x ** y")
maximum_p = binary("maximum", np.maximum, "elementwise max (NaN propagates)")
minimum_p = binary("minimum", np.minimum, "elementwise min (NaN propagates)")
logical_and_p = binary("logical_and", np.logical_and, "x and y", BOOL)
logical_or_p = binary("logical_or", np.logical_or, "x or y", BOOL)
shift_right_logical_p = binary("shift_right_logical", np.right_shift,
                               "x >> y, shifting in zeros", dtypes.INTEGER)

equal_p = binary("equal", np.equal, "x == y", ALL, _to_bool)
not_equal_p = binary("not_equal", np.not_equal, "x != y", ALL, _to_bool)
less_p = binary("less", np.less, "x < y", NUMERIC, _to_bool)
less_equal_p = binary("less_equal", np.less_equal, "x <= y", NUMERIC, _to_bool)
greater_p = binary("greater", np.greater, "x > y", NUMERIC, _to_bool)
greater_equal_p = binary("greater_equal", np.greater_equal, "x >= y", NUMERIC, _to_bool)


def _select_rule(cond: ShapedType, x: ShapedType, y: ShapedType) -> ShapedType:
    if cond.dtype != dtypes.bool_:
        raise TypeError(f"the condition must be bool, got {cond.dtype.name}")
    if x.dtype != y.dtype:
        raise TypeError(f"branches have different dtypes {x.dtype.name} and {y.dtype.name}")
    return ShapedType(broadcast_shapes(cond.shape, x.shape, y.shape), x.dtype)


select_p = Primitive(
    "select",
    shape_rule=_select_rule,
    kernel=np.where,
    summary="x where cond is true, else y (broadcasting all three)",
)


def _cast_rule(x: ShapedType, *, dtype: np.dtype) -> ShapedType:
    return ShapedType(x.shape, dtypes.as_dtype(dtype))


def _cast(x, *, dtype):
    return np.asarray(x).astype(dtype)


cast_p = Primitive("cast", shape_rule=_cast_rule, kernel=_cast, summary="convert to dtype")
