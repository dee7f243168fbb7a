"""Launch graphs: a staged function's launches on a GPU recorded once and replayed as one
CUDA graph, with no Python per op.

A function placed on a GPU runs as a plan of Python steps, each fused kernel, move,
reduction or matrix product one call into the driver. For small tensors that Python, not
the GPU, sets the pace. So the second call of a signature runs through a `Recorder`, which
forwards every driver call and notes it, naming each buffer by where it came from: an
argument of the call, a block allocated during the call, or an array that outlives it (a
constant, a captured tensor, an index map). If the call stayed on the GPU (no copy to or
from the host: a host step, a branch on a value or an upload would make one) and the graph
pays (`pays`), the notes are replayed into the driver's graph (`Driver.record_graph`: a
CUDA graph captured from the driver's stream; the emulated driver keeps the replay itself)
over blocks the graph owns. Later calls copy their arguments into the graph's argument
blocks, launch it, and copy its results into new arrays: a few driver calls, however many
ops the function has. ``sf.config.launch_graphs = False`` keeps every call on its plan.

A function may read variables of the GPU (a model's weights): the recording reads each
one's current array, which the graph then reads in place. A write replaces a variable's
array (device arrays never change once written), so before each replay the graph checks
that every variable it read still holds the array it recorded, and records the call
again where one does not.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, Region

from stageflow.core import config
from stageflow.core.op_facts import Effect
from stageflow.frontend.variables import Variable
from stageflow.ir.control import ControlOp
from stageflow.ir.dialect import SfOp
from stageflow.passes.support import callee_name
from stageflow.runtime.gpu import DeviceArray, GPUDevice

# What the choice between a plan and its graph weighs, calibrated on an H100 with the CUDA
# driver (`benchmarks.gpu`): the host's time per step of a plan (`CALL_SECONDS`, what an
# eager op on a GPU tensor takes; a graph replaces a plan's steps by one launch of a
# fraction of their cost), and the bandwidth of the copies a graph adds
# (`COPY_BYTES_PER_SECOND`, the device copy's, counting the bytes read and written).
CALL_SECONDS = 25e-6
COPY_BYTES_PER_SECOND = 3.0e12
MAX_SIGNATURES = 16  # graphs kept per function (by argument shapes and dtypes)

Origin = tuple[str, Any]  # ("argument", i) | ("block", k) | ("fixed", DeviceArray)


def pays(calls: int, copies: int, copy_bytes: int) -> bool:
    """Whether replaying `calls` driver calls as one graph launch beats making them, when
    the graph adds `copies` copies of `copy_bytes` bytes in all (its arguments in, its
    results out)."""
    plan = calls * CALL_SECONDS
    graph = (copies + 1) * CALL_SECONDS + 2 * copy_bytes / COPY_BYTES_PER_SECOND
    return graph < plan


class Recorder:
    """A driver that forwards every call to `driver` and notes the device work (launches,
    copies, products) with each buffer's origin; any host transfer makes the call
    unrecordable."""

    def __init__(self, device: GPUDevice, arguments: list[Any]) -> None:
        """`arguments`: the call's, which change from call to call (captured tensors,
        the same every call, and variables' arrays are found as fixed arrays)."""
        self.driver = device.driver
        self.device = device
        self.kind = self.driver.kind
        self.memory_bytes = self.driver.memory_bytes
        self.blocks: list[int] = []  # bytes of each block allocated during the call
        self.origins: dict[int, Origin] = {}
        for index, argument in enumerate(arguments):
            if type(argument) is DeviceArray:
                self.origins.setdefault(self.driver.address(argument.handle),
                                        ("argument", index))
        self.notes: list[tuple[str, tuple[Any, ...]]] = []
        self.touched_host = False

    def __getattr__(self, name: str) -> Any:  # loading kernels and entries: forwarded
        return getattr(self.driver, name)

    def _origin(self, handle: Any) -> Origin | None:
        address = self.driver.address(handle)
        found = self.origins.get(address)
        if found is None:
            array = self.device.array_at(address)
            if array is None:
                return None
            found = self.origins[address] = ("fixed", array)
        return found

    def _note(self, name: str, handles: list[Any], rest: tuple[Any, ...]) -> None:
        origins = [self._origin(h) for h in handles]
        if any(o is None for o in origins):
            self.touched_host = True  # a buffer of unknown lifetime: not replayable
        self.notes.append((name, (origins, *rest)))

    def arguments_read(self) -> list[int]:
        """The positions of the arguments the noted work reads (a graph copies them in)."""
        return sorted({o[1] for _, (origins, *_) in self.notes for o in origins
                       if o[0] == "argument"})

    def allocate(self, nbytes: int) -> Any:
        handle = self.driver.allocate(nbytes)
        self.origins[self.driver.address(handle)] = ("block", len(self.blocks))
        self.blocks.append(nbytes)
        return handle

    def free(self, handle: Any, nbytes: int) -> None:
        self.driver.free(handle, nbytes)

    def upload(self, handle: Any, array: np.ndarray) -> None:
        self.touched_host = True
        self.driver.upload(handle, array)

    def download(self, handle: Any, out: np.ndarray) -> None:
        self.touched_host = True
        self.driver.download(handle, out)

    def copy(self, destination: Any, source: Any, nbytes: int) -> None:
        self._note("copy", [destination, source], (nbytes,))
        self.driver.copy(destination, source, nbytes)

    def launch(self, function: Any, kernel: Any, handles: list[Any], dims: list[int],
               grid: int, block: int) -> None:
        self._note("launch", handles, (function, kernel, list(dims), grid, block))
        self.driver.launch(function, kernel, handles, dims, grid, block)

    def call(self, function: Any, handles: list[Any], integers: list[int], grid: int,
             block: int) -> None:
        self._note("function_call", handles, (function, list(integers), grid, block))
        self.driver.call(function, handles, integers, grid, block)

    def gemm(self, a: Any, b: Any, out: Any, *rest: Any) -> None:
        self._note("gemm", [a, b, out], rest)
        self.driver.gemm(a, b, out, *rest)


