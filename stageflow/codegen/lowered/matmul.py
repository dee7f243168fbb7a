"""Lowering of `matmul` and `matmul_add` (float32, float64, complex64, complex128): a loop
over the broadcast batch calling a CBLAS ``cblas_?gemm``: the OpenBLAS that NumPy's wheel
bundles (``cgemm``/``zgemm`` take alpha and beta by pointer), or our own. `matmul_add`
(``alpha * a @ b + c``) copies ``c``, broadcast, into the result and calls the gemm with
``beta = 1``: the BLAS accumulates onto it in the pass where it would have zeroed it.

Which gemm: OpenBLAS's where its kernels are the CPU's best, and our own generated one
(`own_blas` over `conv.gemm`'s register tiles) where OpenBLAS is not linked (a library for
another machine) or the CPU has AVX-512 (`own_gemm`): there our tile of zmm sums runs near
the cores' peak, where NumPy's OpenBLAS picks AVX2 kernels on some of those CPUs. Either
is called from compiled code, without NumPy's dispatch (``benchmarks/matmul.py`` measures
the two against ``np.matmul``), single-threaded on parts of the product split over the
worker pool (`gemm_split`), and one row is a gemv, split the same way (by a transposed B,
where our gemm serves, its dot products).

Why NumPy's copy and not SciPy's ``cython_blas`` capsules: NumPy's wheel exports a CBLAS
with 64-bit integers (``scipy_cblas_sgemm64_`` in ``numpy.libs/libscipy_openblas64_*``),
the same library ``np.matmul`` uses, present wherever NumPy is and without SciPy, which
the runtime does not require; SciPy's ``sgemm`` is the same OpenBLAS behind a Fortran ABI
with 32-bit sizes. Where the symbol is not found (NumPy built against another BLAS), our
own gemm serves where `own_gemm` says so, else there is no lowering and ``np.matmul`` runs.

bfloat16 products run on our own kernels, the CPU's bfloat16 dot products where it has
them (`gemm_bf16`), else float32 copies multiplied by the float32 gemm (`gemm_widened`).

Operands may be row-major or column-major views (a transposed array is passed as it is,
with the transpose flag flipped); any other strides return an error code, and the NumPy
kernel runs instead.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, F64, I1, I32, I64, Emitter, storage_type
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.loops import counted_loop, fold_mul, i64, return_unless
from stageflow.codegen.lowered import gemm_bf16, gemm_split, gemm_widened, own_blas
from stageflow.codegen.lowered.rule import OpBuilder, Operand, OpSpec, dot, lowering, nest
from stageflow.codegen.lowered.small_matmul import broadcast_into, small_matmul
from stageflow.codegen.lowered.tasks import run_tasks, task_count
from stageflow.codegen.targets import platform
from stageflow.core import dtypes
from stageflow.core.config_threading import SPLIT_MACS, openblas_libraries
from stageflow.primitives.linalg import matmul_add_p, matmul_p

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # the CBLAS enums
GEMM_SYMBOLS = {dtypes.float32: "scipy_cblas_sgemm64_", dtypes.float64: "scipy_cblas_dgemm64_",
                dtypes.complex64: "scipy_cblas_cgemm64_",
                dtypes.complex128: "scipy_cblas_zgemm64_"}
# A product of one row (a decoder's step at batch 1) is a matrix-vector product: OpenBLAS's
# gemm of one row ran several times slower than its gemv on the same operands.
GEMV_SYMBOLS = {dtypes.float32: "scipy_cblas_sgemv64_", dtypes.float64: "scipy_cblas_dgemv64_"}
_lock = threading.Lock()
_available: bool | None = None
# OpenBLAS runs a gemm of at most 65536 * 4 multiply-adds on one thread
# (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD): above that it would start its own
# threads, so compiled code splits the product itself (`gemm_split`), at least this many rows
# or columns a task.
OPENBLAS_THREADED_MACS = 65536 * 4
SPLIT_MIN_PART = 16
# OpenBLAS threads a gemv of at least 2304 * 4 elements of the matrix
# (GEMM_MULTITHREAD_THRESHOLD): its threads then spin for a while after each call, on the
# cores our pool's tasks run on (a model's last dense layer at batch 1 kept one spinning
# through every convolution of the next call, halving them). Above that, compiled code runs
# the gemv single-threaded, on parts split over the pool, at least this many columns each.
OPENBLAS_THREADED_GEMV = 2304 * 4
GEMV_MIN_PART = 64
# A task of a batch of small gemms (`Matmul._each`) gets at least this many multiply-adds.
BATCH_TASK_MACS = 1 << 18


# OpenBLAS threads every gemm large enough over a pool of its own, process-wide. Code that
# runs gemms on several threads of its own (a convolution's tasks) makes it single-threaded
# meanwhile: gemms of two tasks each threaded by OpenBLAS ran the small ResNet's step at half
# the speed of single-threaded ones. The count of such regions, a lock and the number of
# threads to restore are one process-wide block (`GUARD_WORDS` i64s at `GUARD_SYMBOL`:
# Python's for the JIT, the library's own ahead of time).
GUARD_SYMBOL, GUARD_WORDS = "sf.blas.threads", 3
THREAD_SYMBOLS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_")
_guard = (ctypes.c_int64 * GUARD_WORDS)()


def _reset_guard_in_child() -> None:
    """A fork copies the guard as it is: a region running in another thread of the parent
    (which the child does not have) would leave OpenBLAS single-threaded in the child for
    good, and a held lock would hang it. The child starts with no region and the thread
    count the first region saved."""
    lock, count, saved = _guard
    _guard[0] = _guard[1] = 0
    if count > 0 and saved > 1 and _available:
        library = ctypes.CDLL(openblas_libraries()[0])
        getattr(library, THREAD_SYMBOLS[1])(ctypes.c_int(saved))


os.register_at_fork(after_in_child=_reset_guard_in_child)


def blas_available() -> bool:
    """Load NumPy's bundled OpenBLAS into LLVM's symbol search once; whether it exports
    the CBLAS gemm functions and the thread count's getter and setter."""
    global _available
    with _lock:
        if _available is None:
            for path in openblas_libraries():
                ctypes.CDLL(path)
                llvm.load_library_permanently(path)
            llvm.add_symbol(GUARD_SYMBOL, ctypes.addressof(_guard))
            _available = all(llvm.address_of_symbol(s) for s in (
                *GEMM_SYMBOLS.values(), *GEMV_SYMBOLS.values(), *THREAD_SYMBOLS))
        return _available


