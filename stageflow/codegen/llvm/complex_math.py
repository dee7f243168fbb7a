"""Complex arithmetic on LLVM values, for the elementwise rules and the reductions.

A complex64 (complex128) value is a ``{float, float}`` (``{double, double}``) struct, real
part first: NumPy's layout, loaded and stored whole (`Emitter.load`). Each function takes
the parts apart, computes, and puts them together again.

The arithmetic follows NumPy's loops so that compiled results agree with the eager
kernels: products as NumPy's vector loop computes them (``re = fma(a, c, -b d)``,
``im = fma(a, d, b c)``: bit for bit here), quotients and reciprocals by Smith's method
with NumPy's branches (bit for bit), ``==`` on both parts. The functions NumPy takes from
the C library (abs as ``hypot``, exp, log, sqrt) are computed from `mathlib`'s and
`special`'s real functions, in float64 for complex64 (rounded once, as glibc's float
versions do) and with scaling for complex128, so they agree to a few ulps: the textbook
formulas, with C99's results for zeros and infinite parts where a formula would give NaN.
"""

from __future__ import annotations

import math

from llvmlite import ir

from stageflow.codegen.llvm import mathlib
from stageflow.codegen.llvm.emitter import F32, F64, Emitter
from stageflow.codegen.llvm.special import evaluate
from stageflow.primitives.special import atan2_p

# Above this, a + |z| in sqrt may overflow: the operand is scaled by 1/4 first (FreeBSD's
# csqrt threshold, DBL_MAX / (1 + sqrt(2))).
_SQRT_THRESHOLD = 7.446288774449766337959726e307


