"""Compiled graph functions: optimised `sf` IR run with its fused kernels as machine code.

`Executable.build_entries` takes a module the pass pipeline optimised (the compile driver,
`stageflow.staging.compiler`, runs it; it ends by outlining elementwise groups into kernel
functions), JIT-compiles every kernel, and flattens each function into slot-indexed steps:
a kernel step calls compiled code, so do the other ops with a lowering (reductions, data
movement, random bits, matmul through the BLAS: `codegen.lowered`); the rest call their
primitive's kernel. A call costs one step per remaining op, no lookups by name. Where a
function is one whole program (`runtime.compiled_program`), a call is one machine-code call
and the steps are its fallback.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation

from stageflow.codegen.kernels.analysis import analyse, leading_dim_splittable, split_rows
from stageflow.codegen.lowered.compile import lower_functions
from stageflow.codegen.targets.cpu import Prepared, link_all, prepare_kernels
from stageflow.core import config, profiling
from stageflow.ir.attributes import decode
from stageflow.ir.builder import constant_value, source_location
from stageflow.ir.control import CondOp, ControlOp, WhileOp, YieldOp, free_values
from stageflow.ir.dialect import ConstantOp
from stageflow.ir.types import shaped_type
from stageflow.passes.fuse import is_kernel, kernel_ops
from stageflow.passes.hoist import invariant_partner
from stageflow.passes.plan_buffers import BUFFER_ATTR, IN_PLACE_ATTR, LOWER_BOUND_ATTR, PEAK_ATTR
from stageflow.passes.support import is_op
from stageflow.primitives.control import branch_index
from stageflow.primitives.functional import call_p
from stageflow.primitives.state import assign_variable_p
from stageflow.runtime.compiled_program import prepare_program, unsupported_reason, will_build
from stageflow.runtime.gpu import GPUDevice
from stageflow.runtime.gpu_graphs import LaunchGraphs, replayable
from stageflow.runtime.interpreter import Step, run_steps, run_steps_recorded
from stageflow.runtime.interrupts import run_or_roll_back
from stageflow.runtime.invariant import InvariantValues
from stageflow.runtime.locks import AssignedLocks
from stageflow.runtime.row_parallel import MIN_PARALLEL_ELEMENTS, RowParallelKernel


def _callee_name(op: Any) -> str:
    return op.attributes["callee"].root_reference.data


@dataclass
class CompileStats:
    """What compiling cost and produced (reported by `ConcreteFunction.stats()`)."""

    seconds: dict[str, float] = field(default_factory=dict)
    kernels: int = 0
    ops: int = 0
    # Per compiled function that runs as Python steps instead of one program: why (an op
    # only the host runs, with the user's line).
    steps_reasons: dict[str, str] = field(default_factory=dict)


class Plan:
    """One function of the optimised module, or one region of a region op in it, as steps
    over numbered value slots; a region reads its values from above as inputs after its
    block's arguments."""

    def __init__(self, func: FuncOp, functions: dict[str, FuncOp],
                 compiled: dict[Any, Any], plans: dict[str, Plan],
                 block: Block | None = None, above: list[Any] | None = None,
                 device: GPUDevice | None = None) -> None:
        """`device`: the GPU a plan of the PTX pipeline's module runs on (`build_gpu`), which
        runs each op outside the fused kernels (`GPUDevice.plan_step`), holds the constants
        and replays each loop's body as launch graphs; None: the host runs the plan."""
        slots: dict[int, int] = {}
        self.device = device
        on_host = (device.plan_step if device is not None
                   else lambda kernel, primitive=None: kernel)

        def slot(value: Any) -> int:
            return slots.setdefault(id(value), len(slots))

        block = block if block is not None else func.body.blocks[0]
        inputs = list(block.args) + (above or [])
        self.n_inputs = len(inputs)
        for value in inputs:
            slot(value)
        self.constants: list[tuple[int, Any]] = []
        self.steps: list[Step] = []
        self.output_slots: list[int] = []
        # How the profiler names the kernel steps (by their outputs): kernel, fused ops.
        self.labels: dict[tuple[int, ...], tuple[str, str, dict]] = {}
        for op in block.ops:
            if isinstance(op, ReturnOp | YieldOp):
                self.output_slots = [slot(v) for v in op.operands]
                continue
            ins = tuple(slot(v) for v in op.operands)
            outs = tuple(slot(v) for v in op.results)
            name = op.name.removeprefix("sf.")
            if isinstance(op, ControlOp):
                above_op = free_values(op)
                runner = _region_runner(op, above_op, func, functions, compiled, plans,
                                        device)
                self.steps.append(Step(runner, ins + tuple(slot(v) for v in above_op),
                                       {}, outs, True, name, source_location(op)))
            elif isinstance(op, ConstantOp):  # on the GPU once, not at every launch
                value = constant_value(op)
                self.constants.append((outs[0], value if device is None
                                       else device.copy_in(value)))
            elif is_op(op, call_p):
                callee = _callee_name(op)
                if callee in compiled:
                    self.steps.append(Step(compiled[callee], ins, {}, outs, True, "kernel",
                                           source_location(op)))
                    self.labels[outs] = (callee, "kernel",
                                         {"ops": kernel_ops(functions[callee])})
                else:
                    if callee not in plans:
                        plans[callee] = Plan(functions[callee], functions, compiled, plans,
                                             device=device)
                    self.steps.append(Step(plans[callee].run_tuple, ins, {}, outs, True, callee,
                                           source_location(op)))
            else:
                primitive = op.primitive
                # -- an op lowered to machine code (`codegen.lowered`), else its NumPy kernel
                kernel, params = compiled.get(op), {}
                if kernel is None:
                    kernel, params = on_host(primitive.kernel, primitive), op.params()
                self.steps.append(Step(kernel, ins, params, outs, primitive.multiple_results,
                                       name, source_location(op)))
        self.size = len(slots)
        if device is not None:
            ops = [op for op in block.ops if not isinstance(op, ReturnOp | YieldOp | ConstantOp)]
            self.steps = self._segments(ops, device, functions)
        self._follow_buffer_plan(func if block is func.body.blocks[0] else None, block,
                                 compiled, slots)

    def _segments(self, ops: list[Operation], device: GPUDevice,
                  functions: dict[str, FuncOp]) -> list[Step]:
        """A GPU plan's steps with each run of them between its control-flow ops (`ops`,
        one per step) that a replay could stand for (`gpu_graphs.replayable`) made one
        step, a `Segment` replayed as launch graphs: a decoder's prompt step before its
        loop is then a few driver calls, not one per op. A plan without control flow is
        left whole (the function's own launch graphs take it, or its effects keep it a
        plan: a training step writes the variables a graph of it would read)."""
        if not any(isinstance(op, ControlOp) for op in ops):
            return self.steps
        last_read = {slot: len(self.steps) for slot in self.output_slots}
        for index, step in enumerate(self.steps):
            for slot in step.inputs:
                last_read[slot] = max(last_read.get(slot, -1), index)
        constants = dict(self.constants)
        steps: list[Step] = []
        run: list[int] = []

        def flush() -> None:
            if len(run) > 1 and replayable([ops[i] for i in run], functions):
                steps.append(Segment.step(device, [self.steps[i] for i in run], run[-1],
                                          last_read, constants, self.size))
            else:
                steps.extend(self.steps[i] for i in run)
            run.clear()

        for index, op in enumerate(ops):
            if isinstance(op, ControlOp):
                flush()
                steps.append(self.steps[index])
            else:
                run.append(index)
        flush()
        return steps

    # -- the buffer plan ----------------------------------------------------------------------

    def _follow_buffer_plan(self, func: FuncOp | None, block: Block,
                            compiled: dict[str, Any], slots: dict[int, int]) -> None:
        """Read ``plan-buffers``' attributes: in-place kernel calls, the temporaries' slots,
        the planned figures (a function's, not a region's); schedule a drop of every value
        after its last reader."""
        attributes = func.attributes if func is not None else {}
        self.peak_bytes = decode(attributes[PEAK_ATTR]) if PEAK_ATTR in attributes else None
        self.lower_bound_bytes = (decode(attributes[LOWER_BOUND_ATTR])
                                  if LOWER_BOUND_ATTR in attributes else None)
        step_of = {step.outputs: index for index, step in enumerate(self.steps) if step.outputs}
        self.temporary_slots: set[int] = set()
        for op in block.ops:
            outs = tuple(slots[id(v)] for v in op.results)
            if BUFFER_ATTR in op.attributes:
                buffers = decode(op.attributes[BUFFER_ATTR])
                buffers = buffers if isinstance(buffers, tuple) else (buffers,)
                self.temporary_slots.update(s for s, b in zip(outs, buffers, strict=True)
                                            if b >= 0)
            if (IN_PLACE_ATTR in op.attributes and outs in step_of and self.device is None
                    and _callee_name(op) in compiled):
                index = step_of[outs]
                step = self.steps[index]
                results = [shaped_type(v.type) for v in op.results]
                self.steps[index] = step._replace(kernel=InPlaceKernel(
                    step.kernel, decode(op.attributes[IN_PLACE_ATTR]), results))
        self._schedule = _with_drops(self.steps, set(self.output_slots))
        self.meter: MemoryMeter | None = None

    def run(self, inputs: list[Any]) -> list[Any]:
        env: list[Any] = list(inputs)
        env.extend([None] * (self.size - len(inputs)))
        for index, value in self.constants:
            env[index] = value
        if profiling.state.session is not None:
            return run_steps_recorded(self._schedule, env, self.output_slots, "step",
                                      self.labels)
        return run_steps(self._schedule, env, self.output_slots)

    def run_tracked(self, inputs: list[Any]) -> list[Any]:
        """`run`, measuring the bytes of live temporaries after every step (`meter`)."""
        if self.meter is None:
            self.meter = MemoryMeter()
            self._tracked = _with_drops(self.steps, set(self.output_slots),
                                        self.temporary_slots, self.meter)
        self.meter.external = {id(_root(v)) for v in inputs}
        self.meter.external.update(id(_root(v)) for _, v in self.constants)
        env: list[Any] = list(inputs)
        env.extend([None] * (self.size - len(inputs)))
        for index, value in self.constants:
            env[index] = value
        return run_steps(self._tracked, env, self.output_slots)

    def run_tuple(self, *inputs: Any) -> list[Any]:
        return self.run(list(inputs))