def gemm_lowerable(dtype: np.dtype) -> bool:
    """Whether a gemm of `dtype` can be called from code for the current platform: the
    BLAS's where it is linked (and found here), or our own (`own_gemm`)."""
    if own_gemm(dtype):
        return True
    return platform.current().blas and dtype in GEMM_SYMBOLS and blas_available()


def own_gemm(dtype: np.dtype) -> bool:
    """Whether gemms of `dtype` call our own (`own_blas`): always where OpenBLAS is not
    linked, and on CPUs with AVX-512, where our tile of zmm sums uses the whole vector width
    and NumPy's OpenBLAS may not (on AMD's AVX-512 CPUs it runs AVX2 kernels):
    `benchmarks.matmul` measures the staged gemm against NumPy's."""
    machine = platform.current()
    return dtype in own_blas.DTYPES and (not machine.blas or machine.has("avx512f"))


def blas_guard(module: ir.Module) -> ir.GlobalVariable:
    """The process-wide guard block, declared in `module` (defined by the JIT's symbol)."""
    existing = module.globals.get(GUARD_SYMBOL)
    if isinstance(existing, ir.GlobalVariable):
        return existing
    return ir.GlobalVariable(module, ir.ArrayType(I64, GUARD_WORDS), GUARD_SYMBOL)


