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
``llvm.minimum``), and argmax/argmin return the first NaN as NumPy does. A max, min, argmax
or argmin over an empty axis returns an error code, so the NumPy kernel runs and raises its
error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm import complex_math
from stageflow.codegen.llvm.emitter import C128, I64, Emitter, storage_type
from stageflow.codegen.llvm.loops import fold_add, fold_loop, fold_mul, i64
from stageflow.codegen.llvm.reduce import LANES, combine, identity_of, lanes_total
from stageflow.codegen.lowered.rule import OpBuilder, OpSpec, lowering, nest
from stageflow.core import dtypes
from stageflow.core.op_facts import ReductionKind

# The dtypes argmax and argmin compare in.
ARG_DTYPES = frozenset({dtypes.float32, dtypes.float64, *dtypes.INTEGER})


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
        ty = storage_type(self.dtype)
        identity = identity_of(self.kind, self.dtype, ty)
        nest(b, [out.size(b)], lambda i: b.store(identity, out.address(b, i[0])), "init")
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
                value = b.load(x.address(b, x.offset(b, at)), typ=ty)
                b.store(combine(e, self.kind, self.dtype, b.load(target, typ=ty), value),
                        target)

            nest(b, x.dims, body)
            return

        def row(at: list[ir.Value]) -> None:
            target = out.address(b, _dot(b, at, out_strides[:last]))
            start = x.offset(b, [*at, i64(0)])
            total = self._fold_row(e, x, start, x.strides[last], x.dims[last], ty)
            b.store(combine(e, self.kind, self.dtype, b.load(target, typ=ty), total), target)

        nest(b, x.dims[:last], row)

    def _fold_row(self, e: Emitter, x, start: ir.Value, stride: ir.Value, n: ir.Value,
                  ty: ir.Type) -> ir.Value:
        """The row ``x[start + j * stride], j < n`` combined into one value."""
        b = e.b
        identity = identity_of(self.kind, self.dtype, ty)

        def element(j: ir.Value) -> ir.Value:
            return b.load(x.address(b, fold_add(b, start, fold_mul(b, j, stride))), typ=ty)

        def one(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            return [combine(e, self.kind, self.dtype, acc[0], element(j))]

        if self.kind.name == "sum" and self.dtype.kind == "c":
            def wide(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                return [complex_math.add(e, acc[0], complex_math.widened(e, element(j)))]

            total = fold_loop(b, i64(0), n, i64(1), [Emitter.const(C128, 0.0)], wide, "j")[0]
            return complex_math.narrowed(e, total, ty)
        if not (self.kind.name == "sum" and self.dtype.kind == "f"):
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
        # eight elements per load instead of gathered element by element (1.5x slower).
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


@lowering("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")
def _reduce(spec: OpSpec) -> Reduce | None:
    dtype, kind = spec.inputs[0].dtype, spec.primitive.reduction
    if kind is None or dtype not in kind.native_dtypes:
        return None
    return Reduce(kind, tuple(spec.params["axes"]), bool(spec.params["keepdims"]), dtype)


@dataclass(frozen=True)
class ArgReduce:
    largest: bool
    axis: int
    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        axis, ty = self.axis, storage_type(self.dtype)
        n = x.dims[axis]
        ob.expect_output(0, x.dims[:axis] + x.dims[axis + 1:])
        ob.fail_unless(b.icmp_signed(">", n, i64(0)), 0)
        floating = self.dtype.kind == "f"

        def better(value: ir.Value, best: ir.Value) -> ir.Value:
            if floating:
                wins = b.fcmp_ordered(">" if self.largest else "<", value, best)
                nan_first = b.and_(b.fcmp_unordered("uno", value, value),
                                   b.fcmp_ordered("ord", best, best))
                return b.or_(wins, nan_first)
            signed = "s" if self.dtype.kind == "i" else "u"
            compare = b.icmp_signed if signed == "s" else b.icmp_unsigned
            return compare(">" if self.largest else "<", value, best)

        def body(at: list[ir.Value]) -> None:
            start = x.offset(b, [*at[:axis], i64(0), *at[axis:]])

            def step(j: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                value = b.load(x.address(b, fold_add(b, start, b.mul(j, x.strides[axis]))),
                               typ=ty)
                take = better(value, carried[0])
                return [b.select(take, value, carried[0]), b.select(take, j, carried[1])]

            first = b.load(x.address(b, start), typ=ty)
            _, index = fold_loop(b, i64(1), n, i64(1), [first, i64(0)], step, "j")
            b.store(index, out.address(b, out.offset(b, at)))

        nest(b, out.dims, body)


@lowering("argmax", "argmin")
def _arg_reduce(spec: OpSpec) -> ArgReduce | None:
    dtype = spec.inputs[0].dtype
    if dtype not in ARG_DTYPES:
        return None
    return ArgReduce(spec.name == "argmax", spec.params["axis"] % spec.inputs[0].ndim, dtype)