def _region_runner(op: ControlOp, above: list[Any], func: FuncOp,
                   functions: dict[str, FuncOp], compiled: dict[Any, Any],
                   plans: dict[str, Plan], device: GPUDevice | None = None
                   ) -> Callable[..., Any]:
    """What runs a region op as one step: its operands, then its values from above. On a
    GPU a loop's body runs as launch graphs (`gpu_graphs.LaunchGraphs`: recorded on its
    second iteration, replayed from the third), so that an iteration costs a few driver
    calls, not one per op."""
    regions = [Plan(func, functions, compiled, plans, region.block, above, device)
               for region in op.regions]
    if isinstance(op, CondOp):
        return CondRunner(regions)
    cond, body = regions
    if device is None:
        return WhileRunner(cond, body, len(op.operands))
    return GraphedWhileRunner(cond, LaunchGraphs(device, body,
                                                 replayable(op.regions[1], functions),
                                                 len(op.operands)), len(op.operands))


class Segment:
    """Consecutive steps of a GPU plan run as one program (`gpu_graphs.LaunchGraphs`):
    called with the slots it reads that steps before it wrote, it returns the slots it
    writes that steps after it read; the plan's constants it reads are captured (the same
    arrays every call, read in place)."""

    def __init__(self, device: GPUDevice, steps: list[Step], inputs: list[int],
                 outputs: list[int], constants: dict[int, Any], size: int) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.constant_slots = list(constants)
        self.constant_values = list(constants.values())
        self.size = size
        self._schedule = _with_drops(steps, set(outputs))
        self.graphs = LaunchGraphs(device, self, True)

    @classmethod
    def step(cls, device: GPUDevice, steps: list[Step], end: int,
             last_read: dict[int, int], constants: dict[int, Any], size: int) -> Step:
        """The plan's step running `steps` (its steps up to index `end`) as a segment."""
        written: set[int] = set()
        inputs: list[int] = []
        read_constants: dict[int, Any] = {}
        for step in steps:
            for slot in step.inputs:
                if slot in constants:
                    read_constants[slot] = constants[slot]
                elif slot not in written and slot not in inputs:
                    inputs.append(slot)
            written.update(step.outputs)
        outputs = sorted(slot for slot in written if last_read.get(slot, -1) > end)
        segment = cls(device, steps, inputs, outputs, read_constants, size)
        return Step(segment, tuple(inputs), {}, tuple(outputs), True, "segment",
                    steps[0].location)

    def __call__(self, *values: Any) -> list[Any]:
        return self.graphs.run(list(values), self.constant_values)

    def run(self, everything: list[Any]) -> list[Any]:
        """The segment's outputs for its inputs followed by its constants."""
        env: list[Any] = [None] * self.size
        for slot, value in zip(self.inputs + self.constant_slots, everything, strict=True):
            env[slot] = value
        return run_steps(self._schedule, env, self.outputs)


