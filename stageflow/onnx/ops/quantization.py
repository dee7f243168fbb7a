"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul
and QLinearConv, to and from the 8- and 16-bit integer types.

A quantized value q stands for (q - zero_point) * scale. Quantizing divides by the scale,
rounds half to even (`sf.round`), adds the zero point and saturates to the integer type's
range; the arithmetic after the rounding is done in float32 or wider, where every integer
of an 8- or 16-bit range and its zero point is exact. Scales and zero points are per tensor
(a scalar), per axis (a vector along `axis`) or blocked (the input's shape with `axis`
divided into blocks of `block_size`). The integer products of QLinearMatMul and QLinearConv
are exact: int32 accumulation, as ONNX specifies, and ConvInteger's float64 convolution.
The 4- and 2-bit integers quantize as the wider ones do; to the float8 and float4 types
the quotient is cast (rounded to nearest even), float8's saturating to its finite range
unless `saturate` is 0, float4 (which has no NaN to overflow into) after adding its zero
point, as onnx's reference does.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import stageflow as sf
from stageflow.core import dtypes as sfdtypes
from stageflow.core.dtypes import is_floating, is_integer
from stageflow.onnx import dtypes
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.casts import saturating_cast
from stageflow.onnx.ops.convolution import conv_integer
from stageflow.onnx.ops.shape import axis_of

# The integer types stageflow quantizes to, and those QLinearMatMul and QLinearConv take.
_BYTES = (np.dtype(np.int8), np.dtype(np.uint8))
_QUANTIZED = (*_BYTES, np.dtype(np.int16), np.dtype(np.uint16), *sfdtypes.NARROW_INTEGER)
# The float types QuantizeLinear rounds to and DequantizeLinear reads, zero points aside.
_FLOATS = (*dtypes.SATURATING, sfdtypes.float4_e2m1fn)


def as_dtype(x: Value, dtype: np.dtype) -> Value:
    """`x` as `dtype`: NumPy's conversion for a known array, sf.cast otherwise."""
    dtype = np.dtype(dtype)
    if isinstance(x, np.ndarray):
        return x.astype(dtype, copy=False)
    return x if x.dtype == dtype else sf.cast(x, dtype)


def dtype_of(x: Value) -> np.dtype:
    """The NumPy dtype of an array or a tensor."""
    return np.dtype(x.dtype)


def _reshape(x: Value, shape: tuple[int, ...]) -> Value:
    return x.reshape(shape) if isinstance(x, np.ndarray) else sf.reshape(x, shape)


def _element_type(node: Node, code: int, what: str) -> np.dtype:
    dtype = dtypes.from_onnx(code)
    if dtype is None:
        raise node.error(f"{what} is {dtypes.type_name(code)}, which stageflow has no "
                         f"tensors of")
    return np.dtype(dtype)


def _quantized(node: Node, dtype: np.dtype, floats: tuple[np.dtype, ...] = ()) -> np.dtype:
    if dtype not in _QUANTIZED + floats:
        names = ", ".join(d.name for d in _QUANTIZED + floats)
        raise node.error(f"quantizes to {dtype.name}: stageflow quantizes to {names}")
    return dtype


def _spread(node: Node, param: Value, x: Value, what: str) -> Value:
    """A scale or zero point shaped to broadcast against `x`: a scalar as it is, a vector
    along `axis`, a blocked one repeated `block_size` times along `axis`."""
    if param.ndim == 0 or (None not in param.shape and math.prod(param.shape) == 1):
        return _reshape(param, ())
    axis = axis_of(node, int(node.attr("axis", 1)), x.ndim)
    block = int(node.attr("block_size", 0))
    size = x.shape[axis]
    if block == 0:
        if param.ndim != 1 or None not in (size, param.shape[0]) and size != param.shape[0]:
            raise node.error(f"{what} of shape {tuple(param.shape)} is neither a scalar nor "
                             f"a vector of the length of axis {axis} of the input (shape "
                             f"{tuple(x.shape)}); blocked quantization needs block_size")
        return _reshape(param, tuple(-1 if a == axis else 1 for a in range(x.ndim)))
    if None in param.shape or size is None:
        raise node.error(f"blocked quantization needs static shapes, got {what} of shape "
                         f"{tuple(param.shape)} for an input of shape {tuple(x.shape)}")
    blocks = param.shape[axis]
    others_match = all(p == d for a, (p, d) in enumerate(zip(param.shape, x.shape, strict=False))
                       if a != axis and d is not None)
    if param.ndim != x.ndim or not others_match or \
            not (blocks - 1) * block < size <= blocks * block:
        raise node.error(f"{what} of shape {tuple(param.shape)} does not block the input of "
                         f"shape {tuple(x.shape)} along axis {axis} by block_size {block}")
    if isinstance(param, np.ndarray):
        return np.repeat(param, block, axis=axis).take(range(size), axis=axis)
    shape = list(param.shape)
    wide = sf.broadcast_to(sf.expand_dims(param, axis + 1),
                           (*shape[:axis + 1], block, *shape[axis + 1:]))
    merged = sf.reshape(wide, (*shape[:axis], blocks * block, *shape[axis + 1:]))
    return merged[(slice(None),) * axis + (slice(0, size),)]


