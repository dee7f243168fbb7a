"""How reductions combine values in LLVM IR: the combine of each kind, its identity, and the
pairwise total of `LANES` partial sums. Shared by the lowered reductions and by kernels that
end in reductions, so both round as NumPy's pairwise sums do. The kind is the primitive's
`ReductionKind` fact: its `combine` primitive and `identity` value decide the code.

Values are combined in their dtype's compute type (`emitter.COMPUTE`): half floats are
loaded widened to float32 (`Emitter.load`) and stored narrowed (`Emitter.store`), which is
exact for max and min, whose result is one of the elements."""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm import complex_math
from stageflow.codegen.llvm.emitter import COMPUTE, I64, Emitter, kind
from stageflow.core.op_facts import ReductionKind
from stageflow.primitives.elementwise import add_p, maximum_p, minimum_p, multiply_p

LANES = 8  # partial sums per row for float sums along the innermost axis


# The intrinsics of the extremum combines: on floats (``llvm.maximum``, NaN propagating) and
# on integers, after the signedness (``llvm.smax``, ``llvm.umin``, ...).
_EXTREMA = {maximum_p: ("maximum", "max"), minimum_p: ("minimum", "min")}


def combine(e: Emitter, reduction: ReductionKind, dtype: np.dtype, x: ir.Value,
            y: ir.Value) -> ir.Value:
    """`x` and `y` (of `dtype`'s compute type) combined by `reduction` (max and min of
    floats propagate NaN, as NumPy's do; complex sums and products combine as the
    elementwise ops do)."""
    b, number = e.b, kind(dtype)
    floating = number == "f"
    if number == "c":
        return (complex_math.add if reduction.combine is add_p
                else complex_math.multiply)(e, x, y)
    if reduction.combine is add_p:
        return b.fadd(x, y) if floating else b.add(x, y)
    if reduction.combine is multiply_p:
        return b.fmul(x, y) if floating else b.mul(x, y)
    on_floats, on_integers = _EXTREMA[reduction.combine]
    if floating:
        return e.call(on_floats, x, y)
    signed = "s" if number == "i" else "u"
    base = f"llvm.{signed}{on_integers}"
    ty = x.type
    function = e.intrinsic(f"{base}.{ty}", ty, [ty, ty])
    return b.call(function, [x, y])


def identity_of(reduction: ReductionKind, dtype: np.dtype) -> ir.Value:
    """The value a reduction of `reduction`'s kind starts from (what it returns over no
    elements), in `dtype`'s compute type; an infinite identity is an integer dtype's lowest
    or highest value."""
    ty = COMPUTE[dtype]
    if kind(dtype) in "fc":
        return Emitter.const(ty, float(reduction.identity))
    if math.isinf(reduction.identity):
        info = np.iinfo(dtype)
        return Emitter.const(ty, int(info.min if reduction.identity < 0 else info.max))
    return ir.Constant(ty, int(reduction.identity))


def lanes_total(b: ir.IRBuilder, partial: ir.Value) -> ir.Value:
    """The `LANES` partial sums of a vector added pairwise (lanes i and i + width/2, halving
    the width), as NumPy's pairwise summation adds neighbouring blocks."""
    width = LANES
    while width > 1:
        width //= 2
        low = b.shuffle_vector(partial, partial, ir.Constant(
            ir.VectorType(ir.IntType(32), width), list(range(width))))
        high = b.shuffle_vector(partial, partial, ir.Constant(
            ir.VectorType(ir.IntType(32), width), list(range(width, 2 * width))))
        partial = b.fadd(low, high)
    return b.extract_element(partial, ir.Constant(I64, 0))
