"""bfloat16 matrix products on AVX-512 BF16: ``C = alpha * A @ B (+ C)`` with bfloat16
operands and result, every sum kept in float32 over the whole of k and rounded once.

Why a kernel of our own: the OpenBLAS that NumPy bundles is built without its bfloat16
gemm, and NumPy multiplies ml_dtypes' bfloat16 by converting both operands to float32
first, so a bfloat16 matmul ran at float32's speed or below. ``vdpbf16ps`` multiplies 32
pairs of bfloat16 and adds them into 16 float32 sums in one instruction: twice the work of
a float32 fma per instruction, on half the bytes. PyTorch's bfloat16 matmul (oneDNN) uses
the same instruction where the CPU has no AMX tiles.

The micro-kernel: a tile of `ROWS` rows by two vectors (32 columns) keeps its 24 sums in
registers for all of k. Per pair of k, the tile loads its panel of B (32 columns, the two k
of each interleaved: the order ``vdpbf16ps`` wants) as two vectors, broadcasts one 32-bit
pair of A per row, and issues two ``vdpbf16ps`` per row. A's pairs are read where they lie
when A's rows are contiguous along k (its common layout: no copy); otherwise A is first
copied into pairs (`pack`) once per product. B's panels are packed by the task that uses
them, each exactly once. Odd k: the last pair is (element, 0) in both operands.

A product may end in an epilogue (`fused_gemm_function`: per-column scales and shifts in
float32, a residual, a ReLU, rounded where the unfused ops round), applied to each tile
as it is stored: a fused bfloat16 convolution's, whose result is then written once.

Work is split over the cores by panels of columns (`codegen.lowered.worker_pool`), each
task packing its panels into memory of its own; a tile of fewer rows or columns than
whole reads clamped rows and zero-padded columns and stores only its own elements.

Products of few rows (a decoder's step: a matrix-vector product) are a pass over B at the
memory's speed, where packing would read and write B once more than the arithmetic needs:
one tile of rows reads a row-major B in place, interleaving its pairs of rows in registers,
and up to `DOT_TILES[-1]` rows against a B whose columns are contiguous along k (``x @ w.T``:
a decoder's linear layers in PyTorch's layout, a tied embedding's logits) take dot
products along k instead, column after column (`dots_function`: such weights are then
read as one stream), 16 partial sums per result added at the end.

Numerics: products of bfloat16 are exact in float32; ``vdpbf16ps`` adds them in pairs with
denormal inputs and results taken as zero, then ``vcvtneps2bf16`` rounds to nearest even
(NaN stays NaN). The result differs from NumPy's (which rounds the float32 product of the
upcast operands) by the float32 summation order, within bfloat16's rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import llvmlite.binding as llvm
from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, I1, I8, I16, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.lanes import (
    lanes_below,
    nearest_bfloat16,
    transpose_square,
    widened_bfloat16,
)
from stageflow.codegen.llvm.loops import counted_loop, fold_loop, i64, values_where
from stageflow.codegen.lowered.tasks import MAX_TASKS, affinity_count, cpu_count
from stageflow.codegen.lowered.worker_pool import pool_run

ROWS = 12  # rows of a tile: 24 sums, 2 vectors of B and a broadcast fit the 32 registers
LANES = 16  # float32 sums per vector
PANEL = 2 * LANES  # columns of a panel
# Panels packed together: each tile of A's rows passes over all of them while it is in L1
# (A is read from memory once per group, not once per panel); their bytes stay in L2.
GROUP = 4
# Pairs of k per chunk: a panel of them (64 KB) stays in L2 beside A's tile rows. Over a
# longer k, each tile's sums pass through a float32 block of the task's own between chunks
# (rounded to bfloat16 once, after the last), so a panel is never streamed from memory.
DEPTH = 512
# Dot products of up to this many rows of A with B's columns read along k, one column
# after another (a tile of 1, 2, 4 or 8 rows: the fewest that hold A's), where packing would
# copy B once more: each column is read from memory once, A's rows from the cache.
DOT_TILES = (1, 2, 4, 8)
# Only a product of at least this many multiply-adds per task is split: below it a task's
# work is shorter than waking the pool's workers.
TASK_MACS = 1 << 21
# Nor one reading fewer bytes of B than this per task: a product of few rows is a pass
# over B, at the memory's speed, where each core's share of the bandwidth counts.
TASK_BYTES = 1 << 18
FEATURE = "+avx512bf16"
PTR = ir.PointerType()
_NO_MEMORY = 1


class _BFloat(ir.Type):
    """LLVM's ``bfloat``, which llvmlite's IR builder does not name: the type of the
    intrinsics' operands (bit patterns come in as i16 or i32 vectors and are bitcast)."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


_BF16 = _BFloat()
_SUMS = ir.VectorType(F32, LANES)
_PAIRS = ir.VectorType(_BF16, 2 * LANES)  # one vector of B, or a broadcast pair of A
_WORDS = ir.VectorType(I32, LANES)
_HALVES = ir.VectorType(I16, LANES)
_MASK = ir.VectorType(I1, LANES)


@cache
def available(features: str) -> bool:
    """Whether a target of these LLVM features (``+avx512bf16,...``) has the instructions."""
    return FEATURE in features.split(",")


def host_available() -> bool:
    """Whether this process's CPU has AVX-512 BF16."""
    return available(llvm.get_host_cpu_features().flatten())


def gemm_function(module: ir.Module) -> ir.Function:
    """``i32 sf.gemm.bf16(i64 m, i64 n, i64 k, ptr a, i64 a_row, i64 a_col, ptr b,
    i64 b_row, i64 b_col, ptr c, i64 ldc, float alpha, i1 accumulate)``: C[m, n] (row
    stride `ldc`) = alpha * A[m, k] @ B[k, n], plus C's own values where `accumulate`;
    strides in elements, any sign-free layout. 0, or 1 where memory for packing was not
    to be had (C may then be partly written: the caller runs another kernel). Internal,
    one per module."""
    fused = fused_gemm_function(module)
    return declare_gemm(module, "sf.gemm.bf16", lambda b, args: b.ret(
        b.call(fused, [*args, ir.Constant(PTR, None)])))


