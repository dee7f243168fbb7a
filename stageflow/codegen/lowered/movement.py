"""Lowerings of the data-movement ops: transpose, broadcast_to, slice, concat, pad, gather,
gather_nd, the nd scatters, iota.

Most are one *strided copy*: the output, walked in row-major order, reads the input at a
base offset plus its own strides per output axis. A transpose permutes the input's strides,
a broadcast sets them to 0 on replicated axes, a slice starts at its first element and
multiplies them by the steps; the input may itself be any strided view, so no copy is made
before the one that writes the result. Elements are moved as their storage type, so every
dtype is supported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm import complex_math
from stageflow.codegen.llvm.dim_arith import LLVMDims
from stageflow.codegen.llvm.emitter import F16, F32, F64, I1, I64, Emitter, storage_type
from stageflow.codegen.llvm.loops import counted_loop, fold_add, fold_mul, fold_product, i64
from stageflow.codegen.lowered.rule import (
    OpBuilder,
    Operand,
    OpSpec,
    is_row_major,
    lowering,
    nest,
    smaller,
)
from stageflow.codegen.lowered.tasks import run_tasks, task_count
from stageflow.codegen.targets.cpu import SMALL_KERNEL_ELEMENTS
from stageflow.core.shapes import normalize_axis
from stageflow.primitives.nd_indexing import gather_nd_p, scatter_nd_add_p, scatter_nd_update_p
from stageflow.primitives.structural import (
    broadcast_to_p,
    concat_p,
    dim_size_p,
    gather_p,
    iota_p,
    pad_p,
    slice_indices,
    slice_p,
    transpose_p,
    update_index_p,
)

TRANSPOSE_TILE = 8  # elements along each side of a transpose's tile
RUN_VECTOR_BYTES = 64  # bytes a contiguous run moves per load and store (`_run`)
# A concat's task moves at least this many elements: several times what handing it to a
# watching worker of the pool costs.
MIN_TASK_ELEMENTS = 1 << 15


def offset(b: ir.IRBuilder, indices: Sequence[ir.Value], strides: Sequence[ir.Value],
           base: ir.Value) -> ir.Value:
    total = base
    for index, stride in zip(indices, strides, strict=True):
        total = fold_add(b, total, fold_mul(b, index, stride))
    return total


def copy(b: ir.IRBuilder, dims: Sequence[ir.Value], source: Operand, source_base: ir.Value,
         source_strides: Sequence[ir.Value], target: Operand, target_base: ir.Value,
         target_strides: Sequence[ir.Value]) -> None:
    """``target[base + i.t] = source[base + i.s]`` for every multi-index i over `dims`."""

    def body(indices: list[ir.Value]) -> None:
        at = offset(b, indices, source_strides, source_base)
        value = b.load(source.address(b, at), typ=source.element)
        b.store(value, target.address(b, offset(b, indices, target_strides, target_base)))

    nest(b, dims, body)


def copy_to_output(ob: OpBuilder, base: ir.Value, strides: Sequence[ir.Value]) -> None:
    """Output 0, contiguous, from input 0 read at `base` + its index times `strides`."""
    out = ob.outputs[0]
    copy(ob.b, out.dims, ob.inputs[0], base, strides, out, i64(0), out.strides)


@dataclass(frozen=True)
class Transpose:
    """A transpose: the strided copy, split over the cores by the output's axes other than
    its last and the one that reads the input's last (`_Across`), each task's part in
    square tiles (`TRANSPOSE_TILE`) of those two where both are at least a tile long.
    Walked row by row, each element of an output row came from another cache line of the
    input (a BERT head's key, transposed for its scores), read again for the next row once
    the row had pushed it out. In tiles, a tile's lines of the input stay in L1 while its
    rows are written. A transpose that keeps the last axis splits by its other axes."""

    perm: tuple[int, ...]

    def emit(self, ob: OpBuilder) -> None:
        x, out = ob.inputs[0], ob.outputs[0]
        ob.expect_output(0, [x.dims[p] for p in self.perm])
        b = ob.b
        outer = self._outer()
        units = fold_product(b, [out.dims[axis] for axis in outer])
        run_tasks(ob, "part", units, task_count(b, units, out.size(b), MIN_TASK_ELEMENTS),
                  self._part)

    def _keeps_last(self) -> bool:
        rank = len(self.perm)
        return rank < 2 or self.perm[-1] == rank - 1

    def _outer(self) -> list[int]:
        """The output axes the tasks share out: all but the last where it stays last, else
        all but the last and the one along the input's rows."""
        rank = len(self.perm)
        if self._keeps_last():
            return list(range(rank - 1))
        across = self.perm.index(rank - 1)
        return [axis for axis in range(rank) if axis not in (across, rank - 1)]

    def _part(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Units [first, last) of the outer axes (row-major), each its block of the rest."""
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        outer = self._outer()
        strides = [x.strides[p] for p in self.perm]
        rank = len(self.perm)

        def unit(u: ir.Value) -> None:
            at: dict[int, ir.Value] = {}
            for axis in reversed(outer):
                at[axis] = b.srem(u, out.dims[axis])
                u = b.sdiv(u, out.dims[axis])
            if self._keeps_last():
                self._elements(ob, at, strides, list(range(rank))[-1:])
            else:
                self._block(ob, at, strides)

        counted_loop(b, first, last, i64(1), unit, "unit")

    def _block(self, ob: OpBuilder, at: dict[int, ir.Value], strides: list[ir.Value]) -> None:
        """The (across, last) block at the outer indices `at`: in tiles where both sides
        span a tile; else (a channel shuffle's few groups, an image's 3 channels: a block
        in L1 already) row by row."""
        b, out = ob.b, ob.outputs[0]
        rank = len(self.perm)
        across, last = self.perm.index(rank - 1), rank - 1

        def tile(first: ir.Value, start: ir.Value) -> None:
            stop = smaller(b, b.add(first, i64(TRANSPOSE_TILE)), out.dims[across])
            end = smaller(b, b.add(start, i64(TRANSPOSE_TILE)), out.dims[last])
            self._elements(ob, at, strides, [across, last], ((first, stop), (start, end)))

        wide = ob.all_of([b.icmp_signed(">=", out.dims[axis], i64(TRANSPOSE_TILE))
                          for axis in (across, last)])
        with b.if_else(wide) as (tiled, narrow):
            with tiled:
                counted_loop(b, i64(0), out.dims[across], i64(TRANSPOSE_TILE), lambda first:
                             counted_loop(b, i64(0), out.dims[last], i64(TRANSPOSE_TILE),
                                          lambda start: tile(first, start), "tile_column"),
                             "tile_row")
            with narrow:
                self._elements(ob, at, strides, [across, last])

    def _elements(self, ob: OpBuilder, at: dict[int, ir.Value], strides: list[ir.Value],
                  inner: list[int],
                  ranges: tuple[tuple[ir.Value, ir.Value], ...] | None = None) -> None:
        """The strided copy over the `inner` axes (each over `ranges`, or whole), the other
        axes at `at`."""
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        if ranges is None:
            ranges = tuple((i64(0), out.dims[axis]) for axis in inner)
            dims = [out.dims[axis] for axis in inner]
        else:
            dims = [b.sub(stop, first) for first, stop in ranges]
        corner = {**at, **{axis: first for axis, (first, _) in zip(inner, ranges, strict=True)}}
        where = [corner[axis] for axis in range(len(self.perm))]
        copy(b, dims, x,
             offset(b, where, strides, i64(0)), [strides[axis] for axis in inner], out,
             offset(b, where, out.strides, i64(0)), [out.strides[axis] for axis in inner])


@lowering(transpose_p)
def _transpose(spec: OpSpec) -> Transpose:
    return Transpose(tuple(spec.params["perm"]))


@dataclass(frozen=True)
class BroadcastTo:
    shape: tuple[int, ...]

    def emit(self, ob: OpBuilder) -> None:
        b, x = ob.b, ob.inputs[0]
        lead = len(self.shape) - len(x.dims)
        strides: list[ir.Value] = [i64(0)] * lead
        fits = []
        for axis, (d, s) in enumerate(zip(x.dims, x.strides, strict=True)):
            want = i64(self.shape[lead + axis])
            fits.append(b.or_(ob.eq(d, i64(1)), ob.eq(d, want)))
            strides.append(s if self.shape[lead + axis] == 1
                           else b.select(ob.eq(d, i64(1)), i64(0), s))
        ob.fail_unless(ob.all_of(fits), 0)
        ob.expect_output(0, [i64(d) for d in self.shape])
        copy_to_output(ob, i64(0), strides)


@lowering(broadcast_to_p)
def _broadcast_to(spec: OpSpec) -> BroadcastTo | None:
    shape = spec.params["shape"]
    if any(d is None for d in shape):
        return None
    return BroadcastTo(tuple(shape))


@dataclass(frozen=True)
class Slice:
    slices: tuple[tuple[int | None, int | None, int | None], ...]

    def emit(self, ob: OpBuilder) -> None:
        b, x = ob.b, ob.inputs[0]
        base: ir.Value = i64(0)
        dims, strides = [], []
        for d, s, (start, stop, step) in zip(x.dims, x.strides, self.slices, strict=True):
            first, length = slice_indices(LLVMDims(b), d, start, stop, step)
            base = fold_add(b, base, fold_mul(b, first, s))
            dims.append(length)
            strides.append(fold_mul(b, s, i64(1 if step is None else step)))
        ob.expect_output(0, dims)
        copy_to_output(ob, base, strides)


@lowering(slice_p)
def _slice(spec: OpSpec) -> Slice:
    return Slice(tuple(tuple(s) for s in spec.params["slices"]))


@dataclass(frozen=True)
class Concat:
    """A concat: where every input is row-major (as a program's always are), the output's
    rows before the axis split over the cores, each row a run of each input in turn, moved
    as vectors (`_run`); else each input by the strided copy. A concat of two NHWC
    images along their channels left the second core idle."""

    axis: int

    def emit(self, ob: OpBuilder) -> None:
        b, out = ob.b, ob.outputs[0]
        total: ir.Value = i64(0)
        for index, x in enumerate(ob.inputs):
            ob.fail_unless(ob.all_of([ob.eq(d, o) for a, (d, o) in
                                      enumerate(zip(x.dims, out.dims, strict=True))
                                      if a != self.axis]), index)
            total = fold_add(b, total, x.dims[self.axis])
        ob.expect_output(0, [total if a == self.axis else d for a, d in enumerate(out.dims)])
        rows = fold_product(b, out.dims[:self.axis])
        with b.if_else(ob.all_of([is_row_major(ob, x) for x in ob.inputs])) as (runs, strided):
            with runs:
                run_tasks(ob, "rows", rows, task_count(b, rows, out.size(b),
                                                       MIN_TASK_ELEMENTS), self._rows)
            with strided:
                start: ir.Value = i64(0)
                for x in ob.inputs:
                    copy(b, x.dims, x, i64(0), x.strides, out,
                         fold_mul(b, start, out.strides[self.axis]), out.strides)
                    start = fold_add(b, start, x.dims[self.axis])

    def _rows(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Rows [first, last) of the output (its index over the axes before the concat's):
        per row, each input's run of the elements from the axis on, one after another."""
        b, out = ob.b, ob.outputs[0]
        width = fold_product(b, out.dims[self.axis:])

        def row(r: ir.Value) -> None:
            start: ir.Value = b.mul(r, width)
            for x in ob.inputs:
                run = fold_product(b, x.dims[self.axis:])
                _run(b, x, b.mul(r, run), out, start, run)
                start = b.add(start, run)

        counted_loop(b, first, last, i64(1), row, "row")


def _run(b: ir.IRBuilder, source: Operand, at: ir.Value, target: Operand, to: ir.Value,
         count: ir.Value) -> None:
    """``target[to + k] = source[at + k]`` for k < count: whole vectors of
    `RUN_VECTOR_BYTES` as bytes (any dtype's storage), then the elements left one by
    one."""
    lanes = RUN_VECTOR_BYTES // source.dtype.itemsize
    vector = ir.VectorType(ir.IntType(8), RUN_VECTOR_BYTES)
    whole = b.mul(b.sdiv(count, i64(lanes)), i64(lanes))

    def chunk(k: ir.Value) -> None:
        value = b.load(source.address(b, b.add(at, k)), typ=vector, align=1)
        b.store(value, target.address(b, b.add(to, k)), align=1)

    def element(k: ir.Value) -> None:
        value = b.load(source.address(b, b.add(at, k)), typ=source.element)
        b.store(value, target.address(b, b.add(to, k)))

    counted_loop(b, i64(0), whole, i64(lanes), chunk, "run")
    counted_loop(b, whole, count, i64(1), element, "run.rest")


@lowering(concat_p, generic_from=SMALL_KERNEL_ELEMENTS)
def _concat(spec: OpSpec) -> Concat:
    return Concat(spec.params["axis"] % spec.inputs[0].ndim)


def stored_constant(value: float | int, dtype: np.dtype) -> ir.Constant:
    """`value` converted as NumPy converts it to `dtype`, as that dtype's storage constant."""
    converted = np.asarray(value).astype(dtype)
    ty = storage_type(dtype)
    if dtype.kind == "c":
        return Emitter.const(ty, complex(converted))
    if ty in (F16, F32, F64):
        return ir.Constant(ty, float(converted))
    bits = converted.reshape(1).view(f"u{dtype.itemsize}")[0]
    return ir.Constant(ty, int(bits))


@dataclass(frozen=True)
class Pad:
    pads: tuple[tuple[int, int], ...]
    value: ir.Constant

    def emit(self, ob: OpBuilder) -> None:
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        ob.expect_output(0, [fold_add(b, d, i64(lo + hi))
                             for d, (lo, hi) in zip(x.dims, self.pads, strict=True)])
        nest(b, [out.size(b)], lambda i: b.store(self.value, out.address(b, i[0])), "fill")
        base: ir.Value = i64(0)
        for (lo, _), stride in zip(self.pads, out.strides, strict=True):
            base = fold_add(b, base, fold_mul(b, i64(lo), stride))
        copy(b, x.dims, x, i64(0), x.strides, out, base, out.strides)


@lowering(pad_p)
def _pad(spec: OpSpec) -> Pad:
    return Pad(tuple(tuple(p) for p in spec.params["pads"]),
               stored_constant(spec.params.get("value", 0.0), spec.outputs[0].dtype))


@dataclass(frozen=True)
class Gather:
    axis: int

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        params, indices = ob.inputs
        out = ob.outputs[0]
        axis, rank = self.axis, len(indices.dims)
        n = params.dims[axis]
        ob.expect_output(0, params.dims[:axis] + indices.dims + params.dims[axis + 1:])

        def body(at: list[ir.Value]) -> None:
            raw = b.load(indices.address(b, indices.offset(b, at[axis:axis + rank])),
                         typ=indices.element)
            index = b.sext(raw, I64) if raw.type != I64 else raw
            index = b.select(b.icmp_signed("<", index, i64(0)), b.add(index, n), index)
            in_range = b.and_(b.icmp_signed(">=", index, i64(0)),
                              b.icmp_signed("<", index, n))
            ob.fail_unless(in_range, 1)
            where = params.offset(b, at[:axis] + [index] + at[axis + rank:])
            value = b.load(params.address(b, where), typ=params.element)
            b.store(value, out.address(b, out.offset(b, at)))

        nest(b, out.dims, body)


@lowering(gather_p)
def _gather(spec: OpSpec) -> Gather:
    return Gather(spec.params["axis"] % spec.inputs[0].ndim)


@dataclass(frozen=True)
class Iota:
    dimension: int
    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, out = ob.b, ob.outputs[0]
        ty = storage_type(self.dtype)

        def body(at: list[ir.Value]) -> None:
            index = at[self.dimension]
            if self.dtype.kind == "c":  # index + 0i
                part = ty.elements[0]
                value = complex_math.pack(Emitter(b), b.sitofp(index, part),
                                          ir.Constant(part, 0.0))
            elif ty in (F32, F64):
                value = b.sitofp(index, ty)
            elif ty != I64:
                value = b.trunc(index, ty)
            else:
                value = index
            b.store(value, out.address(b, out.offset(b, at)))

        nest(b, out.dims, body)


@lowering(iota_p)
def _iota(spec: OpSpec) -> Iota | None:
    dtype = spec.outputs[0].dtype
    if storage_type(dtype) in (F16, I1) or dtype.kind not in "iufc" or dtype.itemsize < 4:
        return None
    return Iota(spec.params["dimension"], dtype)


@dataclass(frozen=True)
class DimSize:
    """`dim_size`: one dim of the operand, known from the call's dims, stored as the 0-d
    int64 result; the operand's elements are never read."""

    axis: int

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        b.store(ob.inputs[0].dims[self.axis], ob.outputs[0].address(b, i64(0)))


@lowering(dim_size_p)
def _dimfold_product(spec: OpSpec) -> DimSize:
    return DimSize(normalize_axis(spec.params["axis"], spec.inputs[0].ndim))


@dataclass(frozen=True)
class UpdateIndex:
    """`update_index`: the operand copied into the result (not when they are the same
    memory: a loop updating its carried buffer in place), then the update into row
    `index` (negative from the end; out of range fails)."""

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        x, update, index = ob.inputs
        out = ob.outputs[0]
        ob.expect_output(0, x.dims)
        ob.fail_unless(ob.all_of([ob.eq(u, d) for u, d in zip(update.dims, x.dims[1:],
                                                               strict=True)]), 1)
        raw = b.load(index.pointer, typ=index.element)
        position = b.sext(raw, I64) if raw.type != I64 else raw
        n = x.dims[0]
        position = b.select(b.icmp_signed("<", position, i64(0)), b.add(position, n), position)
        ob.fail_unless(b.and_(b.icmp_signed(">=", position, i64(0)),
                              b.icmp_signed("<", position, n)), 2)
        with b.if_then(b.icmp_unsigned("!=", x.pointer, out.pointer)):
            copy(b, x.dims, x, i64(0), x.strides, out, i64(0), out.strides)
        base = fold_mul(b, position, out.strides[0])
        copy(b, update.dims, update, i64(0), update.strides, out, base, out.strides[1:])


@lowering(update_index_p)
def _update_index(spec: OpSpec) -> UpdateIndex | None:
    if storage_type(spec.outputs[0].dtype) in (I1,):
        return None
    return UpdateIndex()


def _tuple_base(ob: OpBuilder, tensor: Operand, indices: Operand, at: list[ir.Value],
                width: int, argument: int) -> ir.Value:
    """The offset in `tensor` of the slice the index tuple at `at` selects (negative
    indices from the end; out of range fails, naming the indices)."""
    b = ob.b
    base: ir.Value = i64(0)
    for k in range(width):
        where = indices.offset(b, [*at, i64(k)])
        raw = b.load(indices.address(b, where), typ=indices.element)
        index = b.sext(raw, I64) if raw.type != I64 else raw
        size = tensor.dims[k]
        index = b.select(b.icmp_signed("<", index, i64(0)), b.add(index, size), index)
        ob.fail_unless(b.and_(b.icmp_signed(">=", index, i64(0)),
                              b.icmp_signed("<", index, size)), argument)
        base = fold_add(b, base, fold_mul(b, index, tensor.strides[k]))
    return base


@dataclass(frozen=True)
class GatherNd:
    width: int

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        params, indices = ob.inputs
        out = ob.outputs[0]
        positions = indices.dims[:-1]
        inner = params.dims[self.width:]
        ob.expect_output(0, [*positions, *inner])

        def body(at: list[ir.Value]) -> None:
            base = _tuple_base(ob, params, indices, at, self.width, 1)
            target = out.offset(b, [*at, *[i64(0)] * len(inner)])
            copy(b, inner, params, base, params.strides[self.width:], out, target,
                 out.strides[len(positions):])

        nest(b, positions, body, "tuple")


@dataclass(frozen=True)
class ScatterNd:
    width: int
    add: bool
    kind: str  # the dtype's kind, which says how `add` adds: 'f', 'c', 'i' or 'u'

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        tensor, indices, updates = ob.inputs
        out = ob.outputs[0]
        ob.expect_output(0, tensor.dims)
        positions = indices.dims[:-1]
        inner = tensor.dims[self.width:]
        ob.fail_unless(ob.all_of([ob.eq(u, d) for u, d in zip(
            updates.dims, [*positions, *inner], strict=True)]), 2)
        with b.if_then(b.icmp_unsigned("!=", tensor.pointer, out.pointer)):
            copy(b, tensor.dims, tensor, i64(0), tensor.strides, out, i64(0), out.strides)

        def body(at: list[ir.Value]) -> None:
            base = _tuple_base(ob, out, indices, at, self.width, 1)
            source = updates.offset(b, [*at, *[i64(0)] * len(inner)])

            def element(j: list[ir.Value]) -> None:
                at_update = fold_add(b, source, _dot(b, j, updates.strides[len(positions):]))
                value = b.load(updates.address(b, at_update), typ=updates.element)
                target = out.address(b, fold_add(b, base, _dot(b, j, out.strides[self.width:])))
                if self.add:
                    value = self._sum(b, b.load(target, typ=out.element), value)
                b.store(value, target)

            nest(b, inner, element, "slice")

        nest(b, positions, body, "tuple")

    def _sum(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        if self.kind == "c":
            return complex_math.add(Emitter(b), x, y)
        return b.fadd(x, y) if self.kind == "f" else b.add(x, y)


def _dot(b: ir.IRBuilder, indices: Sequence[ir.Value], strides: Sequence[ir.Value]) -> ir.Value:
    total: ir.Value = i64(0)
    for index, stride in zip(indices, strides, strict=True):
        total = fold_add(b, total, fold_mul(b, index, stride))
    return total


@lowering(gather_nd_p)
def _gather_nd(spec: OpSpec) -> GatherNd:
    return GatherNd(spec.params["width"])


@lowering(scatter_nd_add_p, scatter_nd_update_p)
def _scatter_nd(spec: OpSpec) -> ScatterNd | None:
    dtype = spec.outputs[0].dtype
    if storage_type(dtype) in (F16, I1) or (dtype.kind not in "iufc"):
        return None
    return ScatterNd(spec.params["width"], spec.primitive is scatter_nd_add_p, dtype.kind)
