"""Transcendental functions built from plain instructions, for every target.

Why not always LLVM's intrinsics: ``llvm.exp``/``llvm.tanh``/``llvm.sin`` become libm calls
on the CPU, one element at a time (nothing vectorises them without a vector math library),
and the NVPTX backend cannot lower them at all (LLVM aborts the process: "no libcall
available for fexp", "Cannot select fsin"). The expansions below use only fma, selects,
integer bit operations, ``llvm.roundeven``/``floor``/``fabs``/``copysign``/``sqrt`` and
division, which both backends lower natively and the loop vectoriser handles.

A target may still prefer an intrinsic (`Emitter.libm`): the CPU target calls libm for
``sin``, ``cos`` and float64 ``pow``, whose exact range reduction and special cases the
expansions only approximate (see each function); a float32 ``pow`` is expanded there too,
its float64 arithmetic exact enough for a float32 result. Accuracy of the expansions (measured
against NumPy in tests/codegen/test_codegen.py): a few ulps for float32, far below 1e-12
relative for float64.

============  ========================================================================
function      method
============  ========================================================================
exp           n = round(x / ln 2), r = x - n ln 2 (two-part ln 2), polynomial for e**r
              (Cephes expf for float32, Taylor to degree 13 for float64), times 2**n
              built from exponent bits in two steps (so subnormal results round once)
expm1         Taylor polynomial for |x| < ln(2)/2, else exp(x) - 1
tanh          float32: x P(x^2) / Q(x^2), a (9, 8) odd rational minimax fit on |x| <= 9.02
              (clamped; tanh is +-1 in float32 beyond), result clamped to [-1, 1]: one
              division and no exp, half the work of Cephes tanhf, ~5 ulps;
              float64: t = expm1(2|x|), t / (t + 2), sign copied from x
log           x = m 2**e, m in [sqrt(1/2), sqrt 2): log m = 2 atanh((m-1)/(m+1)) as an odd
              series, plus e ln 2 (two-part); subnormals scaled first
log2          the same m and e: e + log(m) / ln 2, exact at powers of two
log1p         u = 1 + x: x where u == 1, else log(u) * x / (u - 1) (Goldberg)
logistic      exactly NumPy's kernel: e = exp(-|x|), 1/(1+e) or e/(1+e)
erf           float32: x P(x^2) / Q(x^2), a (13, 8) odd rational fit on |x| <= 4 (clamped;
              erf is +-1 in float32 beyond), result clamped to [-1, 1], ~7 ulps;
              float64: exactly NumPy's kernel (Cody's rational forms)
sin, cos      in float64: quadrant from round(x 2/pi), three-part pi/2 reduction with fma
              (accurate while |x| < 2**30 or so), Taylor polynomials on [-pi/4, pi/4]
pow           in float64: exp(y log|x|) with C99's special cases (signs, zeros, infinities,
              negative bases with integer exponents); a constant float32 exponent of
              whole quarters by square roots and products
============  ========================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, F64, Emitter
from stageflow.core.primitive import Primitive
from stageflow.primitives import elementwise as reference

MathFunction = Callable[[Emitter, ir.Value], ir.Value]

# The expansions that lower an elementwise primitive's float operands, by the primitive:
# the lowering table (`kernels.rules`) takes every one, so such an expansion is written
# here, marked with its primitive (`lowers`), and named nowhere else.
LOWERINGS: dict[Primitive, MathFunction] = {}


def lowers(primitive: Primitive) -> Callable[[MathFunction], MathFunction]:
    """Decorator: the function is the lowering of `primitive` on float operands."""

    def register(function: MathFunction) -> MathFunction:
        LOWERINGS[primitive] = function
        return function

    return register


# -- exp ------------------------------------------------------------------------------------

# Cephes expf's minimax polynomial for e**r on |r| <= ln(2)/2, highest degree first.
_EXP_F32 = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
            1.6666665459e-1, 5.0000001201e-1)
_EXP_F64 = tuple(1 / math.factorial(k) for k in range(13, 1, -1))
_LN2_HI = {F32: 0.693359375, F64: 6.93147180369123816490e-01}
_LN2_LO = {F32: -2.12194440e-4, F64: 1.90821492927058770002e-10}
# Beyond these, exp is 0 or inf; clamping keeps 2**n's exponent arithmetic in range.
_EXP_RANGE = {F32: (-104.0, 89.0), F64: (-746.0, 710.0)}
_FORMAT = {F32: (23, 127), F64: (52, 1023)}  # mantissa bits, exponent bias


def _power_of_two(e: Emitter, n: ir.Value, ty: ir.Type) -> ir.Value:
    """2**n for an integer n in the normal range of `ty`, from its exponent bits."""
    mantissa, bias = _FORMAT[ty]
    biased = e.b.add(n, e.like(n, bias))
    return e.from_bits(e.b.shl(biased, e.like(n, mantissa)), ty)


def _round_to_integer(e: Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(round(x) as float, as integer) for |x| < 2**22, by adding 1.5 * 2**mantissa: the
    sum's low bits are the integer. No fptosi, so a NaN gives NaN and an arbitrary integer
    instead of LLVM's poison."""
    mantissa, _ = _FORMAT[x.type]
    magic = e.like(x, 1.5 * 2.0**mantissa)
    shifted = e.b.fadd(x, magic)
    integer = e.b.sub(e.bits(shifted), e.bits(magic))
    return e.b.fsub(shifted, magic), integer


