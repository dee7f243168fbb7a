"""Whole functions as one LLVM function: every op of an optimised function in one call.

A compiled function could run its ops as steps from Python, each a call into a kernel;
below a few microseconds per op that overhead dominates small tensors (a training step
on a batch of 64, an HMC leapfrog on 16 chains). Here one LLVM function does what the
steps do: it computes every value's dims from its arguments' (`shape_functions`),
allocates the buffers of the plan that `plan-buffers` wrote into the IR, calls each fused
kernel and each lowered op (`structured`) through their C entry points, checks their status
codes, and keeps its buffers' memory for the next call. The same function is what an
ahead-of-time library exports, so the JIT and the AOT path share it.

C ABI of a program (one per function)::

    i32 NAME(ptr inputs, ptr dims, ptr outputs, ptr out_dims)
        inputs: one data pointer per argument of the function, C-contiguous and aligned;
        for an ``!sf.resource`` argument, the variable's current value. dims: every
        argument's sizes (i64), argument after argument (a resource: its value's).
        outputs: the returned values, then the new value of every variable the function
        assigns (in argument order): C-contiguous buffers of the dims ``NAME.shapes``
        reports, overlapping nothing. out_dims: null, or the dims of the outputs as the
        caller allocated them, to be checked. Returns 0, or 1 + the index of an argument
        whose dims do not fit its type, or `OP_FAILED` + the index of the op whose kernel
        refused its operands (inconsistent unknown dims, an index out of range), or
        `NO_MEMORY`; then the outputs hold nothing meaningful and nothing else was written.

    void NAME.release()
        Frees the memory kept for the next call (the next call allocates it again).

    i32 NAME.shapes(ptr dims, ptr out_dims)
        Writes the dims of the returned values for arguments of `dims`; returns as NAME.

    i32 NAME.py(PyArrayObject* arg0, ..., out0, ..., state0, ...)
        NAME for NumPy arrays (flags, ranks and output dims checked, as kernels do).

Memory: a buffer of the plan is room in the program's workspace (one block kept from call
to call, `workspace`) at the largest size any value in it takes (sizes are computed at run
time, so unknown dims are fine); returned values and
new variable values are computed straight into the caller's outputs where an op computes
them; a reshape aliases its operand; other views (broadcast, transpose, slice) are copies
into memory of their own. Variable writes are deferred: a read after a write sees the
written value, and the variables' own storage is never written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, Region, SSAValue

from stageflow.codegen.kernels.analysis import split_rows
from stageflow.codegen.llvm.emitter import I1, I8, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.loops import fold_mul, i64, return_unless
from stageflow.codegen.llvm.numpy_abi import array_data, array_dims, array_ok
from stageflow.codegen.lowered.rule import contiguous_strides
from stageflow.codegen.lowered.tasks import MAX_TASKS, cpu_count, run_calls
from stageflow.codegen.program.dims import function_dims
from stageflow.codegen.program.workspace import ALIGNMENT, Workspace
from stageflow.core.op_facts import HostOnly, LoweredBy, Memory
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.ir.attributes import decode
from stageflow.ir.builder import constant_value, source_location
from stageflow.ir.control import CondOp, ControlOp, WhileOp, YieldOp, nested_ops
from stageflow.ir.dialect import ConstantOp, SfOp
from stageflow.ir.types import ResourceTensorType, shaped_type
from stageflow.passes.fuse import is_kernel, reduced_results
from stageflow.passes.plan_buffers import BUFFER_ATTR

OP_FAILED = 1000
NO_MEMORY = 999
NULL_POINTER = 998  # an ahead-of-time entry given NULL where it needs memory
TOO_LARGE = 997  # a value the arguments' dims imply would take more than 2**62 bytes
# A kernel call of results this large splits its rows over the cores (`split_rows`): a
# thread costs ~35 us to start, a 2^18-element kernel of a few ops a few hundred.
SPLIT_KERNEL_ELEMENTS = 1 << 18
# The ops a program emits itself (no lowered-op entry), besides those whose result aliases
# their operand: what a primitive's ``LoweredBy.PROGRAM`` fact expects.
PROGRAM_OPS = frozenset({"constant", "read_variable", "assign_variable", "call", "py_func"})
_PTR = ir.PointerType()


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



def value_type(value: SSAValue) -> ShapedType:
    """The array type of a tensor value, or of the variable a resource value holds."""
    ty = value.type
    if isinstance(ty, ResourceTensorType):
        return shaped_type(ty.value)
    return shaped_type(ty)


@dataclass(frozen=True)
class ProgramSignature:
    """What a program takes and gives (for its callers: the JIT wrapper, the C header)."""

    name: str
    inputs: tuple[ShapedType, ...]  # per argument; a resource argument: its value's type
    resources: tuple[bool, ...]  # which arguments are variables
    outputs: tuple[ShapedType, ...]  # the returned values
    assigned: tuple[int, ...]  # the argument indices of the variables written, in order
    # Per returned value: the argument whose array it is at the call's start (an argument,
    # or a variable read before any write to it), else -1.
    aliases: tuple[int, ...] = ()

    @property
    def state_outputs(self) -> tuple[ShapedType, ...]:
        return tuple(self.inputs[i] for i in self.assigned)


# Resolves a kernel call or a lowered op to the LLVM function with its C entry point.
KernelEntry = Callable[[str], ir.Function]
OpEntry = Callable[[SfOp], ir.Function | None]


def signature_of(function: FuncOp) -> ProgramSignature:
    """The program signature of an optimised function."""
    block = function.body.block
    args = list(block.args)
    ret = block.last_op
    assert isinstance(ret, ReturnOp)
    assigned: list[int] = []
    unwritten_reads: dict[SSAValue, int] = {}
    for op in block.ops:
        if isinstance(op, SfOp) and op.primitive.name == "assign_variable":
            index = args.index(op.operands[0])
            if index not in assigned:
                assigned.append(index)
        elif isinstance(op, SfOp) and op.primitive.name == "read_variable":
            index = args.index(op.operands[0])
            if index not in assigned:
                unwritten_reads[op.results[0]] = index
    aliases = tuple(args.index(v) if v in args else unwritten_reads.get(v, -1)
                    for v in ret.operands)
    return ProgramSignature(
        function.sym_name.data,
        tuple(value_type(a) for a in args),
        tuple(isinstance(a.type, ResourceTensorType) for a in args),
        tuple(value_type(v) for v in ret.operands),
        tuple(sorted(assigned)),
        aliases,
    )


def callback_symbol(op: SfOp) -> str:
    """The symbol a program calls a `py_func` op through: ``i32 (ptr data, ptr dims)``
    like a kernel's entry, resolved when the program is linked to the callable the op
    names (`runtime.callbacks`)."""
    return f"sf.callback.{op.params()['func']}"


def rows_to_split(kernel: FuncOp) -> int:
    """The rows a program splits a call of `kernel` over the cores by, 0 where it calls it
    whole: a kernel that can run on blocks of rows (`split_rows`), with no reductions, whose
    results all have one static shape of at least `SPLIT_KERNEL_ELEMENTS` elements. Such a
    kernel is compiled with its leading dim unknown (by the JIT's executable from
    `MIN_PARALLEL_ELEMENTS` on, by `whole_function_module` here)."""
    if reduced_results(kernel) or split_rows(kernel) is None:
        return 0
    shapes = {tuple(shaped_type(ty).shape) for ty in kernel.function_type.outputs.data}
    if len(shapes) != 1:
        return 0
    (shape,) = shapes
    if not shape or None in shape or shape[0] < 2 or int(np.prod(shape)) < SPLIT_KERNEL_ELEMENTS:
        return 0
    return shape[0]


def emits_itself(primitive: Primitive) -> bool:
    """Whether a program emits `primitive`'s ops inline, with no lowered-op entry."""
    return primitive.aliases or primitive.name in PROGRAM_OPS


