"""Elementwise primitives: unary, binary, comparisons, select and cast, with their gradients.

Binary ops broadcast their operands as NumPy does (like TensorFlow's `AddV2`), so the IR
needs no explicit broadcast for the common case; both operands must have the same dtype.

Complex tensors take the arithmetic that is defined on them (``+ - * /``, negative, exp,
log, sqrt, reciprocal, abs, ==, !=) and the primitives that take them apart and put them
together (`real`, `imag`, `conj`, `complex`); an op with no complex meaning (ordering,
max/min, rounding) refuses them in its shape rule, naming itself and the dtype. Their
gradients follow TensorFlow: the cotangent of z = x + iy is dL/dx + i dL/dy, so a rule
multiplies by the conjugate of the holomorphic derivative (`autodiff.conj`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import broadcast_dims, same_dims
from stageflow.core.op_facts import Cost, Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import broadcast_shapes
from stageflow.primitives.autodiff import (
    cast,
    conj,
    floating_only,
    unbroadcast,
    wanted,
    where,
    zeros_like,
)

NUMERIC = dtypes.FLOATING + dtypes.INTEGER
ARITHMETIC = NUMERIC + dtypes.COMPLEX  # what + - * and negation are defined on
INEXACT = dtypes.FLOATING + dtypes.COMPLEX
PARTS = (dtypes.float32, dtypes.float64)  # the floats a complex dtype is made of
ALL = dtypes.ALL
BOOL = (dtypes.bool_,)


def _check_dtype(aval: ShapedType, allowed: tuple[np.dtype, ...]) -> None:
    if aval.dtype not in allowed:
        raise TypeError(dtypes.refusal(aval.dtype, allowed))


# The facts every elementwise primitive shares: fused into kernels by the elementwise table.
ELEMENTWISE_FACTS = {"family": Family.ELEMENTWISE, "lowered_by": LoweredBy.ELEMENTWISE}


class ElementwisePrimitive(Primitive):
    """A primitive applied element by element; `operand_dtypes` are the dtypes it accepts.
    `cost` is ``Cost.TRANSCENDENTAL`` for ops computed through a polynomial or iteration."""

    def __init__(self, name: str, *, operand_dtypes: tuple[np.dtype, ...],
                 cost: Cost = Cost.ELEMENTWISE, **kwargs) -> None:
        super().__init__(name, cost=cost, **ELEMENTWISE_FACTS, **kwargs)
        self.operand_dtypes = frozenset(operand_dtypes)


def unary(name: str, kernel, summary: str, allowed=NUMERIC,
          cost: Cost = Cost.ELEMENTWISE, result_dtype=None) -> ElementwisePrimitive:
    """A unary op; `result_dtype(dtype)` gives the result dtype (default: the operand's)."""

    def shape_rule(x: ShapedType) -> ShapedType:
        _check_dtype(x, allowed)
        return x if result_dtype is None else ShapedType(x.shape, result_dtype(x.dtype))

    return ElementwisePrimitive(
        name, shape_rule=shape_rule, kernel=kernel, summary=summary, dims=same_dims,
        operand_dtypes=allowed, cost=cost,
    )


def binary(
    name: str, kernel, summary: str, allowed=NUMERIC, result_dtype=None,
    cost: Cost = Cost.ELEMENTWISE, refuses: tuple[np.dtype, ...] = (),
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
        name, shape_rule=shape_rule, kernel=kernel, summary=summary, dims=broadcast_dims,
        operand_dtypes=allowed, cost=cost, refuses=refuses,
    )


def _to_bool(_: np.dtype) -> np.dtype:
    return dtypes.bool_


def _true_divide_dtype(dtype: np.dtype) -> np.dtype:
    return dtype if dtypes.is_inexact(dtype) else dtypes.float64


def _complex(x, y):
    """x + iy of real arrays of one dtype, in the complex dtype made of it."""
    result = np.empty(np.broadcast_shapes(np.shape(x), np.shape(y)),
                      dtypes.complex_dtype(np.asarray(x).dtype))
    result.real, result.imag = x, y
    return result


def _real(x):
    return np.real(x).copy()  # a view of the parts would share the tensor's memory


def _imag(x):
    return np.imag(x).copy()


def _logistic(x):
    # With e = exp(-|x|) <= 1 nothing overflows, and e / (1 + e) keeps the relative
    # precision of tiny results for very negative x.
    e = np.exp(-np.abs(x))
    one = x.dtype.type(1)
    return np.where(x >= 0, one / (one + e), e / (one + e)).astype(x.dtype, copy=False)


# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23
# (1969), coefficients as in Netlib SPECFUN's CALERF: erf on |x| <= 0.46875, erfc(x)*e**x**2
# on (0.46875, 4] and its asymptotic form beyond. Each is a ratio of polynomials in Cody's
# Horner order, so the kernel uses only abs, mul, add, div, exp, floor, min/max and select:
# the same primitives a compiled backend lowers, which keeps this the reference it matches.
_ERF_SMALL_NUM = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
                  3.20937758913846947e03, 1.85777706184603153e-1)
