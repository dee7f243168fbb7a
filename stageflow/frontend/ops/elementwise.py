"""Public elementwise ops: `sf.add`, `sf.exp`, `sf.where`, `sf.cast`, ...

Each is a thin function over its primitive, made from it by `unary_op` or `binary_op`, and
`math_op` enters the ones TensorFlow has in `tf.math` in `sf.math`. While nothing but plain
eager execution is active (`context.state.eager_fast`), unary and binary ops call the NumPy
kernel directly — the same kernel `Primitive.bind` would run — which keeps the per-op cost
near NumPy's own. Everything else (tracing, tapes, conversions, errors) goes through
`Primitive.bind`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.tensor import Tensor, allocate
from stageflow.primitives import elementwise as ew
from stageflow.primitives import selection, special
from stageflow.primitives.elementwise import ElementwisePrimitive

# Python scalar types that NumPy 2 already treats as weak for these dtypes (NEP 50),
# so the fast path can hand them to the kernel unconverted.
_WEAK_OK = {
    float: frozenset(d for d in dtypes.FLOATING + dtypes.COMPLEX if d != dtypes.bfloat16),
    int: frozenset(d for d in dtypes.FLOATING + dtypes.INTEGER + dtypes.COMPLEX
                   if d != dtypes.bfloat16),
    complex: frozenset(dtypes.COMPLEX),
}


def unary_op(primitive: ElementwisePrimitive, doc: str, name: str | None = None):
    """The public function of a unary primitive, named `name` (default: the primitive's)."""
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

    op.__name__ = op.__qualname__ = name or primitive.name
    op.__doc__ = doc
    return op


def binary_op(primitive: ElementwisePrimitive, doc: str,
              strings: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None):
    """The public function of a binary primitive, broadcasting like NumPy; `strings`, where
    given, computes it for string tensors (host-only values, never bound)."""
    kernel = primitive.kernel
    bind = primitive.bind
    allowed = primitive.operand_dtypes
    tensor_type, new, state = Tensor, allocate, context.state
    versions: dict[type, Callable[[Any, Any], Any]] = {}  # for composites (`dispatch`)

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
        if versions and (type(x) in versions or type(y) in versions):
            return versions[type(x) if type(x) in versions else type(y)](x, y)
        a, b = binary_operands(x, y)
        if strings is not None and (a.dtype.kind == "O" or b.dtype.kind == "O"):
            return _on_strings(primitive.name, strings, a, b)
        return bind(a, b)

    op._versions = versions
    op.__name__ = op.__qualname__ = primitive.name
    op.__doc__ = doc
    return op


def _on_strings(name: str, kernel: Callable[[np.ndarray, np.ndarray], np.ndarray],
                a: Tensor, b: Tensor) -> Tensor:
    """`kernel` of two string tensors' values, a bool tensor (broadcast as NumPy does)."""
    if a.dtype != b.dtype:
        raise TypeError(f"{name}: cannot compare a {dtypes.dtype_name(a.dtype)} tensor with a "
                        f"{dtypes.dtype_name(b.dtype)} one; sf.strings.to_number or "
                        f"sf.strings.as_string converts{describe_location()}")
    try:
        result = kernel(a._value, b._value)
    except ValueError as error:
        raise ValueError(f"{name}: {error}{describe_location()}") from None
    return Tensor(np.asarray(result, dtype=bool))


negative = math_op(unary_op(ew.negative_p, """-x, elementwise.

    x: int, float or complex tensor of any shape; returns a tensor of x's shape and dtype.

    >>> sf.negative([1.0, -2.0])
    sf.Tensor([-1.,  2.], shape=(2,), dtype=float32)
    """))
abs = math_op(unary_op(ew.abs_p, """|x|, elementwise; the modulus of complex numbers.

    x: int, float or complex tensor of any shape; returns a tensor of x's shape and dtype
    (float32 for complex64, float64 for complex128).

    >>> sf.abs([-1.5, 0.0, 2.0])
    sf.Tensor([1.5, 0. , 2. ], shape=(3,), dtype=float32)
    >>> sf.abs(sf.constant([-3, 4]))
    sf.Tensor([3, 4], shape=(2,), dtype=int32)
    >>> sf.abs([3 + 4j])
    sf.Tensor([5.], shape=(1,), dtype=float32)
    """))  # noqa: A001 - the public name is sf.abs
sign = math_op(unary_op(ew.sign_p, """-1, 0 or 1 by the sign of x.

    x: int or float tensor of any shape; returns a tensor of x's shape and dtype.

    >>> sf.sign([-2.0, 0.0, 3.0])
    sf.Tensor([-1.,  0.,  1.], shape=(3,), dtype=float32)
    """))
exp = math_op(unary_op(ew.exp_p, """e**x, elementwise.

    x: float or complex tensor (float16/bfloat16/float32/float64/complex64/complex128) of
    any shape; returns a tensor of x's shape and dtype.

    >>> sf.exp([0.0, 1.0])
    sf.Tensor([1.      , 2.718282], shape=(2,), dtype=float32)
    """))
expm1 = math_op(unary_op(ew.expm1_p, """e**x - 1, accurate for small x.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.math.expm1([0.0, 1e-5])
    sf.Tensor([0.000000e+00, 1.000005e-05], shape=(2,), dtype=float32)
    """))
log = math_op(unary_op(ew.log_p, """Natural logarithm, elementwise.

    x: float or complex tensor (float16/bfloat16/float32/float64/complex64/complex128) of
    any shape; returns a tensor of x's shape and dtype. log(0) is -inf and log of a
    negative number NaN (of a complex one, the principal branch: imaginary part in
    (-pi, pi]).

    >>> sf.math.log([1.0, 10.0])
    sf.Tensor([0.       , 2.3025851], shape=(2,), dtype=float32)
    """))
log1p = math_op(unary_op(ew.log1p_p, """log(1 + x), accurate for small x.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.math.log1p([0.0, 1e-5])
    sf.Tensor([0.00000e+00, 9.99995e-06], shape=(2,), dtype=float32)
    """))
log2 = math_op(unary_op(ew.log2_p, """Base-2 logarithm, elementwise (NumPy's np.log2).

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype. A power of two gives its exponent exactly; log2(0) is -inf and log2 of
    a negative number NaN.

    >>> sf.math.log2([1.0, 8.0, 0.5, 10.0])
    sf.Tensor([ 0.      ,  3.      , -1.      ,  3.321928], shape=(4,), dtype=float32)
    """))
sqrt = math_op(unary_op(ew.sqrt_p, """Square root, elementwise.

    x: float or complex tensor (float16/bfloat16/float32/float64/complex64/complex128) of
    any shape; returns a tensor of x's shape and dtype.

    >>> sf.sqrt([4.0, 2.0])
    sf.Tensor([2.       , 1.4142135], shape=(2,), dtype=float32)
    """))
rsqrt = math_op(unary_op(ew.rsqrt_p, """1 / sqrt(x), elementwise.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.math.rsqrt([4.0, 0.25])
    sf.Tensor([0.5, 2. ], shape=(2,), dtype=float32)
    """))
reciprocal = math_op(unary_op(ew.reciprocal_p, """1 / x, elementwise (tf.math.reciprocal).

    x: float or complex tensor (float16/bfloat16/float32/float64/complex64/complex128) of
    any shape; returns a tensor of x's shape and dtype.

    >>> sf.math.reciprocal([2.0, -4.0])
    sf.Tensor([ 0.5 , -0.25], shape=(2,), dtype=float32)
    """))
sin = math_op(unary_op(ew.sin_p, """Sine, elementwise.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.sin([0.0, 1.5707964])
    sf.Tensor([0., 1.], shape=(2,), dtype=float32)
    """))
cos = math_op(unary_op(ew.cos_p, """Cosine, elementwise.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.cos([0.0, 3.1415927])
    sf.Tensor([ 1., -1.], shape=(2,), dtype=float32)
    """))
tanh = math_op(unary_op(ew.tanh_p, """Hyperbolic tangent, elementwise.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.tanh([-1.0, 0.0, 1.0])
    sf.Tensor([-0.7615942,  0.       ,  0.7615942], shape=(3,), dtype=float32)
    """))
sigmoid = math_op(unary_op(ew.logistic_p, """1 / (1 + exp(-x)), elementwise, without overflow.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.sigmoid([-100.0, 0.0, 2.0])
    sf.Tensor([3.78351e-44, 5.00000e-01, 8.80797e-01], shape=(3,), dtype=float32)
    """, name="sigmoid"))
erf = math_op(unary_op(ew.erf_p, """The error function, elementwise.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.math.erf([0.0, 1.0])
    sf.Tensor([0.       , 0.8427008], shape=(2,), dtype=float32)
    """))
floor = math_op(unary_op(ew.floor_p, """Round towards -inf.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.floor([-1.5, 1.5])
    sf.Tensor([-2.,  1.], shape=(2,), dtype=float32)
    """))
ceil = math_op(unary_op(ew.ceil_p, """Round towards +inf.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.ceil([-1.5, 1.5])
    sf.Tensor([-1.,  2.], shape=(2,), dtype=float32)
    """))
round = math_op(unary_op(ew.round_p, """Round half to even, as NumPy and TensorFlow do.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.round([0.5, 1.5, 2.5, -0.7])
    sf.Tensor([ 0.,  2.,  2., -1.], shape=(4,), dtype=float32)
    """))  # noqa: A001
logical_not = math_op(unary_op(ew.logical_not_p, """Elementwise not of a bool tensor.

    x: bool tensor of any shape; returns a bool tensor of its shape.

    >>> sf.math.logical_not([True, False])
    sf.Tensor([False,  True], shape=(2,), dtype=bool)
    """))
atan = math_op(unary_op(special.atan_p, """Inverse tangent, elementwise, in (-pi/2, pi/2).

    Float tensors of any shape; the result has the input's shape and dtype.
    ``sf.atan([0.0, 1.0])`` -> ``[0.0, 0.7853982]``.

    >>> sf.math.atan([0.0, 1.0])
    sf.Tensor([0.       , 0.7853982], shape=(2,), dtype=float32)
    """))
asin = math_op(unary_op(special.asin_p, """Inverse sine, elementwise, in [-pi/2, pi/2]; NaN outside
    [-1, 1]. Float tensors of any shape; the result has the input's shape and dtype.
    ``sf.asin([0.0, 1.0])`` -> ``[0.0, 1.5707964]``.

    >>> sf.math.asin([0.0, 1.0])
    sf.Tensor([0.       , 1.5707964], shape=(2,), dtype=float32)
    """))
acos = math_op(unary_op(special.acos_p, """Inverse cosine, elementwise, in [0, pi]; NaN outside
    [-1, 1]. Float tensors of any shape; the result has the input's shape and dtype.
    ``sf.acos([1.0, -1.0])`` -> ``[0.0, 3.1415927]``.

    >>> sf.math.acos([1.0, -1.0])
    sf.Tensor([0.       , 3.1415927], shape=(2,), dtype=float32)
    """))
erfinv = math_op(unary_op(special.erfinv_p, """The inverse of `erf` on [-1, 1], elementwise:
    +-inf at +-1, NaN outside. Float tensors of any shape; the result has the input's shape
    and dtype. ``sf.math.erfinv([0.0, 0.5])`` -> ``[0.0, 0.47693628]``.

    >>> sf.math.erfinv([0.0, 0.5])
    sf.Tensor([0.        , 0.47693628], shape=(2,), dtype=float32)
    """))
lgamma = math_op(unary_op(special.lgamma_p, """log |Gamma(x)|, elementwise (+inf at 0, the negative
    integers and +-inf). Float tensors of any shape; the result has the input's shape and
    dtype. ``sf.math.lgamma([1.0, 4.0])`` -> ``[0.0, 1.7917595]`` (log 3!).

    >>> sf.math.lgamma([1.0, 4.0])
    sf.Tensor([0.       , 1.7917595], shape=(2,), dtype=float32)
    """))
digamma = math_op(unary_op(special.digamma_p, """The digamma function d lgamma(x) / dx, elementwise
    (NaN at the negative integers). Float tensors of any shape; the result has the input's
    shape and dtype. ``sf.math.digamma([1.0])`` -> ``[-0.5772157]`` (minus Euler's gamma).

    >>> sf.math.digamma([1.0])
    sf.Tensor([-0.5772157], shape=(1,), dtype=float32)
    """))

add = math_op(binary_op(ew.add_p, """x + y with NumPy broadcasting.

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype.

    >>> sf.add([1.0, 2.0], [10.0, 20.0])
    sf.Tensor([11., 22.], shape=(2,), dtype=float32)
    >>> sf.add(sf.ones((2, 2)), [1.0, 2.0])
    sf.Tensor([[2., 3.],
               [2., 3.]], shape=(2, 2), dtype=float32)
    """))
subtract = math_op(binary_op(ew.subtract_p, """x - y with NumPy broadcasting.

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype.

    >>> sf.subtract([5.0, 7.0], 2.0)
    sf.Tensor([3., 5.], shape=(2,), dtype=float32)
    """))
multiply = math_op(binary_op(ew.multiply_p, """x * y with NumPy broadcasting.

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype.

    >>> sf.multiply([1.0, 2.0], [[1.0], [10.0]])
    sf.Tensor([[ 1.,  2.],
               [10., 20.]], shape=(2, 2), dtype=float32)
    """))
divide = math_op(binary_op(ew.divide_p, """x / y; integer tensors divide to float64 (as NumPy, TF).

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype (float64 for integers).

    >>> sf.divide([1.0, 3.0], 2.0)
    sf.Tensor([0.5, 1.5], shape=(2,), dtype=float32)
    >>> sf.divide(sf.constant([1, 3]), 2)
    sf.Tensor([0.5, 1.5], shape=(2,), dtype=float64)
    """))
floordiv = math_op(binary_op(ew.floordiv_p, """floor(x / y), Python's `//`.

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype.

    >>> sf.math.floordiv(sf.constant([7, -7]), 2)
    sf.Tensor([ 3, -4], shape=(2,), dtype=int32)
    """))
mod = math_op(binary_op(ew.mod_p, """Remainder with the sign of y, Python's `%`.

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype.

    >>> sf.math.mod(sf.constant([7, -7]), 3)
    sf.Tensor([1, 2], shape=(2,), dtype=int32)
    """))
pow = math_op(binary_op(ew.pow_p, """x ** y.

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype.

    >>> sf.pow([2.0, 3.0], 2.0)
    sf.Tensor([4., 9.], shape=(2,), dtype=float32)
    """))  # noqa: A001
atan2 = math_op(binary_op(special.atan2_p, """The angle of the point (x, y) from the x axis, in
    [-pi, pi], elementwise with broadcasting: ``atan2(y, x)`` (TensorFlow's and NumPy's
    argument order), with C99's signed zeros and infinities. Float tensors of one dtype.
    ``sf.atan2([1.0, 1.0], [1.0, -1.0])`` -> ``[0.7853982, 2.3561945]``.

    >>> sf.math.atan2([1.0, 1.0], [1.0, -1.0])
    sf.Tensor([0.785398..., 2.356194...], shape=(2,), dtype=float32)
    """))
maximum = math_op(binary_op(ew.maximum_p, """Elementwise maximum (NaN propagates).

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype.

    >>> sf.maximum([1.0, 5.0], 3.0)
    sf.Tensor([3., 5.], shape=(2,), dtype=float32)
    """))
minimum = math_op(binary_op(ew.minimum_p, """Elementwise minimum (NaN propagates).

    x, y: tensors of one numeric dtype (or Python numbers, which take the tensor's dtype) whose
    shapes broadcast; returns the broadcast shape in that dtype.

    >>> sf.minimum([1.0, 5.0], 3.0)
    sf.Tensor([1., 3.], shape=(2,), dtype=float32)
    """))
logical_and = math_op(binary_op(ew.logical_and_p, """Elementwise and of bool tensors.

    x, y: bool tensors whose shapes broadcast; returns a bool tensor of the broadcast shape.

    >>> sf.math.logical_and([True, True], [True, False])
    sf.Tensor([ True, False], shape=(2,), dtype=bool)
    """))
logical_or = math_op(binary_op(ew.logical_or_p, """Elementwise or of bool tensors.

    x, y: bool tensors whose shapes broadcast; returns a bool tensor of the broadcast shape.

    >>> sf.math.logical_or([True, False], [False, False])
    sf.Tensor([ True, False], shape=(2,), dtype=bool)
    """))
equal = math_op(binary_op(ew.equal_p, """x == y, elementwise, as a bool tensor.

    x, y: tensors of one dtype (or Python numbers) whose shapes broadcast; returns a bool tensor
    of the broadcast shape.

    >>> sf.equal([1, 2, 3], 2)
    sf.Tensor([False,  True, False], shape=(3,), dtype=bool)
    >>> sf.equal(["a", "b"], "b")
    sf.Tensor([False,  True], shape=(2,), dtype=bool)
    """, strings=np.equal))
not_equal = math_op(binary_op(ew.not_equal_p, """x != y, elementwise, as a bool tensor.

    x, y: tensors of one dtype (or Python numbers) whose shapes broadcast; returns a bool tensor
    of the broadcast shape.

    >>> sf.not_equal([1, 2, 3], 2)
    sf.Tensor([ True, False,  True], shape=(3,), dtype=bool)
    """, strings=np.not_equal))
less = math_op(binary_op(ew.less_p, """x < y, elementwise, as a bool tensor.

    x, y: tensors of one dtype (or Python numbers) whose shapes broadcast; returns a bool tensor
    of the broadcast shape.

    >>> sf.less([1, 2, 3], 2)
    sf.Tensor([ True, False, False], shape=(3,), dtype=bool)
    """))
less_equal = math_op(binary_op(ew.less_equal_p, """x <= y, elementwise, as a bool tensor.

    x, y: tensors of one dtype (or Python numbers) whose shapes broadcast; returns a bool tensor
    of the broadcast shape.

    >>> sf.less_equal([1, 2, 3], 2)
    sf.Tensor([ True,  True, False], shape=(3,), dtype=bool)
    """))
greater = math_op(binary_op(ew.greater_p, """x > y, elementwise, as a bool tensor.

    x, y: tensors of one dtype (or Python numbers) whose shapes broadcast; returns a bool tensor
    of the broadcast shape.

    >>> sf.greater([1, 2, 3], 2)
    sf.Tensor([False, False,  True], shape=(3,), dtype=bool)
    """))
greater_equal = math_op(binary_op(ew.greater_equal_p, """x >= y, elementwise, as a bool tensor.

    x, y: tensors of one dtype (or Python numbers) whose shapes broadcast; returns a bool tensor
    of the broadcast shape.

    >>> sf.greater_equal([1, 2, 3], 2)
    sf.Tensor([False,  True,  True], shape=(3,), dtype=bool)
    """))
shift_right_logical = binary_op(ew.shift_right_logical_p, "x >> y on integer tensors.")


@math_op
def square(x: Any) -> Tensor:
    """x * x.

    x: int or float tensor of any shape; returns a tensor of x's shape and dtype.

    >>> sf.square([2.0, -3.0])
    sf.Tensor([4., 9.], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(x)
    return multiply(x, x)


def where(condition: Any, x: Any = None, y: Any = None) -> Tensor:
    """Elements of `x` where `condition` is true, else of `y` (all three broadcast). With
    `condition` alone, the positions where it is true (see `sf.nonzero`), as TensorFlow's
    ``tf.where(condition)``.

    >>> sf.where([True, False, True], [1, 2, 3], [10, 20, 30])
    sf.Tensor([ 1, 20,  3], shape=(3,), dtype=int32)
    >>> sf.where([[True, False], [False, True]])
    sf.Tensor([[0, 0],
               [1, 1]], shape=(2, 2), dtype=int64)
    """
    if x is None and y is None:
        return selection.nonzero_p.bind(convert_to_tensor(condition))
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither (then it returns the "
                         "positions where the condition is true)")
    condition = convert_to_tensor(condition)
    x, y = binary_operands(x, y)
    return ew.select_p.bind(condition, x, y)


def cast(x: Any, dtype: Any) -> Tensor:
    """Convert `x` to `dtype` (floats to ints truncate towards zero, as NumPy does; complex
    to real keeps the real part, as TensorFlow does, and real to complex adds 0i).

    x: tensor of any shape and dtype; returns x's shape in `dtype`.

    >>> sf.cast([1.7, -1.7], sf.int32)
    sf.Tensor([ 1, -1], shape=(2,), dtype=int32)
    >>> sf.cast([0, 2], sf.bool)
    sf.Tensor([False,  True], shape=(2,), dtype=bool)
    """
    x = convert_to_tensor(x)
    dtype = dtypes.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    return ew.cast_p.bind(x, dtype=dtype)


def clip_by_value(x: Any, clip_value_min: Any, clip_value_max: Any) -> Tensor:
    """`x` clipped into [clip_value_min, clip_value_max].

    x: int or float tensor; the bounds broadcast against it; returns x's shape and dtype.

    >>> sf.clip_by_value([-2.0, 0.5, 3.0], 0.0, 1.0)
    sf.Tensor([0. , 0.5, 1. ], shape=(3,), dtype=float32)
    """
    x = convert_to_tensor(x)
    return minimum(maximum(x, clip_value_min), clip_value_max)
