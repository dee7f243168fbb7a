"""The three convolution ops, `conv2d`, `conv2d_filter_gradient` and
`conv2d_input_gradient`, and their lowering rules: which algorithm each runs for which
shape (`codegen.lowered.conv` says why), how it splits over the cores, and how it fails.

Each checks the channels and the window's fit before it touches memory, and fails (an error
code, so the NumPy kernel runs and raises its error) where the window is larger than the
padded input, a cotangent is not of the conv's result's dims, or an operand is not
C-contiguous (programs pass only contiguous arrays; a strided view given to the op alone
runs NumPy's kernel); it returns 1 + its argument count where malloc fails. The rules
decline dtypes the BLAS has no gemm for, and every op where no BLAS is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from stageflow.codegen.llvm.emitter import I1, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca, memcpy
from stageflow.codegen.llvm.loops import fold_mul, i64, range_loop, return_unless
from stageflow.codegen.lowered import gemm_bf16
from stageflow.codegen.lowered.conv import blocked, epilogue
from stageflow.codegen.lowered.conv.bfloat16 import (
    Conv2dBfloat16,
    Conv2dFilterGradientBfloat16,
    Conv2dInputGradientBfloat16,
)
from stageflow.codegen.lowered.conv.direct import DirectLoops
from stageflow.codegen.lowered.conv.epilogue import Epilogue, FusedOperands
from stageflow.codegen.lowered.conv.gemm import gemm_function, packed_gemm_function
from stageflow.codegen.lowered.conv.im2col import (
    FILTER_GRADIENT_MIN_BLOCK_ROWS,
    Chunk,
    blocks,
    windows,
)
from stageflow.codegen.lowered.conv.vectors import fill, zero
from stageflow.codegen.lowered.conv.windowed import (
    PTR,
    ConvolutionShape,
    FilterGradientShape,
    Geometry,
    InputGradientShape,
    Windowed,
    blas_unless,
    contiguous_operands,
)
from stageflow.codegen.lowered.matmul import gemm_lowerable
from stageflow.codegen.lowered.rule import (
    OpBuilder,
    Operand,
    OpSpec,
    contiguous_strides,
    is_row_major,
    larger,
    lowering,
    nest,
    smaller,
)
from stageflow.codegen.lowered.tasks import cpu_count
from stageflow.codegen.targets import platform
from stageflow.core import dtypes
from stageflow.primitives.conv import (
    Pair,
    conv2d_filter_gradient_p,
    conv2d_input_gradient_p,
    conv2d_p,
)
from stageflow.primitives.elementwise import relu_p
from stageflow.primitives.fused_conv import (
    conv2d_fused_p,
    epilogue_operands,
)
from stageflow.primitives.prepacked import (
    PACKED_DTYPES,
    conv2d_prepacked_p,
    panel_width,
    panels_shape,
)

# A conv of fewer output pixels than this, into at least this many panels of filters,
# splits its filters over the cores rather than its pixels (`Conv2d._by_columns`): a
# batch-1 image of 7x7 to 28x28, 128 to 1024 tokens through a dense layer. With fewer
# panels the cores would have too few to share.
COLUMN_SPLIT_ROWS = 1536
COLUMN_SPLIT_MIN_PANELS = 8


@dataclass(frozen=True)
class Conv2d(FusedOperands, ConvolutionShape, Windowed):
    """``conv2d(x, w)``: a 1x1 filter at stride 1 without padding as a gemm of the input in
    place, its rows split over the cores; else the output's image rows split over the
    cores, each task running the direct loops where `DirectLoops.fits`, else per chunk the
    windows copied in and one gemm by the chunk's filters into the block's output rows
    (accumulating after the first chunk). The gemms are the convolutions' own
    (`conv.gemm`), in which every output channel sums in the same order.

    Where the output has few pixels and the filters many panels (`_by_columns`), the cores
    share out the filters' panels instead, each task multiplying every pixel by its own:
    with a batch-1 7x7 image's rows split in two, each core read all of ResNet-50's last
    filters from memory for half the work, and one core had 4 of the 7 rows. A windowed
    conv splits so only where its image rows do not share out evenly over the cores: each
    task copies every window in, which cost more than it saved where they did. The direct
    loops never take that many filters.

    Grouped (G feature groups: filters (kh, kw, C/G, O)), each gemm is G gemms, group g's
    reading the input's channel block g (a pointwise conv's A in place, rows C apart; else
    its windows copied in, C/G channels per tap) by its filters' columns [g*O/G, (g+1)*O/G)
    into the output's same columns (rows O apart): no copy of the input or the output.
    The direct loops serve one group only.

    ``conv2d_fused`` (`extras`: the names of its operands after the filters) is the same
    code, whose gemms and direct loops apply its epilogue to the sums they store
    (`conv.epilogue`); conv2d runs it with none. Both pass the shared code the same
    pointers: x, w, the output, then the scales, shifts and residual
    (`epilogue.FusedOperands`)."""

    extras: tuple[str, ...] = ()

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        out = ob.outputs[0]
        x, w = self._checked(ob, geo)
        image_rows, rows, depth, pointwise = self._gemm_sizes(ob, geo, w)
        o = w.dims[3]
        empty = b.or_(ob.eq(rows, i64(0)), ob.eq(o, i64(0)))
        with b.if_then(b.not_(empty)):
            with b.if_else(ob.eq(depth, i64(0))) as (no_terms, terms):
                with no_terms:
                    # No terms and an epilogue: rare enough for the NumPy kernel.
                    ob.fail_unless(b.not_(epilogue.read(ob, geo.relu).any(b)), 1)
                    fill(b, out, rows)
                with terms:
                    self._tasks(ob, geo, (image_rows, rows, depth, o), pointwise)

    def _pixels(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
                memory: ir.Value) -> None:
        """Output pixels [first, last) of a pointwise conv: their rows of the input, read
        in place, by the filters; group by group, each its block of the rows' channels."""
        b = ob.b
        geo = Geometry.read(ob)
        x, w, out = contiguous_operands(ob)
        channels, depth, o = x.dims[3], w.dims[2], w.dims[3]
        inputs, outputs = x.address(b, b.mul(first, channels)), out.address(b, b.mul(first, o))

        whole = epilogue.read(ob, geo.relu)

        def group(g: ir.Value) -> None:
            column = b.mul(g, b.sdiv(o, geo.groups))
            self._filters_gemm(ob, geo, w, g, b.sub(last, first), depth,
                               (_at(b, x, inputs, b.mul(g, depth)), channels), None,
                               (_at(b, out, outputs, column), o), ir.Constant(I1, 0),
                               whole.at(b, out.element, column,
                                        b.add(b.mul(first, o), column)))

        range_loop(b, geo.groups, group, "group")

    def _tasks(self, ob: OpBuilder, geo: Geometry, sizes: tuple[ir.Value, ...],
               pointwise: ir.Value) -> None:
        """The conv's tasks, given its image rows, pixels, window elements and filters:
        its filters' panels shared out where `_by_columns` (a windowed conv's only where
        its image rows do not share out evenly over the cores), else its pixels
        (pointwise) or its image rows."""
        b = ob.b
        image_rows, rows, depth, o = sizes
        macs = b.mul(b.mul(rows, depth), o)
        width = i64(panel_width(self.dtype))
        panels = b.sdiv(b.add(o, b.sub(width, i64(1))), width)
        uneven = b.icmp_signed("!=", b.srem(image_rows, cpu_count(b)), i64(0))
        few = self._by_columns(ob, geo, rows, panels)
        with b.if_else(pointwise) as (one_gemm, windowed):
            with one_gemm, b.if_else(few) as (by_columns, by_pixels):
                with by_columns:
                    self._split(ob, panels, macs, self._columns, name="columns", guard=None)
                with by_pixels:
                    self._split(ob, rows, macs, self._pixels, name="pixels", guard=None)
            with windowed, b.if_else(b.and_(few, uneven)) as (by_columns, by_rows):
                with by_columns:
                    self._split(ob, panels, macs, self._windowed_columns,
                                name="window_columns", guard=None)
                with by_rows:
                    self._split(ob, image_rows, macs, self._task, guard=None)

    def _by_columns(self, ob: OpBuilder, geo: Geometry, rows: ir.Value, panels: ir.Value
                    ) -> ir.Value:
        """Whether the cores share out the filters' panels rather than the output's pixels:
        fewer pixels than `COLUMN_SPLIT_ROWS`, at least `COLUMN_SPLIT_MIN_PANELS` panels,
        one group. A model's filters come from memory on each call: so each core reads
        only its part of them instead of all of them for half the pixels, and no core gets
        more of the pixels than another."""
        b = ob.b
        return ob.all_of([b.icmp_signed("<", rows, i64(COLUMN_SPLIT_ROWS)),
                          b.icmp_signed(">=", panels, i64(COLUMN_SPLIT_MIN_PANELS)),
                          ob.eq(geo.groups, i64(1))])

    def _panel_columns(self, ob: OpBuilder, first: ir.Value, last: ir.Value
                       ) -> tuple[ir.Value, ir.Value]:
        """Panels [first, last) as output channels: (the first, their count), the last
        panel ending at O."""
        b, o = ob.b, ob.outputs[0].dims[3]
        width = i64(panel_width(self.dtype))
        start, end = b.mul(first, width), b.mul(last, width)
        return start, b.sub(smaller(b, end, o), start)

    def _columns(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
                 memory: ir.Value) -> None:
        """Panels [first, last) of a pointwise conv's filters (one group) by every pixel."""
        b = ob.b
        geo = Geometry.read(ob)
        x, w, out = contiguous_operands(ob)
        channels, o = x.dims[3], w.dims[3]
        rows = fold_mul(b, fold_mul(b, x.dims[0], out.dims[1]), out.dims[2])
        start, count = self._panel_columns(ob, first, last)
        self._filters_gemm(ob, geo, w, i64(0), rows, channels, (x.pointer, channels), None,
                           (_at(b, out, out.pointer, start), o), ir.Constant(I1, 0),
                           epilogue.read(ob, geo.relu).at(b, out.element, start, start),
                           (start, count))

    def _windowed_columns(self, ob: OpBuilder, first: ir.Value, last: ir.Value,
                          task: ir.Value, memory: ir.Value) -> None:
        """Panels [first, last) of a windowed conv's filters (one group) by every image
        row: each task copies every window in, for its own filters."""
        b = ob.b
        geo = Geometry.read(ob)
        x, w, out = contiguous_operands(ob)
        columns = self._panel_columns(ob, first, last)
        image_rows = fold_mul(b, out.dims[0], out.dims[1])
        blocks(ob, self.dtype, x, w.dims[0], w.dims[1], out, (i64(0), image_rows),
               lambda c: self._chunk(ob, geo, x, w, c, columns))

    def _filters_gemm(self, ob: OpBuilder, geo: Geometry, w: Operand, g: ir.Value,
                      m: ir.Value, k: ir.Value, a: tuple[ir.Value, ir.Value],
                      first: ir.Value | None, c: tuple[ir.Value, ir.Value],
                      accumulate: ir.Value, end: Epilogue,
                      columns: tuple[ir.Value, ir.Value] | None = None) -> None:
        """C[m, O/G] = A[m, k] @ group g's filters: rows [first, first + k) of HWIO read as a
        (kh*kw*C/G, O) matrix (all of them from the first where `first` is None), its
        columns [g*O/G, (g+1)*O/G), or `columns` (their first, a multiple of a panel's
        width, and count) of it; added to C's values where `accumulate`; through `end`
        (the epilogue at C's first element) after the last term."""
        b, o = ob.b, w.dims[3]
        offset, n = _group_columns(b, geo, o, g, columns)
        rows = w.pointer if first is None else w.address(b, b.mul(first, o))
        b.call(gemm_function(b.module, self.dtype),
               [m, n, k, *a, _at(b, w, rows, offset), o, ir.Constant(I1, 0), *c,
                accumulate, *end.arguments()])

    def _direct(self, ob: OpBuilder, geo: Geometry, o: ir.Value) -> ir.Value | None:
        """Whether a task runs the direct loops (`DirectLoops.fits`, one group)."""
        return ob.all_of([DirectLoops(self.dtype).fits(ob, geo, o),
                          ob.eq(geo.groups, i64(1))])

    def _task(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Output image rows [first, last) by the direct loops where they fit, else by
        im2col and the gemm."""
        b = ob.b
        geo = Geometry.read(ob)
        x, w, out = contiguous_operands(ob)

        def im2col() -> None:
            blocks(ob, self.dtype, _group(b, x, w.dims[2], i64(0)), w.dims[0], w.dims[1], out,
                   (first, last), lambda c: self._chunk(ob, geo, x, w, c))

        direct = self._direct(ob, geo, w.dims[3])
        if direct is None:
            im2col()
            return
        with b.if_else(direct) as (loops, windowed):
            with loops:
                code = DirectLoops(self.dtype).call(
                    ob, x, w, out, (*geo.strides, geo.dilations[0]),
                    (geo.padding[0][0], geo.padding[1][0]), (first, last),
                    epilogue.read(ob, geo.relu))
                return_unless(b, b.icmp_signed("==", code, ir.Constant(I32, 0)), code)
            with windowed:
                im2col()

    def _chunk(self, ob: OpBuilder, geo: Geometry, x: Operand, w: Operand, c: Chunk,
               columns: tuple[ir.Value, ir.Value] | None = None) -> None:
        """Group by group: its windows (its channels of each tap) copied in, then its gemm
        into its columns of the block's output rows; or, one group, into `columns` (the
        first and the count) only."""
        b, out = ob.b, ob.outputs[0]
        o = w.dims[3]
        start = b.mul(b.mul(c.first, out.dims[2]), o)
        target = out.address(b, start)
        # The epilogue after the chunk of the last filter rows only.
        whole = epilogue.read(ob, geo.relu)
        last = b.icmp_signed("==", c.a1, w.dims[0])
        end = whole.where(b, last)

        def group(g: ir.Value) -> None:
            column = b.mul(g, b.sdiv(o, geo.groups)) if columns is None else columns[0]
            windows(ob, geo, _group(b, x, w.dims[2], g), w.dims[1], out, c, accumulate=False)
            self._filters_gemm(ob, geo, w, g, c.rows, c.depth, (c.scratch, c.depth),
                               b.mul(c.a0, fold_mul(b, w.dims[1], w.dims[2])),
                               (_at(b, out, target, column), o),
                               b.icmp_signed(">", c.a0, i64(0)),
                               end.at(b, out.element, column, b.add(start, column)), columns)

        range_loop(b, geo.groups, group, "group")


def _group_columns(b: ir.IRBuilder, geo: Geometry, o: ir.Value, g: ir.Value,
                   columns: tuple[ir.Value, ir.Value] | None) -> tuple[ir.Value, ir.Value]:
    """(first column, count) of the filters a gemm reads: group g's O/G, or `columns`."""
    if columns is not None:
        return columns
    n = b.sdiv(o, geo.groups)
    return b.mul(g, n), n