_ERF_SMALL_DEN = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
                  2.84423683343917062e03)
_ERFC_MID_NUM = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
                 2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
                 2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_ERFC_MID_DEN = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
                 1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
                 3.43936767414372164e03, 1.23033935480374942e03)
_ERFC_TAIL_NUM = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
                  1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_ERFC_TAIL_DEN = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
                  6.05183413124413191e-2, 2.33520497626869185e-3)
_ERF_SMALL_LIMIT = 0.46875
_ERFC_MID_LIMIT = 4.0
_ERF_IS_ONE = 6.0  # erfc(6) ~ 2e-17 < half an ulp of 1.0: erf rounds to exactly +-1 here
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def _cody_ratio(t, num, den):
    """Cody's rational form: (((num[-1] t + num[0]) t + ...) t + num[n-1]) / (... den[n-1])."""
    xnum = num[-1] * t
    xden = t
    for a, b in zip(num[:-2], den[:-1], strict=True):
        xnum = (xnum + a) * t
        xden = (xden + b) * t
    return (xnum + num[-2]) / (xden + den[-1])


def _exp_neg_square(y):
    """exp(-y*y) without the rounding error of y*y, which exp would magnify by y*y (Cody)."""
    head = np.floor(y * 16.0) / 16.0
    return np.exp(-head * head) * np.exp(-(y - head) * (y + head))


def _erf(x):
    """erf in float64 (within a few ulps), cast back to x's dtype; NaN stays NaN.

    Every branch runs on operands clamped into its own range (so nothing overflows or warns)
    and `where` picks the branch per element, as a vectorised or compiled kernel must.
    """
    x64 = np.asarray(x, dtype=np.float64)
    y = np.abs(x64)
    small_x = np.minimum(np.maximum(x64, -_ERF_SMALL_LIMIT), _ERF_SMALL_LIMIT)
    small = small_x * _cody_ratio(small_x * small_x, _ERF_SMALL_NUM, _ERF_SMALL_DEN)
    mid_y = np.minimum(np.maximum(y, _ERF_SMALL_LIMIT), _ERFC_MID_LIMIT)
    mid = _cody_ratio(mid_y, _ERFC_MID_NUM, _ERFC_MID_DEN) * _exp_neg_square(mid_y)
    tail_y = np.minimum(np.maximum(y, _ERFC_MID_LIMIT), _ERF_IS_ONE)
    inv_square = 1.0 / (tail_y * tail_y)
    tail_ratio = inv_square * _cody_ratio(inv_square, _ERFC_TAIL_NUM, _ERFC_TAIL_DEN)
    tail = (_INV_SQRT_PI - tail_ratio) / tail_y * _exp_neg_square(tail_y)
    erfc = np.where(y <= _ERFC_MID_LIMIT, mid, tail)
    large = (0.5 - erfc) + 0.5
    result = np.where(y <= _ERF_SMALL_LIMIT, small, np.where(x64 < 0.0, -large, large))
    return result.astype(x.dtype)


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


def _relu(x):
    return np.maximum(x, x.dtype.type(0))


F = dtypes.FLOATING
T = Cost.TRANSCENDENTAL

negative_p = unary("negative", np.negative, "-x", ARITHMETIC)
abs_p = unary("abs", np.abs, "|x| (the modulus of a complex x, in its parts' dtype)",
              ARITHMETIC, result_dtype=dtypes.real_dtype)
