"""Depthwise convolution (`depthwise_conv2d`) as direct loops over the output pixels.

Per output pixel the output channels go in vector blocks (64 bytes, then one of 32 and one
of 16, then one at a time), each block's sums kept in a register over the window's taps
inside the image: per tap one vector of the input pixel's channels and one of the tap's
filter row, one fused multiply-add, then one store. Both runs are contiguous in NHWC and
[kh, kw, C, M], so nothing is copied and nothing gathered where M is 1; for M > 1 output
channel k reads input channel k // M, whose lanes are loaded one by one. Taps in the
padding are skipped (they would add zeros). A pixel whose whole window lies inside the
image runs a copy of the loops whose tap bounds are the constants 0 and kh, kw, which
LLVM unrolls; the others find their taps at run time.

The output rows of every image are split over the cores (`codegen.lowered.tasks`) from
`MIN_TASK_MACS` multiply-adds a task on. The op fails (an error code: the NumPy kernel
then runs and raises its error) where the window is larger than the padded input, the
channels disagree, or an input is not C-contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.dim_arith import LLVMDims
from stageflow.codegen.llvm.emitter import F32, F64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import counted_loop, fold_add, fold_loop, fold_mul, i64
from stageflow.codegen.lowered.rule import (
    OpBuilder,
    Operand,
    OpSpec,
    contiguous_strides,
    lowering,
    row_major,
)
from stageflow.codegen.lowered.tasks import run_tasks, task_count
from stageflow.codegen.lowered.windows import (
    Taps,
    channel_blocks,
    load_block,
    store_block,
    window_fits,
    window_taps,
)
from stageflow.codegen.targets import platform
from stageflow.primitives.conv import Padding, Pair
from stageflow.primitives.depthwise import depthwise_conv2d_p

# A task gets at least this many multiply-adds: several times what handing it to a worker
# of the pool costs, at the few multiply-adds a cycle these loops (a load of the input and
# of the filter per FMA) reach.
MIN_TASK_MACS = 1 << 16


@dataclass(frozen=True)
class DepthwiseConv:
    """``depthwise_conv2d(x, w)`` of static strides, padding and dilations, float32 or
    float64."""

    strides: Pair
    padding: Padding
    dilations: Pair
    dtype: np.dtype

    @property
    def _real(self) -> ir.Type:
        return F32 if self.dtype == np.float32 else F64

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        x, w = ob.inputs
        ob.fail_unless(ob.all_of([
            window_fits(ob, x.dims[1 + axis], w.dims[axis],
                        (i64(self.padding[axis][0]), i64(self.padding[axis][1])),
                        i64(self.dilations[axis])) for axis in (0, 1)]), 0)
        ob.fail_unless(ob.eq(x.dims[3], w.dims[2]), 1)
        ob.expect_output(0, ob.spec.primitive.dims(
            LLVMDims(b), [x.dims, w.dims], strides=self.strides, padding=self.padding,
            dilations=self.dilations))
        row_major(ob, 0)
        row_major(ob, 1)
        out = ob.outputs[0]
        rows = fold_mul(b, out.dims[0], out.dims[1])
        macs = fold_mul(b, out.size(b), fold_mul(b, w.dims[0], w.dims[1]))
        run_tasks(ob, "rows", rows, task_count(b, rows, macs, MIN_TASK_MACS), self._rows)

    def _rows(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Output rows [first, last) of the images, row n * Ho + i being image n's row i."""
        b = ob.b
        x, w = (Operand(a.pointer, a.dims, contiguous_strides(b, a.dims), a.dtype)
                for a in ob.inputs)
        out = ob.outputs[0]
        kh, kw = w.dims[:2]
        (sh, sw), (dh, dw) = self.strides, self.dilations
        top, left = self.padding[0][0], self.padding[1][0]

        def row(r: ir.Value) -> None:
            n, i = b.sdiv(r, out.dims[1]), b.srem(r, out.dims[1])
            h0 = b.sub(fold_mul(b, i, i64(sh)), i64(top))
            rows_inside = window_taps(b, h0, x.dims[1], kh, dh)
            row_whole = b.and_(b.icmp_signed("==", rows_inside[0], i64(0)),
                               b.icmp_signed("==", rows_inside[1], kh))

            def pixel(j: ir.Value) -> None:
                w0 = b.sub(fold_mul(b, j, i64(sw)), i64(left))
                columns_inside = window_taps(b, w0, x.dims[2], kw, dw)
                whole = b.and_(row_whole, b.and_(
                    b.icmp_signed("==", columns_inside[0], i64(0)),
                    b.icmp_signed("==", columns_inside[1], kw)))
                target = out.offset(b, [n, i, j, i64(0)])
                source = x.offset(b, [n, h0, w0, i64(0)])
                with b.if_else(whole) as (inside, edge):
                    with inside:
                        self._pixel(b, x, w, out, source, target, (i64(0), kh), (i64(0), kw))
                    with edge:
                        self._pixel(b, x, w, out, source, target, rows_inside,
                                    columns_inside)

            counted_loop(b, i64(0), out.dims[2], i64(1), pixel, "j")

        counted_loop(b, first, last, i64(1), row, "row")

    def _pixel(self, b: ir.IRBuilder, x: Operand, w: Operand, out: Operand, source: ir.Value,
               target: ir.Value, rows: Taps, columns: Taps) -> None:
        """One output pixel at `target` from the window whose top-left tap is at `source`
        (inside the image or not): its taps `rows` x `columns` summed, per vector block of
        output channels, then the channels left one by one."""
        (dh, dw), itemsize = self.dilations, self.dtype.itemsize
        channels = out.dims[3]
        multiplier = w.dims[3]
        row_step = fold_mul(b, i64(dh), x.strides[1])
        column_step = fold_mul(b, i64(dw), x.strides[2])

        def block(k: ir.Value, ty: ir.Type) -> None:
            lanes = ty.count if isinstance(ty, ir.VectorType) else 1

            def load_x(at: ir.Value) -> ir.Value:
                if _is_one(multiplier):
                    return load_block(b, x, fold_add(b, at, k), ty, itemsize)
                values = [load_block(b, x, b.add(at, b.sdiv(b.add(k, i64(lane)), multiplier)),
                                     self._real, itemsize) for lane in range(lanes)]
                if lanes == 1:
                    return values[0]
                vector = ir.Constant(ty, ir.Undefined)
                for lane, value in enumerate(values):
                    vector = b.insert_element(vector, value, ir.Constant(ir.IntType(32), lane))
                return vector

            def tap_row(a: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                at = fold_add(b, source, fold_mul(b, a, row_step))
                filters = fold_mul(b, a, w.strides[0])

                def tap(c: ir.Value, inner: list[ir.Value]) -> list[ir.Value]:
                    pixel = fold_add(b, at, fold_mul(b, c, column_step))
                    row = fold_add(b, filters, fold_mul(b, c, w.strides[1]))
                    weight = load_block(b, w, fold_add(b, row, k), ty, itemsize)
                    return [_fma(b, load_x(pixel), weight, inner[0])]

                return fold_loop(b, columns[0], columns[1], i64(1), sums, tap, "tap")

            zero = ir.Constant(ty, [ir.Constant(self._real, 0.0)] * lanes
                               if isinstance(ty, ir.VectorType) else 0.0)
            (total,) = fold_loop(b, rows[0], rows[1], i64(1), [zero], tap_row, "tap_row")
            store_block(b, out, fold_add(b, target, k), total, itemsize)

        channel_blocks(b, channels, self._real, itemsize, block)


def _is_one(value: ir.Value) -> bool:
    return isinstance(value, ir.Constant) and value.constant == 1


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """``x * y + z`` rounded once where the target has a fused multiply-add."""
    ty = z.type
    element = ty.element if isinstance(ty, ir.VectorType) else ty
    bits = 32 if element == F32 else 64
    suffix = f"v{ty.count}f{bits}" if isinstance(ty, ir.VectorType) else f"f{bits}"
    return b.call(declare(b.module, platform.current().fma(suffix), ty, [ty, ty, ty]), [x, y, z])


@lowering(depthwise_conv2d_p)
def _depthwise_conv2d(spec: OpSpec) -> DepthwiseConv | None:
    dtype, params = spec.inputs[0].dtype, spec.params
    if dtype not in (np.float32, np.float64):
        return None
    return DepthwiseConv(tuple(params["strides"]), tuple(tuple(p) for p in params["padding"]),
                         tuple(params["dilations"]), dtype)
