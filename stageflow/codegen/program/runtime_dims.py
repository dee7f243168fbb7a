"""Run-time dims of every value of a function, as LLVM IR.

A whole function lowered to one LLVM function allocates its intermediate buffers itself,
so it needs each value's dims while it runs, also where the types leave them unknown
(``tensor<?x784xf32>``: a batch dim known only from the inputs). `function_dims` walks the
function once and interprets each op's ``dims`` function, the one its shape rule runs on
Python ints while tracing, as i64 arithmetic on its operands' dims (`LLVMDims`):
broadcasting picks the dim that is not 1 with a ``select``, a reshape divides the element
count, a slice computes Python's slice length, and so on. Static dims are ``ir.Constant``s
and fold through the arithmetic, so a function whose types are static emits no instruction
at all. What is this module's own: the dims of calls (fused kernels by their specs, other
functions by their bodies).

Nothing is checked here: the kernels and lowered ops check their own operands at run time
and return error codes. Dims that depend on tensor values (a variable's current value)
raise ``NotImplementedError`` naming the op.
"""

from __future__ import annotations

from llvmlite import ir
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue

from stageflow.codegen.kernels.analysis import analyse
from stageflow.codegen.llvm.dim_arith import LLVMDims
from stageflow.codegen.llvm.loops import i64
from stageflow.ir.dialect import SfOp
from stageflow.passes.fuse import is_kernel
from stageflow.passes.support import is_op
from stageflow.primitives.functional import call_p

Dims = list[ir.Value]


def _static(value: SSAValue) -> list[int | None] | None:
    """The dims of a tensor value's type (None where unknown); None for non-tensors."""
    if not isinstance(value.type, TensorType):
        return None
    return [None if d < 0 else d for d in value.type.get_shape()]


def _kernel_call_dims(b: ir.IRBuilder, callee: FuncOp, operand_dims: list[Dims],
                      statics: list[list[int | None] | None]) -> list[Dims]:
    """A fused kernel's result dims from its specs: each unknown dim is the first of its
    (input, axis) sources that is not 1, as the kernel's own loop decides it."""
    specs = analyse(callee).output_shapes
    return [[i64(d) if d is not None
             else i64(spec) if isinstance(spec, int)
             else LLVMDims(b).first_not_one([operand_dims[i][a] for i, a in spec])
             for d, spec in zip(static, shape, strict=True)]
            for static, shape in zip(statics, specs, strict=True)]


def _function_call_dims(b: ir.IRBuilder, callee: FuncOp, operand_dims: list[Dims],
                        functions: dict[str, FuncOp],
                        statics: list[list[int | None] | None]) -> list[Dims]:
    """Another function's result dims: its whole body's dims on the call's operand dims
    (the call's result types may be more static than the callee's; those dims win)."""
    dims = function_dims(b, callee, operand_dims, functions)
    returned = callee.body.block.last_op
    results = []
    for static, value in zip(statics, returned.operands, strict=True):
        given = dims.get(value, [])
        results.append([] if static is None else
                       [i64(d) if d is not None else g for d, g in zip(static, given, strict=True)])
    return results


def result_dims(b: ir.IRBuilder, op: Operation, operand_dims: list[Dims],
                functions: dict[str, FuncOp]) -> list[Dims]:
    """The dims of each result of `op` (``[]`` for a resource), given its operands' dims
    (``[]`` for resources), emitted at `b`'s position."""
    statics = [_static(result) for result in op.results]
    if all(static is None or None not in static for static in statics):
        return [[] if static is None else [i64(d) for d in static] for static in statics]
    if not isinstance(op, SfOp):
        raise NotImplementedError(f"no run-time shape rule for {op.name}")
    params = op.params()
    if is_op(op, call_p):
        callee = functions[params["callee"].name]
        if is_kernel(callee):
            return _kernel_call_dims(b, callee, operand_dims, statics)
        return _function_call_dims(b, callee, operand_dims, functions, statics)
    rule = op.primitive.dims
    several = op.primitive.multiple_results
    if rule is None or (len(statics) != 1 and not several):
        raise NotImplementedError(f"the dims of {op.name}'s result depend on values or are "
                                  "not expressible as run-time shape arithmetic")
    try:
        computed = rule(LLVMDims(b), operand_dims, **params)
    except NotImplementedError as error:
        raise NotImplementedError(f"{op.name}: {error}") from None
    # A rule of several results gives a list of dims per result (`sort`).
    return [[i64(d) if d is not None else c for d, c in zip(static, dims, strict=True)]
            for static, dims in zip(statics, computed if several else [computed], strict=True)]


def function_dims(b: ir.IRBuilder, function: FuncOp, arg_dims: list[Dims],
                  functions: dict[str, FuncOp]) -> dict[SSAValue, Dims]:
    """Dims (i64 LLVM values; ir.Constant for static dims) of every tensor value of
    `function` (block arguments included), given its arguments' run-time dims.

    Resource-typed values have no dims and are left out. `functions` resolves the symbols
    of ``sf.call`` ops (kernels by their specs, other functions by recursing into them).
    """
    dims: dict[SSAValue, Dims] = {}
    for arg, given in zip(function.body.block.args, arg_dims, strict=True):
        static = _static(arg)
        if static is not None:
            dims[arg] = [i64(d) if d is not None else g for d, g in zip(static, given,
                                                                        strict=True)]
    for op in function.body.block.ops:
        if not op.results:
            continue
        operands = [dims.get(value, []) for value in op.operands]
        for result, value_dims in zip(op.results, result_dims(b, op, operands, functions),
                                      strict=True):
            if isinstance(result.type, TensorType):
                dims[result] = value_dims
    return dims
