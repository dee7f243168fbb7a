"""A whole function as one machine-code call (`stageflow.codegen.program`), from Python.

The executable's step plan calls one kernel per step from Python, a few microseconds each;
for functions of small tensors that overhead is the run time. When every op of a function
has a lowering and no kernel is large enough to gain from running on several threads
(which only the step plan does: from `PROGRAM_MAX_KERNEL_ELEMENTS` on), the function
becomes one program. Where unknown dims leave that open until the call, a call whose
arguments or results reach that size is run by the step plan instead. A call of the
program passes the argument arrays, fresh output arrays and fresh arrays for the
variables it writes; the variables take their new values after the call
returns. Any failure inside the program (inconsistent unknown dims, an index out of
range, an op that declines its inputs) leaves everything untouched, and the call is run
again by the step plan, which computes what it can and raises the error eager execution
would, naming the op and the user's line. A `py_func` that raises is not called again: its
error is raised as it is, and the variables keep what the function assigned before it, as
eagerly (effects run in program order, and an error stops the later ones). A Ctrl-C is no
error: where it stops a loop of the program (or a py_func, or the step plan run instead),
the call raises ``KeyboardInterrupt`` and every variable keeps its value from before the
call (`runtime.interrupts`). While the profiler times each kernel (``host_tracer_level=3``,
`sf.profiler`), calls run the step plan, whose steps it records.
"""

from __future__ import annotations

import ctypes
import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from llvmlite import ir
from xdsl.dialects.func import FuncOp

from stageflow.codegen.llvm.emitter import I32
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.lowered.compile import op_spec, rule_for
from stageflow.codegen.program.abi import ProgramSignature
from stageflow.codegen.program.builder import ProgramBuilder
from stageflow.codegen.program.host_constants import program_constant
from stageflow.codegen.program.legality import supported
from stageflow.codegen.targets import cache
from stageflow.codegen.targets.cpu import Linked, ModuleJob, Prepared, process_jit
from stageflow.core import profiling
from stageflow.ir.control import WhileOp
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.fuse import is_kernel
from stageflow.passes.support import is_op
from stageflow.primitives.functional import call_p
from stageflow.runtime.callbacks import Callback, bind_callbacks, take_error
from stageflow.runtime.interrupts import interruptible, run_or_roll_back
from stageflow.runtime.locks import AssignedLocks
from stageflow.runtime.row_parallel import MIN_PARALLEL_ELEMENTS

# The program is calls and dims arithmetic, its kernels and ops compiled already: the
# cleanup pipeline (`cpu.levels` of tiny code) and LLVM's fast code generation compile an
# MLP training step's program several times faster than O2 with full code generation, and
# HMC over 16 chains (one program of tiny kernels) samples as fast.
OPT_LEVEL, CODEGEN_LEVEL = 0, 0
# The step plan splits kernels from `MIN_PARALLEL_ELEMENTS` on, but a split costs a thread
# hop and the plan a Python step per op: up to a few million elements a kernel runs faster
# inside the program than split by the plan, and so does an MLP's training step.
PROGRAM_MAX_KERNEL_ELEMENTS = max(MIN_PARALLEL_ELEMENTS, 1 << 21)
_PTR = ir.PointerType()
_profiler = profiling.state  # read at every call: one attribute load while it is off