def _exp_core(e: Emitter, x: ir.Value, full_range: bool) -> ir.Value:
    """e**x for finite x in [lo, hi] (`full_range`: all of it, subnormal results rounded
    once; else only where 2**n is a normal number). NaN gives NaN."""
    b, ty = e.b, x.type
    n, ni = _round_to_integer(e, b.fmul(x, e.like(x, 1 / math.log(2))))
    minus_n = b.fneg(n)
    r = e.fma(minus_n, e.like(x, _LN2_LO[ty]), e.fma(minus_n, e.like(x, _LN2_HI[ty]), x))
    p = e.poly(r, _EXP_F32 if ty == F32 else _EXP_F64)
    y = b.fadd(e.fma(p, b.fmul(r, r), r), e.like(x, 1.0))
    if not full_range:
        return b.fmul(y, _power_of_two(e, ni, ty))
    half = b.ashr(ni, e.like(ni, 1))
    return b.fmul(b.fmul(y, _power_of_two(e, half, ty)),
                  _power_of_two(e, b.sub(ni, half), ty))


@lowers(reference.exp_p)
def exp(e: Emitter, x: ir.Value) -> ir.Value:
    if "exp" in e.libm:
        return e.call("exp", x)
    lo, hi = _EXP_RANGE[x.type]
    return _exp_core(e, e.clamp(x, lo, hi), full_range=True)


_EXPM1_SMALL = {F32: tuple(1 / math.factorial(k) for k in range(8, 1, -1)),
                F64: tuple(1 / math.factorial(k) for k in range(14, 1, -1))}


@lowers(reference.expm1_p)
def expm1(e: Emitter, x: ir.Value) -> ir.Value:
    if "expm1" in e.libm:
        return _libm_call(e, "expm1", x)
    b = e.b
    small = e.fma(e.poly(x, _EXPM1_SMALL[x.type]), b.fmul(x, x), x)
    large = b.fsub(exp(e, x), e.like(x, 1.0))
    is_small = b.fcmp_ordered("<", e.call("fabs", x), e.like(x, math.log(2) / 2))
    return e.select(is_small, small, large)


# float32 tanh(x) = x P(x^2) / Q(x^2) for |x| <= 9.02, highest degree first: a minimax fit of
# the relative error made for this module (float64 least squares, refined by Lawson's
# reweighting towards equal ripple, 0.4 ulp), rounded to float32. P(0) = Q(0) = 1, so tiny x
# and -0.0 come back exactly. Past 13 ln 2 = 9.011 tanh rounds to +-1 in float32.
_TANH_F32_P = (1.338428e-08, 2.0635815e-05, 0.0034974571, 0.13382687, 1.0)
_TANH_F32_Q = (7.7902445e-07, 0.00032885166, 0.025884358, 0.46716008, 1.0)
_TANH_F32_LIMIT = 9.02


