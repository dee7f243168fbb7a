"""Run-time dims of every value of a function, as LLVM IR.

A whole function lowered to one LLVM function allocates its intermediate buffers itself,
so it needs each value's dims while it runs, also where the types leave them unknown
(``tensor<?x784xf32>``: a batch dim known only from the inputs). `function_dims` walks the
function once and emits, for every unknown dim, the i64 arithmetic of the op's shape rule
on its operands' dims: broadcasting picks the dim that is not 1 with a ``select``, a
reshape divides the element count, a slice computes Python's slice length, and so on.
Static dims are ``ir.Constant``s and fold through the arithmetic, so a function whose
types are static emits no instruction at all.

Nothing is checked here: the kernels and lowered ops check their own operands at run time
and return error codes. Dims that depend on tensor values (a variable's current value)
raise ``NotImplementedError`` naming the op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llvmlite import ir
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue

from stageflow.codegen.kernels.analysis import analyse
from stageflow.codegen.llvm.loops import fold_add, fold_mul, i64
from stageflow.codegen.lowered.movement import slice_bounds
from stageflow.core.shapes import normalize_axis
from stageflow.ir.dialect import ElementwiseOp, SfOp
from stageflow.passes.fuse import is_kernel

Dims = list[ir.Value]
# ``rule(b, operand dims, params, axis)``: dim `axis` of a single-result op's result. Rules
# are asked only for the dims the result type leaves unknown, so static dims cost nothing.
DimRule = Callable[[ir.IRBuilder, list[Dims], dict[str, Any], int], ir.Value]


def _static(value: SSAValue) -> list[int | None] | None:
    """The dims of a tensor value's type (None where unknown); None for non-tensors."""
    if not isinstance(value.type, TensorType):
        return None
    return [None if d < 0 else d for d in value.type.get_shape()]


def _is(value: ir.Value, n: int) -> bool:
    return isinstance(value, ir.Constant) and value.constant == n


