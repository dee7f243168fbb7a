"""bfloat16 matmuls on CPUs without bfloat16 dot products: the operands widened to float32
(exactly: a bfloat16 is a float32's high half), multiplied by the float32 gemm, and the
result rounded once to bfloat16 after the scale and the addend, as `gemm_bf16`'s kernel
rounds its float32 sums.

Why: without this every bfloat16 matmul on such a CPU ran NumPy's kernel between compiled
calls, and a library compiled ahead of time had no matmul at all. The copies cost one
pass over each operand and the result; the product runs at the float32 gemm's speed (the
CBLAS one the float32 matmuls call: OpenBLAS's, or our own where it is not linked).

Products of up to `DOT_ROWS` rows whose operands are both contiguous along k (``x @ w.T``:
a decoder's step, its linear layers in PyTorch's layout and its tied logits) copy
nothing: such a product is a pass over B, and copying B made it three (B read, its
float32 copy written and read back), in memory fresh from the allocator at every call.
They are dot products instead (`_dots`), B's bfloat16 widened in registers as it is
read, column after column, the columns split over the cores.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, I16, I32, I64, Emitter
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import counted_loop, fold_loop, i64, return_unless
from stageflow.codegen.lowered import gemm_split
from stageflow.codegen.lowered.gemm_bf16 import declare_gemm
from stageflow.codegen.lowered.rule import larger, smaller

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # the CBLAS enums
# The most rows taken as dot products (a tile of 1, 2 or 4 rows: each column of B meets
# every row while its block is in registers), and the elements of k per step: two
# vectors of 8 float32 sums per row, 8 sums for a tile of 4, AVX2's 16 registers.
DOT_ROWS = 4
LANES = 8
STEP = 2 * LANES
# Columns of a task at least: a task reads that many columns of B, a few hundred KB of a
# decoder's weights.
DOT_MIN_PART = 64
_PTR = ir.PointerType()
_NO_MEMORY = 1
_WIDE = ir.VectorType(F32, LANES)
_HALVES = ir.VectorType(I16, LANES)


def gemm_function(module: ir.Module, sgemm: ir.Function) -> ir.Function:
    """``i32 sf.gemm.bf16.widened(...)``, the signature of `gemm_bf16.gemm_function`
    (m, n, k, A and B by pointer and element strides of rows and columns, C and its row
    stride, alpha, accumulate), its product by `sgemm` (``cblas_sgemm``'s signature): 0,
    or 1 where memory for the float32 copies was not to be had (C untouched). Internal,
    one per module."""
    return declare_gemm(module, "sf.gemm.bf16.widened",
                        lambda b, args: _emit(b, args, sgemm))


def _emit(b: ir.IRBuilder, args: list[ir.Value], sgemm: ir.Function) -> None:
    m, n, k, a, a_row, a_col, bm, b_row, b_col, c, ldc, alpha, accumulate = args
    e = Emitter(b)
    few = b.and_(b.icmp_signed(">=", m, i64(1)), b.icmp_signed("<=", m, i64(DOT_ROWS)))
    along_k = b.and_(b.icmp_signed("==", a_col, i64(1)), b.icmp_signed("==", b_row, i64(1)))
    with b.if_then(b.and_(few, along_k)):
        task = gemm_split.split_task(b.module, "sf.gemm.bf16.widened.dots", 10, _dots)
        gemm_split.run_split(b, task, n, b.mul(b.mul(m, n), k),
                             [m, k, a, a_row, bm, b_col, c, ldc, alpha, accumulate],
                             DOT_MIN_PART)
        b.ret(ir.Constant(I32, 0))
    calloc = declare(b.module, "calloc", _PTR, [I64, I64])
    free = declare(b.module, "free", ir.VoidType(), [_PTR])
    one = i64(1)
    wide_a = b.call(calloc, [larger(b, b.mul(m, k), one), i64(4)])
    wide_b = b.call(calloc, [larger(b, b.mul(k, n), one), i64(4)])
    wide_c = b.call(calloc, [larger(b, b.mul(m, n), one), i64(4)])
    buffers = (wide_a, wide_b, wide_c)
    missing = [b.icmp_unsigned("==", p, ir.Constant(_PTR, None)) for p in buffers]
    had = b.not_(b.or_(b.or_(missing[0], missing[1]), missing[2]))
    with b.if_then(b.not_(had)):
        for pointer in buffers:
            b.call(free, [pointer])
    return_unless(b, had, ir.Constant(I32, _NO_MEMORY))

    def widened(pointer: ir.Value, index: ir.Value) -> ir.Value:
        bits = b.load(b.gep(pointer, [index], source_etype=I16), typ=I16)
        return e.from_bits(b.shl(b.zext(bits, I32), ir.Constant(I32, 16)), F32)

    def widen(source: ir.Value, rows: ir.Value, columns: ir.Value, row: ir.Value,
              column: ir.Value, target: ir.Value) -> None:
        """Row after row of the (rows, columns) matrix at `source` (strides `row`,
        `column`) into `target`, row-major; contiguous rows by a loop of unit stride,
        which LLVM vectorises."""
        def each_row(i: ir.Value) -> None:
            start, into = b.mul(i, row), b.mul(i, columns)

            def each_column(step: ir.Value) -> Callable[[ir.Value], None]:
                def body(j: ir.Value) -> None:
                    value = widened(source, b.add(start, b.mul(j, step)))
                    b.store(value, b.gep(target, [b.add(into, j)], source_etype=F32))

                return body

            with b.if_else(b.icmp_signed("==", column, one)) as (contiguous, strided):
                with contiguous:
                    counted_loop(b, i64(0), columns, one, each_column(one), "column")
                with strided:
                    counted_loop(b, i64(0), columns, one, each_column(column), "column")

        counted_loop(b, i64(0), rows, one, each_row, "row")

    def copy(source: ir.Value, rows: ir.Value, columns: ir.Value, row: ir.Value,
             column: ir.Value, target: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The operand widened into `target` in the order it is stored: its transpose,
        row-major, where its columns are contiguous and its rows not (a weight matrix
        stored out by in, read as ``x @ w.T``), else as it is; the CBLAS flag and
        leading dim that read the copy. Copying a column at a time instead read such a
        matrix a few bytes per cache line and wrote it as scattered."""
        by_columns = b.and_(b.icmp_signed("==", row, one), b.icmp_signed("!=", column, one))
        with b.if_else(by_columns) as (transposed, as_is):
            with transposed:
                widen(source, columns, rows, column, row, target)
            with as_is:
                widen(source, rows, columns, row, column, target)
        return (b.select(by_columns, ir.Constant(I32, TRANS), ir.Constant(I32, NO_TRANS)),
                b.select(by_columns, larger(b, rows, one), larger(b, columns, one)))

    a_flag, lda = copy(a, m, k, a_row, a_col, wide_a)
    b_flag, ldb = copy(bm, k, n, b_row, b_col, wide_b)
    with b.if_then(b.icmp_signed(">", k, i64(0))):
        b.call(sgemm, [ir.Constant(I32, ROW_MAJOR), a_flag, b_flag, m, n, k, alpha,
                       wide_a, lda, wide_b, ldb, ir.Constant(F32, 0.0), wide_c,
                       larger(b, n, one)])

    def store_row(i: ir.Value) -> None:
        def store(j: ir.Value) -> None:
            at = b.gep(c, [b.add(b.mul(i, ldc), j)], source_etype=I16)
            value = b.load(b.gep(wide_c, [b.add(b.mul(i, n), j)], source_etype=F32), typ=F32)
            value = b.select(accumulate, b.fadd(value, widened(at, i64(0))), value)
            b.store(e.float_to_bf16_bits(value), at)

        counted_loop(b, i64(0), n, one, store, "store")

    counted_loop(b, i64(0), m, one, store_row, "result")
    for pointer in buffers:
        b.call(free, [pointer])
    b.ret(ir.Constant(I32, 0))


def _dots(b: ir.IRBuilder, first: ir.Value, last: ir.Value, words: list[ir.Value]) -> None:
    """Columns [first, last) of C = alpha A @ B (+ C where accumulating): a tile of all of
    A's rows (1, 2 or 4 of them, a row past the last reading the last again) by one column
    of B at a time, each of A's rows and B's columns contiguous along k
    (`gemm_split.split_task`'s body)."""
    for rows in (1, 2, DOT_ROWS):
        with b.if_then(b.icmp_signed("<=", words[0], i64(rows))):
            _dot_tile(b, rows, first, last, words)
            b.ret(ir.Constant(I32, 0))


def _dot_tile(b: ir.IRBuilder, rows: int, first: ir.Value, last: ir.Value,
              words: list[ir.Value]) -> None:
    """`_dots` by a tile of `rows` rows: per column, 16 elements of k at a time into two
    vectors of partial sums per row, added at the end, then the elements left one by one;
    each result scaled, added to C's value where accumulating and rounded once."""
    m, k, a, a_row, bm, b_col, c, ldc, alpha, accumulate = words
    e = Emitter(b)
    fma = declare(b.module, f"llvm.fma.v{LANES}f32", _WIDE, [_WIDE] * 3)
    a, bm, c = (b.inttoptr(word, _PTR) for word in (a, bm, c))
    scale = b.fptrunc(b.bitcast(alpha, ir.DoubleType()), F32)
    starts = [b.gep(a, [b.mul(smaller(b, i64(r), b.sub(m, i64(1))), a_row)],
                    source_etype=I16) for r in range(rows)]
    blocks = b.sdiv(k, i64(STEP))

    def vector(start: ir.Value, at: ir.Value) -> ir.Value:
        bits = b.load(b.gep(start, [at], source_etype=I16), typ=_HALVES, align=2)
        shifted = b.shl(b.zext(bits, ir.VectorType(I32, LANES)),
                        ir.Constant(ir.VectorType(I32, LANES), [16] * LANES))
        return b.bitcast(shifted, _WIDE)

    def scalar(start: ir.Value, at: ir.Value) -> ir.Value:
        bits = b.load(b.gep(start, [at], source_etype=I16), typ=I16)
        return e.from_bits(b.shl(b.zext(bits, I32), ir.Constant(I32, 16)), F32)

    def column(j: ir.Value) -> None:
        weights = b.gep(bm, [b.mul(j, b_col)], source_etype=I16)

        def step(q: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
            at = [b.mul(q, i64(STEP)), b.add(b.mul(q, i64(STEP)), i64(LANES))]
            column_ = [vector(weights, offset) for offset in at]
            return [b.call(fma, [vector(starts[r], at[u]), column_[u], sums[2 * r + u]])
                    for r in range(rows) for u in range(2)]

        zero = ir.Constant(_WIDE, [0.0] * LANES)
        sums = fold_loop(b, i64(0), blocks, i64(1), [zero] * (2 * rows), step, "k")
        totals = []
        for r in range(rows):
            both = b.fadd(sums[2 * r], sums[2 * r + 1])
            total = b.extract_element(both, ir.Constant(I32, 0))
            for lane in range(1, LANES):
                total = b.fadd(total, b.extract_element(both, ir.Constant(I32, lane)))
            totals.append(total)
        totals = fold_loop(b, b.mul(blocks, i64(STEP)), k, i64(1), totals, lambda kk, t: [
            b.fadd(t[r], b.fmul(scalar(starts[r], kk), scalar(weights, kk)))
            for r in range(rows)], "tail")
        adding = b.icmp_signed("!=", accumulate, i64(0))
        for r in range(rows):
            with b.if_then(b.icmp_signed("<", i64(r), m)):
                at = b.gep(c, [b.add(b.mul(i64(r), ldc), j)], source_etype=I16)
                value = b.fmul(scale, totals[r])
                value = b.select(adding, b.fadd(value, scalar(at, i64(0))), value)
                b.store(e.float_to_bf16_bits(value), at)

    counted_loop(b, first, last, i64(1), column, "columns")
