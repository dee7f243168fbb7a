"""Elementwise ONNX ops: arithmetic, comparisons, logic, bitwise and unary math, broadcasting as
NumPy (ONNX's multidirectional broadcasting is NumPy's).

Where ONNX's integer semantics differ from stageflow's (Div truncates, Mod with ``fmod=1``
takes the dividend's sign) or stageflow has no op (the inverse hyperbolic functions, the
bitwise ops, shifts), the converter composes the ONNX meaning from sf ops.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

import stageflow as sf
from stageflow.core import dtypes
from stageflow.onnx.converters import Node, Value, converts

_BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "Add": sf.add,
    "Sub": sf.subtract,
    "Mul": sf.multiply,
    "Equal": sf.equal,
    "Less": sf.less,
    "LessOrEqual": sf.less_equal,
    "Greater": sf.greater,
    "GreaterOrEqual": sf.greater_equal,
    "And": sf.logical_and,
    "Or": sf.logical_or,
    "Xor": sf.not_equal,  # of bools: exclusive or
}


def _large(x: Value) -> np.ndarray:
    """Beyond this magnitude sqrt(x^2 +- 1) rounds to |x| (and x^2 may overflow)."""
    return like(1 / math.sqrt(ml_dtypes.finfo(x.dtype).eps), x)


def _asinh(x: Value) -> Value:
    """log1p(|x| + x^2 / (1 + sqrt(x^2 + 1))), accurate for small |x|, or log(2 |x|) for
    large |x|, with x's sign."""
    magnitude = sf.abs(x)
    large = _large(x)
    a = sf.minimum(magnitude, large)
    square = sf.multiply(a, a)
    near = sf.log1p(sf.add(a, sf.divide(square, sf.add(
        sf.sqrt(sf.add(square, like(1, x))), like(1, x)))))
    far = sf.add(sf.log(magnitude), like(math.log(2), x))
    y = sf.where(sf.greater(magnitude, large), far, near)
    return sf.where(sf.less(x, like(0, x)), sf.negative(y), y)


def _acosh(x: Value) -> Value:
    """log1p(t + sqrt(t (t + 2))) with t = x - 1, accurate near 1, or log(2 x) for large x;
    NaN below 1."""
    large = _large(x)
    t = sf.minimum(sf.subtract(x, like(1, x)), large)
    near = sf.log1p(sf.add(t, sf.sqrt(sf.multiply(t, sf.add(t, like(2, x))))))
    far = sf.add(sf.log(x), like(math.log(2), x))
    y = sf.where(sf.greater(x, large), far, near)
    return sf.where(sf.less(x, like(1, x)), like(np.nan, x), y)


def _atanh(x: Value) -> Value:
    """(log1p(x) - log1p(-x)) / 2: accurate near 0, +-inf at +-1, NaN beyond."""
    return sf.multiply(sf.subtract(sf.log1p(x), sf.log1p(sf.negative(x))), like(0.5, x))


_UNARY: dict[str, Callable[[Value], Value]] = {
    "Neg": sf.negative,
    "Abs": sf.abs,
    "Sign": sf.sign,
    "Reciprocal": sf.reciprocal,
    "Sqrt": sf.sqrt,
    "Exp": sf.exp,
    "Log": sf.log,
    "Floor": sf.floor,
    "Ceil": sf.ceil,
    "Round": sf.round,
    "Sin": sf.sin,
    "Cos": sf.cos,
    "Tan": sf.math.tan,
    "Asin": sf.asin,
    "Acos": sf.acos,
    "Atan": sf.atan,
    "Sinh": sf.math.sinh,
    "Cosh": sf.math.cosh,
    "Asinh": _asinh,
    "Acosh": _acosh,
    "Atanh": _atanh,
    "Erf": sf.erf,
    "IsNaN": sf.math.is_nan,
    "Not": sf.logical_not,
}

_VARIADIC: dict[str, Callable[[Value, Value], Value]] = {
    "Max": sf.maximum,
    "Min": sf.minimum,
    "Sum": sf.add,
    "Mean": sf.add,
}


def like(value: float | int | bool, x: Value) -> np.ndarray:
    """`value` as a scalar of `x`'s dtype (sf ops do not promote, and an `np.ndarray`
    operand does not adopt a Python scalar's type)."""
    return np.asarray(value, x.dtype)


