"""Calls into C entry points from a program, and kernel calls split over the cores.

A fused kernel, a lowered op or a `py_func`'s callback is called through its entry:
``i32 (ptr data, ptr dims[, ptr strides])``, one data pointer per operand and result,
their dims after one another; a status other than 0 ends the program with `OP_FAILED` +
the op's index. A kernel whose results are large and of one static shape (`rows_to_split`)
is instead called once per core on a block of rows each (`split_rows` of its analysis),
so a program spreads its large elementwise work as the step plans' kernels do.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation

from stageflow.codegen.kernels.analysis import split_rows
from stageflow.codegen.llvm.emitter import I8, I32, I64
from stageflow.codegen.llvm.loops import fold_mul, i64
from stageflow.codegen.lowered.rule import contiguous_strides
from stageflow.codegen.lowered.tasks import MAX_TASKS, cpu_count, run_calls
from stageflow.codegen.program.abi import OP_FAILED, PTR, value_type
from stageflow.codegen.program.placement import Placement
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.fuse import reduced_results

# A kernel call of results this large splits its rows over the cores (`split_rows`):
# below it, waking the other cores costs more than the rows they would take over.
SPLIT_KERNEL_ELEMENTS = 1 << 18


def rows_to_split(kernel: FuncOp) -> int:
    """The rows a program splits a call of `kernel` over the cores by, 0 where it calls it
    whole: a kernel that can run on blocks of rows (`split_rows`), with no reductions, whose
    results all have one static shape of at least `SPLIT_KERNEL_ELEMENTS` elements. Such a
    kernel is compiled with its leading dim unknown (by the JIT's executable from
    `MIN_PARALLEL_ELEMENTS` on, by `module.whole_function_module` for a program)."""
    if reduced_results(kernel) or split_rows(kernel) is None:
        return 0
    shapes = {tuple(shaped_type(ty).shape) for ty in kernel.function_type.outputs.data}
    if len(shapes) != 1:
        return 0
    (shape,) = shapes
    if not shape or None in shape or shape[0] < 2 or int(np.prod(shape)) < SPLIT_KERNEL_ELEMENTS:
        return 0
    return shape[0]


class KernelCalls(Placement):
    """The calls of a program body into entry points, split over the cores or whole."""

    def split_rows(self, op: SfOp) -> int:
        """The rows a kernel call splits over the cores by (`rows_to_split`; 0: whole)."""
        kernel = self.p.functions.get(op.params()["callee"].name)
        return 0 if kernel is None else rows_to_split(kernel)

    def call_split(self, entry: ir.Function, op: Operation, index: int, rows: int) -> None:
        """The kernel call as one call per core, each over a block of rows: an operand of
        the results' rank and leading dim is offset to the block and given its rows; one
        broadcast along the rows (a lower rank, or a leading dim of 1) is passed whole."""
        b = self.b
        values = list(op.operands) + list(op.results)
        rank = len(value_type(op.results[0]).shape)
        total = max(sum(len(self.dims[v]) for v in values), 1)
        cpus = cpu_count(b)
        tasks = b.select(b.icmp_signed("<", cpus, i64(rows)), cpus, i64(rows))
        tasks = b.select(b.icmp_signed(">", tasks, i64(MAX_TASKS)), i64(MAX_TASKS), tasks)
        data = self.alloca(PTR, MAX_TASKS * len(values))
        dims = self.alloca(I64, MAX_TASKS * total)

        def arguments(t: ir.Value) -> tuple[ir.Value, ir.Value]:
            first = b.sdiv(b.mul(i64(rows), t), tasks)
            last = b.sdiv(b.mul(i64(rows), b.add(t, i64(1))), tasks)
            own_data = b.gep(data, [b.mul(t, i64(len(values)))], source_etype=PTR)
            own_dims = b.gep(dims, [b.mul(t, i64(total))], source_etype=I64)
            position = 0
            for slot, value in enumerate(values):
                ty = value_type(value)
                sizes = list(self.dims[value])
                pointer = self.storage[value]
                if len(ty.shape) == rank and ty.shape[0] == rows:
                    row = i64(ty.dtype.itemsize)
                    for size in sizes[1:]:
                        row = fold_mul(b, row, size)
                    pointer = b.gep(pointer, [b.mul(first, row)], source_etype=I8)
                    sizes[0] = b.sub(last, first)
                b.store(pointer, b.gep(own_data, [i64(slot)], source_etype=PTR))
                for size in sizes:
                    b.store(size, b.gep(own_dims, [i64(position)], source_etype=I64))
                    position += 1
            return own_data, own_dims

        code = run_calls(b, entry, tasks, arguments)
        self.fail_if(b.icmp_signed("!=", code, ir.Constant(I32, 0)),
                     ir.Constant(I32, OP_FAILED + index))

    def call_entry(self, entry: ir.Function, op: Operation, index: int, strides: bool) -> None:
        b = self.b
        values = list(op.operands) + list(op.results)
        data = self.alloca(PTR, max(len(values), 1))
        for slot, value in enumerate(values):
            b.store(self.storage[value], b.gep(data, [i64(slot)], source_etype=PTR))
        args = [data, self.i64_array([s for v in values for s in self.dims[v]])]
        if strides:
            args.append(self.i64_array(
                [s for v in op.operands for s in contiguous_strides(b, self.dims[v])]))
        code = b.call(entry, args)
        self.fail_if(b.icmp_signed("!=", code, ir.Constant(I32, 0)),
                     ir.Constant(I32, OP_FAILED + index))