# A product's epilogue (`fused_gemm_function`'s `epilogue`): one i64 per field, in this
# order. The per-column ones point at float32s for C's first column, the residual at
# bfloat16s laid out as C (rows `ldc` apart) for C's first element, each null where there
# is none; `rectify` (the ReLU) is 0 or 1.
EPILOGUE = ("scale", "shift", "second_scale", "second_shift", "residual", "rectify")


def fused_gemm_function(module: ir.Module) -> ir.Function:
    """``i32 sf.gemm.bf16.fused(..., ptr epilogue)``: `gemm_function`'s product with an
    epilogue applied to each result where it is stored (null: none), as a fused
    convolution's unfused ops would compute it: the product rounded to bfloat16 (as
    `gemm_function` stores it), widened, ``* scale + shift``, ``* second_scale +
    second_shift`` in float32, rounded; ``+ residual`` in float32, rounded; the ReLU
    (`epilogue_function`)."""
    symbol = "sf.gemm.bf16.fused"
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    types = [I64, I64, I64, PTR, I64, I64, PTR, I64, I64, PTR, I64, F32, I1, PTR]
    function = ir.Function(module, ir.FunctionType(I32, types), symbol)
    function.linkage = "internal"
    names = ("m", "n", "k", "a", "a_row", "a_col", "b", "b_row", "b_col", "c", "ldc",
             "alpha", "accumulate", "epilogue")
    for argument, name in zip(function.args, names, strict=True):
        argument.name = name
    _emit_gemm(ir.IRBuilder(function.append_basic_block("entry")), function.args)
    return function


def declare_gemm(module: ir.Module, symbol: str,
                 emit: Callable[[ir.IRBuilder, list[ir.Value]], None]) -> ir.Function:
    """The internal function `symbol` of `gemm_function`'s signature, its body written by
    `emit` (given the entry block's builder and the arguments) the first time a module
    asks for it."""
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    types = [I64, I64, I64, PTR, I64, I64, PTR, I64, I64, PTR, I64, F32, I1]
    function = ir.Function(module, ir.FunctionType(I32, types), symbol)
    function.linkage = "internal"
    names = ("m", "n", "k", "a", "a_row", "a_col", "b", "b_row", "b_col", "c", "ldc",
             "alpha", "accumulate")
    for argument, name in zip(function.args, names, strict=True):
        argument.name = name
    emit(ir.IRBuilder(function.append_basic_block("entry")), function.args)
    return function


# A task's record: the product (A as the tile kernel reads it), its range of panels and
# its status, one i64 per field (pointers, the float and the flags as integers).
_RECORD = ("m", "n", "k", "a", "a_step", "packed", "b", "b_row", "b_col", "c", "ldc",
           "alpha", "accumulate", "epilogue", "first", "last", "status")


def _field(b: ir.IRBuilder, record: ir.Value, name: str) -> ir.Value:
    return b.gep(record, [i64(_RECORD.index(name))], source_etype=I64)


def _emit_gemm(b: ir.IRBuilder, args: list[ir.Value]) -> None:
    """Pack A if its pairs are not contiguous, fill one record per task, run the tasks on
    the pool (or one after another here where it is busy), free, return the status."""
    m, n, k, a, a_row, a_col, b_, b_row, b_col, c, ldc, alpha, accumulate, epilogue = args
    module = b.module
    malloc = declare(module, "malloc", PTR, [I64])
    free = declare(module, "free", ir.VoidType(), [PTR])
    records = entry_alloca(b, I64, MAX_TASKS * len(_RECORD), "records")
    pairs = b.udiv(b.add(k, i64(1)), i64(2))
    direct = b.icmp_signed("==", a_col, i64(1))
    width = _round_up(b, _round_up(b, m, ROWS), LANES)

    def pack_a() -> list[ir.Value]:
        memory = b.call(malloc, [b.mul(b.mul(width, pairs), i64(4))])
        with b.if_then(b.icmp_unsigned("==", memory, ir.Constant(PTR, None))):
            b.ret(ir.Constant(I32, _NO_MEMORY))
        b.call(pack_function(module), [a, a_col, a_row, k, m, width, memory])
        return [memory]

    packed = values_where(b, b.not_(direct), [ir.Constant(PTR, None)], pack_a)[0]
    a_at = b.select(direct, a, packed)
    a_step = b.select(direct, b.mul(a_row, i64(2)), b.mul(width, i64(4)))
    panels = b.udiv(b.add(n, i64(PANEL - 1)), i64(PANEL))
    work = b.udiv(b.mul(b.mul(m, n), k), i64(TASK_MACS))
    reads = b.udiv(b.mul(b.mul(n, k), i64(2)), i64(TASK_BYTES))
    work = b.select(b.icmp_signed(">", reads, work), reads, work)
    tasks = _smallest(b, [cpu_count(b), panels, i64(MAX_TASKS)])
    tasks = b.select(b.icmp_signed("<", work, tasks), work, tasks)
    tasks = b.select(b.icmp_signed("<", tasks, i64(1)), i64(1), tasks)

    def record(t: ir.Value) -> ir.Value:
        return b.gep(records, [b.mul(t, i64(len(_RECORD)))], source_etype=I64)

    def fill(t: ir.Value) -> None:
        at = record(t)
        values = {"m": m, "n": n, "k": k, "a": b.ptrtoint(a_at, I64), "a_step": a_step,
                  "packed": b.zext(b.not_(direct), I64), "b": b.ptrtoint(b_, I64),
                  "b_row": b_row, "b_col": b_col, "c": b.ptrtoint(c, I64), "ldc": ldc,
                  "alpha": b.zext(b.bitcast(alpha, I32), I64),
                  "accumulate": b.zext(accumulate, I64),
                  "epilogue": b.ptrtoint(epilogue, I64),
                  "first": b.udiv(b.mul(panels, t), tasks),
                  "last": b.udiv(b.mul(panels, b.add(t, i64(1))), tasks),
                  "status": i64(0)}
        for name, value in values.items():
            b.store(value, _field(b, at, name))

    counted_loop(b, i64(0), tasks, i64(1), fill, "fill")
    task = _task_function(module)
    base = record(i64(0))
    stride = i64(8 * len(_RECORD))
    pooled = b.call(pool_run(module, affinity_count), [task, base, stride, tasks])
    with b.if_then(b.not_(pooled)):
        counted_loop(b, i64(0), tasks, i64(1), lambda t: b.call(task, [record(t)]), "alone")
    b.call(free, [packed])  # (null where A was read in place)

    def worst(t: ir.Value, status: list[ir.Value]) -> list[ir.Value]:
        code = b.load(_field(b, record(t), "status"), typ=I64)
        return [b.select(b.icmp_signed(">", code, status[0]), code, status[0])]

    status = fold_loop(b, i64(0), tasks, i64(1), [i64(0)], worst, "status")[0]
    b.ret(b.trunc(status, I32))