def single_threaded_blas(b: ir.IRBuilder, region: Callable[[], None]) -> None:
    """Emit `region` with OpenBLAS single-threaded around it: the first of the regions
    running at once saves the thread count and sets it to 1, the last one out restores it
    (under a spin lock: a region is milliseconds, the lock a few instructions). The
    regions running are counted too (`own_blas.regions`), for our own gemm not to split
    itself over threads meanwhile; without OpenBLAS that count is all the guard does."""
    machine = platform.current()
    if not machine.threads:
        region()
        return
    running = own_blas.regions(b.module)
    b.atomic_rmw("add", running, i64(1), "acq_rel")
    if machine.blas and blas_available():  # (which loads OpenBLAS into the JIT's search)
        _openblas_single_threaded(b, region)
    else:
        region()
    b.atomic_rmw("sub", running, i64(1), "acq_rel")


def _openblas_single_threaded(b: ir.IRBuilder, region: Callable[[], None]) -> None:
    """`region` with OpenBLAS's thread count 1 (`single_threaded_blas`)."""
    module = b.module
    guard = blas_guard(module)
    get = declare(module, THREAD_SYMBOLS[0], I32, [])
    put = declare(module, THREAD_SYMBOLS[1], ir.VoidType(), [I32])
    words = b.bitcast(guard, ir.PointerType(I64))
    lock, count, saved = (b.gep(words, [i64(k)], source_etype=I64) for k in range(GUARD_WORDS))

    def locked(body: Callable[[], None]) -> None:
        head = b.append_basic_block("blas.lock")
        held = b.append_basic_block("blas.held")
        b.branch(head)
        b.position_at_end(head)
        taken = b.atomic_rmw("xchg", lock, i64(1), "acquire")
        b.cbranch(b.icmp_signed("==", taken, i64(0)), held, head)
        b.position_at_end(held)
        body()
        b.store_atomic(i64(0), lock, "release", 8)

    def enter() -> None:
        first = b.icmp_signed("==", b.load(count, typ=I64), i64(0))
        with b.if_then(first):
            threads = b.sext(b.call(get, []), I64)
            b.store(threads, saved)
            with b.if_then(b.icmp_signed(">", threads, i64(1))):
                b.call(put, [ir.Constant(I32, 1)])
        b.store(b.add(b.load(count, typ=I64), i64(1)), count)

    def leave() -> None:
        left = b.sub(b.load(count, typ=I64), i64(1))
        b.store(left, count)
        threads = b.load(saved, typ=I64)
        with b.if_then(b.and_(b.icmp_signed("==", left, i64(0)),
                              b.icmp_signed(">", threads, i64(1)))):
            b.call(put, [b.trunc(threads, I32)])

    locked(enter)
    region()
    locked(leave)



def _blas_part(dtype: np.dtype, b: ir.IRBuilder, first: ir.Value, last: ir.Value,
               words: list[ir.Value]) -> None:
    """A task's part of C = alpha op(A) op(B) + beta C by the BLAS
    (`gemm_split.split_task`'s body): rows [first, last) of C and op(A), or (where the
    `columns` word is set) columns of C and op(B). A row of op(A) lies `lda` apart in A,
    or one apart read transposed; a column of op(B) one apart in B, or `ldb` transposed."""
    a_flag, b_flag, m, n, k, a, lda, x, ldb, c, ldc, alpha, beta, columns = words
    real = storage_type(dtype)
    a_flag, b_flag = b.trunc(a_flag, I32), b.trunc(b_flag, I32)
    by_columns = b.icmp_signed("!=", columns, i64(0))
    a_step = b.select(b.icmp_signed("==", a_flag, ir.Constant(I32, NO_TRANS)), lda, i64(1))
    b_step = b.select(b.icmp_signed("==", b_flag, ir.Constant(I32, NO_TRANS)), i64(1), ldb)
    size = b.sub(last, first)
    scalars = [b.bitcast(word, F64) for word in (alpha, beta)]
    if real == F32:
        scalars = [b.fptrunc(value, F32) for value in scalars]

    def at(word: ir.Value, offset: ir.Value) -> ir.Value:
        return b.gep(b.inttoptr(word, ir.PointerType()), [offset], source_etype=real)

    no_offset = i64(0)
    b.call(gemm_function(b.module, dtype), [
        ir.Constant(I32, ROW_MAJOR), a_flag, b_flag, b.select(by_columns, m, size),
        b.select(by_columns, size, n), k, scalars[0],
        at(a, b.select(by_columns, no_offset, b.mul(first, a_step))), lda,
        at(x, b.select(by_columns, b.mul(first, b_step), no_offset)), ldb, scalars[1],
        at(c, b.select(by_columns, first, b.mul(first, ldc))), ldc])


