"""Small matmuls of static shape as generated vector code instead of a BLAS call.

A recurrent step multiplies a (1, 64) state by a (64, 64) weight: 4096 multiply-adds, tens
of nanoseconds of arithmetic, but OpenBLAS's gemm spends more than that deciding how to
split the work, and inside a loop the call repeats every iteration. Below `MAX_MULTIPLY_ADDS`, with
static shapes and row-major operands, each row of the result is computed in blocks of one
vector register (16 float32 or 8 float64 lanes), the last one's lanes past n masked: up to
`CHAINS` blocks' partial sums stay in registers while the loop runs over k, each step one
broadcast of ``a[i, k]`` and per block one load of ``b[k, block]`` and one fused
multiply-add; then each block is stored once. Where a row has fewer blocks than that (a
classifier's ten columns), several rows advance together. (The columns left over used to
run on scalars, one chain of fmas each, each waiting on itself: a product eight rows by
ten columns ran several times slower than its gemm.) Anything else (strided or
transposed-b operands, batches) keeps the BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, F64, I1, I32, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import fold_add, fold_loop, fold_mul, i64
from stageflow.codegen.lowered.rule import OpBuilder, Operand, OpSpec, dot, nest
from stageflow.codegen.targets import platform
from stageflow.core import dtypes

# Below this the generated code beats the BLAS call, whose set-up costs more than such a
# product's arithmetic (`benchmarks/loop.py` times a recurrent step); larger products
# amortise the set-up.
MAX_MULTIPLY_ADDS = 1 << 16
VECTOR_BITS = 512
# Independent sums per pass over k: an fma's latency is several cycles, so one chain of
# them would wait on itself; eight blocks of a row advance together.
CHAINS = 8
PTR = ir.PointerType()


@dataclass(frozen=True)
class SmallMatmul:
    """``alpha * a @ b`` (plus the broadcast third operand if `accumulate`) for static
    row-major (m, k) and (k, n) operands, `transpose_a` reading a as (k, m)."""

    m: int
    n: int
    k: int
    transpose_a: bool
    dtype: np.dtype
    alpha: float = 1.0
    accumulate: bool = False

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        a, x, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        m, n, k = self.m, self.n, self.k
        a_cols = m if self.transpose_a else k
        ok = ob.all_of([ob.eq(a.strides[1], i64(1)), ob.eq(a.strides[0], i64(a_cols)),
                        ob.eq(x.strides[1], i64(1)), ob.eq(x.strides[0], i64(n))])
        ob.fail_unless(ok, 0)
        ob.expect_output(0, [i64(m), i64(n)])
        if self.accumulate:
            broadcast_into(ob, ob.inputs[2], out)
        real = F32 if self.dtype == dtypes.float32 else F64
        lanes = VECTOR_BITS // (8 * self.dtype.itemsize)
        vector = ir.VectorType(real, lanes)
        alpha = ir.Constant(real, self.alpha)
        # The blocks of a row: whole vectors, then one whose lanes past n are masked.
        left = n % lanes
        blocks = [(c * lanes, None) for c in range(n // lanes)]
        if left:
            blocks.append((n - left, ir.Constant(ir.VectorType(I1, lanes),
                                                 [i < left for i in range(lanes)])))
        suffix = f"v{lanes}f{8 * self.dtype.itemsize}"
        masked_load = declare(b.module, f"llvm.masked.load.{suffix}.p0", vector,
                              [PTR, I32, ir.VectorType(I1, lanes), vector])
        masked_store = declare(b.module, f"llvm.masked.store.{suffix}.p0", ir.VoidType(),
                               [vector, PTR, I32, ir.VectorType(I1, lanes)])
        align = ir.Constant(I32, self.dtype.itemsize)

        def load(pointer: ir.Value, mask: ir.Constant | None) -> ir.Value:
            if mask is None:
                return b.load(pointer, typ=vector, align=self.dtype.itemsize)
            return b.call(masked_load, [pointer, align, mask, _zeros(vector)])

        def a_at(i: ir.Value, j: ir.Value) -> ir.Value:
            offset = b.add(b.mul(j, i64(m)), i) if self.transpose_a else b.add(
                b.mul(i, i64(k)), j)
            return b.load(a.address(b, offset), typ=real)

        def finish(total: ir.Value, at: ir.Value, mask: ir.Constant | None) -> None:
            pointer = out.address(b, at)
            scaled = total if self.alpha == 1.0 else b.fmul(total, _splat(b, alpha, vector))
            if self.accumulate:
                scaled = b.fadd(scaled, load(pointer, mask))
            if mask is None:
                b.store(scaled, pointer, align=self.dtype.itemsize)
            else:
                b.call(masked_store, [scaled, pointer, align, mask])

        def sums(rows: list[ir.Value], columns: list[tuple[int, ir.Constant | None]]) -> None:
            """The rows' blocks of `columns`, their sums advancing together over k (each an
            fma per term, in k's order), then stored."""

            def term(p: ir.Value, totals: list) -> list:
                base = b.mul(p, i64(n))
                weights = [load(x.address(b, b.add(base, i64(c))), mask)
                           for c, mask in columns]
                updated = list(totals)
                for r, i in enumerate(rows):
                    a_ip = _splat(b, a_at(i, p), vector)
                    for c, w in enumerate(weights):
                        at = r * len(weights) + c
                        updated[at] = _fma(b, a_ip, w, totals[at])
                return updated

            totals = fold_loop(b, i64(0), i64(k), i64(1),
                               [_zeros(vector)] * (len(rows) * len(columns)), term, "k")
            for r, i in enumerate(rows):
                for c, (column, mask) in enumerate(columns):
                    finish(totals[r * len(columns) + c], b.add(b.mul(i, i64(n)), i64(column)),
                           mask)

        if len(blocks) >= CHAINS:
            def row(i: ir.Value, _: list) -> list:
                for first in range(0, len(blocks), CHAINS):
                    sums([i], blocks[first:first + CHAINS])
                return []

            fold_loop(b, i64(0), i64(m), i64(1), [], row, "row")
            return
        # Fewer blocks than chains in a row (a narrow product: a classifier's ten columns):
        # rows advance together, so that the sums of several hide the fma's latency.
        together = CHAINS // len(blocks)
        whole = m - m % together

        def group(i: ir.Value, _: list) -> list:
            sums([b.add(i, i64(r)) for r in range(together)], blocks)
            return []

        fold_loop(b, i64(0), i64(whole), i64(together), [], group, "rows")
        if m % together:
            sums([i64(r) for r in range(whole, m)], blocks)