class LaunchGraph:
    """One signature's recorded call as a graph over blocks of its own: `__call__` copies
    the arguments in, launches the graph and copies the results out. An argument that is
    the very array copied in last time (a model's weights, call after call) is not copied
    again: device arrays never change once written.

    A loop's body (`carried`: its first results are its next iteration's first arguments)
    ends its graph by copying those results into the argument blocks, and a replay returns
    the blocks themselves, which the next replay then reads where they are: an iteration
    is one graph launch, no copy and no allocation. Such results are borrowed (the next
    replay overwrites them): `LaunchGraphs.owned` copies them out when the loop ends."""

    def __init__(self, device: GPUDevice, recorder: Recorder, arguments: list[Any],
                 results: list[DeviceArray], read: list[tuple[Variable, DeviceArray]],
                 carried: int = 0) -> None:
        """`read`: each variable the call may read, with the array it held. `carried`:
        the loop-carried values, where `feeds_back` allows (else 0)."""
        self.device = device
        self.read = [(variable, weakref.ref(array)) for variable, array in read]
        driver = device.driver
        self.blocks = [DeviceArray(device, (n,), np.uint8) for n in recorder.blocks]
        self.arguments = {i: DeviceArray(device, arguments[i].shape, arguments[i].dtype)
                          for i in recorder.arguments_read()}
        self.fixed: list[DeviceArray] = []  # kept alive while the graph reads them
        self._held: dict[int, weakref.ref] = {}  # argument block -> the array it holds

        def handle(origin: Origin) -> Any:
            kind, key = origin
            if kind == "argument":
                return self.arguments[key].handle
            if kind == "block":
                return self.blocks[key].handle
            self.fixed.append(key)
            return key.handle

        steps: list[Callable[[], None]] = []
        for name, (origins, *rest) in recorder.notes:
            handles = [handle(o) for o in origins]
            if name == "copy":
                steps.append(lambda h=handles, r=rest: driver.copy(*h, *r))
            elif name == "launch":
                function, kernel, dims, grid, block = rest
                steps.append(lambda h=handles, f=function, k=kernel, d=dims, g=grid, b=block:
                             driver.launch(f, k, h, d, g, b))
            elif name == "function_call":
                function, integers, grid, block = rest
                steps.append(lambda h=handles, f=function, i=integers, g=grid, b=block:
                             driver.call(f, h, i, g, b))
            else:
                steps.append(lambda h=handles, r=rest: driver.gemm(*h, *r))

        def replay() -> None:
            for step in steps:
                step()

        self.results = [recorder.origins[driver.address(r.handle)] for r in results]
        self.shapes = [(r.shape, r.dtype) for r in results]
        self.carried = carried
        for index in range(carried):  # the result, left in its argument's block
            block = self.arguments.get(index)
            if block is None:
                block = self.arguments[index] = DeviceArray(device, arguments[index].shape,
                                                            arguments[index].dtype)
            if self.results[index] != ("argument", index) and block.nbytes:
                source = handle(self.results[index])
                steps.append(lambda d=block.handle, r=source, n=block.nbytes:
                             driver.copy(d, r, n))
        self.graph = driver.record_graph(replay)

    def borrowed(self, array: Any) -> bool:
        """Whether `array` is one of the argument blocks a replay returns (`carried`)."""
        return any(array is self.arguments[index] for index in range(self.carried))

    def current(self) -> bool:
        """Whether every variable the graph reads still holds the array it recorded."""
        return all(variable._value is array() for variable, array in self.read)

    def __call__(self, arguments: list[DeviceArray]) -> list[DeviceArray]:
        driver = self.device.driver
        for index, block in self.arguments.items():
            argument = arguments[index]
            held = self._held.get(index)
            if block.nbytes and argument is not block and (held is None
                                                           or held() is not argument):
                driver.copy(block.handle, argument.handle, block.nbytes)
                self._held[index] = weakref.ref(argument)
        driver.launch_graph(self.graph)
        for index in range(self.carried):  # the block holds a result now, not what it held
            self._held.pop(index, None)
        results = [self.arguments[index] for index in range(self.carried)]
        for (kind, key), (shape, dtype) in zip(self.results[self.carried:],
                                               self.shapes[self.carried:], strict=True):
            if kind == "argument":
                results.append(arguments[key])
            elif kind == "fixed":
                results.append(key)
            else:
                result = DeviceArray(self.device, shape, dtype)
                if result.nbytes:
                    driver.copy(result.handle, self.blocks[key].handle, result.nbytes)
                results.append(result)
        return results


