"""The `Emitter`: an llvmlite IR builder plus the helpers every lowering rule needs.

Lowering rules (`stageflow.codegen.kernels.rules`) and math expansions
(`stageflow.codegen.llvm.mathlib`) see values in their *compute* type, not their storage
type, so each rule is written once per kind of number instead of once per dtype:

    ========  ==============  ==============  ==========================================
    dtype     stored as       computed as     why
    ========  ==============  ==============  ==========================================
    f16       ``half``        ``float``       NumPy computes half ops in float32 and
    bf16      ``i16``         ``float``       rounds each result (ml_dtypes likewise)
    f32, f64  float, double   same
    i16, u16  ``i16``         ``i16``         signedness lives in the dtype, not the type
    i32, u32  ``i32``         ``i32``
    i64, u64  ``i64``         ``i64``
    bool      ``i8`` (0/1)    ``i1``          NumPy's one byte per bool
    c64       {float, float}  same            NumPy's pair, real part first (rules take
    c128      {double,        same            the parts apart: `complex_math`)
              double}
    f8*, f4   ``i8``          ``float``       decoded and encoded through tables made
                                              from ml_dtypes (`narrow`)
    i4, i2    ``i8``          ``i8``          kept sign-extended (zero-extended for
    ui4, ui2                                  ui4, ui2) from their low bits, stored
                                              as those bits, as ml_dtypes stores them
    ========  ==============  ==============  ==========================================

bfloat16 is converted with integer bit operations (round to nearest even, NaN kept quiet),
as ml_dtypes does, so no target needs bfloat16 support. The emitter never uses fast-math
flags: results must match the NumPy kernels, which round every operation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm import narrow
from stageflow.core import dtypes

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
# A struct, not a vector: its alignment is its part's, as NumPy's complex arrays have.
C64, C128 = ir.LiteralStructType([F32, F32]), ir.LiteralStructType([F64, F64])

STORAGE: dict[np.dtype, ir.Type] = {
    dtypes.float16: F16,
    dtypes.bfloat16: I16,
    dtypes.float32: F32,
    dtypes.float64: F64,
    dtypes.int8: I8,
    dtypes.int16: I16,
    dtypes.int32: I32,
    dtypes.int64: I64,
    dtypes.uint8: I8,
    dtypes.uint16: I16,
    dtypes.uint32: I32,
    dtypes.uint64: I64,
    dtypes.bool_: I8,
    dtypes.complex64: C64,
    dtypes.complex128: C128,
    **{dtype: I8 for dtype in dtypes.NARROW},
}
COMPUTE: dict[np.dtype, ir.Type] = {**STORAGE, dtypes.float16: F32, dtypes.bfloat16: F32,
                                    dtypes.bool_: I1,
                                    **{dtype: F32 for dtype in dtypes.NARROW_FLOATING}}
# The dtypes whose results are computed wider and rounded to them after every op.
ROUNDED = (dtypes.float16, dtypes.bfloat16, *dtypes.NARROW)
# The bits of the narrow integers, and which of them are unsigned.
_NARROW_BITS = {dtypes.int4: 4, dtypes.uint4: 4, dtypes.int2: 2, dtypes.uint2: 2}
_UNSIGNED = frozenset({*dtypes.UNSIGNED, dtypes.uint4, dtypes.uint2})


def kind(dtype: np.dtype) -> str:
    """'f' (floating), 'c' (complex), 'i' (signed), 'u' (unsigned) or 'b' (bool): what a
    rule branches on."""
    if dtype in dtypes.FLOATING or dtype in dtypes.NARROW_FLOATING:
        return "f"
    if dtype in dtypes.COMPLEX:
        return "c"
    if dtype == dtypes.bool_:
        return "b"
    return "u" if dtype in _UNSIGNED else "i"


def storage_type(dtype: np.dtype) -> ir.Type:
    try:
        return STORAGE[dtype]
    except KeyError:
        raise NotImplementedError(f"codegen does not support dtype {dtype}") from None


class Emitter:
    """Builds instructions at the builder's position; `libm` names the math functions to
    call through LLVM intrinsics (libm on the CPU) instead of expanding them inline."""

    def __init__(self, builder: ir.IRBuilder, libm: frozenset[str] = frozenset()) -> None:
        self.b = builder
        self.libm = libm
        # Compute values known to hold a float16 or bfloat16 exactly (loaded, or rounded):
        # rounding them again changes nothing, and storing a bfloat16 one needs no rounding.
        self._exact: dict[int, ir.Value] = {}

    def exact(self, value: ir.Value) -> ir.Value:
        """`value`, noted as holding a half float exactly."""
        self._exact[id(value)] = value
        return value

    def is_exact(self, value: ir.Value) -> bool:
        """Whether `value` is noted as holding a half float exactly (`exact`)."""
        return self._exact.get(id(value)) is value

    @property
    def module(self) -> ir.Module:
        return self.b.module

    # -- constants and intrinsics -------------------------------------------------------

    @staticmethod
    def const(ty: ir.Type, value: complex | float | int | bool) -> ir.Constant:
        if isinstance(ty, ir.LiteralStructType):  # complex: (real, imaginary)
            part = ty.elements[0]
            return ir.Constant(ty, [ir.Constant(part, complex(value).real),
                                    ir.Constant(part, complex(value).imag)])
        if isinstance(ty, ir.IntType):
            if ty.width == 1:
                return ir.Constant(ty, int(bool(value)))
            half = 1 << (ty.width - 1)  # two's complement, printed signed: -1 not 4294967295
            return ir.Constant(ty, (int(value) + half) % (2 * half) - half)
        return ir.Constant(ty, float(value))

    def like(self, value: ir.Value, constant: complex | float | int) -> ir.Constant:
        """A constant of `value`'s type."""
        return self.const(value.type, constant)

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        """The declaration of `name` (full name, type suffixes included), added once."""
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, list(args)), name)

    def call(self, base: str, *args: ir.Value) -> ir.Value:
        """Call the overloaded intrinsic ``llvm.<base>`` on arguments of one float type."""
        ty = args[0].type
        suffix = "f32" if ty == F32 else "f64"
        function = self.intrinsic(f"llvm.{base}.{suffix}", ty, [a.type for a in args])
        return self.b.call(function, list(args))

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        """a * b + c rounded once: the same result on every target, unlike contraction."""
        return self.call("fma", a, b, c)

    # -- comparisons, selection ----------------------------------------------------------

    def is_nan(self, x: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", x, x)

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(cond, a, b)

    def clamp(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        """x limited to [lo, hi]; NaN stays NaN (both compares are false for it)."""
        x = self.select(self.b.fcmp_ordered(">", x, self.like(x, hi)), self.like(x, hi), x)
        return self.select(self.b.fcmp_ordered("<", x, self.like(x, lo)), self.like(x, lo), x)

    def poly(self, x: ir.Value, coefficients: Sequence[float]) -> ir.Value:
        """Horner's rule with fma, highest-degree coefficient first."""
        result = self.like(x, coefficients[0])
        for c in coefficients[1:]:
            result = self.fma(result, x, self.like(x, c))
        return result

    # -- float bit access ------------------------------------------------------------------

    @staticmethod
    def int_type_of(x: ir.Value) -> ir.IntType:
        return I32 if x.type == F32 else I64

    def bits(self, x: ir.Value) -> ir.Value:
        return self.b.bitcast(x, self.int_type_of(x))

    def from_bits(self, n: ir.Value, ty: ir.Type) -> ir.Value:
        return self.b.bitcast(n, ty)

    # -- storage <-> compute -----------------------------------------------------------------

    def load(self, pointer: ir.Value, dtype: np.dtype) -> ir.Value:
        """Load one element of `dtype` and bring it to its compute type."""
        raw = self.b.load(pointer, typ=storage_type(dtype))
        if dtype == dtypes.bool_:
            return self.b.icmp_unsigned("!=", raw, ir.Constant(I8, 0))
        if dtype == dtypes.float16:
            return self.exact(self.b.fpext(raw, F32))
        if dtype == dtypes.bfloat16:
            wide = self.b.shl(self.b.zext(raw, I32), self.const(I32, 16))
            return self.exact(self.from_bits(wide, F32))
        if dtype in dtypes.NARROW_FLOATING:
            return narrow.decode(self.b, raw, dtype)
        if dtype in _NARROW_BITS:
            return self._extend_low_bits(raw, dtype)
        return raw

    def _extend_low_bits(self, value: ir.Value, dtype: np.dtype) -> ir.Value:
        """A narrow integer's value from the low bits of the byte `value`."""
        spare = self.const(I8, 8 - _NARROW_BITS[dtype])
        shifted = self.b.shl(value, spare)
        return (self.b.lshr if dtype in _UNSIGNED else self.b.ashr)(shifted, spare)

    def store(self, value: ir.Value, pointer: ir.Value, dtype: np.dtype) -> None:
        """Store a compute-type value as one element of `dtype`."""
        if dtype == dtypes.bool_:
            value = self.b.zext(value, I8)
        elif dtype == dtypes.float16:
            value = self.b.fptrunc(value, F16)
        elif dtype == dtypes.bfloat16:
            value = (self.exact_to_bf16_bits(value) if self.is_exact(value)
                     else self.float_to_bf16_bits(value))
        elif dtype in dtypes.NARROW_FLOATING:
            value = narrow.encode(self.b, value, dtype)
        elif dtype in _NARROW_BITS:
            value = self.b.and_(value, self.const(I8, (1 << _NARROW_BITS[dtype]) - 1))
        self.b.store(value, pointer)

    def float_to_bf16_bits(self, x: ir.Value) -> ir.Value:
        """float -> bfloat16 bits (i16), round to nearest even; NaNs are kept, made quiet."""
        b = self.b
        bits = self.bits(x)
        high = b.lshr(bits, self.const(I32, 16))
        lsb = b.and_(high, self.const(I32, 1))
        rounded = b.lshr(b.add(bits, b.add(lsb, self.const(I32, 0x7FFF))), self.const(I32, 16))
        quiet_nan = b.or_(high, self.const(I32, 0x40))
        return b.trunc(self.select(self.is_nan(x), quiet_nan, rounded), I16)

    def exact_to_bf16_bits(self, x: ir.Value) -> ir.Value:
        """A float that holds a bfloat16 exactly -> its bits (i16): its high half, a NaN
        made quiet, as `float_to_bf16_bits` gives for it."""
        b = self.b
        high = b.lshr(self.bits(x), self.const(I32, 16))
        quiet_nan = b.or_(high, self.const(I32, 0x40))
        return b.trunc(self.select(self.is_nan(x), quiet_nan, high), I16)

    def round_to(self, value: ir.Value, dtype: np.dtype) -> ir.Value:
        """Round a compute value to what `dtype` holds (kept in the compute type): f16, bf16
        and the narrow floats to their precision, the narrow integers to their bits."""
        if dtype in dtypes.NARROW_FLOATING:
            return narrow.decode(self.b, narrow.encode(self.b, value, dtype), dtype)
        if dtype in _NARROW_BITS:
            return self._extend_low_bits(value, dtype)
        if dtype == dtypes.float16:
            return self.exact(self.b.fpext(self.b.fptrunc(value, F16), F32))
        if dtype == dtypes.bfloat16:
            bits = self.b.zext(self.float_to_bf16_bits(value), I32)
            return self.exact(self.from_bits(self.b.shl(bits, self.const(I32, 16)), F32))
        return value

    def double_to_float_odd(self, x: ir.Value) -> ir.Value:
        """double -> float rounded to odd: a later rounding to f16 is then correctly rounded
        (no double rounding), as NumPy's direct float64 -> float16 conversion is."""
        b = self.b
        nearest = b.fptrunc(x, F32)
        back = b.fpext(nearest, F64)
        bits = self.bits(nearest)
        fabs_back, fabs_x = self.call("fabs", back), self.call("fabs", x)
        away = b.fcmp_ordered(">", fabs_back, fabs_x)
        toward_zero = self.select(away, b.sub(bits, self.const(I32, 1)), bits)
        odd = b.or_(toward_zero, self.const(I32, 1))
        exact = b.fcmp_ordered("==", back, x)
        return self.from_bits(self.select(exact, bits, odd), F32)
