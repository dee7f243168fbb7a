"""Pooling: `reduce_window` (max and sum over windows of an NHWC image) and max pooling's
gradient (`max_pool_gradient`) as direct loops.

The output rows of every image are split over the cores (`codegen.lowered.tasks`) from
`MIN_TASK_TAPS` taps a task on. Per output pixel the channels go in vector blocks (256
bytes, then 64, one of 32 and one of 16, then one at a time; float32 and float64, and the
maximum of float16 and bfloat16 in float32 vectors of as many lanes, which holds every
half float exactly, so a maximum stores back without rounding; other dtypes one at a
time), each block's combination kept in registers over the window's taps inside
the input, from the reduction's identity, then stored once: a tap in the padding is
skipped, which is what reading the pad value (the identity) would give. Taps combine in
row-major order, as NumPy's windows do. The op fails (an error code: the NumPy kernel then
runs and raises its error) where the window is larger than the padded input or the input
is not C-contiguous.

Max pooling's gradient walks the same windows: per block of channels, a mask of the lanes
whose element is chosen already; each tap inside the input whose element equals the
pooled maximum, in a lane not yet chosen, takes the cotangent (added to the input
gradient there) and is chosen. Windows that overlap add into the same input rows, so its
tasks are whole images, each zeroing its own gradient first. Half floats compute in
float32 lanes too, each add into the gradient rounded back as the half float's own add
rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.dim_arith import LLVMDims
from stageflow.codegen.llvm.emitter import F16, F32, F64, I1, I16, I32, Emitter
from stageflow.codegen.llvm.functions import memset_zero
from stageflow.codegen.llvm.lanes import nearest_bfloat16, widened_bfloat16
from stageflow.codegen.llvm.loops import counted_loop, fold_add, fold_loop, fold_mul, i64
from stageflow.codegen.llvm.reduce import combine, identity_of
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
    BLOCK_BYTES,
    Taps,
    channel_blocks,
    load_block,
    store_block,
    window_fits,
    window_taps,
)
from stageflow.codegen.targets.cpu import SMALL_KERNEL_ELEMENTS
from stageflow.core import dtypes
from stageflow.core.op_facts import ReductionKind
from stageflow.primitives.conv import Padding, Pair, max_pool_gradient_p, reduce_window_p
from stageflow.primitives.reduction import MAX, SUM

# A task gets at least this many taps (a load and a max or an add each): several times
# what handing it to a worker of the pool costs.
MIN_TASK_TAPS = 1 << 16
VECTOR_ELEMENTS = {np.dtype(np.float32): F32, np.dtype(np.float64): F64}
HALF_FLOATS = (np.dtype(np.float16), dtypes.bfloat16)
# A pixel's channels in blocks of 256 bytes first (LLVM splits the vector into the
# target's registers): four chains of combines per tap where a 64-channel image's four
# 64-byte blocks each walked the window alone, one dependent chain at a time.
POOLING_BLOCK_BYTES = (256, *BLOCK_BYTES)


Geometry = tuple[Pair, Pair, Padding]  # a pooling's window, strides and padding


def walk_windows(b: ir.IRBuilder, x: Operand, out: Operand, geometry: Geometry,
                 rows: tuple[ir.Value, ir.Value],
                 visit: Callable[[ir.Value, ir.Value, Taps, Taps], None]) -> None:
    """Output rows [first, last) of the images (row n * Ho + i being image n's row i), pixel
    by pixel: ``visit(source, target, rows, columns)``, the offsets of its window's top-left
    tap in `x` and of the pixel in `out`, and the window's taps inside the input."""
    window, (sh, sw), padding = geometry
    top, left = padding[0][0], padding[1][0]

    def row(r: ir.Value) -> None:
        n, i = b.sdiv(r, out.dims[1]), b.srem(r, out.dims[1])
        h0 = b.sub(fold_mul(b, i, i64(sh)), i64(top))
        rows_inside = window_taps(b, h0, x.dims[1], i64(window[0]), 1)

        def pixel(j: ir.Value) -> None:
            w0 = b.sub(fold_mul(b, j, i64(sw)), i64(left))
            columns_inside = window_taps(b, w0, x.dims[2], i64(window[1]), 1)
            visit(x.offset(b, [n, h0, w0, i64(0)]), out.offset(b, [n, i, j, i64(0)]),
                  rows_inside, columns_inside)

        counted_loop(b, i64(0), out.dims[2], i64(1), pixel, "j")

    counted_loop(b, rows[0], rows[1], i64(1), row, "row")


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
        ob.fail_unless(ob.all_of([
            window_fits(ob, x.dims[1 + axis], i64(self.window[axis]),
                        (i64(self.padding[axis][0]), i64(self.padding[axis][1])), i64(1))
            for axis in (0, 1)]), 0)
        ob.expect_output(0, ob.spec.primitive.dims(
            LLVMDims(b), [x.dims], window=self.window, strides=self.strides,
            padding=self.padding))
        row_major(ob, 0)
        rows = fold_mul(b, out.dims[0], out.dims[1])
        taps = fold_mul(b, out.size(b), i64(self.window[0] * self.window[1]))
        run_tasks(ob, "rows", rows, task_count(b, rows, taps, MIN_TASK_TAPS), self._rows)

    def _rows(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Output rows [first, last) of the images, row n * Ho + i being image n's row i."""
        b = ob.b
        x = ob.inputs[0]
        x = Operand(x.pointer, x.dims, contiguous_strides(b, x.dims), x.dtype)
        out = ob.outputs[0]
        walk_windows(b, x, out, (self.window, self.strides, self.padding), (first, last),
                     lambda *at: self._pixel(b, x, out, *at))

    def _pixel(self, b: ir.IRBuilder, x: Operand, out: Operand, source: ir.Value,
               target: ir.Value, rows: Taps, columns: Taps) -> None:
        """One output pixel at `target` from the window whose top-left tap is at `source`:
        its taps `rows` x `columns` combined, per block of channels."""
        e, dtype, itemsize = Emitter(b), self.dtype, self.dtype.itemsize
        identity = identity_of(self.kind, dtype)
        half = dtype in HALF_FLOATS and self.kind is MAX
        element = F32 if half else VECTOR_ELEMENTS.get(dtype)

        def block(k: ir.Value, ty: ir.Type | None) -> None:
            vector = isinstance(ty, ir.VectorType)

            def load(at: ir.Value) -> ir.Value:
                if vector and half:
                    return _widen_halves(b, load_block(b, x, fold_add(b, at, k),
                                                       _half_vector(dtype, ty), itemsize))
                if vector:
                    return load_block(b, x, fold_add(b, at, k), ty, itemsize)
                return e.load(x.address(b, fold_add(b, at, k)), dtype)

            def tap_row(a: ir.Value, partial: list[ir.Value]) -> list[ir.Value]:
                at = fold_add(b, source, fold_mul(b, a, x.strides[1]))

                def tap(c: ir.Value, inner: list[ir.Value]) -> list[ir.Value]:
                    value = load(fold_add(b, at, fold_mul(b, c, x.strides[2])))
                    return self._combine(e, inner, value)

                return fold_loop(b, columns[0], columns[1], i64(1), partial, tap, "tap")

            start = [ir.Constant(ty, [identity] * ty.count) if vector else identity]
            if vector and self.kind is MAX:
                start.append(ir.Constant(ir.VectorType(I1, ty.count), [0] * ty.count))
            total, *nans = fold_loop(b, rows[0], rows[1], i64(1), start, tap_row, "tap_row")
            if nans:
                total = b.select(nans[0], ir.Constant(ty, [float("nan")] * ty.count), total)
            if vector and half:
                total = _narrow_halves(b, total, dtype)
            if vector:
                store_block(b, out, fold_add(b, target, k), total, itemsize)
            else:
                e.store(total, out.address(b, fold_add(b, target, k)), dtype)

        # (half floats' blocks as wide in float32 lanes as float32's)
        channel_blocks(b, out.dims[3], element, 4 if half else itemsize, block,
                       POOLING_BLOCK_BYTES)

    def _combine(self, e: Emitter, partial: list[ir.Value], y: ir.Value) -> list[ir.Value]:
        """The partial result and `y` combined by the reduction; vectors lane by lane. A
        float maximum propagates NaN, as `combine`'s does: of vectors, the larger (one
        compare and select, one instruction on x86) beside a mask of the lanes that have
        seen a NaN, which `_pixel` turns into NaN at the end. LLVM's NaN-propagating
        ``llvm.maximum`` took six dependent instructions per tap on AVX-512, one chain
        that set the pace of the whole window."""
        x, *nans = partial
        if not isinstance(x.type, ir.VectorType):
            return [combine(e, self.kind, self.dtype, x, y)]
        b = e.b
        if self.kind is SUM:
            return [b.fadd(x, y)]
        return [b.select(b.fcmp_ordered(">", y, x), y, x),
                b.or_(nans[0], b.fcmp_unordered("uno", y, y))]


def _half_vector(dtype: np.dtype, compute: ir.VectorType) -> ir.VectorType:
    """The vector of `dtype` (float16 or bfloat16) with `compute`'s lanes, as stored."""
    return ir.VectorType(F16 if dtype == np.float16 else I16, compute.count)


def _widen_halves(b: ir.IRBuilder, raw: ir.Value) -> ir.Value:
    """Half floats as stored (halves, or bfloat16's bits) to float32 lanes, exactly."""
    if raw.type.element == F16:
        return b.fpext(raw, ir.VectorType(F32, raw.type.count))
    return widened_bfloat16(b, raw)


def _narrow_halves(b: ir.IRBuilder, value: ir.Value, dtype: np.dtype) -> ir.Value:
    """float32 lanes that each hold a `dtype` value (or NaN) back to `dtype`'s storage:
    no rounding is needed (a NaN stays a quiet NaN: its high bits are kept)."""
    lanes = value.type.count
    if dtype == np.float16:
        return b.fptrunc(value, ir.VectorType(F16, lanes))
    bits = b.bitcast(value, ir.VectorType(I32, lanes))
    high = b.lshr(bits, ir.Constant(bits.type, [16] * lanes))
    return b.trunc(high, ir.VectorType(I16, lanes))


def _rounded_halves(b: ir.IRBuilder, value: ir.Value, dtype: np.dtype) -> ir.Value:
    """float32 lanes rounded to `dtype`'s storage (to nearest even, as NumPy's float16
    and ml_dtypes' bfloat16 round a float32 result)."""
    if dtype == np.float16:
        return b.fptrunc(value, ir.VectorType(F16, value.type.count))
    return nearest_bfloat16(b, value)


@lowering(reduce_window_p, generic_from=SMALL_KERNEL_ELEMENTS)
def _reduce_window(spec: OpSpec) -> ReduceWindow | None:
    dtype, params = spec.inputs[0].dtype, spec.params
    kind = {"max": MAX, "sum": SUM}[params["kind"]]
    if dtype not in kind.native_dtypes:
        return None
    return ReduceWindow(kind, tuple(params["window"]), tuple(params["strides"]),
                        tuple(tuple(p) for p in params["padding"]), dtype)


@dataclass(frozen=True)
class MaxPoolGradient:
    """``max_pool_gradient(x, pooled, g)`` of one window, strides and padding, all static;
    float32 or float64, or a half float computed in float32 lanes: its values widened
    exactly, each sum into the gradient rounded to the half float as its own ``add``
    rounds it."""

    window: Pair
    strides: Pair
    padding: Padding
    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, x = ob.b, ob.inputs[0]
        ob.fail_unless(ob.all_of([
            window_fits(ob, x.dims[1 + axis], i64(self.window[axis]),
                        (i64(self.padding[axis][0]), i64(self.padding[axis][1])), i64(1))
            for axis in (0, 1)]), 0)
        pooled = reduce_window_p.dims(LLVMDims(b), [x.dims], window=self.window,
                                      strides=self.strides, padding=self.padding)
        for index in (1, 2):  # the pooled result and the cotangent: the pooling's dims
            ob.fail_unless(ob.all_of([ob.eq(have, want) for have, want in zip(
                ob.inputs[index].dims, pooled, strict=True)]), index)
        ob.expect_output(0, max_pool_gradient_p.dims(LLVMDims(b), [x.dims]))
        for index in range(3):
            row_major(ob, index)
        out = ob.inputs[1]
        images = x.dims[0]
        taps = fold_mul(b, out.size(b), i64(self.window[0] * self.window[1]))
        run_tasks(ob, "images", images, task_count(b, images, taps, MIN_TASK_TAPS),
                  self._images)

    def _images(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
                memory: ir.Value) -> None:
        """Images [first, last): their gradient zeroed, then every window's cotangent
        added where it goes."""
        b = ob.b
        x, pooled, g = (Operand(v.pointer, v.dims, contiguous_strides(b, v.dims), v.dtype)
                        for v in ob.inputs)
        dx = ob.outputs[0]
        dx = Operand(dx.pointer, dx.dims, contiguous_strides(b, dx.dims), dx.dtype)
        itemsize = self.dtype.itemsize
        memset_zero(b, dx.address(b, fold_mul(b, first, dx.strides[0])),
                    fold_mul(b, fold_mul(b, b.sub(last, first), dx.strides[0]), i64(itemsize)))
        walk_windows(b, x, pooled, (self.window, self.strides, self.padding),
                     (fold_mul(b, first, pooled.dims[1]), fold_mul(b, last, pooled.dims[1])),
                     lambda *at: self._pixel(b, (x, pooled, g, dx), *at))

    def _pixel(self, b: ir.IRBuilder, operands: tuple[Operand, ...], source: ir.Value,
               target: ir.Value, rows: Taps, columns: Taps) -> None:
        """One window: at `target` in the pooled result and the cotangent, its taps `rows`
        x `columns` from `source` in the input and its gradient, per block of channels."""
        x, pooled, g, dx = operands
        e, dtype, itemsize = Emitter(b), self.dtype, self.dtype.itemsize
        half = dtype in HALF_FLOATS

        def block(k: ir.Value, ty: ir.Type) -> None:
            lanes = ty.count if isinstance(ty, ir.VectorType) else None

            def load(array: Operand, offset: ir.Value) -> ir.Value:
                if half and lanes:
                    return _widen_halves(b, load_block(b, array, offset,
                                                       _half_vector(dtype, ty), itemsize))
                if half:
                    return e.load(array.address(b, offset), dtype)
                return load_block(b, array, offset, ty, itemsize)

            def store(offset: ir.Value, value: ir.Value) -> None:
                if half and lanes:
                    store_block(b, dx, offset, _rounded_halves(b, value, dtype), itemsize)
                elif half:
                    e.store(value, dx.address(b, offset), dtype)
                else:
                    store_block(b, dx, offset, value, itemsize)

            maximum = load(pooled, fold_add(b, target, k))
            cotangent = load(g, fold_add(b, target, k))
            zero = ir.Constant(ty, [0.0] * lanes if lanes else 0.0)

            def tap_row(a: ir.Value, chosen: list[ir.Value]) -> list[ir.Value]:
                at = fold_add(b, source, fold_mul(b, a, x.strides[1]))

                def tap(c: ir.Value, inner: list[ir.Value]) -> list[ir.Value]:
                    offset = fold_add(b, fold_add(b, at, fold_mul(b, c, x.strides[2])), k)
                    value = load(x, offset)
                    hit = b.and_(b.fcmp_ordered("==", value, maximum), b.not_(inner[0]))
                    store(offset, b.fadd(load(dx, offset), b.select(hit, cotangent, zero)))
                    return [b.or_(inner[0], hit)]

                return fold_loop(b, columns[0], columns[1], i64(1), chosen, tap, "tap")

            none = ir.Constant(ir.VectorType(I1, lanes), [0] * lanes) if lanes else \
                ir.Constant(I1, 0)
            fold_loop(b, rows[0], rows[1], i64(1), [none], tap_row, "tap_row")

        # (half floats' blocks as wide in float32 lanes as float32's)
        channel_blocks(b, pooled.dims[3], F32 if half else VECTOR_ELEMENTS[dtype],
                       4 if half else itemsize, block)


@lowering(max_pool_gradient_p)
def _max_pool_gradient(spec: OpSpec) -> MaxPoolGradient | None:
    dtype, params = spec.inputs[0].dtype, spec.params
    if dtype not in VECTOR_ELEMENTS and dtype not in HALF_FLOATS:
        return None
    return MaxPoolGradient(tuple(params["window"]), tuple(params["strides"]),
                           tuple(tuple(p) for p in params["padding"]), dtype)
