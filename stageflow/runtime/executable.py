"""Compiled graph functions: optimised `sf` IR run with its fused kernels as machine code.

`Executable.build` takes a concrete function's module, runs the optimisation pipeline
(which ends by outlining elementwise groups into kernel functions), JIT-compiles every
kernel in one LLVM module, and flattens each function into slot-indexed steps: a kernel
step calls compiled code, other ops (matmul through NumPy's BLAS, reductions, shape ops)
call their primitive's kernel. A call costs one step per remaining op, no lookups by name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import FileLineColLoc, ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp

from stageflow.frontend.primitives.base import REGISTRY
from stageflow.frontend.source import SourceLocation
from stageflow.ir.builder import constant_value
from stageflow.passes.fuse import is_kernel
from stageflow.runtime.interpreter import run_steps


def _callee_name(op: Any) -> str:
    return op.attributes["callee"].root_reference.data


def _source(op: Any) -> SourceLocation | None:
    """The user's line an op was traced from, as its ``loc(...)`` says."""
    location = getattr(op, "location", None)
    if isinstance(location, FileLineColLoc):
        return SourceLocation(location.filename.data, location.line.data, location.column.data)
    return None


@dataclass
class CompileStats:
    """What compiling cost and produced (reported by `ConcreteFunction.stats()`)."""

    seconds: dict[str, float] = field(default_factory=dict)
    kernels: int = 0
    ops: int = 0


class Plan:
    """One function of the optimised module as steps over numbered value slots."""

    def __init__(self, func: FuncOp, functions: dict[str, FuncOp],
                 compiled: dict[str, Any], plans: dict[str, Plan]) -> None:
        slots: dict[int, int] = {}

        def slot(value: Any) -> int:
            return slots.setdefault(id(value), len(slots))

        block = func.body.blocks[0]
        self.n_inputs = len(block.args)
        for arg in block.args:
            slot(arg)
        self.constants: list[tuple[int, Any]] = []
        self.steps: list[tuple] = []
        self.output_slots: list[int] = []
        for op in block.ops:
            if isinstance(op, ReturnOp):
                self.output_slots = [slot(v) for v in op.operands]
                continue
            ins = tuple(slot(v) for v in op.operands)
            outs = tuple(slot(v) for v in op.results)
            name = op.name.removeprefix("sf.")
            if name == "constant":
                self.constants.append((outs[0], constant_value(op)))
            elif name == "call":
                callee = _callee_name(op)
                if callee in compiled:
                    self.steps.append((compiled[callee], ins, {}, outs, True, "kernel",
                                       _source(op)))
                else:
                    if callee not in plans:
                        plans[callee] = Plan(functions[callee], functions, compiled, plans)
                    self.steps.append((plans[callee].run_tuple, ins, {}, outs, True, callee,
                                       _source(op)))
            else:
                primitive = REGISTRY[name]
                self.steps.append((primitive.kernel, ins, op.params(), outs,
                                   primitive.multiple_results, name, _source(op)))
        self.size = len(slots)

    def run(self, inputs: list[Any]) -> list[Any]:
        env: list[Any] = list(inputs)
        env.extend([None] * (self.size - len(inputs)))
        for index, value in self.constants:
            env[index] = value
        return run_steps(self.steps, env, self.output_slots)

    def run_tuple(self, *inputs: Any) -> list[Any]:
        return self.run(list(inputs))


class Executable:
    """The machine-code form of a concrete function; `run` takes the same inputs as the
    interpreter (arguments, then captures) and returns the result arrays."""

    def __init__(self, plan: Plan, stats: CompileStats) -> None:
        self.plan = plan
        self.stats = stats
        self.run = plan.run

    @classmethod
    def build(cls, module: ModuleOp, entry: str, pipeline: Any) -> Executable:
        from stageflow.codegen import compile_kernels
        from stageflow.codegen.kernel import analyse, leading_dim_splittable
        from stageflow.runtime.parallel import RowParallelKernel

        stats = CompileStats()
        start = time.perf_counter()
        timings = pipeline.run(module)
        stats.seconds.update({f"pass {t.name}": t.run_s + t.verify_s for t in timings})
        functions = {op.sym_name.data: op for op in module.ops if isinstance(op, FuncOp)}
        kernels = {name: f for name, f in functions.items() if is_kernel(f)}
        stats.seconds["optimize"] = time.perf_counter() - start
        start = time.perf_counter()
        splittable = {name for name, f in kernels.items() if leading_dim_splittable(f)}
        analysed = [analyse(f, dynamic_leading=name in splittable)
                    for name, f in kernels.items()]
        compiled = dict(zip(kernels, compile_kernels(analysed), strict=True))
        for name in splittable:
            compiled[name] = RowParallelKernel(compiled[name])
        stats.seconds["llvm"] = time.perf_counter() - start
        stats.kernels = len(kernels)
        plan = Plan(functions[entry], functions, compiled, {})
        stats.ops = len(plan.steps)
        return cls(plan, stats)