def _owns_result(op: Operation) -> bool:
    """Whether the program computes `op`'s results into memory of their own (not an alias
    of an operand, a constant or a variable's storage; a region op's results are what its
    regions yield)."""
    if not isinstance(op, SfOp):
        return False
    return not (op.primitive.aliases or op.primitive.memory is Memory.EXTERNAL)


def _at(op: Operation) -> str:
    location = source_location(op)
    return f" (at {location})" if location is not None else ""


def supported(function: FuncOp, functions: dict[str, FuncOp], has_lowering: OpEntry) -> str:
    """Why `function` cannot become a program ('' when it can). An op that only the host
    runs is named with the reason its primitive declares and the user's line it came from,
    as the function then runs as Python steps."""
    return _supported_ops(list(function.body.block.ops), functions, has_lowering)


def _supported_ops(ops: list[Operation], functions: dict[str, FuncOp],
                   has_lowering: OpEntry) -> str:
    for op in ops:
        if isinstance(op, ReturnOp | ConstantOp | YieldOp):
            continue
        if isinstance(op, ControlOp):
            reason = _supported_region_op(op, functions, has_lowering)
            if reason:
                return reason
            continue
        if not isinstance(op, SfOp):
            return f"{op.name} is not an sf op"
        lowering = op.primitive.lowered_by
        if isinstance(lowering, HostOnly):
            return f"{op.name} runs on the host only: {lowering.reason}{_at(op)}"
        if op.primitive.name == "call":
            callee = functions.get(op.params()["callee"].name)
            if callee is None or not is_kernel(callee):
                return f"a call of a function that is not a fused kernel{_at(op)}"
        elif op.primitive.name == "py_func" and not all(map(_static_tensor, op.results)):
            return f"a py_func's results have unknown dims{_at(op)}"
        elif lowering is LoweredBy.PROGRAM and emits_itself(op.primitive):
            continue
        elif has_lowering(op) is None:
            return f"{op.name} has no lowering{_at(op)}"
        for value in [*op.operands, *op.results]:
            if not isinstance(value.type, TensorType | ResourceTensorType):
                return f"{op.name} has an operand or result that is not a ranked tensor"
    return ""


