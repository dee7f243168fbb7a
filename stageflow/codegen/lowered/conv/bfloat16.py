"""bfloat16 convolutions on the CPU's bfloat16 dot products: `conv2d` and its two gradients
as im2col (or col2im) around a call of `codegen.lowered.gemm_bf16` per chunk, where the
CPU has AVX-512 BF16 (`families` picks these where it does; elsewhere NumPy's kernel runs,
through float32 copies).

Why not the float32 families' code: their gemms are the BLAS's and a gemm of their own,
float32 and float64 only. The bfloat16 gemm sums every result over all of k in float32 and
splits itself over the cores by panels of 32 output columns, which a conv's few output
channels leave idle (64 channels: two panels), so conv2d and the input gradient split
their positions over the cores themselves (`Windowed._split`), each task's gemms then
running on its own core:

- conv2d: the output's image rows split over the cores; per chunk of a task's rows their
  windows copied into bfloat16 scratch (one row of kh*kw*C per position, padding as
  zeros), then one gemm by the filters read in place as a (kh*kw*C, O) matrix into those
  output rows. A 1x1 filter at stride 1 without padding splits the pixels instead and
  reads the input in place as an (N*H*W, C) matrix: no copy. ``conv2d_fused`` in
  bfloat16 (a mixed-precision layer's batch norm or bias, skip and ReLU) is the same,
  its gemms applying the epilogue to the results they store.
- The input gradient: per image, ``g @ w^T`` per chunk of its cotangent rows into
  bfloat16 scratch (each window's contribution rounded once), added into float32 sums of
  the image where the windows read it (col2im), rounded to bfloat16 once at the end: the
  several windows over a pixel sum in float32, as NumPy's kernel sums them. Images are
  split over the cores where there are as many as cores (neighbouring rows' windows add
  into the same input rows, so a task takes whole images), else run here, each gemm
  splitting itself over the columns of kh*kw*C.
- The filter gradient sums over every position, which must happen inside one gemm (the
  gemm's result is bfloat16: partial sums added afterwards would be rounded each time):
  ``dw^T (O, K) = g^T (O, N*Ho*Wo) @ windows (N*Ho*Wo, K)``, all positions at once,
  chunked over filter rows (each chunk its own columns of K, summed over every position),
  its (O, K) result transposed into the HWIO filters. Written as ``windows^T @ g`` the gemm
  would split over O's few panels and copy all the windows again into pairs; this way it
  splits over K's and copies only the cotangent. Its windows are the one large scratch
  here: a chunk is at least one filter row over every position.

The ops check their operands and fail as the float32 ones do (`families`), and return
1 + their argument count where malloc fails, having freed what they took.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, I1, I16, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca, memset_zero
from stageflow.codegen.llvm.loops import counted_loop, fold_mul, i64, return_unless
from stageflow.codegen.lowered import gemm_bf16
from stageflow.codegen.lowered.conv import epilogue
from stageflow.codegen.lowered.conv.epilogue import Epilogue, FusedOperands
from stageflow.codegen.lowered.conv.im2col import Chunk, windows
from stageflow.codegen.lowered.conv.vectors import fill, round_to_bfloat16
from stageflow.codegen.lowered.conv.windowed import (
    PTR,
    ConvolutionShape,
    FilterGradientShape,
    Geometry,
    InputGradientShape,
    Windowed,
    contiguous_operands,
)
from stageflow.codegen.lowered.rule import (
    OpBuilder,
    Operand,
    contiguous_strides,
    larger,
    nest,
    smaller,
)
from stageflow.codegen.lowered.tasks import cpu_count
from stageflow.core import dtypes

# The most bytes of windows a task of conv2d or the input gradient holds at once: its
# chunks of image rows are cut to fit, at least one row. About a core's L2 cache: the gemm
# reads the windows while the copy's writes are still there; whole-problem scratch (tens
# of megabytes) made both markedly slower, read back from memory.
SCRATCH_BYTES = 2 << 20


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
        """Unless `ok`, free what is `held` and return the no-memory code."""
        b = ob.b
        with b.if_then(b.not_(ok)):
            _free(b, held)
        return_unless(b, ok, ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1))

    def _product(self, ob: OpBuilder, m: ir.Value, n: ir.Value, k: ir.Value,
                 a: tuple[ir.Value, ir.Value, ir.Value],
                 b_: tuple[ir.Value, ir.Value, ir.Value], c: tuple[ir.Value, ir.Value],
                 held: list[ir.Value], end: Epilogue | None = None) -> None:
        """``C[m, n] = A[m, k] @ B[k, n]``: A and B each (pointer, row stride, column
        stride) in elements, C (pointer, row stride), through the epilogue `end` where
        given (its per-channel pointers at C's first column, its residual's at C's first
        element, laid out as C); fails as `_allocate` does where the gemm finds no memory
        to pack into."""
        b = ob.b
        record = ir.Constant(PTR, None)
        if end is not None:
            record = entry_alloca(b, I64, len(gemm_bf16.EPILOGUE), "epilogue")
            fields = [*(b.ptrtoint(p, I64) for p in end.pointers), b.zext(end.relu, I64)]
            for index, value in enumerate(fields):
                b.store(value, b.gep(record, [i64(index)], source_etype=I64))
        status = b.call(gemm_bf16.fused_gemm_function(b.module),
                        [m, n, k, *a, *b_, *c, ir.Constant(F32, 1.0), ir.Constant(I1, 0),
                         record])
        self._unless(ob, b.icmp_signed("==", status, ir.Constant(I32, 0)), held)


def _free(b: ir.IRBuilder, held: list[ir.Value]) -> None:
    free = declare(b.module, "free", ir.VoidType(), [PTR])
    for memory in held:
        b.call(free, [memory])


def _from(ob: OpBuilder, start: ir.Value) -> Epilogue:
    """A conv2d's epilogue for its results from element `start` of the output on: the
    per-channel pointers as they are, the residual's moved there."""
    b = ob.b
    whole = epilogue.read(ob, Geometry.read(ob).relu)
    *channels, residual = whole.pointers
    moved = b.select(b.icmp_unsigned("==", residual, ir.Constant(PTR, None)), residual,
                     b.gep(residual, [start], source_etype=I16))
    return Epilogue((*channels, moved), whole.relu)