def _at(b: ir.IRBuilder, array: Operand, pointer: ir.Value, offset: ir.Value) -> ir.Value:
    """`offset` elements of `array`'s dtype past `pointer`."""
    return b.gep(pointer, [offset], source_etype=array.element)


def _group(b: ir.IRBuilder, x: Operand, channels: ir.Value, g: ir.Value) -> Operand:
    """Channel block g (`channels` wide) of the NHWC image `x`: a view, its pixels' rows
    still `x`'s channels apart."""
    return Operand(x.address(b, b.mul(g, channels)), [*x.dims[:3], channels], x.strides,
                   x.dtype)


@dataclass(frozen=True)
class Conv2dPrepacked(Conv2d):
    """``conv2d_prepacked(x, panels)``: `Conv2d` with the filters' gemm reading the panels
    in place (`conv.gemm.packed_gemm_function`), never the direct loops (the `prepack`
    pass leaves them the filters they serve). Its shared code is conv2d's, given the
    filters' own dims (`filter_shape`) and the panels' pointer as the filters'."""

    filter_shape: tuple[int, int, int, int] = (0, 0, 0, 0)
    groups: int = 1

    def _family(self, ob: OpBuilder) -> str:
        return conv2d_prepacked_p.name

    def _out_channels(self, ob: OpBuilder) -> ir.Value:
        return i64(self.filter_shape[3])

    def _operand_dims(self, ob: OpBuilder, dims: ir.Value, given: ir.Value,
                      strides: ir.Value) -> ir.Value:
        """The input's dims and strides, the filters' (row-major), the output's dims (after
        the epilogue's operands' dims); the panels' checked first: of `panels_shape`,
        row-major (else argument 1's code)."""
        b, panels = ob.b, ob.inputs[1]
        expected = [i64(v) for v in panels_shape(self.filter_shape, self.dtype, self.groups)]
        ob.fail_unless(ob.all_of([*(ob.eq(d, e) for d, e in zip(panels.dims, expected,
                                                                  strict=True)),
                                  is_row_major(ob, panels)]), 1)
        logical = entry_alloca(b, I64, 8, "strides")
        filters = [i64(v) for v in self.filter_shape]
        for k, (size, step) in enumerate(zip(filters, contiguous_strides(b, filters),
                                             strict=True)):
            b.store(size, b.gep(dims, [i64(4 + k)], source_etype=I64))
            b.store(step, b.gep(logical, [i64(4 + k)], source_etype=I64))
        extra = sum(len(operand.dims) for operand in ob.inputs[2:])
        memcpy(b, dims, given, i64(4 * 8))
        memcpy(b, b.gep(dims, [i64(8)], source_etype=I64),
               b.gep(given, [i64(4 + len(expected) + extra)], source_etype=I64), i64(4 * 8))
        memcpy(b, logical, strides, i64(4 * 8))
        return logical

    def _filters_gemm(self, ob: OpBuilder, geo: Geometry, w: Operand, g: ir.Value,
                      m: ir.Value, k: ir.Value, a: tuple[ir.Value, ir.Value],
                      first: ir.Value | None, c: tuple[ir.Value, ir.Value],
                      accumulate: ir.Value, end: Epilogue,
                      columns: tuple[ir.Value, ir.Value] | None = None) -> None:
        """Group g's panels (`panels_shape`: ceil(O/G / width) of them, from the g-th
        group's first; from the panel of `columns`' first) read in place."""
        b = ob.b
        depth = fold_mul(b, fold_mul(b, w.dims[0], w.dims[1]), w.dims[2])
        group_n = b.sdiv(w.dims[3], geo.groups)
        offset, n = _group_columns(b, geo, w.dims[3], i64(0), columns)
        width = panel_width(self.dtype)
        per_group = b.sdiv(b.add(group_n, i64(width - 1)), i64(width))
        panel = b.add(b.mul(g, per_group), b.sdiv(offset, i64(width)))
        panels = _at(b, w, w.pointer, b.mul(b.mul(panel, depth), i64(width)))
        b.call(packed_gemm_function(b.module, self.dtype),
               [m, n, k, *a, panels, depth, i64(0) if first is None else first, *c,
                accumulate, *end.arguments()])

    def _direct(self, ob: OpBuilder, geo: Geometry, o: ir.Value) -> ir.Value | None:
        return None

    def _tasks(self, ob: OpBuilder, geo: Geometry, sizes: tuple[ir.Value, ...],
               pointwise: ir.Value) -> None:
        """A conv the blocked loops take (`blocked.fits`) shares out their units, (block of
        output channels, image row); any other conv2d's tasks."""
        if not blocked.available(self.dtype):
            super()._tasks(ob, geo, sizes, pointwise)
            return
        b = ob.b
        image_rows, rows, depth, o = sizes
        fits = blocked.fits(b, ob.inputs[1].dims, geo.groups, geo.dilations[1], pointwise)
        with b.if_else(fits) as (loops, other):
            with loops:
                self._split(ob, b.mul(blocked.blocks(b, o), image_rows),
                            b.mul(b.mul(rows, depth), o), self._blocked, name="blocks",
                            guard=None)
            with other:
                super()._tasks(ob, geo, sizes, pointwise)

    def _blocked(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
                 memory: ir.Value) -> None:
        """Units [first, last) by the blocked loops."""
        b = ob.b
        geo = Geometry.read(ob)
        x, w, out = contiguous_operands(ob)
        code = blocked.BlockedLoops().call(
            b, (x.pointer, w.pointer, out.pointer),
            [*x.dims, w.dims[0], w.dims[1], w.dims[3], out.dims[1], out.dims[2]],
            [*geo.strides, geo.dilations[0], geo.padding[0][0], geo.padding[1][0]],
            (first, last), epilogue.read(ob, geo.relu))
        return_unless(b, b.icmp_signed("==", code, ir.Constant(I32, 0)), code)


