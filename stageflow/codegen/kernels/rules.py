"""The lowering table: one rule per elementwise primitive, shared by every target.

`RULES[primitive](e, node)` builds the LLVM instructions computing one element of the op's
result from its operands' elements (already in their compute types, see `emitter`). Rules
branch on the operand's kind: 'f' floating, 'c' complex (`llvm.complex_math`), 'i' signed,
'u' unsigned, 'b' bool.
Integer semantics are NumPy's, made total so compiled code never traps or hits undefined
behaviour: ``x // 0 == x % 0 == 0``, ``MIN // -1 == MIN`` (wraps), shifts by the width or
more give 0 or -1, negative integer powers give 0 (or +-1 for bases +-1; NumPy raises, and
so do compiled programs: `pow` of signed integers is never fused, its own lowering refuses
them, `codegen.lowered.integer_power`),
float -> int casts give the minimum for NaN and values out of range, as NumPy on x86 does.

Every rule returns a value of the result's compute type; results of float16/bfloat16 ops
are rounded to that precision by the caller (`apply`), as NumPy does after each op.

The table is keyed by primitive and takes some rules from where they are written: the
transcendentals' float expansions from `llvm.mathlib` (each marked there with the primitive
it lowers), the special functions' from `llvm.special`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm import complex_math as cm
from stageflow.codegen.llvm import mathlib
from stageflow.codegen.llvm.emitter import (
    COMPUTE,
    F32,
    F64,
    I1,
    I32,
    I64,
    ROUNDED,
    Emitter,
    kind,
)
from stageflow.codegen.llvm.special import special
from stageflow.core import dtypes
from stageflow.core.primitive import Primitive
from stageflow.primitives import elementwise as ew
from stageflow.primitives.collective import REDUCTIONS, all_reduce_p
from stageflow.primitives.special import ALGORITHMS
from stageflow.primitives.structural import constant_p


@dataclass(frozen=True)
class Node:
    """What a rule sees: the operands' element values and dtypes, the result dtype, params."""

    args: tuple[ir.Value, ...]
    dtypes: tuple[np.dtype, ...]
    result: np.dtype
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return kind(self.dtypes[0]) if self.dtypes else kind(self.result)


Rule = Callable[[Emitter, Node], ir.Value]


def by_kind(**rules: Rule) -> Rule:
    """A rule dispatching on the operand kind; `fiu`-style keys cover several kinds."""
    table = {k: rule for keys, rule in rules.items() for k in keys}

    def rule(e: Emitter, node: Node) -> ir.Value:
        try:
            return table[node.kind](e, node)
        except KeyError:
            name = node.dtypes[0].name if node.dtypes else node.result.name
            raise NotImplementedError(f"no lowering for dtype {name}") from None

    return rule


def builder(method: str) -> Rule:
    """A rule calling one IRBuilder method on the operands (``fadd``, ``and_``...)."""
    return lambda e, n: getattr(e.b, method)(*n.args)


def intrinsic(base: str) -> Rule:
    return lambda e, n: e.call(base, *n.args)


def unary_math(function: Callable[[Emitter, ir.Value], ir.Value]) -> Rule:
    return lambda e, n: function(e, n.args[0])


def binary_math(function: Callable[[Emitter, ir.Value, ir.Value], ir.Value]) -> Rule:
    return lambda e, n: function(e, *n.args)


# -- unary ------------------------------------------------------------------------------------

# Complex operands of the transcendentals that take them; their float side is `mathlib`'s.
_COMPLEX_EXPANSIONS: dict[Primitive, mathlib.MathFunction] = {ew.exp_p: cm.exp, ew.log_p: cm.log}


def _expansion(primitive: Primitive, function: mathlib.MathFunction) -> Rule:
    """The rule of a primitive `mathlib` expands: `function` on floats, and `complex_math`'s
    expansion on complex operands where the op takes them."""
    kinds = {"f": unary_math(function)}
    if primitive in _COMPLEX_EXPANSIONS:
        kinds["c"] = unary_math(_COMPLEX_EXPANSIONS[primitive])
    return by_kind(**kinds)


