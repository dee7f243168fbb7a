"""Special functions: inverse trigonometric (`atan`, `atan2`, `asin`, `acos`), `erfinv`,
`lgamma`, `digamma` and `trigamma` (digamma's derivative), with their gradients.

Each algorithm is written once, against a small arithmetic interface (`Math`), and runs
twice: on NumPy arrays as the eager kernel where NumPy has no such function, and on LLVM
values as the lowering for every target (`codegen.llvm.special`), so the compiled kernels
and the eager ones compute the same thing the same way. Only operations both can do
natively are used: + - * /, comparisons and selects, floor, fabs, copysign, sqrt, and
`log`/`exp`/`sin`/`cos` (which the lowering expands into instructions for the GPU).
Arithmetic is in float64 whatever the input type; float32 results are rounded once.

==========  ===============================================================================
function    method
==========  ===============================================================================
atan        reduction to |t| <= tan(pi/8) (t = x, (x-1)/(x+1) or -1/x, plus 0, pi/4 or
            pi/2), t + t^3 P(t^2) with P a degree-10 least-squares Chebyshev fit of the
            Taylor remainder (max relative error 2.2e-16 against NumPy, measured)
atan2       atan(min / max) of |x| and |y|, reflected into the right octant and quadrant;
            NumPy's signed zeros and infinities
asin, acos  atan2(x, sqrt((1-x)(1+x))), atan2(sqrt((1-x)(1+x)), x): exact near +-1
erfinv      Giles' single-precision approximation (2010), then three Newton steps on erf
            (erfc in the tails, where 1 - |y| is exact), Cody's erf/erfc as `sf.erf`'s
lgamma      Lanczos (g = 7, 9 terms) for x >= 1/2, the reflection formula below
digamma     shifted up to x >= 10 by psi(x) = psi(x + 1) - 1/x, then the asymptotic series
            to x^-14; psi(x) = psi(1 - x) - pi cot(pi x) below 0
trigamma    the same shifts and asymptotic series to x^-15; pi^2 / sin^2(pi x) reflection
==========  ===============================================================================
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from stageflow.core import dtypes
from stageflow.core.op_facts import Cost
from stageflow.primitives import elementwise as ew


class Math(Protocol):
    """The arithmetic the algorithms use beyond Python's operators on values and masks
    (``+ - * /``, unary ``-``, comparisons, ``&``, ``|``, ``~``)."""

    def const(self, like: Any, value: float) -> Any: ...
    def select(self, mask: Any, a: Any, b: Any) -> Any: ...
    def floor(self, x: Any) -> Any: ...
    def fabs(self, x: Any) -> Any: ...
    def copysign(self, x: Any, sign: Any) -> Any: ...
    def sqrt(self, x: Any) -> Any: ...
    def log(self, x: Any) -> Any: ...
    def exp(self, x: Any) -> Any: ...
    def sin(self, x: Any) -> Any: ...
    def cos(self, x: Any) -> Any: ...
    def isnan(self, x: Any) -> Any: ...
    def poly(self, x: Any, coefficients: tuple[float, ...]) -> Any: ...


def _c(m: Math, like: Any, value: float) -> Any:
    return m.const(like, value)


# -- atan, atan2, asin, acos -------------------------------------------------------------------

_TAN_PI_8 = 0.41421356237309503
_TAN_3PI_8 = 2.414213562373095
# (atan(t) - t) / t^3 as a polynomial in t^2 on [0, tan(pi/8)^2], highest degree first.
_ATAN = (-0.019862452297874828, 0.039789621793124653, -0.05104683219210217,
         0.05861805426853978, -0.06664929761786165, 0.0769221268012382,
         -0.09090905838823511, 0.11111111046167295, -0.14285714285052778,
         0.19999999999997362, -0.3333333333333335)
_PI_2_HI, _PI_2_LO = 1.5707963267948966, 6.123233995736766e-17
_PI_4_HI, _PI_4_LO = 0.7853981633974483, 3.061616997868383e-17


def atan(m: Math, x: Any) -> Any:
    a = m.fabs(x)
    big, mid = a > _c(m, a, _TAN_3PI_8), a > _c(m, a, _TAN_PI_8)
    one = _c(m, a, 1.0)
    t = m.select(big, -one / a, m.select(mid, (a - one) / (a + one), a))
    z = t * t
    tail = t * z * m.poly(z, _ATAN)
    zero = _c(m, a, 0.0)
    lo = m.select(big, _c(m, a, _PI_2_LO), m.select(mid, _c(m, a, _PI_4_LO), zero))
    hi = m.select(big, _c(m, a, _PI_2_HI), m.select(mid, _c(m, a, _PI_4_HI), zero))
    return m.copysign(hi + (t + (tail + lo)), x)


def atan2(m: Math, y: Any, x: Any) -> Any:
    """The angle of (x, y), as NumPy's arctan2 (C99's special cases included)."""
    ax, ay = m.fabs(x), m.fabs(y)
    steep = ay > ax
    small, large = m.select(steep, ax, ay), m.select(steep, ay, ax)
    inf = _c(m, ax, math.inf)
    both_inf = (ax == inf) & (ay == inf)
    ratio = m.select(large == _c(m, ax, 0.0), _c(m, ax, 0.0), small / large)
    ratio = m.select(both_inf, _c(m, ax, 1.0), ratio)
    angle = atan(m, ratio)
    angle = m.select(steep, (_c(m, ax, _PI_2_HI) - angle) + _c(m, ax, _PI_2_LO), angle)
    negative_x = m.copysign(_c(m, ax, 1.0), x) < _c(m, ax, 0.0)
    pi_hi, pi_lo = 2 * _PI_2_HI, 2 * _PI_2_LO
    angle = m.select(negative_x, (_c(m, ax, pi_hi) - angle) + _c(m, ax, pi_lo), angle)
    angle = m.copysign(angle, y)
    return m.select(m.isnan(x) | m.isnan(y), x + y, angle)


def asin(m: Math, x: Any) -> Any:
    one = _c(m, x, 1.0)
    return atan2(m, x, m.sqrt((one - x) * (one + x)))


def acos(m: Math, x: Any) -> Any:
    one = _c(m, x, 1.0)
    return atan2(m, m.sqrt((one - x) * (one + x)), x)


# -- erfinv --------------------------------------------------------------------------------------

_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erfc_nonnegative(m: Math, y: Any) -> Any:
    """erfc(y) for y >= 0 by Cody's forms (the constants of `sf.erf`'s kernel)."""
    small_y = _clamp(m, y, 0.0, ew._ERF_SMALL_LIMIT)
    small = _c(m, y, 1.0) - small_y * _cody(m, small_y * small_y, ew._ERF_SMALL_NUM,
                                            ew._ERF_SMALL_DEN)
    mid_y = _clamp(m, y, ew._ERF_SMALL_LIMIT, ew._ERFC_MID_LIMIT)
    mid = _cody(m, mid_y, ew._ERFC_MID_NUM, ew._ERFC_MID_DEN) * _exp_neg_square(m, mid_y)
    tail_y = _clamp(m, y, ew._ERFC_MID_LIMIT, 27.0)  # erfc(27) underflows float64
    inv_square = _c(m, y, 1.0) / (tail_y * tail_y)
    ratio = inv_square * _cody(m, inv_square, ew._ERFC_TAIL_NUM, ew._ERFC_TAIL_DEN)
    tail = (_c(m, y, ew._INV_SQRT_PI) - ratio) / tail_y * _exp_neg_square(m, tail_y)
    erfc = m.select(y <= _c(m, y, ew._ERFC_MID_LIMIT), mid, tail)
    return m.select(y <= _c(m, y, ew._ERF_SMALL_LIMIT), small, erfc)


def _cody(m: Math, t: Any, num: tuple, den: tuple) -> Any:
    xnum, xden = _c(m, t, num[-1]) * t, t
    for a, b in zip(num[:-2], den[:-1], strict=True):
        xnum = (xnum + _c(m, t, a)) * t
        xden = (xden + _c(m, t, b)) * t
    return (xnum + _c(m, t, num[-2])) / (xden + _c(m, t, den[-1]))


def _exp_neg_square(m: Math, y: Any) -> Any:
    head = m.floor(y * _c(m, y, 16.0)) * _c(m, y, 1 / 16)
    return m.exp(-(head * head)) * m.exp(-((y - head) * (y + head)))


def _clamp(m: Math, x: Any, lo: float, hi: float) -> Any:
    x = m.select(x > _c(m, x, hi), _c(m, x, hi), x)
    return m.select(x < _c(m, x, lo), _c(m, x, lo), x)


def erfinv(m: Math, y: Any) -> Any:
    """x with erf(x) = y on [-1, 1] (+-inf at +-1, NaN outside)."""
    one = _c(m, y, 1.0)
    a = m.fabs(y)
    w = -m.log((one - a) * (one + a))
    central = m.poly(w - _c(m, y, 2.5), _GILES_CENTRAL)
    tail = m.poly(m.sqrt(m.select(w < _c(m, y, 5.0), _c(m, y, 9.0), w)) - _c(m, y, 3.0),
                  _GILES_TAIL)
    x = m.select(w < _c(m, y, 5.0), central, tail) * a
    target = one - a  # exact for |y| >= 1/2 (Sterbenz)
    log_target = m.log(target)
    slope = _c(m, y, 2 * ew._INV_SQRT_PI)
    for _ in range(3):  # Newton steps, each squaring the error
        x = _clamp(m, x, 0.0, 27.0)
        density = slope * m.exp(-(x * x))
        # Near 0 on erf(x) - |y| (erf's small form is exact there); in the tails on
        # log erfc(x) - log(1 - |y|), nearly linear where erfc falls like exp(-x^2).
        small = x <= _c(m, y, ew._ERF_SMALL_LIMIT)
        erf_small = x * _cody(m, x * x, ew._ERF_SMALL_NUM, ew._ERF_SMALL_DEN)
        erfc = _erfc_nonnegative(m, x)
        step = m.select(small, (a - erf_small) / density,
                        erfc * (m.log(erfc) - log_target) / density)
        x = x + step
    x = m.select(a == one, _c(m, y, math.inf), x)
    return m.select(m.isnan(y) | (a > one), y * _c(m, y, math.nan), m.copysign(x, y))


# -- lgamma, digamma, trigamma ----------------------------------------------------------------

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.9189385332046728
# psi(x) ~ log x - 1/(2x) - sum B_2k / (2k x^2k), the sums' coefficients in w = 1/x^2,
# highest degree first; psi'(x) ~ 1/x + 1/(2x^2) + sum B_2k / x^(2k+1).
_DIGAMMA = (1 / 12, -691 / 32760, 1 / 132, -1 / 240, 1 / 252, -1 / 120, 1 / 12)
_TRIGAMMA = (7 / 6, -691 / 2730, 5 / 66, -1 / 30, 1 / 42, -1 / 30, 1 / 6)
_SHIFTS = 10  # psi(x) = psi(x + 1) - 1/x, ten times: the series starts at x >= 10


def _half_turns(m: Math, x: Any) -> tuple[Any, Any]:
    """x = n + r with n an integer and r in [-1/2, 1/2]: (r, (-1)**n), so that
    sin(pi x) = (-1)**n sin(pi r) and cos(pi x) = (-1)**n cos(pi r), exact at integers."""
    n = m.floor(x + _c(m, x, 0.5))
    half = n * _c(m, x, 0.5)
    sign = m.select(m.floor(half) == half, _c(m, x, 1.0), _c(m, x, -1.0))
    return x - n, sign


def _sin_pi(m: Math, x: Any) -> Any:
    r, sign = _half_turns(m, x)
    return sign * m.sin(r * _c(m, x, math.pi))


def _cos_pi(m: Math, x: Any) -> Any:
    r, sign = _half_turns(m, x)
    return sign * m.cos(r * _c(m, x, math.pi))


def _lanczos(m: Math, x: Any) -> Any:
    """lgamma(x) for x >= 1/2."""
    x1 = x - _c(m, x, 1.0)
    series = _c(m, x, _LANCZOS[0])
    for i, p in enumerate(_LANCZOS[1:], 1):
        series = series + _c(m, x, p) / (x1 + _c(m, x, float(i)))
    t = x1 + _c(m, x, _LANCZOS_G + 0.5)
    return (_c(m, x, _HALF_LOG_2PI) + (x1 + _c(m, x, 0.5)) * m.log(t) - t) + m.log(series)


def lgamma(m: Math, x: Any) -> Any:
    """log |Gamma(x)|: +inf at 0, the negative integers and +-inf."""
    half = _c(m, x, 0.5)
    reflect = x < half
    direct = _lanczos(m, m.select(reflect, _c(m, x, 1.0) - x, x))
    reflected = m.log(_c(m, x, math.pi) / m.fabs(_sin_pi(m, x))) - direct
    result = m.select(reflect, reflected, direct)
    return m.select(m.fabs(x) == _c(m, x, math.inf), _c(m, x, math.inf), result)


def _shifted(m: Math, x: Any, step: Any) -> tuple[Any, Any]:
    """x moved up to >= 10 and the sum of `step(x)` over the values passed."""
    total = _c(m, x, 0.0)
    ten = _c(m, x, float(_SHIFTS))
    for _ in range(_SHIFTS):
        below = x < ten
        total = total + m.select(below, step(x), _c(m, x, 0.0))
        x = m.select(below, x + _c(m, x, 1.0), x)
    return x, total


def digamma(m: Math, x: Any) -> Any:
    """psi(x) = d lgamma / dx: -inf at +0, +inf at -0, NaN at the negative integers."""
    one, zero = _c(m, x, 1.0), _c(m, x, 0.0)
    reflect = x < zero
    xr = m.select(reflect, one - x, x)
    xs, total = _shifted(m, xr, lambda v: -(one / v))
    w = one / (xs * xs)
    psi = total + (m.log(xs) - _c(m, x, 0.5) / xs - w * m.poly(w, _DIGAMMA))
    cot = _cos_pi(m, x) / _sin_pi(m, x)
    psi = m.select(reflect, psi - _c(m, x, math.pi) * cot, psi)
    pole = reflect & (m.floor(x) == x)
    psi = m.select(pole, _c(m, x, math.nan), psi)
    psi = m.select(x == zero, -(one / x), psi)  # -inf at +0, +inf at -0
    return m.select(x == _c(m, x, math.inf), x, psi)


def trigamma(m: Math, x: Any) -> Any:
    """psi'(x): +inf at 0 and the negative integers."""
    one, zero = _c(m, x, 1.0), _c(m, x, 0.0)
    reflect = x < zero
    xr = m.select(reflect, one - x, x)
    xs, total = _shifted(m, xr, lambda v: one / (v * v))
    w = one / (xs * xs)
    series = one / xs + _c(m, x, 0.5) * w + w * m.poly(w, _TRIGAMMA) / xs
    value = total + series
    s = _sin_pi(m, x)
    value = m.select(reflect, _c(m, x, math.pi ** 2) / (s * s) - value, value)
    value = m.select(reflect & (m.floor(x) == x), _c(m, x, math.inf), value)
    value = m.select(x == zero, _c(m, x, math.inf), value)
    return m.select(x == _c(m, x, math.inf), zero, value)