def _gemv_part(dtype: np.dtype, b: ir.IRBuilder, first: ir.Value, last: ir.Value,
               words: list[ir.Value]) -> None:
    """A task's part of the one-row product c = alpha a op(B) + beta c by the BLAS's gemv
    (`gemm_split.split_task`'s body): columns [first, last) of c, which are columns of B
    as stored (`as_is`, B read k x n), else rows of the stored transpose."""
    as_is, k, x, ldb, a, a_step, c, alpha, beta = words
    real = storage_type(dtype)
    size = b.sub(last, first)
    as_is = b.icmp_signed("!=", as_is, i64(0))
    scalars = [b.bitcast(word, F64) for word in (alpha, beta)]
    if real == F32:
        scalars = [b.fptrunc(value, F32) for value in scalars]

    def at(word: ir.Value, offset: ir.Value) -> ir.Value:
        return b.gep(b.inttoptr(word, ir.PointerType()), [offset], source_etype=real)

    flag = b.select(as_is, ir.Constant(I32, TRANS), ir.Constant(I32, NO_TRANS))
    b.call(gemv_function(b.module, dtype), [
        ir.Constant(I32, ROW_MAJOR), flag, b.select(as_is, k, size), b.select(as_is, size, k),
        scalars[0], at(x, b.select(as_is, first, b.mul(first, ldb))), ldb, at(a, i64(0)),
        a_step, scalars[1], at(c, first), i64(1)])


def gemm_function(module: ir.Module, dtype: np.dtype) -> ir.Function:
    """``cblas_?gemm`` of `dtype`, declared in `module` on first use; our own where
    `own_gemm` says so."""
    if own_gemm(dtype):
        return own_blas.gemm_function(module, dtype)
    name = GEMM_SYMBOLS[dtype]
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    pointer = ir.PointerType()
    real = {dtypes.float32: F32, dtypes.float64: F64}.get(dtype, pointer)  # complex: by pointer
    signature = ir.FunctionType(ir.VoidType(), [I32, I32, I32, I64, I64, I64, real, pointer,
                                                I64, pointer, I64, real, pointer, I64])
    return ir.Function(module, signature, name)


def gemv_function(module: ir.Module, dtype: np.dtype) -> ir.Function:
    """``cblas_?gemv`` of a real `dtype`, declared in `module` on first use."""
    name = GEMV_SYMBOLS[dtype]
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    real = {dtypes.float32: F32, dtypes.float64: F64}[dtype]
    pointer = ir.PointerType()
    signature = ir.FunctionType(ir.VoidType(), [I32, I32, I64, I64, real, pointer, I64, pointer,
                                                I64, real, pointer, I64])
    return ir.Function(module, signature, name)