def _sign_float(e: Emitter, n: Node) -> ir.Value:
    """NumPy: 1 if x > 0, -1 if x < 0, +0 for zeros, NaN stays NaN."""
    x, b = n.args[0], e.b
    zero = e.like(x, 0.0)
    result = e.select(b.fcmp_ordered("<", x, zero), e.like(x, -1.0), zero)
    result = e.select(b.fcmp_ordered(">", x, zero), e.like(x, 1.0), result)
    return e.select(e.is_nan(x), x, result)


def _sign_int(e: Emitter, n: Node) -> ir.Value:
    x, b = n.args[0], e.b
    zero = e.like(x, 0)
    positive = b.zext(b.icmp_signed(">", x, zero), x.type)
    return b.sub(positive, b.zext(b.icmp_signed("<", x, zero), x.type))


def _abs_int(e: Emitter, n: Node) -> ir.Value:
    x = n.args[0]
    suffix = f"i{x.type.width}"
    function = e.intrinsic(f"llvm.abs.{suffix}", x.type, [x.type, I1])
    return e.b.call(function, [x, ir.Constant(I1, 0)])  # abs(MIN) == MIN, as NumPy wraps


def _relu_float(e: Emitter, n: Node) -> ir.Value:
    """max(x, 0) as NumPy's: x where x > 0 or x is NaN, else 0 (+0 for -0 too)."""
    x = n.args[0]
    keep = e.b.or_(e.b.fcmp_ordered(">", x, e.like(x, 0.0)), e.is_nan(x))
    return e.select(keep, x, e.like(x, 0.0))


def _relu_int(e: Emitter, n: Node) -> ir.Value:
    x = n.args[0]
    return e.select(e.b.icmp_signed(">=", x, e.like(x, 0)), x, e.like(x, 0))


def _rsqrt(e: Emitter, n: Node) -> ir.Value:
    x = n.args[0]
    return e.b.fdiv(e.like(x, 1.0), e.call("sqrt", x))


def _reciprocal(e: Emitter, n: Node) -> ir.Value:
    x = n.args[0]
    return e.b.fdiv(e.like(x, 1.0), x)


# -- binary arithmetic -----------------------------------------------------------------------

def _int_to_f64(e: Emitter, n: Node) -> tuple[ir.Value, ...]:
    convert = e.b.uitofp if n.kind == "u" else e.b.sitofp
    return tuple(convert(a, F64) for a in n.args)


def _true_divide(e: Emitter, n: Node) -> ir.Value:
    if n.kind == "f":
        return e.b.fdiv(*n.args)
    return e.b.fdiv(*_int_to_f64(e, n))


def _float_divmod(e: Emitter, a: ir.Value, d: ir.Value) -> tuple[ir.Value, ir.Value]:
    """NumPy's npy_divmod: Python's floor division and remainder (sign of the divisor)."""
    b = e.b
    zero = e.like(a, 0.0)
    mod = b.frem(a, d)
    div = b.fdiv(b.fsub(a, mod), d)
    mod_nonzero = b.fcmp_unordered("!=", mod, zero)
    signs_differ = b.xor(b.fcmp_ordered("<", d, zero), b.fcmp_ordered("<", mod, zero))
    adjust = b.and_(mod_nonzero, signs_differ)
    mod = e.select(adjust, b.fadd(mod, d), mod)
    div = e.select(adjust, b.fsub(div, e.like(a, 1.0)), div)
    mod = e.select(mod_nonzero, mod, e.call("copysign", zero, d))
    floor = e.call("floor", div)
    above_half = b.fcmp_ordered(">", b.fsub(div, floor), e.like(a, 0.5))
    floor = e.select(above_half, b.fadd(floor, e.like(a, 1.0)), floor)
    quotient = b.fdiv(a, d)
    div_nonzero = b.fcmp_unordered("!=", div, zero)
    floordiv = e.select(div_nonzero, floor, e.call("copysign", zero, quotient))
    divisor_zero = b.fcmp_ordered("==", d, zero)
    return e.select(divisor_zero, quotient, floordiv), mod  # frem by 0 is NaN already