class CompiledProgram:
    """``run(values)``: the function's outputs for its arguments then captures (arrays, or
    variables for resource arguments), as one call of the compiled program."""

    def __init__(self, signature: ProgramSignature, py: Callable[..., int],
                 shapes: Callable[..., int], fallback: Callable[[list[Any]], list[Any]],
                 llvm_ir: str, callbacks: list[Callback]) -> None:
        self.signature = signature
        self.callbacks = callbacks  # the entries its py_func ops call, kept alive
        self.llvm_ir = llvm_ir
        self._py, self._shapes, self._step_plan = py, shapes, fallback
        self._dtypes = [np.dtype(t.dtype) for t in signature.inputs]
        self._resources = signature.resources
        self._out_dtypes = [np.dtype(t.dtype) for t in signature.outputs]
        static = all(d is not None for t in signature.outputs for d in t.shape)
        self._static = [tuple(t.shape) for t in signature.outputs] if static else None
        self._states = [(i, tuple(t.shape), np.dtype(t.dtype))
                        for i, t in zip(signature.assigned, signature.state_outputs,
                                        strict=True)]
        # Returned arguments are handed back as they are, not copied (`alias_outputs`).
        self._aliases = list(signature.aliases) if any(
            a >= 0 for a in signature.aliases) else None
        self._written = [i for i, a in enumerate(signature.aliases) if a < 0]
        self._locks = AssignedLocks()

    def __repr__(self) -> str:
        return f"<CompiledProgram @{self.signature.name}>"

    def run(self, values: list[Any]) -> list[Any]:
        if _profiler.steps:  # the profiler times each kernel: the step plan calls them
            with self._assigned_locked(values):
                return self._step_plan(values)
        arrays = []
        for value, is_resource, dtype in zip(values, self._resources, self._dtypes,
                                             strict=True):
            array = value._value if is_resource else value
            if type(array) is not np.ndarray and isinstance(array, np.generic):
                array = np.asarray(array)  # a scalar result of an eager op (NumPy's)
            if type(array) is not np.ndarray or array.dtype != dtype:
                return self._step_plan(values)
            arrays.append(array)
        if self._static is not None:
            shapes = self._static
        else:
            shapes = self._output_shapes(arrays)
            if _largest(arrays, shapes) >= PROGRAM_MAX_KERNEL_ELEMENTS:
                with self._assigned_locked(values):  # splits its kernels over the cores
                    return self._step_plan(values)
        outputs = [np.empty(shapes[i], self._out_dtypes[i]) for i in self._written]
        states = [np.empty(shape, dtype) for _, shape, dtype in self._states]
        if states:  # read-modify-write of variables: one call at a time per variable
            return self._run_locked(values, arrays, outputs, states)
        if self._py(*arrays, *outputs) and not self._again(arrays, outputs, states):
            return self._failed(values)
        return self._results(arrays, outputs)

    def _run_locked(self, values: list[Any], arrays: list[np.ndarray],
                    outputs: list[np.ndarray], states: list[np.ndarray]) -> list[Any]:
        """The call holding the locks of the variables it assigns (`runtime.locks`)."""
        with self._assigned_locked(values):
            # Read again under the locks: another call may have replaced the values.
            for (index, _, _), state in zip(self._states, states, strict=True):
                arrays[index] = values[index]._value
                if self.callbacks:  # the values a py_func's error leaves (`_failed`)
                    state[...] = arrays[index]
            if (self._py(*arrays, *outputs, *states)
                    and not self._again(arrays, outputs, states)):
                return self._failed(values, states)
            self._commit(values, states)
        return self._results(arrays, outputs)

    def _commit(self, values: list[Any], states: Sequence[np.ndarray]) -> None:
        for (index, _, _), state in zip(self._states, states, strict=True):
            values[index]._value = state  # of the variable's dtype and shape, by type

    def _again(self, arrays: list[np.ndarray], outputs: list[np.ndarray],
               states: list[np.ndarray]) -> bool:
        """After a failed call: where an argument is not C-contiguous or aligned, the
        compiled entry refused it before running anything (checking each one's flags here
        cost a fifth of a call of 50 arguments), so call again with contiguous copies;
        whether that call ran."""
        if all(a.flags.c_contiguous and a.flags.aligned for a in arrays):
            return False
        arrays[:] = [a if a.flags.c_contiguous and a.flags.aligned
                     else np.ascontiguousarray(a) for a in arrays]  # (it makes 0-d 1-d)
        return not self._py(*arrays, *outputs, *states)

    def _assigned_locked(self, values: list[Any]) -> Any:
        """Hold the locks of the variables this function assigns (`runtime.locks`)."""
        return self._locks.held([values[i] for i, _, _ in self._states])

    def _failed(self, values: list[Any], states: Sequence[np.ndarray] = ()) -> list[Any]:
        error = take_error() if self.callbacks else None
        if isinstance(error, KeyboardInterrupt):  # Ctrl-C during a py_func: the call is
            raise error  # interrupted, not failed, and commits nothing (`runtime.interrupts`)
        if error is not None:  # a py_func raised: as it did, not run again as steps;
            self._commit(values, states)  # what was assigned before it stays assigned
            raise error
        if not self._states:
            return self._step_plan(values)
        return run_or_roll_back(self._step_plan, values,
                                [values[index] for index, _, _ in self._states])

    def _results(self, arrays: list[np.ndarray], outputs: list[np.ndarray]) -> list[Any]:
        if self._aliases is None:
            return outputs
        written = iter(outputs)
        return [arrays[a] if a >= 0 else next(written) for a in self._aliases]

    def _output_shapes(self, arrays: list[np.ndarray]) -> list[tuple[int, ...]]:
        sizes = [d for a in arrays for d in a.shape]
        dims = (ctypes.c_int64 * max(len(sizes), 1))(*sizes)
        count = sum(len(t.shape) for t in self.signature.outputs)
        out = (ctypes.c_int64 * max(count, 1))()
        self._shapes(dims, out)
        shapes, position = [], 0
        for ty in self.signature.outputs:
            shapes.append(tuple(out[position:position + len(ty.shape)]))
            position += len(ty.shape)
        return shapes


