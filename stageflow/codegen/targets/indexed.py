"""GPU kernels driven by index maps and run-time indices: data movement and reductions on a
GPU's memory.

A fused kernel computes elementwise ops; moving elements (transpose, slice, broadcast,
reshape) and reducing them need no arithmetic of their own, only to know which input
element goes where. The host computes that once per signature as an *index map* (apply the
op's NumPy kernel to the flat indices of the operand, `stageflow.runtime.gpu`), the map
lives on the GPU (an op that keeps the operand's order needs none), and one of two kernels
does the work:

- ``gather_iN(in, map, out, n)``: ``out[i] = in[map[i]]`` for elements of N bits, any
  dtype (a move copies bits); a negative map entry names no element and writes zero bits
  (a zero of every dtype): the padding of a pad or of a convolution's windows;
- ``reduce_KIND_DTYPE(in, map, out, rows, width, parts)``: one pass of a tree reduction.
  Each of ``rows`` rows of ``width`` elements ``in[map[r * width + k]]`` is cut into
  ``parts`` interleaved slices, and work item ``i = r * parts + p`` folds its row's
  elements ``p, p + parts, p + 2 * parts, ...`` in order from the kind's identity into
  ``out[i]`` (loading `UNROLL` elements at a time, so that several loads of each thread
  are in flight): consecutive threads read consecutive elements of a row (coalesced loads),
  and the ``rows x parts`` partial results are the rows of the next pass. With
  ``parts == 1`` a pass leaves one value per row. ``reduce_flat_KIND_DTYPE(in, out, rows,
  width, parts)`` is the same pass without the map, reading ``in[r * width + k]``: every
  pass after the first, and a first pass whose map would be the identity (the reduced
  axes trailing). A negative map entry contributes the kind's identity (the padding of a
  pooling window never wins a max). Floats are summed in this interleaved order, not
  pairwise: a GPU's float sums differ from NumPy's by rounding.

A third kernel writes one array into another at an offset: ``put_iN(in, out, n, offset)``,
``out[offset + i] = in[i]`` (a concat's operands, one after another).

Two more read their indices from the GPU's memory, so that a lookup whose indices the GPU
computed (an embedding of the tokens a decoder chose, the row a loop's counter names) waits
for no copy to the host and stays inside a launch graph:

- ``take_iN_iK(in, indices, out, n, inner, count, size)``: a gather along an axis, ``in``
  seen as ``(outer, size, inner)`` and ``out`` as ``(outer, count, inner)``, ``count`` the
  K-bit indices: ``out[o, j, c] = in[o, indices[j], c]``, a negative index counting from
  the end; an index out of range writes zero bits, as TensorFlow's gather does on a GPU;
- ``put_at_iN_iK(in, index, out, n, rows)``: ``n`` elements written as row ``index[0]`` of
  ``out``, one of ``rows`` rows of ``n``; a negative index counts from the end and one out
  of range is clamped to the first or last row, as XLA's ``dynamic_update_slice`` does.

All of them take the grid-stride loop of the fused kernels (`ptx.GridDriver`), so any grid is
correct, and all are built for PTX and for the emulated launch from the same builder. The
threads of a launch never communicate (no shared memory, no barriers): a pass's partial
results meet in the next launch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I64, Emitter, storage_type
from stageflow.codegen.llvm.loops import counted_loop, fold_loop, i64, while_loop
from stageflow.codegen.llvm.reduce import combine, identity_of
from stageflow.codegen.targets.ptx import GridDriver
from stageflow.core.op_facts import ReductionKind

# Elements a reduction's work item loads before it folds them: a GPU thread does not run
# ahead of a load it waits on, so loading one element per step would leave a single load of
# each thread in flight. The folds stay in order (the loads only move ahead of them). On an
# H100 a large sum comes near torch.sum's bandwidth with 8, clearly short of it with 4.
UNROLL = 8


def map_entry(b: ir.IRBuilder, indices: ir.Value, i: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Map entry `i` as an element to load, and whether it names one: a negative entry
    (padding) loads element 0 instead, which the caller discards (every operand a map
    reads has an element: an empty one has no map)."""
    at = b.load(b.gep(indices, [i], source_etype=I64), typ=I64)
    named = b.icmp_signed(">=", at, i64(0))
    return b.select(named, at, i64(0)), named