def _integer(x: Value) -> bool:
    return dtypes.is_integer(x.dtype)


def _signed(x: Value) -> bool:
    return np.issubdtype(x.dtype, np.signedinteger)


@converts(*_BINARY)
def binary(node: Node, a: Value, b: Value) -> Value:
    return _BINARY[node.op_type](a, b)


@converts(*_UNARY)
def unary(node: Node, x: Value) -> Value:
    return _UNARY[node.op_type](x)


@converts("Identity")
def identity(node: Node, x: Value) -> Value:
    return x if isinstance(x, np.ndarray) else sf.identity(x)


@converts(*_VARIADIC)
def variadic(node: Node, *inputs: Value) -> Value:
    """Max, Min, Sum and Mean of one or more inputs, broadcast together."""
    if not inputs or any(x is None for x in inputs):
        raise node.error("takes one or more inputs, none omitted")
    result = functools.reduce(_VARIADIC[node.op_type], inputs)
    if node.op_type == "Mean":
        result = sf.divide(result, like(len(inputs), result))
    if len(inputs) == 1:
        result = sf.identity(result)
    return result


def _differ_in_sign(a: Value, b: Value) -> Value:
    """Where exactly one of `a` and `b` is negative."""
    return sf.not_equal(sf.less(a, like(0, a)), sf.less(b, like(0, b)))


@converts("Div")
def div(node: Node, a: Value, b: Value) -> Value:
    """a / b; integers divide truncating toward zero (C's division), where sf's floordiv
    floors: the floored quotient is one less wherever a remainder is left and the signs
    differ."""
    if not _integer(a):
        return sf.divide(a, b)
    quotient = sf.floordiv(a, b)
    if not _signed(a):
        return quotient
    inexact = sf.not_equal(sf.mod(a, b), like(0, a))
    return sf.where(sf.logical_and(inexact, _differ_in_sign(a, b)),
                    sf.add(quotient, like(1, quotient)), quotient)


@converts("Mod")
def mod(node: Node, a: Value, b: Value) -> Value:
    """fmod=0: the remainder with the divisor's sign (Python's, sf.mod); fmod=1: with the
    dividend's (C's fmod)."""
    fmod = node.attr("fmod", 0)
    if fmod not in (0, 1):
        raise node.error(f"fmod must be 0 or 1, got {fmod}")
    if fmod == 0 or (_integer(a) and not _signed(a)):
        return sf.mod(a, b)
    if not _integer(a):
        remainder = sf.mod(sf.abs(a), sf.abs(b))  # of magnitudes: both signs agree
        return sf.where(sf.less(a, like(0, a)), sf.negative(remainder), remainder)
    remainder = sf.mod(a, b)
    moved = sf.logical_and(sf.not_equal(remainder, like(0, a)), _differ_in_sign(a, b))
    return sf.where(moved, sf.subtract(remainder, b), remainder)


@converts("Pow")
def pow_(node: Node, base: Value, exponent: Value) -> Value:
    """base ** exponent in the base's type. ONNX lets the exponent's type differ: integers
    are raised to integers of the base's type, anything else in float64, then converted to
    the base's type (as ONNX's reference computes in NumPy's promoted type)."""
    if base.dtype == exponent.dtype:
        return sf.pow(base, exponent)
    if _integer(base) and _integer(exponent):
        return sf.pow(base, sf.cast(exponent, base.dtype))
    wide = sf.pow(sf.cast(base, sf.float64), sf.cast(exponent, sf.float64))
    return sf.cast(wide, base.dtype)


@converts("IsInf")
def is_inf(node: Node, x: Value) -> Value:
    negative = node.attr("detect_negative", 1)
    positive = node.attr("detect_positive", 1)
    if negative and positive:
        return sf.math.is_inf(x)
    if positive:
        return sf.equal(x, like(np.inf, x))
    if negative:
        return sf.equal(x, like(-np.inf, x))
    return sf.logical_and(sf.math.is_inf(x), np.asarray(False))


@converts("Clip")
def clip(node: Node, x: Value, low: Value | None = None, high: Value | None = None) -> Value:
    """max(x, low) then min(.., high): where low > high, every element is high (NumPy's
    clip and ONNX's reference)."""
    result = x
    if low is not None:
        result = sf.maximum(result, low)
    if high is not None:
        result = sf.minimum(result, high)
    return result if result is not x else identity(node, x)


