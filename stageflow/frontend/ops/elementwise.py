"""Public elementwise ops: `sf.add`, `sf.exp`, `sf.where`, `sf.cast`, ...

Each is a thin function over its primitive. While nothing but plain eager execution is
active (`context.state.eager_fast`), unary and binary ops call the NumPy kernel directly — the
same kernel `Primitive.bind` would run — which keeps the per-op cost near NumPy's own.
Everything else (tracing, tapes, conversions, errors) goes through `Primitive.bind`.
"""

from __future__ import annotations

from typing import Any

from stageflow.core import context, dtypes
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.tensor import Tensor, allocate
from stageflow.primitives import elementwise as ew
from stageflow.primitives import selection, special
from stageflow.primitives.elementwise import ElementwisePrimitive

# Python scalar types that NumPy 2 already treats as weak for these dtypes (NEP 50),
# so the fast path can hand them to the kernel unconverted.
_WEAK_OK = {
    float: frozenset(d for d in dtypes.FLOATING if d != dtypes.bfloat16),
    int: frozenset(d for d in dtypes.FLOATING + dtypes.INTEGER if d != dtypes.bfloat16),
}


def unary_op(primitive: ElementwisePrimitive, doc: str):
    kernel = primitive.kernel
    bind = primitive.bind
    allowed = primitive.operand_dtypes
    tensor_type, new, state = Tensor, allocate, context.state

    def op(x: Any) -> Tensor:
        if state.eager_fast and type(x) is tensor_type and x._value.dtype in allowed:
            tensor = new(tensor_type)
            tensor._value = kernel(x._value)
            return tensor
        return bind(convert_to_tensor(x))

    op.__name__ = op.__qualname__ = primitive.name
    op.__doc__ = doc
    return op


def binary_op(primitive: ElementwisePrimitive, doc: str):
    kernel = primitive.kernel
    bind = primitive.bind
    allowed = primitive.operand_dtypes
    tensor_type, new, state = Tensor, allocate, context.state

    def op(x: Any, y: Any) -> Tensor:
        if state.eager_fast and type(x) is tensor_type:
            a = x._value
            dtype = a.dtype
            if type(y) is tensor_type:
                b = y._value
                ok = dtype is b.dtype and dtype in allowed
            else:
                b = y
                weak = _WEAK_OK.get(type(y))
                ok = weak is not None and dtype in weak and dtype in allowed
            if ok:
                try:
                    tensor = new(tensor_type)
                    tensor._value = kernel(a, b)
                    return tensor
                except Exception:  # noqa: BLE001 - the slow path reports it properly
                    pass
        return bind(*binary_operands(x, y))

    op.__name__ = op.__qualname__ = primitive.name
    op.__doc__ = doc
    return op


negative = unary_op(ew.negative_p, "-x, elementwise.")
abs = unary_op(ew.abs_p, "|x|, elementwise.")  # noqa: A001 - the public name is sf.abs
sign = unary_op(ew.sign_p, "-1, 0 or 1 by the sign of x.")
exp = unary_op(ew.exp_p, "e**x, elementwise.")
expm1 = unary_op(ew.expm1_p, "e**x - 1, accurate for small x.")
log = unary_op(ew.log_p, "Natural logarithm, elementwise.")
log1p = unary_op(ew.log1p_p, "log(1 + x), accurate for small x.")
sqrt = unary_op(ew.sqrt_p, "Square root, elementwise.")
rsqrt = unary_op(ew.rsqrt_p, "1 / sqrt(x), elementwise.")
reciprocal = unary_op(ew.reciprocal_p, "1 / x, elementwise (TensorFlow's tf.math.reciprocal).")
sin = unary_op(ew.sin_p, "Sine, elementwise.")
cos = unary_op(ew.cos_p, "Cosine, elementwise.")
tanh = unary_op(ew.tanh_p, "Hyperbolic tangent, elementwise.")
sigmoid = unary_op(ew.logistic_p, "1 / (1 + exp(-x)), elementwise, without overflow.")
erf = unary_op(ew.erf_p, "The error function, elementwise.")
floor = unary_op(ew.floor_p, "Round towards -inf.")
ceil = unary_op(ew.ceil_p, "Round towards +inf.")
round = unary_op(ew.round_p, "Round half to even, as NumPy and TensorFlow do.")  # noqa: A001
logical_not = unary_op(ew.logical_not_p, "Elementwise not of a bool tensor.")
atan = unary_op(special.atan_p, """Inverse tangent, elementwise, in (-pi/2, pi/2).

    Float tensors of any shape; the result has the input's shape and dtype.
    ``sf.atan([0.0, 1.0])`` -> ``[0.0, 0.7853982]``.""")