def _splat(b: ir.IRBuilder, scalar: ir.Value, ty: ir.Type) -> ir.Value:
    if not isinstance(ty, ir.VectorType):
        return scalar
    single = b.insert_element(ir.Constant(ty, ir.Undefined), scalar, ir.Constant(ir.IntType(32), 0))
    return b.shuffle_vector(single, ir.Constant(ty, ir.Undefined),
                            ir.Constant(ir.VectorType(ir.IntType(32), ty.count), [0] * ty.count))


def _zeros(ty: ir.VectorType) -> ir.Constant:
    return ir.Constant(ty, [ir.Constant(ty.element, 0.0)] * ty.count)


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """``x * y + z`` rounded once where the target has a fused multiply-add
    (`platform.Platform.fma`), on scalars or vectors."""
    ty = z.type
    element = ty.element if isinstance(ty, ir.VectorType) else ty
    bits = 32 if element == F32 else 64
    suffix = f"v{ty.count}f{bits}" if isinstance(ty, ir.VectorType) else f"f{bits}"
    return b.call(declare(b.module, platform.current().fma(suffix), ty, [ty, ty, ty]), [x, y, z])


def small_matmul(spec: OpSpec, transpose_a: bool, transpose_b: bool, dtype: np.dtype,
                 alpha: float, accumulate: bool) -> SmallMatmul | None:
    """The generated lowering where the shapes are static, two-dimensional and small, and
    b is not transposed; else None (the BLAS lowering)."""
    a, x = spec.inputs[0], spec.inputs[1]
    if transpose_b or a.ndim != 2 or x.ndim != 2 or None in (*a.shape, *x.shape):
        return None
    m, k = (a.shape[1], a.shape[0]) if transpose_a else a.shape
    k2, n = x.shape
    if k != k2 or m * n * k > MAX_MULTIPLY_ADDS or m * n == 0 or k == 0:
        return None
    return SmallMatmul(m, n, k, transpose_a, dtype, alpha, accumulate)


def broadcast_into(ob: OpBuilder, c: Operand, out: Operand) -> None:
    """Copy `c` into `out`, broadcasting it as NumPy would (failing unless it can): a
    ``memcpy`` per row where `c`'s rows are whole and contiguous (a bias, a weight), else
    element by element."""
    b = ob.b
    rank = len(out.dims)
    dims = [i64(1)] * (rank - len(c.dims)) + list(c.dims)
    strides = [i64(0)] * (rank - len(c.dims)) + list(c.strides)
    ob.fail_unless(ob.all_of([b.or_(ob.eq(d, i64(1)), ob.eq(d, o))
                              for d, o in zip(dims, out.dims, strict=True)]), 2)
    strides = [b.select(ob.eq(d, i64(1)), i64(0), s) for d, s in zip(dims, strides,
                                                                      strict=True)]
    n = out.dims[-1]
    whole_rows = b.and_(ob.eq(dims[-1], n), b.or_(ob.eq(strides[-1], i64(1)), ob.eq(n, i64(1))))
    memcpy = declare(b.module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                     [ir.PointerType(), ir.PointerType(), I64, I1])
    row_bytes = b.mul(n, i64(c.dtype.itemsize))

    def copy_row(at: list[ir.Value]) -> None:
        source, target = dot(b, at, strides[:-1]), dot(b, at, out.strides[:-1])
        with b.if_else(whole_rows) as (contiguous, strided):
            with contiguous:
                b.call(memcpy, [out.address(b, target), c.address(b, source), row_bytes,
                                ir.Constant(I1, 0)])
            with strided:
                def copy(j: list[ir.Value]) -> None:
                    at_c = fold_add(b, source, fold_mul(b, j[0], strides[-1]))
                    value = b.load(c.address(b, at_c), typ=c.element)
                    b.store(value, out.address(b, fold_add(b, target, j[0])))

                nest(b, [n], copy, "element")

    nest(b, out.dims[:-1], copy_row, "row")