@converts("Where")
def where(node: Node, condition: Value, x: Value, y: Value) -> Value:
    return sf.where(condition, x, y)


# ---------------------------------------------------------------------------- bitwise
# stageflow has no bitwise primitives: integers are taken apart into bits by floor division
# (an arithmetic shift, also for negative numbers) and put together with wrapping
# multiplication and addition, which are exact modulo 2**bits.


def _bits(x: Value) -> int:
    return np.iinfo(x.dtype).bits


def _bit(x: Value, k: int) -> Value:
    """Bit `k` of `x`'s two's complement, 0 or 1 in x's dtype."""
    if _signed(x) and k == _bits(x) - 1:
        return sf.cast(sf.less(x, like(0, x)), x.dtype)
    return sf.mod(sf.floordiv(x, like(1 << k, x)), like(2, x))


def _weight(x: Value, k: int) -> np.ndarray:
    """2**k in x's dtype, wrapped (the sign bit of a signed type weighs its minimum)."""
    if _signed(x) and k == _bits(x) - 1:
        return like(np.iinfo(x.dtype).min, x)
    return like(1 << k, x)


def _bitwise_and(a: Value, b: Value) -> Value:
    result = None
    for k in range(_bits(a)):
        term = sf.multiply(sf.multiply(_bit(a, k), _bit(b, k)), _weight(a, k))
        result = term if result is None else sf.add(result, term)
    return result


def _check_integers(node: Node, *values: Value) -> None:
    for value in values:
        if not _integer(value):
            raise node.error(f"takes integer tensors, got {value.dtype.name}")


@converts("BitwiseAnd", "BitwiseOr", "BitwiseXor")
def bitwise(node: Node, a: Value, b: Value) -> Value:
    """a | b = a + b - (a & b) and a ^ b = a + b - 2 (a & b), exact modulo 2**bits."""
    _check_integers(node, a, b)
    both = _bitwise_and(a, b)
    if node.op_type == "BitwiseAnd":
        return both
    total = sf.add(a, b)
    if node.op_type == "BitwiseXor":
        both = sf.add(both, both)
    return sf.subtract(total, both)


@converts("BitwiseNot")
def bitwise_not(node: Node, x: Value) -> Value:
    """~x = -1 - x, i.e. the type's maximum - x for unsigned types."""
    _check_integers(node, x)
    return sf.subtract(like(-1 if _signed(x) else np.iinfo(x.dtype).max, x), x)


@converts("BitShift")
def bit_shift(node: Node, x: Value, shift: Value) -> Value:
    """x << y as x * 2**y and x >> y as floor(x / 2**y) (arithmetic for signed types).
    A shift below 0 or of the width or more gives what the sign alone gives (opset 28's
    rule): 0, or -1 for a right shift of a negative x."""
    direction = node.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise node.error(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    _check_integers(node, x, shift)
    shift = sf.cast(shift, x.dtype) if shift.dtype != x.dtype else shift
    bits = _bits(x)
    # Signed powers stop below the sign bit: 2**(bits-1) is not a positive value there.
    top = bits - 1 if _signed(x) else bits
    valid = sf.logical_and(sf.greater_equal(shift, like(0, shift)),
                           sf.less(shift, like(top, shift)))
    exponent = sf.cast(sf.where(valid, shift, like(0, shift)), sf.float64)
    power = sf.cast(sf.pow(np.float64(2), exponent), x.dtype)
    zero = like(0, x)
    if direction == "RIGHT":
        fill = sf.where(sf.less(x, zero), like(-1, x), zero) if _signed(x) else zero
        return sf.where(valid, sf.floordiv(x, power), fill)
    shifted = sf.multiply(x, power)
    if _signed(x):  # x << (bits - 1): the low bit moved to the sign bit
        sign_bit = sf.equal(shift, like(bits - 1, shift))
        shifted = sf.where(sign_bit, sf.multiply(_bit(x, 0), _weight(x, bits - 1)), shifted)
        valid = sf.logical_or(valid, sign_bit)
    return sf.where(valid, shifted, zero)