asin = unary_op(special.asin_p, """Inverse sine, elementwise, in [-pi/2, pi/2]; NaN outside
    [-1, 1]. Float tensors of any shape; the result has the input's shape and dtype.
    ``sf.asin([0.0, 1.0])`` -> ``[0.0, 1.5707964]``.""")
acos = unary_op(special.acos_p, """Inverse cosine, elementwise, in [0, pi]; NaN outside
    [-1, 1]. Float tensors of any shape; the result has the input's shape and dtype.
    ``sf.acos([1.0, -1.0])`` -> ``[0.0, 3.1415927]``.""")
erfinv = unary_op(special.erfinv_p, """The inverse of `erf` on [-1, 1], elementwise: +-inf at
    +-1, NaN outside. Float tensors of any shape; the result has the input's shape and
    dtype. ``sf.math.erfinv([0.0, 0.5])`` -> ``[0.0, 0.47693628]``.""")
lgamma = unary_op(special.lgamma_p, """log |Gamma(x)|, elementwise (+inf at 0, the negative
    integers and +-inf). Float tensors of any shape; the result has the input's shape and
    dtype. ``sf.math.lgamma([1.0, 4.0])`` -> ``[0.0, 1.7917595]`` (log 3!).""")
digamma = unary_op(special.digamma_p, """The digamma function d lgamma(x) / dx, elementwise
    (NaN at the negative integers). Float tensors of any shape; the result has the input's
    shape and dtype. ``sf.math.digamma([1.0])`` -> ``[-0.5772157]`` (minus Euler's gamma).""")

add = binary_op(ew.add_p, "x + y with NumPy broadcasting.")
subtract = binary_op(ew.subtract_p, "x - y with NumPy broadcasting.")
multiply = binary_op(ew.multiply_p, "x * y with NumPy broadcasting.")
divide = binary_op(ew.divide_p, "x / y; integer tensors divide to float64 (as NumPy, TF).")
floordiv = binary_op(ew.floordiv_p, "floor(x / y), Python's `//`.")
mod = binary_op(ew.mod_p, "Remainder with the sign of y, Python's `%`.")
pow = binary_op(ew.pow_p, "x ** y.")  # noqa: A001
atan2 = binary_op(special.atan2_p, """The angle of the point (x, y) from the x axis, in
    [-pi, pi], elementwise with broadcasting: ``atan2(y, x)`` (TensorFlow's and NumPy's
    argument order), with C99's signed zeros and infinities. Float tensors of one dtype.
    ``sf.atan2([1.0, 1.0], [1.0, -1.0])`` -> ``[0.7853982, 2.3561945]``.""")
maximum = binary_op(ew.maximum_p, "Elementwise maximum (NaN propagates).")
minimum = binary_op(ew.minimum_p, "Elementwise minimum (NaN propagates).")
logical_and = binary_op(ew.logical_and_p, "Elementwise and of bool tensors.")
logical_or = binary_op(ew.logical_or_p, "Elementwise or of bool tensors.")
equal = binary_op(ew.equal_p, "x == y, elementwise, as a bool tensor.")
not_equal = binary_op(ew.not_equal_p, "x != y, elementwise, as a bool tensor.")
less = binary_op(ew.less_p, "x < y, elementwise, as a bool tensor.")
less_equal = binary_op(ew.less_equal_p, "x <= y, elementwise, as a bool tensor.")
greater = binary_op(ew.greater_p, "x > y, elementwise, as a bool tensor.")
greater_equal = binary_op(ew.greater_equal_p, "x >= y, elementwise, as a bool tensor.")
shift_right_logical = binary_op(ew.shift_right_logical_p, "x >> y on integer tensors.")


def square(x: Any) -> Tensor:
    """x * x."""
    x = convert_to_tensor(x)
    return multiply(x, x)


def where(condition: Any, x: Any = None, y: Any = None) -> Tensor:
    """Elements of `x` where `condition` is true, else of `y` (all three broadcast). With
    `condition` alone, the positions where it is true (see `sf.nonzero`), as TensorFlow's
    ``tf.where(condition)``."""
    if x is None and y is None:
        return selection.nonzero_p.bind(convert_to_tensor(condition))
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither (then it returns the "
                         "positions where the condition is true)")
    condition = convert_to_tensor(condition)
    x, y = binary_operands(x, y)
    return ew.select_p.bind(condition, x, y)


def cast(x: Any, dtype: Any) -> Tensor:
    """Convert `x` to `dtype` (floats to ints truncate towards zero, as NumPy does)."""
    x = convert_to_tensor(x)
    dtype = dtypes.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    return ew.cast_p.bind(x, dtype=dtype)


def clip_by_value(x: Any, clip_value_min: Any, clip_value_max: Any) -> Tensor:
    """`x` clipped into [clip_value_min, clip_value_max]."""
    x = convert_to_tensor(x)
    return minimum(maximum(x, clip_value_min), clip_value_max)
