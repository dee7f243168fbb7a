"""Lowerings of the reductions: reduce_sum, reduce_prod, reduce_max, reduce_min over a set of
axes (keepdims or not), argmax and argmin along one axis.

A reduction walks its input in row-major order and combines each element into the output
element it reduces to (stride 0 on reduced axes), so an input is read once, in the order it
is laid out, whichever axes are reduced: reducing a leading axis adds whole rows into the
output, a loop LLVM vectorises without reassociating anything. When the innermost axis is
reduced, the row is folded into a register; float sums then keep `LANES` partial sums (one
vector register of them, combined at the end of the row, loaded a vector at a time where
the row is contiguous), which breaks the dependency chain of one add per element and, like
NumPy's pairwise summation, keeps the rounding error of a long row small; complex rows are
summed in order in complex128 (complex64 ones rounded once at the end). Results
therefore match NumPy's to rounding, not bit for bit; integer results (wrapping as NumPy's
do) and max/min/argmax/argmin are exact. max and min propagate NaN (``llvm.maximum``/
``llvm.minimum``), and argmax/argmin return the first NaN as NumPy does. Half floats are
loaded widened to float32 and stored back (`Emitter.load`, `Emitter.store`): exact for max,
min, argmax and argmin, the only reductions native to them (`ReductionKind.native_dtypes`).
A max, min, argmax or argmin over an empty axis returns an error code, so the NumPy kernel
runs and raises its error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm import complex_math
from stageflow.codegen.llvm.emitter import C128, I64, Emitter, storage_type
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import (
    counted_loop,
    fold_add,
    fold_loop,
    fold_mul,
    fold_product,
    i64,
)
from stageflow.codegen.llvm.reduce import LANES, combine, identity_of, lanes_total
from stageflow.codegen.lowered.rule import OpBuilder, OpSpec, is_row_major, lowering, nest
from stageflow.codegen.lowered.tasks import run_tasks, task_count
from stageflow.codegen.targets.cpu import SMALL_KERNEL_ELEMENTS
from stageflow.core import dtypes
from stageflow.core.op_facts import ReductionKind
from stageflow.primitives.elementwise import add_p, multiply_p
from stageflow.primitives.reduction import (
    MAX,
    MIN,
    SUM,
    argmax_p,
    argmin_p,
    reduce_max_p,
    reduce_min_p,
    reduce_prod_p,
    reduce_sum_p,
)

# A task of a reduction split over the cores gets at least this many elements: memory
# traffic several times what handing it to the pool's worker costs.
MIN_TASK_ELEMENTS = 1 << 16
VECTOR_BYTES = 64  # an AVX-512 register of partial sums per block of columns
ROW_ACCUMULATORS = 4
_PTR = ir.PointerType()
# The dtypes argmax and argmin compare in: those max and min reduce in (`ArgReduce`).
ARG_DTYPES = MAX.native_dtypes


@dataclass(frozen=True)
class Reduce:
    kind: ReductionKind  # the primitive's: sum, prod, max, min
    axes: tuple[int, ...]
    keepdims: bool
    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        e = Emitter(b)
        kept = [d for a, d in enumerate(x.dims) if a not in self.axes]
        ob.expect_output(0, [i64(1) if a in self.axes else d for a, d in enumerate(x.dims)]
                         if self.keepdims else kept)
        if self.kind.needs_elements:
            ob.fail_unless(ob.all_of([b.icmp_signed(">", x.dims[a], i64(0))
                                      for a in self.axes]), 0)
        ty, dtype = storage_type(self.dtype), self.dtype
        identity = identity_of(self.kind, dtype)
        nest(b, [out.size(b)], lambda i: e.store(identity, out.address(b, i[0]), dtype), "init")
        # The output's stride along each input axis: 0 where the axis is reduced.
        out_strides: list[ir.Value] = []
        position = 0
        out_axes = [s for a, s in enumerate(out.strides) if not (self.keepdims and a in
                                                                 self.axes)]
        for a in range(len(x.dims)):
            if a in self.axes:
                out_strides.append(i64(0))
            else:
                out_strides.append(out_axes[position])
                position += 1
        last = len(x.dims) - 1
        if last < 0 or last not in self.axes:
            def body(at: list[ir.Value]) -> None:
                target = out.address(b, _dot(b, at, out_strides))
                value = e.load(x.address(b, x.offset(b, at)), dtype)
                e.store(combine(e, self.kind, dtype, e.load(target, dtype), value), target,
                        dtype)

            if self.axes != tuple(range(len(self.axes))) or not self.axes:
                nest(b, x.dims, body)
                return
            with b.if_else(b.and_(is_row_major(ob, x), is_row_major(ob, out))) as (rows, general):
                with rows:
                    self._leading_rows(ob)
                with general:
                    nest(b, x.dims, body)
            return

        def row(at: list[ir.Value]) -> None:
            target = out.address(b, _dot(b, at, out_strides[:last]))
            start = x.offset(b, [*at, i64(0)])
            total = self._fold_row(e, x, start, x.strides[last], x.dims[last], ty)
            e.store(combine(e, self.kind, dtype, e.load(target, dtype), total), target, dtype)

        nest(b, x.dims[:last], row)

    def _leading_rows(self, ob: OpBuilder) -> None:
        """The reduced axes a leading prefix of a row-major input, the result row-major:
        the input is (R, K) and its R rows combine into the K results. From
        `MIN_TASK_ELEMENTS` elements on, the rows are split over the cores, each task after
        the first into results of its own (set to the identity), combined into the result
        at the end."""
        b, x = ob.b, ob.inputs[0]
        ty = storage_type(self.dtype)
        prefix = len(self.axes)
        rows = fold_product(b, x.dims[:prefix])
        width = fold_product(b, x.dims[prefix:])
        malloc = declare(b.module, "malloc", _PTR, [I64])
        vectors = self.kind.combine in (add_p, multiply_p) and self.dtype.kind in "fiu"

        def task(tb: OpBuilder, first: ir.Value, last: ir.Value, number: ir.Value,
                 memory: ir.Value) -> None:
            t = tb.b
            # the task's own width: a function of its own (a value of the entry's, unless
            # a constant, is not defined there)
            own_width = fold_product(t, tb.inputs[0].dims[prefix:])
            mine = t.icmp_unsigned("!=", memory, ir.Constant(_PTR, None))
            target = t.select(mine, memory, tb.outputs[0].pointer)
            with t.if_then(mine):
                identity = identity_of(self.kind, self.dtype)
                counted_loop(t, i64(0), own_width, i64(1), lambda j: Emitter(t).store(
                    identity, t.gep(memory, [j], source_etype=ty), self.dtype), "identity")
            fold = self._fold_columns if vectors else self._fold_rows
            fold(Emitter(t), tb.inputs[0].pointer, target, (first, last), own_width, ty)

        def merge(mb: ir.IRBuilder, partial: ir.Value) -> None:
            self._combine_into(Emitter(mb), ob.outputs[0].pointer, partial, width, ty)

        tasks = task_count(b, rows, b.mul(rows, width), MIN_TASK_ELEMENTS)
        bytes_ = b.mul(width, i64(self.dtype.itemsize))
        run_tasks(ob, "rows", rows, tasks, task, lambda mb, t: mb.call(malloc, [bytes_]),
                  merge)

    def _fold_columns(self, e: Emitter, source: ir.Value, target: ir.Value,
                      rows: tuple[ir.Value, ir.Value], width: ir.Value, ty: ir.Type) -> None:
        """Sums and products: each block of a vector's columns folded over the rows in
        `ROW_ACCUMULATORS` vector registers (rows taken in turn: independent adds, not one
        chain of dependent ones), then into the target; the last columns likewise in
        scalars. A register never waits on a store of the previous row's."""
        b = e.b
        lanes = VECTOR_BYTES // self.dtype.itemsize
        vector = ir.VectorType(ty, lanes)
        first, last = rows
        unrolled = b.add(first, b.mul(b.sdiv(b.sub(last, first), i64(ROW_ACCUMULATORS)),
                                      i64(ROW_ACCUMULATORS)))

        def columns(c: ir.Value, shape: ir.Type) -> None:
            identity = identity_of(self.kind, self.dtype)
            start = (ir.Constant(shape, [identity] * lanes) if shape is vector else identity)

            def element(r: ir.Value) -> ir.Value:
                at = b.gep(source, [b.add(b.mul(r, width), c)], source_etype=ty)
                return b.load(at, typ=shape, align=self.dtype.itemsize)

            def group(r: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                return [combine(e, self.kind, self.dtype, a, element(b.add(r, i64(k))))
                        for k, a in enumerate(acc)]

            acc = fold_loop(b, first, unrolled, i64(ROW_ACCUMULATORS),
                            [start] * ROW_ACCUMULATORS, group, "rows")
            acc = fold_loop(b, unrolled, last, i64(1), acc,
                            lambda r, a: [combine(e, self.kind, self.dtype, a[0], element(r)),
                                          *a[1:]], "rest")
            while len(acc) > 1:
                acc = [combine(e, self.kind, self.dtype, acc[k], acc[k + 1])
                       for k in range(0, len(acc), 2)]
            at = b.gep(target, [c], source_etype=ty)
            b.store(combine(e, self.kind, self.dtype,
                            b.load(at, typ=shape, align=self.dtype.itemsize), acc[0]),
                    at, align=self.dtype.itemsize)

        full = b.mul(b.sdiv(width, i64(lanes)), i64(lanes))
        counted_loop(b, i64(0), full, i64(lanes), lambda c: columns(c, vector), "blocks")
        counted_loop(b, full, width, i64(1), lambda c: columns(c, ty), "columns")

    def _fold_rows(self, e: Emitter, source: ir.Value, target: ir.Value,
                   rows: tuple[ir.Value, ir.Value], width: ir.Value, ty: ir.Type) -> None:
        """Max and min (and complex sums): each row combined into the target element by
        element."""
        b = e.b

        def row(r: ir.Value) -> None:
            self._combine_into(e, target, b.gep(source, [b.mul(r, width)], source_etype=ty),
                               width, ty)

        counted_loop(b, rows[0], rows[1], i64(1), row, "row")

    def _combine_into(self, e: Emitter, target: ir.Value, source: ir.Value, width: ir.Value,
                      ty: ir.Type) -> None:
        """``target[j] = combine(target[j], source[j])`` for j < `width`."""
        b = e.b

        def element(j: ir.Value) -> None:
            at = b.gep(target, [j], source_etype=ty)
            value = e.load(b.gep(source, [j], source_etype=ty), self.dtype)
            e.store(combine(e, self.kind, self.dtype, e.load(at, self.dtype), value), at,
                    self.dtype)

        counted_loop(b, i64(0), width, i64(1), element, "combine")

    def _fold_row(self, e: Emitter, x, start: ir.Value, stride: ir.Value, n: ir.Value,
                  ty: ir.Type) -> ir.Value:
        """The row ``x[start + j * stride], j < n`` combined into one value."""
        b = e.b
        identity = identity_of(self.kind, self.dtype)

        def element(j: ir.Value) -> ir.Value:
            return e.load(x.address(b, fold_add(b, start, fold_mul(b, j, stride))), self.dtype)

        def one(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            return [combine(e, self.kind, self.dtype, acc[0], element(j))]

        if self.kind is SUM and self.dtype.kind == "c":
            def wide(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                return [complex_math.add(e, acc[0], complex_math.widened(e, element(j)))]

            total = fold_loop(b, i64(0), n, i64(1), [Emitter.const(C128, 0.0)], wide, "j")[0]
            return complex_math.narrowed(e, total, ty)
        if not (self.kind is SUM and self.dtype.kind == "f"):
            return fold_loop(b, i64(0), n, i64(1), [identity], one, "j")[0]
        vector = ir.VectorType(ty, LANES)
        zero = ir.Constant(vector, [ir.Constant(ty, 0.0)] * LANES)
        full = b.mul(b.sdiv(n, i64(LANES)), i64(LANES))

        def gathered(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            chunk = ir.Constant(vector, ir.Undefined)
            for lane in range(LANES):
                value = element(b.add(j, i64(lane)))
                chunk = b.insert_element(chunk, value, ir.Constant(I64, lane))
            return [b.fadd(acc[0], chunk)]

        def loaded(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            at = x.address(b, fold_add(b, start, j))
            return [b.fadd(acc[0], b.load(at, typ=vector, align=self.dtype.itemsize))]

        # Strides are known only at run time; a row of stride 1 (the usual case) is read
        # eight elements per load instead of gathered element by element (slower).
        function = b.block.function
        contiguous = function.append_basic_block("row.contiguous")
        strided = function.append_basic_block("row.strided")
        merged = function.append_basic_block("row.lanes")
        b.cbranch(b.icmp_signed("==", stride, i64(1)), contiguous, strided)
        results = []
        for block, body in ((contiguous, loaded), (strided, gathered)):
            b.position_at_end(block)
            results.append((fold_loop(b, i64(0), full, i64(LANES), [zero], body, "j")[0],
                            b.block))
            b.branch(merged)
        b.position_at_end(merged)
        partial = b.phi(vector)
        for value, block in results:
            partial.add_incoming(value, block)
        return fold_loop(b, full, n, i64(1), [lanes_total(b, partial)], one, "tail")[0]


def _dot(b: ir.IRBuilder, indices: Sequence[ir.Value], strides: Sequence[ir.Value]) -> ir.Value:
    total: ir.Value = i64(0)
    for index, stride in zip(indices, strides, strict=True):
        total = fold_add(b, total, fold_mul(b, index, stride))
    return total


# Reductions of this many elements or more compile shape-generic: they are compiled at the
# optimising level (`cpu.levels`), where each shape's copy of the code costs LLVM time: a
# ResNet's batch norms of three widths took three copies, where one serves them all.
GENERIC_FROM = SMALL_KERNEL_ELEMENTS


@lowering(reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, generic_from=GENERIC_FROM)
def _reduce(spec: OpSpec) -> Reduce | None:
    dtype, kind = spec.inputs[0].dtype, spec.primitive.reduction
    if kind is None or dtype not in kind.native_dtypes:
        return None
    return Reduce(kind, tuple(spec.params["axes"]), bool(spec.params["keepdims"]), dtype)


@dataclass(frozen=True)
class ArgReduce:
    """argmax (`largest`) or argmin along `axis`: each line along the axis is read twice,
    first folded to its max (min) as `reduce_max` (`reduce_min`) folds it, NaN propagating,
    then searched for the first element equal to it (the first NaN, where it is NaN), as
    the first index of all that match (a min over the line). Neither pass carries a
    comparison from one element to the next, so both vectorise, where comparing each
    element with the best so far would be a chain of selects."""

    largest: bool
    axis: int
    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        e, axis, dtype = Emitter(b), self.axis, self.dtype
        kind = MAX if self.largest else MIN
        n = x.dims[axis]
        ob.expect_output(0, x.dims[:axis] + x.dims[axis + 1:])
        ob.fail_unless(b.icmp_signed(">", n, i64(0)), 0)
        floating = dtype in dtypes.FLOATING

        def matches(value: ir.Value, extremum: ir.Value) -> ir.Value:
            if floating:
                return b.or_(b.fcmp_ordered("==", value, extremum),
                             b.fcmp_unordered("uno", value, value))
            return b.icmp_signed("==", value, extremum)

        def body(at: list[ir.Value]) -> None:
            start = x.offset(b, [*at[:axis], i64(0), *at[axis:]])

            def element(j: ir.Value) -> ir.Value:
                return e.load(x.address(b, fold_add(b, start, b.mul(j, x.strides[axis]))),
                              dtype)

            (extremum,) = fold_loop(b, i64(0), n, i64(1), [identity_of(kind, dtype)],
                                    lambda j, acc: [combine(e, kind, dtype, acc[0],
                                                            element(j))], "extremum")
            first = e.intrinsic("llvm.umin.i64", I64, [I64, I64])
            (index,) = fold_loop(b, i64(0), n, i64(1), [n], lambda j, acc: [b.call(first, [
                acc[0], b.select(matches(element(j), extremum), j, n)])], "first")
            b.store(index, out.address(b, out.offset(b, at)))

        nest(b, out.dims, body)


@lowering(argmax_p, argmin_p)
def _arg_reduce(spec: OpSpec) -> ArgReduce | None:
    dtype = spec.inputs[0].dtype
    if dtype not in ARG_DTYPES:
        return None
    return ArgReduce(spec.primitive is argmax_p, spec.params["axis"] % spec.inputs[0].ndim, dtype)