def _round_up(b: ir.IRBuilder, x: ir.Value, multiple: int) -> ir.Value:
    return b.mul(b.udiv(b.add(x, i64(multiple - 1)), i64(multiple)), i64(multiple))


def _smallest(b: ir.IRBuilder, values: list[ir.Value]) -> ir.Value:
    least = values[0]
    for value in values[1:]:
        least = b.select(b.icmp_signed("<", value, least), value, least)
    return least


def _task_function(module: ir.Module) -> ir.Function:
    """``ptr sf.gemm.bf16.task(ptr record)`` (a start routine, as the pool calls it): pack
    each panel of the record's range into memory of its own, then every tile of rows."""
    symbol = "sf.gemm.bf16.task"
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    function = ir.Function(module, ir.FunctionType(PTR, [PTR]), symbol)
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    record = function.args[0]

    def get(name: str) -> ir.Value:
        return b.load(_field(b, record, name), typ=I64)

    m, n, k, first, last, ldc = (get(name) for name in ("m", "n", "k", "first", "last",
                                                          "ldc"))
    a, b_, c, epilogue = (b.inttoptr(get(name), PTR) for name in ("a", "b", "c", "epilogue"))
    a_step, b_row, b_col = get("a_step"), get("b_row"), get("b_col")
    packed = b.trunc(get("packed"), I1)
    alpha = b.bitcast(b.trunc(get("alpha"), I32), F32)
    accumulate = b.trunc(get("accumulate"), I1)
    pairs = b.udiv(b.add(k, i64(1)), i64(2))
    # One tile of rows uses each panel once: packing it would cost as much as the tile's
    # arithmetic (a matrix-vector product is a pass over B), so a row-major B is read in
    # place and its pairs interleaved in registers.
    direct = b.and_(b.not_(packed), b.and_(b.icmp_signed("<=", m, i64(ROWS)),
                                           b.icmp_signed("==", b_col, i64(1))))
    with b.if_then(direct):
        counted_loop(b, first, last, i64(1), lambda p: _direct_tiles(
            b, module, p, (a, get("a_step"), k), (b_, b_row), (c, ldc, m, n), alpha,
            accumulate, epilogue), "direct")
        b.ret(ir.Constant(PTR, None))
    # The same with B's columns contiguous along k (``x @ w.T``, a tied embedding's
    # logits): dot products along k, which need no pairs interleaved at all (and take no
    # epilogue: a product with one goes on to the tiles).
    dots = b.and_(b.and_(b.not_(packed), b.icmp_unsigned("==", epilogue, ir.Constant(PTR, None))),
                  b.and_(b.icmp_signed("<=", m, i64(DOT_TILES[-1])),
                         b.icmp_signed("==", b_row, i64(1))))
    for rows in DOT_TILES:  # the smallest tile that holds A's rows (the others returned)
        with b.if_then(b.and_(dots, b.icmp_signed("<=", m, i64(rows)))):
            kernel = dots_function(module, rows)

            def run(j0: ir.Value, kernel: ir.Function = kernel) -> None:
                b.call(kernel, [a, a_step, b.gep(b_, [b.mul(j0, b_col)], source_etype=I16),
                                b.mul(b_col, i64(2)), k, b.gep(c, [j0], source_etype=I16), ldc,
                                m, _smallest(b, [b.sub(n, j0), i64(LANES)]), alpha,
                                accumulate])

            counted_loop(b, b.mul(first, i64(PANEL)),
                         _smallest(b, [b.mul(last, i64(PANEL)), n]), i64(LANES), run, "dots")
            b.ret(ir.Constant(PTR, None))
    # Over a k of more than `DEPTH` pairs the panels hold a chunk of it, and each tile's
    # sums wait between chunks in a float32 block of the task's own: a row of the group's
    # columns per row of A. A panel's pairs are whole cache lines (two per pair), aligned
    # as such.
    chunked = b.icmp_signed(">", pairs, i64(DEPTH))
    chunk_bytes = b.mul(_smallest(b, [pairs, i64(DEPTH)]), i64(PANEL * 4))
    panels = b.call(declare(module, "aligned_alloc", PTR, [I64, I64]),
                    [i64(64), b.mul(chunk_bytes, i64(GROUP))])
    ldw = i64(GROUP * PANEL)
    partial = values_where(b, chunked, [ir.Constant(PTR, None)], lambda: [b.call(
        declare(module, "malloc", PTR, [I64]),
        [b.mul(_round_up(b, m, ROWS), i64(GROUP * PANEL * 4))])])[0]
    missing = b.or_(b.icmp_unsigned("==", panels, ir.Constant(PTR, None)),
                    b.and_(chunked, b.icmp_unsigned("==", partial, ir.Constant(PTR, None))))
    with b.if_then(missing):
        free = declare(module, "free", ir.VoidType(), [PTR])
        b.call(free, [panels])
        b.call(free, [partial])
        b.store(i64(_NO_MEMORY), _field(b, record, "status"))
        b.ret(ir.Constant(PTR, None))
    tiles = {flag: tile_function(module, flag) for flag in (False, True)}
    pack = pack_function(module)
    phases = {name: ir.Constant(I32, _PHASES.index(name)) for name in _PHASES}

    def each_group(g0: ir.Value) -> None:
        g1 = _smallest(b, [b.add(g0, i64(GROUP)), last])

        def each_chunk(p0: ir.Value) -> None:
            k0 = b.mul(p0, i64(2))
            depth = _smallest(b, [b.sub(k, k0), i64(2 * DEPTH)])  # elements of k
            ends = b.icmp_signed(">=", b.add(p0, i64(DEPTH)), pairs)
            phase = b.select(b.not_(chunked), phases["only"], b.select(
                b.icmp_signed("==", p0, i64(0)), phases["first"],
                b.select(ends, phases["last"], phases["middle"])))
            # Pairs read from A's rows: the chunk's whole pairs, then an odd k's last
            # element alone; packed pairs are whole, the last one padded.
            whole = b.select(packed, b.udiv(b.add(depth, i64(1)), i64(2)),
                             b.udiv(depth, i64(2)))
            odd = b.and_(b.not_(packed), b.trunc(depth, I1))

            def pack_panel(p: ir.Value) -> None:
                n0 = b.mul(p, i64(PANEL))
                source = b.gep(b_, [b.add(b.mul(n0, b_col), b.mul(k0, b_row))],
                               source_etype=I16)
                target = b.gep(panels, [b.mul(b.sub(p, g0), chunk_bytes)], source_etype=I8)
                b.call(pack, [source, b_row, b_col, depth,
                              _smallest(b, [b.sub(n, n0), i64(PANEL)]), i64(PANEL), target])

            counted_loop(b, g0, g1, i64(1), pack_panel, "pack")

            def each_tile(i0: ir.Value) -> None:
                rows = _smallest(b, [b.sub(m, i0), i64(ROWS)])
                offset = b.select(packed, b.add(b.mul(i0, i64(4)), b.mul(p0, a_step)),
                                  b.add(b.mul(i0, a_step), b.mul(p0, i64(4))))
                a_rows = b.gep(a, [offset], source_etype=I8)

                def each_panel(p: ir.Value) -> None:
                    n0 = b.mul(p, i64(PANEL))
                    cols = _smallest(b, [b.sub(n, n0), i64(PANEL)])
                    panel = b.gep(panels, [b.mul(b.sub(p, g0), chunk_bytes)], source_etype=I8)
                    c_at = b.gep(c, [b.add(b.mul(i0, ldc), n0)], source_etype=I16)
                    sums = b.gep(partial, [b.add(b.mul(i0, ldw), b.mul(b.sub(p, g0),
                                                                       i64(PANEL)))],
                                 source_etype=F32)
                    arguments = [a_rows, a_step, panel, i64(0), whole, odd, c_at, ldc, rows,
                                 cols, alpha, accumulate, sums, ldw, phase, epilogue, i0, n0]
                    with b.if_else(packed) as (from_pairs, from_rows):
                        with from_pairs:
                            b.call(tiles[True], arguments)
                        with from_rows:
                            b.call(tiles[False], arguments)

                counted_loop(b, g0, g1, i64(1), each_panel, "panels")

            counted_loop(b, i64(0), m, i64(ROWS), each_tile, "tiles")

        counted_loop(b, i64(0), pairs, i64(DEPTH), each_chunk, "chunks")

    counted_loop(b, first, last, i64(GROUP), each_group, "groups")
    b.call(declare(module, "free", ir.VoidType(), [PTR]), [panels])
    b.call(declare(module, "free", ir.VoidType(), [PTR]), [partial])
    b.ret(ir.Constant(PTR, None))
    return function