def _safe_divisor(e: Emitter, n: Node) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """(x, divisor, d == 0) with the divisor made 1 where dividing would trap (0, MIN/-1)."""
    b = e.b
    x, d = n.args
    zero = b.icmp_signed("==", d, e.like(d, 0))
    trap = zero
    if n.kind == "i":
        minimum = e.like(x, 1 << (x.type.width - 1))
        overflow = b.and_(b.icmp_signed("==", x, minimum),
                          b.icmp_signed("==", d, e.like(d, -1)))
        trap = b.or_(zero, overflow)
    return x, e.select(trap, e.like(d, 1), d), zero, trap


def _int_floordiv(e: Emitter, n: Node) -> ir.Value:
    b = e.b
    x, d, zero, _ = _safe_divisor(e, n)
    if n.kind == "u":
        return e.select(zero, e.like(x, 0), b.udiv(x, d))
    q, r = b.sdiv(x, d), b.srem(x, d)
    inexact = b.icmp_signed("!=", r, e.like(r, 0))
    negative = b.icmp_signed("<", b.xor(r, d), e.like(r, 0))
    q = b.sub(q, b.zext(b.and_(inexact, negative), q.type))
    return e.select(zero, e.like(x, 0), q)  # MIN // -1 == MIN // 1 == MIN


def _int_mod(e: Emitter, n: Node) -> ir.Value:
    b = e.b
    x, d, _, trap = _safe_divisor(e, n)
    if n.kind == "u":
        return e.select(trap, e.like(x, 0), b.urem(x, d))
    r = b.srem(x, d)
    fix = b.and_(b.icmp_signed("!=", r, e.like(r, 0)),
                 b.icmp_signed("<", b.xor(r, d), e.like(r, 0)))
    r = e.select(fix, b.add(r, d), r)
    return e.select(trap, e.like(x, 0), r)  # x % 0 == 0 and MIN % -1 == 0


def _int_pow(e: Emitter, n: Node) -> ir.Value:
    """Square-and-multiply in a loop over the exponent's bits (an unrolled version took
    seconds to compile for int64); NumPy's products wrap the same way."""
    b = e.b
    x, y = n.args
    one, zero = e.like(x, 1), e.like(x, 0)
    exponent = y if n.kind == "u" else e.select(b.icmp_signed("<", y, zero), zero, y)
    before = b.block
    head = b.append_basic_block("pow.head")
    step = b.append_basic_block("pow.step")
    after = b.append_basic_block("pow.end")
    b.branch(head)
    b.position_at_end(head)
    result, base, bits = (b.phi(x.type) for _ in range(3))
    for phi, start in ((result, one), (base, x), (bits, exponent)):
        phi.add_incoming(start, before)
    b.cbranch(b.icmp_unsigned("!=", bits, zero), step, after)
    b.position_at_end(step)
    odd = b.trunc(bits, I1)
    result.add_incoming(e.select(odd, b.mul(result, base), result), step)
    base.add_incoming(b.mul(base, base), step)
    bits.add_incoming(b.lshr(bits, one), step)
    b.branch(head)
    b.position_at_end(after)
    if n.kind == "u":
        return result
    # Negative exponents: 1 / x**|y| truncated, i.e. 0 except for the bases 1 and -1.
    minus_one = e.select(b.trunc(y, I1), e.like(x, -1), one)
    special = e.select(b.icmp_signed("==", x, one), one,
                       e.select(b.icmp_signed("==", x, e.like(x, -1)), minus_one, zero))
    return e.select(b.icmp_signed("<", y, zero), special, result)


def _float_extreme(greater: bool) -> Rule:
    """NumPy's maximum/minimum: x if (x >= y or x is NaN) else y, so NaNs propagate."""

    def rule(e: Emitter, n: Node) -> ir.Value:
        x, y = n.args
        better = e.b.fcmp_ordered(">=" if greater else "<=", x, y)
        return e.select(e.b.or_(better, e.is_nan(x)), x, y)

    return rule


def _int_extreme(signed: bool, greater: bool) -> Rule:
    def rule(e: Emitter, n: Node) -> ir.Value:
        x, y = n.args
        compare = e.b.icmp_signed if signed else e.b.icmp_unsigned
        return e.select(compare(">=" if greater else "<=", x, y), x, y)

    return rule


