"""Two GPU kernels driven by index maps: data movement and reductions on a GPU's memory.

A fused kernel computes elementwise ops; moving elements (transpose, slice, broadcast,
reshape) and reducing them need no arithmetic of their own, only to know which input
element goes where. The host computes that once per signature as an *index map* (apply the
op's NumPy kernel to the flat indices of the operand, `stageflow.runtime.gpu`), the map
lives on the GPU, and one of two kernels does the work:

- ``gather_iN(in, map, out, n)``: ``out[i] = in[map[i]]`` for elements of N bits, any
  dtype (a move copies bits);
- ``reduce_KIND_DTYPE(in, map, out, rows, width)``: output element ``j`` combines the
  ``width`` input elements ``in[map[j * width + k]]`` in order, from the kind's identity
  (sums in order, not pairwise: a GPU's float sums differ from NumPy's by rounding).

Both take the grid-stride loop of the fused kernels (`ptx.GridDriver`), so any grid is
correct, and both are built for PTX and for the emulated launch from the same builder.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I64, Emitter, storage_type
from stageflow.codegen.llvm.loops import counted_loop, fold_loop, i64
from stageflow.codegen.llvm.reduce import combine, identity_of
from stageflow.codegen.targets.ptx import GridDriver
from stageflow.core.op_facts import ReductionKind


def gather_entry(bits: int):
    """The builder of ``void gather(ptr in, ptr map, ptr out, i64 n)`` for `bits`-bit
    elements (see `EntryBuilder`)."""
    element = ir.IntType(bits)

    def build(module: ir.Module, symbol: str, driver: GridDriver,
              address_space: int) -> ir.Function:
        pointer = ir.PointerType(addrspace=address_space)
        entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [pointer] * 3 + [I64]),
                            symbol)
        source, indices, out, count = entry.args
        for arg, name in zip(entry.args, ("in", "map", "out", "n"), strict=True):
            arg.name = name
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        start, step = driver.grid(b)

        def move(i: ir.Value) -> None:
            at = b.load(b.gep(indices, [i], source_etype=I64), typ=I64)
            value = b.load(b.gep(source, [at], source_etype=element), typ=element)
            b.store(value, b.gep(out, [i], source_etype=element))

        counted_loop(b, start, count, step, move, "i")
        b.ret_void()
        return entry

    return build


def reduce_entry(kind: ReductionKind, dtype: np.dtype):
    """The builder of ``void reduce(ptr in, ptr map, ptr out, i64 rows, i64 width)`` of
    `kind` over `dtype` (one of the kind's native dtypes)."""
    ty = storage_type(dtype)

    def build(module: ir.Module, symbol: str, driver: GridDriver,
              address_space: int) -> ir.Function:
        pointer = ir.PointerType(addrspace=address_space)
        entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [pointer] * 3 + [I64] * 2),
                            symbol)
        source, indices, out, rows, width = entry.args
        for arg, name in zip(entry.args, ("in", "map", "out", "rows", "width"), strict=True):
            arg.name = name
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        e = Emitter(b)
        start, step = driver.grid(b)

        def row(j: ir.Value) -> None:
            base = b.mul(j, width)

            def fold(k: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                at = b.load(b.gep(indices, [b.add(base, k)], source_etype=I64), typ=I64)
                value = b.load(b.gep(source, [at], source_etype=ty), typ=ty)
                return [combine(e, kind, dtype, acc[0], value)]

            total = fold_loop(b, i64(0), width, i64(1), [identity_of(kind, dtype, ty)], fold,
                              "k")[0]
            b.store(total, b.gep(out, [j], source_etype=ty))

        counted_loop(b, start, rows, step, row, "j")
        b.ret_void()
        return entry

    return build