sign_p = unary("sign", np.sign, "-1, 0 or 1 by the sign of x")
relu_p = unary("relu", _relu, "max(x, 0) (NaN propagates); its gradient is 0 at 0")
exp_p = unary("exp", np.exp, "e**x", INEXACT, T)
expm1_p = unary("expm1", np.expm1, "e**x - 1, accurate near 0", F, T)
log_p = unary("log", np.log, "natural logarithm (the principal branch for complex x)",
              INEXACT, T)
log1p_p = unary("log1p", np.log1p, "log(1 + x), accurate near 0", F, T)
log2_p = unary("log2", np.log2, "base-2 logarithm", F, T)
sqrt_p = unary("sqrt", np.sqrt, "square root (the principal one for complex x)", INEXACT)
rsqrt_p = unary("rsqrt", _rsqrt, "1 / sqrt(x)", F)
reciprocal_p = unary("reciprocal", np.reciprocal, "1 / x", INEXACT)
real_p = unary("real", _real, "the real part of complex x", dtypes.COMPLEX,
               result_dtype=dtypes.real_dtype)
imag_p = unary("imag", _imag, "the imaginary part of complex x", dtypes.COMPLEX,
               result_dtype=dtypes.real_dtype)
conj_p = unary("conj", np.conjugate, "the complex conjugate x - iy of x + iy", dtypes.COMPLEX)
sin_p = unary("sin", np.sin, "sine", F, T)
cos_p = unary("cos", np.cos, "cosine", F, T)
tanh_p = unary("tanh", np.tanh, "hyperbolic tangent", F, T)
logistic_p = unary("logistic", _logistic, "1 / (1 + e**-x)", F, T)
erf_p = unary("erf", _erf, "the error function", F, T)
floor_p = unary("floor", np.floor, "round towards -inf", F)
ceil_p = unary("ceil", np.ceil, "round towards +inf", F)
round_p = unary("round", np.rint, "round half to even", F)
logical_not_p = unary("logical_not", np.logical_not, "not x", BOOL)

add_p = binary("add", np.add, "x + y", ARITHMETIC)
subtract_p = binary("subtract", np.subtract, "x - y", ARITHMETIC)
multiply_p = binary("multiply", np.multiply, "x * y", ARITHMETIC)
divide_p = binary("divide", np.true_divide, "x / y (integers divide to float64)", ARITHMETIC,
                  result_dtype=_true_divide_dtype)
complex_p = binary("complex", _complex, "x + iy, of float32 (float64) parts: complex64 "
                   "(complex128)", PARTS, result_dtype=dtypes.complex_dtype)
floordiv_p = binary("floordiv", np.floor_divide, "floor(x / y)")
mod_p = binary("mod", np.remainder, "x - floor(x / y) * y (sign of y, as Python)")
# NumPy raises for integers to negative integer powers.
pow_p = binary("pow", np.power, "x ** y", cost=T, refuses=dtypes.SIGNED)
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


# Unsigned integers of each itemsize: a select's operands' bits, blended under a mask.
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
BLEND_MIN_SIZE = 1 << 14  # smaller selects: np.where (fewer calls, no temporaries)


def _select(cond, x, y):
    """``np.where(cond, x, y)``, bit for bit. np.where branches per element, which a mask
    of no pattern (a relu's, in its gradient) makes slow; on large operands, each of the
    condition's shape or a single value, the operands' bits are blended under a mask made
    from the condition instead, without a branch (`benchmarks.eager_activations`)."""
    if getattr(cond, "size", 0) < BLEND_MIN_SIZE:  # (first: small selects pay nothing more)
        return np.where(cond, x, y)
    x, y = np.asarray(x), np.asarray(y)
    bits = _BITS.get(x.dtype.itemsize)
    if (bits is None or x.dtype.hasobject or x.dtype != y.dtype
            or x.shape not in ((), cond.shape)
            or y.shape not in ((), cond.shape)):
        return np.where(cond, x, y)
    mask = cond.astype(bits)
    np.negative(mask, out=mask)  # all ones where cond holds
    if not y.ndim and y.view(bits) == 0:  # (a relu's gradient: a zero y adds nothing)
        # In the mask's memory: a fresh result would be one more large allocation.
        return np.bitwise_and(x.view(bits), mask, out=mask).view(x.dtype)
    blend = np.bitwise_and(x.view(bits), mask)
    np.invert(mask, out=mask)
    np.bitwise_and(mask, y.view(bits), out=mask)
    np.bitwise_or(blend, mask, out=blend)
    return blend.view(x.dtype)


