"""Where each value of a program lives (workspace planning), and the code around it.

A buffer of the plan that `plan-buffers` wrote into the IR (``sf.buffer``) is room in the
program's workspace (one block kept from call to call, `workspace`) at the largest size
any value in it takes; sizes are computed at run time, so unknown dims are fine. Returned
values and new variable values are computed straight into the caller's outputs where an
op computes them; a reshape aliases its operand, and other views (broadcast, transpose,
slice) are copies into memory of their own; a constant is a global and a variable's value
its caller's array. Every offset is known before the workspace is acquired, so the
block is sized once per call. `Placement` is the base of a program's body: its values'
storage, and the copies, failure branches and argument arrays the op emission uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, SSAValue

from stageflow.codegen.llvm.emitter import I1, I8, I32, I64
from stageflow.codegen.llvm.functions import entry_alloca
from stageflow.codegen.llvm.loops import fold_mul, i64
from stageflow.codegen.program.abi import NO_MEMORY, PTR, value_type
from stageflow.codegen.program.workspace import ALIGNMENT
from stageflow.core.op_facts import Memory
from stageflow.ir.attributes import decode
from stageflow.ir.control import CondOp, WhileOp
from stageflow.ir.dialect import SfOp
from stageflow.passes.plan_buffers import BUFFER_ATTR
from stageflow.passes.support import is_op
from stageflow.primitives.state import assign_variable_p

if TYPE_CHECKING:  # the builder owns the body it places values for
    from stageflow.codegen.program.builder import ProgramBuilder


def constant_bytes(module: ir.Module, name: str, array: np.ndarray) -> ir.GlobalVariable:
    """A private, 64-byte aligned constant global holding `array`'s bytes (C order)."""
    data = bytearray(np.ascontiguousarray(array).tobytes()) or bytearray(1)
    ty = ir.ArrayType(I8, len(data))
    variable = ir.GlobalVariable(module, ty, name)
    variable.initializer = ir.Constant(ty, data)
    variable.global_constant = True
    variable.linkage = "private"
    variable.align = 64
    return variable


def owns_result(op: Operation) -> bool:
    """Whether the program computes `op`'s results into memory of their own (not an alias
    of an operand, a constant or a variable's storage; a region op's results are what its
    regions yield)."""
    if not isinstance(op, SfOp):
        return False
    return not (op.primitive.aliases or op.primitive.memory is Memory.EXTERNAL)


@dataclass(frozen=True)
class Offset:
    """Where a buffer starts in the workspace (bytes), before the workspace is acquired."""

    value: ir.Value


