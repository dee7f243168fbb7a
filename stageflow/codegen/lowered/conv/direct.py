"""The direct loops: oneDNN's NHWC micro-kernel for convolutions into few output channels.

Per output row, tiles of consecutive output pixels (`DIRECT_TILE`, or with AVX-512 and
two vectors or fewer the width of `NARROW_TILES` that fits the rows best) by a block of output
channels keep their sums in registers (2 or 4 vectors of output channels: 12 to 24 sums,
with the filters' vectors and a broadcast input) over the filter rows inside the image and, per
filter row, its kw*C taps and channels, one contiguous run in the image and in the
filters: per step the filters' vectors are loaded, each pixel's input broadcast, one
llvm.fma issued per pixel and vector. The last tile of a row moves back to end at the
row's end; a tile whose windows leave the image goes tap by tap, reading C zeros
(calloc'd per task) for a pixel's taps outside.

Why: for few output channels the im2col gemm is (rows x kh*kw*C) @ (kh*kw*C x O), too
narrow for a gemm's kernels, and its copy of the windows costs as much again; here there
is no scratch and no copy. For wider O each further block of channels reads the inputs
again while the gemm's N grows as wide as its kernels, so the loops take at most two of
the target's widest blocks of two vectors, 64 float32 channels with AVX-512 (one tile of
four vectors), 32 elsewhere, and on x86 without AVX-512 64 in wide rows too (four tiles of
two vectors: `DirectLoops.fits`). With AVX-512, at 64 channels the loops ran every layer
measured (3-channel stems, 3x3 layers, the gradients of 64-channel layers)
as fast as the gemm or faster; at 96 the gemm was faster. The loops call no gemm, so their
tasks leave OpenBLAS's threads alone.

One copy per dtype in a module (`DirectLoops.call`), which conv2d's tasks and the input
gradient's call: it is the largest code of the convolutions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, I32, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import (
    counted_loop,
    fold_add,
    fold_loop,
    fold_mul,
    i64,
    range_loop,
    return_unless,
    values_where,
)
from stageflow.codegen.lowered.conv import epilogue
from stageflow.codegen.lowered.conv.epilogue import Epilogue
from stageflow.codegen.lowered.conv.windowed import NO_MEMORY, PTR, Geometry
from stageflow.codegen.lowered.rule import (
    OpBuilder,
    Operand,
    contiguous_strides,
    larger,
    smaller,
)
from stageflow.codegen.targets import platform
from stageflow.primitives.prepacked import (
    DIRECT_MAX_OUT_CHANNELS,
    DIRECT_VECTOR_BYTES,
    DIRECT_WIDEST_BLOCK_BYTES,
    direct_max_out_channels,
)

# The blocks of output channels a tile covers, (vectors, bytes per vector) widest first,
# each half the previous one's channels: 4 AVX-512 vectors (64 floats), 2 (32), 1 (16),
# then 1 AVX2 vector (8); without AVX-512, 2 AVX2 vectors (16) and 1 (8). O is walked in
# blocks of the widest, the rest by the narrower ones in turn. With AVX-512, O = 16 is one
# zmm vector in tiles of 7 or 8 pixels (`NARROW_TILES`), 7 or 8 sums of 16 lanes, where 2
# ymm vectors in tiles of 6 issued twice the fmas for the same sums (3x3 convolutions into
# 16 channels ran faster so). At 64 channels one tile of 24 sums (of AVX-512's 32
# registers, beside 4 vectors of filters and a broadcast) reads each input once where two
# tiles of 12 read it twice (ResNet-50's and VGG-19's 64-channel 3x3 layers ran faster
# with it: `benchmarks.conv`). The AVX-512 blocks only where the CPU has AVX-512
# (`blocks`): elsewhere 12 sums of them are 24 ymm vectors, more than AVX2's 16 registers,
# and spilled to the stack in every step (O = 32 ran at half the speed of two 16-wide
# blocks). The narrowest block's bytes are `DIRECT_VECTOR_BYTES` (O must be a multiple of
# it); the widest of two vectors is `DIRECT_WIDEST_BLOCK_BYTES`, which the selection rule
# (two such blocks of channels at most) and `primitives.prepacked` keep to.
DIRECT_BLOCKS = ((4, DIRECT_WIDEST_BLOCK_BYTES // 2), (2, DIRECT_WIDEST_BLOCK_BYTES // 2),
                 (1, DIRECT_WIDEST_BLOCK_BYTES // 2), (2, 32), (1, DIRECT_VECTOR_BYTES))
DIRECT_TILE = 6
# Tile widths a block of at most two vectors takes where the CPU has AVX-512's 32 registers
# (16 sums at most, beside two vectors of filters and a broadcast): a call takes the one
# that recomputes the fewest pixels of its rows (`_tile_width`), the widest of those tied.
# With tiles of six only, the last one moved back to end at the row's end, a row of 7
# pixels computed 12, of 14 computed 18, of 56 computed 60 (DenseNet's and GoogLeNet's
# layers at 56, 28, 14 and 7 pixels a row); with four vectors, 7 pixels would be 28 sums
# and spill.
NARROW_TILES = (7, 8)
# Output pixels a row needs for more than `DirectLoops.own_max_out_channels`: four tiles,
# so that the last one, moved back to end at the row's end, recomputes at most a fifth of
# the row.
WIDE_ROW = 4 * DIRECT_TILE


@dataclass(frozen=True)
class DirectLoops:
    """The direct loops for one dtype: the rule that selects them, and the call of the
    module's one copy."""

    dtype: np.dtype

    @property
    def lanes(self) -> int:
        """Elements per vector of the narrowest block (the channels O must be a multiple
        of): 8 floats, 4 doubles."""
        return DIRECT_VECTOR_BYTES // self.dtype.itemsize

    @property
    def max_out_channels(self) -> int:
        """The most output channels the loops take on the target: on x86 those of two
        AVX-512 blocks of two vectors (64 float32s) with or without AVX-512 (past
        `own_max_out_channels` in wide rows only: `fits`), elsewhere
        `own_max_out_channels`."""
        if platform.current().arch == "x86_64":
            return direct_max_out_channels(self.dtype)
        return self.own_max_out_channels

    @property
    def own_max_out_channels(self) -> int:
        """Two of the target's widest blocks of two vectors (`blocks`), at least
        `DIRECT_MAX_OUT_CHANNELS`: the channels whose tiles read each input once or
        twice."""
        widest = max(vectors * size for vectors, size in self.blocks() if vectors <= 2)
        return direct_max_out_channels(self.dtype, widest, DIRECT_MAX_OUT_CHANNELS)

    def blocks(self) -> list[tuple[int, int]]:
        """The target's blocks of `DIRECT_BLOCKS`, (vectors, bytes per vector): the
        AVX-512 blocks and one AVX2 vector where the CPU has AVX-512, else the AVX2
        blocks."""
        if platform.current().has("avx512f"):
            return [(vectors, size) for vectors, size in DIRECT_BLOCKS
                    if size > 32 or vectors == 1]
        return [(vectors, size) for vectors, size in DIRECT_BLOCKS if size <= 32]

    def widths(self, vectors: int) -> tuple[int, ...]:
        """The tile widths a block of `vectors` vectors takes (`NARROW_TILES`)."""
        wide = platform.current().has("avx512f")
        return NARROW_TILES if wide and vectors <= 2 else (DIRECT_TILE,)

    def fits(self, ob: OpBuilder, geo: Geometry, o: ir.Value) -> ir.Value:
        """The selection rule (at run time): taps along a row one image column apart (their
        channels one run; any strides, padding and filter-row dilation), O a multiple of
        the vector's lanes and at most `max_out_channels`; past `own_max_out_channels`
        (AVX2's 64 float32 channels: four tiles of 16, each reading the inputs) only in
        output rows of `WIDE_ROW` pixels or more. There they ran ResNet-50's 7x7 stem and
        its 56x56 3x3 layers faster than the gemm, which copies the windows and, for
        filters the `prepack` pass leaves to these loops, packs their panels on every call
        (the README's ONNX row); in 8-pixel rows, whose two tiles of six compute 12 pixels,
        the small ResNet's 64-channel layers ran slower than by the gemm."""
        b = ob.b
        conditions = [ob.eq(geo.dilations[1], i64(1)),
                      ob.eq(b.srem(o, i64(self.lanes)), i64(0)),
                      b.icmp_signed("<=", o, i64(self.max_out_channels))]
        if self.own_max_out_channels < self.max_out_channels:
            conditions.append(b.or_(
                b.icmp_signed("<=", o, i64(self.own_max_out_channels)),
                b.icmp_signed(">=", ob.outputs[0].dims[2], i64(WIDE_ROW))))
        return ob.all_of(conditions)

    def call(self, ob: OpBuilder, x: Operand, w: Operand, out: Operand,
             steps: tuple[ir.Value, ir.Value, ir.Value], pads: tuple[ir.Value, ir.Value],
             rows: tuple[ir.Value, ir.Value], end: Epilogue) -> ir.Value:
        """Output image rows `rows` (first, last) of ``conv2d(x, w)`` at `steps` (strides,
        filter-row dilation), padded `pads` above and to the left, through the epilogue
        `end` (at the output's first element), by the module's one copy of the direct
        loops (`_function`); their status (`NO_MEMORY` without memory)."""
        return ob.b.call(self._function(ob.b.module), [
            x.pointer, w.pointer, out.pointer, *x.dims, *w.dims, *out.dims, *steps, *pads,
            *rows, *end.arguments()])

    def _function(self, module: ir.Module) -> ir.Function:
        """``i32 sf.conv2d.direct.DTYPE(ptr x, ptr w, ptr out, i64 dims..., i64 sh, sw, dh,
        top, left, first, last, epilogue...)``: the direct loops (`_rows`), internal, one per
        dtype in a module."""
        symbol = f"sf.conv2d.direct.{self.dtype.name}"
        existing = module.globals.get(symbol)
        if isinstance(existing, ir.Function):
            return existing
        labels = [f"{name}.d{axis}" for name in ("x", "w", "out") for axis in range(4)]
        labels += ["sh", "sw", "dh", "top", "left", "first", "last"]
        function = ir.Function(module, ir.FunctionType(
            I32, [PTR] * 3 + [I64] * len(labels) + epilogue.TYPES), symbol)
        function.linkage = "internal"
        for argument, label in zip(function.args, ["x", "w", "out", *labels, *epilogue.NAMES],
                                   strict=True):
            argument.name = label
        b = ir.IRBuilder(function.append_basic_block("entry"))
        operands = []
        for k in range(3):
            dims = list(function.args[3 + 4 * k: 7 + 4 * k])
            operands.append(Operand(function.args[k], dims, contiguous_strides(b, dims),
                                    self.dtype))
        sh, sw, dh, top, left, first, last = function.args[15:22]
        self._rows(b, *operands, (sh, sw), dh, (top, left), (first, last),
                   Epilogue.of(list(function.args[22:])))
        b.ret(ir.Constant(I32, 0))
        return function

    def _rows(self, b: ir.IRBuilder, x: Operand, w: Operand, out: Operand,
              strides: tuple[ir.Value, ir.Value], dh: ir.Value,
              pads: tuple[ir.Value, ir.Value], rows: tuple[ir.Value, ir.Value],
              end: Epilogue) -> None:
        """Output image rows `rows` (first, last) of ``conv2d(x, w)`` (padded `pads` above and
        to the left, the rest implied by the dims), through the epilogue `end`: per row,
        per block of output channels (`DIRECT_BLOCKS`: the widest, then narrower for the
        rest), tiles of the block's width for this call (`widths`, `_tile_width`) of
        output pixels (`_tile`), the last one moved back to end at the row's end
        (recomputing a few pixels rather than clipping it), clipped where its windows
        leave the image (reading C zeros, calloc'd per task, there)."""
        height, width, channels = x.dims[1:]
        kh, kw, o = w.dims[0], w.dims[1], w.dims[3]
        ho, wo = out.dims[1:3]
        sh, sw = strides
        top, left = pads
        first, last = rows
        blocks = [(vectors, size // self.dtype.itemsize) for vectors, size in self.blocks()]
        calloc = declare(b.module, "calloc", PTR, [I64, I64])
        zeros = b.call(calloc, [larger(b, i64(1), channels), i64(self.dtype.itemsize)])
        return_unless(b, b.icmp_unsigned("!=", zeros, ir.Constant(PTR, None)),
                      ir.Constant(I32, NO_MEMORY))
        # The tiles whose every window lies inside the image, and inside the row where the
        # padding is negative (the input gradient's): columns [inner_lo, inner_hi).
        inner_lo = b.select(b.icmp_signed(">", left, i64(0)),
                            b.sdiv(b.add(left, b.sub(sw, i64(1))), sw), i64(0))
        reach = b.sub(b.add(width, b.sub(left, i64(1))), b.sub(kw, i64(1)))
        inner_hi = smaller(b, wo, b.select(b.icmp_signed("<", reach, i64(0)), i64(0),
                                           b.add(b.sdiv(reach, sw), i64(1))))
        widest = blocks[0][0] * blocks[0][1]
        whole = b.mul(b.sdiv(o, i64(widest)), i64(widest))
        rest = b.sub(o, whole)
        # Computed once here, not per tile: with the stride a constant LLVM folded them into
        # each tile's addresses, read at run time they would cost multiplies in every tile.
        shifts = [fold_mul(b, i64(p), sw) for p in range(max(NARROW_TILES))]
        steps = _Steps(sw, dh, shifts, [fold_mul(b, s, x.strides[2]) for s in shifts], end,
                       end.any(b))

        chosen = _tile_width(b, wo, NARROW_TILES)

        def row(t: ir.Value) -> None:
            image = b.sdiv(t, ho)
            i = b.sub(t, b.mul(image, ho))
            h0 = b.sub(b.mul(i, sh), top)
            taps = _tap_range(b, h0, height, kh, dh)

            def tiles(vectors: int, lanes: int, c0: ir.Value) -> None:
                def row_of(pixels: int) -> None:
                    last_tile = larger(b, i64(0), b.sub(wo, i64(pixels)))

                    def tile(j: ir.Value) -> None:
                        j0 = smaller(b, j, last_tile)
                        inside = b.and_(b.icmp_signed(">=", j0, inner_lo),
                                        b.icmp_signed("<=", b.add(j0, i64(pixels)), inner_hi))
                        w0 = b.sub(b.mul(j0, sw), left)
                        at = _Tile(image, i, h0, j0, w0, c0, taps, vectors, lanes, pixels,
                                   zeros)
                        with b.if_else(inside) as (fast, clipped):
                            with fast:
                                self._tile(b, x, w, out, steps, at, clipped=False)
                            with clipped:
                                self._tile(b, x, w, out, steps, at, clipped=True)

                    counted_loop(b, i64(0), wo, i64(pixels), tile, "tile")

                widths = self.widths(vectors)
                if len(widths) == 1:
                    row_of(widths[0])
                    return
                for pixels in widths:
                    with b.if_then(b.icmp_signed("==", chosen, i64(pixels))):
                        row_of(pixels)

            counted_loop(b, i64(0), whole, i64(widest), lambda c0: tiles(*blocks[0], c0),
                         "out_block")
            for vectors, lanes in blocks[1:]:
                width = vectors * lanes
                with b.if_then(b.icmp_signed("==", b.and_(rest, i64(width)), i64(width))):
                    tiles(vectors, lanes, b.add(whole, b.and_(rest, i64(-2 * width))))

        range_loop(b, last, row, "direct_row", start=first)
        b.call(declare(b.module, "free", ir.VoidType(), [PTR]), [zeros])

    def _tile(self, b: ir.IRBuilder, x: Operand, w: Operand, out: Operand, steps: _Steps,
              at: _Tile, clipped: bool) -> None:
        """`at.pixels` output pixels times `at.vectors` vectors of output channels, summed
        in registers over the filter rows inside the image and, per filter row, its taps
        and input channels: per step a vector of filters per output vector, each pixel's
        input broadcast, one fma per pixel and vector. Unclipped, a filter row's taps and
        channels are one run of kw*C elements (for the image and the filters alike).
        Clipped, tap by tap over those inside for some pixel, a pixel reading the zeros
        where its tap is outside the image or it is past the row's end (an image row
        narrower than a tile; its sums are not stored)."""
        width, channels = x.dims[2:]
        kw, o = w.dims[1], w.dims[3]
        wo = out.dims[2]
        sw, dh = steps.sw, steps.dh
        lanes = at.lanes
        vector = ir.VectorType(x.element, lanes)
        fma = declare(b.module, platform.current().fma(
            f"v{lanes}{'f32' if x.element == F32 else 'f64'}"), vector, [vector] * 3)
        pixels = range(at.pixels)
        w0 = at.w0
        undefined = ir.Constant(vector, None)
        splat = ir.Constant(ir.VectorType(I32, lanes), [0] * lanes)
        exists = [b.icmp_signed("<", b.add(at.j0, i64(p)), wo) for p in pixels]

        def step(sources: list[ir.Value], k: ir.Value, filters: ir.Value,
                 sums: list[ir.Value]) -> list[ir.Value]:
            """One input channel of one tap: sources[p] + k is pixel p's."""
            weights = [b.load(w.address(b, fold_add(b, filters, i64(v * lanes))),
                              typ=vector, align=x.dtype.itemsize) for v in range(at.vectors)]
            updated = list(sums)
            for p in pixels:
                value = b.load(b.gep(sources[p], [k], source_etype=x.element), typ=x.element)
                broadcast = b.shuffle_vector(b.insert_element(undefined, value, i64(0)),
                                             undefined, splat)
                for v in range(at.vectors):
                    n = p * at.vectors + v
                    updated[n] = b.call(fma, [broadcast, weights[v], sums[n]])
            return updated

        def taps(sources: list[ir.Value], count: ir.Value, filters: ir.Value,
                 sums: list[ir.Value]) -> list[ir.Value]:
            return fold_loop(b, i64(0), count, i64(1), sums, lambda k, s: step(
                sources, k, b.add(filters, b.mul(k, o)), s), "k")

        def filter_row(a: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
            h = b.add(at.h0, b.mul(a, dh))
            filters = w.offset(b, [a, i64(0), i64(0), at.c0])
            if not clipped:
                first = x.offset(b, [at.image, h, w0, i64(0)])
                return taps([x.address(b, fold_add(b, first, offset))
                             for offset in steps.offsets], fold_mul(b, kw, channels), filters,
                            sums)
            last = b.sub(smaller(b, b.add(at.j0, i64(at.pixels)), wo), i64(1))
            lo, _ = _tap_range(b, b.add(w0, b.mul(b.sub(last, at.j0), sw)), width, kw, i64(1))
            _, hi = _tap_range(b, w0, width, kw, i64(1))

            def tap(c: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                columns = [fold_add(b, b.add(w0, c), shift) for shift in steps.shifts]
                sources = [b.select(b.and_(exists[p], b.icmp_unsigned("<", columns[p], width)),
                                    x.address(b, x.offset(b, [at.image, h, columns[p],
                                                              i64(0)])), at.zeros)
                           for p in pixels]
                return taps(sources, channels, b.add(filters, b.mul(b.mul(c, channels), o)),
                            sums)

            return fold_loop(b, lo, hi, i64(1), sums, tap, "tap")

        def targets() -> list[ir.Value]:
            """Each pixel's first output element; one past the row's end (clipped) is still
            computed, its elements clamped to the row's last, and never stored."""
            return [out.offset(b, [at.image, at.i, smaller(b, b.add(at.j0, i64(p)),
                                                            b.sub(wo, i64(1))), at.c0])
                    for p in pixels]

        def elements() -> list[ir.Value]:
            return [fold_add(b, t, i64(v * lanes)) for t in targets()
                    for v in range(at.vectors)]

        steps.end.prefetch(b, steps.ended, out.pointer, elements(), x.element)
        zero = ir.Constant(vector, [0.0] * lanes)
        sums = fold_loop(b, at.rows[0], at.rows[1], i64(1),
                         [zero] * (at.pixels * at.vectors), filter_row, "filter_row")
        sums = values_where(b, steps.ended, sums, lambda: steps.end.apply(
            b, sums, [fold_add(b, at.c0, i64(v * lanes)) for _ in pixels
                      for v in range(at.vectors)],
            elements(), lambda pointer: b.load(pointer, typ=vector, align=x.dtype.itemsize),
            x.element))
        stored = targets()
        for p in pixels:
            def store(p: int = p) -> None:
                for v in range(at.vectors):
                    b.store(sums[p * at.vectors + v],
                            out.address(b, fold_add(b, stored[p], i64(v * lanes))),
                            align=x.dtype.itemsize)

            if clipped:
                with b.if_then(exists[p]):
                    store()
            else:
                store()


@dataclass(frozen=True)
class _Tile:
    """One tile: output pixels [j0, j0 + `pixels`) of row `i` of `image` (input row
    `h0` under the first filter row, column `w0` under the first tap), output channels
    from `c0` in `vectors` vectors of `lanes` elements; `rows` the filter rows [lo, hi)
    inside the image; `zeros` C zeros, read for the taps outside it."""

    image: ir.Value
    i: ir.Value
    h0: ir.Value
    j0: ir.Value
    w0: ir.Value
    c0: ir.Value
    rows: tuple[ir.Value, ir.Value]
    vectors: int
    lanes: int
    pixels: int
    zeros: ir.Value


@dataclass(frozen=True)
class _Steps:
    """The column stride `sw` and filter-row dilation `dh`; pixel p of a tile reads
    `shifts[p]` image columns (`offsets[p]` elements) right of its first one; the epilogue
    `end` at the output's first element, and whether it does anything (`ended`)."""

    sw: ir.Value
    dh: ir.Value
    shifts: list[ir.Value]
    offsets: list[ir.Value]
    end: Epilogue
    ended: ir.Value


def _tile_width(b: ir.IRBuilder, wo: ir.Value, widths: tuple[int, ...]) -> ir.Value:
    """The width among `widths` whose tiles cover a row of `wo` pixels with the fewest
    computed, ``ceil(wo / t) * t``; the widest of those tied (fewer tiles)."""
    best, cost = None, None
    for pixels in widths:
        covered = b.mul(b.sdiv(b.add(wo, i64(pixels - 1)), i64(pixels)), i64(pixels))
        if best is None:
            best, cost = i64(pixels), covered
            continue
        better = b.icmp_signed("<=", covered, cost)
        best, cost = b.select(better, i64(pixels), best), b.select(better, covered, cost)
    return best


def _tap_range(b: ir.IRBuilder, start: ir.Value, size: ir.Value, taps: ir.Value,
              dilation: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The taps [lo, hi) among `taps`, `dilation` apart from `start`, inside [0, size)."""
    lo = b.select(b.icmp_signed("<", start, i64(0)),
                  b.sdiv(b.sub(fold_add(b, dilation, i64(-1)), start), dilation), i64(0))
    room = b.sub(b.sub(size, i64(1)), start)
    hi = b.select(b.icmp_signed("<", room, i64(0)), i64(0),
                  smaller(b, taps, b.add(b.sdiv(room, dilation), i64(1))))
    return lo, hi
