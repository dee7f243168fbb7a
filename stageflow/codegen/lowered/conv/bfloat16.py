"""bfloat16 convolutions on the CPU's bfloat16 dot products: `conv2d` and its two gradients
as im2col (or col2im) around one call of `codegen.lowered.gemm_bf16` per chunk, where the
CPU has AVX-512 BF16 (`families` picks these where it does; elsewhere NumPy's kernel runs,
through float32 copies).

Why not the float32 families' code: their gemms are the BLAS's and a gemm of their own,
float32 and float64 only; the bfloat16 gemm splits itself over the cores by panels of
output columns and sums every result over all of k in float32, so each op here is a copy
and one product per chunk of positions, with no split of its own:

- conv2d: the windows of a chunk of output rows copied into bfloat16 scratch (one row of
  kh*kw*C per position, padding as zeros), times the filters read in place as a
  (kh*kw*C, O) matrix into the chunk's output rows. A 1x1 filter at stride 1 without
  padding reads the input in place as an (N*H*W, C) matrix: no copy.
- The filter gradient sums over every position, which must happen inside one gemm (the
  gemm's result is bfloat16: partial sums added afterwards would be rounded each time):
  ``dw^T (O, K) = g^T (O, N*Ho*Wo) @ windows (N*Ho*Wo, K)``, all positions at once,
  chunked over filter rows (each chunk its own columns of K, summed over every position),
  its (O, K) result transposed into the HWIO filters. Written as ``windows^T @ g`` the gemm
  would split over O's few panels and copy all the windows again into pairs; this way it
  splits over K's and copies only the cotangent.
- The input gradient: ``g @ w^T`` per chunk of cotangent rows into bfloat16 scratch (each
  window's contribution rounded once), added into a float32 image where the windows read
  it (col2im), rounded to bfloat16 once at the end: the several windows over a pixel sum
  in float32, as NumPy's kernel sums them.

The ops check their operands and fail as the float32 ones do (`families`), and return
1 + their argument count where malloc fails, having freed what they took.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, I1, I32, I64
from stageflow.codegen.llvm.functions import declare, memset_zero
from stageflow.codegen.llvm.loops import counted_loop, fold_mul, i64, return_unless
from stageflow.codegen.lowered import gemm_bf16
from stageflow.codegen.lowered.conv.im2col import Chunk, windows
from stageflow.codegen.lowered.conv.vectors import fill, round_to_bfloat16
from stageflow.codegen.lowered.conv.windowed import PTR, Geometry, Windowed
from stageflow.codegen.lowered.rule import (
    OpBuilder,
    Operand,
    contiguous_strides,
    larger,
    nest,
    row_major,
    smaller,
)
from stageflow.codegen.lowered.windows import window_count
from stageflow.core import dtypes

# The most bytes of windows copied at once: a chunk of positions (or of filter rows) is
# cut to fit, at least one image row (one filter row). About a core's L2 cache: the gemm
# reads the windows while the copy's writes are still there; whole-problem scratch (tens
# of megabytes) made conv2d and the input gradient markedly slower, read back from memory.
SCRATCH_BYTES = 2 << 20
_ELEMENTS = SCRATCH_BYTES // dtypes.bfloat16.itemsize


class _Bfloat16(Windowed):
    """What the three ops share: scratch taken and freed, and the gemm's call."""

    def _allocate(self, ob: OpBuilder, elements: ir.Value, itemsize: int,
                  held: list[ir.Value]) -> ir.Value:
        """Memory for `elements` of `itemsize` bytes, or the op returns its no-memory code
        (1 + its argument count), freeing what it `held`."""
        b = ob.b
        memory = b.call(declare(b.module, "malloc", PTR, [I64]),
                        [larger(b, i64(1), b.mul(elements, i64(itemsize)))])
        self._unless(ob, b.icmp_unsigned("!=", memory, ir.Constant(PTR, None)), held)
        return memory

    @staticmethod
    def _unless(ob: OpBuilder, ok: ir.Value, held: list[ir.Value]) -> None:
        b = ob.b
        with b.if_then(b.not_(ok)):
            _free(b, held)
        return_unless(b, ok, ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1))

    def _product(self, ob: OpBuilder, m: ir.Value, n: ir.Value, k: ir.Value,
              a: tuple[ir.Value, ir.Value, ir.Value], b_: tuple[ir.Value, ir.Value, ir.Value],
              c: tuple[ir.Value, ir.Value], held: list[ir.Value]) -> None:
        """``C[m, n] = A[m, k] @ B[k, n]``: A and B each (pointer, row stride, column
        stride) in elements, C (pointer, row stride); fails as `_allocate` does where the
        gemm finds no memory to pack into."""
        b = ob.b
        status = b.call(gemm_bf16.gemm_function(b.module),
                        [m, n, k, *a, *b_, *c, ir.Constant(F32, 1.0), ir.Constant(I1, 0)])
        self._unless(ob, b.icmp_signed("==", status, ir.Constant(I32, 0)), held)