def _select_max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _layout(b: ir.IRBuilder, x: Operand, transpose: bool) -> tuple[ir.Value, ir.Value,
                                                                  ir.Value]:
    """(usable, cblas transpose flag, leading dim) for the stored matrix of `x`: row-major
    as is, or column-major read as the transpose of a row-major one; an empty one (no gemm
    reads it) whatever its strides."""
    rows, cols = x.dims[-2:]
    row_stride, col_stride = x.strides[-2:]
    flat_rows, flat_cols = (b.icmp_signed("<=", d, i64(1)) for d in (rows, cols))
    wide_cols, wide_rows = _select_max(b, cols, i64(1)), _select_max(b, rows, i64(1))
    row_ok = b.and_(b.or_(b.icmp_signed("==", col_stride, i64(1)), flat_cols),
                    b.or_(b.icmp_signed(">=", row_stride, wide_cols), flat_rows))
    col_ok = b.and_(b.or_(b.icmp_signed("==", row_stride, i64(1)), flat_rows),
                    b.or_(b.icmp_signed(">=", col_stride, wide_rows), flat_cols))
    lead = b.select(row_ok, b.select(flat_rows, wide_cols, row_stride),
                    b.select(flat_cols, wide_rows, col_stride))
    as_is, flipped = ((TRANS, NO_TRANS) if transpose else (NO_TRANS, TRANS))
    flag = b.select(row_ok, ir.Constant(I32, as_is), ir.Constant(I32, flipped))
    empty = b.or_(b.icmp_signed("==", rows, i64(0)), b.icmp_signed("==", cols, i64(0)))
    return b.or_(b.or_(row_ok, col_ok), empty), flag, lead


@dataclass(frozen=True)
class _Product:
    """A matmul's sizes (k as a and as b give it), its broadcast batch dims, each operand's
    strides along them, whether the batch dims broadcast, and each operand's layout: ok,
    (transpose flag, leading dim)."""

    m: ir.Value
    n: ir.Value
    k: ir.Value
    k2: ir.Value
    batch: list[ir.Value]
    a_strides: list[ir.Value]
    b_strides: list[ir.Value]
    fits: list[ir.Value]
    a_ok: ir.Value
    a_layout: tuple[ir.Value, ir.Value]
    b_ok: ir.Value
    b_layout: tuple[ir.Value, ir.Value]