_RECORD = "record"  # the signature's next call is recorded
_PLAN = "plan"  # the signature runs as its plan: recording found host work, or no gain


def replayable(program: ModuleOp | Region | list[Operation],
               functions: dict[str, FuncOp] | None = None) -> bool:
    """Whether a replay of the launches of a module's call (or of one run of a region, a
    loop's body, or of a run of ops, a plan's segment, whose callees are among
    `functions`) would do all it does: False where it has effects a replay would repeat or
    skip (writes to variables, random state, callbacks: ops with effects other than
    reading a variable, which `LaunchGraph.current` checks) or takes branches and trip
    counts from values (control flow). A call's effects are its callee's: a module holds
    its callees, a region's or a run's are walked too."""
    pending: list[Any] = list(program) if isinstance(program, list) else [program]
    seen: set[str] = set()
    while pending:
        for op in pending.pop().walk():
            if isinstance(op, ControlOp):
                return False
            if isinstance(op, SfOp) and op.primitive.effects & ~(Effect.CALLS | Effect.READS):
                return False
            callee = callee_name(op)
            if functions is not None and callee in functions and callee not in seen:
                seen.add(callee)
                pending.append(functions[callee])
    return True


def _on(device: GPUDevice, value: Any) -> bool:
    """Whether `value` is an array of `device`, or a variable whose value is one."""
    if type(value) is Variable:
        value = value._value
    return type(value) is DeviceArray and value.device is device


