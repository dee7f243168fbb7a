"""Whether a function can become a program, and why not: checked before anything is
emitted, so that a function that cannot runs as Python steps with the reason named.

Every op must have a lowered-op entry, be a call of a fused kernel, or be one of the ops
a program emits itself; an op that only the host runs is named with the reason its
primitive declares and the user's line it came from. Region ops must keep to what a
program can place ahead: static dims inside, and no variable touched (writes are deferred
to the program's end, which a write in one branch or iteration would break).
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from stageflow.core.op_facts import Effect, HostOnly, LoweredBy
from stageflow.core.primitive import Primitive
from stageflow.ir.builder import source_location
from stageflow.ir.control import ControlOp, YieldOp
from stageflow.ir.dialect import ConstantOp, SfOp
from stageflow.ir.types import ResourceTensorType
from stageflow.passes.fuse import is_kernel
from stageflow.primitives.control import py_func_p
from stageflow.primitives.functional import call_p
from stageflow.primitives.state import assign_variable_p, read_variable_p
from stageflow.primitives.structural import constant_p

# Resolves a lowered op to the LLVM function with its C entry point (None: no lowering).
OpEntry = Callable[[SfOp], ir.Function | None]
# The ops a program emits itself (no lowered-op entry), besides those whose result aliases
# their operand: what a primitive's ``LoweredBy.PROGRAM`` fact expects.
EMITTED_INLINE = frozenset({constant_p, read_variable_p, assign_variable_p, call_p, py_func_p})


def emits_itself(primitive: Primitive) -> bool:
    """Whether a program emits `primitive`'s ops inline, with no lowered-op entry."""
    return primitive.aliases or primitive in EMITTED_INLINE


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
        if op.primitive is call_p:
            callee = functions.get(op.params()["callee"].name)
            if callee is None or not is_kernel(callee):
                return f"a call of a function that is not a fused kernel{_at(op)}"
        elif op.primitive is py_func_p and not all(map(_static_tensor, op.results)):
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
    for inner in (inner for region in op.regions for inner in region.walk()):
        if isinstance(inner, SfOp) and inner.primitive.effects & (Effect.READS | Effect.WRITES):
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


def _static_tensor(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType) and value.type.has_static_shape()


def _at(op: Operation) -> str:
    location = source_location(op)
    return f" (at {location})" if location is not None else ""