def _shift_right(e: Emitter, n: Node) -> ir.Value:
    """NumPy's right_shift (arithmetic for signed ints); shifts >= the width saturate."""
    x, y = n.args
    width = e.like(y, x.type.width - 1)
    too_far = e.b.icmp_unsigned(">", y, width)
    if n.kind == "u":
        return e.select(too_far, e.like(x, 0), e.b.lshr(x, e.select(too_far, width, y)))
    return e.b.ashr(x, e.select(too_far, width, y))


def _compare(fop: str, iop: str) -> Rule:
    def rule(e: Emitter, n: Node) -> ir.Value:
        if n.kind == "c":  # only == and != take complex operands (the shape rules)
            return (cm.equal if fop == "==" else cm.not_equal)(e, *n.args)
        if n.kind == "f":
            return (e.b.fcmp_unordered if fop == "!=" else e.b.fcmp_ordered)(fop, *n.args)
        if n.kind == "u" or n.kind == "b":
            return e.b.icmp_unsigned(iop, *n.args)
        return e.b.icmp_signed(iop, *n.args)

    return rule


# -- cast -------------------------------------------------------------------------------------

def _complex_cast(e: Emitter, n: Node) -> ir.Value:
    """Casts to or from complex, through the real casts of the parts: to complex the value
    is the real part (the imaginary part 0, or the source's, converted); from complex, the
    real part is converted (TensorFlow's and, without its warning, NumPy's cast), except
    to bool, true where either part is nonzero."""
    x, (src,), dst = n.args[0], n.dtypes, n.result
    if kind(dst) == "c":
        part = dtypes.real_dtype(dst)
        if kind(src) != "c":
            return cm.pack(e, _cast(e, Node((x,), (src,), part)), e.const(COMPUTE[part], 0.0))
        return cm.pack(e, *(_cast(e, Node((p,), (dtypes.real_dtype(src),), part))
                            for p in cm.parts(e, x)))
    if dst == dtypes.bool_:
        return cm.nonzero(e, x)
    return _cast(e, Node((cm.parts(e, x)[0],), (dtypes.real_dtype(src),), dst))


# Rounded from float64 once, as NumPy and ml_dtypes convert: through a float32 rounded to odd.
_ROUNDED_ONCE = frozenset({dtypes.float16, *dtypes.NARROW_FLOATING})


def _cast(e: Emitter, n: Node) -> ir.Value:
    """Convert between compute types; f16, bf16 and narrow results are rounded by `apply`
    afterwards."""
    b, x = e.b, n.args[0]
    src, dst = n.dtypes[0], n.result
    source, target = kind(src), kind(dst)
    to = COMPUTE[dst]
    if src == dst:
        return x
    if "c" in (source, target):
        return _complex_cast(e, n)
    if target == "b":
        if source == "f":
            return b.fcmp_unordered("!=", x, e.like(x, 0.0))  # NaN is true
        return b.icmp_unsigned("!=", x, e.like(x, 0))
    if source == "b":
        return b.uitofp(x, to) if target == "f" else b.zext(x, to)
    if source == "f" and target == "f":
        if src == dtypes.float64 and dst in _ROUNDED_ONCE:
            return e.double_to_float_odd(x)  # one correct rounding, as NumPy's cast
        if x.type == to:
            return x
        return b.fpext(x, to) if to == F64 else b.fptrunc(x, to)
    if target == "f":
        return (b.uitofp if source == "u" else b.sitofp)(x, to)
    if source == "f" and (dst in dtypes.NARROW_INTEGER or src in _ML_DTYPES_FLOATS):
        return _float_to_int_or_zero(e, x, dst, to)
    if source == "f":
        # NaN and values outside the range give the minimum, as NumPy's casts do on x86
        # (its conversion instruction's "integer indefinite"): int32 and int64 agree with
        # eager results there. uint32 goes through int64, so negative values wrap; the
        # 8- and 16-bit types through int32, keeping its low bits (300.0 -> int8 44, NaN
        # -> 0), as NumPy's C casts compile. uint64 as x86 compilers convert it: values
        # from 2**63 up less 2**63 (exact there), then that bit set again by xor.
        wide = I64 if dst == dtypes.uint32 else to if to.width >= 32 else I32
        if dst == dtypes.uint64:
            top = e.like(x, float(2 ** 63))
            high = b.xor(_float_to_int(e, b.fsub(x, top), I64), ir.Constant(I64, -(2 ** 63)))
            return b.select(b.fcmp_ordered(">=", x, top), high, _float_to_int(e, x, I64))
        value = _float_to_int(e, x, wide)
        return value if wide == to else b.trunc(value, to)
    if x.type.width == to.width:
        return x
    if x.type.width > to.width:
        return b.trunc(x, to)
    return (b.zext if source == "u" else b.sext)(x, to)


