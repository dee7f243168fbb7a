"""The blocked direct loops: a convolution of packed filters into many output channels,
read from the image in place, its input channels in chunks summed through the output.

Why: the im2col gemm copies each window out and repacks it for its tiles; the direct
loops (`conv.direct`) sum a tile over every term in registers, which for many input
channels reads the filters of a whole block of output channels per tile from the L2 cache,
at a row of O elements apart per term (across 4 KiB-aliased cache sets). Here, as in
oneDNN's and onnxruntime's NCHWc kernels, a tile of `TILE` output pixels by two panels of
the packed filters (`primitives.prepacked`: 64 float32 channels, 24 sums in AVX-512
registers) sums one chunk of `CHUNK` input channels of every tap, then adds its sums to
the output's (the first chunk stores them, the last one applies the epilogue): a chunk's
filters are one run per tap in each panel, which stays in the cache while the tiles of a
group of pixels reuse it, and the group's outputs stay in the L1 cache between chunks.

The work is shared out as (block of output channels, image row) units, blocks outermost,
so that a core keeps one block's filters while it walks the rows. A tile takes
`TILE` consecutive pixels of the unit range's rows, across row ends, so that a 7-pixel
row does not leave a tile of one pixel; a tile past the range's end repeats its last pixel
(the same sums stored twice). Tiles whose windows all lie inside the image read each
tap at a fixed offset from the pixel's first; the others select, per pixel and tap, the
image or `CHUNK` zeros.
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
    i64,
    return_unless,
    values_where,
)
from stageflow.codegen.lowered.conv import epilogue
from stageflow.codegen.lowered.conv.epilogue import Epilogue
from stageflow.codegen.lowered.conv.windowed import NO_MEMORY, PTR
from stageflow.codegen.lowered.rule import larger, smaller
from stageflow.codegen.targets import platform
from stageflow.primitives.prepacked import panel_width

TILE = 6  # output pixels a tile: 24 sums of 64 channels, 4 filter vectors and a broadcast
CHUNK = 32  # input channels a chunk: its filters of two panels, 9 taps, are 72 KiB
GROUP = 60  # output pixels whose chunk sums stay in the L1 cache: 15 KiB of 64 channels
LANES = 16  # float32 lanes of an AVX-512 vector
WIDTH = panel_width(np.float32)  # a panel's columns: two vectors


def available(dtype: np.dtype) -> bool:
    """Whether the blocked loops are compiled into a conv family's code of this dtype:
    float32, on a CPU with AVX-512 (the rule of which convs they take is `fits`, at run
    time: a module's convs of a family share one function).

    >>> available(np.dtype(np.float64))
    False
    """
    return np.dtype(dtype) == np.float32 and platform.current().has("avx512f")


def fits(b: ir.IRBuilder, filters: list[ir.Value], groups: ir.Value,
         column_dilation: ir.Value, pointwise: ir.Value) -> ir.Value:
    """Whether the blocked loops take a packed conv (at run time): one group, a window of
    more than one tap whose taps along a row are one image column apart, output channels
    filling whole panels. A 1x1 filter's chunks are one tap each, too short for their
    sums' trip through the output: its (strided) windows copied for the gemm ran faster."""
    kh, kw, _, o = filters
    flags = [b.not_(pointwise), b.icmp_signed("==", groups, i64(1)),
             b.icmp_signed("==", column_dilation, i64(1)),
             b.icmp_signed(">", b.mul(kh, kw), i64(1)),
             b.icmp_signed("==", b.srem(o, i64(WIDTH)), i64(0))]
    return _all(b, flags)


def blocks(b: ir.IRBuilder, out_channels: ir.Value) -> ir.Value:
    """The blocks of output channels: two panels each, the last one panel where O is
    odd in panels."""
    return b.sdiv(b.add(out_channels, i64(2 * WIDTH - 1)), i64(2 * WIDTH))


@dataclass(frozen=True)
class _Tile:
    """Per pixel of a tile: its image, its first window row and column (negative in the
    padding), its input's first element (valid where its window lies inside), and its
    output's first element of the block."""

    image: list[ir.Value]
    h0: list[ir.Value]
    w0: list[ir.Value]
    first: list[ir.Value]
    out: list[ir.Value]


class BlockedLoops:
    """The float32 blocked loops: one copy in a module (`call`), internal."""

    SYMBOL = "sf.conv2d.blocked.float32"

    def call(self, b: ir.IRBuilder, pointers: tuple[ir.Value, ir.Value, ir.Value],
             dims: list[ir.Value], geometry: list[ir.Value], units: tuple[ir.Value, ir.Value],
             end: Epilogue) -> ir.Value:
        """Units [first, last) of ``conv2d(x, panels)``: `pointers` x, the panels and the
        output; `dims` x's (N, H, W, C), the filters' (kh, kw, O) and the output's (Ho, Wo);
        `geometry` the strides, the filter-row dilation and the top and left padding;
        through `end` (at the output's first element). Its status (`NO_MEMORY`)."""
        return b.call(self._function(b.module), [*pointers, *dims, *geometry, *units,
                                                 *end.arguments()])

    def _function(self, module: ir.Module) -> ir.Function:
        existing = module.globals.get(self.SYMBOL)
        if isinstance(existing, ir.Function):
            return existing
        labels = ["n", "h", "w", "c", "kh", "kw", "o", "ho", "wo", "sh", "sw", "dh", "top",
                  "left", "first", "last"]
        function = ir.Function(module, ir.FunctionType(
            I32, [PTR] * 3 + [I64] * len(labels) + epilogue.TYPES), self.SYMBOL)
        function.linkage = "internal"
        for argument, label in zip(function.args, ["x", "panels", "out", *labels,
                                                   *epilogue.NAMES], strict=True):
            argument.name = label
        b = ir.IRBuilder(function.append_basic_block("entry"))
        args = list(function.args)
        self._units(b, args[:3], dict(zip(labels, args[3:3 + len(labels)], strict=True)),
                    Epilogue.of(args[3 + len(labels):]))
        b.ret(ir.Constant(I32, 0))
        return function

    def _units(self, b: ir.IRBuilder, pointers: list[ir.Value], d: dict[str, ir.Value],
               end: Epilogue) -> None:
        """Per block of output channels among the units, its image rows' pixels in groups
        of `GROUP`, each group chunk by chunk of input channels, tile by tile."""
        x, panels, out = pointers
        calloc = declare(b.module, "calloc", PTR, [I64, I64])
        zeros = b.call(calloc, [larger(b, i64(1), d["c"]), i64(4)])
        return_unless(b, b.icmp_unsigned("!=", zeros, ir.Constant(PTR, None)),
                      ir.Constant(I32, NO_MEMORY))
        image_rows = b.mul(d["n"], d["ho"])
        depth = b.mul(b.mul(d["kh"], d["kw"]), d["c"])
        first_block = b.sdiv(d["first"], image_rows)
        last_block = b.sdiv(b.sub(d["last"], i64(1)), image_rows)
        ended = end.any(b)

        def block(k: ir.Value) -> None:
            start = b.mul(k, image_rows)
            r0 = b.sub(larger(b, d["first"], start), start)
            r1 = b.sub(smaller(b, d["last"], b.add(start, image_rows)), start)
            c0 = b.mul(k, i64(2 * WIDTH))
            panel = b.gep(panels, [b.mul(b.mul(k, i64(2)), b.mul(depth, i64(WIDTH)))],
                          source_etype=F32)
            two = b.icmp_signed("<=", b.add(c0, i64(2 * WIDTH)), d["o"])
            q0, q1 = b.mul(r0, d["wo"]), b.mul(r1, d["wo"])

            def group(g: ir.Value) -> None:
                g1 = smaller(b, b.add(g, i64(GROUP)), q1)

                def chunk(cc: ir.Value) -> None:
                    cb = smaller(b, i64(CHUNK), b.sub(d["c"], cc))
                    last_chunk = b.icmp_signed("==", b.add(cc, cb), d["c"])
                    at = _Chunk(cc, cb, b.icmp_signed("==", cc, i64(0)),
                                b.and_(last_chunk, ended), c0, panel,
                                b.mul(depth, i64(WIDTH)))

                    def tiles(vectors: int) -> None:
                        counted_loop(b, g, g1, i64(TILE), lambda q: self._tile(
                            b, x, out, zeros, d, at, q, g1, vectors, end), "tile")

                    with b.if_else(two) as (wide, narrow):
                        with wide:
                            tiles(4)
                        with narrow:
                            tiles(2)

                counted_loop(b, i64(0), d["c"], i64(CHUNK), chunk, "chunk")

            counted_loop(b, q0, q1, i64(GROUP), group, "group")

        counted_loop(b, first_block, b.add(last_block, i64(1)), i64(1), block, "block")
        b.call(declare(b.module, "free", ir.VoidType(), [PTR]), [zeros])

    def _tile(self, b: ir.IRBuilder, x: ir.Value, out: ir.Value, zeros: ir.Value,
              d: dict[str, ir.Value], at: _Chunk, q: ir.Value, end_q: ir.Value,
              vectors: int, end: Epilogue) -> None:
        """Pixels [q, q + `TILE`) of the flattened output rows (the last one repeated past
        `end_q`) by `vectors` vectors of the block's channels, over the chunk's terms."""
        vector = ir.VectorType(F32, LANES)
        pixels = range(TILE)
        tile = self._pixels(b, x, d, at, q, end_q)
        inside = _all(b, [b.and_(b.and_(b.icmp_signed(">=", tile.h0[p], i64(0)),
                                        b.icmp_signed(">=", tile.w0[p], i64(0))),
                                 b.and_(b.icmp_signed("<", b.add(tile.h0[p], b.mul(
                                     b.sub(d["kh"], i64(1)), d["dh"])), d["h"]),
                                        b.icmp_signed("<=", b.add(tile.w0[p], d["kw"]),
                                                      d["w"])))
                          for p in pixels])
        elements = [fold_add(b, tile.out[p], i64(v * LANES)) for p in pixels
                    for v in range(vectors)]

        def load(offset: ir.Value) -> ir.Value:
            return b.load(b.gep(out, [offset], source_etype=F32), typ=vector, align=4)

        zero = ir.Constant(vector, [0.0] * LANES)
        sums = values_where(b, b.not_(at.first), [zero] * len(elements),
                            lambda: [load(e) for e in elements])
        fma = declare(b.module, platform.current().fma(f"v{LANES}f32"), vector, [vector] * 3)
        undefined = ir.Constant(vector, None)
        splat = ir.Constant(ir.VectorType(I32, LANES), [0] * LANES)

        def terms(sources: list[ir.Value], filters: ir.Value,
                  sums: list[ir.Value]) -> list[ir.Value]:
            """The chunk's channels of one tap: sources[p] is pixel p's first."""

            def step(c: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                rows = [b.gep(filters, [b.mul(c, i64(WIDTH))], source_etype=F32)]
                rows.append(b.gep(rows[0], [at.second], source_etype=F32))
                weights = [b.load(b.gep(rows[v // 2], [i64(v % 2 * LANES)], source_etype=F32),
                                  typ=vector, align=4) for v in range(vectors)]
                updated = list(sums)
                for p in pixels:
                    value = b.load(b.gep(sources[p], [c], source_etype=F32), typ=F32)
                    broadcast = b.shuffle_vector(b.insert_element(undefined, value, i64(0)),
                                                 undefined, splat)
                    for v in range(vectors):
                        n = p * vectors + v
                        updated[n] = b.call(fma, [broadcast, weights[v], sums[n]])
                return updated

            return fold_loop(b, i64(0), at.cb, i64(1), sums, step, "k")

        def taps(clipped: bool) -> list[ir.Value]:
            def filter_row(a: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                def tap(t: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                    k = b.add(b.mul(b.add(b.mul(a, d["kw"]), t), d["c"]), at.cc)
                    filters = b.gep(at.panel, [b.mul(k, i64(WIDTH))],
                                    source_etype=F32)
                    if not clipped:
                        offset = b.mul(b.add(b.mul(b.mul(a, d["dh"]), d["w"]), t),
                                       d["c"])
                        return terms([b.gep(tile.first[p], [offset], source_etype=F32)
                                      for p in pixels], filters, sums)
                    sources = []
                    for p in pixels:
                        h = b.add(tile.h0[p], b.mul(a, d["dh"]))
                        w = b.add(tile.w0[p], t)
                        valid = b.and_(b.icmp_unsigned("<", h, d["h"]),
                                       b.icmp_unsigned("<", w, d["w"]))
                        pixel = b.add(b.mul(b.add(b.mul(tile.image[p], d["h"]), h),
                                            d["w"]), w)
                        source = b.gep(x, [b.add(b.mul(pixel, d["c"]), at.cc)],
                                       source_etype=F32)
                        sources.append(b.select(valid, source, zeros))
                    return terms(sources, filters, sums)

                return fold_loop(b, i64(0), d["kw"], i64(1), sums, tap, "tap")

            return fold_loop(b, i64(0), d["kh"], i64(1), sums, filter_row, "filter_row")

        with b.if_else(inside) as (fast, slow):
            with fast:
                fast_sums = taps(False)
                fast_block = b.block
            with slow:
                slow_sums = taps(True)
                slow_block = b.block
        sums = []
        for fast_value, slow_value in zip(fast_sums, slow_sums, strict=True):
            phi = b.phi(vector)
            phi.add_incoming(fast_value, fast_block)
            phi.add_incoming(slow_value, slow_block)
            sums.append(phi)
        channels = [fold_add(b, at.c0, i64(v * LANES)) for _ in pixels for v in range(vectors)]
        sums = values_where(b, at.ended, sums, lambda: end.apply(
            b, sums, channels, elements, lambda pointer: b.load(pointer, typ=vector, align=4), F32))
        for value, element in zip(sums, elements, strict=True):
            b.store(value, b.gep(out, [element], source_etype=F32), align=4)

    def _pixels(self, b: ir.IRBuilder, x: ir.Value, d: dict[str, ir.Value], at: _Chunk,
                q: ir.Value, end_q: ir.Value) -> _Tile:
        """Where each pixel of the tile from flattened pixel q lies (past `end_q`, the last
        pixel before it again)."""
        fields: dict[str, list[ir.Value]] = {"image": [], "h0": [], "w0": [], "first": [],
                                             "out": []}
        row = b.sdiv(q, d["wo"])
        j = b.sub(q, b.mul(row, d["wo"]))
        image = b.sdiv(row, d["ho"])
        i = b.sub(row, b.mul(image, d["ho"]))
        pixel = q
        for p in range(TILE):
            if p:
                # The next pixel by counters, not two divisions a pixel, per tile and
                # chunk; past `end_q`, the last one again.
                step = b.zext(b.icmp_signed("<", b.add(pixel, i64(1)), end_q), I64)
                pixel = b.add(pixel, step)
                j = b.add(j, step)
                wrap = b.icmp_signed("==", j, d["wo"])
                j = b.select(wrap, i64(0), j)
                i = b.add(i, b.zext(wrap, I64))
                over = b.icmp_signed("==", i, d["ho"])
                i = b.select(over, i64(0), i)
                image = b.add(image, b.zext(over, I64))
            h0 = b.sub(b.mul(i, d["sh"]), d["top"])
            w0 = b.sub(b.mul(j, d["sw"]), d["left"])
            start = b.add(b.mul(b.add(b.mul(image, d["h"]), h0), d["w"]), w0)
            fields["image"].append(image)
            fields["h0"].append(h0)
            fields["w0"].append(w0)
            fields["first"].append(b.gep(x, [b.add(b.mul(start, d["c"]), at.cc)],
                                         source_etype=F32))
            fields["out"].append(b.add(b.mul(pixel, d["o"]), at.c0))
        return _Tile(**fields)


@dataclass(frozen=True)
class _Chunk:
    """One chunk of a block: input channels [cc, cc + cb), whether it is the first (its
    sums start at zero) and the last with an epilogue (`ended`), the block's first output
    channel `c0`, its first panel, and the panels' depth (kh*kw*C)."""

    cc: ir.Value
    cb: ir.Value
    first: ir.Value
    ended: ir.Value
    c0: ir.Value
    panel: ir.Value
    depth_elements: ir.Value

    @property
    def second(self) -> ir.Value:
        """Elements from the block's first panel to its second."""
        return self.depth_elements


def _all(b: ir.IRBuilder, flags: list[ir.Value]) -> ir.Value:
    result = flags[0]
    for flag in flags[1:]:
        result = b.and_(result, flag)
    return result
