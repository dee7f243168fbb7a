"""Whole functions as one LLVM function: every op of an optimised function in one call.

A compiled function could run its ops as steps from Python, each a call into a kernel;
below a few microseconds per op that overhead dominates small tensors (a training step
on a batch of 64, an HMC leapfrog on 16 chains). Here one LLVM function does what the
steps do: it computes every value's dims from its arguments' (`runtime_dims`), allocates
the buffers of the plan that `plan-buffers` wrote into the IR (`placement`), calls each
fused kernel and each lowered op (`codegen.lowered`) through their C entry points (`calls`),
branches and loops over regions (`control_flow`), checks their status codes, and keeps
its buffers' memory for the next call (`workspace`). The same function is what an
ahead-of-time library exports, so the JIT and the AOT path share it; its C ABI is
`abi`'s, and which functions can become one `legality`'s.

Variable writes are deferred: a read after a write sees the written value, and the
variables' own storage is never written; their final values are copied to the caller's
outputs at the end, as the returned values are.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue

from stageflow.codegen.llvm.emitter import I1, I32, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import fold_mul, i64, return_unless
from stageflow.codegen.program.abi import (
    OP_FAILED,
    PTR,
    TOO_LARGE,
    add_py_entry,
    callback_symbol,
    fits,
    load_arguments,
    signature_of,
)
from stageflow.codegen.program.calls import KernelCalls
from stageflow.codegen.program.control_flow import RegionLowering
from stageflow.codegen.program.legality import OpEntry
from stageflow.codegen.program.runtime_dims import function_dims
from stageflow.codegen.program.workspace import Workspace
from stageflow.ir.builder import constant_value
from stageflow.ir.control import CondOp, ControlOp, WhileOp
from stageflow.ir.dialect import ConstantOp
from stageflow.ir.types import shaped_type
from stageflow.primitives.control import py_func_p
from stageflow.primitives.functional import call_p
from stageflow.primitives.state import assign_variable_p, read_variable_p
from stageflow.primitives.structural import reshape_p

# Resolves a kernel call to the LLVM function with its C entry point.
KernelEntry = Callable[[str], ir.Function]
ConstantGlobal = Callable[[ir.Module, str, np.ndarray], ir.GlobalVariable]


class ProgramBuilder:
    """Emits the program of one function into an LLVM module."""

    def __init__(self, module: ir.Module, function: FuncOp, functions: dict[str, FuncOp],
                 kernel_entry: KernelEntry, op_entry: OpEntry, symbol: str, *,
                 constant_global: ConstantGlobal, alias_outputs: bool = False,
                 interruptible: bool = False) -> None:
        self.module, self.function, self.functions = module, function, functions
        # How a constant becomes a global: embedded (an AOT library carries its constants,
        # `embedded`) or, for the JIT, large ones bound to host memory (`host_constants`).
        self.constant_global = constant_global
        # With `alias_outputs`, returned values that are arguments' arrays (`aliases`) are
        # not written: the caller hands back the argument itself (the JIT does, a C caller
        # of an AOT library wants every output filled).
        self.alias_outputs = alias_outputs
        # With `interruptible`, every loop checks the process's interrupt flag at each
        # iteration, and every py_func call before it (`interrupts`): the JIT's programs do;
        # an ahead-of-time library, which must not reference the Python process, does not.
        self.interruptible = interruptible
        self.kernel_entry, self.op_entry = kernel_entry, op_entry
        self.symbol = symbol
        self.signature = signature_of(function)
        self.workspace = Workspace(module, symbol)
        self.memcpy = declare(self.module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                              [PTR, PTR, I64, I1])
        self.constant_arrays: dict[tuple[int, ...], ir.GlobalVariable] = {}  # `i64_array`

    # -- entry points ----------------------------------------------------------------------

    def build(self, py_entry: bool = True) -> tuple[ir.Function, ir.Function]:
        """Emit ``NAME`` and ``NAME.shapes`` (returned) and, for the JIT, ``NAME.py``."""
        program = self._program()
        shapes = self._shapes()
        if py_entry:
            add_py_entry(self.module, self.symbol, self.signature, self.written_outputs(),
                         program)
        return program, shapes

    def _value_dims(self, b: ir.IRBuilder,
                    arg_dims: list[list[ir.Value]]) -> dict[SSAValue, list[ir.Value]]:
        """Every value's dims; a resource argument's are its variable's. Returns
        `TOO_LARGE` early where a value's would not fit (`fits`)."""
        known = function_dims(b, self.function, arg_dims, self.functions)
        for arg, given in zip(self.function.body.block.args, arg_dims, strict=True):
            known.setdefault(arg, given)
        for op in self.function.body.block.ops:  # inside regions every dim is static
            if isinstance(op, ControlOp):
                for inner in op.walk():
                    values = [*inner.results] if inner is not op else []
                    values += [a for region in inner.regions for a in region.block.args]
                    for value in values:
                        if isinstance(value.type, TensorType):
                            known[value] = [i64(d) for d in value.type.get_shape()]
        ok: ir.Value = ir.Constant(I1, 1)
        for value, sizes in known.items():
            if not all(isinstance(d, ir.Constant) for d in sizes):
                ok = b.and_(ok, fits(b, sizes, shaped_type(value.type).dtype.itemsize))
        return_unless(b, ok, ir.Constant(I32, TOO_LARGE))
        return known

    def _shapes(self) -> ir.Function:
        function = ir.Function(self.module, ir.FunctionType(I32, [PTR, PTR]),
                               f"{self.symbol}.shapes")
        dims, out_dims = function.args
        b = ir.IRBuilder(function.append_basic_block("entry"))
        _, arg_dims = load_arguments(b, self.signature, None, dims)
        known = self._value_dims(b, arg_dims)
        position = 0
        for value in self.function.body.block.last_op.operands:
            for size in known[value]:
                b.store(size, b.gep(out_dims, [i64(position)], source_etype=I64))
                position += 1
        b.ret(ir.Constant(I32, 0))
        return function

    def _program(self) -> ir.Function:
        function = ir.Function(self.module, ir.FunctionType(I32, [PTR] * 4), self.symbol)
        inputs, dims, outputs, out_dims = function.args
        inputs.name, dims.name, outputs.name, out_dims.name = (
            "inputs", "dims", "outputs", "out_dims")
        b = ir.IRBuilder(function.append_basic_block("entry"))
        pointers, arg_dims = load_arguments(b, self.signature, inputs, dims)
        known = self._value_dims(b, arg_dims)
        _Body(self, b, function, pointers, known, outputs, out_dims).emit()
        return function

    def written_outputs(self) -> list[int]:
        """The positions of the returned values the program writes."""
        aliases = self.signature.aliases
        return [i for i in range(len(self.signature.outputs))
                if not (self.alias_outputs and aliases[i] >= 0)]