_ML_DTYPES_FLOATS = frozenset({dtypes.bfloat16, *dtypes.NARROW_FLOATING})


def _float_to_int_or_zero(e: Emitter, x: ir.Value, dst: np.dtype, to: ir.IntType) -> ir.Value:
    """x truncated to the integer dtype `dst`, and 0 where that does not fit (NaN and
    infinities too): ml_dtypes' casts from its floats to integers and from any float to its
    narrow integers."""
    b = e.b
    info = ml_dtypes.iinfo(dst)
    low, high = int(info.min), int(info.max)
    precision = np.float32 if x.type == F32 else np.float64
    name = f"llvm.fpto{'u' if low == 0 else 's'}i.sat.i64.{'f32' if x.type == F32 else 'f64'}"
    value = b.call(e.intrinsic(name, I64, [x.type]), [x])
    # Truncation fits where low - 1 < x < high + 1; where low - 1 rounds to low in x's
    # precision (int32 in float32, int64), no value lies between them: low <= x.
    lower = (b.fcmp_ordered(">", x, e.like(x, low - 1))
             if precision(low - 1) != precision(low) else b.fcmp_ordered(">=", x, e.like(x, low)))
    fits = b.and_(lower, b.fcmp_ordered("<", x, e.like(x, float(high + 1))))
    value = b.select(fits, value, ir.Constant(I64, 0))
    return value if to.width == 64 else b.trunc(value, to)


def _float_to_int(e: Emitter, x: ir.Value, wide: ir.IntType) -> ir.Value:
    """x truncated to the signed integer type `wide`; NaN and values outside its range give
    its minimum (x86's "integer indefinite")."""
    b = e.b
    name = f"llvm.fptosi.sat.i{wide.width}.{'f32' if x.type == F32 else 'f64'}"
    value = b.call(e.intrinsic(name, wide, [x.type]), [x])
    limit = e.like(x, float(2 ** (wide.width - 1)))
    outside = b.or_(b.fcmp_unordered("uno", x, x),
                    b.or_(b.fcmp_ordered(">=", x, limit),
                          b.fcmp_ordered("<", x, b.fneg(limit))))
    return b.select(outside, ir.Constant(wide, -(2 ** (wide.width - 1))), value)


def _all_reduce(e: Emitter, n: Node) -> ir.Value:
    """The operands folded left to right by their reduction's binary primitive, each step
    by that primitive's rule and rounded as it is (so float16 sums round after every add,
    as NumPy's do); a mean then divides by their count, as `divide` does."""
    kind = REDUCTIONS[n.params["reduction"]]
    pair = (n.result, n.result)
    total = n.args[0]
    for x in n.args[1:]:
        total = apply(e, kind.combine, Node((total, x), pair, n.result))
    if kind.mean:
        count = e.const(COMPUTE[n.result], len(n.args))
        total = apply(e, ew.divide_p, Node((total, count), pair, n.result))
    return total


def _constant(e: Emitter, n: Node) -> ir.Value:
    first = np.asarray(n.params["value"]).reshape(-1)[0]
    numbers = {"f": float, "c": complex}
    return e.const(COMPUTE[n.result], numbers.get(kind(n.result), int)(first))