@lowers(reference.tanh_p)
def tanh(e: Emitter, x: ir.Value) -> ir.Value:
    if "tanh" in e.libm:
        return e.call("tanh", x)
    b = e.b
    if x.type == F32:
        # One rational, no exp and no second formula to select from: about half the
        # instructions of Cephes tanhf's polynomial-or-exp, at ~5 ulps instead of ~1.3.
        # Clamping the argument keeps P and Q where the fit holds and maps infinities to the
        # limit, whose result rounds to +-1; clamping the result keeps |tanh| <= 1, which
        # the roundings of P, Q and the division (up to ~5 ulps) would otherwise exceed
        # just below the limit. Both clamps let NaN through.
        x = e.clamp(x, -_TANH_F32_LIMIT, _TANH_F32_LIMIT)
        s = b.fmul(x, x)
        ratio = b.fdiv(b.fmul(x, e.poly(s, _TANH_F32_P)), e.poly(s, _TANH_F32_Q))
        return e.clamp(ratio, -1.0, 1.0)
    # float64: t = expm1(2|x|), t / (t + 2); tanh rounds to 1 before |x| = 20.
    ax = e.clamp(e.call("fabs", x), 0.0, 20.0)
    t = expm1(e, b.fadd(ax, ax))
    return e.call("copysign", b.fdiv(t, b.fadd(t, e.like(x, 2.0))), x)


@lowers(reference.logistic_p)
def logistic(e: Emitter, x: ir.Value) -> ir.Value:
    """NumPy's `_logistic`: nothing overflows, tiny results keep their relative precision."""
    b = e.b
    z = exp(e, b.fneg(e.call("fabs", x)))
    one = e.like(x, 1.0)
    denominator = b.fadd(one, z)
    positive = b.fcmp_ordered(">=", x, e.like(x, 0.0))
    return e.select(positive, b.fdiv(one, denominator), b.fdiv(z, denominator))


# -- log ------------------------------------------------------------------------------------

# log m = 2s (1 + s^2/3 + s^4/5 + ...), s = (m-1)/(m+1), |s| <= 0.1716 for m in the range.
_LOG_SERIES = {F32: tuple(1 / (2 * k + 1) for k in range(5, 0, -1)),
               F64: tuple(1 / (2 * k + 1) for k in range(10, 0, -1))}
_SUBNORMAL_SCALE = {F32: 24, F64: 54}


