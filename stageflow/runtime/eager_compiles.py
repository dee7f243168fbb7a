"""What eager ops compile (`eager_kernels` decides when): a convolution's shape-generic
lowered op, and an elementwise op as a one-op staged program. Imported by the first eager
op that compiles, with the compiler."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from stageflow.codegen.lowered.compile import OpSpec, compile_ops
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.ir.builder import build_function, build_op
from stageflow.passes import DEFAULT_PIPELINE, Pipeline
from stageflow.runtime.executable import CompileStats, Executable

__all__ = ["compile_op", "generic_op", "one_op_program"]


def generic_op(primitive: Primitive, inputs: tuple[ShapedType, ...], output: ShapedType,
               params: dict[str, Any]) -> OpSpec:
    """The lowered op of `primitive` with every dim unknown: the ops eager execution
    compiles read their dims at run time, so one compile serves calls of every shape."""
    inputs = tuple(ShapedType((None,) * len(t.shape), t.dtype) for t in inputs)
    output = ShapedType((None,) * len(output.shape), output.dtype)
    return OpSpec(primitive.name, inputs, (output,), dict(params))


def compile_op(spec: OpSpec) -> Any:
    """The compiled op of `spec`: a callable of the operand arrays, or None."""
    return compile_ops([spec])[0]


class _ProgramOp:
    """A one-op program as a function of the operand arrays to its result."""

    def __init__(self, run: Callable[[list[Any]], list[Any]]) -> None:
        self.run = run

    def __call__(self, *arrays: Any) -> Any:
        return self.run(list(arrays))[0]


def one_op_program(primitive: Primitive, inputs: tuple[ShapedType, ...],
                    params: dict[str, Any]) -> _ProgramOp | None:
    """`primitive` on `inputs` as a staged function of one op, optimised as every staged
    function is (its op becomes a kernel) and compiled to one program; None where it does
    not become one."""
    output = primitive.shape_rule(*inputs, **params)

    def body(arguments: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        op = build_op(primitive, arguments, params, output)
        return [op], list(op.results)

    name = f"eager_{primitive.name}"
    module = ModuleOp([build_function(name, inputs, body)])
    Pipeline.parse(DEFAULT_PIPELINE).run(module)
    (executable,) = Executable.build_entries(module, [name], CompileStats())
    return None if executable.program is None else _ProgramOp(executable.program.run)