def _direct_tiles(b: ir.IRBuilder, module: ir.Module, p: ir.Value,
                  a_operand: tuple[ir.Value, ir.Value, ir.Value],
                  b_operand: tuple[ir.Value, ir.Value],
                  c_operand: tuple[ir.Value, ir.Value, ir.Value, ir.Value], alpha: ir.Value,
                  accumulate: ir.Value, epilogue: ir.Value) -> None:
    """Panel p of a product of one tile of rows, B read in place (`tile_function`'s
    `direct`)."""
    (a, a_step, k), (b_, b_row), (c, ldc, m, n) = a_operand, b_operand, c_operand
    n0 = b.mul(p, i64(PANEL))
    b.call(tile_function(module, False, direct=True), [
        a, a_step, b.gep(b_, [n0], source_etype=I16), b.mul(b_row, i64(2)),
        b.udiv(k, i64(2)), b.trunc(k, I1), b.gep(c, [n0], source_etype=I16), ldc, m,
        _smallest(b, [b.sub(n, n0), i64(PANEL)]), alpha, accumulate, ir.Constant(PTR, None),
        i64(0), ir.Constant(I32, _PHASES.index("only")), epilogue, i64(0), n0])


def tile_function(module: ir.Module, packed: bool, direct: bool = False) -> ir.Function:
    """``void sf.gemm.bf16.tile.{rows,pairs}[.direct](ptr a, i64 a_step, ptr panel,
    i64 b_step, i64 whole, i1 odd, ptr c, i64 ldc, i64 rows, i64 cols, float alpha,
    i1 accumulate, ptr partial, i64 ldw, i32 phase, ptr epilogue, i64 row, i64 column)``:
    one tile of up to `ROWS` x
    `PANEL` results. A's pair p of row r is at ``a + r * a_step + 4 p`` (rows) or
    ``a + p * a_step + 4 r`` (pairs, packed); `odd` adds A's element
    ``a + r * a_step + 4 whole`` alone (rows only). The panel holds `whole` (+ `odd`)
    pairs of 32 columns; `direct`, it is B itself, row-major from the tile's first
    column, its rows `b_step` bytes apart, each pair of rows interleaved as it is read
    (and only the tile's own columns read). `phase` says which chunk of k this is
    (`_PHASES`): the only one (the result stored), the first or a middle one (the sums
    kept in `partial`, float32 rows `ldw` apart, a middle one adding what is there), or
    the last (added to `partial`'s sums, the result stored). Stored results go through
    the product's `epilogue` (`fused_gemm_function`; null: none), the tile's first
    element being C's (`row`, `column`)."""
    symbol = f"sf.gemm.bf16.tile.{'pairs' if packed else 'rows'}{'.direct' if direct else ''}"
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    types = [PTR, I64, PTR, I64, I64, I1, PTR, I64, I64, I64, F32, I1, PTR, I64, I32, PTR,
             I64, I64]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), types), symbol)
    function.linkage = "internal"
    (a, a_step, panel, b_step, whole, odd, c, ldc, rows, cols, alpha, accumulate, partial, ldw,
     phase, epilogue, row, column) = function.args
    for argument, name in zip(function.args, _TILE_ARGUMENTS, strict=True):
        argument.name = name
    b = ir.IRBuilder(function.append_basic_block("entry"))
    dot = declare(module, "llvm.x86.avx512bf16.dpbf16ps.512", _SUMS, [_SUMS, _PAIRS, _PAIRS])
    last_row = b.sub(rows, i64(1))
    # A tile of fewer rows reads its last row again in place of the missing ones.
    starts = [b.gep(a, [b.mul(_smallest(b, [i64(r), last_row]), a_step)],
                    source_etype=I8) for r in range(ROWS)] if not packed else []
    masks = _column_masks(b, cols)  # the tile's own columns: direct loads, every store

    def pair_of(r: int, p: ir.Value) -> ir.Value:
        """A's pair p of row r, as a broadcast vector."""
        if packed:
            at = b.gep(a, [b.add(b.mul(p, a_step), i64(4 * r))], source_etype=I8)
        else:
            at = b.gep(starts[r], [b.mul(p, i64(4))], source_etype=I8)
        return _broadcast(b, b.load(at, typ=I32, align=2))

    def columns_of(p: ir.Value, lone: bool) -> list[ir.Value]:
        """B's pair p of the tile's 32 columns, as two vectors of interleaved pairs."""
        if not direct:
            row = b.gep(panel, [b.mul(p, i64(PANEL * 4))], source_etype=I8)
            return [b.load(b.gep(row, [i64(64 * v)], source_etype=I8), typ=_PAIRS, align=64)
                    for v in range(2)]
        load = declare(module, "llvm.masked.load.v16i16.p0", _HALVES,
                       [PTR, I32, _MASK, _HALVES])
        low = b.gep(panel, [b.mul(p, b.mul(b_step, i64(2)))], source_etype=I8)
        high = b.gep(low, [b_step], source_etype=I8)
        columns = []
        for v in range(2):
            def half(row: ir.Value, v: int = v) -> ir.Value:
                return b.call(load, [b.gep(row, [i64(2 * LANES * v)], source_etype=I8),
                                     ir.Constant(I32, 2), masks[v], ir.Constant(_HALVES, None)])

            second = ir.Constant(_HALVES, None) if lone else half(high)
            columns.append(b.bitcast(_interleave(b, half(low), second), _PAIRS))
        return columns

    def step(p: ir.Value, sums: list[ir.Value], pair: Callable[[int], ir.Value],
             lone: bool = False) -> list[ir.Value]:
        columns = columns_of(p, lone)
        updated = []
        for r in range(ROWS):
            broadcast = b.bitcast(pair(r), _PAIRS)
            updated += [b.call(dot, [sums[2 * r + v], broadcast, columns[v]]) for v in range(2)]
        return updated

    zeros = [ir.Constant(_SUMS, None)] * (2 * ROWS)
    sums = fold_loop(b, i64(0), whole, i64(1), zeros,
                     lambda p, s: step(p, s, lambda r: pair_of(r, p)), "k")
    if not packed:
        def lone(r: int) -> ir.Value:
            at = b.gep(starts[r], [b.mul(whole, i64(4))], source_etype=I8)
            return _broadcast(b, b.zext(b.load(at, typ=I16, align=2), I32))

        sums = values_where(b, odd, sums, lambda: step(whole, sums, lone, lone=True))
    load = declare(module, "llvm.masked.load.v16f32.p0", _SUMS, [PTR, I32, _MASK, _SUMS])
    store = declare(module, "llvm.masked.store.v16f32.p0", ir.VoidType(),
                    [_SUMS, PTR, I32, _MASK])

    def at(r: int, v: int) -> ir.Value:
        return b.gep(partial, [b.add(b.mul(i64(r), ldw), i64(LANES * v))], source_etype=F32)

    def with_partial() -> list[ir.Value]:
        return [b.fadd(sums[2 * r + v], b.call(load, [at(r, v), ir.Constant(I32, 4), masks[v],
                                                      ir.Constant(_SUMS, None)]))
                for r in range(ROWS) for v in range(2)]

    later = b.icmp_unsigned(">=", phase, ir.Constant(I32, _PHASES.index("middle")))
    sums = values_where(b, later, sums, with_partial)
    kept = b.or_(b.icmp_unsigned("==", phase, ir.Constant(I32, _PHASES.index("first"))),
                 b.icmp_unsigned("==", phase, ir.Constant(I32, _PHASES.index("middle"))))
    with b.if_then(kept):
        for r in range(ROWS):
            for v in range(2):
                b.call(store, [sums[2 * r + v], at(r, v), ir.Constant(I32, 4), masks[v]])
        b.ret_void()
    _store_tile(b, sums, c, ldc, rows, masks, alpha, accumulate)
    with b.if_then(b.icmp_unsigned("!=", epilogue, ir.Constant(PTR, None))):
        b.call(epilogue_function(module), [c, ldc, rows, cols, epilogue, row, column])
    b.ret_void()
    return function