def _sub(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
        return i64(x.constant - y.constant)
    return x if _is(y, 0) else b.sub(x, y)


def first_not_one(b: ir.IRBuilder, dims: Sequence[ir.Value]) -> ir.Value:
    """The first of `dims` that is not 1 (1 if all are): NumPy broadcasting of one axis,
    and the rule of a kernel's dim specs. Constants decide at compile time; one ``select``
    per unknown candidate otherwise."""
    result: ir.Value = i64(1)
    for dim in reversed(dims):
        if isinstance(dim, ir.Constant):
            result = result if dim.constant == 1 else dim
        elif _is(result, 1):  # `dim if dim != 1 else 1` is `dim`
            result = dim
        elif dim is not result:
            result = b.select(b.icmp_signed("!=", dim, i64(1)), dim, result)
    return result


def _broadcast_axis(b: ir.IRBuilder, operands: list[Dims], rank: int, axis: int) -> ir.Value:
    """Result dim `axis` of operands broadcast (right-aligned) to `rank` axes."""
    return first_not_one(b, [dims[axis - rank + len(dims)] for dims in operands
                             if axis - rank + len(dims) >= 0])


def _elementwise(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
                 axis: int) -> ir.Value:
    return _broadcast_axis(b, operands, max(len(dims) for dims in operands), axis)


def _matmul(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
            axis: int) -> ir.Value:
    x, y = operands[:2]  # matmul_add's addend takes the product's shape
    batch = max(len(x), len(y)) - 2
    if axis < batch:
        return _broadcast_axis(b, [x[:-2], y[:-2]], batch, axis)
    if axis == batch:
        return x[-1] if params["transpose_a"] else x[-2]
    return y[-2] if params["transpose_b"] else y[-1]


def _reduction(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
               axis: int) -> ir.Value:
    (x,) = operands
    axes = params["axes"]
    if params["keepdims"]:
        return i64(1) if axis in axes else x[axis]
    return [d for i, d in enumerate(x) if i not in axes][axis]


def _arg_reduction(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
                   axis: int) -> ir.Value:
    (x,) = operands
    reduced = normalize_axis(params["axis"], len(x))
    return [d for i, d in enumerate(x) if i != reduced][axis]


def _transpose(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
               axis: int) -> ir.Value:
    return operands[0][params["perm"][axis]]


def _reshape(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
             axis: int) -> ir.Value:
    """A given target dim, or for the -1 one: the element count over the other target dims
    (0 if one of them is 0, which the reshape itself then rejects)."""
    shape = params["shape"]
    if shape[axis] != -1:
        return i64(shape[axis])
    known = 1
    for d in shape:
        known *= 1 if d == -1 else d
    total: ir.Value = i64(1)
    for d in operands[0]:
        total = fold_mul(b, total, d)
    if known in (0, 1):
        return i64(0) if known == 0 else total
    if isinstance(total, ir.Constant):
        return i64(total.constant // known)
    return b.sdiv(total, i64(known))


def _slice(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
           axis: int) -> ir.Value:
    start, stop, step = params["slices"][axis]
    return slice_bounds(b, operands[0][axis], start, stop, step)[1]


def _concat(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
            axis: int) -> ir.Value:
    """The sum along the concatenation axis; elsewhere the operands agree (the op checks),
    so a static dim of any of them is taken where there is one."""
    if axis == normalize_axis(params["axis"], len(operands[0])):
        total: ir.Value = i64(0)
        for dims in operands:
            total = fold_add(b, total, dims[axis])
        return total
    candidates = [dims[axis] for dims in operands]
    return next((d for d in candidates if isinstance(d, ir.Constant)), candidates[0])


def _pad(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
         axis: int) -> ir.Value:
    lo, hi = params["pads"][axis]
    return fold_add(b, operands[0][axis], i64(lo + hi))


def _gather(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
            axis: int) -> ir.Value:
    source, indices = operands
    gathered = normalize_axis(params["axis"], len(source))
    return (source[:gathered] + indices + source[gathered + 1:])[axis]


def _shape_param(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
                 axis: int) -> ir.Value:
    return i64(params["shape"][axis])


def window_positions(b: ir.IRBuilder, size: ir.Value, window: ir.Value, stride: int,
                     padding: tuple[int, int], dilation: int = 1) -> ir.Value:
    """``(size + lo + hi - (window - 1) * dilation - 1) // stride + 1`` (conv.window_output_size),
    clamped at 0 so that a window larger than its input never yields a negative dim to
    allocate (the op reports that input itself)."""
    span = fold_mul(b, _sub(b, window, i64(1)), i64(dilation))
    free = _sub(b, fold_add(b, size, i64(padding[0] + padding[1])), fold_add(b, span, i64(1)))
    if isinstance(free, ir.Constant):
        return i64(max(free.constant // stride + 1, 0))
    count = fold_add(b, free if stride == 1 else b.sdiv(free, i64(stride)), i64(1))
    return b.select(b.icmp_signed("<", free, i64(0)), i64(0), count)


def _conv2d(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
            axis: int) -> ir.Value:
    x, w = operands
    if axis in (1, 2):
        spatial = axis - 1
        return window_positions(b, x[axis], w[spatial], params["strides"][spatial],
                                params["padding"][spatial], params["dilations"][spatial])
    return x[0] if axis == 0 else w[3]


def _reduce_window(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
                   axis: int) -> ir.Value:
    (x,) = operands
    if axis in (1, 2):
        spatial = axis - 1
        return window_positions(b, x[axis], i64(params["window"][spatial]),
                                params["strides"][spatial], params["padding"][spatial])
    return x[axis]


def _same_as_operand(b: ir.IRBuilder, operands: list[Dims], params: dict[str, Any],
                     axis: int) -> ir.Value:
    return operands[0][axis]


RULES: dict[str, DimRule] = {
    "matmul": _matmul,
    "matmul_add": _matmul,
    "reduce_sum": _reduction,
    "reduce_prod": _reduction,
    "reduce_max": _reduction,
    "reduce_min": _reduction,
    "argmax": _arg_reduction,
    "argmin": _arg_reduction,
    "transpose": _transpose,
    "reshape": _reshape,
    "slice": _slice,
    "concat": _concat,
    "pad": _pad,
    "gather": _gather,
    "broadcast_to": _shape_param,
    "iota": _shape_param,
    "conv2d": _conv2d,
    "reduce_window": _reduce_window,
    "stop_gradient": _same_as_operand,
}


def _kernel_call_dims(b: ir.IRBuilder, callee: FuncOp, operand_dims: list[Dims],
                      statics: list[list[int | None] | None]) -> list[Dims]:
    """A fused kernel's result dims from its specs: each unknown dim is the first of its
    (input, axis) sources that is not 1, as the kernel's own loop decides it."""
    specs = analyse(callee).output_shapes
    return [[i64(d) if d is not None
             else i64(spec) if isinstance(spec, int)
             else first_not_one(b, [operand_dims[i][a] for i, a in spec])
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
    name = op.primitive.name
    if name == "call":
        callee = functions[params["callee"].name]
        if is_kernel(callee):
            return _kernel_call_dims(b, callee, operand_dims, statics)
        return _function_call_dims(b, callee, operand_dims, functions, statics)
    rule = _elementwise if isinstance(op, ElementwiseOp) else RULES.get(name)
    if rule is None or len(statics) != 1:
        raise NotImplementedError(f"the dims of {op.name}'s result depend on values or are "
                                  "not expressible as run-time shape arithmetic")
    (static,) = statics
    return [[i64(d) if d is not None else rule(b, operand_dims, params, axis)
             for axis, d in enumerate(static)]]


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
