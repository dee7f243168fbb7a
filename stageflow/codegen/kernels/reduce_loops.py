"""The loop nest of a kernel that ends in reductions: each reduced operand is folded into
its result as the loop computes it, so it is never written to memory for the reduction.

The results are first set to their reduction's identity, then the iteration space is
walked in row-major order, computing every value of the kernel at each element as any
kernel does (unreduced results are stored as usual). Where no reduction folds the
innermost axis, each element is combined into the result element it reduces to (stride 0
on reduced axes): a reduced leading axis adds whole rows into the result, a loop LLVM
vectorises without reassociating anything. Where one does, each row is folded into
registers and combined into its result element at the end of the row; float sums keep
`LANES` partial sums there (the row is unrolled by `LANES` elements, each added to its own
lane, the lanes added pairwise at the end), as `codegen.lowered.reduction` does, so results
match NumPy's pairwise sums to rounding; complex sums add in order in complex128 (rounded once
at the end of the row), integer sums (wrapping), products, max and min combine in order
(half max and min in float32, exactly: values are in their compute type).
Reductions of the same kernel over other axes are combined element by element meanwhile.
Only sequential targets run these loops (the CPU): on a GPU every thread would combine
into the same results.
"""

from __future__ import annotations

from llvmlite import ir

from stageflow.codegen.kernels.analysis import Reduction
from stageflow.codegen.kernels.layout import Address, Body, Layout
from stageflow.codegen.llvm import complex_math
from stageflow.codegen.llvm.emitter import C128, Emitter, storage_type
from stageflow.codegen.llvm.loops import (
    counted_loop,
    fold_add,
    fold_loop,
    fold_mul,
    i64,
    strided_nest,
)
from stageflow.codegen.llvm.reduce import LANES, combine, identity_of, lanes_total
from stageflow.primitives.reduction import SUM

Reduced = list[tuple[int, Reduction]]  # (output argument index, the reduction it holds)



def _result_strides(layout: Layout, index: int, reduction: Reduction) -> list[ir.Value]:
    """The element strides of a reduction's result along each iteration axis: 0 on the
    reduced axes, its own row-major strides on the others."""
    dims = layout.dims[index]
    own: list[ir.Value] = [i64(0)] * len(dims)
    contiguous: ir.Value = i64(1)
    for axis in reversed(range(len(dims))):
        own[axis] = contiguous
        contiguous = fold_mul(layout.b, contiguous, dims[axis])
    kept = iter(own)
    strides = []
    for axis in range(layout.kernel.rank):
        if axis in reduction.axes:
            strides.append(i64(0))
            if reduction.keepdims:
                next(kept)
        else:
            strides.append(next(kept))
    return strides


def emit_reducing(b: ir.IRBuilder, layout: Layout, body: Body, address: Address) -> None:
    """The loops computing every result of `layout`'s kernel; `body` computes one element
    and `address` points at an argument's element."""
    kernel = layout.kernel
    e = Emitter(b)
    by_value = {r.result: r for r in kernel.reductions}
    first = len(kernel.inputs)
    reduced: Reduced = [(first + j, by_value[v]) for j, v in enumerate(kernel.results)
                        if v in by_value]
    strides = [layout.strides(index) for index in range(len(kernel.args))]
    for index, reduction in reduced:
        strides[index] = _result_strides(layout, index, reduction)
        start = identity_of(reduction.kind, reduction.dtype)

        def initialise(i: ir.Value, index: int = index, start: ir.Value = start,
                       reduction: Reduction = reduction) -> None:
            e.store(start, address(index, i), reduction.dtype)

        counted_loop(b, i64(0), layout.size(index), i64(1), initialise, "init")

    def fold_into(offsets: list[ir.Value], values: dict[int, ir.Value],
                  which: Reduced) -> None:
        for index, reduction in which:
            target = address(index, offsets[index])
            value = combine(e, reduction.kind, reduction.dtype,
                            e.load(target, reduction.dtype), values[reduction.operand])
            e.store(value, target, reduction.dtype)

    last = kernel.rank - 1
    along_rows = [(i, r) for i, r in reduced if last in r.axes]
    elsewhere = [(i, r) for i, r in reduced if last not in r.axes]

    def element(offsets: list[ir.Value]) -> dict[int, ir.Value]:
        values = body(offsets)
        assert values is not None
        fold_into(offsets, values, elsewhere)
        return values

    if not along_rows:
        strided_nest(b, layout.space, strides, element)
        return

    def row(bases: list[ir.Value]) -> None:
        totals = _fold_row(e, layout, bases, [s[last] for s in strides], element, along_rows)
        for (index, reduction), total in zip(along_rows, totals, strict=True):
            target = address(index, bases[index])
            value = combine(e, reduction.kind, reduction.dtype,
                            e.load(target, reduction.dtype), total)
            e.store(value, target, reduction.dtype)

    strided_nest(b, layout.space[:last], strides, row)