class _Body(RegionLowering, KernelCalls):
    """The body of one program: storage for every value, the op calls, the cleanup."""

    def emit(self) -> None:
        b = self.b
        self.check_output_dims()
        self.allocate(self.plan_storage())
        self.current: dict[SSAValue, SSAValue] = {}  # variable argument -> latest value
        for index, op in enumerate(self.ops):
            self.emit_op(op, index)
        for position, value in enumerate(self.returned):
            self.copy_into(self.output_pointer(position), value)
        for position, (_, value) in enumerate(sorted(self.final_assignments().items())):
            self.copy_into(self.output_pointer(len(self.returned) + position), value)
        b.store(ir.Constant(I32, 0), self.status)
        b.branch(self.cleanup)
        b.position_at_end(self.cleanup)
        self.p.workspace.release(b, self.workspace)
        b.ret(b.load(self.status, typ=I32))

    def emit_op(self, op: Operation, index: int) -> None:
        """Emit one op; `index` is the top-level op it is (or is inside), for status codes."""
        if isinstance(op, CondOp):
            self.emit_cond(op, index)
            return
        if isinstance(op, WhileOp):
            self.emit_while(op, index)
            return
        primitive = op.primitive
        if isinstance(op, ConstantOp):
            self.storage[op.results[0]] = self.constant(op)
        elif primitive is read_variable_p:
            source = self.current.get(op.operands[0])
            self.storage[op.results[0]] = (self.storage[source] if source is not None
                                           else self.storage[op.operands[0]])
        elif primitive is assign_variable_p:
            self.current[op.operands[0]] = op.operands[1]
        elif primitive.aliases:
            if primitive is reshape_p:
                self.check_same_size(op, index)
            self.storage[op.results[0]] = self.storage[op.operands[0]]
        elif primitive is call_p:
            callee = op.params()["callee"].name
            rows = self.split_rows(op)
            if rows:
                self.call_split(self.p.kernel_entry(callee), op, index, rows)
            else:
                self.call_entry(self.p.kernel_entry(callee), op, index, strides=False)
        elif primitive is py_func_p:
            # A SIGINT that arrived meanwhile stops the program here: in the callback, Python
            # would raise its KeyboardInterrupt before anything can catch it (`interrupts`).
            self.check_interrupt("callback", "enter")
            self.flush_assignments()
            entry = declare(self.p.module, callback_symbol(op), I32, [PTR, PTR])
            self.call_entry(entry, op, index, strides=False)
        else:
            entry = self.p.op_entry(op)
            assert entry is not None
            self.call_entry(entry, op, index, strides=True)

    def flush_assignments(self) -> None:
        """Before a py_func, whose error ends the call: the values assigned so far go into
        their variables' buffers (which the caller fills with the old values, and commits
        after such an error), so that what ran before the error stays assigned, as it does
        eagerly and in TensorFlow."""
        positions = {argument: len(self.returned) + k
                     for k, argument in enumerate(sorted(self.final_assignments()))}
        for variable, value in self.current.items():
            self.copy_into(self.output_pointer(positions[self.args.index(variable)]), value)

    def check_same_size(self, op: Operation, index: int) -> None:
        """A reshape runs no kernel that would check its operand, and its inferred (-1) dim
        is a quotient that drops a remainder: with unknown dims, the element counts may
        differ only at run time."""
        b = self.b
        sizes = []
        for value in (op.operands[0], op.results[0]):
            total: ir.Value = i64(1)
            for size in self.dims[value]:
                total = fold_mul(b, total, size)
            sizes.append(total)
        if not all(isinstance(size, ir.Constant) for size in sizes):
            self.fail_if(b.icmp_signed("!=", *sizes), OP_FAILED + index)

    def check_output_dims(self) -> None:
        """With `out_dims` given, return 1 + argument count + output index on a mismatch
        (before anything is allocated)."""
        b = self.b
        given = b.icmp_unsigned("!=", self.out_dims, ir.Constant(PTR, None))
        check = self.function.append_basic_block("check_outputs")
        checked = self.function.append_basic_block("outputs_checked")
        b.cbranch(given, check, checked)
        b.position_at_end(check)
        targets = self.returned + [v for _, v in sorted(self.final_assignments().items())]
        position = 0
        for index, value in enumerate(targets):
            ok: ir.Value = ir.Constant(I1, 1)
            for size in self.dims[value]:
                have = b.load(b.gep(self.out_dims, [i64(position)], source_etype=I64),
                              typ=I64)
                position += 1
                ok = b.and_(ok, b.icmp_signed("==", have, size))
            return_unless(b, ok, ir.Constant(I32, len(self.args) + index + 1))
        b.branch(checked)
        b.position_at_end(checked)

    def constant(self, op: ConstantOp) -> ir.Value:
        self.constants += 1
        return self.p.constant_global(self.p.module, f"{self.p.symbol}.const{self.constants}",
                                      constant_value(op))