_TILE_ARGUMENTS = ("a", "a_step", "panel", "b_step", "whole", "odd", "c", "ldc", "rows", "cols",
                   "alpha", "accumulate", "partial", "ldw", "phase", "epilogue", "row",
                   "column")
# The chunks of k a tile's sums run over, in the order `tile_function`'s `phase` numbers
# them.
_PHASES = ("only", "first", "middle", "last")


def dots_function(module: ir.Module, rows: int) -> ir.Function:
    """``void sf.gemm.bf16.dots.ROWS(ptr a, i64 a_step, ptr bt, i64 b_step, i64 k, ptr c,
    i64 ldc, i64 count, i64 cols, float alpha, i1 accumulate)``: a tile of `rows` rows of
    A (``a + r * a_step``, the first `count` its own, the last of them read again past
    it) by up to `LANES` columns of B (``bt + j * b_step``), both contiguous along k. The
    columns are taken one after the other: where they follow each other in memory (a
    weight matrix stored out by in) the weights are read as one stream, which the memory
    serves faster than interleaved columns, and each block of a column meets every row of
    the tile while it is in a register. Each dot product takes 32 elements at a time into
    16 partial sums, its last block under a mask (zeros past k), and the tile of results
    is stored once."""
    symbol = f"sf.gemm.bf16.dots.{rows}"
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    types = [PTR, I64, PTR, I64, I64, PTR, I64, I64, I64, F32, I1]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), types), symbol)
    function.linkage = "internal"
    a, a_step, bt, b_step, k, c, ldc, count, cols, alpha, accumulate = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    dot = declare(module, "llvm.x86.avx512bf16.dpbf16ps.512", _SUMS, [_SUMS, _PAIRS, _PAIRS])
    wide = ir.VectorType(I16, 2 * LANES)
    load = declare(module, "llvm.masked.load.v32i16.p0", wide,
                   [PTR, I32, ir.VectorType(I1, 2 * LANES), wide])
    a_rows = [b.gep(a, [b.mul(_smallest(b, [i64(r), b.sub(count, i64(1))]), a_step)],
                    source_etype=I8) for r in range(rows)]
    blocks = b.udiv(k, i64(2 * LANES))
    tail = lanes_below(b, b.sub(k, b.mul(blocks, i64(2 * LANES))), 2 * LANES)

    def read(start: ir.Value, q: ir.Value, mask: ir.Value | None) -> ir.Value:
        at = b.gep(start, [b.mul(q, i64(4 * LANES))], source_etype=I8)
        if mask is None:
            return b.bitcast(b.load(at, typ=wide, align=2), _PAIRS)
        return b.bitcast(b.call(load, [at, ir.Constant(I32, 2), mask,
                                       ir.Constant(wide, None)]), _PAIRS)

    def block(start: ir.Value, q: ir.Value, sums: list[ir.Value],
              mask: ir.Value | None) -> list[ir.Value]:
        weights = read(start, q, mask)
        return [b.call(dot, [sum_, read(row, q, mask), weights])
                for sum_, row in zip(sums, a_rows, strict=True)]

    def column(j: ir.Value, totals: list[ir.Value]) -> list[ir.Value]:
        start = b.gep(bt, [b.mul(j, b_step)], source_etype=I8)
        sums = fold_loop(b, i64(0), blocks, i64(1), [ir.Constant(_SUMS, None)] * rows,
                         lambda q, s: block(start, q, s, None), "k")
        sums = block(start, blocks, sums, tail)
        lane = b.trunc(j, I32)
        return [b.insert_element(total, _sum_lanes(b, sum_), lane)
                for total, sum_ in zip(totals, sums, strict=True)]

    totals = fold_loop(b, i64(0), cols, i64(1), [ir.Constant(_SUMS, None)] * rows, column,
                       "columns")
    nothing = ir.Constant(_SUMS, None)
    _store_tile(b, [vector for total in totals for vector in (total, nothing)], c, ldc, count,
                [lanes_below(b, cols, LANES), ir.Constant(_MASK, [0] * LANES)], alpha,
                accumulate, rows_in_tile=rows)
    b.ret_void()
    return function