def _supported_region_op(op: ControlOp, functions: dict[str, FuncOp],
                         has_lowering: OpEntry) -> str:
    """Why a region op cannot be part of a program ('' when it can): its regions' ops must
    be, none may touch a variable (a program defers variable writes to its end, which a
    write in one branch or iteration would break), and every value it carries or computes
    must have static dims (its buffers are allocated once, before it runs)."""
    for inner in nested_ops_of(op):
        if isinstance(inner, SfOp) and inner.primitive.name in ("read_variable",
                                                                 "assign_variable"):
            return f"{op.name} reads or writes a variable inside a region{_at(inner)}"
        for value in inner.results:
            if not _static_tensor(value):
                return f"{op.name} computes a value of unknown dims inside a region{_at(inner)}"
    for value in [*op.results, *(arg for region in op.regions for arg in region.block.args)]:
        if not _static_tensor(value):
            return f"{op.name} carries a value of unknown dims{_at(op)}"
    for region in op.regions:
        reason = _supported_ops(list(region.block.ops), functions, has_lowering)
        if reason:
            return reason
    return ""


def nested_ops_of(op: ControlOp) -> list[Operation]:
    """Every op inside `op`'s regions, nested regions included."""
    return [inner for region in op.regions for inner in nested_ops(region)]


def _static_tensor(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType) and value.type.has_static_shape()