def _fold_row(e: Emitter, layout: Layout, bases: list[ir.Value], steps: list[ir.Value],
              element: Body, along_rows: Reduced) -> list[ir.Value]:
    """Each reduction of `along_rows` over the innermost axis of the row whose first
    element is at `bases` (`steps`: every argument's stride along the row)."""
    b = e.b
    n = layout.space[-1]
    lanes = [r.kind is SUM and r.dtype.kind == "f" for _, r in along_rows]
    wide = [r.kind is SUM and r.dtype.kind == "c" for _, r in along_rows]
    types = [storage_type(r.dtype) for _, r in along_rows]
    starts = [Emitter.const(C128, 0.0) if w else identity_of(r.kind, r.dtype)
              for (_, r), w in zip(along_rows, wide, strict=True)]

    def fold(k: int, acc: ir.Value, value: ir.Value) -> ir.Value:
        if wide[k]:
            return complex_math.add(e, acc, complex_math.widened(e, value))
        reduction = along_rows[k][1]
        return combine(e, reduction.kind, reduction.dtype, acc, value)

    def rounded(totals: list[ir.Value]) -> list[ir.Value]:
        return [complex_math.narrowed(e, t, ty) if w else t
                for t, ty, w in zip(totals, types, wide, strict=True)]

    def at(j: ir.Value) -> dict[int, ir.Value]:
        values = element([fold_add(b, base, fold_mul(b, j, step))
                          for base, step in zip(bases, steps, strict=True)])
        assert values is not None
        return values

    def one(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
        values = at(j)
        return [fold(k, a, values[r.operand])
                for k, ((_, r), a) in enumerate(zip(along_rows, acc, strict=True))]

    if not any(lanes):
        return rounded(fold_loop(b, i64(0), n, i64(1), starts, one, "j"))
    vectors = [ir.VectorType(ty, LANES) for ty in types]

    def group(j: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
        acc = list(acc)
        chunks: list[ir.Value] = [ir.Constant(v, ir.Undefined) for v in vectors]
        for lane in range(LANES):
            values = at(b.add(j, i64(lane)))
            for k, (_, reduction) in enumerate(along_rows):
                value = values[reduction.operand]
                if lanes[k]:
                    chunks[k] = b.insert_element(chunks[k], value, i64(lane))
                else:
                    acc[k] = fold(k, acc[k], value)
        return [b.fadd(a, chunk) if lane else a
                for a, chunk, lane in zip(acc, chunks, lanes, strict=True)]

    full = b.mul(b.sdiv(n, i64(LANES)), i64(LANES))
    initial = [ir.Constant(v, [ir.Constant(ty, 0.0)] * LANES) if lane else start
               for v, ty, start, lane in zip(vectors, types, starts, lanes, strict=True)]
    partial = fold_loop(b, i64(0), full, i64(LANES), initial, group, "j")
    totals = [lanes_total(b, p) if lane else p for p, lane in zip(partial, lanes, strict=True)]
    return rounded(fold_loop(b, full, n, i64(1), totals, one, "tail"))
