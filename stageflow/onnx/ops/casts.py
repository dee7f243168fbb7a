"""Cast, CastLike and BitCast between the element types stageflow has (`onnx.dtypes`).

ONNX's numeric conversions are NumPy's (floats to integers truncate, integers wrap, nonzero
is true) and so sf.cast's, ml_dtypes' for the narrow types (round to nearest even; what an
overflow gives depends on the format). `saturate` (on by default) first clips a value to
the finite range of the four float8 formats that have NaN (onnx's `saturate_cast`), and a
cast to float8 E8M0 (powers of two) follows its `round_mode` (up by default, as onnx
rounds scales): an exponent taken from the float32's bits and raised where the mantissa
says, then read from a table of the 256 values. Casts to strings are refused.

BitCast reinterprets bits. stageflow has no such op, so a float's bits are computed from its
value (sign, exponent through log2, mantissa, subnormals, infinities) and a float is built
from bits by the inverse arithmetic; all of it is exact, except that a NaN's sign and
payload are not observable by arithmetic: any NaN gives the bits of the positive quiet NaN,
and bits of a NaN give a NaN.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import stageflow as sf
from stageflow.core.dtypes import is_floating, is_integer
from stageflow.onnx import dtypes
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.elementwise import like

# The signed integer type of each width: the one float bits are computed in.
_SIGNED_OF_SIZE = {2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}


def _target(node: Node, code: int) -> np.dtype:
    dtype = dtypes.from_onnx(code)
    if dtype is None:
        raise node.error(f"casts to {dtypes.type_name(code)}, which stageflow has no tensors "
                         f"of")
    return dtype


def _cast(x: Value, dtype: np.dtype) -> Value:
    if x.dtype == dtype and isinstance(x, np.ndarray):
        return x
    return sf.cast(x, dtype)


_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)


def saturating_cast(x: Value, dtype: np.dtype) -> Value:
    """x clipped to the finite range of float8 `dtype` (NaN kept), then cast: an integer
    through float64, as onnx's `saturate_cast` clips it."""
    if not is_floating(x.dtype):
        x = _cast(x, np.dtype(np.float64))
    info = ml_dtypes.finfo(dtype)
    return _cast(sf.clip_by_value(x, like(float(info.min), x), like(float(info.max), x)), dtype)


def _to_e8m0(node: Node, x: Value, saturate: bool, mode: str) -> Value:
    """The power of two of float8 E8M0 `mode` ("up", "down" or "nearest") rounds float32 x
    to (its sign ignored); NaN and infinities give NaN, and with `saturate` the largest
    exponent is not raised into NaN."""
    if mode not in ("up", "down", "nearest"):
        raise node.error(f"has round_mode {mode!r}; ONNX defines up, down and nearest")
    i32 = np.dtype(np.int32)
    bits = _float_to_bits(_cast(x, np.dtype(np.float32)), i32)
    bits = sf.where(sf.less(bits, like(0, bits)), sf.subtract(bits, like(-(1 << 31), bits)),
                    bits)  # the sign bit cleared
    exponent = sf.floordiv(bits, like(1 << 23, bits))
    fraction = sf.subtract(bits, sf.multiply(exponent, like(1 << 23, bits)))
    code = exponent
    if mode != "down":
        if mode == "up":
            up = sf.greater(fraction, like(0, bits))
        else:  # the guard bit, and a bit below it or a nonzero exponent (onnx's rule)
            rest = sf.mod(fraction, like(1 << 22, bits))
            up = sf.logical_and(sf.greater_equal(fraction, like(1 << 22, bits)), sf.logical_or(
                sf.greater(rest, like(0, bits)), sf.greater(exponent, like(0, bits))))
        up = sf.logical_and(up, sf.less(exponent, like(255 - saturate, bits)))
        code = sf.add(exponent, sf.cast(up, i32))
    return sf.gather(np.arange(256, dtype=np.uint8).view(_E8M0), code)


def _convert(node: Node, x: Value, dtype: np.dtype) -> Value:
    saturate = bool(node.attr("saturate", 1))
    if dtype == _E8M0:
        return _to_e8m0(node, x, saturate, node.attr("round_mode", "up"))
    if dtype in dtypes.SATURATING and saturate:
        return saturating_cast(x, dtype)
    return _cast(x, dtype)


@converts("Cast")
def cast(node: Node, x: Value) -> Value:
    return _convert(node, x, _target(node, node.attr("to")))


@converts("CastLike")
def cast_like(node: Node, x: Value, target: Value) -> Value:
    """x converted to `target`'s element type (target's values are not read)."""
    return _convert(node, x, target.dtype)


def _layout(dtype: np.dtype) -> tuple[int, int, int]:
    """A float type's mantissa bits, exponent bits and exponent bias."""
    info = ml_dtypes.finfo(dtype)
    return info.nmant, info.nexp, (1 << (info.nexp - 1)) - 1