class Placement:
    """The storage of one program body's values (`storage`: data pointers, or workspace
    offsets until `allocate` acquires the workspace), and the helpers that emit code
    around it."""

    def __init__(self, builder: ProgramBuilder, b: ir.IRBuilder, function: ir.Function,
                 pointers: list[ir.Value], dims: dict[SSAValue, list[ir.Value]],
                 outputs: ir.Value, out_dims: ir.Value) -> None:
        self.p, self.b, self.function = builder, b, function
        self.dims = dims
        self.outputs, self.out_dims = outputs, out_dims
        block = builder.function.body.block
        self.args = list(block.args)
        self.ops = [op for op in block.ops if not isinstance(op, ReturnOp)]
        returned = list(block.last_op.operands)
        self.returned = [returned[i] for i in builder.written_outputs()]  # what it writes
        self.storage: dict[SSAValue, ir.Value] = dict(zip(self.args, pointers, strict=True))
        self.status = b.alloca(I32, name="status")
        self.cleanup = function.append_basic_block("cleanup")
        self.used: ir.Value = i64(0)  # bytes of the workspace placed so far
        self.workspace: ir.Value = ir.Constant(PTR, None)
        # per loop, per carried value: the two buffers its iterations write in turn
        self.spares: dict[WhileOp, list[tuple[ir.Value, ir.Value]]] = {}
        self.constants = 0
        # per cond, per result: memory for a yielded value the region does not own
        self.copies: dict[CondOp, list[ir.Value]] = {}

    # -- sizes -----------------------------------------------------------------------------

    def nbytes(self, value: SSAValue) -> ir.Value:
        total: ir.Value = i64(value_type(value).dtype.itemsize)
        for size in self.dims[value]:
            total = fold_mul(self.b, total, size)
        return total

    def output_pointer(self, position: int) -> ir.Value:
        b = self.b
        return b.load(b.gep(self.outputs, [i64(position)], source_etype=PTR), typ=PTR)

    # -- storage ---------------------------------------------------------------------------

    def plan_storage(self) -> dict[SSAValue, int]:
        """Decide where each op result lives; the buffer id of each planned one."""
        computed = {r for op in self.ops if owns_result(op) for r in op.results}
        direct: dict[SSAValue, int] = {}
        for position, value in enumerate(self.returned):
            if value in computed and value not in direct:
                direct[value] = position
        finals = self.final_assignments()
        assigned_values = [v for v in finals.values()]
        for position, (_, value) in enumerate(sorted(finals.items())):
            if (value in computed and value not in direct
                    and assigned_values.count(value) == 1 and self.assign_count(value) == 1):
                direct[value] = len(self.returned) + position
        for value, position in direct.items():
            self.storage[value] = self.output_pointer(position)
        buffers: dict[SSAValue, int] = {}
        for op in self.ops:
            ids = _buffer_ids(op)
            for result, buffer in zip(op.results, ids, strict=True):
                if (result in computed and result not in direct and buffer >= 0
                        and not op.primitive.view):
                    buffers[result] = buffer
        return buffers

    def final_assignments(self) -> dict[int, SSAValue]:
        """The value each written variable (by argument index) holds at the end."""
        finals: dict[int, SSAValue] = {}
        for op in self.ops:
            if is_op(op, assign_variable_p):
                finals[self.args.index(op.operands[0])] = op.operands[1]
        return finals

    def assign_count(self, value: SSAValue) -> int:
        return sum(1 for op in self.ops
                   if is_op(op, assign_variable_p) and op.operands[1] is value)

    def allocate(self, buffers: dict[SSAValue, int]) -> None:
        """Place every buffer and every unplanned value in the workspace, at their run-time
        sizes."""
        b = self.b
        sizes: dict[int, ir.Value] = {}
        for value, buffer in buffers.items():
            size = self.nbytes(value)
            sizes[buffer] = size if buffer not in sizes else _max(b, sizes[buffer], size)
        memory = {buffer: self.place(size) for buffer, size in sorted(sizes.items())}
        for value, buffer in buffers.items():
            self.storage[value] = memory[buffer]
        for op in self.ops:
            for owner in op.walk():
                if not owns_result(owner):
                    continue
                for result in owner.results:
                    if result not in self.storage:
                        self.storage[result] = self.place(self.nbytes(result))
            for owner in op.walk():
                if isinstance(owner, WhileOp):
                    self.spares[owner] = [(self.place(self.nbytes(r)),
                                           self.place(self.nbytes(r))) for r in owner.results]
                elif isinstance(owner, CondOp):
                    self.copies[owner] = [self.place(self.nbytes(r)) for r in owner.results]
        self.workspace = self.p.workspace.acquire(b, self.used)
        self.fail_if(b.icmp_unsigned("==", self.workspace, ir.Constant(PTR, None)), NO_MEMORY)
        for value, offset in list(self.storage.items()):
            if isinstance(offset, Offset):
                self.storage[value] = self.at(offset)
        self.spares = {op: [(self.at(x), self.at(y)) for x, y in pairs]
                       for op, pairs in self.spares.items()}
        self.copies = {op: [self.at(x) for x in offsets] for op, offsets in self.copies.items()}

    def alloca(self, ty: ir.Type, count: int) -> ir.Value:
        """Stack memory for one call's argument arrays, in the entry block."""
        return entry_alloca(self.b, ty, count)

    def i64_array(self, values: list[ir.Value]) -> ir.Value:
        """A call's array of dims or strides: where all are constants (a program of static
        shapes), a constant global shared by the calls passing the same values; else stack
        memory stored element by element. Stored at every call, the arrays of a program
        of static shapes were most of its instructions, and of the time building its IR."""
        if all(isinstance(v, ir.Constant) for v in values):
            key = tuple(v.constant for v in values) or (0,)
            array = self.p.constant_arrays.get(key)
            if array is None:
                ty = ir.ArrayType(I64, len(key))
                array = ir.GlobalVariable(self.p.module, ty,
                                          f"{self.p.symbol}.dims{len(self.p.constant_arrays)}")
                array.initializer = ir.Constant(ty, [i64(k) for k in key])
                array.global_constant = True
                array.linkage = "internal"
                self.p.constant_arrays[key] = array
            return array
        array = self.alloca(I64, max(len(values), 1))
        for slot, value in enumerate(values):
            self.b.store(value, self.b.gep(array, [i64(slot)], source_etype=I64))
        return array

    def place(self, size: ir.Value) -> Offset:
        """Room for `size` bytes in the workspace: its offset, aligned to `ALIGNMENT`."""
        b = self.b
        offset = self.used
        self.used = b.add(offset, b.and_(b.add(size, i64(ALIGNMENT - 1)), i64(-ALIGNMENT)))
        return Offset(offset)

    def at(self, offset: Offset) -> ir.Value:
        return self.b.gep(self.workspace, [offset.value], source_etype=I8)

    def fail_if(self, failed: ir.Value, code: int | ir.Value) -> None:
        b = self.b
        if isinstance(failed, ir.Constant) and not failed.constant:
            return
        bad = self.function.append_basic_block("fail")
        good = self.function.append_basic_block("next")
        b.cbranch(failed, bad, good)
        b.position_at_end(bad)
        b.store(code if isinstance(code, ir.Value) else ir.Constant(I32, code), self.status)
        b.branch(self.cleanup)
        b.position_at_end(good)

    # -- copies ----------------------------------------------------------------------------

    def copy_unless(self, same: ir.Value, target: ir.Value, source: ir.Value,
                    nbytes: ir.Value) -> None:
        """Copy `nbytes` from `source` to `target` where `same` is false."""
        b = self.b
        copy = self.function.append_basic_block("copy")
        done = self.function.append_basic_block("copied")
        b.cbranch(same, done, copy)
        b.position_at_end(copy)
        b.call(self.p.memcpy, [target, source, nbytes, ir.Constant(I1, 0)])
        b.branch(done)
        b.position_at_end(done)

    def copy_into(self, target: ir.Value, value: SSAValue) -> None:
        source = self.storage[value]
        if source is target:
            return
        b = self.b
        same = b.icmp_unsigned("==", source, target)
        copy = self.function.append_basic_block("copy")
        done = self.function.append_basic_block("copied")
        b.cbranch(same, done, copy)
        b.position_at_end(copy)
        b.call(self.p.memcpy, [target, source, self.nbytes(value), ir.Constant(I1, 0)])
        b.branch(done)
        b.position_at_end(done)


def _buffer_ids(op: Operation) -> list[int]:
    attr = op.attributes.get(BUFFER_ATTR)
    if attr is None:
        return [-1] * len(op.results)
    value = decode(attr)
    return list(value) if isinstance(value, list | tuple) else [value]


def _max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
        return i64(max(x.constant, y.constant))
    return b.select(b.icmp_signed(">", x, y), x, y)