def _sum_lanes(b: ir.IRBuilder, vector: ir.Value) -> ir.Value:
    """The sum of a vector's 16 lanes, halves added to halves."""
    width = LANES
    while width > 1:
        width //= 2
        high = b.shuffle_vector(vector, ir.Constant(_SUMS, None), ir.Constant(
            _WORDS, [width + i if i < width else i for i in range(LANES)]))
        vector = b.fadd(vector, high)
    return b.extract_element(vector, ir.Constant(I32, 0))


def _interleave(b: ir.IRBuilder, low: ir.Value, high: ir.Value) -> ir.Value:
    """Two vectors of 16 halves as one of 32: low[0], high[0], low[1], high[1], ..."""
    return b.shuffle_vector(low, high, ir.Constant(ir.VectorType(I32, 2 * LANES), [
        lane for x in range(LANES) for lane in (x, LANES + x)]))


def _column_masks(b: ir.IRBuilder, cols: ir.Value) -> list[ir.Value]:
    """The lanes of the tile's two vectors that hold its own columns (below `cols`)."""
    return [lanes_below(b, b.sub(cols, i64(LANES * v)), LANES) for v in range(2)]


def _broadcast(b: ir.IRBuilder, word: ir.Value) -> ir.Value:
    one = b.insert_element(ir.Constant(_WORDS, None), word, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(_WORDS, None),
                            ir.Constant(_WORDS, [0] * LANES))