# -- NumPy ------------------------------------------------------------------------------------


class NumPyMath:
    """`Math` on float64 arrays."""

    const = staticmethod(lambda like, value: np.float64(value))
    select = staticmethod(np.where)
    floor = staticmethod(np.floor)
    fabs = staticmethod(np.fabs)
    copysign = staticmethod(np.copysign)
    sqrt = staticmethod(np.sqrt)
    log = staticmethod(np.log)
    exp = staticmethod(np.exp)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    isnan = staticmethod(np.isnan)

    @staticmethod
    def poly(x: Any, coefficients: tuple[float, ...]) -> Any:
        result = np.float64(coefficients[0])
        for c in coefficients[1:]:
            result = result * x + c
        return result


def numpy_kernel(algorithm: Any) -> Any:
    """The eager kernel running `algorithm` in float64 and rounding to the input's type."""

    def kernel(*arrays: Any) -> np.ndarray:
        dtype = np.result_type(*arrays)
        with np.errstate(all="ignore"):
            result = algorithm(NumPyMath, *(np.asarray(a, np.float64) for a in arrays))
        return np.asarray(result).astype(dtype)
    kernel.__name__ = algorithm.__name__
    return kernel


F = dtypes.FLOATING
T = Cost.TRANSCENDENTAL

atan_p = ew.unary("atan", np.arctan, "inverse tangent", F, T)
asin_p = ew.unary("asin", np.arcsin, "inverse sine (NaN outside [-1, 1])", F, T)
acos_p = ew.unary("acos", np.arccos, "inverse cosine (NaN outside [-1, 1])", F, T)
atan2_p = ew.binary("atan2", np.arctan2, "the angle of the point (x, y): atan2(y, x)", F,
                    cost=T)
