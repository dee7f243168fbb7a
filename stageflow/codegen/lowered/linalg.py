"""Lowerings of the factorizations and solvers (`primitives.factorizations`) to LAPACK calls:
the LAPACK of the OpenBLAS that NumPy's wheel bundles, which ``numpy.linalg`` itself calls.

Per op, the routines ``numpy.linalg`` calls for it, with its arguments:

    ================  ======================================================================
    inv               ``dgesv`` of the matrix and the identity
    solve             ``dgesv``
    triangular_solve  ``dtrtrs`` (the kernel solves the triangle with ``dgesv``: an O(n^3)
                      LU where trtrs is one O(n^2 k) substitution; same numbers to rounding)
    cholesky          ``dpotrf`` of the lower triangle, the upper one zeroed
    eigh              ``dsyevd`` (eigenvectors, lower triangle)
    qr                ``dgeqrf`` then ``dorgqr``; r the upper triangle of the factored matrix
    svd               ``dgesdd`` (``jobz`` 'S', or 'A' for full matrices)
    slogdet           ``dgetrf``; the sign from the pivots and the diagonal, the log|det| a
                      sum of logs (sign 0 and -inf for a singular matrix, as NumPy gives)
    ================  ======================================================================

Why the double routines for float32 too: ``numpy.linalg`` computes every real input in
float64 (`_commonType`) and rounds the results, so the eager kernels do. Calling the same
routine on the same column-major copy with the same work sizes (queried with ``lwork = -1``
as NumPy queries them) gives eager's numbers exactly (the tests compare bit for bit where
OpenBLAS is deterministic), the same eigenvector and singular vector signs, and the same
decisions about singular or indefinite matrices; single-precision routines would differ in
all three. The copies in and out, which convert and transpose between the row-major
operands and LAPACK's column-major storage (as NumPy's ``linearize_matrix`` does), cost
O(n^2) against the routines' O(n^3).

Why a call from compiled code and not through NumPy: a staged function using these ops
becomes one compiled program (`codegen.program`) instead of Python steps around each of
them, each step a NumPy call with ``numpy.linalg``'s dispatch: a Gaussian log-likelihood
(cholesky, two triangular solves, slogdet, a sum) runs two to four times faster as one
program on small matrices, and still faster on large ones, where the steps' cost is the
kernels' (the eager triangular solve an LU). A function of one op gains nothing: a staged
`inv` of small matrices costs what ``np.linalg.inv`` does, plus the call.

Symbols: ``scipy_d<routine>_64_`` in ``numpy.libs/libscipy_openblas64_*`` (prefixed, 64-bit
integers, the Fortran ABI: every argument by reference, a character argument's length as a
hidden ``size_t`` appended after the others). Found and linked as `matmul` finds the gemm
(`matmul.blas_available`, `config_threading.openblas_libraries` for ahead-of-time
libraries); where they are missing (NumPy built against another LAPACK) there is no
lowering and the kernels run.

Failures: wrong dims return the error code of the operand at fault; where LAPACK reports
``info != 0`` (a singular matrix for inv and solve, a zero on a triangle's diagonal for
triangular_solve, an indefinite one for cholesky, no convergence for eigh and svd) the op
returns an error code, so the NumPy kernel runs and raises NumPy's `LinAlgError` (in a
program, the program's steps run and the op's kernel raises); as does a failed malloc of
the workspace (one block per call: copies, pivots, LAPACK's work arrays).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, F64, I1, I8, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.loops import fold_add, fold_mul, i64, return_unless
from stageflow.codegen.lowered.matmul import blas_available
from stageflow.codegen.lowered.rule import OpBuilder, Operand, OpSpec, dot, lowering, nest
from stageflow.codegen.targets import platform
from stageflow.core import dtypes
from stageflow.core.primitive import Primitive
from stageflow.primitives.factorizations import (
    cholesky_p,
    eigh_p,
    inv_p,
    qr_p,
    slogdet_p,
    solve_p,
    svd_p,
    triangular_solve_p,
)

_PTR = ir.PointerType()
# routine -> (its arguments, how many of them are characters): all by reference
ROUTINES = {
    "dgesv": (8, 0),  # n, nrhs, a, lda, ipiv, b, ldb, info
    "dgetrf": (6, 0),  # m, n, a, lda, ipiv, info
    "dtrtrs": (10, 3),  # uplo, trans, diag, n, nrhs, a, lda, b, ldb, info
    "dpotrf": (5, 1),  # uplo, n, a, lda, info
    "dsyevd": (11, 2),  # jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info
    "dgeqrf": (8, 0),  # m, n, a, lda, tau, work, lwork, info
    "dorgqr": (9, 0),  # m, n, k, a, lda, tau, work, lwork, info
    "dgesdd": (14, 1),  # jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info
}
FLOATS = (dtypes.float32, dtypes.float64)
_lock = threading.Lock()
_available: bool | None = None


def symbol(routine: str) -> str:
    """The exported name of a LAPACK routine in NumPy's bundled OpenBLAS."""
    return f"scipy_{routine}_64_"