class CondRunner:
    """Runs the region of an ``sf.cond`` its index selects."""

    def __init__(self, branches: list[Plan]) -> None:
        self.branches = branches

    def __call__(self, index: Any, *above: Any) -> list[Any]:
        return self.branches[branch_index(index, len(self.branches))].run(list(above))


class WhileRunner:
    """Runs an ``sf.while``: the body's results are the next iteration's arguments."""

    def __init__(self, cond: Plan, body: Plan, carried: int) -> None:
        self.cond, self.body, self.carried = cond, body, carried

    def __call__(self, *values: Any) -> list[Any]:
        carried, above = list(values[: self.carried]), list(values[self.carried :])
        while bool(self.cond.run(carried + above)[0]):
            carried = self.body.run(carried + above)
        return carried


class GraphedWhileRunner(WhileRunner):
    """An ``sf.while`` on a GPU, its body replayed as launch graphs that leave the carried
    values in their own blocks (`gpu_graphs.LaunchGraph`): the loop's results are copied
    out of them once, at the end."""

    body: LaunchGraphs

    def __call__(self, *values: Any) -> list[Any]:
        return self.body.owned(super().__call__(*values))


class InPlaceKernel:
    """A compiled kernel call that writes results into the memory of inputs dying there.

    ``plan-buffers`` proved that nothing reads such an input after the call and that it
    holds new memory of the result's type; the array is checked once more (a writeable,
    C-contiguous ndarray owning its memory, of the result's shape and dtype) and a result
    whose input fails the check gets new memory. The kernel reads each element of the
    input before it writes the same element of the result.
    """

    def __init__(self, kernel: Any, sources: tuple[int, ...], results: list[Any]) -> None:
        self.kernel = kernel
        self.compiled = getattr(kernel, "compiled", kernel)  # a RowParallelKernel's
        self.input_dtypes = [arg.dtype for arg in self.compiled.kernel.inputs]
        self.results = [(source, tuple(r.shape), np.dtype(r.dtype))
                        for source, r in zip(sources, results, strict=True)]

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        if not all(type(a) is np.ndarray and a.dtype == d
                   for a, d in zip(arrays, self.input_dtypes, strict=True)):
            return self.kernel(*arrays)  # type: ignore[no-any-return]
        outputs = []
        for source, shape, dtype in self.results:
            array = arrays[source] if source >= 0 else None
            if array is None or not (array.shape == shape and array.dtype == dtype
                                     and array.flags.owndata and array.flags.writeable
                                     and array.flags.c_contiguous):
                array = np.empty(shape, dtype)
            outputs.append(array)
        if self.compiled.run_into([*arrays, *outputs]):
            return self.kernel(*arrays)  # type: ignore[no-any-return]  # nothing was written
        return tuple(outputs)