Move = Callable[[ir.IRBuilder, ir.IntType, list[ir.Value], ir.Value], None]


def _copying_entry(bits: int, names: tuple[str, ...], pointers: int, move: Move):
    """The builder of a kernel ``void (ptr..., i64 n, i64...)`` named by `names` whose
    first `pointers` arguments are pointers, calling ``move(b, element, args, i)`` for
    each ``i`` below ``n`` on `bits`-bit elements."""
    element = ir.IntType(bits)

    def build(module: ir.Module, symbol: str, driver: GridDriver,
              address_space: int) -> ir.Function:
        pointer = ir.PointerType(addrspace=address_space)
        types = [pointer] * pointers + [I64] * (len(names) - pointers)
        entry = ir.Function(module, ir.FunctionType(ir.VoidType(), types), symbol)
        for arg, name in zip(entry.args, names, strict=True):
            arg.name = name
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        start, step = driver.grid(b)
        args = list(entry.args)
        counted_loop(b, start, args[pointers], step, lambda i: move(b, element, args, i), "i")
        b.ret_void()
        return entry

    return build


def _gather(b: ir.IRBuilder, element: ir.IntType, args: list[ir.Value], i: ir.Value) -> None:
    source, indices, out, _ = args
    at, named = map_entry(b, indices, i)
    value = b.load(b.gep(source, [at], source_etype=element), typ=element)
    b.store(b.select(named, value, ir.Constant(element, 0)), b.gep(out, [i], source_etype=element))


def _index(b: ir.IRBuilder, index: ir.IntType, indices: ir.Value, j: ir.Value,
           size: ir.Value) -> ir.Value:
    """Index `j` of `indices` as an i64, counted from the start of `size` positions."""
    at = b.load(b.gep(indices, [j], source_etype=index), typ=index)
    if index.width < 64:
        at = b.sext(at, I64)
    return b.select(b.icmp_signed("<", at, i64(0)), b.add(at, size), at)


def _take(index: ir.IntType, b: ir.IRBuilder, element: ir.IntType, args: list[ir.Value],
          i: ir.Value) -> None:
    source, indices, out, _, inner, count, size = args
    block = b.mul(count, inner)
    outer, rest = b.udiv(i, block), b.urem(i, block)
    j, column = b.udiv(rest, inner), b.urem(rest, inner)
    at = _index(b, index, indices, j, size)
    named = b.and_(b.icmp_signed(">=", at, i64(0)), b.icmp_signed("<", at, size))
    row = b.add(b.mul(outer, size), b.select(named, at, i64(0)))
    value = b.load(b.gep(source, [b.add(b.mul(row, inner), column)], source_etype=element),
                   typ=element)
    b.store(b.select(named, value, ir.Constant(element, 0)), b.gep(out, [i], source_etype=element))


def _put_at(index: ir.IntType, b: ir.IRBuilder, element: ir.IntType, args: list[ir.Value],
            i: ir.Value) -> None:
    source, where, out, n, rows = args
    row = _index(b, index, where, i64(0), rows)
    row = b.select(b.icmp_signed("<", row, i64(0)), i64(0), row)
    last = b.sub(rows, i64(1))
    row = b.select(b.icmp_signed(">", row, last), last, row)
    value = b.load(b.gep(source, [i], source_etype=element), typ=element)
    b.store(value, b.gep(out, [b.add(b.mul(row, n), i)], source_etype=element))


def _put(b: ir.IRBuilder, element: ir.IntType, args: list[ir.Value], i: ir.Value) -> None:
    source, out, _, offset = args
    value = b.load(b.gep(source, [i], source_etype=element), typ=element)
    b.store(value, b.gep(out, [b.add(offset, i)], source_etype=element))


def gather_entry(bits: int):
    """The builder of ``void gather(ptr in, ptr map, ptr out, i64 n)`` for `bits`-bit
    elements (see `EntryBuilder`)."""
    return _copying_entry(bits, ("in", "map", "out", "n"), 3, _gather)