def lapack_available() -> bool:
    """Whether NumPy's bundled OpenBLAS (loaded once into LLVM's symbol search by
    `blas_available`) exports every routine these lowerings call."""
    global _available
    with _lock:
        if _available is None:
            _available = blas_available() and all(
                llvm.address_of_symbol(symbol(r)) for r in ROUTINES)
        return _available


# -- calling LAPACK ------------------------------------------------------------------------

Argument = ir.Value | str  # a pointer as it is; an i64 or a character passed by reference


def call_lapack(b: ir.IRBuilder, routine: str, arguments: Sequence[Argument]) -> ir.Value:
    """Call `routine` with `arguments` then its ``info`` (returned, i64): pointers are passed
    as they are, i64 values and characters (one-letter strings) through stack slots, and
    each character's hidden length (1) follows the arguments."""
    count, characters = ROUTINES[routine]
    function = declare(b.module, symbol(routine), ir.VoidType(),
                       [_PTR] * count + [I64] * characters)
    passed = []
    for argument in arguments:
        if isinstance(argument, str):
            slot = entry_alloca(b, I8, name=f"{routine}.{argument}")
            b.store(ir.Constant(I8, ord(argument)), slot)
        elif isinstance(argument.type, ir.PointerType):
            passed.append(argument)
            continue
        else:
            slot = entry_alloca(b, I64)
            b.store(argument, slot)
        passed.append(slot)
    info = entry_alloca(b, I64, name=f"{routine}.info")
    b.store(i64(0), info)
    b.call(function, [*passed, info, *[i64(1)] * characters])
    return b.load(info, typ=I64)


def query_work(b: ir.IRBuilder, routine: str, arguments: Sequence[Argument],
               work: int, integer_work: int | None = None) -> list[ir.Value]:
    """The optimal sizes of `routine`'s work arrays (i64): a call with their sizes -1.
    `work` (and `integer_work`) are the positions of the arrays in `arguments`, whose sizes
    follow them; the arrays stand for nothing else (a query reads no matrix)."""
    size = entry_alloca(b, F64, name=f"{routine}.lwork")
    given = list(arguments)
    given[work], given[work + 1] = size, i64(-1)
    sizes = []
    if integer_work is not None:
        integer_size = entry_alloca(b, I64, name=f"{routine}.liwork")
        given[integer_work], given[integer_work + 1] = integer_size, i64(-1)
    call_lapack(b, routine, given)
    sizes.append(_at_least(b, b.fptosi(b.load(size, typ=F64), I64), i64(1)))
    if integer_work is not None:
        sizes.append(_at_least(b, b.load(integer_size, typ=I64), i64(1)))
    return sizes