class ProgramBuilder:
    """Emits the program of one function into an LLVM module."""

    def __init__(self, module: ir.Module, function: FuncOp, functions: dict[str, FuncOp],
                 kernel_entry: KernelEntry, op_entry: OpEntry, symbol: str,
                 alias_outputs: bool = False) -> None:
        self.module, self.function, self.functions = module, function, functions
        # With `alias_outputs`, returned values that are arguments' arrays (`aliases`) are
        # not written: the caller hands back the argument itself (the JIT does, a C caller
        # of an AOT library wants every output filled).
        self.alias_outputs = alias_outputs
        self.kernel_entry, self.op_entry = kernel_entry, op_entry
        self.symbol = symbol
        self.signature = signature_of(function)
        self.workspace = Workspace(module, symbol)
        self._memcpy = declare(self.module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                                     [_PTR, _PTR, I64, I1])
        self.constant_arrays: dict[tuple[int, ...], ir.GlobalVariable] = {}  # `i64_array`

    # -- entry points ----------------------------------------------------------------------

    def build(self, py_entry: bool = True) -> tuple[ir.Function, ir.Function]:
        """Emit ``NAME`` and ``NAME.shapes`` (returned) and, for the JIT, ``NAME.py``."""
        program = self._program()
        shapes = self._shapes()
        if py_entry:
            self._py_entry(program)
        return program, shapes

    def _arguments(self, b: ir.IRBuilder, inputs: ir.Value | None,
                   dims: ir.Value) -> tuple[list[ir.Value], list[list[ir.Value]]]:
        """Load the argument pointers and dims; return early with 1 + i on bad dims."""
        pointers, all_dims = [], []
        position = 0
        for index, ty in enumerate(self.signature.inputs):
            if inputs is not None:
                pointer = b.load(b.gep(inputs, [i64(index)], source_etype=_PTR), typ=_PTR)
                pointer.name = f"arg{index}"
                pointers.append(pointer)
            given = []
            ok: ir.Value = ir.Constant(I1, 1)
            for axis, static in enumerate(ty.shape):
                size = b.load(b.gep(dims, [i64(position)], source_etype=I64), typ=I64)
                size.name = f"arg{index}.d{axis}"
                position += 1
                if static is None:
                    ok = b.and_(ok, b.icmp_signed(">=", size, i64(0)))
                    given.append(size)
                else:
                    ok = b.and_(ok, b.icmp_signed("==", size, i64(static)))
                    given.append(i64(static))
            ok = b.and_(ok, _fits(b, given, ty.dtype.itemsize))
            return_unless(b, ok, ir.Constant(I32, index + 1))
            all_dims.append(given)
        return pointers, all_dims

    def _value_dims(self, b: ir.IRBuilder,
                    arg_dims: list[list[ir.Value]]) -> dict[SSAValue, list[ir.Value]]:
        """Every value's dims; a resource argument's are its variable's. Returns
        `TOO_LARGE` early where a value's would not fit (`_fits`)."""
        known = function_dims(b, self.function, arg_dims, self.functions)
        for arg, given in zip(self.function.body.block.args, arg_dims, strict=True):
            known.setdefault(arg, given)
        for op in self.function.body.block.ops:  # inside regions every dim is static
            if isinstance(op, ControlOp):
                for inner in [op, *nested_ops_of(op)]:
                    values = [*inner.results] if inner is not op else []
                    values += [a for region in inner.regions for a in region.block.args]
                    for value in values:
                        if isinstance(value.type, TensorType):
                            known[value] = [i64(d) for d in value.type.get_shape()]
        ok: ir.Value = ir.Constant(I1, 1)
        for value, sizes in known.items():
            if not all(isinstance(d, ir.Constant) for d in sizes):
                ok = b.and_(ok, _fits(b, sizes, shaped_type(value.type).dtype.itemsize))
        return_unless(b, ok, ir.Constant(I32, TOO_LARGE))
        return known

    def _shapes(self) -> ir.Function:
        function = ir.Function(self.module, ir.FunctionType(I32, [_PTR, _PTR]),
                               f"{self.symbol}.shapes")
        dims, out_dims = function.args
        b = ir.IRBuilder(function.append_basic_block("entry"))
        _, arg_dims = self._arguments(b, None, dims)
        known = self._value_dims(b, arg_dims)
        position = 0
        for value in self.function.body.block.last_op.operands:
            for size in known[value]:
                b.store(size, b.gep(out_dims, [i64(position)], source_etype=I64))
                position += 1
        b.ret(ir.Constant(I32, 0))
        return function

    def _program(self) -> ir.Function:
        function = ir.Function(self.module, ir.FunctionType(I32, [_PTR] * 4), self.symbol)
        inputs, dims, outputs, out_dims = function.args
        inputs.name, dims.name, outputs.name, out_dims.name = (
            "inputs", "dims", "outputs", "out_dims")
        b = ir.IRBuilder(function.append_basic_block("entry"))
        pointers, arg_dims = self._arguments(b, inputs, dims)
        known = self._value_dims(b, arg_dims)
        _Body(self, b, function, pointers, known, outputs, out_dims).emit()
        return function

    def written_outputs(self) -> list[int]:
        """The positions of the returned values the program writes."""
        aliases = self.signature.aliases
        return [i for i in range(len(self.signature.outputs))
                if not (self.alias_outputs and aliases[i] >= 0)]

    def _py_entry(self, program: ir.Function) -> None:
        sig = self.signature
        types = (list(sig.inputs) + [sig.outputs[i] for i in self.written_outputs()]
                 + list(sig.state_outputs))
        n_inputs = len(sig.inputs)
        function = ir.Function(self.module, ir.FunctionType(I32, [_PTR] * len(types)),
                               f"{self.symbol}.py")
        b = ir.IRBuilder(function.append_basic_block("entry"))
        for index, (obj, ty) in enumerate(zip(function.args, types, strict=True)):
            is_output = index >= n_inputs
            ok = array_ok(b, obj, len(ty.shape), contiguous=True, writeable=is_output)
            return_unless(b, ok, ir.Constant(I32, index + 1))
        data_in = b.alloca(_PTR, max(n_inputs, 1), name="inputs")
        data_out = b.alloca(_PTR, max(len(types) - n_inputs, 1), name="outputs")
        dims_in = b.alloca(I64, max(sum(len(t.shape) for t in sig.inputs), 1), name="dims")
        dims_out = b.alloca(I64, max(sum(len(t.shape) for t in types[n_inputs:]), 1),
                            name="out_dims")
        position = [0, 0]
        for index, (obj, ty) in enumerate(zip(function.args, types, strict=True)):
            side = int(index >= n_inputs)
            data, dims = (data_in, dims_in) if side == 0 else (data_out, dims_out)
            slot = index - side * n_inputs
            b.store(array_data(b, obj), b.gep(data, [i64(slot)], source_etype=_PTR))
            for size in array_dims(b, obj, len(ty.shape)):
                b.store(size, b.gep(dims, [i64(position[side])], source_etype=I64))
                position[side] += 1
        b.ret(b.call(program, [data_in, dims_in, data_out, dims_out]))


