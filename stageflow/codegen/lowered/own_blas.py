"""``cblas_?gemm`` for code that runs without OpenBLAS: a library built for another machine
(aarch64, WebAssembly) or a self-contained one for this machine (`sf.aot.compile`).

The function has the CBLAS signature that `matmul.gemm_function` declares, so matmuls and
the convolutions' gradient gemms call it unchanged; it is defined, internal, in the module
that calls it. Underneath is the convolutions' own gemm (`conv.gemm`: register tiles and
GotoBLAS blocking, generated for whatever vectors the target has), which reads each
operand in place, row-major or transposed (a transposed B's panels are transposed in
registers as the gemm copies them, which it does either way). Only A, where ``alpha`` is
not 1, is first copied, scaled, into memory of its own; C is scaled where ``beta`` is
neither 0 nor 1, and the gemm adds ``A @ B`` to it, or, where ``beta`` is 0, writes
``A @ B`` over it (never reading it: it may hold NaNs). Where that memory cannot be had,
a plain loop reads the operands in place: slower, never wrong. A product of few rows by a
transposed B (`DOT_ROWS`: a decoder's logits against its embedding) packs nothing: each
row of B's storage is read once, against every row of A (`_dots`), where packing B's
panels would cost as much as the product.

Where the platform has threads, a large product splits its rows over the cores
(`gemm_split`: the worker pool), as OpenBLAS threads its gemms, unless a convolution's
tasks are running their own gemms at the time (`regions`, counted by
`matmul.single_threaded_blas`), which would oversubscribe the cores.

Why a generated gemm and not a cross-built BLAS: the same code then serves every target
LLVM has (a WebAssembly OpenBLAS does not exist), the library stays one object with no
other to ship, and its speed on this machine can be compared with OpenBLAS's
(``benchmarks/targets.py``).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, F64, I1, I32, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.lanes import lanes_below
from stageflow.codegen.llvm.loops import counted_loop, fold_loop, i64
from stageflow.codegen.lowered import gemm_split
from stageflow.codegen.lowered.conv.gemm import gemm_function as row_major_gemm
from stageflow.codegen.lowered.conv.gemm import tile
from stageflow.codegen.lowered.rule import smaller
from stageflow.codegen.targets import cpu, platform
from stageflow.core import dtypes

NO_TRANS = 111  # CBLAS's enum (the callers pass row-major order only)
COPY_BLOCK = 16  # a transposed operand is copied by squares of this side
DOT_ROWS = 8  # at most this many rows by a transposed B: dot products, B read in place
DOT_GROUP = 4  # rows of A whose sums one pass over a row of B keeps in registers
DTYPES = (dtypes.float32, dtypes.float64)
REGIONS_SYMBOL = "sf.gemm.regions"
_REGIONS = (ctypes.c_int64 * 1)()
# Known to the JIT from the import on: the shared gemm's cached code declares it.
llvm.add_symbol(REGIONS_SYMBOL, ctypes.addressof(_REGIONS))
_PTR = ir.PointerType()


def regions(module: ir.Module) -> ir.GlobalVariable:
    """The count of regions whose tasks run gemms of their own, declared in `module`: the
    process's for the JIT (Python's word, its symbol added at import; the gemm may be
    another module's, `gemm_function`), an ahead-of-time library's own."""
    existing = module.globals.get(REGIONS_SYMBOL)
    if isinstance(existing, ir.GlobalVariable):
        return existing
    return ir.GlobalVariable(module, I64, REGIONS_SYMBOL)


def gemm_function(module: ir.Module, dtype: np.dtype) -> ir.Function:
    """``void sf.cblas.DTYPE(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
    c, ldc)``, CBLAS's gemm for a row-major `order`, defined once in `module`."""
    symbol = f"sf.cblas.gemm.{np.dtype(dtype).name}"
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    real = {dtypes.float32: F32, dtypes.float64: F64}[dtype]
    signature = ir.FunctionType(ir.VoidType(), [I32, I32, I32, I64, I64, I64, real, _PTR, I64,
                                                _PTR, I64, real, _PTR, I64])
    if cpu.shares_code():
        return cpu.shared_function(module, symbol, signature,
                                   lambda library: _define(library, symbol, signature, dtype))
    function = _define(module, symbol, signature, dtype)
    function.linkage = "internal"
    return function


def _define(module: ir.Module, symbol: str, signature: ir.FunctionType,
            dtype: np.dtype) -> ir.Function:
    """The gemm's code, as `symbol` of `module`."""
    real = signature.args[6]
    function = ir.Function(module, signature, symbol)
    names = ("order", "trans_a", "trans_b", "m", "n", "k", "alpha", "a", "lda", "b", "ldb",
             "beta", "c", "ldc")
    for argument, name in zip(function.args, names, strict=True):
        argument.name = name
    _Body(function, dtype, real).emit()
    return function