def _at_least(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
        return i64(max(x.constant, y.constant))
    return b.select(b.icmp_signed(">", x, y), x, y)


def _at_most(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
        return i64(min(x.constant, y.constant))
    return b.select(b.icmp_signed("<", x, y), x, y)


# -- the workspace and the copies -----------------------------------------------------------


class Workspace:
    """One malloc'd block of 8-byte words (doubles and LAPACK's int64s) per call, cut into
    regions of run-time sizes; a failed malloc returns `code`. `fail_unless` frees it
    before it returns an error code."""

    def __init__(self, ob: OpBuilder, sizes: Sequence[ir.Value], code: int) -> None:
        b = self.b = ob.b
        words: ir.Value = i64(1)  # one spare word: malloc(0) may return NULL
        for size in sizes:
            words = fold_add(b, words, size)
        malloc = declare(b.module, "malloc", _PTR, [I64])
        self._free = declare(b.module, "free", ir.VoidType(), [_PTR])
        self.block = b.call(malloc, [fold_mul(b, words, i64(8))])
        return_unless(b, b.icmp_unsigned("!=", self.block, ir.Constant(_PTR, None)),
                      ir.Constant(I32, code))
        self.regions: list[ir.Value] = []
        offset: ir.Value = i64(0)
        for size in sizes:
            self.regions.append(b.gep(self.block, [offset], source_etype=F64))
            offset = fold_add(b, offset, size)

    def fail_unless(self, ok: ir.Value, code: int) -> None:
        b = self.b
        function = b.block.function
        good = function.append_basic_block("lapack.ok")
        bad = function.append_basic_block("lapack.fail")
        b.cbranch(ok, good, bad)
        b.position_at_end(bad)
        b.call(self._free, [self.block])
        b.ret(ir.Constant(I32, code))
        b.position_at_end(good)

    def free(self) -> None:
        self.b.call(self._free, [self.block])


def to_columns(b: ir.IRBuilder, source: Operand, base: ir.Value, rows: ir.Value,
               cols: ir.Value, target: ir.Value, lead: ir.Value) -> None:
    """``target[j * lead + i] = double(source[i, j])`` for the [rows, cols] matrix of
    `source` at element `base` (any strides): LAPACK's column-major copy."""
    row_stride, col_stride = source.strides[-2:]

    def element(at: list[ir.Value]) -> None:
        j, i = at
        offset = fold_add(b, base, dot(b, [i, j], [row_stride, col_stride]))
        value = b.load(source.address(b, offset), typ=source.element)
        if source.element == F32:
            value = b.fpext(value, F64)
        b.store(value, b.gep(target, [fold_add(b, fold_mul(b, j, lead), i)],
                             source_etype=F64))

    nest(b, [cols, rows], element, "in")


def from_columns(b: ir.IRBuilder, source: ir.Value, lead: ir.Value, rows: ir.Value,
                 cols: ir.Value, target: Operand, base: ir.Value,
                 keep: Callable[[ir.Value, ir.Value], ir.Value] | None = None,
                 stride: ir.Value | None = None) -> None:
    """``target[i, j] = source[j * lead + i * stride]`` (`stride` 1 unless given: the
    column-major matrix), rounded to the target's dtype, for the [rows, cols] matrix of
    `target` at element `base`; 0 where ``keep(i, j)`` is false."""
    row_stride, col_stride = target.strides[-2:]
    zero = ir.Constant(target.element, 0.0)
    step = i64(1) if stride is None else stride

    def element(at: list[ir.Value]) -> None:
        i, j = at
        index = fold_add(b, fold_mul(b, j, lead), fold_mul(b, i, step))
        value = b.load(b.gep(source, [index], source_etype=F64), typ=F64)
        if target.element == F32:
            value = b.fptrunc(value, F32)
        if keep is not None:
            value = b.select(keep(i, j), value, zero)
        offset = fold_add(b, base, dot(b, [i, j], [row_stride, col_stride]))
        b.store(value, target.address(b, offset))

    nest(b, [rows, cols], element, "out")


def vector_out(b: ir.IRBuilder, source: ir.Value, count: ir.Value, target: Operand,
               base: ir.Value) -> None:
    """``target[base + i] = source[i]`` for i < count (a contiguous last dim)."""
    def element(at: list[ir.Value]) -> None:
        value = b.load(b.gep(source, at, source_etype=F64), typ=F64)
        if target.element == F32:
            value = b.fptrunc(value, F32)
        b.store(value, target.address(b, fold_add(b, base, at[0])))

    nest(b, [count], element, "values")


def identity(b: ir.IRBuilder, target: ir.Value, n: ir.Value) -> None:
    """The n x n identity in `target` (doubles)."""
    def element(at: list[ir.Value]) -> None:
        j, i = at
        value = b.select(b.icmp_signed("==", i, j), ir.Constant(F64, 1.0),
                         ir.Constant(F64, 0.0))
        b.store(value, b.gep(target, [b.add(fold_mul(b, j, n), i)], source_etype=F64))

    nest(b, [n, n], element, "eye")


def lower_triangle(b: ir.IRBuilder, i: ir.Value, j: ir.Value) -> ir.Value:
    return b.icmp_signed(">=", i, j)


def upper_triangle(b: ir.IRBuilder, i: ir.Value, j: ir.Value) -> ir.Value:
    return b.icmp_signed("<=", i, j)


# -- dims checks ----------------------------------------------------------------------------


def square(ob: OpBuilder, index: int) -> ir.Value:
    """The size of input `index`'s square matrices (an error code unless square)."""
    operand = ob.inputs[index]
    rows, cols = operand.dims[-2:]
    ob.fail_unless(ob.eq(rows, cols), index)
    return rows


def batch_strides(ob: OpBuilder, index: int, batch: Sequence[ir.Value]) -> list[ir.Value]:
    """Input `index`'s element strides over the `batch` dims (0 along a dim of 1, which
    broadcasts); an error code unless each of its batch dims is 1 or the batch's."""
    b, operand = ob.b, ob.inputs[index]
    dims, strides = operand.dims[:-2], operand.strides[:-2]
    ob.fail_unless(ob.all_of([b.or_(ob.eq(d, i64(1)), ob.eq(d, want))
                              for d, want in zip(dims, batch, strict=True) if d is not want]),
                   index)
    return [b.select(ob.eq(d, i64(1)), i64(0), s) for d, s in zip(dims, strides, strict=True)]


def batch_loop(ob: OpBuilder, batch: Sequence[ir.Value],
               body: Callable[[list[ir.Value]], None]) -> None:
    """`body` at each index of the leading dims (none: once)."""
    nest(ob.b, list(batch), body, "batch")


def _base(b: ir.IRBuilder, at: Sequence[ir.Value], strides: Sequence[ir.Value]) -> ir.Value:
    return dot(b, list(at), list(strides))


def _out_base(b: ir.IRBuilder, operand: Operand, at: Sequence[ir.Value]) -> ir.Value:
    return dot(b, list(at), operand.strides[:len(at)])


def _codes(ob: OpBuilder) -> tuple[int, int]:
    """The codes of a LAPACK failure (the first input's) and of a failed malloc (one past
    the arguments, as the convolutions return)."""
    return 1, len(ob.inputs) + len(ob.outputs) + 1


# -- the ops --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Solve:
    """`inv` (``a`` alone, solved against the identity) and `solve` (``a``, ``b``): one
    ``dgesv`` per matrix of the batch, as ``numpy.linalg`` does."""

    inverse: bool
    # The work is in LAPACK and the copies: LLVM's loop optimisations would cost compile
    # time and gain nothing measurable (as for `matmul`).
    optimize_loops = False

    def emit(self, ob: OpBuilder) -> None:
        b, out = ob.b, ob.outputs[0]
        n = square(ob, 0)
        a = ob.inputs[0]
        if self.inverse:
            k, batch = n, a.dims[:-2]
            ob.expect_output(0, a.dims)
        else:
            rhs = ob.inputs[1]
            ob.fail_unless(ob.eq(rhs.dims[-2], n), 1)
            k, batch = rhs.dims[-1], rhs.dims[:-2]
            ob.expect_output(0, rhs.dims)
        a_strides = batch_strides(ob, 0, batch)
        b_strides = [] if self.inverse else batch_strides(ob, 1, batch)
        failed, no_memory = _codes(ob)
        lead = _at_least(b, n, i64(1))
        space = Workspace(ob, [fold_mul(b, n, n), fold_mul(b, n, k), n], no_memory)
        matrix, solution, pivots = space.regions

        def each(at: list[ir.Value]) -> None:
            to_columns(b, a, _base(b, at, a_strides), n, n, matrix, lead)
            if self.inverse:
                identity(b, solution, n)
            else:
                to_columns(b, ob.inputs[1], _base(b, at, b_strides), n, k, solution, lead)
            info = call_lapack(b, "dgesv", [n, k, matrix, lead, pivots, solution, lead])
            space.fail_unless(b.icmp_signed("==", info, i64(0)), failed)
            from_columns(b, solution, lead, n, k, out, _out_base(b, out, at))

        batch_loop(ob, batch, each)
        space.free()


@dataclass(frozen=True)
class TriangularSolve:
    """``dtrtrs`` of the lower (upper) triangle, transposed for `adjoint`."""

    lower: bool
    adjoint: bool
    optimize_loops = False

    def emit(self, ob: OpBuilder) -> None:
        b, out = ob.b, ob.outputs[0]
        n = square(ob, 0)
        a, rhs = ob.inputs
        ob.fail_unless(ob.eq(rhs.dims[-2], n), 1)
        k, batch = rhs.dims[-1], rhs.dims[:-2]
        ob.expect_output(0, rhs.dims)
        a_strides, b_strides = batch_strides(ob, 0, batch), batch_strides(ob, 1, batch)
        failed, no_memory = _codes(ob)
        lead = _at_least(b, n, i64(1))
        space = Workspace(ob, [fold_mul(b, n, n), fold_mul(b, n, k)], no_memory)
        matrix, solution = space.regions

        def each(at: list[ir.Value]) -> None:
            to_columns(b, a, _base(b, at, a_strides), n, n, matrix, lead)
            to_columns(b, rhs, _base(b, at, b_strides), n, k, solution, lead)
            info = call_lapack(b, "dtrtrs", ["L" if self.lower else "U",
                                             "T" if self.adjoint else "N", "N", n, k, matrix,
                                             lead, solution, lead])
            space.fail_unless(b.icmp_signed("==", info, i64(0)), failed)
            from_columns(b, solution, lead, n, k, out, _out_base(b, out, at))

        batch_loop(ob, batch, each)
        space.free()


@dataclass(frozen=True)
class Cholesky:
    """``dpotrf`` of the lower triangle; the result's upper triangle zeroed."""

    optimize_loops = False

    def emit(self, ob: OpBuilder) -> None:
        b, a, out = ob.b, ob.inputs[0], ob.outputs[0]
        n = square(ob, 0)
        ob.expect_output(0, a.dims)
        batch = a.dims[:-2]
        strides = batch_strides(ob, 0, batch)
        failed, no_memory = _codes(ob)
        lead = _at_least(b, n, i64(1))
        space = Workspace(ob, [fold_mul(b, n, n)], no_memory)
        (matrix,) = space.regions

        def each(at: list[ir.Value]) -> None:
            to_columns(b, a, _base(b, at, strides), n, n, matrix, lead)
            info = call_lapack(b, "dpotrf", ["L", n, matrix, lead])
            space.fail_unless(b.icmp_signed("==", info, i64(0)), failed)
            from_columns(b, matrix, lead, n, n, out, _out_base(b, out, at),
                         lambda i, j: lower_triangle(b, i, j))

        batch_loop(ob, batch, each)
        space.free()


@dataclass(frozen=True)
class Eigh:
    """``dsyevd`` ('V', 'L'): eigenvalues ascending, eigenvectors as columns."""

    optimize_loops = False

    def emit(self, ob: OpBuilder) -> None:
        b, a = ob.b, ob.inputs[0]
        values, vectors = ob.outputs
        n = square(ob, 0)
        batch = a.dims[:-2]
        ob.expect_output(0, [*batch, n])
        ob.expect_output(1, a.dims)
        strides = batch_strides(ob, 0, batch)
        failed, no_memory = _codes(ob)
        lead = _at_least(b, n, i64(1))
        dummy = entry_alloca(b, F64, name="unread")
        arguments: list[Argument] = ["V", "L", n, dummy, lead, dummy, dummy, i64(0), dummy,
                                     i64(0)]
        work, integer_work = query_work(b, "dsyevd", arguments, 6, 8)
        space = Workspace(ob, [fold_mul(b, n, n), n, work, integer_work], no_memory)
        matrix, eigenvalues, work_array, integer_array = space.regions

        def each(at: list[ir.Value]) -> None:
            to_columns(b, a, _base(b, at, strides), n, n, matrix, lead)
            info = call_lapack(b, "dsyevd", ["V", "L", n, matrix, lead, eigenvalues,
                                             work_array, work, integer_array, integer_work])
            space.fail_unless(b.icmp_signed("==", info, i64(0)), failed)
            vector_out(b, eigenvalues, n, values, _out_base(b, values, at))
            from_columns(b, matrix, lead, n, n, vectors, _out_base(b, vectors, at))

        batch_loop(ob, batch, each)
        space.free()


@dataclass(frozen=True)
class QR:
    """``dgeqrf`` then ``dorgqr`` of the first k columns (k = min(m, n), or m for full
    matrices); r the upper triangle of the factored matrix's first k rows."""

    full_matrices: bool
    optimize_loops = False

    def emit(self, ob: OpBuilder) -> None:
        b, a = ob.b, ob.inputs[0]
        q, r = ob.outputs
        m, n = a.dims[-2:]
        batch = a.dims[:-2]
        reflectors = _at_most(b, m, n)
        k = m if self.full_matrices else reflectors
        ob.expect_output(0, [*batch, m, k])
        ob.expect_output(1, [*batch, k, n])
        strides = batch_strides(ob, 0, batch)
        failed, no_memory = _codes(ob)
        lead = _at_least(b, m, i64(1))
        dummy = entry_alloca(b, F64, name="unread")
        (factor_work,) = query_work(b, "dgeqrf", [m, n, dummy, lead, dummy, dummy, i64(0)], 5)
        (orthogonal_work,) = query_work(b, "dorgqr", [m, k, reflectors, dummy, lead, dummy,
                                                      dummy, i64(0)], 6)
        # as NumPy sizes them: at least n
        factor_work = _at_least(b, factor_work, n)
        orthogonal_work = _at_least(b, orthogonal_work, n)
        space = Workspace(ob, [fold_mul(b, m, n), fold_mul(b, m, k), reflectors,
                               _at_least(b, factor_work, orthogonal_work)], no_memory)
        matrix, columns, tau, work = space.regions

        def each(at: list[ir.Value]) -> None:
            to_columns(b, a, _base(b, at, strides), m, n, matrix, lead)
            info = call_lapack(b, "dgeqrf", [m, n, matrix, lead, tau, work, factor_work])
            space.fail_unless(b.icmp_signed("==", info, i64(0)), failed)
            copy_columns(b, matrix, columns, fold_mul(b, lead, _at_most(b, k, n)))
            info = call_lapack(b, "dorgqr", [m, k, reflectors, columns, lead, tau, work,
                                             orthogonal_work])
            space.fail_unless(b.icmp_signed("==", info, i64(0)), failed)
            from_columns(b, columns, lead, m, k, q, _out_base(b, q, at))
            from_columns(b, matrix, lead, k, n, r, _out_base(b, r, at),
                         lambda i, j: upper_triangle(b, i, j))

        batch_loop(ob, batch, each)
        space.free()


def copy_columns(b: ir.IRBuilder, source: ir.Value, target: ir.Value, count: ir.Value) -> None:
    """The first `count` doubles of `source` into `target`."""
    memcpy = declare(b.module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                     [_PTR, _PTR, I64, I1])
    b.call(memcpy, [target, source, fold_mul(b, count, i64(8)), ir.Constant(I1, 0)])


@dataclass(frozen=True)
class SVD:
    """``dgesdd`` ('S', or 'A' for full matrices): s descending, u, and v, which is vt in
    LAPACK's column-major storage read row-major. With no singular values, full u and v
    are identities (LAPACK leaves them unset; NumPy sets them so)."""

    full_matrices: bool
    optimize_loops = False

    def emit(self, ob: OpBuilder) -> None:
        b, a = ob.b, ob.inputs[0]
        s, u, v = ob.outputs
        m, n = a.dims[-2:]
        batch = a.dims[:-2]
        k = _at_most(b, m, n)
        u_columns, v_columns = (m, n) if self.full_matrices else (k, k)
        ob.expect_output(0, [*batch, k])
        ob.expect_output(1, [*batch, m, u_columns])
        ob.expect_output(2, [*batch, n, v_columns])
        strides = batch_strides(ob, 0, batch)
        failed, no_memory = _codes(ob)
        job = "A" if self.full_matrices else "S"
        lead, v_lead = _at_least(b, m, i64(1)), _at_least(b, v_columns, i64(1))
        with b.if_else(b.icmp_signed("==", k, i64(0))) as (empty, values):
            with empty:
                if self.full_matrices:
                    def identities(at: list[ir.Value]) -> None:
                        self._identity_out(b, u, m, _out_base(b, u, at))
                        self._identity_out(b, v, n, _out_base(b, v, at))

                    batch_loop(ob, batch, identities)
            with values:
                dummy = entry_alloca(b, F64, name="unread")
                (work,) = query_work(b, "dgesdd", [job, m, n, dummy, lead, dummy, dummy, lead,
                                                   dummy, v_lead, dummy, i64(0), dummy], 10)
                space = Workspace(ob, [fold_mul(b, m, n), k, fold_mul(b, m, u_columns),
                                       fold_mul(b, v_lead, n), fold_mul(b, k, i64(8)), work],
                                  no_memory)
                matrix, values_array, left, right, integer_work, work_array = space.regions

                def each(at: list[ir.Value]) -> None:
                    to_columns(b, a, _base(b, at, strides), m, n, matrix, lead)
                    info = call_lapack(b, "dgesdd", [job, m, n, matrix, lead, values_array,
                                                     left, lead, right, v_lead, work_array,
                                                     work, integer_work])
                    space.fail_unless(b.icmp_signed("==", info, i64(0)), failed)
                    vector_out(b, values_array, k, s, _out_base(b, s, at))
                    from_columns(b, left, lead, m, u_columns, u, _out_base(b, u, at))
                    # v[i, j] = vt[j, i], at right[i * v_lead + j]: vt's storage row-major
                    from_columns(b, right, i64(1), n, v_columns, v, _out_base(b, v, at),
                                 stride=v_lead)

                batch_loop(ob, batch, each)
                space.free()

    @staticmethod
    def _identity_out(b: ir.IRBuilder, target: Operand, n: ir.Value, base: ir.Value) -> None:
        """The n x n identity into output `target`'s matrix at element `base`."""
        row_stride, col_stride = target.strides[-2:]

        def element(at: list[ir.Value]) -> None:
            i, j = at
            value = b.select(b.icmp_signed("==", i, j), ir.Constant(target.element, 1.0),
                             ir.Constant(target.element, 0.0))
            offset = fold_add(b, base, dot(b, at, [row_stride, col_stride]))
            b.store(value, target.address(b, offset))

        nest(b, [n, n], element, "eye")


@dataclass(frozen=True)
class Slogdet:
    """``dgetrf``; the sign (-1)^(row exchanges) times the signs of U's diagonal, the log
    |det| the sum of the logs of its magnitudes (in double, in NumPy's order). A singular
    matrix (info > 0) gives sign 0 and -inf, NumPy's values, not an error."""

    optimize_loops = False

    def emit(self, ob: OpBuilder) -> None:
        b, a = ob.b, ob.inputs[0]
        signs, logs = ob.outputs
        n = square(ob, 0)
        batch = a.dims[:-2]
        ob.expect_output(0, batch)
        ob.expect_output(1, batch)
        strides = batch_strides(ob, 0, batch)
        _, no_memory = _codes(ob)
        lead = _at_least(b, n, i64(1))
        space = Workspace(ob, [fold_mul(b, n, n), n], no_memory)
        matrix, pivots = space.regions
        log = declare(b.module, "llvm.log.f64", F64, [F64])
        element = signs.element
        one, zero = ir.Constant(F64, 1.0), ir.Constant(F64, 0.0)

        def each(at: list[ir.Value]) -> None:
            to_columns(b, a, _base(b, at, strides), n, n, matrix, lead)
            info = call_lapack(b, "dgetrf", [n, n, matrix, lead, pivots])
            sign_slot = entry_alloca(b, F64, name="sign")
            log_slot = entry_alloca(b, F64, name="logdet")
            with b.if_else(b.icmp_signed("==", info, i64(0))) as (regular, singular):
                with regular:
                    b.store(one, sign_slot)
                    b.store(zero, log_slot)

                    def exchange(at: list[ir.Value]) -> None:
                        pivot = b.load(b.gep(pivots, at, source_etype=I64), typ=I64)
                        moved = b.icmp_signed("!=", pivot, b.add(at[0], i64(1)))
                        sign = b.load(sign_slot, typ=F64)
                        b.store(b.select(moved, b.fneg(sign), sign), sign_slot)

                    nest(b, [n], exchange, "pivot")

                    def diagonal(at: list[ir.Value]) -> None:
                        index = b.mul(at[0], b.add(lead, i64(1)))
                        value = b.load(b.gep(matrix, [index], source_etype=F64), typ=F64)
                        negative = b.fcmp_ordered("<", value, zero)
                        sign = b.load(sign_slot, typ=F64)
                        b.store(b.select(negative, b.fneg(sign), sign), sign_slot)
                        magnitude = b.select(negative, b.fneg(value), value)
                        total = b.fadd(b.load(log_slot, typ=F64), b.call(log, [magnitude]))
                        b.store(total, log_slot)

                    nest(b, [n], diagonal, "diagonal")
                with singular:
                    b.store(zero, sign_slot)
                    b.store(ir.Constant(F64, float("-inf")), log_slot)
            for slot, target in ((sign_slot, signs), (log_slot, logs)):
                value = b.load(slot, typ=F64)
                if element == F32:
                    value = b.fptrunc(value, F32)
                b.store(value, target.address(b, _out_base(b, target, at)))

        batch_loop(ob, batch, each)
        space.free()


LapackLowering = Solve | TriangularSolve | Cholesky | Eigh | QR | SVD | Slogdet
_RULES: dict[Primitive, Callable[[OpSpec], LapackLowering]] = {
    inv_p: lambda spec: Solve(inverse=True),
    solve_p: lambda spec: Solve(inverse=False),
    triangular_solve_p: lambda spec: TriangularSolve(bool(spec.params["lower"]),
                                                     bool(spec.params["adjoint"])),
    cholesky_p: lambda spec: Cholesky(),
    eigh_p: lambda spec: Eigh(),
    qr_p: lambda spec: QR(bool(spec.params["full_matrices"])),
    svd_p: lambda spec: SVD(bool(spec.params["full_matrices"])),
    slogdet_p: lambda spec: Slogdet(),
}


@lowering(*_RULES, generic=True)
def _linalg(spec: OpSpec) -> LapackLowering | None:
    """Compiled shape-generic (one function per op, params and dtype): the dims only size
    the loops and the workspace, which are run-time values anyway."""
    if (any(ty.dtype not in FLOATS for ty in spec.inputs) or not platform.current().blas
            or not lapack_available()):
        return None
    return _RULES[spec.primitive](spec)
