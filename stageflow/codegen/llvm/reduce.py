"""How reductions combine values in LLVM IR: the combine of each kind, its identity, and the
pairwise total of `LANES` partial sums. Shared by the lowered reductions and by kernels that
end in reductions, so both round as NumPy's pairwise sums do."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I64, Emitter

LANES = 8  # partial sums per row for float sums along the innermost axis


def combine(e: Emitter, kind: str, dtype: np.dtype, x: ir.Value, y: ir.Value) -> ir.Value:
    """`x` and `y` combined by `kind` (max and min of floats propagate NaN, as NumPy's do)."""
    b, floating = e.b, dtype.kind == "f"
    if kind == "sum":
        return b.fadd(x, y) if floating else b.add(x, y)
    if kind == "prod":
        return b.fmul(x, y) if floating else b.mul(x, y)
    if floating:
        return e.call("maximum" if kind == "max" else "minimum", x, y)
    signed = "s" if dtype.kind == "i" else "u"
    base = f"llvm.{signed}{kind}"
    ty = x.type
    function = e.intrinsic(f"{base}.{ty}", ty, [ty, ty])
    return b.call(function, [x, y])


def identity_of(kind: str, dtype: np.dtype, ty: ir.Type) -> ir.Value:
    """The value a reduction of `kind` starts from (what it returns over no elements)."""
    if kind in ("sum", "prod"):
        value = 0 if kind == "sum" else 1
        return ir.Constant(ty, float(value) if dtype.kind == "f" else value)
    low = kind == "max"
    if dtype.kind == "f":
        return ir.Constant(ty, float("-inf") if low else float("inf"))
    info = np.iinfo(dtype)
    return Emitter.const(ty, int(info.min if low else info.max))


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
