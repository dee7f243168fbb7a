"""Runs of elements moved, added and zeroed for the convolutions: im2col's copies and
col2im's adds as explicit (masked) vectors, zeroing by LLVM's memset; bfloat16's col2im
adds its bfloat16 columns into a float32 image (`move` widens them) and rounds that image
once at the end (`round_to_bfloat16`).

Written as vectors because the convolutions compile without LLVM's loop vectoriser
(shape-generic and at the cleanup level, so that a convnet's several dozen convolutions
compile in a fraction of the time), and masked because the runs are short (kw * C: 9
elements for a 3x3 filter over RGB).
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, I1, I32
from stageflow.codegen.llvm.functions import declare, memset_zero
from stageflow.codegen.llvm.lanes import lanes_below, nearest_bfloat16, widened_bfloat16
from stageflow.codegen.llvm.loops import counted_loop, fold_mul, i64
from stageflow.codegen.lowered.rule import Operand

VECTOR_BYTES = 64  # one AVX-512 register
_PTR = ir.PointerType()


def move(b: ir.IRBuilder, image: Operand, at: ir.Value, columns: Operand, to: ir.Value,
         count: ir.Value, accumulate: bool) -> None:
    """``columns[to + k] = image[at + k]`` for k < count, or with `accumulate`
    ``image[at + k] += columns[to + k]``: whole vectors of `VECTOR_BYTES`, then one masked
    vector for the rest. Columns of bfloat16 added into a float32 image are widened (the
    only pair of dtypes that differ: bfloat16's col2im sums in float32)."""
    lanes = VECTOR_BYTES // image.dtype.itemsize
    vector = ir.VectorType(image.element, lanes)
    widened = columns.dtype != image.dtype
    column_vector = ir.VectorType(columns.element, lanes)
    align = image.dtype.itemsize

    def step(k: ir.Value, mask: ir.Value | None) -> None:
        pixel = image.address(b, b.add(at, k))
        column = columns.address(b, b.add(to, k))
        if not accumulate:
            _store_vector(b, _load_vector(b, pixel, vector, align, mask), column, align, mask)
            return
        value = _load_vector(b, column, column_vector, columns.dtype.itemsize, mask)
        if widened:
            value = widened_bfloat16(b, value)
        value = b.fadd(value, _load_vector(b, pixel, vector, align, mask))
        _store_vector(b, value, pixel, align, mask)

    _runs(b, count, lanes, step)


def _runs(b: ir.IRBuilder, count: ir.Value, lanes: int,
          step: Callable[[ir.Value, ir.Value | None], None]) -> None:
    """``step(k, None)`` for each whole vector of `lanes` below `count`, then
    ``step(k, mask)`` for the rest, masked to its lanes."""
    whole = b.mul(b.sdiv(count, i64(lanes)), i64(lanes))
    counted_loop(b, i64(0), whole, i64(lanes), lambda k: step(k, None), "move")
    rest = b.sub(count, whole)
    with b.if_then(b.icmp_signed(">", rest, i64(0))):
        step(whole, lanes_below(b, rest, lanes))


def round_to_bfloat16(b: ir.IRBuilder, source: Operand, target: Operand,
                      count: ir.Value) -> None:
    """``target[k] = bfloat16(source[k])`` for k < count, float32 to bfloat16 rounded to
    nearest even with NaNs kept and made quiet (as the emitter's scalar conversion and
    ml_dtypes do): integer arithmetic on whole vectors, then one masked vector."""
    lanes = VECTOR_BYTES // source.dtype.itemsize
    floats = ir.VectorType(F32, lanes)

    def step(k: ir.Value, mask: ir.Value | None) -> None:
        value = _load_vector(b, source.address(b, k), floats, 4, mask)
        _store_vector(b, nearest_bfloat16(b, value), target.address(b, k), 2, mask)

    _runs(b, count, lanes, step)


def zero(b: ir.IRBuilder, target: Operand, to: ir.Value, count: ir.Value) -> None:
    """Zero `count` elements of `target` from element `to`."""
    memset_zero(b, target.address(b, to), b.mul(count, i64(target.dtype.itemsize)))


def fill(b: ir.IRBuilder, out: Operand, rows: ir.Value) -> None:
    """Zero every element of `out` (rows of its last dim)."""
    zero(b, out, i64(0), fold_mul(b, rows, out.dims[-1]))


def _masked(b: ir.IRBuilder, name: str, vector: ir.VectorType) -> ir.Function:
    """``llvm.masked.load`` or ``.store`` of `vector` (llvmlite does not mangle vectors):
    of floats, or of integers (bfloat16's bit patterns)."""
    element = (f"i{vector.element.width}" if isinstance(vector.element, ir.IntType)
               else "f32" if vector.element == F32 else "f64")
    symbol = f"llvm.masked.{name}.v{vector.count}{element}.p0"
    mask = ir.VectorType(I1, vector.count)
    signature = (ir.FunctionType(vector, [_PTR, I32, mask, vector]) if name == "load" else
                 ir.FunctionType(ir.VoidType(), [vector, _PTR, I32, mask]))
    return declare(b.module, symbol, signature.return_type, list(signature.args))


def _load_vector(b: ir.IRBuilder, at: ir.Value, vector: ir.VectorType, align: int,
                 mask: ir.Value | None) -> ir.Value:
    if mask is None:
        return b.load(at, typ=vector, align=align)
    return b.call(_masked(b, "load", vector),
                  [at, ir.Constant(I32, align), mask, ir.Constant(vector, None)])


def _store_vector(b: ir.IRBuilder, value: ir.Value, at: ir.Value, align: int,
                  mask: ir.Value | None) -> None:
    if mask is None:
        b.store(value, at, align=align)
        return
    b.call(_masked(b, "store", value.type), [value, at, ir.Constant(I32, align), mask])