erfinv_p = ew.unary("erfinv", numpy_kernel(erfinv), "inverse of erf on [-1, 1]", F, T)
lgamma_p = ew.unary("lgamma", numpy_kernel(lgamma), "log |Gamma(x)|", F, T)
digamma_p = ew.unary("digamma", numpy_kernel(digamma), "d lgamma(x) / dx", F, T)
trigamma_p = ew.unary("trigamma", numpy_kernel(trigamma), "d digamma(x) / dx", F, T)

# The algorithm each primitive is lowered by (`codegen.llvm.special`).
ALGORITHMS = {atan_p: atan, asin_p: asin, acos_p: acos, atan2_p: atan2, erfinv_p: erfinv,
              lgamma_p: lgamma, digamma_p: digamma, trigamma_p: trigamma}

_SQRT_PI_2 = math.sqrt(math.pi) / 2

_UNARY_VJPS = {
    atan_p: lambda g, x, out: g / (1.0 + x * x),
    asin_p: lambda g, x, out: g * ew.rsqrt_p.bind((1.0 - x) * (1.0 + x)),
    acos_p: lambda g, x, out: -g * ew.rsqrt_p.bind((1.0 - x) * (1.0 + x)),
    erfinv_p: lambda g, x, out: g * _SQRT_PI_2 * ew.exp_p.bind(out * out),
    lgamma_p: lambda g, x, out: g * digamma_p.bind(x),
    digamma_p: lambda g, x, out: g * trigamma_p.bind(x),
}


def _atan2_dy(g, y, x, out):
    return g * x / (x * x + y * y)


def _atan2_dx(g, y, x, out):
    return -g * y / (x * x + y * y)


for _primitive, _rule in _UNARY_VJPS.items():
    ew._def_unary_vjp(_primitive, _rule)
ew._def_binary_vjp(atan2_p, (_atan2_dy, _atan2_dx))


@trigamma_p.def_vjp
def _trigamma_vjp(cotangents, inputs, outputs):
    # Its derivative (tetragamma) has no primitive yet: an error, not a silent zero (the
    # second derivative of digamma once came back as None).
    raise NotImplementedError("the derivative of trigamma (the second of digamma, the third "
                              "of lgamma) is not implemented")


__all__ = ["ALGORITHMS", "Math", "NumPyMath", "acos_p", "asin_p", "atan2_p", "atan_p",
           "digamma_p", "erfinv_p", "lgamma_p", "numpy_kernel", "trigamma_p"]