def _log_parts(e: Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(k, log m) for x = m 2**k with m in [sqrt(1/2), sqrt 2), k as a float of x's type;
    meaningful for positive finite x (subnormals are scaled first)."""
    b, ty = e.b, x.type
    mantissa, bias = _FORMAT[ty]
    scale = _SUBNORMAL_SCALE[ty]
    subnormal = b.fcmp_ordered("<", x, e.like(x, 2.0 ** (1 - bias)))
    xs = e.select(subnormal, b.fmul(x, e.like(x, 2.0**scale)), x)
    bits = e.bits(xs)
    exponent = b.sub(b.lshr(bits, e.like(bits, mantissa)), e.like(bits, bias))
    exponent = b.sub(exponent, e.select(subnormal, e.like(bits, scale), e.like(bits, 0)))
    mantissa_bits = b.and_(bits, e.like(bits, (1 << mantissa) - 1))
    m = e.from_bits(b.or_(mantissa_bits, e.like(bits, bias << mantissa)), ty)  # [1, 2)
    big = b.fcmp_ordered(">", m, e.like(x, math.sqrt(2.0)))
    m = e.select(big, b.fmul(m, e.like(x, 0.5)), m)
    exponent = b.add(exponent, b.zext(big, exponent.type))
    s = b.fdiv(b.fsub(m, e.like(x, 1.0)), b.fadd(m, e.like(x, 1.0)))
    two_s = b.fadd(s, s)
    z = b.fmul(s, s)
    log_m = e.fma(b.fmul(two_s, z), e.poly(z, _LOG_SERIES[ty]), two_s)
    return b.sitofp(exponent, ty), log_m


def _log_special_cases(e: Emitter, x: ir.Value, result: ir.Value) -> ir.Value:
    """`result` where x is positive and finite; a logarithm's values elsewhere, in any base:
    inf at inf, -inf at zeros, NaN below zero and for NaN."""
    b = e.b
    result = e.select(b.fcmp_ordered("==", x, e.like(x, math.inf)), x, result)
    result = e.select(b.fcmp_ordered("==", x, e.like(x, 0.0)), e.like(x, -math.inf), result)
    return e.select(b.fcmp_unordered("<", x, e.like(x, 0.0)), e.like(x, math.nan), result)


@lowers(reference.log_p)
def log(e: Emitter, x: ir.Value) -> ir.Value:
    if "log" in e.libm:
        return e.call("log", x)
    k, log_m = _log_parts(e, x)
    ty = x.type
    return _log_special_cases(e, x, e.fma(k, e.like(x, _LN2_HI[ty]),
                                          e.fma(k, e.like(x, _LN2_LO[ty]), log_m)))


@lowers(reference.log2_p)
def log2(e: Emitter, x: ir.Value) -> ir.Value:
    """k + log(m) / ln 2 (`_log_parts`): exact at powers of two, where log m is 0."""
    if "log2" in e.libm:
        return e.call("log2", x)
    k, log_m = _log_parts(e, x)
    return _log_special_cases(e, x, e.fma(log_m, e.like(x, 1 / math.log(2.0)), k))


@lowers(reference.log1p_p)
def log1p(e: Emitter, x: ir.Value) -> ir.Value:
    if "log1p" in e.libm:
        return _libm_call(e, "log1p", x)
    b = e.b
    u = b.fadd(x, e.like(x, 1.0))
    d = b.fsub(u, e.like(x, 1.0))
    result = b.fmul(log(e, u), b.fdiv(x, d))
    result = e.select(b.fcmp_ordered("==", d, e.like(x, 0.0)), x, result)
    return e.select(b.fcmp_ordered("==", x, e.like(x, math.inf)), x, result)


def _libm_call(e: Emitter, name: str, x: ir.Value) -> ir.Value:
    """A C math library function without an LLVM intrinsic (expm1, log1p): CPU only."""
    symbol = name + ("f" if x.type == F32 else "")
    return e.b.call(e.intrinsic(symbol, x.type, [x.type]), [x])


# -- sin, cos -------------------------------------------------------------------------------

# pi/2 in three parts of 33 bits (fdlibm's pio2_1, pio2_2, pio2_3).
_PIO2 = (1.57079632673412561417e00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)
_SIN = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(8, 0, -1))
_COS = tuple((-1) ** k / math.factorial(2 * k) for k in range(9, 0, -1))


def _sin_cos(e: Emitter, x: ir.Value, shift: int) -> ir.Value:
    """sin(x + shift pi/2), computed in float64 and rounded to x's type."""
    b = e.b
    xd = b.fpext(x, F64) if x.type == F32 else x
    k = e.call("roundeven", b.fmul(xd, e.like(xd, 2 / math.pi)))
    r, minus_k = xd, b.fneg(k)
    for part in _PIO2:
        r = e.fma(minus_k, e.like(xd, part), r)
    # The quadrant (k + shift) mod 4, kept in float so that no NaN or huge k reaches fptosi.
    q = b.fadd(k, e.like(xd, float(shift))) if shift else k
    q = b.fsub(q, b.fmul(e.call("floor", b.fmul(q, e.like(xd, 0.25))), e.like(xd, 4.0)))
    z = b.fmul(r, r)
    sin_r = e.fma(b.fmul(r, z), e.poly(z, _SIN), r)
    cos_r = e.fma(z, e.poly(z, _COS), e.like(xd, 1.0))
    odd = b.or_(b.fcmp_ordered("==", q, e.like(xd, 1.0)), b.fcmp_ordered("==", q, e.like(xd, 3.0)))
    value = e.select(odd, cos_r, sin_r)
    negate = b.fcmp_ordered(">=", q, e.like(xd, 2.0))
    value = e.select(negate, b.fneg(value), value)
    return b.fptrunc(value, F32) if x.type == F32 else value


@lowers(reference.sin_p)
def sin(e: Emitter, x: ir.Value) -> ir.Value:
    return e.call("sin", x) if "sin" in e.libm else _sin_cos(e, x, 0)


@lowers(reference.cos_p)
def cos(e: Emitter, x: ir.Value) -> ir.Value:
    return e.call("cos", x) if "cos" in e.libm else _sin_cos(e, x, 1)


# -- pow ------------------------------------------------------------------------------------

QUARTER_POWERS = 4.0  # |exponent| up to which constant quarter exponents take square roots


def pow_(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    """``x ** y``. A float32 power computes in float64 (its result rounds once to float32,
    as libm's powf does) and vectorises, where libm's is a scalar call per element; a
    constant float32 exponent of whole quarters (`_quarter_power`: LRN's -0.75, a
    square's 2) takes products and square roots instead of a log and an exp. Float64
    keeps libm's where the target has it: the expansion below loses bits to ``y log x``
    there."""
    if x.type == F32 and isinstance(y, ir.Constant) and _is_quarter(y.constant):
        return _quarter_power(e, x, float(y.constant))
    if "pow" in e.libm and x.type != F32:
        return e.call("pow", x, y)
    b = e.b
    xd, yd = (b.fpext(v, F64) if v.type == F32 else v for v in (x, y))
    one, zero = e.like(xd, 1.0), e.like(xd, 0.0)
    ax = e.call("fabs", xd)
    r = exp(e, b.fmul(yd, log(e, ax)))
    y_int = b.fcmp_ordered("==", e.call("floor", yd), yd)
    half_y = b.fmul(yd, e.like(xd, 0.5))
    y_odd = b.and_(y_int, b.fcmp_ordered("!=", e.call("floor", half_y), half_y))
    r = e.select(y_odd, e.call("copysign", r, xd), r)
    negative_base = b.and_(b.fcmp_ordered("<", xd, zero),
                           b.fcmp_ordered("!=", xd, e.like(xd, -math.inf)))
    r = e.select(b.and_(negative_base, b.not_(y_int)), e.like(xd, math.nan), r)
    unit_inf = b.and_(b.fcmp_ordered("==", ax, one),
                      b.fcmp_ordered("==", e.call("fabs", yd), e.like(xd, math.inf)))
    r = e.select(unit_inf, one, r)
    exact_one = b.or_(b.fcmp_ordered("==", yd, zero), b.fcmp_ordered("==", xd, one))
    r = e.select(exact_one, one, r)
    return b.fptrunc(r, F32) if x.type == F32 else r


def _is_quarter(c: float) -> bool:
    """A finite exponent of whole quarters up to `QUARTER_POWERS`."""
    return math.isfinite(c) and abs(c) <= QUARTER_POWERS and float(c * 4).is_integer()


def _quarter_power(e: Emitter, x: ir.Value, c: float) -> ir.Value:
    """``x ** c`` for a float32 `x` and a constant `c` of whole quarters, in float64:
    ``x**floor|c|`` by products, times ``sqrt(x)`` (a half) and ``sqrt(sqrt(x))`` (a
    quarter), inverted for a negative `c`. Each step is correctly rounded in float64, a
    few float64 ulps in all, far below the float32 result's rounding (``x ** 2`` is
    exact there, as NumPy's ``x * x`` is once rounded). IEEE pow's cases: for a whole
    `c` the products' own signs, zeros and infinities (NaN ** 0 is 1); else a negative
    base gives NaN (the square root's), -0 gives +0 (or +inf for a negative `c`), -inf
    gives +inf (or +0); but ``c = 0.5`` is the square root itself, -0 and NaN for -inf,
    as NumPy's power of a scalar 0.5 is (the eager kernel's)."""
    b = e.b
    xd = b.fpext(x, F64)
    if c == 0.5:
        return b.fptrunc(e.call("sqrt", xd), F32)
    whole, quarters = divmod(abs(c), 1.0)
    r, base = e.like(xd, 1.0), xd
    if quarters:
        zero = e.like(xd, 0.0)
        base = e.select(b.fcmp_ordered("==", xd, zero), zero, xd)
        base = e.select(b.fcmp_ordered("==", base, e.like(xd, -math.inf)),
                        e.like(xd, math.inf), base)
        root = e.call("sqrt", base)
        r = {0.25: e.call("sqrt", root), 0.5: root,
             0.75: b.fmul(root, e.call("sqrt", root))}[quarters]
    for _ in range(int(whole)):
        r = b.fmul(r, base)
    if c < 0:
        r = b.fdiv(e.like(xd, 1.0), r)
    return b.fptrunc(r, F32)


# -- erf --------------------------------------------------------------------------------------

def _cody_ratio(e: Emitter, t: ir.Value, num: tuple, den: tuple) -> ir.Value:
    """`reference._cody_ratio`, operation for operation (no fma), so results agree."""
    b = e.b
    xnum = b.fmul(e.like(t, num[-1]), t)
    xden = t
    for a, c in zip(num[:-2], den[:-1], strict=True):
        xnum = b.fmul(b.fadd(xnum, e.like(t, a)), t)
        xden = b.fmul(b.fadd(xden, e.like(t, c)), t)
    return b.fdiv(b.fadd(xnum, e.like(t, num[-2])), b.fadd(xden, e.like(t, den[-1])))


def _exp_neg_square(e: Emitter, y: ir.Value) -> ir.Value:
    b = e.b
    head = b.fmul(e.call("floor", b.fmul(y, e.like(y, 16.0))), e.like(y, 1 / 16))
    first = exp(e, b.fmul(b.fneg(head), head))
    second = exp(e, b.fmul(b.fneg(b.fsub(y, head)), b.fadd(y, head)))
    return b.fmul(first, second)


# float32 erf(x) = x P(x^2) / Q(x^2) for |x| <= 4, highest degree first: a fit of the
# relative error made for this module (float64 least squares on 20,000 points of [0, 4],
# reweighted by 1 / Q as Loeb's iteration does), rounded to float32: at most 7 ulps (mean
# 0.6) against erf over a dense grid, in one rational where Cody's three forms in float64
# cost four exps and three divisions. Q(0) = 1 and x is a factor, so tiny x and -0.0 keep
# their relative precision; past 3.92 erf rounds to +-1 in float32.
_ERF_F32_P = (1.9672646e-08, -1.9411032e-06, 0.00014104498, 0.0036913501, 0.050549071,
              0.19984913, 1.1283791)
_ERF_F32_Q = (0.00095180405, 0.014337197, 0.11495389, 0.51044357, 1.0)
_ERF_F32_LIMIT = 4.0


@lowers(reference.erf_p)
def erf(e: Emitter, x: ir.Value) -> ir.Value:
    """float32 (and the half floats, which compute in it): one rational (`_ERF_F32_P`),
    within a few ulps of the reference; float64: `reference._erf` (Cody), operation for
    operation."""
    b = e.b
    if x.type == F32:
        # Both clamps let NaN through; the second keeps |erf| <= 1 where the roundings of
        # P, Q and the division would pass it just below the limit.
        x = e.clamp(x, -_ERF_F32_LIMIT, _ERF_F32_LIMIT)
        s = b.fmul(x, x)
        ratio = b.fdiv(b.fmul(x, e.poly(s, _ERF_F32_P)), e.poly(s, _ERF_F32_Q))
        return e.clamp(ratio, -1.0, 1.0)
    y = e.call("fabs", x)
    small_limit, mid_limit = reference._ERF_SMALL_LIMIT, reference._ERFC_MID_LIMIT
    small_x = e.clamp(x, -small_limit, small_limit)
    small = b.fmul(small_x, _cody_ratio(e, b.fmul(small_x, small_x),
                                        reference._ERF_SMALL_NUM, reference._ERF_SMALL_DEN))
    mid_y = e.clamp(y, small_limit, mid_limit)
    mid = b.fmul(_cody_ratio(e, mid_y, reference._ERFC_MID_NUM, reference._ERFC_MID_DEN),
                 _exp_neg_square(e, mid_y))
    tail_y = e.clamp(y, mid_limit, reference._ERF_IS_ONE)
    inv_square = b.fdiv(e.like(y, 1.0), b.fmul(tail_y, tail_y))
    tail_ratio = b.fmul(inv_square, _cody_ratio(e, inv_square, reference._ERFC_TAIL_NUM,
                                                reference._ERFC_TAIL_DEN))
    tail = b.fmul(b.fdiv(b.fsub(e.like(y, reference._INV_SQRT_PI), tail_ratio), tail_y),
                  _exp_neg_square(e, tail_y))
    erfc = e.select(b.fcmp_ordered("<=", y, e.like(y, mid_limit)), mid, tail)
    large = b.fadd(b.fsub(e.like(y, 0.5), erfc), e.like(y, 0.5))
    signed = e.select(b.fcmp_ordered("<", x, e.like(y, 0.0)), b.fneg(large), large)
    return e.select(b.fcmp_ordered("<=", y, e.like(y, small_limit)), small, signed)