class LaunchGraphs:
    """A GPU program's graphs by argument signature: the first call of a signature runs the
    plan (compiling, loading and placing what it needs), the second is recorded, later ones
    replay the graph where there is one. `replayable`: see the function of that name.
    `carried`: for a loop's body, how many of its first results are its next iteration's
    first arguments (`LaunchGraph`)."""

    def __init__(self, device: GPUDevice, program: Any, replayable: bool,
                 carried: int = 0) -> None:
        self.device = device
        self.program = program
        self.replayable = replayable
        self.carried = carried
        self._states: dict[tuple, Any] = {}

    def owned(self, results: list[Any]) -> list[Any]:
        """`results` of a loop's last iteration made the caller's: a block a replay lent
        (the next replay would overwrite it) copied into new memory."""
        graphs = [g for g in self._states.values() if isinstance(g, LaunchGraph)]
        return [self.device.duplicate(r) if any(g.borrowed(r) for g in graphs) else r
                for r in results]

    def run(self, values: list[Any], captured: list[Any] | None = None) -> list[Any]:
        """The program's results for the call's `values` and the captured tensors (a
        loop's body has none: its values from above come with its arguments, as they may
        change from call to call)."""
        captured = captured or []
        device = self.device
        everything = values + captured
        if not (self.replayable and config.launch_graphs) or not all(
                _on(device, v) for v in everything):
            return self.program.run(everything)
        # Which arguments are one array matters too: a call recorded as f(x, x) reads one
        # argument block for both.
        first: dict[int, int] = {}
        signature = tuple((v.shape, v.dtype, first.setdefault(id(v), i))
                          if type(v) is DeviceArray else (id(v),) for i, v in enumerate(values))
        state = self._states.get(signature)
        if isinstance(state, LaunchGraph) and state.current():
            return state(values)
        if state is None:
            if len(self._states) >= MAX_SIGNATURES:
                self._states.clear()
            self._states[signature] = _RECORD
            return self.program.run(everything)
        if state == _PLAN:
            return self.program.run(everything)
        read = [(v, v._value) for v in everything if type(v) is Variable]
        recorder = Recorder(device, values)
        device.driver = recorder
        try:
            results = self.program.run(everything)
        finally:
            device.driver = recorder.driver
        self._states[signature] = self._graph(recorder, values, results, read)
        return results

    def _graph(self, recorder: Recorder, values: list[Any], results: list[Any],
               read: list[tuple[Variable, DeviceArray]]) -> LaunchGraph | str:
        """The recorded call as a graph, or `_PLAN` where it cannot be one or would not
        pay."""
        if recorder.touched_host or not recorder.notes or not all(
                type(r) is DeviceArray and recorder.driver.address(r.handle)
                in recorder.origins for r in results):
            return _PLAN
        copies = [values[i].nbytes for i in recorder.arguments_read()]
        copies += [r.nbytes for r in results
                   if recorder.origins[recorder.driver.address(r.handle)][0] == "block"]
        if not pays(len(recorder.notes), len(copies), sum(copies)):
            return _PLAN
        carried = self.carried if feeds_back(recorder, values, results, self.carried) else 0
        return LaunchGraph(self.device, recorder, values, results, read, carried)


def feeds_back(recorder: Recorder, values: list[Any], results: list[DeviceArray],
               carried: int) -> bool:
    """Whether a loop body's `carried` results can be left in their arguments' blocks:
    each of the same shape and dtype as its argument, an array of the GPU, and none an
    argument but its own (a swap would overwrite one block with another it still needs)."""
    for index in range(carried):
        argument, result = values[index], results[index]
        kind, key = recorder.origins[recorder.driver.address(result.handle)]
        if (type(argument) is not DeviceArray or argument.shape != result.shape
                or argument.dtype != result.dtype or kind == "argument" and key != index):
            return False
    return True
