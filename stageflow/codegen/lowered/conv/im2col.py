"""im2col and col2im: the windows of a block of output positions between the image and a
scratch matrix, one row per position (kh*kw*C elements: the filter taps in HWI order,
padding as zeros), for the gemms of the convolution families.

A block holds whole image rows of positions: at least `MIN_BLOCK_ROWS` of them (fewer made
the gemm slower and repack the filters more often), otherwise about `SCRATCH_BYTES` of
windows. Where that many rows of kh*kw*C elements exceed `SCRATCH_BYTES` (large filters of
many channels), the filter rows are split into chunks, each a gemm accumulating onto the
previous chunks'. `SCRATCH_BYTES` is sized to stay in the L2 cache between the copy's writes
and the gemm's reads, and below glibc's mmap threshold, so that it is not page-faulted in
again at every call; scratch several times larger ran a CIFAR ResNet's stem conv several
times slower. The scratch is allocated by the lowered function (malloc and free around the
blocks), so a program's buffer plan does not see it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import (
    counted_loop,
    fold_add,
    fold_mul,
    i64,
    range_loop,
    return_unless,
)
from stageflow.codegen.lowered.conv.vectors import move, zero
from stageflow.codegen.lowered.conv.windowed import PTR, Geometry
from stageflow.codegen.lowered.rule import OpBuilder, Operand, larger, smaller

SCRATCH_BYTES = 128 * 1024
MIN_BLOCK_ROWS = 1024
# The filter gradient's blocks: its gemm (kh*kw*C x rows) @ (rows x O) ran faster on fewer
# rows, whose scratch stays in the L2 cache until the gemm reads it; the forward conv's and
# col2im's gemms were slower on fewer rows.
FILTER_GRADIENT_MIN_BLOCK_ROWS = 256


@dataclass(frozen=True)
class Chunk:
    """One block of positions (image rows [first, last): `rows` positions) and one chunk of
    filter rows [a0, a1) (`depth` elements per window; the chunk's filters start at element
    `filters` of an HWIO array), with the scratch holding its windows."""

    first: ir.Value
    last: ir.Value
    rows: ir.Value
    a0: ir.Value
    a1: ir.Value
    depth: ir.Value
    filters: ir.Value
    scratch: ir.Value


def blocks(ob: OpBuilder, dtype: np.dtype, image: Operand, kh: ir.Value, kw: ir.Value,
           positions: Operand, rows: tuple[ir.Value, ir.Value], chunk: Callable[[Chunk], None],
           min_rows: int = MIN_BLOCK_ROWS) -> None:
    """Blocks of whole image rows [first, last) of the positions, split into chunks of
    filter rows where a block would exceed `SCRATCH_BYTES`: `chunk` runs per block and
    chunk with scratch for its windows (one row per position, the chunk's taps in HWI
    order). Without memory for the scratch, the op returns 1 + its argument count."""
    b = ob.b
    start, stop = rows
    run = fold_mul(b, kw, image.dims[3])
    depth = fold_mul(b, kh, run)
    width = positions.dims[2]
    elements = i64(SCRATCH_BYTES // dtype.itemsize)
    by_bytes = b.sdiv(elements, larger(b, i64(1), fold_mul(b, width, depth)))
    by_rows = b.sdiv(b.add(i64(min_rows - 1), width), larger(b, i64(1), width))
    block = larger(b, i64(1), smaller(b, b.sub(stop, start), larger(b, by_bytes, by_rows)))
    per_tap_row = b.mul(b.mul(block, width), run)
    tap_rows = larger(b, i64(1), smaller(b, kh, b.sdiv(elements, per_tap_row)))
    malloc = declare(b.module, "malloc", PTR, [I64])
    free = declare(b.module, "free", ir.VoidType(), [PTR])
    scratch = b.call(malloc, [larger(b, i64(1), b.mul(b.mul(per_tap_row, tap_rows),
                                                      i64(dtype.itemsize)))])
    return_unless(b, b.icmp_unsigned("!=", scratch, ir.Constant(PTR, None)),
                  ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1))

    def one_block(first: ir.Value) -> None:
        last = smaller(b, b.add(first, block), stop)

        def one_chunk(a0: ir.Value) -> None:
            a1 = smaller(b, b.add(a0, tap_rows), kh)
            chunk(Chunk(first, last, b.mul(b.sub(last, first), width), a0, a1,
                        b.mul(b.sub(a1, a0), run), b.mul(b.mul(a0, run), positions.dims[3]),
                        scratch))

        counted_loop(b, i64(0), kh, tap_rows, one_chunk, "tap_rows")

    counted_loop(b, start, stop, block, one_block, "block")
    b.call(free, [scratch])


def windows(ob: OpBuilder, geo: Geometry, image: Operand, kw: ir.Value, positions: Operand,
            c: Chunk, accumulate: bool, scratch: np.dtype | None = None) -> None:
    """Between the chunk's scratch (of the image's dtype unless `scratch` says otherwise:
    bfloat16 columns added into a float32 image) and the image: copy the windows in
    (im2col), or add the scratch's rows into the image where the windows read it
    (col2im)."""
    columns = Operand(c.scratch, [], [], image.dtype if scratch is None else scratch)
    range_loop(ob.b, c.last, lambda t: _image_row(ob, geo, image, kw, positions, columns, t,
                                                  c, accumulate), "t", start=c.first)


def _image_row(ob: OpBuilder, geo: Geometry, x: Operand, kw: ir.Value, positions: Operand,
               columns: Operand, t: ir.Value, c: Chunk, accumulate: bool) -> None:
    """The windows of positions row `t` (image t // Ho, row t % Ho) over filter rows
    [a0, a1), one filter row (kw taps of C channels) at a time: outside the image, zeros
    (or nothing to add); inside with every tap inside, no dilation and the image's C
    channels all of a pixel's (not one group's of a grouped conv), one contiguous run of
    kw*C elements; else tap by tap."""
    b = ob.b
    height, width, channels = x.dims[1:]
    (sh, sw), (dh, dw) = geo.strides, geo.dilations
    top, left = geo.padding[0][0], geo.padding[1][0]
    ho, wo = positions.dims[1:3]
    image = b.sdiv(t, ho)
    row = b.sub(t, b.mul(image, ho))
    first_row = b.sub(b.mul(row, sh), top)
    base = b.mul(b.sub(t, c.first), wo)
    run = fold_mul(b, kw, channels)
    last_tap = b.mul(fold_add(b, kw, i64(-1)), dw)
    undilated = ob.all_of([b.icmp_signed("==", dw, i64(1)),
                           b.icmp_signed("==", channels, x.strides[2])])

    def position(j: ir.Value) -> None:
        start = b.sub(b.mul(j, sw), left)
        contiguous = ob.all_of([undilated, b.icmp_signed(">=", start, i64(0)),
                                b.icmp_signed("<", b.add(start, last_tap), width)])
        row_start = b.mul(b.add(base, j), c.depth)

        def filter_row(a: ir.Value) -> None:
            h = b.add(first_row, b.mul(a, dh))
            target = b.add(row_start, fold_mul(b, b.sub(a, c.a0), run))
            source = x.offset(b, [image, h, start, i64(0)])
            with b.if_else(b.icmp_unsigned("<", h, height)) as (inside, outside):
                with inside, b.if_else(contiguous) as (run_, edge):
                    with run_:
                        move(b, x, source, columns, target, run, accumulate)
                    with edge:
                        _taps(b, x, kw, dw, columns, source, start, target, accumulate)
                with outside:
                    if not accumulate:
                        zero(b, columns, target, run)

        range_loop(b, c.a1, filter_row, "filter_row", start=c.a0)

    range_loop(b, wo, position, "j")


def _taps(b: ir.IRBuilder, x: Operand, kw: ir.Value, dw: ir.Value, columns: Operand,
          source: ir.Value, start: ir.Value, target: ir.Value, accumulate: bool) -> None:
    """One filter row tap by tap (`dw` image columns apart): C channels moved, or zeros
    where the tap is outside."""
    width, channels = x.dims[2], x.dims[3]

    def tap(c: ir.Value) -> None:
        step = b.mul(c, dw)
        at = fold_add(b, target, fold_mul(b, c, channels))
        with b.if_else(b.icmp_unsigned("<", b.add(start, step), width)) as (inside, outside):
            with inside:
                move(b, x, fold_add(b, source, fold_mul(b, step, x.strides[2])), columns, at,
                     channels, accumulate)
            with outside:
                if not accumulate:
                    zero(b, columns, at, channels)

    range_loop(b, kw, tap, "tap")
