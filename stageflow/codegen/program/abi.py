"""The C ABI of a program: its entry points, status codes and signature, and the code
that loads and checks its arguments; the JIT's wrapper and an ahead-of-time library's
header are written against it.

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
        `NO_MEMORY`, or `INTERRUPTED` (a JIT program only, on the main thread: a SIGINT
        arrived, seen at a loop's iteration or before a py_func, `interrupts`); then the
        outputs hold nothing meaningful and nothing else was written.

    void NAME.release()
        Frees the memory kept for the next call (the next call allocates it again).

    i32 NAME.shapes(ptr dims, ptr out_dims)
        Writes the dims of the returned values for arguments of `dims`; returns as NAME.

    i32 NAME.py(PyArrayObject* arg0, ..., out0, ..., state0, ...)
        NAME for NumPy arrays (flags, ranks and output dims checked, as kernels do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llvmlite import ir
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import SSAValue

from stageflow.codegen.llvm.emitter import I1, I32, I64
from stageflow.codegen.llvm.loops import i64, return_unless
from stageflow.codegen.llvm.numpy_abi import array_data, array_dims, array_ok
from stageflow.core.primitive import ShapedType
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import ResourceTensorType, shaped_type
from stageflow.passes.support import is_op
from stageflow.primitives.state import assign_variable_p, read_variable_p

OP_FAILED = 1000
NO_MEMORY = 999
NULL_POINTER = 998  # an ahead-of-time entry given NULL where it needs memory
TOO_LARGE = 997  # a value the arguments' dims imply would take more than 2**62 bytes
INTERRUPTED = 996  # a JIT program stopped for a SIGINT (`interrupts`)
PTR = ir.PointerType()


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


def signature_of(function: FuncOp) -> ProgramSignature:
    """The program signature of an optimised function."""
    block = function.body.block
    args = list(block.args)
    ret = block.last_op
    assert isinstance(ret, ReturnOp)
    assigned: list[int] = []
    unwritten_reads: dict[SSAValue, int] = {}
    for op in block.ops:
        if is_op(op, assign_variable_p):
            index = args.index(op.operands[0])
            if index not in assigned:
                assigned.append(index)
        elif is_op(op, read_variable_p):
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


def load_arguments(b: ir.IRBuilder, signature: ProgramSignature, inputs: ir.Value | None,
                   dims: ir.Value) -> tuple[list[ir.Value], list[list[ir.Value]]]:
    """Load the argument pointers (none without `inputs`) and dims; return early with
    1 + i where argument i's dims do not fit its type (`fits`)."""
    pointers, all_dims = [], []
    position = 0
    for index, ty in enumerate(signature.inputs):
        if inputs is not None:
            pointer = b.load(b.gep(inputs, [i64(index)], source_etype=PTR), typ=PTR)
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
        ok = b.and_(ok, fits(b, given, ty.dtype.itemsize))
        return_unless(b, ok, ir.Constant(I32, index + 1))
        all_dims.append(given)
    return pointers, all_dims


def add_py_entry(module: ir.Module, symbol: str, signature: ProgramSignature,
                 written_outputs: list[int], program: ir.Function) -> None:
    """Emit ``NAME.py``: `program` for NumPy arrays, their flags and ranks checked; the
    returned values it takes are those of `written_outputs`."""
    types = (list(signature.inputs) + [signature.outputs[i] for i in written_outputs]
             + list(signature.state_outputs))
    n_inputs = len(signature.inputs)
    function = ir.Function(module, ir.FunctionType(I32, [PTR] * len(types)), f"{symbol}.py")
    b = ir.IRBuilder(function.append_basic_block("entry"))
    for index, (obj, ty) in enumerate(zip(function.args, types, strict=True)):
        is_output = index >= n_inputs
        ok = array_ok(b, obj, len(ty.shape), contiguous=True, writeable=is_output)
        return_unless(b, ok, ir.Constant(I32, index + 1))
    data_in = b.alloca(PTR, max(n_inputs, 1), name="inputs")
    data_out = b.alloca(PTR, max(len(types) - n_inputs, 1), name="outputs")
    dims_in = b.alloca(I64, max(sum(len(t.shape) for t in signature.inputs), 1),
                       name="dims")
    dims_out = b.alloca(I64, max(sum(len(t.shape) for t in types[n_inputs:]), 1),
                        name="out_dims")
    position = [0, 0]
    for index, (obj, ty) in enumerate(zip(function.args, types, strict=True)):
        side = int(index >= n_inputs)
        data, dims = (data_in, dims_in) if side == 0 else (data_out, dims_out)
        slot = index - side * n_inputs
        b.store(array_data(b, obj), b.gep(data, [i64(slot)], source_etype=PTR))
        for size in array_dims(b, obj, len(ty.shape)):
            b.store(size, b.gep(dims, [i64(position[side])], source_etype=I64))
            position[side] += 1
    b.ret(b.call(program, [data_in, dims_in, data_out, dims_out]))


def fits(b: ir.IRBuilder, dims: Sequence[ir.Value], itemsize: int) -> ir.Value:
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