@dataclass(frozen=True)
class Matmul:
    """``alpha * op(a) @ op(b)``, plus the broadcast third operand if `accumulate`."""

    transpose_a: bool
    transpose_b: bool
    dtype: np.dtype
    alpha: float = 1.0
    accumulate: bool = False
    # The work is in the gemm and memcpy calls: LLVM's loop optimisations (O2 vectorised
    # the zeroing and copying loops) cost compile time per matmul and gained nothing.
    optimize_loops = False

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        out = ob.outputs[0]
        p = self._product(ob)
        ob.fail_unless(ob.eq(p.k, p.k2), 1)
        ob.fail_unless(ob.all_of(p.fits), 1)
        ob.expect_output(0, [*p.batch, p.m, p.n])
        ob.fail_unless(p.a_ok, 0)
        ob.fail_unless(p.b_ok, 1)
        element = storage_type(self.dtype)
        if self.accumulate:
            broadcast_into(ob, ob.inputs[2], out)
        empty = b.or_(ob.eq(p.m, i64(0)), ob.eq(p.n, i64(0)))
        with b.if_then(b.not_(empty)):
            with b.if_else(ob.eq(p.k, i64(0))) as (no_terms, terms):
                with no_terms:
                    if not self.accumulate:
                        nest(b, [out.size(b)], lambda i: b.store(
                            ir.Constant(element, None), out.address(b, i[0])), "zero")
                with terms:
                    call = self._call(ob, p)
                    a, x = ob.inputs[0], ob.inputs[1]
                    if p.batch and len(x.dims) == 2 and not self.transpose_a:
                        # One gemm over all of a's rows where b is a single matrix and a's
                        # batches are rows stacked at one stride (a layer applied to a
                        # batch of sequences): one call of M = batch * m, not one per
                        # batch, as the BLAS then splits and packs the work once.
                        with b.if_else(self._stacked(ob, a, p.a_layout[0], p.a_layout[1])
                                       ) as (once, each):
                            with once:
                                rows = p.m
                                for d in p.batch:
                                    rows = fold_mul(b, rows, d)
                                call([i64(0)] * len(p.batch), rows)
                            with each:
                                self._each(ob, p, call)
                    else:
                        self._each(ob, p, call)

    def _product(self, ob: OpBuilder) -> _Product:
        """The product's sizes, batch and layouts as `ob`'s operands give them."""
        b = ob.b
        a, x, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        m, k = a.dims[-2:][::-1] if self.transpose_a else a.dims[-2:]
        k2, n = x.dims[-2:][::-1] if self.transpose_b else x.dims[-2:]
        rank = len(out.dims) - 2
        batch, a_strides, b_strides, fits = [], [], [], []
        for axis in range(rank):
            sizes, strides = [], []
            for operand in (a, x):
                at = axis - rank + len(operand.dims) - 2
                if at < 0:
                    sizes.append(i64(1))
                    strides.append(i64(0))
                    continue
                d = operand.dims[at]
                sizes.append(d)
                strides.append(b.select(ob.eq(d, i64(1)), i64(0), operand.strides[at]))
            da, db = sizes
            one_a, one_b = ob.eq(da, i64(1)), ob.eq(db, i64(1))
            fits.append(b.or_(b.or_(one_a, one_b), ob.eq(da, db)))
            batch.append(b.select(one_a, db, da))
            a_strides.append(strides[0])
            b_strides.append(strides[1])
        a_ok, a_flag, lda = _layout(b, a, self.transpose_a)
        b_ok, b_flag, ldb = _layout(b, x, self.transpose_b)
        return _Product(m, n, k, k2, batch, a_strides, b_strides, fits, a_ok, (a_flag, lda),
                        b_ok, (b_flag, ldb))

    def _call(self, ob: OpBuilder, p: _Product) -> Callable[..., None]:
        """The gemm of one batch index (its rows `m` unless given)."""
        b = ob.b
        a, x, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        gemm = self._gemm(ob, p.a_layout, p.b_layout)

        def call(at: list[ir.Value], rows: ir.Value = p.m) -> None:
            a_at = a.address(b, dot(b, at, p.a_strides))
            b_at = x.address(b, dot(b, at, p.b_strides))
            c_at = out.address(b, dot(b, at, out.strides[:len(p.batch)]))
            gemm(rows, p.n, p.k, a_at, b_at, c_at)

        return call

    def _each(self, ob: OpBuilder, p: _Product, call: Callable[..., None]) -> None:
        """A gemm per batch index: in turn, each splitting itself over the cores where it
        is large enough; or, where there are several and each is too small to split
        (`SPLIT_MACS`: an attention's scores, 128 x 64 by 64 x 128 per head), the batch
        indices themselves split over the cores, each task's gemms single-threaded. One
        at a time, the heads of a BERT layer ran on one core."""
        b = ob.b
        if not p.batch:
            call([])
            return
        count = p.batch[0]
        for d in p.batch[1:]:
            count = fold_mul(b, count, d)
        if not platform.current().threads:
            nest(b, p.batch, call, "batch")
            return
        macs = b.mul(b.mul(p.m, p.n), p.k)
        several = ob.all_of([b.icmp_signed(">=", count, i64(2)),
                             b.icmp_signed("<", macs, i64(SPLIT_MACS))])
        with b.if_else(several) as (split, serial):
            with split:
                run_tasks(ob, "batches", count,
                          task_count(b, count, b.mul(count, macs), BATCH_TASK_MACS),
                          self._batches, guard=single_threaded_blas)
            with serial:
                nest(b, p.batch, call, "batch")

    def _batches(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
                 memory: ir.Value) -> None:
        """A task's batch indices [first, last) (flat, row-major), a gemm each."""
        b = ob.b
        # Out of the entry block, where the gemm's scalars (complex alpha and beta) take
        # their stack memory.
        body = b.append_basic_block("batches")
        b.branch(body)
        b.position_at_end(body)
        p = self._product(ob)
        call = self._call(ob, p)

        def one(flat: ir.Value) -> None:
            at, left = [], flat
            for d in reversed(p.batch):
                at.append(b.srem(left, d))
                left = b.sdiv(left, d)
            call(at[::-1])

        counted_loop(b, first, last, i64(1), one, "batch")

    def _gemm(self, ob: OpBuilder, a_layout: tuple[ir.Value, ir.Value],
              b_layout: tuple[ir.Value, ir.Value]) -> Callable[..., None]:
        """The call of one product ``(m, n, k, a, b, c)``, each operand read by its
        (transpose flag, leading dim): a CBLAS gemm (`gemm_function`: OpenBLAS's or our
        own), or for bfloat16 our own (`gemm_bf16`, or `gemm_widened` on a CPU without
        bfloat16 dot products), given the same layouts as element strides of rows and
        columns."""
        b = ob.b
        if self.dtype != dtypes.bfloat16:
            function = gemm_function(b.module, self.dtype)
            element = storage_type(self.dtype)
            alpha, beta = (Emitter.const(element, value) for value in (self.alpha,
                                                                       float(self.accumulate)))
            if dtypes.is_complex(self.dtype):
                pointers = entry_alloca(b, element, 2, "scalars")
                b.store(alpha, pointers)
                b.store(beta, b.gep(pointers, [i64(1)], source_etype=element))
                alpha, beta = pointers, b.gep(pointers, [i64(1)], source_etype=element)
            (a_flag, lda), (b_flag, ldb) = a_layout, b_layout
            row_major = ir.Constant(I32, ROW_MAJOR)

            def direct(m, n, k, a_at, b_at, c_at) -> None:
                b.call(function, [row_major, a_flag, b_flag, m, n, k, alpha, a_at, lda, b_at,
                                  ldb, beta, c_at, n])

            if (self.dtype not in GEMV_SYMBOLS or not platform.current().blas
                    or not blas_available()):
                return direct
            # Our own gemm splits itself over the pool; OpenBLAS's is split here.
            gemm = direct if own_gemm(self.dtype) else self._pooled(b, direct, a_layout,
                                                                   b_layout, alpha, beta)
            gemv = gemm_split.split_task(b.module, f"sf.gemv.part.{self.dtype.name}", 9,
                                         functools.partial(_gemv_part, self.dtype))
            # One row: c = op(B)^T a, B read as stored (its transpose where it is used as
            # is), a's k elements one apart or, read transposed, a column `lda` apart.
            b_as_is = b.zext(b.icmp_signed("==", b_flag, ir.Constant(I32, NO_TRANS)), I64)
            a_step = b.select(b.icmp_signed("==", a_flag, ir.Constant(I32, NO_TRANS)), i64(1),
                              lda)

            def one_row(n, k, a_at, b_at, c_at) -> None:
                macs = b.mul(n, k)
                words = [b_as_is, k, b_at, ldb, a_at, a_step, c_at, alpha, beta]

                def split() -> None:
                    gemm_split.run_split(b, gemv, n, macs, words, GEMV_MIN_PART)

                with b.if_else(b.icmp_signed(">=", macs, i64(OPENBLAS_THREADED_GEMV))) as (
                        large, small):
                    with small:
                        split()
                    with large:
                        single_threaded_blas(b, split)

            # Our gemm's dot products read a transposed B (a decoder's weights, out by in)
            # as one stream at the memory's speed, where OpenBLAS's gemv, on the AVX2
            # kernels it picks on some AVX-512 CPUs, does not: a row by such a B is theirs.
            gemv_row = ir.Constant(I1, 1)
            if own_gemm(self.dtype):
                gemv_row = b.not_(b.and_(b.icmp_signed("==", b_as_is, i64(0)),
                                         b.icmp_signed("==", a_flag, ir.Constant(I32, NO_TRANS))))

            def blas(m, n, k, a_at, b_at, c_at) -> None:
                one = b.and_(b.icmp_signed("==", m, i64(1)), gemv_row)
                with b.if_else(one) as (row, rows):
                    with row:
                        one_row(n, k, a_at, b_at, c_at)
                    with rows:
                        gemm(m, n, k, a_at, b_at, c_at)

            return blas
        function = (gemm_bf16.gemm_function(b.module)
                    if gemm_bf16.available(platform.current().features) else
                    gemm_widened.gemm_function(b.module, gemm_function(b.module, dtypes.float32)))
        strides = []
        for flag, lead in (a_layout, b_layout):
            rows_along = b.icmp_signed("==", flag, ir.Constant(I32, NO_TRANS))
            strides += [b.select(rows_along, lead, i64(1)), b.select(rows_along, i64(1), lead)]
        a_row, a_col, b_row, b_col = strides
        no_memory = ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1)

        def own(m, n, k, a_at, b_at, c_at) -> None:
            status = b.call(function, [m, n, k, a_at, a_row, a_col, b_at, b_row, b_col, c_at, n,
                                       ir.Constant(F32, self.alpha),
                                       ir.Constant(I1, self.accumulate)])
            return_unless(b, b.icmp_signed("==", status, ir.Constant(I32, 0)), no_memory)

        return own

    def _pooled(self, b: ir.IRBuilder, direct: Callable[..., None],
                a_layout: tuple[ir.Value, ir.Value], b_layout: tuple[ir.Value, ir.Value],
                alpha: ir.Value, beta: ir.Value) -> Callable[..., None]:
        """OpenBLAS's gemm called once where it would not thread it, else single-threaded
        on parts of C split over our pool (`gemm_split` says why)."""
        task = gemm_split.split_task(b.module, f"sf.blas.part.{self.dtype.name}", 14,
                                     functools.partial(_blas_part, self.dtype))
        (a_flag, lda), (b_flag, ldb) = a_layout, b_layout

        def pooled(m, n, k, a_at, b_at, c_at) -> None:
            macs = b.mul(b.mul(m, n), k)
            with b.if_else(b.icmp_signed(">", macs, i64(OPENBLAS_THREADED_MACS))) as (
                    large, small):
                with small:
                    direct(m, n, k, a_at, b_at, c_at)
                with large:
                    wide = b.icmp_signed(">=", n, m)
                    words = [a_flag, b_flag, m, n, k, a_at, lda, b_at, ldb, c_at, n, alpha,
                             beta, b.zext(wide, I64)]
                    single_threaded_blas(b, lambda: gemm_split.run_split(
                        b, task, b.select(wide, n, m), macs, words, SPLIT_MIN_PART))

        return pooled

    @staticmethod
    def _stacked(ob: OpBuilder, a: Operand, a_flag: ir.Value, lda: ir.Value) -> ir.Value:
        """Whether a is read row-major and each batch dim steps over whole blocks of rows
        at the row stride (so all its rows form one matrix of leading dim `lda`)."""
        b = ob.b
        ok = b.icmp_signed("==", a_flag, ir.Constant(I32, NO_TRANS))
        span = fold_mul(b, a.dims[-2], lda)
        for d, stride in zip(reversed(a.dims[:-2]), reversed(a.strides[:-2]), strict=True):
            ok = b.and_(ok, b.or_(ob.eq(d, i64(1)), ob.eq(stride, span)))
            span = fold_mul(b, span, d)
        return ok


@lowering(matmul_p, matmul_add_p)
def _matmul(spec: OpSpec) -> Matmul | None:
    dtype = spec.inputs[0].dtype
    own = dtype == dtypes.bfloat16
    if not gemm_lowerable(dtypes.float32 if own else dtype):
        return None
    transpose_a, transpose_b = bool(spec.params["transpose_a"]), bool(spec.params["transpose_b"])
    alpha, accumulate = float(spec.params.get("alpha", 1.0)), spec.primitive is matmul_add_p
    small = (None if dtypes.is_complex(dtype) or own  # (its code: real, wide floats)
             else small_matmul(spec, transpose_a, transpose_b, dtype, alpha, accumulate))
    return small or Matmul(transpose_a, transpose_b, dtype, alpha, accumulate)