class MemoryMeter:
    """The peak bytes of live temporaries over tracked runs: after each step, the arrays of
    the temporaries' slots are summed, each memory block once (views share their base's)
    and blocks of the run's inputs and constants left out."""

    def __init__(self) -> None:
        self.peak = 0
        self.external: set[int] = set()

    def measure(self, *arrays: Any) -> tuple[()]:
        blocks = {id(root): root.nbytes for root in map(_root, arrays)
                  if isinstance(root, np.ndarray)}
        live = sum(size for key, size in blocks.items() if key not in self.external)
        self.peak = max(self.peak, live)
        return ()


def _root(value: Any) -> Any:
    """The array owning `value`'s memory (`value` itself if it is no view)."""
    while isinstance(getattr(value, "base", None), np.ndarray):
        value = value.base
    return value


def _with_drops(steps: list[Step], keep: set[int], temporaries: set[int] | None = None,
                meter: MemoryMeter | None = None) -> list[Step]:
    """`steps` with a step after each one setting to None the slots it was the last to read
    or write (so NumPy frees their arrays), `keep` aside; with a `meter`, a step before that
    one measuring the `temporaries` live there."""
    last: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.outputs:
            last.setdefault(slot, index)
        for slot in step.inputs:
            last[slot] = index
    dying: dict[int, list[int]] = {}
    for slot, index in last.items():
        if slot not in keep:
            dying.setdefault(index, []).append(slot)
    live: set[int] = set()
    schedule: list[Step] = []
    for index, step in enumerate(steps):
        schedule.append(step)
        if meter is not None and temporaries is not None:
            live.update(s for s in step.outputs if s in temporaries)
            schedule.append(Step(meter.measure, tuple(sorted(live)), {}, (), True, "measure",
                                 None))
        dead = tuple(dying.get(index, ()))
        if dead:
            live.difference_update(dead)
            nones = (None,) * len(dead)
            schedule.append(Step(nones.__iter__, (), {}, dead, True, "drop", None))
    return schedule