@dataclass(frozen=True)
class _Offset:
    """Where a buffer starts in the workspace (bytes), before the workspace is acquired."""

    value: ir.Value


class _Body:
    """The body of one program: storage for every value, the op calls, the cleanup."""

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
        self.workspace: ir.Value = ir.Constant(_PTR, None)
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
        return b.load(b.gep(self.outputs, [i64(position)], source_etype=_PTR), typ=_PTR)

    # -- storage ---------------------------------------------------------------------------

    def plan_storage(self) -> dict[SSAValue, int]:
        """Decide where each op result lives; the buffer id of each planned one."""
        computed = {r for op in self.ops if _owns_result(op) for r in op.results}
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
            if isinstance(op, SfOp) and op.primitive.name == "assign_variable":
                finals[self.args.index(op.operands[0])] = op.operands[1]
        return finals

    def assign_count(self, value: SSAValue) -> int:
        return sum(1 for op in self.ops if isinstance(op, SfOp)
                   and op.primitive.name == "assign_variable" and op.operands[1] is value)

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
            inner = nested_ops_of(op) if isinstance(op, ControlOp) else []
            for owner in [op, *inner]:
                if not _owns_result(owner):
                    continue
                for result in owner.results:
                    if result not in self.storage:
                        self.storage[result] = self.place(self.nbytes(result))
            for owner in [op, *inner]:
                if isinstance(owner, WhileOp):
                    self.spares[owner] = [(self.place(self.nbytes(r)),
                                           self.place(self.nbytes(r))) for r in owner.results]
                elif isinstance(owner, CondOp):
                    self.copies[owner] = [self.place(self.nbytes(r)) for r in owner.results]
        self.workspace = self.p.workspace.acquire(b, self.used)
        self.fail_if(b.icmp_unsigned("==", self.workspace, ir.Constant(_PTR, None)), NO_MEMORY)
        for value, offset in list(self.storage.items()):
            if isinstance(offset, _Offset):
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
        memory stored element by element. The stores and their address computations were
        over half the instructions of the small ResNet step's program (2,365 stores, 2,958
        getelementptrs in 9,962 lines), whose IR took ~0.3 s of Python to build."""
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

    def place(self, size: ir.Value) -> _Offset:
        """Room for `size` bytes in the workspace: its offset, aligned to `ALIGNMENT`."""
        b = self.b
        offset = self.used
        self.used = b.add(offset, b.and_(b.add(size, i64(ALIGNMENT - 1)), i64(-ALIGNMENT)))
        return _Offset(offset)

    def at(self, offset: _Offset) -> ir.Value:
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

    # -- the ops ---------------------------------------------------------------------------

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
        name = op.primitive.name
        if isinstance(op, ConstantOp):
            self.storage[op.results[0]] = self.constant(op)
        elif name == "read_variable":
            source = self.current.get(op.operands[0])
            self.storage[op.results[0]] = (self.storage[source] if source is not None
                                           else self.storage[op.operands[0]])
        elif name == "assign_variable":
            self.current[op.operands[0]] = op.operands[1]
        elif op.primitive.aliases:
            if name == "reshape":
                self.check_same_size(op, index)
            self.storage[op.results[0]] = self.storage[op.operands[0]]
        elif name == "call":
            callee = op.params()["callee"].name
            rows = self.split_rows(op)
            if rows:
                self.call_split(self.p.kernel_entry(callee), op, index, rows)
            else:
                self.call_entry(self.p.kernel_entry(callee), op, index, strides=False)
        elif name == "py_func":
            entry = declare(self.p.module, callback_symbol(op), I32, [_PTR, _PTR])
            self.call_entry(entry, op, index, strides=False)
        else:
            entry = self.p.op_entry(op)
            assert entry is not None
            self.call_entry(entry, op, index, strides=True)

    def emit_region(self, region: Region, index: int) -> list[ir.Value]:
        """Emit a region's ops at the current position; the storage of what it yields."""
        for op in region.block.ops:
            if not isinstance(op, YieldOp):
                self.emit_op(op, index)
        return [self.storage[value] for value in region.block.last_op.operands]

    def copy_unless(self, same: ir.Value, target: ir.Value, source: ir.Value,
                    nbytes: ir.Value) -> None:
        """Copy `nbytes` from `source` to `target` where `same` is false."""
        b = self.b
        copy = self.function.append_basic_block("copy")
        done = self.function.append_basic_block("copied")
        b.cbranch(same, done, copy)
        b.position_at_end(copy)
        b.call(self.p._memcpy, [target, source, nbytes, ir.Constant(I1, 0)])
        b.branch(done)
        b.position_at_end(done)

    def emit_cond(self, op: CondOp, index: int) -> None:
        """A branch per region; each result's storage is that of the value the taken
        region yields (a phi: nothing is copied)."""
        b = self.b
        selector = self.load_index(op.index, len(op.branches))
        merge = self.function.append_basic_block("cond.end")
        blocks = [self.function.append_basic_block(f"cond.{i}") for i in range(len(op.branches))]
        switch = b.switch(selector, blocks[-1])
        for position, block in enumerate(blocks[:-1]):
            switch.add_case(ir.Constant(I64, position), block)
        incoming: list[tuple[list[ir.Value], ir.Block]] = []
        for region, block in zip(op.branches, blocks, strict=True):
            b.position_at_end(block)
            self.emit_region(region, index)
            owned = _owned_inside(region)
            yielded = []
            for copy, value in zip(self.copies[op], region.block.last_op.operands, strict=True):
                if value not in owned:  # memory of something else: the result gets a copy
                    self.copy_into(copy, value)
                yielded.append(self.storage[value] if value in owned else copy)
            incoming.append((yielded, b.block))
            b.branch(merge)
        b.position_at_end(merge)
        for position, result in enumerate(op.results):
            phi = b.phi(_PTR, name=f"cond.r{position}")
            for yielded, block in incoming:
                phi.add_incoming(yielded[position], block)
            self.storage[result] = phi

    def load_index(self, value: SSAValue, count: int) -> ir.Value:
        """The region an ``sf.cond`` operand selects, as an i64 (a bool: 0 when true)."""
        b = self.b
        ty = value_type(value)
        width = 8 * ty.dtype.itemsize
        loaded = b.load(self.storage[value], typ=ir.IntType(width))
        if ty.dtype == np.bool_:
            return b.select(b.icmp_unsigned("!=", loaded, ir.Constant(loaded.type, 0)),
                            i64(0), i64(1))
        position = b.sext(loaded, I64) if width < 64 else loaded
        inside = b.and_(b.icmp_signed(">=", position, i64(0)),
                        b.icmp_signed("<", position, i64(count)))
        return b.select(inside, position, i64(count - 1))

    def emit_while(self, op: WhileOp, index: int) -> None:
        """A loop whose carried values live in two buffers each, written in turn: the body
        computes the next value straight into the buffer the current one is not in (or
        copies it there when it is not computed by an op of the body), then the two
        swap. The first iteration reads the initial values where they are. A value the
        body only updates row by row (`update_index`) is copied once into the loop's
        buffer and updated there in place."""
        b = self.b
        inits = [self.storage[v] for v in op.operands]
        spares = self.spares[op]
        header = self.function.append_basic_block("while.cond")
        body = self.function.append_basic_block("while.body")
        done = self.function.append_basic_block("while.end")
        yielded = list(op.body_region.block.last_op.operands)
        in_place = _updated_in_place(op.body_region, yielded)
        for k in in_place:  # the loop's own copy, which the body then updates row by row
            self.copy_unless(ir.Constant(I1, 0), spares[k][0], inits[k],
                             self.nbytes(op.operands[k]))
        entry = b.block
        b.branch(header)
        b.position_at_end(header)
        current = [b.phi(_PTR, name=f"while.v{k}") for k in range(len(inits))]
        spare = [b.phi(_PTR, name=f"while.s{k}") for k in range(len(inits))]
        for k, (init, (first, second)) in enumerate(zip(inits, spares, strict=True)):
            current[k].add_incoming(first if k in in_place else init, entry)
            spare[k].add_incoming(second if k in in_place else first, entry)
        for arg, pointer in zip(op.cond_region.block.args, current, strict=True):
            self.storage[arg] = pointer
        (predicate,) = self.emit_region(op.cond_region, index)
        flag = b.load(predicate, typ=I8)
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(I8, 0)), body, done)
        b.position_at_end(body)
        for arg, pointer in zip(op.body_region.block.args, current, strict=True):
            self.storage[arg] = pointer
        direct = _written_in_place(op.body_region, yielded) - set(in_place)
        for k in direct:
            self.storage[yielded[k]] = spare[k]
        for k in in_place:
            self.storage[yielded[k]] = current[k]
        self.emit_region(op.body_region, index)
        for k, value in enumerate(yielded):
            if k not in direct and k not in in_place:
                self.copy_into(spare[k], value)
        latch = b.block
        for k, ((init, (_, second)), pointer) in enumerate(
                zip(zip(inits, spares, strict=True), current, strict=True)):
            if k in in_place:
                current[k].add_incoming(pointer, latch)
                spare[k].add_incoming(spare[k], latch)
                continue
            current[k].add_incoming(spare[k], latch)
            was_init = b.icmp_unsigned("==", pointer, init)
            spare[k].add_incoming(b.select(was_init, second, pointer), latch)
        b.branch(header)
        b.position_at_end(done)
        for result, init, pointer, target in zip(op.results, inits, current, spare,
                                                 strict=True):
            # after no iteration a result would be its initial value's memory: a copy
            # keeps results the loop's own
            self.copy_unless(b.icmp_unsigned("!=", pointer, init), target, init,
                             self.nbytes(result))
            self.storage[result] = b.select(b.icmp_unsigned("==", pointer, init), target,
                                            pointer)

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
        given = b.icmp_unsigned("!=", self.out_dims, ir.Constant(_PTR, None))
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
        b.call(self.p._memcpy, [target, source, self.nbytes(value), ir.Constant(I1, 0)])
        b.branch(done)
        b.position_at_end(done)

    def constant(self, op: ConstantOp) -> ir.Value:
        self.constants += 1
        return constant_bytes(self.p.module, f"{self.p.symbol}.const{self.constants}",
                              constant_value(op))

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
        data = self.alloca(_PTR, MAX_TASKS * len(values))
        dims = self.alloca(I64, MAX_TASKS * total)

        def arguments(t: ir.Value) -> tuple[ir.Value, ir.Value]:
            first = b.sdiv(b.mul(i64(rows), t), tasks)
            last = b.sdiv(b.mul(i64(rows), b.add(t, i64(1))), tasks)
            own_data = b.gep(data, [b.mul(t, i64(len(values)))], source_etype=_PTR)
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
                b.store(pointer, b.gep(own_data, [i64(slot)], source_etype=_PTR))
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
        data = self.alloca(_PTR, max(len(values), 1))
        for slot, value in enumerate(values):
            b.store(self.storage[value], b.gep(data, [i64(slot)], source_etype=_PTR))
        args = [data, self.i64_array([s for v in values for s in self.dims[v]])]
        if strides:
            args.append(self.i64_array(
                [s for v in op.operands for s in contiguous_strides(b, self.dims[v])]))
        code = b.call(entry, args)
        self.fail_if(b.icmp_signed("!=", code, ir.Constant(I32, 0)),
                     ir.Constant(I32, OP_FAILED + index))