def _free(b: ir.IRBuilder, held: list[ir.Value]) -> None:
    free = declare(b.module, "free", ir.VoidType(), [PTR])
    for memory in held:
        b.call(free, [memory])


def _chunk_size(b: ir.IRBuilder, count: ir.Value, per_unit: ir.Value) -> ir.Value:
    """How many units of `per_unit` elements a chunk holds: as many as `_ELEMENTS` allows,
    at least one, at most `count`."""
    fit = b.sdiv(i64(_ELEMENTS), larger(b, i64(1), per_unit))
    return larger(b, i64(1), smaller(b, count, fit))


def _each_chunk(b: ir.IRBuilder, count: ir.Value, size: ir.Value,
                body: Callable[[ir.Value, ir.Value], None]) -> None:
    """``body(first, last)`` for units [0, count) in chunks of `size`."""
    counted_loop(b, i64(0), count, size,
                 lambda first: body(first, smaller(b, b.add(first, size), count)), "chunk")


class Conv2dBfloat16(_Bfloat16):
    """``conv2d(x, w)`` in bfloat16: a pointwise conv as one gemm of the input in place,
    else per chunk of output image rows their windows copied in and one gemm by the
    filters into those rows."""

    def _result_dims(self, ob: OpBuilder, geo: Geometry) -> list[ir.Value]:
        x, w = ob.inputs
        return [x.dims[0], *[window_count(ob.b, x.dims[1 + axis], w.dims[axis],
                                          geo.strides[axis], geo.padding[axis],
                                          geo.dilations[axis]) for axis in (0, 1)], w.dims[3]]

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        x, w, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        kh, kw, channels, o = w.dims
        ob.fail_unless(ob.eq(x.dims[3], channels), 1)
        self._check(ob, geo, x, kh, kw, None, 0)
        x, w = row_major(ob, 0), row_major(ob, 1)
        image_rows = fold_mul(b, out.dims[0], out.dims[1])
        width = out.dims[2]
        rows = fold_mul(b, image_rows, width)
        depth = fold_mul(b, fold_mul(b, kh, kw), channels)
        pointwise = ob.all_of([ob.eq(v, i64(1)) for v in (kh, kw, *geo.strides)]
                              + [ob.eq(v, i64(0)) for pair in geo.padding for v in pair])
        filters = (w.pointer, o, i64(1))
        with b.if_then(b.not_(b.or_(ob.eq(rows, i64(0)), ob.eq(o, i64(0))))):
            with b.if_else(ob.eq(depth, i64(0))) as (no_terms, terms):
                with no_terms:
                    fill(b, out, rows)
                with terms, b.if_else(pointwise) as (in_place, windowed):
                    with in_place:
                        self._product(ob, rows, o, depth, (x.pointer, depth, i64(1)),
                                      filters, (out.pointer, o), [])
                    with windowed:
                        block = _chunk_size(b, image_rows, b.mul(width, depth))
                        scratch = self._allocate(ob, b.mul(b.mul(block, width), depth), 2, [])

                        def chunk(first: ir.Value, last: ir.Value) -> None:
                            c = Chunk(first, last, b.mul(b.sub(last, first), width), i64(0),
                                      kh, depth, i64(0), scratch)
                            windows(ob, geo, x, kw, out, c, accumulate=False)
                            into = out.address(b, b.mul(b.mul(first, width), o))
                            self._product(ob, c.rows, o, depth, (scratch, depth, i64(1)),
                                          filters, (into, o), [scratch])

                        _each_chunk(b, image_rows, block, chunk)
                        _free(b, [scratch])