def _float_to_bits(x: Value, itype: np.dtype) -> Value:
    """The IEEE bits of float `x` as the signed integer type `itype` of its width."""
    nmant, nexp, bias = _layout(x.dtype)
    magnitude = sf.abs(x)
    zero = like(0, x)
    negative = sf.logical_or(sf.less(x, zero), sf.logical_and(
        sf.equal(x, zero), sf.less(sf.reciprocal(x), zero)))  # -0: 1 / -0 is -inf
    tiny = sf.less(magnitude, like(2.0 ** (1 - bias), x))  # zero or subnormal
    normal = sf.logical_and(sf.math.is_finite(x), sf.logical_not(tiny))
    safe = sf.where(normal, magnitude, like(1, x))
    two = like(2, x)
    exponent = sf.floor(sf.math.log2(safe))  # then made exact: 2**e <= safe < 2**(e + 1)
    exponent = sf.where(sf.greater(sf.pow(two, exponent), safe),
                        sf.subtract(exponent, like(1, x)), exponent)
    exponent = sf.where(sf.less_equal(sf.pow(two, sf.add(exponent, like(1, x))), safe),
                        sf.add(exponent, like(1, x)), exponent)
    fraction = sf.subtract(sf.divide(safe, sf.pow(two, exponent)), like(1, x))
    mantissa = sf.cast(sf.multiply(fraction, like(2.0 ** nmant, x)), itype)
    biased = sf.cast(sf.add(exponent, like(bias, x)), itype)
    bits = sf.add(sf.multiply(biased, np.asarray(1 << nmant, itype)), mantissa)
    small = sf.where(tiny, magnitude, zero)  # (no NaN reaches the integer cast)
    subnormal = sf.multiply(sf.multiply(small, like(2.0 ** (bias - 1), x)), like(2.0 ** nmant, x))
    bits = sf.where(tiny, sf.cast(subnormal, itype), bits)
    infinity = ((1 << nexp) - 1) << nmant
    bits = sf.where(sf.math.is_inf(x), np.asarray(infinity, itype), bits)
    bits = sf.where(sf.math.is_nan(x), np.asarray(infinity | 1 << (nmant - 1), itype), bits)
    sign = np.asarray(np.iinfo(itype).min, itype)
    return sf.where(negative, sf.add(bits, sign), bits)  # the sign bit set, wrapping


def _bits_to_float(bits: Value, ftype: np.dtype) -> Value:
    """The float of type `ftype` whose IEEE bits are `bits` (a signed integer type)."""
    nmant, nexp, bias = _layout(ftype)
    sign = like(np.iinfo(bits.dtype).min, bits)
    negative = sf.less(bits, like(0, bits))
    unsigned = sf.where(negative, sf.subtract(bits, sign), bits)
    field = sf.floordiv(unsigned, like(1 << nmant, bits))
    mantissa = sf.subtract(unsigned, sf.multiply(field, like(1 << nmant, bits)))
    one = np.asarray(1, ftype)
    fraction = sf.multiply(sf.cast(mantissa, ftype), np.asarray(2.0 ** -nmant, ftype))
    scale = sf.pow(np.asarray(2, ftype), sf.subtract(sf.cast(field, ftype),
                                                     np.asarray(bias, ftype)))
    value = sf.multiply(sf.add(one, fraction), scale)
    value = sf.where(sf.equal(field, like(0, bits)),
                     sf.multiply(fraction, np.asarray(2.0 ** (1 - bias), ftype)), value)
    special = sf.where(sf.equal(mantissa, like(0, bits)), np.asarray(np.inf, ftype),
                       np.asarray(np.nan, ftype))
    value = sf.where(sf.equal(field, like((1 << nexp) - 1, bits)), special, value)
    return sf.where(negative, sf.negative(value), value)


@converts("BitCast")
def bit_cast(node: Node, x: Value) -> Value:
    """x's bits as the type `to` of the same width."""
    target = _target(node, node.attr("to"))
    if x.dtype.itemsize != target.itemsize:
        raise node.error(f"casts {x.dtype.name} to {target.name}, of another width; BitCast "
                         f"keeps the width")
    if not all(is_floating(t) or is_integer(t) or t == np.bool_ for t in (x.dtype, target)):
        raise node.error(f"casts {x.dtype.name} to {target.name}; stageflow bit-casts "
                         f"floats, integers and bools")
    if not is_floating(x.dtype) and not is_floating(target):
        return _cast(x, target)  # integers of one width: a cast wraps, keeping the bits
    itype = _SIGNED_OF_SIZE[target.itemsize]
    bits = _float_to_bits(x, itype) if is_floating(x.dtype) else _cast(x, itype)
    return _bits_to_float(bits, target) if is_floating(target) else _cast(bits, target)
