"""Window arithmetic the convolutions and pooling share, at run time: whether a window fits
its padded input, how many windows an axis holds, which of a window's taps fall inside the
image; and the walk over a pixel's channels in vector blocks that the depthwise
convolution and pooling share.

The first two are the primitives' shape rules (`primitives.conv.window_positions`) written
for values known only when the op runs (the convolutions' geometry is read from their
dims array), with static values folded.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from stageflow.codegen.llvm.dim_arith import LLVMDims
from stageflow.codegen.llvm.emitter import I1
from stageflow.codegen.llvm.loops import counted_loop, i64
from stageflow.codegen.lowered.rule import OpBuilder, Operand, larger, smaller

BLOCK_BYTES = (64, 32, 16)  # the vector blocks of a pixel's channels, widest first
Taps = tuple[ir.Value, ir.Value]  # [first, last) taps of the window along an axis


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


def window_taps(b: ir.IRBuilder, start: ir.Value, size: ir.Value, window: ir.Value,
                dilation: int) -> Taps:
    """The taps [lo, hi) of a window at `start` (its taps `dilation` apart) that fall
    inside [0, size): ``lo = ceil(-start / dilation)``, ``hi = ceil((size - start) /
    dilation)``, clamped to [0, window]. (Truncating division is a ceiling only for
    non-negative numerators; where one is negative the clamp gives the same bound.)"""
    step = i64(dilation)
    lo = larger(b, i64(0), b.sdiv(b.add(b.sub(i64(0), start), i64(dilation - 1)), step))
    hi = smaller(b, window, b.sdiv(b.add(b.sub(size, start), i64(dilation - 1)), step))
    return lo, hi


def channel_blocks(b: ir.IRBuilder, channels: ir.Value, element: ir.Type | None,
                   itemsize: int, block: Callable[[ir.Value, ir.Type | None], None],
                   widths: tuple[int, ...] = BLOCK_BYTES) -> None:
    """A pixel's channels [0, `channels`): ``block(k, ty)`` from each block's first channel
    k, in vectors of `widths` bytes of `element`s, widest first (ty the vector type; none
    where `element` is None), then one at a time (ty `element`)."""
    start: ir.Value = i64(0)
    if element is not None:
        for width in widths:
            lanes = width // itemsize
            ty = ir.VectorType(element, lanes)
            end = b.add(start, b.mul(b.sdiv(b.sub(channels, start), i64(lanes)), i64(lanes)))
            counted_loop(b, start, end, i64(lanes), lambda k, ty=ty: block(k, ty),
                         f"block{lanes}")
            start = end
    counted_loop(b, start, channels, i64(1), lambda k: block(k, element), "channel",
                 vectorize=False)


def load_block(b: ir.IRBuilder, array: Operand, offset: ir.Value, ty: ir.Type,
               itemsize: int) -> ir.Value:
    """The `ty` (a vector or one element) at element `offset` of `array`."""
    return b.load(array.address(b, offset), typ=ty, align=itemsize)


def store_block(b: ir.IRBuilder, array: Operand, offset: ir.Value, value: ir.Value,
                itemsize: int) -> None:
    """Store `value` (a vector or one element) at element `offset` of `array`."""
    b.store(value, array.address(b, offset), align=itemsize)
