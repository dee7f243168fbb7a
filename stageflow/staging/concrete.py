"""Concrete functions: one traced graph function with its signature, and how to trace one.

A `ConcreteFunction` is what `sf.function` caches per input signature: the graph, the
specs of its tensor arguments and results, the captured tensors and variables it is passed
at every call, and the way to rebuild the Python result structure.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from xdsl.dialects.func import FuncOp

from stageflow.codegen import CPUTarget, PTXTarget
from stageflow.codegen.program.module import whole_function_module
from stageflow.core import context, nest, profiling
from stageflow.core.devices import HOST
from stageflow.core.primitive import ResourceType, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend import tape
from stageflow.frontend.dot import graph_dot
from stageflow.frontend.graph import Graph
from stageflow.frontend.replay import replay
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import PlacedTensor, Tensor, wrap
from stageflow.frontend.tracer import GraphTrace, SymbolicTensor
from stageflow.frontend.variables import Variable
from stageflow.ir.from_graph import graph_module
from stageflow.ir.text import module_to_text
from stageflow.passes import DEFAULT_PIPELINE, PTX_PIPELINE
from stageflow.passes.fuse import is_kernel
from stageflow.primitives.functional import call_p
from stageflow.runtime import devices as runtime_devices
from stageflow.runtime.gpu_graphs import LaunchGraphs, replayable
from stageflow.runtime.interpreter import InterpreterPlan
from stageflow.staging.compiler import Compilation
from stageflow.staging.report import render
from stageflow.staging.signatures import signature_text
from stageflow.staging.staged_grad import call_under_tape

LARGE_TRACE_OPS = 10_000
IR_STAGES = ("traced", "optimized", "lowered", "llvm", "asm", "ptx")

_OUTPUT = object()  # marks a result leaf that comes from the graph's outputs


class ConcreteFunction:
    """A graph function for one input signature; callable with tensors of that signature.

    >>> double = sf.function(lambda x: x * 2.0)
    >>> concrete = double.get_concrete_function(sf.TensorSpec([None], sf.float32))
    >>> concrete(sf.constant([1.0, 2.0]))
    sf.Tensor([2., 4.], shape=(2,), dtype=float32)
    """

    def __init__(self, name: str, graph: Graph, inputs: list[TensorSpec | Variable],
                 out_treedef: Any, out_template: list, created_variables: list,
                 key: tuple | None, jit: bool, arguments: dict[str, Any] | None = None
                 ) -> None:
        self.name = name
        # Each parameter's traced value (specs, variables, Python values), for the signature.
        self.arguments = arguments or {}
        self.graph = graph
        self._input_leaves = inputs
        self.inputs = [spec for spec in inputs if isinstance(spec, TensorSpec)]
        self.outputs = [TensorSpec(v.type.shape, v.type.dtype) for v in graph.outputs]
        self._out_treedef = out_treedef
        self._out_template = out_template
        self.created_variables = created_variables
        self.key = key
        self.jit = jit
        self._program = None
        self._on_host: bool | None = None
        self._gpu_programs: dict[str, Any] = {}
        self.trace_history: list[tuple[str, str]] = []  # the sf.function's, shared
        self.trace_number = 0  # its place among the sf.function's traces
        self._captured: list[Any] | None = None
        self._forward_backward = None
        self._placed_forward_backward: dict[str, Any] = {}  # by device name
        self.pass_timings: list = []
        self._single_output = (out_treedef == (None,) and len(out_template) == 1
                               and out_template[0] is _OUTPUT)  # (== would compare tensors)

    @property
    def program(self):
        """What runs this graph: the compiled executable (`jit=True`, built on first use)
        or the interpreter's plan (`jit=False`, or when the compiler cannot handle the
        graph: a warning says why and the function still runs)."""
        if self._program is None:
            if not self.jit:
                self._program = self._interpreter()
            else:
                try:
                    self._program = self._compile()
                except NotImplementedError as error:
                    warnings.warn(f"sf.function {self.name!r} runs interpreted: {error}",
                                  stacklevel=4)
                    self.jit = False
                    self._program = self._interpreter()
        return self._program

    def _interpreter(self):
        return InterpreterPlan(self.graph)

    def _compile(self):
        with profiling.span(f"compile {self.name}", "compile"):
            compilation = Compilation.of_graphs(self.name, [(self.graph, self.name)])
            compilation.history = self.trace_history
            compilation.run_passes(DEFAULT_PIPELINE)
            return compilation.executables([self.name])[0]

    def stats(self) -> dict[str, Any]:
        """Op and kernel counts and compile time per stage (compiles if not yet done); for
        compiled code also the buffer plan's bytes of temporaries (``peak_temporary_bytes``),
        its liveness lower bound (``lower_bound_bytes``), once ``program.track_memory()``
        was called the peak the runtime measured since (``measured_peak_temporary_bytes``,
        else None), the bytes of the values kept between calls from variables the function
        never writes (``kept_bytes``: a packed copy of a model's weights among them; 0 until
        a call computed them), and per function that runs as Python steps rather than as one
        compiled program the reason, e.g. an op only the host runs (``steps_reasons``)."""
        program = self.program
        if not self.jit:
            return {"ops": len(program.steps), "kernels": 0, "compile_seconds": {}}
        stats = program.stats
        return {"ops": stats.ops, "kernels": stats.kernels,
                "compile_seconds": dict(stats.seconds),
                "peak_temporary_bytes": program.plan.peak_bytes,
                "lower_bound_bytes": program.plan.lower_bound_bytes,
                "measured_peak_temporary_bytes": program.measured_peak_bytes,
                "kept_bytes": 0 if program.invariant is None else program.invariant.kept_bytes,
                "steps_reasons": dict(stats.steps_reasons)}

    @property
    def on_host(self) -> bool:
        """Whether the function runs on ``/device:CPU:0`` and returns every result there
        (no op inside placed elsewhere); such calls skip placement entirely."""
        if self._on_host is None:
            self._on_host = self.graph.device == HOST and not any(
                v.device for v in self.graph.outputs)
        return self._on_host

    @property
    def variables(self) -> list[Variable]:
        """The variables this function reads or writes (captured by reference)."""
        return [c.source for c in self.graph.captures if isinstance(c.source, Variable)]

    # -- calling ------------------------------------------------------------------------

    def __call__(self, *args: Any) -> Any:
        leaves, _ = nest.flatten(args, expand_composites=True)
        leaves = [Tensor(leaf) if isinstance(leaf, np.ndarray) else leaf for leaf in leaves]
        tensors = [leaf for leaf in leaves if isinstance(leaf, Tensor | Variable)]
        paths = [f"args{path}" for path, leaf in zip(nest.leaf_paths(args, expand_composites=True),
                                                     leaves, strict=True)
                 if isinstance(leaf, Tensor | Variable)]
        self.check_arguments(tensors, paths)
        if isinstance(context.current_trace(), GraphTrace):
            return self.emit_call(tensors)
        return self.call_flat(tensors)

    def call_flat(self, tensors: list | tuple) -> Any:
        """Run the graph on its tensor/variable arguments (already checked) and captures;
        a profiler span while a trace is recorded."""
        if profiling.state.session is not None:
            with profiling.span(f"@{self.name}", "program") as recorded:
                result = self._call_flat(tensors)
                recorded.update(self._described())
            return result
        return self._call_flat(tensors)

    def _described(self) -> dict[str, Any]:
        """What a profiler span of a call says: the signature, what ran it (one compiled
        program, its steps from Python, the interpreter, a GPU's launches) and the fused
        kernels with their ops."""
        described: dict[str, Any] = {"signature": [repr(spec) for spec in self.inputs]}
        program = self._program
        if self._gpu_programs:
            described["runs as"] = "GPU launches"
        elif not self.jit:
            described["runs as"] = "interpreter"
        elif program is not None:
            one = program.program is not None and not profiling.state.steps
            described["runs as"] = "one program" if one else "steps"
            described["kernels"] = program.kernels
        return described

    def _call_flat(self, tensors: list | tuple) -> Any:
        if context.state.tape_count and self._taped(tensors):
            results = call_under_tape(self, list(tensors))
            if results is None:
                results = replay(self.graph, list(tensors))
            return self.structure_outputs(results)
        if not self.on_host or any(isinstance(t, PlacedTensor) for t in tensors):
            return self._call_placed(tensors)
        return self.call_on_host(tensors)

    def call_on_host(self, tensors: list | tuple) -> Any:
        """`call_flat` where nothing is placed and no tape is active (the trace cache's fast
        path: a host function called with plain tensors, eager execution only)."""
        values = [t if type(t) is Variable else t._value for t in tensors]
        if self._captured is None:  # variables by reference, eager tensors' fixed values
            self._captured = [_capture_runtime_value(c.source, self.name)
                              for c in self.graph.captures]
        values.extend(self._captured)
        results = self.program.run(values)
        if self._single_output:
            return wrap(results[0])
        return self.structure_outputs([wrap(r) for r in results])

    def _call_placed(self, tensors: list | tuple) -> Any:
        """Run on the graph's device: arguments copied there (once per tensor), the program
        run in that device's order, each result on the device its op was placed on."""
        device = runtime_devices.get(self.graph.device)
        if device.remote:
            results = device.call_function(self, list(tensors))
            return results[0] if self._single_output else self.structure_outputs(results)
        values = [t if type(t) is Variable else device.mirror(t) for t in tensors]
        if self._captured is None:
            self._captured = [_capture_runtime_value(c.source, self.name)
                              for c in self.graph.captures]
        if device.kind == "CPU":
            results = device.run(lambda: self.program.run(values + self._captured))
        else:
            graphs, captured = self._gpu_program(device)
            results = device.run(lambda: graphs.run(values, captured))
        placed_results = []
        for result, value in zip(results, self.graph.outputs, strict=True):
            target = value.device or device.name
            if device.kind != "CPU" and target != device.name:
                # In the GPU's memory: copied to where its op was placed (the host, say).
                placed_results.append(device.wrap(result).to(target))
            else:
                placed_results.append(runtime_devices.get(target).wrap(result))
        if self._single_output:
            return placed_results[0]
        return self.structure_outputs(placed_results)

    def _gpu_program(self, device: Any) -> tuple[LaunchGraphs, list[Any]]:
        """The graph optimised by the PTX pipeline and planned as launches on `device`
        (replayed as launch graphs where that pays), and its captured tensors copied there
        (both made on the first call there)."""
        found = self._gpu_programs.get(device.name)
        if found is None:
            with profiling.span(f"compile {self.name} for {device.name}", "compile"):
                compilation = Compilation.of_graphs(self.name, [(self.graph, self.name)])
                compilation.run_passes(PTX_PIPELINE)
                program = compilation.gpu_executables([self.name], device)[0]
            graphs = LaunchGraphs(device, program, replayable(compilation.module))
            captured = [v if isinstance(v, Variable) else device.copy_in(v)
                        for v in self._captured]
            found = self._gpu_programs[device.name] = (graphs, captured)
        return found

    def _taped(self, tensors: list | tuple) -> bool:
        """Whether an active tape must see this call: it watches an argument, or the graph
        reads a variable the tape watches or would watch when read."""
        if tape.any_watching([t for t in tensors if isinstance(t, Tensor)]):
            return True
        variables = [t for t in tensors if isinstance(t, Variable)] + self.variables
        return any(tape.would_watch(v) for v in variables)

    def emit_call(self, tensors: list) -> Any:
        """Inside another trace: one call op to this graph function (not an inline copy);
        under a tape of that trace, which differentiates primitives while a call op has no
        gradient rule, the function's ops inlined instead, so the tape records them."""
        if context.state.tape_count and self._taped(tensors):
            return self.structure_outputs(replay(self.graph, list(tensors)))
        trace = context.current_trace()
        operands = [trace.operand(leaf, call_p.name) for leaf in tensors]
        operands += [trace.operand(c.source, call_p.name) for c in self.graph.captures]
        results = trace._emit(call_p, operands, {"callee": self})
        return self.structure_outputs(results)

    def structure_outputs(self, results: list) -> Any:
        iterator = iter(results)
        leaves = [next(iterator) if leaf is _OUTPUT else leaf for leaf in self._out_template]
        return nest.unflatten(self._out_treedef, leaves)

    def check_arguments(self, tensors: list, names: list[str]) -> None:
        """Raise TypeError/ValueError naming the argument that does not fit the signature."""
        expected = [leaf for leaf in self._input_leaves if isinstance(leaf, TensorSpec | Variable)]
        if len(tensors) != len(expected):
            raise TypeError(f"{self.name}: expected {len(expected)} tensor arguments, "
                            f"got {len(tensors)}")
        for i, (got, want) in enumerate(zip(tensors, expected, strict=True)):
            name = names[i] if i < len(names) else f"argument {i}"
            if isinstance(want, Variable):
                if not isinstance(got, Variable):
                    raise TypeError(f"{self.name}: {name} must be a variable")
                continue
            if got.dtype != want.dtype:
                raise TypeError(f"{self.name}: {name} has dtype {got.dtype.name}, the "
                                f"signature expects {want.dtype.name}")
            if not TensorShape(got.shape).is_subtype_of(want.shape):
                raise ValueError(f"{self.name}: {name} has shape {format_shape(got.shape)}, "
                                 f"the signature expects {format_shape(want.shape)}")

    def accepts(self, key: tuple) -> bool:
        """Whether a call with this cache key fits this function's (relaxed) signature."""
        mine = self.key
        if mine is None or mine[0] != key[0] or mine[2] != key[2]:
            return False
        for want, got in zip(mine[1], key[1], strict=True):
            if want == got:
                continue
            if not (want[0] == got[0] == "tensor" and want[1] == got[1]
                    and len(want[2]) == len(got[2])
                    and all(w is None or w == g for w, g in zip(want[2], got[2], strict=True))):
                return False
        return True

    # -- inspection ---------------------------------------------------------------------

    def ir(self, stage: str = "traced", *, after_pass: Any = None) -> str:
        """The IR text at `stage`: ``"traced"`` (the `sf` dialect straight from the trace),
        ``"optimized"`` (after the default pass pipeline; `after_pass(pass, module)` is
        called after each pass), ``"lowered"`` (the loop level: the whole function as one
        LLVM module, its program calling its kernels and lowered ops, before LLVM
        optimisation, as the JIT and `sf.aot` compile it), or the fused kernels of the
        optimised module as ``"llvm"`` IR, host ``"asm"`` or ``"ptx"`` (sm_80), one section
        per kernel."""
        if stage not in IR_STAGES:
            raise ValueError(f"IR stage {stage!r} is not available yet (have: "
                             f"{', '.join(IR_STAGES)})")
        if stage == "traced":
            return module_to_text(graph_module(self.graph, self.name), debuginfo=True)
        compilation = Compilation.of_graphs(self.name, [(self.graph, self.name)])
        pipeline = PTX_PIPELINE if stage == "ptx" else DEFAULT_PIPELINE
        self.pass_timings = compilation.run_passes(pipeline, after_pass)
        module = compilation.module
        if stage == "optimized":
            return module_to_text(module, debuginfo=True)
        if stage == "lowered":
            return _lowered_text(module, self.name)
        return _kernel_text(module, stage)

    def report(self, path: str | None = None) -> str:
        """Compile this function once more, recording every stage, and return the HTML page
        that explains the compile (`stageflow.staging.report`); written to `path` if given."""
        compilation = Compilation.of_graphs(self.name, [(self.graph, self.name)], record=True)
        compilation.history = self.trace_history
        compilation.run_passes(DEFAULT_PIPELINE)
        compilation.executables([self.name], self.jit)
        page = render(compilation)
        if path is not None:
            with open(path, "w", encoding="utf-8") as file:
                file.write(page)
        return page

    def graph_dot(self) -> str:
        """Graphviz DOT text of the dataflow graph (ops as nodes, tensors as edges)."""
        return graph_dot(self)

    def pretty_printed_signature(self, verbose: bool = True) -> str:
        """This function's signature in TensorFlow's words (`signature_text`); not
        `verbose`: the first line only, ``f(x, n=3)``.

        >>> scale = sf.function(lambda x, n: x * n)
        >>> print(scale.get_concrete_function(sf.TensorSpec([None]), 2.0)
        ...       .pretty_printed_signature())
        <lambda>(x, n=2.0)
          Args:
            x: float32 Tensor, shape=(None,)
          Returns:
            float32 Tensor, shape=(None,)
        """
        outputs = iter(self.outputs)
        result = nest.unflatten(self._out_treedef, [next(outputs) if leaf is _OUTPUT else leaf
                                                    for leaf in self._out_template])
        text = signature_text(self.name, self.arguments, result)
        return text if verbose else text.split("\n", 1)[0]

    def __repr__(self) -> str:
        args = ", ".join(repr(s) for s in self.inputs)
        return f"<ConcreteFunction {self.name}({args})>"


def _lowered_text(module: Any, name: str) -> str:
    """The whole-function LLVM module of function `name`; where the function is no single
    program, why, and its kernels' LLVM IR."""
    functions = {f.sym_name.data: f for f in module.ops if isinstance(f, FuncOp)}
    try:
        return str(whole_function_module(name, functions)[0])
    except NotImplementedError as error:
        return f"; not one program ({error}): its steps run from Python\n" + _kernel_text(
            module, "llvm")


def _kernel_text(module: Any, stage: str) -> str:
    """Each fused kernel of an optimised module as LLVM IR, host assembly or PTX."""
    kernels = [op for op in module.ops if isinstance(op, FuncOp) and is_kernel(op)]
    emit = {"llvm": CPUTarget().emit, "asm": CPUTarget().assembly,
            "ptx": PTXTarget().compile}[stage]
    comment = "//" if stage == "ptx" else ";"
    sections = [f"{comment} kernel @{k.sym_name.data}\n{emit(k)}" for k in kernels]
    return "\n".join(sections) if sections else f"{comment} no fused kernels\n"


def _capture_runtime_value(source: Any, name: str) -> Any:
    if isinstance(source, Variable):
        return source
    if isinstance(source, SymbolicTensor):
        raise RuntimeError(f"{name}: this graph function captured a traced tensor of an "
                           "enclosing function and can only run inside it")
    return source._value


def trace_function(function: Any, leaves: list, treedef: Any,
                   allow_variable_creation: bool, key: tuple | None = None,
                   device: str = HOST, frozen: bool = False) -> ConcreteFunction:
    """Run `function.python_function` in a graph-building context on symbolic arguments,
    for a graph function placed on `device` (`frozen`: see `GraphTrace`)."""
    graph = Graph(function.name, device=device)
    trace = GraphTrace(graph, context.current_trace(), allow_variable_creation, frozen)
    args: list = []
    with profiling.span(f"trace {function.name}", "compile"), context.push_trace(trace):
        for leaf in leaves:
            if isinstance(leaf, TensorSpec):
                args.append(trace.symbolic(trace.add_input(leaf.shaped_type)))
            elif isinstance(leaf, Variable):
                trace.add_input(ResourceType(ShapedType(leaf.shape, leaf.dtype)), source=leaf)
                args.append(leaf)
            else:
                args.append(leaf)
        result = function.call_python(nest.unflatten(treedef, args))
        out_leaves, out_treedef = nest.flatten(result, expand_composites=True)
        template = []
        for leaf in out_leaves:
            if isinstance(leaf, Tensor):
                graph.outputs.append(trace.value_of(leaf, "return"))
                template.append(_OUTPUT)
            else:
                template.append(leaf)
    if len(graph.equations) > LARGE_TRACE_OPS:
        (filename, line), count = max(trace.op_lines.items(), key=lambda item: item[1])
        warnings.warn(
            f"sf.function {function.name!r} traced {len(graph.equations)} ops; {count} of "
            f"them come from {filename}:{line} (a Python loop unrolled at trace time?). "
            "Use sf.while_loop or vectorised ops to keep graphs small.",
            stacklevel=5,
        )
    concrete = ConcreteFunction(function.name, graph, leaves, out_treedef, template,
                                trace.created_variables, key, function.jit,
                                function.arguments(nest.unflatten(treedef, leaves)))
    concrete.trace_history = function.trace_history
    return concrete