select_p = Primitive(
    "select",
    shape_rule=_select_rule,
    kernel=_select,
    dims=broadcast_dims,
    summary="x where cond is true, else y (broadcasting all three)",
    cost=Cost.ELEMENTWISE,
    **ELEMENTWISE_FACTS,
)


def _cast_rule(x: ShapedType, *, dtype: np.dtype) -> ShapedType:
    return ShapedType(x.shape, dtypes.as_dtype(dtype))


def _cast(x, *, dtype):
    """NumPy's astype, and ml_dtypes' for its types (from bfloat16 or a narrow float to an
    integer, and from any float to a narrow integer, a value whose truncation does not fit
    gives 0, NaN and infinities too), but complex to real keeps the real part without
    NumPy's warning (as TensorFlow's cast does) and complex to bool tests both parts. A
    cast between two narrow dtypes, which ml_dtypes mostly lacks, goes through int8
    between narrow integers (keeping the low bits, as integer casts do), else through
    float32, which holds each of their values exactly."""
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(dtype):
        x = x != 0 if dtype == dtypes.bool_ else x.real
    if dtypes.is_narrow(x.dtype) and dtypes.is_narrow(dtype):
        integers = not dtypes.is_narrow_floating(x.dtype) and not dtypes.is_narrow_floating(dtype)
        x = x.astype(np.int8 if integers else dtypes.float32)
    return x.astype(dtype)


cast_p = Primitive("cast", shape_rule=_cast_rule, kernel=_cast, summary="convert to dtype",
                   dims=same_dims, cost=Cost.ELEMENTWISE, **ELEMENTWISE_FACTS)

# --------------------------------------------------------------------------- gradients
# A rule maps `g`, the cotangent of the result `out`, to the operands' cotangents. Binary
# rules return them at the broadcast shape; `unbroadcast` sums them back to each operand.
# Piecewise-constant ops (sign, floor, ceil, round, floordiv) give zeros, as JAX does.
# Rules of ops taking complex operands multiply by `conj` of the derivative, which is the
# derivative itself for real operands (the same ops in the same order).


def _abs_dx(g, x, out):
    """g sign(x); for complex x, g x / |x| (the direction of x), 0 at x == 0."""
    if not dtypes.is_complex(x.dtype):
        return g * sign_p.bind(x)  # 0 at x == 0
    return cast(g / where(out == 0.0, 1.0, out), x.dtype) * x


_UNARY_VJPS = {
    negative_p: lambda g, x, out: -g,
    abs_p: _abs_dx,
    sign_p: lambda g, x, out: zeros_like(x),
    # 0 at 0, as TensorFlow's, PyTorch's and JAX's relu: one select, where maximum(x, 0)
    # would split ties (four more passes over the activation in an eager backward).
    relu_p: lambda g, x, out: where(out > 0, g, 0.0),
    exp_p: lambda g, x, out: g * conj(out),
    expm1_p: lambda g, x, out: g * (out + 1.0),
    log_p: lambda g, x, out: g / conj(x),
    log1p_p: lambda g, x, out: g / (x + 1.0),
    log2_p: lambda g, x, out: g / (x * math.log(2.0)),
    sqrt_p: lambda g, x, out: g * 0.5 / conj(out),
    rsqrt_p: lambda g, x, out: g * -0.5 * out / x,
    reciprocal_p: lambda g, x, out: -g * conj(out) * conj(out),
    real_p: lambda g, x, out: cast(g, x.dtype),  # g + 0i
    imag_p: lambda g, x, out: complex_p.bind(zeros_like(g), g),  # 0 + gi
    conj_p: lambda g, x, out: conj_p.bind(g),
    sin_p: lambda g, x, out: g * cos_p.bind(x),
    cos_p: lambda g, x, out: -g * sin_p.bind(x),
    tanh_p: lambda g, x, out: g * (1.0 - out * out),
    logistic_p: lambda g, x, out: g * out * (1.0 - out),
    erf_p: lambda g, x, out: g * (2.0 * _INV_SQRT_PI) * exp_p.bind(-(x * x)),
    floor_p: lambda g, x, out: zeros_like(x),
    ceil_p: lambda g, x, out: zeros_like(x),
    round_p: lambda g, x, out: zeros_like(x),
}