def epilogue_function(module: ir.Module) -> ir.Function:
    """``void sf.gemm.bf16.epilogue(ptr c, i64 ldc, i64 rows, i64 cols, ptr epilogue,
    i64 row, i64 column)``: the epilogue (`fused_gemm_function`'s numerics) applied to a
    tile just stored, `rows` x `cols` results from `c` (rows `ldc` apart), C's (`row`,
    `column`): a pass over the tile while it is in L1, two vectors at a time, rather than
    in the tile's store, where the tile's 24 sums left no registers for it. The
    per-column operands are read once per tile, an absent one as its identity; each
    affine map, and the residual, only where the epilogue has them (a branch the whole
    product takes the same way). The ReLU comes before the last rounding, which keeps a
    value's sign, and the float32 steps are not rounded before it unless a residual is
    added to them."""
    symbol = "sf.gemm.bf16.epilogue"
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64, PTR,
                                                                  I64, I64]), symbol)
    function.linkage = "internal"
    for argument, name in zip(function.args, ("c", "ldc", "rows", "cols", "epilogue", "row",
                                              "column"), strict=True):
        argument.name = name
    c, ldc, rows, cols, epilogue, row, column = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    load = declare(module, "llvm.masked.load.v16f32.p0", _SUMS, [PTR, I32, _MASK, _SUMS])
    halves = declare(module, "llvm.masked.load.v16i16.p0", _HALVES,
                     [PTR, I32, _MASK, _HALVES])
    store = declare(module, "llvm.masked.store.v16i16.p0", ir.VoidType(),
                    [_HALVES, PTR, I32, _MASK])
    masks = _column_masks(b, cols)

    def field(name: str) -> ir.Value:
        return b.inttoptr(b.load(b.gep(epilogue, [i64(EPILOGUE.index(name))],
                                       source_etype=I64), typ=I64), PTR)

    def given(*names: str) -> ir.Value:
        flags = [b.icmp_unsigned("!=", field(name), ir.Constant(PTR, None)) for name in names]
        return flags[0] if len(flags) == 1 else b.or_(*flags)

    def splat(value: float) -> ir.Constant:
        return ir.Constant(_SUMS, [value] * LANES)

    def per_column(name: str, identity: float) -> list[ir.Value]:
        pointer = field(name)
        return values_where(b, given(name), [splat(identity)] * 2, lambda: [b.call(load, [
            b.gep(pointer, [b.add(column, i64(LANES * v))], source_etype=F32),
            ir.Constant(I32, 4), masks[v], splat(0.0)]) for v in range(2)])

    maps = [(given(*names), [per_column(name, 1.0 if "scale" in name else -0.0)
                             for name in names])
            for names in (("scale", "shift"), ("second_scale", "second_shift"))]
    residual = b.gep(field("residual"), [b.add(b.mul(row, ldc), column)], source_etype=I16)
    has_residual = given("residual")
    relu = b.icmp_unsigned("!=", b.ptrtoint(field("rectify"), I64), i64(0))

    def each_row(r: ir.Value) -> None:
        for v in range(2):
            offset = b.add(b.mul(r, ldc), i64(LANES * v))
            at = b.gep(c, [offset], source_etype=I16)
            value = widened_bfloat16(b, b.call(halves, [at, ir.Constant(I32, 2), masks[v],
                                                        ir.Constant(_HALVES, None)]))
            for present, (scale, shift) in maps:
                value = values_where(b, present, [value], lambda value=value, scale=scale,
                                     shift=shift, v=v: [
                                         b.fadd(b.fmul(value, scale[v]), shift[v])])[0]

            def plus_residual(value: ir.Value = value, offset: ir.Value = offset,
                              v: int = v) -> list[ir.Value]:
                other = b.call(halves, [b.gep(residual, [offset], source_etype=I16),
                                        ir.Constant(I32, 2), masks[v],
                                        ir.Constant(_HALVES, None)])
                rounded = widened_bfloat16(b, _to_bfloat16(b, value))
                return [b.fadd(rounded, widened_bfloat16(b, other))]

            value = values_where(b, has_residual, [value], plus_residual)[0]
            # relu's own rule: x where x > 0 or x is NaN (unordered), else +0.
            rectified = b.select(b.fcmp_unordered(">", value, splat(0.0)), value, splat(0.0))
            b.call(store, [_to_bfloat16(b, b.select(relu, rectified, value)), at,
                           ir.Constant(I32, 2), masks[v]])

    counted_loop(b, i64(0), rows, i64(1), each_row, "rows")
    b.ret_void()
    return function


