"""Pooling: `reduce_window` (max and sum over windows of an NHWC image) as direct loops.

The loops walk the output in NHWC order and, for each window tap inside the input, combine
an input pixel's channels into the output pixel's: the channel loop is innermost and
contiguous, so LLVM vectorises it. Taps in the padding are skipped, which is what reading
the pad value (the reduction's identity) would give. The op fails (an error code: the
NumPy kernel then runs and raises its error) where the window is larger than the padded
input or the input is not C-contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.dim_arith import LLVMDims
from stageflow.codegen.llvm.emitter import Emitter
from stageflow.codegen.llvm.loops import fold_add, fold_mul, i64, range_loop
from stageflow.codegen.llvm.reduce import combine, identity_of
from stageflow.codegen.lowered.rule import OpBuilder, OpSpec, larger, lowering, row_major, smaller
from stageflow.codegen.lowered.windows import window_fits
from stageflow.core.op_facts import ReductionKind
from stageflow.primitives.conv import Padding, Pair, reduce_window_p
from stageflow.primitives.reduction import MAX, SUM


@dataclass(frozen=True)
class ReduceWindow:
    """``reduce_window(x)`` of one kind, window, strides and padding, all static."""

    kind: ReductionKind
    window: Pair
    strides: Pair
    padding: Padding
    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        height, width, channels = x.dims[1:]
        ob.fail_unless(ob.all_of([
            window_fits(ob, x.dims[1 + axis], i64(self.window[axis]),
                        (i64(self.padding[axis][0]), i64(self.padding[axis][1])), i64(1))
            for axis in (0, 1)]), 0)
        ob.expect_output(0, ob.spec.primitive.dims(
            LLVMDims(b), [x.dims], window=self.window, strides=self.strides,
            padding=self.padding))
        x = row_major(ob, 0)
        e, dtype = Emitter(b), self.dtype
        identity = identity_of(self.kind, dtype)
        (sh, sw), (top, left) = self.strides, (self.padding[0][0], self.padding[1][0])

        def taps(start: ir.Value, size: ir.Value, window: int) -> tuple[ir.Value, ir.Value]:
            """The taps [lo, hi) of a window starting at `start` that fall inside [0, size)."""
            lo = larger(b, i64(0), b.sub(i64(0), start))
            hi = smaller(b, i64(window), b.sub(size, start))
            return lo, hi

        def pixel(n: ir.Value, i: ir.Value, j: ir.Value) -> None:
            target = out.offset(b, [n, i, j, i64(0)])
            range_loop(b, channels, lambda k: e.store(identity, out.address(b, b.add(target, k)),
                                                      dtype), "init")
            h0 = b.sub(fold_mul(b, i, i64(sh)), i64(top))
            w0 = b.sub(fold_mul(b, j, i64(sw)), i64(left))
            a_lo, a_hi = taps(h0, height, self.window[0])
            c_lo, c_hi = taps(w0, width, self.window[1])

            def tap(a: ir.Value, c: ir.Value) -> None:
                source = x.offset(b, [n, b.add(h0, a), b.add(w0, c), i64(0)])

                def channel(k: ir.Value) -> None:
                    to = out.address(b, b.add(target, k))
                    value = e.load(x.address(b, fold_add(b, source, fold_mul(b, k, x.strides[3]))),
                                   dtype)
                    e.store(combine(e, self.kind, dtype, e.load(to, dtype), value), to, dtype)

                range_loop(b, channels, channel, "c")

            range_loop(b, a_hi, lambda a: range_loop(b, c_hi, lambda c: tap(a, c), "tap", c_lo),
                       "tap_row", a_lo)

        range_loop(b, out.dims[0], lambda n: range_loop(
            b, out.dims[1], lambda i: range_loop(b, out.dims[2], lambda j: pixel(n, i, j), "j"),
            "i"), "n")


@lowering(reduce_window_p)
def _reduce_window(spec: OpSpec) -> ReduceWindow | None:
    dtype, params = spec.inputs[0].dtype, spec.params
    kind = {"max": MAX, "sum": SUM}[params["kind"]]
    if dtype not in kind.native_dtypes:
        return None
    return ReduceWindow(kind, tuple(params["window"]), tuple(params["strides"]),
                        tuple(tuple(p) for p in params["padding"]), dtype)