def parts(e: Emitter, z: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(real, imaginary) of a complex value."""
    return e.b.extract_value(z, 0), e.b.extract_value(z, 1)


def pack(e: Emitter, re: ir.Value, im: ir.Value) -> ir.Value:
    """The complex value with parts `re` and `im` (of one float type)."""
    ty = ir.LiteralStructType([re.type, re.type])
    return e.b.insert_value(e.b.insert_value(ir.Constant(ty, ir.Undefined), re, 0), im, 1)


def _both(e: Emitter, method: str, x: ir.Value, y: ir.Value) -> ir.Value:
    (a, b), (c, d) = parts(e, x), parts(e, y)
    build = getattr(e.b, method)
    return pack(e, build(a, c), build(b, d))


def add(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    return _both(e, "fadd", x, y)


def subtract(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    return _both(e, "fsub", x, y)


def negative(e: Emitter, z: ir.Value) -> ir.Value:
    a, b = parts(e, z)
    return pack(e, e.b.fneg(a), e.b.fneg(b))


def conj(e: Emitter, z: ir.Value) -> ir.Value:
    a, b = parts(e, z)
    return pack(e, a, e.b.fneg(b))


def multiply(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    """(a + bi)(c + di) with one rounding per part fused, as NumPy's vector loop."""
    (a, b), (c, d) = parts(e, x), parts(e, y)
    re = e.fma(a, c, e.b.fneg(e.b.fmul(b, d)))
    im = e.fma(a, d, e.b.fmul(b, c))
    return pack(e, re, im)


def divide(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    """Smith's quotient, NumPy's: divide by the larger part of y; 0 / 0 gives NaNs and a
    nonzero x / 0 infinities. Every branch is computed and one selected (no traps)."""
    b = e.b
    (xr, xi), (yr, yi) = parts(e, x), parts(e, y)
    one = e.like(xr, 1.0)
    yr_abs, yi_abs = e.call("fabs", yr), e.call("fabs", yi)
    rat = b.fdiv(yi, yr)
    scale = b.fdiv(one, b.fadd(yr, b.fmul(yi, rat)))
    real_first = (b.fmul(b.fadd(xr, b.fmul(xi, rat)), scale),
                  b.fmul(b.fsub(xi, b.fmul(xr, rat)), scale))
    by_zero = (b.fdiv(xr, yr_abs), b.fdiv(xi, yr_abs))
    rat = b.fdiv(yr, yi)
    scale = b.fdiv(one, b.fadd(yi, b.fmul(yr, rat)))
    imag_first = (b.fmul(b.fadd(b.fmul(xr, rat), xi), scale),
                  b.fmul(b.fsub(b.fmul(xi, rat), xr), scale))
    real_larger = b.fcmp_ordered(">=", yr_abs, yi_abs)
    zero = b.and_(b.fcmp_ordered("==", yr_abs, e.like(xr, 0.0)),
                  b.fcmp_ordered("==", yi_abs, e.like(xr, 0.0)))
    result = []
    for k in range(2):
        first = e.select(zero, by_zero[k], real_first[k])
        result.append(e.select(real_larger, first, imag_first[k]))
    return pack(e, *result)


def reciprocal(e: Emitter, z: ir.Value) -> ir.Value:
    """1 / z as NumPy computes it (Smith's method on 1 + 0i)."""
    b = e.b
    zr, zi = parts(e, z)
    one = e.like(zr, 1.0)
    r = b.fdiv(zi, zr)
    d = b.fadd(zr, b.fmul(zi, r))
    real_larger = (b.fdiv(one, d), b.fdiv(b.fneg(r), d))
    r = b.fdiv(zr, zi)
    d = b.fadd(b.fmul(zr, r), zi)
    imag_larger = (b.fdiv(r, d), b.fdiv(b.fneg(one), d))
    choose = b.fcmp_ordered("<=", e.call("fabs", zi), e.call("fabs", zr))
    return pack(e, *(e.select(choose, p, q) for p, q in zip(real_larger, imag_larger,
                                                            strict=True)))


def equal(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    (a, b), (c, d) = parts(e, x), parts(e, y)
    return e.b.and_(e.b.fcmp_ordered("==", a, c), e.b.fcmp_ordered("==", b, d))


def not_equal(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    (a, b), (c, d) = parts(e, x), parts(e, y)
    return e.b.or_(e.b.fcmp_unordered("!=", a, c), e.b.fcmp_unordered("!=", b, d))


def nonzero(e: Emitter, z: ir.Value) -> ir.Value:
    """Whether either part is nonzero (NaN counts): a complex value's truth."""
    a, b = parts(e, z)
    return e.b.or_(e.b.fcmp_unordered("!=", a, e.like(a, 0.0)),
                   e.b.fcmp_unordered("!=", b, e.like(b, 0.0)))


def widened(e: Emitter, z: ir.Value) -> ir.Value:
    """A complex64 value as complex128 (exactly), a complex128 one as it is: complex64 sums
    along a row accumulate in complex128 and are rounded once at its end."""
    a, b = parts(e, z)
    if a.type == F64:
        return z
    return pack(e, e.b.fpext(a, F64), e.b.fpext(b, F64))


def narrowed(e: Emitter, z: ir.Value, ty: ir.Type) -> ir.Value:
    """`z` (complex128) rounded to the complex type `ty`."""
    if z.type == ty:
        return z
    a, b = parts(e, z)
    part = ty.elements[0]
    return pack(e, e.b.fptrunc(a, part), e.b.fptrunc(b, part))


# -- the C library's functions: computed in float64 for complex64 --------------------------


def _wide(e: Emitter, z: ir.Value) -> tuple[ir.Value, ir.Value, bool]:
    """z's parts in float64, and whether they were float32 (to round the result back)."""
    a, b = parts(e, z)
    if a.type == F32:
        return e.b.fpext(a, F64), e.b.fpext(b, F64), True
    return a, b, False


def _narrow(e: Emitter, value: ir.Value, narrow: bool) -> ir.Value:
    return e.b.fptrunc(value, F32) if narrow else value


def _hypot(e: Emitter, a: ir.Value, b: ir.Value, narrow: bool) -> ir.Value:
    """sqrt(a^2 + b^2) without overflow: directly for float32 parts widened to float64
    (their squares fit), else scaled by the larger magnitude; infinite if either part is
    infinite, even the other NaN (C99)."""
    builder = e.b
    fa, fb = e.call("fabs", a), e.call("fabs", b)
    if narrow:
        modulus = e.call("sqrt", builder.fadd(builder.fmul(a, a), builder.fmul(b, b)))
    else:
        a_larger = builder.fcmp_ordered(">", fa, fb)
        big, small = e.select(a_larger, fa, fb), e.select(a_larger, fb, fa)
        ratio = builder.fdiv(small, big)
        scaled = builder.fmul(big, e.call("sqrt", e.fma(ratio, ratio, e.like(a, 1.0))))
        zero = builder.fcmp_ordered("==", big, e.like(a, 0.0))
        modulus = e.select(zero, small, scaled)  # small is 0, or NaN beside a zero
    infinite = builder.or_(builder.fcmp_ordered("==", fa, e.like(a, math.inf)),
                           builder.fcmp_ordered("==", fb, e.like(a, math.inf)))
    return e.select(infinite, e.like(a, math.inf), modulus)


def abs_(e: Emitter, z: ir.Value) -> ir.Value:
    """|z|, NumPy's hypot of the parts, in the parts' dtype."""
    a, b, narrow = _wide(e, z)
    return _narrow(e, _hypot(e, a, b, narrow), narrow)


def exp(e: Emitter, z: ir.Value) -> ir.Value:
    """e^a (cos b + i sin b); a real z gives (e^a, b) exactly, an infinite a too; for an
    infinite or NaN b, a = -inf gives zeros and a = inf (inf, NaN) (C99's cexp)."""
    builder = e.b
    a, b, narrow = _wide(e, z)
    scale = mathlib.exp(e, a)
    re = builder.fmul(scale, mathlib.cos(e, b))
    im = builder.fmul(scale, mathlib.sin(e, b))
    real = builder.fcmp_ordered("==", b, e.like(b, 0.0))
    re, im = e.select(real, scale, re), e.select(real, b, im)
    vanishing = builder.fcmp_ordered("==", a, e.like(a, -math.inf))
    zero = e.like(a, 0.0)
    re = e.select(vanishing, zero, re)
    im = e.select(vanishing, e.call("copysign", zero, b), im)
    unbounded = builder.and_(builder.fcmp_ordered("==", a, e.like(a, math.inf)),
                             builder.fcmp_unordered("==", e.call("fabs", b),
                                                    e.like(b, math.inf)))
    re = e.select(unbounded, a, re)
    return pack(e, _narrow(e, re, narrow), _narrow(e, im, narrow))


def log(e: Emitter, z: ir.Value) -> ir.Value:
    """log |z| + i atan2(b, a), the principal branch. For complex128 near |z| = 1 the real
    part is log1p((m - 1)(m + 1) + s^2) / 2 of the larger and smaller magnitudes, which
    keeps its accuracy where log |z| is small."""
    builder = e.b
    a, b, narrow = _wide(e, z)
    half = e.like(a, 0.5)
    if narrow:  # the squares of float32 parts are exact in float64
        re = builder.fmul(half, mathlib.log(e, builder.fadd(builder.fmul(a, a),
                                                             builder.fmul(b, b))))
        infinite = builder.or_(
            builder.fcmp_ordered("==", e.call("fabs", a), e.like(a, math.inf)),
            builder.fcmp_ordered("==", e.call("fabs", b), e.like(a, math.inf)))
        re = e.select(infinite, e.like(a, math.inf), re)  # beside a NaN too (C99)
    else:
        fa, fb = e.call("fabs", a), e.call("fabs", b)
        a_larger = builder.fcmp_ordered(">", fa, fb)
        big, small = e.select(a_larger, fa, fb), e.select(a_larger, fb, fa)
        near_one = builder.and_(builder.fcmp_ordered(">", big, half),
                                builder.fcmp_ordered("<", big, e.like(a, 2.0)))
        one = e.like(a, 1.0)
        shifted = e.fma(builder.fsub(big, one), builder.fadd(big, one),
                        builder.fmul(small, small))
        re = e.select(near_one, builder.fmul(half, mathlib.log1p(e, shifted)),
                      mathlib.log(e, _hypot(e, a, b, narrow)))
    im = evaluate(e, atan2_p, b, a)
    return pack(e, _narrow(e, re, narrow), _narrow(e, im, narrow))


def sqrt(e: Emitter, z: ir.Value) -> ir.Value:
    """The principal square root: t = sqrt((|a| + |z|) / 2), then (t, b / 2t) for a >= 0
    and (|b| / 2t, t with b's sign) below; (0, b) at 0 and (inf, b) for an infinite b, as
    C99's csqrt. Huge complex128 operands are scaled by 1/4 first (the root by 1/2)."""
    builder = e.b
    a, b, narrow = _wide(e, z)
    one = e.like(a, 1.0)
    fa, fb = e.call("fabs", a), e.call("fabs", b)
    huge = builder.or_(builder.fcmp_ordered(">=", fa, e.like(a, _SQRT_THRESHOLD)),
                       builder.fcmp_ordered(">=", fb, e.like(a, _SQRT_THRESHOLD)))
    scale = e.select(huge, e.like(a, 0.25), one)
    sa, sb = builder.fmul(a, scale), builder.fmul(b, scale)
    modulus = _hypot(e, sa, sb, narrow)
    t = e.call("sqrt", builder.fmul(builder.fadd(e.call("fabs", sa), modulus), e.like(a, 0.5)))
    twice = builder.fadd(t, t)
    nonnegative = builder.fcmp_ordered(">=", sa, e.like(a, 0.0))
    re = e.select(nonnegative, t, builder.fdiv(e.call("fabs", sb), twice))
    im = e.select(nonnegative, builder.fdiv(sb, twice), e.call("copysign", t, sb))
    unscale = e.select(huge, e.like(a, 2.0), one)
    re, im = builder.fmul(re, unscale), builder.fmul(im, unscale)
    zero = builder.and_(builder.fcmp_ordered("==", a, e.like(a, 0.0)),
                        builder.fcmp_ordered("==", b, e.like(a, 0.0)))
    re = e.select(zero, e.like(a, 0.0), re)
    im = e.select(zero, b, im)
    infinite_b = builder.fcmp_ordered("==", fb, e.like(a, math.inf))
    re = e.select(infinite_b, e.like(a, math.inf), re)
    im = e.select(infinite_b, b, im)
    return pack(e, _narrow(e, re, narrow), _narrow(e, im, narrow))