def _share(g, wins, ties):
    """g where an operand of max/min wins, half of g where it ties (split evenly, as JAX).
    As masks cast and multiplied, which stay vectorised where a three-way select would
    branch per element."""
    return g * (cast_p.bind(wins, dtype=g.dtype) + 0.5 * cast_p.bind(ties, dtype=g.dtype))


def _pow_dx(g, x, y, out):
    # d/dx = y x**(y - 1), with x**1 in place of x**-1 where y == 0 (no 0 * inf at x == 0).
    return g * y * x ** where(y == 0, 1.0, y - 1.0)


def _pow_dy(g, x, y, out):
    # d/dy = out log(x), taken as 0 where x <= 0 (JAX gives 0 at x == 0, NaN below).
    positive = x > 0
    return where(positive, g * out * log_p.bind(where(positive, x, 1.0)), 0.0)


# Each operand's cotangent on its own: an eager backward pass computes only those it needs.
_BINARY_VJPS = {
    add_p: (lambda g, x, y, out: g, lambda g, x, y, out: g),
    subtract_p: (lambda g, x, y, out: g, lambda g, x, y, out: -g),
    multiply_p: (lambda g, x, y, out: g * conj(y), lambda g, x, y, out: g * conj(x)),
    divide_p: (lambda g, x, y, out: g / conj(y),
               lambda g, x, y, out: -g * conj(out) / conj(y)),
    complex_p: (lambda g, x, y, out: real_p.bind(g), lambda g, x, y, out: imag_p.bind(g)),
    floordiv_p: (lambda g, x, y, out: zeros_like(x), lambda g, x, y, out: zeros_like(y)),
    mod_p: (lambda g, x, y, out: g, lambda g, x, y, out: -g * floordiv_p.bind(x, y)),
    pow_p: (_pow_dx, _pow_dy),
    maximum_p: (lambda g, x, y, out: _share(g, x > y, x == y),
                lambda g, x, y, out: _share(g, y > x, x == y)),
    minimum_p: (lambda g, x, y, out: _share(g, x < y, x == y),
                lambda g, x, y, out: _share(g, y < x, x == y)),
}


def _def_unary_vjp(primitive: Primitive, rule) -> None:
    @primitive.def_vjp
    @floating_only
    def vjp(cotangents, inputs, outputs):
        return [rule(cotangents[0], inputs[0], outputs[0])]


def _def_binary_vjp(primitive: Primitive, rules: tuple[Callable, Callable]) -> None:
    """Set `primitive`'s gradient from one rule per operand, ``rule(g, x, y, out)``."""

    @primitive.def_vjp
    @floating_only
    def vjp(cotangents, inputs, outputs):
        (g,), (x, y), (out,) = cotangents, inputs, outputs
        return [unbroadcast(rule(g, x, y, out), operand) if want else None
                for rule, operand, want in zip(rules, inputs, wanted(inputs), strict=True)]


for _primitive, _rule in _UNARY_VJPS.items():
    _def_unary_vjp(_primitive, _rule)
for _primitive, _rules in _BINARY_VJPS.items():
    _def_binary_vjp(_primitive, _rules)


@select_p.def_vjp
@floating_only
def _select_vjp(cotangents, inputs, outputs):
    (g,), (cond, x, y) = cotangents, inputs
    return [None, unbroadcast(where(cond, g, 0.0), x), unbroadcast(where(cond, 0.0, g), y)]


@cast_p.def_vjp
@floating_only
def _cast_vjp(cotangents, inputs, outputs, *, dtype):
    # Only casts between float and complex dtypes pass a gradient (cast back: complex to
    # real keeps the real part, real to complex adds 0i); to or from int/bool: none.
    if not dtypes.is_inexact(dtype):
        return [None]
    return [cast_p.bind(cotangents[0], dtype=inputs[0].dtype)]


for _primitive in (logical_not_p, logical_and_p, logical_or_p, shift_right_logical_p, equal_p,
                   not_equal_p, less_p, less_equal_p, greater_p, greater_equal_p):
    _primitive.def_nondifferentiable()