class Conv2dFilterGradientBfloat16(_Bfloat16):
    """``dw = windows(x)^T @ g`` in bfloat16, as ``(g^T @ windows(x))^T`` per chunk of
    filter rows, every position in one gemm (see the module's docstring)."""

    def _result_dims(self, ob: OpBuilder, geo: Geometry) -> list[ir.Value]:
        x, g = ob.inputs
        return [*geo.size, x.dims[3], g.dims[3]]

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        x, g, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        kh, kw = geo.size
        ob.fail_unless(ob.eq(x.dims[0], g.dims[0]), 1)
        self._check(ob, geo, x, kh, kw, g, 1)
        x, g = row_major(ob, 0), row_major(ob, 1)
        image_rows = fold_mul(b, g.dims[0], g.dims[1])
        rows = fold_mul(b, image_rows, g.dims[2])
        run, o = fold_mul(b, kw, x.dims[3]), g.dims[3]
        with b.if_then(b.not_(ob.eq(out.size(b), i64(0)))):
            with b.if_else(ob.eq(rows, i64(0))) as (no_terms, terms):
                with no_terms:
                    fill(b, out, fold_mul(b, kh, run))
                with terms:
                    taps = _chunk_size(b, kh, b.mul(rows, run))
                    scratch = self._allocate(ob, b.mul(b.mul(rows, taps), run), 2, [])
                    product = self._allocate(ob, b.mul(b.mul(o, taps), run), 2, [scratch])
                    held = [scratch, product]

                    def chunk(a0: ir.Value, a1: ir.Value) -> None:
                        depth = b.mul(b.sub(a1, a0), run)
                        c = Chunk(i64(0), image_rows, rows, a0, a1, depth, i64(0), scratch)
                        windows(ob, geo, x, kw, g, c, accumulate=False)
                        self._product(ob, o, depth, rows, (g.pointer, i64(1), o),
                                      (scratch, depth, i64(1)), (product, depth), held)
                        into = b.mul(b.mul(a0, run), o)
                        transposed = Operand(product, [depth, o], [i64(1), depth], self.dtype)

                        def element(index: list[ir.Value]) -> None:
                            at = transposed.address(b, transposed.offset(b, index))
                            row, column = index
                            target = b.add(into, b.add(b.mul(row, o), column))
                            b.store(b.load(at, typ=out.element), out.address(b, target))

                        nest(b, [depth, o], element, "transpose")

                    _each_chunk(b, kh, taps, chunk)
                    _free(b, held)


class Conv2dInputGradientBfloat16(_Bfloat16):
    """``dx = col2im(g @ w^T)`` in bfloat16: per chunk of cotangent rows one gemm into
    bfloat16 scratch, whose rows are added into a float32 image, rounded once."""

    def _result_dims(self, ob: OpBuilder, geo: Geometry) -> list[ir.Value]:
        g, w = ob.inputs
        return [g.dims[0], *geo.size, w.dims[2]]

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        g, w, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        kh, kw, _, o = w.dims
        ob.fail_unless(ob.eq(g.dims[3], o), 1)
        self._check(ob, geo, out, kh, kw, g, 0)
        g, w = row_major(ob, 0), row_major(ob, 1)
        size = out.size(b)
        image_rows = fold_mul(b, g.dims[0], g.dims[1])
        width = g.dims[2]
        rows = fold_mul(b, image_rows, width)
        depth = fold_mul(b, fold_mul(b, kh, kw), w.dims[2])
        with b.if_then(b.not_(ob.eq(size, i64(0)))):
            with b.if_else(b.or_(ob.eq(rows, i64(0)), ob.eq(o, i64(0)))) as (no_terms, terms):
                with no_terms:
                    fill(b, out, fold_mul(b, fold_mul(b, out.dims[0], out.dims[1]),
                                          out.dims[2]))
                with terms:
                    sums = self._allocate(ob, size, 4, [])
                    memset_zero(b, sums, b.mul(size, i64(4)))
                    image = Operand(sums, out.dims, contiguous_strides(b, out.dims),
                                    dtypes.float32)
                    block = _chunk_size(b, image_rows, b.mul(width, depth))
                    scratch = self._allocate(ob, b.mul(b.mul(block, width), depth), 2, [sums])
                    held = [sums, scratch]

                    def chunk(first: ir.Value, last: ir.Value) -> None:
                        c = Chunk(first, last, b.mul(b.sub(last, first), width), i64(0), kh,
                                  depth, i64(0), scratch)
                        cotangent = g.address(b, b.mul(b.mul(first, width), o))
                        self._product(ob, c.rows, depth, o, (cotangent, o, i64(1)),
                                      (w.pointer, i64(1), o), (scratch, depth), held)
                        windows(ob, geo, image, kw, g, c, accumulate=True,
                                scratch=self.dtype)

                    _each_chunk(b, image_rows, block, chunk)
                    round_to_bfloat16(b, image, out, size)
                    _free(b, held)