def _updated_in_place(body: Region, yielded: list[SSAValue]) -> set[int]:
    """The positions whose next value the body computes by an `update_index` of the
    current one, which nothing else in the body reads: the row is written into the loop's
    buffer itself, and the rest is not copied at every iteration."""
    found: set[int] = set()
    for k, (arg, value) in enumerate(zip(body.block.args, yielded, strict=True)):
        owner = value.owner
        if (isinstance(owner, SfOp) and owner.primitive.name == "update_index"
                and owner.parent_block() is body.block and owner.operands[0] is arg
                and len(list(arg.uses)) == 1 and yielded.count(value) == 1):
            found.add(k)
    return found


def _owned_inside(region: Region) -> set[SSAValue]:
    """The values of `region` whose memory is the region's own: results of its ops that
    compute into memory of their own, and of its region ops (whose results are theirs)."""
    return {r for op in region.block.ops if _owns_result(op) or isinstance(op, ControlOp)
            for r in op.results}


def _written_in_place(body: Region, yielded: list[SSAValue]) -> set[int]:
    """The positions of the yielded values a loop body's own ops compute into memory of
    their own, each yielded once: those can be computed straight into a carried buffer."""
    owned = {r for op in body.block.ops if _owns_result(op) for r in op.results}
    return {k for k, value in enumerate(yielded)
            if value in owned and yielded.count(value) == 1}


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


def _fits(b: ir.IRBuilder, dims: Sequence[ir.Value], itemsize: int) -> ir.Value:
    """Whether an array of `dims` (each >= 0) takes at most 2**62 bytes, its dims counted
    as if a 0 among them were a 1: every product of dims the program computes (sizes,
    offsets) then fits in an i64. Dims whose product overflowed once gave 0 elements and
    wrote out of bounds."""
    ok: ir.Value = ir.Constant(I1, 1)
    room: ir.Value = i64((1 << 62) // max(itemsize, 1))
    for size in dims:
        ok = b.and_(ok, b.icmp_signed("<=", size, room))
        positive = b.icmp_signed(">", size, i64(0))
        room = b.select(positive, b.sdiv(room, b.select(positive, size, i64(1))), room)
    return ok