def _to_bfloat16(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """16 float32s rounded to bfloat16 bit patterns as the unfused ops round them
    (`lanes.nearest_bfloat16`): ``vcvtneps2bf16`` (the same rounding and quiet NaNs, one
    instruction), which takes a subnormal float32 for zero, so a vector with a subnormal
    lane takes the integer rounding instead."""
    module = b.module
    convert = declare(module, "llvm.x86.avx512bf16.cvtneps2bf16.512",
                      ir.VectorType(_BF16, LANES), [_SUMS])
    classify = declare(module, "llvm.x86.avx512.fpclass.ps.512", _MASK, [_SUMS, I32])
    any_lane = declare(module, "llvm.vector.reduce.or.v16i1", I1, [_MASK])
    subnormal = b.call(any_lane, [b.call(classify, [value, ir.Constant(I32, 0x20)])])
    fast = b.bitcast(b.call(convert, [value]), _HALVES)
    return values_where(b, subnormal, [fast], lambda: [nearest_bfloat16(b, value)])[0]


def _store_tile(b: ir.IRBuilder, sums: list[ir.Value], c: ir.Value, ldc: ir.Value,
                rows: ir.Value, masks: list[ir.Value], alpha: ir.Value,
                accumulate: ir.Value, rows_in_tile: int = ROWS) -> None:
    """Scale, add C's values where `accumulate`, round to bfloat16 and store each of the
    tile's own elements (rows below `rows`, the lanes of `masks`)."""
    module = b.module
    to_bf16 = declare(module, "llvm.x86.avx512bf16.cvtneps2bf16.512",
                      ir.VectorType(_BF16, LANES), [_SUMS])
    load = declare(module, "llvm.masked.load.v16i16.p0", _HALVES,
                   [PTR, I32, _MASK, _HALVES])
    store = declare(module, "llvm.masked.store.v16i16.p0", ir.VoidType(),
                    [_HALVES, PTR, I32, _MASK])
    scale = b.insert_element(ir.Constant(_SUMS, None), alpha, ir.Constant(I32, 0))
    scale = b.shuffle_vector(scale, ir.Constant(_SUMS, None), ir.Constant(_WORDS, [0] * LANES))
    for r in range(rows_in_tile):
        with b.if_then(b.icmp_signed("<", i64(r), rows)):
            row = b.gep(c, [b.mul(i64(r), ldc)], source_etype=I16)
            for v in range(2):
                at = b.gep(row, [i64(LANES * v)], source_etype=I16)
                total = b.fmul(sums[2 * r + v], scale)
                # C's values are read either way (its own elements: the memory is there)
                # and kept only where the product accumulates onto them.
                old = b.call(load, [at, ir.Constant(I32, 2), masks[v],
                                    ir.Constant(_HALVES, None)])
                total = b.select(accumulate, b.fadd(total, widened_bfloat16(b, old)), total)
                rounded = b.bitcast(b.call(to_bf16, [total]), _HALVES)
                b.call(store, [rounded, at, ir.Constant(I32, 2), masks[v]])


def pack_function(module: ir.Module) -> ir.Function:
    """``void sf.gemm.bf16.pack(ptr src, i64 s_k, i64 s_x, i64 k, i64 count, i64 width,
    ptr dst)``: dst[p][x] (32 bits) = (src[2p, x], src[2p + 1, x]) for p below
    ceil(k / 2) and x below `width` (a multiple of 16), zero where x >= `count` or the row
    is past k; src's element (row, x) at ``src + row * s_k + x * s_x`` (elements). Where k
    is contiguous (B stored transposed: ``x @ w.T``), each pair is one word of its column:
    squares of 16 columns by 16 pairs, loaded as 16 runs and transposed in registers
    (`_pack_squares`). Otherwise sixteen columns at a time: two row vectors interleaved
    where x is contiguous, else element by element."""
    symbol = "sf.gemm.bf16.pack"
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    types = [PTR, I64, I64, I64, I64, I64, PTR]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), types), symbol)
    function.linkage = "internal"
    src, s_k, s_x, k, count, width, dst = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    contiguous_x = b.icmp_signed("==", s_x, i64(1))
    pairs = b.udiv(b.add(k, i64(1)), i64(2))
    with b.if_then(b.icmp_signed("==", s_k, i64(1))):
        _pack_squares(b, (src, s_x, k, count, width, dst), pairs)
        b.ret_void()

    def element(row: ir.Value, x: ir.Value) -> ir.Value:
        """src[row, x] widened to 32 bits, zero outside the matrix."""
        inside = b.and_(b.icmp_signed("<", row, k), b.icmp_signed("<", x, count))
        slot = entry_alloca(b, I32)
        b.store(ir.Constant(I32, 0), slot)
        with b.if_then(inside):
            at = b.gep(src, [b.add(b.mul(row, s_k), b.mul(x, s_x))], source_etype=I16)
            b.store(b.zext(b.load(at, typ=I16), I32), slot)
        return b.load(slot, typ=I32)

    def each_pair(p: ir.Value) -> None:
        low_row = b.mul(p, i64(2))
        out_row = b.gep(dst, [b.mul(p, width)], source_etype=I32)
        whole_rows = b.icmp_signed("<", b.add(low_row, i64(1)), k)

        def each_block(x0: ir.Value) -> None:
            out = b.gep(out_row, [x0], source_etype=I32)
            full = b.and_(whole_rows, b.icmp_signed("<=", b.add(x0, i64(LANES)), count))
            low = b.gep(src, [b.add(b.mul(low_row, s_k), b.mul(x0, s_x))], source_etype=I16)
            with b.if_else(b.and_(full, contiguous_x)) as (rows_vector, scalar):
                with rows_vector:
                    high = b.gep(low, [s_k], source_etype=I16)
                    first = b.load(low, typ=_HALVES, align=2)
                    second = b.load(high, typ=_HALVES, align=2)
                    b.store(_interleave(b, first, second), out, align=4)
                with scalar:
                    def one(x: ir.Value) -> None:
                        column = b.add(x0, x)
                        pair = b.or_(element(low_row, column), b.shl(
                            element(b.add(low_row, i64(1)), column), ir.Constant(I32, 16)))
                        b.store(pair, b.gep(out, [x], source_etype=I32))

                    counted_loop(b, i64(0), i64(LANES), i64(1), one, "one")

        counted_loop(b, i64(0), width, i64(LANES), each_block, "block")

    counted_loop(b, i64(0), pairs, i64(1), each_pair, "pair")
    b.ret_void()
    return function


def _pack_squares(b: ir.IRBuilder, args: tuple[ir.Value, ...], pairs: ir.Value) -> None:
    """`pack_function`'s body where k is contiguous: per square of 16 pairs by 16 columns,
    each column's 32 elements of k loaded as one run (under a mask past k or past `count`:
    zeros, so an odd k's last pair is (element, 0)), the 16 runs of words transposed in
    registers, and the rows stored that are below `pairs`."""
    src, s_x, k, count, width, dst = args
    module = b.module
    wide = ir.VectorType(I16, 2 * LANES)
    wide_mask = ir.VectorType(I1, 2 * LANES)
    load = declare(module, "llvm.masked.load.v32i16.p0", wide, [PTR, I32, wide_mask, wide])
    none = ir.Constant(wide_mask, [0] * (2 * LANES))

    def square(p0: ir.Value, x0: ir.Value) -> None:
        k0 = b.mul(p0, i64(2))
        starts = [b.gep(src, [b.add(b.mul(b.add(x0, i64(i)), s_x), k0)], source_etype=I16)
                  for i in range(LANES)]
        left = b.sub(k, k0)
        within = lanes_below(b, left, 2 * LANES)

        def store(runs: list[ir.Value]) -> None:
            for t, row in enumerate(transpose_square(b, runs)):
                p = b.add(p0, i64(t))
                with b.if_then(b.icmp_signed("<", p, pairs)):
                    b.store(row, b.gep(dst, [b.add(b.mul(p, width), x0)], source_etype=I32),
                            align=4)

        whole = b.and_(b.icmp_signed(">=", left, i64(2 * LANES)),
                       b.icmp_signed("<=", b.add(x0, i64(LANES)), count))
        with b.if_else(whole) as (full, cut):
            with full:
                store([b.load(start, typ=_WORDS, align=2) for start in starts])
            with cut:
                store([b.bitcast(b.call(load, [start, ir.Constant(I32, 2), b.select(
                    b.icmp_signed("<", b.add(x0, i64(i)), count), within, none),
                    ir.Constant(wide, [0] * (2 * LANES))]), _WORDS)
                    for i, start in enumerate(starts)])

    counted_loop(b, i64(0), pairs, i64(LANES), lambda p0: counted_loop(
        b, i64(0), width, i64(LANES), lambda x0: square(p0, x0), "squares.columns"),
        "squares")