RULES: dict[Primitive, Rule] = {
    ew.negative_p: by_kind(f=builder("fneg"), iu=lambda e, n: e.b.neg(n.args[0]),
                           c=unary_math(cm.negative)),
    ew.abs_p: by_kind(f=intrinsic("fabs"), i=_abs_int, u=lambda e, n: n.args[0],
                      c=unary_math(cm.abs_)),
    ew.sign_p: by_kind(f=_sign_float, i=_sign_int,
                       u=lambda e, n: e.b.zext(e.b.icmp_unsigned("!=", n.args[0],
                                                                 e.like(n.args[0], 0)),
                                               n.args[0].type)),
    ew.sqrt_p: by_kind(f=intrinsic("sqrt"), c=unary_math(cm.sqrt)),
    ew.rsqrt_p: _rsqrt,
    ew.relu_p: by_kind(f=_relu_float, i=_relu_int, u=lambda e, n: n.args[0]),
    ew.reciprocal_p: by_kind(f=_reciprocal, c=unary_math(cm.reciprocal)),
    ew.real_p: lambda e, n: cm.parts(e, n.args[0])[0],
    ew.imag_p: lambda e, n: cm.parts(e, n.args[0])[1],
    ew.conj_p: unary_math(cm.conj),
    ew.complex_p: binary_math(cm.pack),
    ew.floor_p: intrinsic("floor"),
    ew.ceil_p: intrinsic("ceil"),
    ew.round_p: intrinsic("roundeven"),
    ew.logical_not_p: lambda e, n: e.b.not_(n.args[0]),
    ew.add_p: by_kind(f=builder("fadd"), iu=builder("add"), c=binary_math(cm.add)),
    ew.subtract_p: by_kind(f=builder("fsub"), iu=builder("sub"), c=binary_math(cm.subtract)),
    ew.multiply_p: by_kind(f=builder("fmul"), iu=builder("mul"), c=binary_math(cm.multiply)),
    ew.divide_p: by_kind(fiu=_true_divide, c=binary_math(cm.divide)),
    ew.floordiv_p: by_kind(f=lambda e, n: _float_divmod(e, *n.args)[0], iu=_int_floordiv),
    ew.mod_p: by_kind(f=lambda e, n: _float_divmod(e, *n.args)[1], iu=_int_mod),
    ew.pow_p: by_kind(f=lambda e, n: mathlib.pow_(e, *n.args), iu=_int_pow),
    ew.maximum_p: by_kind(f=_float_extreme(True), i=_int_extreme(True, True),
                          u=_int_extreme(False, True)),
    ew.minimum_p: by_kind(f=_float_extreme(False), i=_int_extreme(True, False),
                          u=_int_extreme(False, False)),
    ew.logical_and_p: builder("and_"),
    ew.logical_or_p: builder("or_"),
    ew.shift_right_logical_p: by_kind(iu=_shift_right),
    ew.equal_p: _compare("==", "=="),
    ew.not_equal_p: _compare("!=", "!="),
    ew.less_p: _compare("<", "<"),
    ew.less_equal_p: _compare("<=", "<="),
    ew.greater_p: _compare(">", ">"),
    ew.greater_equal_p: _compare(">=", ">="),
    ew.select_p: lambda e, n: e.select(*n.args),
    ew.cast_p: _cast,
    all_reduce_p: _all_reduce,
    constant_p: _constant,
    **{primitive: _expansion(primitive, function)
       for primitive, function in mathlib.LOWERINGS.items()},
    **{primitive: special(primitive) for primitive in ALGORITHMS},
}


# Ops whose result is one of their operands' values, or its negation: of half floats held
# exactly, it needs no rounding.
_KEEP_HALVES = frozenset({ew.relu_p, ew.negative_p, ew.abs_p, ew.maximum_p, ew.minimum_p,
                          ew.select_p})
_HALVES = (dtypes.float16, dtypes.bfloat16)


def apply(e: Emitter, primitive: Primitive, node: Node) -> ir.Value:
    """Lower one op by its rule; round float16/bfloat16 results as NumPy does per op."""
    try:
        rule = RULES[primitive]
    except KeyError:
        raise NotImplementedError(f"codegen has no lowering for sf.{primitive.name}") from None
    value = rule(e, node)
    if node.result in ROUNDED:
        keeps = (primitive in _KEEP_HALVES and node.result in _HALVES
                 and all(e.is_exact(x) for x in node.args if x.type == F32))
        value = e.exact(value) if keeps else e.round_to(value, node.result)
    return value
