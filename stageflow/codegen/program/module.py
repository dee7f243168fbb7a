"""A whole optimised function as one LLVM module: its program, the program's shapes function,
its kernels and its lowered ops. The JIT's IR dump (``ir("llvm")``) and ahead-of-time
libraries both start from it."""

from __future__ import annotations

from llvmlite import ir
from xdsl.dialects.func import FuncOp

from stageflow.codegen.kernels.analysis import analyse
from stageflow.codegen.kernels.loops import Driver, KernelBuilder
from stageflow.codegen.lowered.compile import add_op_entry, op_spec, rule_for
from stageflow.codegen.program.abi import ProgramSignature
from stageflow.codegen.program.builder import ProgramBuilder
from stageflow.codegen.program.calls import rows_to_split
from stageflow.codegen.program.embedded import embedded_constant
from stageflow.codegen.program.legality import supported
from stageflow.codegen.targets import platform
from stageflow.codegen.targets.cpu import DEFAULT_LIBM, add_kernel_entry
from stageflow.ir.dialect import SfOp


def whole_function_module(symbol: str, functions: dict[str, FuncOp], *,
                          interruptible: bool = True) -> tuple[
        ir.Module, ir.Function, ir.Function, ProgramSignature]:
    """One LLVM module with the program of function `symbol` of an optimised module, its
    kernels and its lowered ops (unoptimised: the loop level); the program, its shapes
    function and signature. ``NotImplementedError`` says what keeps it from being one.
    Its loops check for a Ctrl-C as the JIT's do unless not `interruptible` (an
    ahead-of-time library's: `ProgramBuilder`)."""
    entry = functions[symbol]
    reason = supported(entry, functions, lambda op: rule_for(op_spec(op))
                       if op_spec(op) is not None else None)
    if reason:
        raise NotImplementedError(f"@{symbol}: {reason}")
    module = ir.Module(name=symbol)
    module.triple = platform.current().triple
    kernels: dict[str, ir.Function] = {}
    ops: dict[tuple, ir.Function] = {}

    def kernel_entry(name: str) -> ir.Function:
        if name not in kernels:
            kernel = analyse(functions[name], dynamic_leading=rows_to_split(functions[name]) > 0)
            builder = KernelBuilder(kernel, module, f"{symbol}.{name}", DEFAULT_LIBM)
            check, run = builder.build_check(), builder.build_run(Driver())
            add_kernel_entry(module, kernel, f"{symbol}.{name}", check, run)
            kernels[name] = module.get_global(f"{symbol}.{name}")
        return kernels[name]

    def op_entry(op: SfOp) -> ir.Function | None:
        spec = op_spec(op)
        lowering = rule_for(spec) if spec is not None else None
        if lowering is None:
            return None
        if spec.key not in ops:
            name = f"{symbol}.{spec.name}{len(ops)}"
            add_op_entry(module, spec, lowering, name)
            ops[spec.key] = module.get_global(name)
        return ops[spec.key]

    builder = ProgramBuilder(module, entry, functions, kernel_entry, op_entry,
                             f"{symbol}.program", constant_global=embedded_constant,
                             interruptible=interruptible)
    program, shapes = builder.build(py_entry=False)
    return module, program, shapes, builder.signature
