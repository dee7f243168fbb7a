"""Window arithmetic the convolutions and pooling share, at run time: whether a window fits
its padded input, and how many windows an axis holds.

Both are the primitives' shape rules (`primitives.conv.window_positions`) written for
values known only when the op runs (the convolutions' geometry is read from their dims
array), with static values folded.
"""

from __future__ import annotations

from llvmlite import ir

from stageflow.codegen.llvm.dim_arith import LLVMDims
from stageflow.codegen.llvm.emitter import I1
from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.lowered.rule import OpBuilder


def window_fits(ob: OpBuilder, size: ir.Value, window: ir.Value,
                padding: tuple[ir.Value, ir.Value], dilation: ir.Value) -> ir.Value:
    """``size + lo + hi >= (window - 1) * dilation + 1`` and at least one tap (folded where
    the dims and params are constants)."""
    d = LLVMDims(ob.b)
    span = d.add(d.mul(d.sub(window, d.const(1)), dilation), d.const(1))
    too_small = [d.lt(d.add(size, d.add(*padding)), span), d.lt(window, d.const(1))]
    return ob.all_of([ob.b.not_(c) if isinstance(c, ir.Value) else ir.Constant(I1, not c)
                      for c in too_small])


def window_count(b: ir.IRBuilder, size: ir.Value, window: ir.Value, stride: ir.Value,
                 padding: tuple[ir.Value, ir.Value], dilation: ir.Value) -> ir.Value:
    """The windows along an axis of `size` (`window_positions` with run-time values)."""
    span = b.add(b.mul(b.sub(window, i64(1)), dilation), i64(1))
    free = b.sub(b.add(size, b.add(*padding)), span)
    return b.select(b.icmp_signed("<", free, i64(0)), i64(0),
                    b.add(b.sdiv(free, stride), i64(1)))