def saturate(y: Value, dtype: np.dtype) -> Value:
    """Integer-valued floats `y` clipped to `dtype`'s range and converted to it."""
    info = ml_dtypes.iinfo(dtype)
    wide = dtype_of(y)
    return sf.cast(sf.clip_by_value(y, np.asarray(info.min, wide), np.asarray(info.max, wide)),
                   dtype)


def _wide(dtype: np.dtype) -> np.dtype:
    """The type the rounded quotient is offset and clipped in: float32, or float64 for
    float64 quotients."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def quantize(x: Value, scale: Value, zero_point: Value | None, dtype: np.dtype,
             precision: np.dtype) -> Value:
    """saturate(round(x / scale) + zero_point) as `dtype`, the division in `precision`."""
    quotient = sf.round(sf.divide(as_dtype(x, precision), as_dtype(scale, precision)))
    wide = _wide(precision)
    y = as_dtype(quotient, wide)
    if zero_point is not None:
        y = sf.add(y, as_dtype(zero_point, wide))
    return saturate(y, dtype)


@converts("QuantizeLinear")
def quantize_linear(node: Node, x: Value, scale: Value, zero_point: Value | None = None
                    ) -> Value:
    """The output type is the zero point's, else `output_dtype`'s, else uint8; the division
    is in `precision` where given, else in the wider of x's and the scale's types (float64
    for integer x)."""
    code = node.attr("output_dtype", 0)
    if zero_point is not None:
        dtype = dtype_of(zero_point)
        if code and _element_type(node, code, "output_dtype") != dtype:
            raise node.error(f"output_dtype {dtypes.type_name(code)} differs from the zero "
                             f"point's type {dtype.name}")
    else:
        dtype = _element_type(node, code, "output_dtype") if code else np.dtype(np.uint8)
    dtype = _quantized(node, dtype, _FLOATS)
    code = node.attr("precision", 0)
    if code:
        precision = _element_type(node, code, "precision")
    elif not is_floating(dtype_of(x)):
        precision = np.dtype(np.float64)
    else:
        precision = max(dtype_of(scale), dtype_of(x), key=lambda d: d.itemsize)
    scale = _spread(node, scale, x, "the scale")
    if zero_point is not None:
        zero_point = _spread(node, zero_point, x, "the zero point")
    if dtype in _FLOATS:
        y = sf.divide(as_dtype(x, precision), as_dtype(scale, precision))
        if dtype in dtypes.SATURATING:  # (a float8 zero point is zero)
            return saturating_cast(y, dtype) if node.attr("saturate", 1) else as_dtype(y, dtype)
        if zero_point is not None:
            y = sf.add(y, as_dtype(zero_point, dtype_of(y)))
        return as_dtype(y, dtype)
    return quantize(x, scale, zero_point, dtype, precision)


@converts("DequantizeLinear")
def dequantize_linear(node: Node, x: Value, scale: Value, zero_point: Value | None = None
                      ) -> Value:
    """(x - zero_point) * scale in float32 (float64 for a float64 scale), as the
    `output_dtype` (the scale's type by default)."""
    source = dtype_of(x)
    if not (is_integer(source) or source in _QUANTIZED or source in _FLOATS):
        raise node.error(f"dequantizes {source.name}: stageflow dequantizes integer types, "
                         f"float8 and float4")
    code = node.attr("output_dtype", 0)
    dtype = _element_type(node, code, "output_dtype") if code else dtype_of(scale)
    wide = _wide(dtype_of(scale))
    y = as_dtype(x, wide)
    if zero_point is not None and source not in _FLOATS:  # (a float's zero point is zero)
        y = sf.subtract(y, as_dtype(_spread(node, zero_point, x, "the zero point"), wide))
    y = sf.multiply(y, as_dtype(_spread(node, scale, x, "the scale"), wide))
    return as_dtype(y, dtype)


@converts("DynamicQuantizeLinear")
def dynamic_quantize_linear(node: Node, x: Value) -> list[Value]:
    """x quantized to uint8 over its range widened to hold 0: (y, scale, zero point)."""
    if dtype_of(x) != np.float32:
        raise node.error(f"quantizes float32, got {dtype_of(x).name}")
    high = sf.maximum(sf.reduce_max(x), np.float32(0))
    low = sf.minimum(sf.reduce_min(x), np.float32(0))
    span = sf.subtract(high, low)
    span = sf.where(sf.equal(span, np.float32(0)), np.float32(1), span)
    scale = sf.divide(span, np.float32(255))
    point = sf.round(sf.clip_by_value(sf.negative(sf.divide(low, scale)), np.float32(0),
                                      np.float32(255)))
    y = saturate(sf.add(sf.round(sf.divide(x, scale)), point), np.dtype(np.uint8))
    return [y, scale, sf.cast(point, np.uint8)]


def _centered(x: Value, zero_point: Value | None) -> Value:
    """x - zero_point as int32."""
    x = as_dtype(x, np.dtype(np.int32))
    return x if zero_point is None else sf.subtract(x, as_dtype(zero_point, np.dtype(np.int32)))


def _requantize(node: Node, total: Value, multiplier: Value, zero_point: Value | None,
                dtype: np.dtype) -> Value:
    """An int32 accumulation `total` times the scales' ratio `multiplier`, in float64,
    offset by the output zero point and saturated to `dtype`."""
    double = np.dtype(np.float64)
    y = sf.multiply(as_dtype(total, double), as_dtype(multiplier, double))
    if zero_point is not None:
        y = sf.add(y, as_dtype(zero_point, double))
    return saturate(sf.round(y), _quantized(node, dtype))


def _rows(param: Value, x: Value) -> Value:
    """A per-row vector of a 2-D left operand as a column."""
    if param.ndim == 1 and x.ndim == 2 and param.shape[0] not in (1, None):
        return _reshape(param, (-1, 1))
    return param


@converts("QLinearMatMul")
def qlinear_matmul(node: Node, a: Value, a_scale: Value, a_zero_point: Value | None,
                   b: Value, b_scale: Value, b_zero_point: Value | None, y_scale: Value,
                   y_zero_point: Value | None = None) -> Value:
    """(a - a_zero_point) @ (b - b_zero_point) accumulated in int32, requantized by
    a_scale * b_scale / y_scale (computed in the scales' type); scales per tensor, per row
    of a or per column of b."""
    for value in (a, b):
        if dtype_of(value) not in _BYTES:
            raise node.error(f"multiplies {dtype_of(value).name}: stageflow's QLinearMatMul "
                             f"takes int8 and uint8")
    if a_zero_point is not None:
        a_zero_point = _rows(a_zero_point, a)
    total = sf.matmul(_centered(a, a_zero_point), _centered(b, b_zero_point))
    multiplier = sf.divide(sf.multiply(_rows(a_scale, a), b_scale), y_scale)
    return _requantize(node, total, multiplier, y_zero_point,
                       dtype_of(a) if y_zero_point is None else dtype_of(y_zero_point))


@converts("QLinearConv")
def qlinear_conv(node: Node, x: Value, x_scale: Value, x_zero_point: Value | None, w: Value,
                 w_scale: Value, w_zero_point: Value | None, y_scale: Value,
                 y_zero_point: Value | None = None, bias: Value | None = None) -> Value:
    """ConvInteger of the centered operands plus the int32 bias, requantized by
    x_scale * w_scale / y_scale; w's scale and zero point per tensor or per output
    channel."""
    for value in (x, w):
        if dtype_of(value) not in _BYTES:
            raise node.error(f"convolves {dtype_of(value).name}: stageflow's QLinearConv "
                             f"takes int8 and uint8")
    total = conv_integer(node, x, w, x_zero_point, w_zero_point)
    if bias is not None:
        total = sf.add(total, _reshape(as_dtype(bias, np.dtype(np.int32)),
                                       (-1,) + (1,) * (x.ndim - 2)))
    if w_scale.ndim and None not in w_scale.shape and math.prod(w_scale.shape) > 1:
        w_scale = _reshape(w_scale, (-1,) + (1,) * (x.ndim - 2))
    multiplier = sf.divide(sf.multiply(x_scale, w_scale), y_scale)
    return _requantize(node, total, multiplier, y_zero_point,
                       dtype_of(x) if y_zero_point is None else dtype_of(y_zero_point))