def _largest(arrays: list[np.ndarray], shapes: list[tuple[int, ...]]) -> int:
    """Elements of the largest argument or result: the call's kernels are that large, or
    not much larger, in the functions worth compiling (an outer product is the exception)."""
    sizes = [a.size for a in arrays] + [math.prod(s) for s in shapes]
    return max(sizes, default=0)


def _has_large_kernel(function: FuncOp) -> bool:
    """Whether a kernel call of `function` reads or writes a tensor large enough to gain
    more from several threads than the program saves (sizes as the types fix them; an unknown
    dim counts as 1)."""
    for op in function.body.block.ops:
        if is_op(op, call_p):
            for value in (*op.operands, *op.results):  # a kernel may end in reductions
                shape = shaped_type(value.type).shape
                size = np.prod([d or 1 for d in shape], dtype=np.int64)
                if size >= PROGRAM_MAX_KERNEL_ELEMENTS:
                    return True
    return False


def _lowering(op: SfOp) -> Any:
    spec = op_spec(op)
    return None if spec is None else rule_for(spec)


def unsupported_reason(function: FuncOp, functions: dict[str, FuncOp]) -> str:
    """Why `function` can never be one program, whatever its sizes ('' when it can): an op
    that only the host runs (named with its reason and the user's line), an op without a
    lowering, a call of a function that is not a kernel."""
    return supported(function, functions, _lowering)


def will_build(function: FuncOp, functions: dict[str, FuncOp], reason: str) -> bool:
    """Whether `prepare_program` makes a program of `function` once its kernels and ops are
    compiled, decided before compiling them (`reason`: its `unsupported_reason`): kernels
    and ops that only programs call need no NumPy entries, whose code would cost LLVM time
    for nothing."""
    return (process_jit().layout_ok and not _has_large_kernel(function)
            and all(is_kernel(functions[name]) for name in _kernel_callees(function)
                    if name in functions)
            and not reason)


def prepare_program(function: FuncOp, functions: dict[str, FuncOp],
                    kernel_symbol: Callable[[str], str | None],
                    op_symbol: Callable[[SfOp], str | None],
                    fallback: Callable[[list[Any]], list[Any]]
                    ) -> Prepared[CompiledProgram] | None:
    """Start compiling the program of `function` over kernels (by name) and lowered ops (by
    op) being compiled, known by their symbols; None where the step plan serves it better
    or it is not expressible (an op without lowering, a call of a non-kernel function, a
    large kernel)."""
    if _has_large_kernel(function):
        return None
    if any(not kernel_symbol(name) for name in _kernel_callees(function)):
        return None
    if supported(function, functions, op_symbol):
        return None
    jit = process_jit()
    if not jit.layout_ok:
        return None
    symbol = f"{function.sym_name.data}.program.{cache.PLACEHOLDER}"
    module = ir.Module(name=symbol)
    module.triple = jit.triple

    def entry(name: str, arity: int) -> ir.Function:  # compiled meanwhile, linked by name
        return declare(module, name, I32, [_PTR] * arity)

    callbacks = bind_callbacks(list(function.walk()))
    builder = ProgramBuilder(module, function, functions,
                             lambda name: entry(kernel_symbol(name), 2),
                             lambda op: entry(op_symbol(op), 3) if op_symbol(op) else None,
                             symbol, alias_outputs=True, constant_global=program_constant,
                             interruptible=True)
    builder.build()
    job = ModuleJob.of(module, OPT_LEVEL, CODEGEN_LEVEL)
    symbol = job.name(symbol)
    signature = builder.signature
    loops = any(isinstance(op, WhileOp) for op in function.walk())

    def make(linked: Linked) -> CompiledProgram:
        count = (len(signature.inputs) + len(builder.written_outputs())
                 + len(signature.assigned))
        py = linked.function(f"{symbol}.py", ctypes.CFUNCTYPE(
            ctypes.c_int32, *[ctypes.py_object] * count))
        if loops or callbacks:  # Ctrl-C stops a loop, or lands in a py_func's Python code:
            py = interruptible(py)  # other programs end by themselves, then Python raises it
        shapes = linked.function(f"{symbol}.shapes", ctypes.CFUNCTYPE(
            ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p))
        program = CompiledProgram(signature, py, shapes, fallback, job.text, callbacks)
        # the memory the program keeps for its next call goes with the program (the
        # finaliser holds the engine until it has run)
        weakref.finalize(program, linked.function(f"{symbol}.release", ctypes.CFUNCTYPE(None)))
        return program

    return Prepared([job], [f"{symbol}.py", f"{symbol}.shapes", f"{symbol}.release"], {},
                    make)


def _kernel_callees(function: FuncOp) -> list[str]:
    return [op.params()["callee"].name for op in function.body.block.ops
            if is_op(op, call_p)]