def put_entry(bits: int):
    """The builder of ``void put(ptr in, ptr out, i64 n, i64 offset)`` for `bits`-bit
    elements: ``out[offset + i] = in[i]`` for i below n."""
    return _copying_entry(bits, ("in", "out", "n", "offset"), 2, _put)


def take_entry(bits: int, index_bits: int):
    """The builder of ``void take(ptr in, ptr indices, ptr out, i64 n, i64 inner, i64 count,
    i64 size)`` for `bits`-bit elements and `index_bits`-bit indices."""
    return _copying_entry(bits, ("in", "indices", "out", "n", "inner", "count", "size"), 3,
                          functools.partial(_take, ir.IntType(index_bits)))


def put_at_entry(bits: int, index_bits: int):
    """The builder of ``void put_at(ptr in, ptr index, ptr out, i64 n, i64 rows)`` for
    `bits`-bit elements and an `index_bits`-bit index."""
    return _copying_entry(bits, ("in", "index", "out", "n", "rows"), 3,
                          functools.partial(_put_at, ir.IntType(index_bits)))


@functools.cache
def reduce_name(kind: ReductionKind, dtype: np.dtype, mapped: bool) -> str:
    """The entry name of `reduce_entry`'s kernel (the two variants are two kernels; cached:
    a dtype's name costs microseconds, and every launch asks)."""
    return f"reduce_{'' if mapped else 'flat_'}{kind.name}_{dtype.name}"


def reduce_entry(kind: ReductionKind, dtype: np.dtype, mapped: bool):
    """The builder of one pass of a reduction of `kind` over `dtype` (one of the kind's
    native dtypes): ``void reduce(ptr in, ptr map, ptr out, i64 rows, i64 width, i64
    parts)`` reading its operand through the index map where `mapped`, else ``void
    reduce(ptr in, ptr out, i64 rows, i64 width, i64 parts)`` reading it in order."""
    ty = storage_type(dtype)
    pointers = ("in", "map", "out") if mapped else ("in", "out")

    def build(module: ir.Module, symbol: str, driver: GridDriver,
              address_space: int) -> ir.Function:
        pointer = ir.PointerType(addrspace=address_space)
        entry = ir.Function(module, ir.FunctionType(
            ir.VoidType(), [pointer] * len(pointers) + [I64] * 3), symbol)
        for arg, name in zip(entry.args, (*pointers, "rows", "width", "parts"), strict=True):
            arg.name = name
        source, *indices, out, rows, width, parts = entry.args
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        e = Emitter(b)
        start, step = driver.grid(b)
        identity = identity_of(kind, dtype)

        offsets = [b.mul(parts, i64(u)) for u in range(UNROLL + 1)]

        def item(i: ir.Value) -> None:
            row = b.udiv(i, parts)
            base = b.mul(row, width)

            def element(k: ir.Value) -> ir.Value:
                at = b.add(base, k)
                if not indices:
                    return e.load(b.gep(source, [at], source_etype=ty), dtype)
                at, named = map_entry(b, indices[0], at)
                value = e.load(b.gep(source, [at], source_etype=ty), dtype)
                return b.select(named, value, identity)

            def batch(state: list[ir.Value]) -> list[ir.Value]:
                k, acc = state
                for value in [element(b.add(k, offset)) for offset in offsets[:UNROLL]]:
                    acc = combine(e, kind, dtype, acc, value)
                return [b.add(k, offsets[UNROLL]), acc]

            def fold(k: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                return [combine(e, kind, dtype, acc[0], element(k))]

            # Whole batches while the batch's last element is in the row, then the rest.
            fits = b.sub(width, offsets[UNROLL - 1])
            k, acc = while_loop(b, [b.sub(i, b.mul(row, parts)), identity],
                                lambda state: b.icmp_signed("<", state[0], fits), batch,
                                "batch", index_name="k")
            total = fold_loop(b, k, width, parts, [acc], fold, "rest")[0]
            e.store(total, b.gep(out, [i], source_etype=ty), dtype)

        counted_loop(b, start, b.mul(rows, parts), step, item, "i")
        b.ret_void()
        return entry

    return build