def _chunk_size(b: ir.IRBuilder, count: ir.Value, per_unit: ir.Value) -> ir.Value:
    """How many units of `per_unit` elements a chunk holds: as many as `SCRATCH_BYTES`
    allow, at least one, at most `count`."""
    fit = b.sdiv(i64(SCRATCH_BYTES // dtypes.bfloat16.itemsize), larger(b, i64(1), per_unit))
    return larger(b, i64(1), smaller(b, count, fit))


def _each_chunk(b: ir.IRBuilder, units: tuple[ir.Value, ir.Value], size: ir.Value,
                body: Callable[[ir.Value, ir.Value], None]) -> None:
    """``body(first, last)`` for units [start, stop) in chunks of `size`."""
    start, stop = units
    counted_loop(b, start, stop, size,
                 lambda first: body(first, smaller(b, b.add(first, size), stop)), "chunk")


@dataclass(frozen=True)
class Conv2dBfloat16(FusedOperands, ConvolutionShape, _Bfloat16):
    """``conv2d(x, w)`` in bfloat16, its positions split over the cores (see the module's
    docstring): a pointwise conv's rows of the input read in place, else per chunk of a
    task's output image rows their windows copied in, each a gemm by the filters into
    those rows. ``conv2d_fused`` (`extras`: its operands after the filters) is the same
    code, whose gemms apply its epilogue as they store (`gemm_bf16.fused_gemm_function`:
    float32 scales and shifts, a bfloat16 residual, the rounding of the unfused ops)."""

    extras: tuple[str, ...] = ()

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        out = ob.outputs[0]
        x, w = self._checked(ob, geo)
        image_rows, rows, depth, pointwise = self._gemm_sizes(ob, geo, w)
        o = w.dims[3]
        macs = b.mul(b.mul(rows, depth), o)
        with b.if_then(b.not_(b.or_(ob.eq(rows, i64(0)), ob.eq(o, i64(0))))):
            with b.if_else(ob.eq(depth, i64(0))) as (no_terms, terms):
                with no_terms:
                    # No terms and an epilogue: rare enough for the NumPy kernel.
                    ob.fail_unless(b.not_(epilogue.read(ob, geo.relu).any(b)), 1)
                    fill(b, out, rows)
                with terms, b.if_else(pointwise) as (in_place, windowed):
                    with in_place:
                        self._split(ob, rows, macs, self._pixels, name="pixels", guard=None)
                    with windowed:
                        self._split(ob, image_rows, macs, self._rows, guard=None)

    def _pixels(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
                memory: ir.Value) -> None:
        """Output pixels [first, last) of a pointwise conv: their rows of the input, read
        in place, by the filters."""
        b = ob.b
        x, w, out = contiguous_operands(ob)
        depth, o = x.dims[3], w.dims[3]
        start = b.mul(first, o)
        self._product(ob, b.sub(last, first), o, depth,
                      (x.address(b, b.mul(first, depth)), depth, i64(1)), (w.pointer, o, i64(1)),
                      (out.address(b, start), o), [], _from(ob, start))

    def _rows(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Output image rows [first, last), in chunks: their windows, then the gemm."""
        b = ob.b
        geo = Geometry.read(ob)
        x, w, out = contiguous_operands(ob)
        kh, kw, channels, o = w.dims
        width = out.dims[2]
        depth = fold_mul(b, fold_mul(b, kh, kw), channels)
        block = _chunk_size(b, b.sub(last, first), b.mul(width, depth))
        scratch = self._allocate(ob, b.mul(b.mul(block, width), depth), 2, [])

        def chunk(c0: ir.Value, c1: ir.Value) -> None:
            c = Chunk(c0, c1, b.mul(b.sub(c1, c0), width), i64(0), kh, depth, i64(0), scratch)
            windows(ob, geo, x, kw, out, c, accumulate=False)
            start = b.mul(b.mul(c0, width), o)
            self._product(ob, c.rows, o, depth, (scratch, depth, i64(1)), (w.pointer, o, i64(1)),
                          (out.address(b, start), o), [scratch], _from(ob, start))

        _each_chunk(b, (first, last), block, chunk)
        _free(b, [scratch])


class Conv2dFilterGradientBfloat16(FilterGradientShape, _Bfloat16):
    """``dw = windows(x)^T @ g`` in bfloat16, as ``(g^T @ windows(x))^T`` per chunk of
    filter rows, every position in one gemm (see the module's docstring)."""

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        out = ob.outputs[0]
        x, g = self._checked(ob, geo)
        kh, kw = geo.size
        image_rows = fold_mul(b, g.dims[0], g.dims[1])
        rows = fold_mul(b, image_rows, g.dims[2])
        run, o = fold_mul(b, kw, x.dims[3]), g.dims[3]
        with b.if_then(b.not_(ob.eq(out.size(b), i64(0)))):
            with b.if_else(ob.eq(rows, i64(0))) as (no_terms, terms):
                with no_terms:
                    fill(b, out, fold_mul(b, kh, run))
                with terms:
                    # Filter rows enough for two panels of columns per core (one row of
                    # an RGB stem's 7x7 filters is less than a panel: a gemm on one core),
                    # no more: fewer columns per gemm ran faster than all at once.
                    per_core = b.mul(i64(2 * gemm_bf16.PANEL), cpu_count(b))
                    taps = smaller(b, kh, larger(b, i64(1), b.sdiv(
                        b.add(per_core, b.sub(run, i64(1))), larger(b, i64(1), run))))
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

                        nest(b, [depth, o], element, "filter_rows")

                    _each_chunk(b, (i64(0), kh), taps, chunk)
                    _free(b, held)


class Conv2dInputGradientBfloat16(InputGradientShape, _Bfloat16):
    """``dx = col2im(g @ w^T)`` in bfloat16, per image: per chunk of its cotangent rows one
    gemm into bfloat16 scratch, whose rows are added into float32 sums of the image,
    rounded once. Images are split over the cores where there are as many as cores (the
    windows of neighbouring rows add into the same input rows; each task sums its own
    images), else run here, each gemm splitting itself."""

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        out = ob.outputs[0]
        g, w = self._checked(ob, geo)
        kh, kw, _, o = w.dims
        images = g.dims[0]
        rows = fold_mul(b, fold_mul(b, images, g.dims[1]), g.dims[2])
        depth = fold_mul(b, fold_mul(b, kh, kw), w.dims[2])
        with b.if_then(b.not_(ob.eq(out.size(b), i64(0)))):
            with b.if_else(b.or_(ob.eq(rows, i64(0)), ob.eq(o, i64(0)))) as (no_terms, terms):
                with no_terms:
                    fill(b, out, fold_mul(b, fold_mul(b, images, out.dims[1]), out.dims[2]))
                with terms, b.if_else(b.icmp_signed(">=", images, cpu_count(b))) as (
                        split, here):
                    with split:
                        self._split(ob, images, b.mul(b.mul(rows, depth), o), self._images,
                                    name="images", guard=None)
                    with here:
                        self._images(ob, i64(0), images, i64(0), ir.Constant(PTR, None))

    def _images(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
                memory: ir.Value) -> None:
        """The gradient of images [first, last): their sums, in chunks of cotangent rows,
        then rounded into the result."""
        b = ob.b
        geo = Geometry.read(ob)
        g, w, out = contiguous_operands(ob)
        kh, kw, _, o = w.dims
        height, width = g.dims[1:3]
        depth = fold_mul(b, fold_mul(b, kh, kw), w.dims[2])
        image = fold_mul(b, fold_mul(b, out.dims[1], out.dims[2]), out.dims[3])
        count = b.mul(b.sub(last, first), image)
        sums = self._allocate(ob, count, 4, [])
        memset_zero(b, sums, b.mul(count, i64(4)))
        # The sums addressed as the result's images are (theirs start at image `first`).
        at_first = b.gep(sums, [b.neg(b.mul(first, image))], source_etype=F32)
        images = Operand(at_first, out.dims, contiguous_strides(b, out.dims), dtypes.float32)
        block = _chunk_size(b, b.mul(b.sub(last, first), height), b.mul(width, depth))
        scratch = self._allocate(ob, b.mul(b.mul(block, width), depth), 2, [sums])
        held = [sums, scratch]

        def chunk(c0: ir.Value, c1: ir.Value) -> None:
            c = Chunk(c0, c1, b.mul(b.sub(c1, c0), width), i64(0), kh, depth, i64(0), scratch)
            cotangent = g.address(b, b.mul(b.mul(c0, width), o))
            self._product(ob, c.rows, depth, o, (cotangent, o, i64(1)), (w.pointer, i64(1), o),
                          (scratch, depth), held)
            windows(ob, geo, images, kw, g, c, accumulate=True, scratch=self.dtype)

        _each_chunk(b, (b.mul(first, height), b.mul(last, height)), block, chunk)
        round_to_bfloat16(b, Operand(sums, [], [], dtypes.float32),
                          Operand(out.address(b, b.mul(first, image)), [], [], self.dtype), count)
        _free(b, held)