class Conv2dFilterGradient(FilterGradientShape, Windowed):
    """``dw = im2col(x)^T @ g``: per chunk, the windows of the input copied in as the
    forward conv copies them and one gemm, the scratch transposed, by the block's cotangent
    rows into the chunk's filter rows (accumulating after a task's first block); grouped,
    per group its windows and its gemm, by its cotangent columns into its filter columns.
    The cotangent's image rows are split over the cores, each task after the first summing
    into filters of its own, added to the result at the end."""

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        out = ob.outputs[0]
        x, g = self._checked(ob, geo)
        kh, kw = geo.size
        image_rows = fold_mul(b, g.dims[0], g.dims[1])
        rows = fold_mul(b, image_rows, g.dims[2])
        size = out.size(b)
        bytes_ = b.mul(size, i64(self.dtype.itemsize))
        malloc = declare(b.module, "malloc", PTR, [I64])

        def merge(b: ir.IRBuilder, partial: ir.Value) -> None:
            mine = Operand(partial, [], [], self.dtype)

            def add(i: ir.Value) -> None:
                target = out.address(b, i)
                b.store(b.fadd(b.load(target, typ=out.element),
                               b.load(mine.address(b, i), typ=out.element)), target)

            range_loop(b, size, add, "merge")

        with b.if_then(b.not_(ob.eq(size, i64(0)))):
            with b.if_else(ob.eq(rows, i64(0))) as (no_terms, terms):
                with no_terms:
                    fill(b, out, fold_mul(b, fold_mul(b, kh, kw), out.dims[2]))
                with terms:
                    self._split(ob, image_rows, b.mul(rows, size), self._task,
                                lambda b, t: b.call(malloc, [bytes_]), merge)

    def _task(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        b = ob.b
        geo = Geometry.read(ob)
        x, g, out = contiguous_operands(ob)
        target = b.select(b.icmp_unsigned("==", memory, ir.Constant(PTR, None)),
                          out.pointer, memory)
        kh, kw = geo.size
        channels = b.sdiv(x.dims[3], geo.groups)
        blocks(ob, self.dtype, _group(b, x, channels, i64(0)), kh, kw, g, (first, last),
               lambda c: self._chunk(ob, geo, x, g, Operand(target, [], [], self.dtype),
                                     first, c), FILTER_GRADIENT_MIN_BLOCK_ROWS)

    def _chunk(self, ob: OpBuilder, geo: Geometry, x: Operand, g: Operand, out: Operand,
               start: ir.Value, c: Chunk) -> None:
        b = ob.b
        o = g.dims[3]
        n, channels = b.sdiv(o, geo.groups), b.sdiv(x.dims[3], geo.groups)
        beta = b.select(ob.eq(c.first, start), ir.Constant(self._real, 0.0),
                        ir.Constant(self._real, 1.0))
        rows = g.address(b, b.mul(b.mul(c.first, g.dims[2]), o))
        filters = out.address(b, c.filters)

        def group(k: ir.Value) -> None:
            windows(ob, geo, _group(b, x, channels, k), geo.size[1], g, c, accumulate=False)
            column = b.mul(k, n)
            self._gemm(ob, (True, False), c.depth, n, c.rows, (c.scratch, c.depth),
                       (_at(b, g, rows, column), o), beta, (_at(b, out, filters, column), o))

        range_loop(b, geo.groups, group, "group")


class Conv2dInputGradient(InputGradientShape, Windowed):
    """``dx = col2im(g @ w^T)``: per chunk one gemm of the block's cotangent rows by the
    chunk's filters transposed into scratch, whose rows are added into the result (zeroed
    first) where the windows read the input. Images are split over the cores (the windows
    of neighbouring rows of one image add into the same input rows); each task zeroes its
    own. At stride 1, where the direct loops' rule holds for C, the result's rows are
    split instead, each a direct conv of the cotangent (`_direct_rows`). A pointwise conv
    of one group (a 1x1 filter at stride 1 without padding: most of a ResNet-50's) is one
    gemm, ``g @ w^T`` straight into the result, its pixels split over the cores
    (`_pixels`): no scratch, no zeros, no windows added. Grouped, per chunk and group one
    gemm of its cotangent columns by its filter columns transposed, added into its
    channels of the result; never the direct loops."""

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        b = ob.b
        out = ob.outputs[0]
        g, w = self._checked(ob, geo)
        kh, kw, _, o = w.dims
        size = out.size(b)
        rows = fold_mul(b, fold_mul(b, g.dims[0], g.dims[1]), g.dims[2])
        depth = fold_mul(b, fold_mul(b, kh, kw), w.dims[2])
        macs = b.mul(b.mul(rows, depth), o)
        pointwise = self._pointwise(ob, geo)
        with b.if_then(b.not_(ob.eq(size, i64(0)))):
            with b.if_else(b.or_(ob.eq(rows, i64(0)), ob.eq(o, i64(0)))) as (no_terms, terms):
                with no_terms:
                    fill(b, out, fold_mul(b, fold_mul(b, out.dims[0], out.dims[1]),
                                          out.dims[2]))
                with terms, b.if_else(pointwise) as (one_gemm, windowed):
                    with one_gemm:
                        self._split(ob, rows, macs, self._pixels, name="pixels")
                    with windowed:
                        # The direct loops split the result's rows, col2im whole images.
                        direct = self._direct(ob, geo)
                        units = b.select(direct, fold_mul(b, out.dims[0], out.dims[1]),
                                         g.dims[0])
                        self._split(ob, units, macs, self._task, guard=blas_unless(direct))

    def _pointwise(self, ob: OpBuilder, geo: Geometry) -> ir.Value:
        """Whether the conv is pointwise (a 1x1 filter at stride 1 without padding) of one
        group: the result's pixels are then the cotangent's, times the filters
        transposed."""
        kh, kw = ob.inputs[1].dims[:2]
        return ob.all_of([ob.eq(v, i64(1)) for v in (kh, kw, *geo.strides, geo.groups)]
                         + [ob.eq(v, i64(0)) for pair in geo.padding for v in pair])

    def _pixels(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
                memory: ir.Value) -> None:
        """Pixels [first, last) of a pointwise conv's input gradient: their cotangent rows
        by the filters transposed, into their rows of the result."""
        b = ob.b
        g, w, out = contiguous_operands(ob)
        channels, o = w.dims[2], w.dims[3]
        self._gemm(ob, (False, True), b.sub(last, first), channels, o,
                   (g.address(b, b.mul(first, o)), o), (w.pointer, o),
                   ir.Constant(self._real, 0.0), (out.address(b, b.mul(first, channels)),
                                                  channels))

    def _direct(self, ob: OpBuilder, geo: Geometry) -> ir.Value:
        """Whether the direct loops serve: at stride 1 where their rule holds for C."""
        return ob.all_of([*[ob.eq(s, i64(1)) for s in geo.strides], ob.eq(geo.groups, i64(1)),
                          DirectLoops(self.dtype).fits(ob, geo, ob.inputs[1].dims[2])])

    def _task(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Result rows [first, last) by the direct loops (`_direct_rows`) where they serve,
        else images [first, last) zeroed (each task its own, in parallel) and their windows
        added in."""
        b = ob.b
        geo = Geometry.read(ob)
        g, w, out = contiguous_operands(ob)
        with b.if_else(self._direct(ob, geo)) as (direct, col2im):
            with direct:
                self._direct_rows(ob, geo, (first, last))
            with col2im:
                image = fold_mul(b, fold_mul(b, out.dims[1], out.dims[2]), out.dims[3])
                zero(b, out, b.mul(first, image), b.mul(b.sub(last, first), image))
                ho = g.dims[1]
                blocks(ob, self.dtype, _group(b, out, w.dims[2], i64(0)), w.dims[0],
                       w.dims[1], g, (b.mul(first, ho), b.mul(last, ho)),
                       lambda c: self._chunk(ob, geo, g, w, c))

    def _direct_rows(self, ob: OpBuilder, geo: Geometry,
                     rows: tuple[ir.Value, ir.Value]) -> None:
        """Result rows `rows` as the stride-1 conv of the cotangent by the filters flipped
        in both taps and their channels transposed (copied per task, code 4 without
        memory), padded by the filter's span less the conv's padding: (kh-1)*dh - top above,
        kw-1 - left to the left. The direct loops."""
        b = ob.b
        g, w, out = contiguous_operands(ob)
        kh, kw, c, o = w.dims
        count = fold_mul(b, fold_mul(b, fold_mul(b, kh, kw), c), o)
        malloc = declare(b.module, "malloc", PTR, [I64])
        memory = b.call(malloc, [larger(b, i64(1), b.mul(count, i64(self.dtype.itemsize)))])
        return_unless(b, b.icmp_unsigned("!=", memory, ir.Constant(PTR, None)),
                      ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1))
        flipped = Operand(memory, [kh, kw, o, c], contiguous_strides(b, [kh, kw, o, c]),
                          self.dtype)

        def element(index: list[ir.Value]) -> None:
            a, tap, k, channel = index
            source = w.offset(b, [b.sub(b.sub(kh, i64(1)), a), b.sub(b.sub(kw, i64(1)), tap),
                                  channel, k])
            b.store(b.load(w.address(b, source), typ=w.element),
                    flipped.address(b, flipped.offset(b, index)))

        nest(b, flipped.dims, element, "flip")
        (top, _), (left, _) = geo.padding
        pads = (b.sub(b.mul(b.sub(kh, i64(1)), geo.dilations[0]), top),
                b.sub(b.sub(kw, i64(1)), left))
        code = DirectLoops(self.dtype).call(ob, g, flipped, out,
                                            (*geo.strides, geo.dilations[0]), pads, rows,
                                            epilogue.NONE)
        b.call(declare(b.module, "free", ir.VoidType(), [PTR]), [memory])
        return_unless(b, b.icmp_signed("==", code, ir.Constant(I32, 0)), code)

    def _chunk(self, ob: OpBuilder, geo: Geometry, g: Operand, w: Operand, c: Chunk) -> None:
        b, out = ob.b, ob.outputs[0]
        o = w.dims[3]
        n = b.sdiv(o, geo.groups)
        rows = g.address(b, b.mul(b.mul(c.first, g.dims[2]), o))
        filters = w.address(b, c.filters)

        def group(k: ir.Value) -> None:
            column = b.mul(k, n)
            self._gemm(ob, (False, True), c.rows, c.depth, n, (_at(b, g, rows, column), o),
                       (_at(b, w, filters, column), o), ir.Constant(self._real, 0.0),
                       (c.scratch, c.depth))
            windows(ob, geo, _group(b, out, w.dims[2], k), w.dims[1], g, c, accumulate=True)

        range_loop(b, geo.groups, group, "group")


def _rule(spec: OpSpec, family: type[Windowed], bfloat16: type[Windowed],
          size: Pair = (0, 0)) -> Windowed | None:
    """The op's lowering: `family` for the gemm's dtypes, `bfloat16` for bfloat16 where the
    CPU has AVX-512 BF16 (`conv.bfloat16`), given the geometry as `Geometry` reads it
    (`size` its input or filter size); None where neither serves. bfloat16 serves one
    group only: grouped bfloat16 ops run their NumPy kernels."""
    dtype = spec.inputs[0].dtype
    groups = spec.params.get("feature_group_count", 1)
    if groups != 1 and dtype == dtypes.bfloat16:
        return None
    if dtype == dtypes.bfloat16:
        if not gemm_bf16.available(platform.current().features):
            return None
        family = bfloat16
    elif not gemm_lowerable(dtype):
        return None
    params = spec.params
    (top, bottom), (left, right) = params["padding"]
    return family((*params["strides"], top, bottom, left, right, *params["dilations"], *size,
                   groups, 0), dtype)


@lowering(conv2d_p, generic=True)
def _conv2d(spec: OpSpec) -> Windowed | None:
    return _rule(spec, Conv2d, Conv2dBfloat16)


@lowering(conv2d_prepacked_p, generic=True)
def _conv2d_prepacked(spec: OpSpec) -> Windowed | None:
    return _packed_or_fused(spec, packed=True)


@lowering(conv2d_fused_p, generic=True)
def _conv2d_fused(spec: OpSpec) -> Windowed | None:
    return _packed_or_fused(spec, packed=spec.params["packed"])


def _packed_or_fused(spec: OpSpec, packed: bool) -> Windowed | None:
    """conv2d_prepacked's lowering, or conv2d_fused's (that of its filters' layout, with
    its epilogue's operands and ReLU): a bfloat16 one's where `_rule` gives conv2d in
    bfloat16 its own code (HWIO filters, one group)."""
    dtype = spec.inputs[0].dtype
    params = spec.params
    (top, bottom), (left, right) = params["padding"]
    groups = params.get("feature_group_count", 1)
    fused = spec.primitive is conv2d_fused_p
    extras = tuple(epilogue_operands(params)) if fused else ()
    relu = int(fused and params["activation"] == relu_p.name)
    geometry = (*params["strides"], top, bottom, left, right, *params["dilations"], 0, 0,
                groups, relu)
    if dtype == dtypes.bfloat16 and not packed and _rule(spec, Conv2d, Conv2dBfloat16):
        return Conv2dBfloat16(geometry, dtype, extras)
    if dtype not in PACKED_DTYPES or not gemm_lowerable(dtype):
        return None
    if packed:
        return Conv2dPrepacked(geometry, dtype, extras, tuple(params["filter_shape"]), groups)
    return Conv2d(geometry, dtype, extras)


@lowering(conv2d_input_gradient_p, generic=True)
def _conv2d_input_gradient(spec: OpSpec) -> Windowed | None:
    return _rule(spec, Conv2dInputGradient, Conv2dInputGradientBfloat16,
                 tuple(spec.params["input_size"]))


@lowering(conv2d_filter_gradient_p, generic=True)
def _conv2d_filter_gradient(spec: OpSpec) -> Windowed | None:
    return _rule(spec, Conv2dFilterGradient, Conv2dFilterGradientBfloat16,
                 tuple(spec.params["filter_size"]))