def _called_in_loops(functions: dict[str, FuncOp]) -> set[str]:
    """The functions some ``sf.while`` of the module calls from its regions."""
    return {_callee_name(inner) for function in functions.values()
            for loop in function.walk() if isinstance(loop, WhileOp)
            for inner in loop.walk() if is_op(inner, call_p)}


def _splits(kernel: FuncOp) -> bool:
    """Whether to compile a kernel for any number of rows, to run it on blocks of rows in
    parallel: only where its arguments or results may reach `MIN_PARALLEL_ELEMENTS` (an
    unknown dim may).
    A kernel with its types' static shapes compiles to less code (no check for a flat loop,
    one loop where broadcasting is decided by the types), so in less LLVM time."""

    if split_rows(kernel) is None:
        return False
    # Inputs count too: a kernel ending in reductions may iterate over many more elements
    # than it writes.
    for ty in (*kernel.function_type.inputs.data, *kernel.function_type.outputs.data):
        shape = shaped_type(ty).shape
        if None in shape or int(np.prod(shape, dtype=np.int64)) >= MIN_PARALLEL_ELEMENTS:
            return True
    return False


class Executable:
    """The machine-code form of a concrete function; `run` takes the same inputs as the
    interpreter (arguments, then captures) and returns the result arrays."""

    def __init__(self, plan: Plan, stats: CompileStats, program: Any = None,
                 assigned: tuple[int, ...] = ()) -> None:
        self.plan = plan
        self.stats = stats
        self.program = program  # the whole function as one call, where it is one
        self._assigned = assigned  # the inputs (variables) the function assigns
        self.kernels: dict[str, list[str]] = {}  # the fused kernels it calls: their ops
        # What it computes from variables it never writes, kept between calls
        # (`passes.hoist`), where the function has such values.
        self.invariant: InvariantValues | None = None
        self.run = self._own_run()

    def _own_run(self, tracked: bool = False) -> Callable[[list[Any]], list[Any]]:
        """The program's run, or the step plan's (measuring its memory where `tracked`),
        taking its kept invariant values after the call's inputs where it has any."""
        if tracked:
            run = self.plan.run_tracked
        else:
            run = self.program.run if self.program is not None else self._plan_run()
        return run if self.invariant is None else self.invariant.calling(run)

    def keep_invariant(self, partner: Executable, reads: tuple[int, ...]) -> None:
        """Take the values `partner` computes from the variables at `reads` of a call's
        inputs (`passes.hoist`) as this function's last arguments, computed once per
        value of those variables."""
        self.invariant = InvariantValues(partner.run, reads)
        self.run = self._own_run()

    def _plan_run(self) -> Callable[[list[Any]], list[Any]]:
        """The step plan's run; holding the locks of the variables it assigns, when it
        assigns any, as a program's call does (`runtime.locks`), and giving them back their
        values where Ctrl-C interrupts it, as a program's call commits nothing then
        (`runtime.interrupts`)."""
        if not self._assigned:
            return self.plan.run
        locks = AssignedLocks()

        def run(inputs: list[Any]) -> list[Any]:
            variables = [inputs[i] for i in self._assigned]
            with locks.held(variables):
                return run_or_roll_back(self.plan.run, inputs, variables)
        return run

    def track_memory(self, enabled: bool = True) -> None:
        """Measure the live temporaries' bytes at every step of later calls (slower), or
        stop; `measured_peak_bytes` is their peak since tracking was turned on."""
        self.plan.meter = None
        self.run = self._own_run(tracked=enabled)

    @property
    def measured_peak_bytes(self) -> int | None:
        return self.plan.meter.peak if self.plan.meter is not None else None

    @classmethod
    def build_entries(cls, module: ModuleOp, entries: list[str], stats: CompileStats,
                      jit: bool = True) -> list[Executable]:
        """One executable per function of `entries` of an optimised module, sharing one
        compilation of its kernels (a forward and its backward); `jit=False` plans the
        module with every kernel run op by op by the eager kernels. `stats` receives the
        seconds of each code generation stage and the kernel and step counts."""
        functions = {op.sym_name.data: op for op in module.ops if isinstance(op, FuncOp)}
        kernels = {name: f for name, f in functions.items() if is_kernel(f)} if jit else {}
        partners = {entry: found for entry in entries
                    if (found := invariant_partner(functions[entry])) is not None}
        asked, entries = entries, [*entries, *(name for name, _ in partners.values())]
        seconds = stats.seconds
        start = time.perf_counter()
        # why an entry can never be one program ('' where it can), each function walked once
        reasons = {entry: unsupported_reason(functions[entry], functions) if jit else ""
                   for entry in entries}
        # -- where every entry becomes a program, kernels and ops are called from compiled
        # code, and from Python only by the step plan on errors: no NumPy entries
        programs_only = jit and all(will_build(functions[entry], functions, reasons[entry])
                                    for entry in entries)
        splittable = {name for name, f in kernels.items() if _splits(f)}
        names = list(kernels)
        # -- each LLVM module is compiled on the JIT's compiler thread as soon as its IR is
        # built, while the next module's IR is built here: kernels, ops, programs
        looped = _called_in_loops(functions)
        prepared: list[Prepared] = [prepare_kernels(
            [analyse(kernels[name], dynamic_leading=name in splittable, repeated=name in looped)
             for name in names], not programs_only)]
        kernel_symbols = {name: prepared[0].entries[i] for i, name in enumerate(names)}
        mark = _timed(seconds, "llvm kernel IR", start)
        op_symbols: dict[Any, str] = {}
        plans: dict[str, Plan] = {}
        programs: dict[str, int] = {}  # entry -> its program's index in `prepared`
        if jit:
            prepared.append(lower_functions([f for f in functions.values() if not is_kernel(f)],
                                            not programs_only))
            op_symbols = prepared[1].entries
            mark = _timed(seconds, "llvm op IR", mark)
            for entry in entries:
                _note_steps(stats, entry, reasons[entry])
                program = prepare_program(functions[entry], functions, kernel_symbols.get,
                                          op_symbols.get, _plan_runner(plans, entry))
                if program is not None:
                    programs[entry] = len(prepared)
                    prepared.append(program)
            mark = _timed(seconds, "llvm program IR", mark)
        linked = link_all(prepared)
        _timed(seconds, "llvm linking", mark)
        _timed(seconds, "llvm", start)
        compiled: dict[Any, Any] = dict(zip(names, linked[0], strict=True))
        for name in splittable:
            if leading_dim_splittable(kernels[name]):  # programs split the others
                compiled[name] = RowParallelKernel(compiled[name])
        if jit:  # -- the other ops with a lowering, keyed by op (see `Plan`)
            compiled.update(linked[1])
        stats.kernels = len(kernels)
        executables = []
        for entry in entries:
            plan = plans[entry] = Plan(functions[entry], functions, compiled, plans)
            program = linked[programs[entry]] if entry in programs else None
            executable = cls(plan, stats, program, _assigned_inputs(functions[entry]))
            executable.kernels = _kernels_of(functions[entry], kernels)
            executables.append(executable)
        stats.ops = sum(len(e.plan.steps) for e in executables)
        built = dict(zip(entries, executables, strict=True))
        for entry, (partner, reads) in partners.items():
            built[entry].keep_invariant(built[partner], reads)
        return [built[entry] for entry in asked]

    @classmethod
    def build_gpu(cls, module: ModuleOp, entries: list[str], stats: CompileStats,
                  device: Any) -> list[Executable]:
        """Executables of a module the PTX pipeline optimised, run on a GPU device: each
        fused kernel a launch on the device's memory (`GPUDevice.kernel_step`), matmuls the
        device's gemms, moves and reductions its index-map kernels, every other op its NumPy
        kernel on the host, its operands fetched from the device (`GPUDevice.plan_step`; a
        kernel puts host values it is given on the device)."""
        functions = {op.sym_name.data: op for op in module.ops if isinstance(op, FuncOp)}
        start = time.perf_counter()
        compiled: dict[Any, Any] = {}
        for name, function in functions.items():
            if is_kernel(function):
                try:
                    compiled[name] = device.kernel_step(analyse(function))
                except NotImplementedError as error:  # its ops run on the host instead
                    _note_steps(stats, name, str(error))
        _timed(stats.seconds, "llvm", start)
        stats.kernels = len(compiled)
        plans: dict[str, Plan] = {}
        executables = []
        for entry in entries:
            plan = plans[entry] = Plan(functions[entry], functions, compiled, plans,
                                       device=device)
            executable = cls(plan, stats, None, _assigned_inputs(functions[entry]))
            executable.kernels = _kernels_of(functions[entry],
                                             {name: functions[name] for name in compiled})
            executables.append(executable)
        stats.ops = sum(len(e.plan.steps) for e in executables)
        return executables