class _Body:
    """The code of one gemm function."""

    def __init__(self, function: ir.Function, dtype: np.dtype, real: ir.Type) -> None:
        self.function, self.dtype, self.real = function, dtype, real
        self.b = ir.IRBuilder(function.append_basic_block("entry"))
        (_, self.trans_a, self.trans_b, self.m, self.n, self.k, self.alpha, self.a, self.lda,
         self.b_data, self.ldb, self.beta, self.c, self.ldc) = function.args
        self.size = i64(np.dtype(dtype).itemsize)

    def emit(self) -> None:
        b = self.b
        module = b.module
        malloc = declare(module, "malloc", _PTR, [I64])
        free = declare(module, "free", ir.VoidType(), [_PTR])
        terms = b.icmp_signed(">", self.k, i64(0))
        # With terms and beta 0 the gemm writes C over: no pass zeroing it first.
        overwrite = b.and_(terms, b.fcmp_ordered("==", self.beta, ir.Constant(self.real, 0.0)))
        with b.if_then(b.not_(overwrite)):
            self._scale_c()
        dots = b.and_(b.and_(self._transposed(self.trans_b),
                             b.not_(self._transposed(self.trans_a))),
                      b.icmp_signed("<=", self.m, i64(DOT_ROWS)))
        with b.if_then(b.and_(terms, dots)):
            self._dots(overwrite)
        with b.if_then(b.and_(terms, b.not_(dots))):
            a_copied = b.fcmp_ordered("!=", self.alpha, ir.Constant(self.real, 1.0))
            a_bytes = b.select(a_copied, b.mul(b.mul(self.m, self.k), self.size), i64(0))
            # (A byte more, so that malloc(0) is never asked.)
            memory = b.call(malloc, [b.add(a_bytes, i64(1))])
            with b.if_else(b.icmp_unsigned("==", memory, ir.Constant(_PTR, None))) as (
                    none, some):
                with none:
                    with b.if_then(overwrite):
                        self._scale_c()
                    self._plain_loops()
                with some:
                    a, lda = self._operand(a_copied, memory, self.a, self.lda, self.trans_a,
                                           self.m, self.k, self.alpha)
                    in_place = b.and_(self._transposed(self.trans_a), b.not_(a_copied))
                    with b.if_else(in_place) as (transposed, as_is):
                        with transposed:
                            self._product(a, lda, True, overwrite)
                        with as_is:
                            self._product(a, lda, False, overwrite)
                    b.call(free, [memory])
        b.ret_void()

    def _product(self, a: ir.Value, lda: ir.Value, transposed_a: bool, overwrite: ir.Value
                 ) -> None:
        """C += A @ B, or C = A @ B where `overwrite` (A stored transposed where
        `transposed_a`; B as the flag says): in one call, or its rows split over the cores
        unless a convolution's tasks are running gemms of their own (`regions`)."""
        b = self.b
        module = b.module
        layout = "at." if transposed_a else ""
        task = gemm_split.split_task(module,
                                     f"sf.cblas.rows.{layout}{np.dtype(self.dtype).name}", 10,
                                     functools.partial(_rows, self.dtype, transposed_a))
        alone = self._may_split()
        gemm_split.run_split(b, task, self.m, b.mul(b.mul(self.m, self.n), self.k),
                             [self.n, self.k, a, lda, self.b_data, self.ldb,
                              b.zext(self._transposed(self.trans_b), I64), self.c, self.ldc,
                              b.zext(b.not_(overwrite), I64)], tile().rows, alone)

    def _dots(self, overwrite: ir.Value) -> None:
        """C (+)= alpha * A @ B for few rows of A by B stored transposed, B read in place:
        C's columns split over the cores (`_dot_columns`)."""
        b = self.b
        task = gemm_split.split_task(b.module, f"sf.cblas.dots.{np.dtype(self.dtype).name}",
                                     10, functools.partial(_dot_columns, self.dtype))
        alone = self._may_split()
        gemm_split.run_split(b, task, self.n, b.mul(b.mul(self.m, self.n), self.k),
                             [self.m, self.k, self.a, self.lda, self.b_data, self.ldb, self.c,
                              self.ldc, self.alpha, b.zext(b.not_(overwrite), I64)],
                             DOT_GROUP, alone)

    def _may_split(self) -> ir.Value | None:
        """Whether a product may split over the cores: no convolution's tasks are running
        gemms of their own (`regions`); None where the platform has no threads."""
        if not platform.current().threads:
            return None
        return self.b.icmp_signed("==", self.b.load_atomic(regions(self.b.module), "monotonic",
                                                           8, typ=I64), i64(0))

    def _transposed(self, flag: ir.Value) -> ir.Value:
        return self.b.icmp_signed("!=", flag, ir.Constant(I32, NO_TRANS))

    def _element(self, base: ir.Value, index: ir.Value) -> ir.Value:
        return self.b.gep(base, [index], source_etype=self.real)

    def _at(self, data: ir.Value, lead: ir.Value, flag: ir.Value, row: ir.Value,
            column: ir.Value) -> ir.Value:
        """The address of element (row, column) of op(X), X stored row-major at `data`."""
        b = self.b
        as_is = b.add(b.mul(row, lead), column)
        flipped = b.add(b.mul(column, lead), row)
        return self._element(data, b.select(self._transposed(flag), flipped, as_is))

    def _scale_c(self) -> None:
        """C *= beta: zeros for beta 0 (C may hold NaNs), nothing for beta 1."""
        b = self.b
        zero, one = ir.Constant(self.real, 0.0), ir.Constant(self.real, 1.0)
        with b.if_then(b.fcmp_unordered("!=", self.beta, one)):
            is_zero = b.fcmp_ordered("==", self.beta, zero)

            def row(i: ir.Value) -> None:
                def column(j: ir.Value) -> None:
                    at = self._element(self.c, b.add(b.mul(i, self.ldc), j))
                    scaled = b.fmul(b.load(at, typ=self.real), self.beta)
                    b.store(b.select(is_zero, zero, scaled), at)

                counted_loop(b, i64(0), self.n, i64(1), column, "scale.column")

            counted_loop(b, i64(0), self.m, i64(1), row, "scale.row")

    def _operand(self, copied: ir.Value, copy: ir.Value, data: ir.Value, lead: ir.Value,
                 flag: ir.Value, rows: ir.Value, columns: ir.Value,
                 scale: ir.Value) -> tuple[ir.Value, ir.Value]:
        """op(X) as a row-major (rows, columns) matrix: X itself, or its copy scaled by
        `scale` where `copied`; the pointer and the leading dim."""
        b = self.b

        def move(i: ir.Value, j: ir.Value) -> None:
            value = b.fmul(b.load(self._at(data, lead, flag, i, j), typ=self.real), scale)
            b.store(value, self._element(copy, b.add(b.mul(i, columns), j)))

        with b.if_then(copied), b.if_else(self._transposed(flag)) as (flipped, as_is):
            with flipped:
                self._blocks(rows, columns, move)
            with as_is:
                counted_loop(b, i64(0), rows, i64(1), lambda i: counted_loop(
                    b, i64(0), columns, i64(1), lambda j: move(i, j), "copy.column"),
                    "copy.row")
        return b.select(copied, copy, data), b.select(copied, columns, lead)

    def _blocks(self, rows: ir.Value, columns: ir.Value,
                move: Callable[[ir.Value, ir.Value], None]) -> None:
        """`move` of every element (i, j) of a transposed operand's copy, by squares of
        `COPY_BLOCK`, within each along X's rows (its copy's columns): X read one run
        after another, the square's rows of the copy in L1 meanwhile. Row by row of the
        copy, every element read came from another line of X."""
        b = self.b

        def square(i0: ir.Value, j0: ir.Value) -> None:
            i1 = smaller(b, b.add(i0, i64(COPY_BLOCK)), rows)
            j1 = smaller(b, b.add(j0, i64(COPY_BLOCK)), columns)
            counted_loop(b, j0, j1, i64(1), lambda j: counted_loop(
                b, i0, i1, i64(1), lambda i: move(i, j), "copy.block.row"), "copy.block.column")

        counted_loop(b, i64(0), rows, i64(COPY_BLOCK), lambda i0: counted_loop(
            b, i64(0), columns, i64(COPY_BLOCK), lambda j0: square(i0, j0), "copy.columns"),
            "copy.rows")

    def _plain_loops(self) -> None:
        """C += alpha * op(A) @ op(B), every operand read in place."""
        b = self.b

        def row(i: ir.Value) -> None:
            def column(j: ir.Value) -> None:
                def term(kk: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                    left = b.load(self._at(self.a, self.lda, self.trans_a, i, kk), typ=self.real)
                    right = b.load(self._at(self.b_data, self.ldb, self.trans_b, kk, j),
                                   typ=self.real)
                    return [b.fadd(sums[0], b.fmul(left, right))]

                (total,) = fold_loop(b, i64(0), self.k, i64(1),
                                     [ir.Constant(self.real, 0.0)], term, "plain.k")
                at = self._element(self.c, b.add(b.mul(i, self.ldc), j))
                b.store(b.fadd(b.load(at, typ=self.real), b.fmul(self.alpha, total)), at)

            counted_loop(b, i64(0), self.n, i64(1), column, "plain.column")

        counted_loop(b, i64(0), self.m, i64(1), row, "plain.row")


def _rows(dtype: np.dtype, transposed_a: bool, b: ir.IRBuilder, first: ir.Value,
          last: ir.Value, words: list[ir.Value]) -> None:
    """A task's rows [first, last) of C += A @ B (C = A @ B where the last word is 0), A
    stored transposed where `transposed_a`, B where its word says
    (`gemm_split.split_task`'s body)."""
    n, k, a, lda, x, ldb, b_transposed, c, ldc, accumulate = words
    real = {dtypes.float32: F32, dtypes.float64: F64}[dtype]
    offset = first if transposed_a else b.mul(first, lda)
    a_rows = b.gep(b.inttoptr(a, _PTR), [offset], source_etype=real)
    c_rows = b.gep(b.inttoptr(c, _PTR), [b.mul(first, ldc)], source_etype=real)
    b.call(row_major_gemm(b.module, dtype, transposed_a, fused=False),
           [b.sub(last, first), n, k, a_rows, lda, b.inttoptr(x, _PTR), ldb,
            b.trunc(b_transposed, I1), c_rows, ldc, b.trunc(accumulate, I1)])


def _dot_columns(dtype: np.dtype, b: ir.IRBuilder, first: ir.Value, last: ir.Value,
                 words: list[ir.Value]) -> None:
    """A task's columns [first, last) of C (+)= alpha * A @ B, B stored transposed (its
    row j is C's column j): per column, rows of A in groups of `DOT_GROUP`, one vector sum
    per row over k (the last vector masked), each summed across its lanes at the end
    (`_dots`'s body; C added to where the last word is 1)."""
    m, k, a, lda, x, ldb, c, ldc, alpha, accumulate = words
    real = {dtypes.float32: F32, dtypes.float64: F64}[dtype]
    lanes = tile().vector_bytes // np.dtype(dtype).itemsize
    vector = ir.VectorType(real, lanes)
    suffix = f"v{lanes}{'f32' if real == F32 else 'f64'}"
    fma = declare(b.module, platform.current().fma(suffix), vector, [vector] * 3)
    mask_type = ir.VectorType(I1, lanes)
    masked_load = declare(b.module, f"llvm.masked.load.{suffix}.p0", vector,
                          [_PTR, I32, mask_type, vector])
    total = declare(b.module, f"llvm.vector.reduce.fadd.{suffix}", real, [real, vector])
    a, x, c = (b.inttoptr(word, _PTR) for word in (a, x, c))
    scale = b.bitcast(alpha, F64)
    scale = b.fptrunc(scale, real) if real == F32 else scale
    size = ir.Constant(I32, np.dtype(dtype).itemsize)
    zero = ir.Constant(vector, [0.0] * lanes)
    whole = b.mul(b.sdiv(k, i64(lanes)), i64(lanes))
    tail = lanes_below(b, b.sub(k, whole), lanes)
    adding = b.trunc(accumulate, I1)

    def element(base: ir.Value, index: ir.Value) -> ir.Value:
        return b.gep(base, [index], source_etype=real)

    def column(j: ir.Value) -> None:
        row = element(x, b.mul(j, ldb))

        def group(i0: ir.Value) -> None:
            rows = [smaller(b, b.add(i0, i64(r)), b.sub(m, i64(1))) for r in range(DOT_GROUP)]
            starts = [element(a, b.mul(i, lda)) for i in rows]

            def step(kk: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                weights = b.load(element(row, kk), typ=vector, align=np.dtype(dtype).itemsize)
                return [b.call(fma, [b.load(element(start, kk), typ=vector,
                                            align=np.dtype(dtype).itemsize), weights, total_])
                        for start, total_ in zip(starts, sums, strict=True)]

            sums = fold_loop(b, i64(0), whole, i64(lanes), [zero] * DOT_GROUP, step, "dot.k")
            last = b.call(masked_load, [element(row, whole), size, tail, zero])
            sums = [b.call(fma, [b.call(masked_load, [element(start, whole), size, tail, zero]),
                                 last, total_]) for start, total_ in zip(starts, sums,
                                                                          strict=True)]
            for r, sum_ in enumerate(sums):
                i = b.add(i0, i64(r))
                with b.if_then(b.icmp_signed("<", i, m)):
                    value = b.fmul(scale, b.call(total, [ir.Constant(real, 0.0), sum_]))
                    at = element(c, b.add(b.mul(i, ldc), j))
                    value = b.select(adding, b.fadd(b.load(at, typ=real), value), value)
                    b.store(value, at)

        counted_loop(b, i64(0), m, i64(DOT_GROUP), group, "dot.rows")

    counted_loop(b, first, last, i64(1), column, "dot.columns")