def _timed(seconds: dict[str, float], stage: str, begin: float) -> float:
    """Keep the seconds of a compile `stage` that began at `begin`, and its profiler span;
    the time it ended."""
    now = time.perf_counter()
    seconds[stage] = now - begin
    profiling.complete(stage, "compile", begin, now)
    return now


def _kernels_of(function: FuncOp, kernels: dict[str, FuncOp]) -> dict[str, list[str]]:
    """The fused kernels `function` calls (in its regions too), each with its ops."""
    return {callee: kernel_ops(kernels[callee]) for op in function.walk()
            if is_op(op, call_p) and (callee := _callee_name(op)) in kernels}


def _assigned_inputs(function: FuncOp) -> tuple[int, ...]:
    """The positions of the arguments (variables' handles) an `assign_variable` of the
    function, or of a region in it, writes."""
    args = {id(arg): index for index, arg in enumerate(function.body.blocks[0].args)}
    return tuple(sorted({args[id(op.operands[0])] for op in function.walk()
                         if is_op(op, assign_variable_p) and id(op.operands[0]) in args}))


def _plan_runner(plans: dict[str, Plan], entry: str) -> Callable[[list[Any]], list[Any]]:
    """Runs the step plan of `entry`, made once the program's kernels are linked (a
    program falls back to it on any failure, for the step's own error)."""

    def run(inputs: list[Any]) -> list[Any]:
        return plans[entry].run(inputs)

    return run
def _note_steps(stats: CompileStats, entry: str, reason: str) -> None:
    """Record, and log once under ``compiles``, why compiled function `entry` cannot run as
    one program (a host-only op, ...): it then runs as Python steps, which is slower."""
    if reason:
        stats.steps_reasons[entry] = reason
        config.emit("compiles", f"{entry}: runs as Python steps: {reason}")
