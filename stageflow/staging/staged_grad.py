"""Staged functions under a gradient tape: a forward graph with residuals, a backward graph.

The paper (section 4.2): the first time a graph function runs while a tape watches one of
its inputs, stageflow builds a "forward" version that also returns the intermediate values
the backward pass needs, and a backward graph function; the tape records one op whose
gradient runs the backward graph. Both come from one joint trace — forward ops replayed
under a tape, then `tape.gradient` — cut where the gradient computation starts, so the
forward runs once per call and the backward is staged too.

The two functions go into one module as a marked pair (`stageflow.passes.remat`), where the
`remat` pass decides which intermediates the forward saves and which the backward recomputes;
then both are optimised and compiled together.

A function placed on a device (its caller's scope, or its arguments') gets a pair of its
own for that device: compiled for the host and run on a logical CPU's thread, or optimised
by the PTX pipeline and run as launches on a GPU, its residuals kept in the device's memory.
A function whose ops are placed on several devices, or on a remote one, is replayed op by
op under the tape instead, each op where it is placed.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from stageflow.core import config, context, dtypes
from stageflow.core.primitive import ResourceType
from stageflow.frontend import tape
from stageflow.frontend.graph import Capture, Equation, Graph, Value
from stageflow.frontend.ops.creation import zeros_like
from stageflow.frontend.replay import replay
from stageflow.frontend.tape import GradientTape
from stageflow.frontend.tensor import PlacedTensor, Tensor, wrap
from stageflow.frontend.tracer import GraphTrace, SymbolicTensor
from stageflow.ir.text import module_to_text
from stageflow.passes import DEFAULT_PIPELINE, PTX_PIPELINE
from stageflow.passes.remat import mark_pair
from stageflow.runtime import devices as runtime_devices
from stageflow.staging.compiler import Compilation


class ForwardBackward:
    """The forward-with-residuals and backward graphs of one concrete function, run on the
    host (`device` None) or on one device."""

    def __init__(self, concrete: Any, device: Any = None) -> None:
        self.device = device
        self._uploaded: dict[str, list[Any]] = {}  # captured tensors on a GPU, by graph
        graph = concrete.graph
        self.name = f"{concrete.name}_vjp"
        joint = Graph(f"{concrete.name}_joint")
        trace = GraphTrace(joint, context.current_trace(), allow_variable_creation=False)
        self.variables = [c.source for c in graph.captures
                          if isinstance(c.value.type, ResourceType) and c.source.trainable]
        with context.push_trace(trace):
            args = [trace.symbolic(trace.add_input(v.type)) for v in graph.inputs]
            with GradientTape() as tape:
                tape.watch([a for a in args if dtypes.is_inexact(a.dtype)])
                outputs = [_as_symbol(trace, y) for y in replay(graph, args)]
            cut = len(joint.equations)
            cotangents = [trace.symbolic(trace.add_input(o._node.type)) for o in outputs]
            grads = tape.gradient(outputs, args + self.variables,
                                  output_gradients=cotangents)
            self.connected = [g is not None for g in grads]
            grad_values = [trace.value_of(g, "gradient") for g in grads if g is not None]
        n_args = len(args)
        forward_eqs, backward_eqs = joint.equations[:cut], joint.equations[cut:]
        residuals = _residuals(joint.inputs[:n_args], forward_eqs, backward_eqs, grad_values)
        output_values = [o._node for o in outputs]
        self.forward = Graph(f"{concrete.name}_forward", inputs=joint.inputs[:n_args],
                             captures=_used_captures(joint, forward_eqs,
                                                     output_values + residuals),
                             equations=forward_eqs, outputs=output_values + residuals)
        self.backward = Graph(f"{concrete.name}_backward",
                              inputs=residuals + joint.inputs[n_args:],
                              captures=_used_captures(joint, backward_eqs, grad_values),
                              equations=backward_eqs, outputs=grad_values)
        self.n_outputs = len(output_values)
        self.jit = concrete.jit
        self.module_text = ""
        # Bytes the last call saved for the backward beyond the arguments and variables
        # (which are held anyway): the activation memory that `remat` minimises.
        self.residual_bytes = 0
        self.forward_program, self.backward_program = self._programs(len(residuals))

    def _programs(self, residuals: int) -> tuple[Any, Any]:
        """The forward and backward executables, rematerialised (`config.remat`) and
        compiled together; run op by op when the compiler cannot take them (a warning)."""
        try:
            return self._build(residuals, self.jit)
        except NotImplementedError as error:
            warnings.warn(f"the gradient of {self.name!r} runs interpreted: {error}",
                          stacklevel=5)
            self.jit = False
            return self._build(residuals, False)

    def _build(self, residuals: int, jit: bool) -> tuple[Any, Any]:
        forward, backward = self.forward.name, self.backward.name
        compilation = Compilation.of_graphs(self.name, [(self.forward, forward),
                                                        (self.backward, backward)])
        functions = compilation.functions
        mark_pair(functions[forward], functions[backward], residuals)
        if config.remat:
            compilation.run_passes("inline,remat")
        self.module_text = module_to_text(compilation.module)
        compilation.dump("remat")
        if self.device is not None and self.device.kind == "GPU":
            compilation.run_passes(PTX_PIPELINE)
            programs = compilation.gpu_executables([forward, backward], self.device)
        else:
            compilation.run_passes(DEFAULT_PIPELINE)
            programs = compilation.executables([forward, backward], jit)
        return programs[0], programs[1]

    def captured(self, graph: Graph) -> list[Any]:
        """The runtime values of `graph`'s captures: variables by reference, tensors' values
        (put on a GPU once)."""
        values = [_runtime(c.source) for c in graph.captures]
        if self.device is None or self.device.kind != "GPU":
            return values
        uploaded = self._uploaded.get(graph.name)
        if uploaded is None:
            uploaded = self._uploaded[graph.name] = [
                v if hasattr(v, "_store") else self.device.copy_in(v) for v in values]
        return uploaded

    def run(self, program: Any, values: list[Any]) -> list[Any]:
        """`program` run on the pair's device (in its order), or here."""
        if self.device is None:
            return program.run(values)
        return self.device.run(lambda: program.run(values))

    def value(self, tensor: Tensor) -> Any:
        """`tensor`'s value on the pair's device (copied there once, `Device.mirror`)."""
        return tensor._value if self.device is None else self.device.mirror(tensor)

    def wrap(self, value: Any) -> Tensor:
        return wrap(value) if self.device is None else self.device.wrap(value)

    def run_forward(self, arguments: list) -> tuple[list, list]:
        """Outputs and residuals (arrays) of the forward function for eager arguments."""
        values = [self.value(a) for a in arguments]
        held = {id(v) for v in values}
        held.update(id(v._value) for v in self.variables)
        results = self.run(self.forward_program, values + self.captured(self.forward))
        residuals = results[self.n_outputs :]
        self.residual_bytes = sum(r.nbytes for r in residuals if id(r) not in held)
        return results[: self.n_outputs], residuals


class StagedVJP:
    """The tape's rule owner for one call: its gradient runs the backward graph."""

    differentiable = True

    def __init__(self, plan: ForwardBackward, residuals: list) -> None:
        self.name = plan.name
        self._plan = plan
        self._residuals = residuals

    def vjp(self, cotangents: list, inputs: list, outputs: list) -> list:
        plan = self._plan
        filled = [plan.value(g) if g is not None else np.zeros(y.shape, y.dtype)
                  for g, y in zip(cotangents, outputs, strict=True)]
        values = self._residuals + filled + plan.captured(plan.backward)
        grads = iter(plan.run(plan.backward_program, values))
        return [plan.wrap(next(grads)) if connected else None for connected in plan.connected]

    @property
    def plan(self) -> ForwardBackward:
        return self._plan

    @property
    def replayable(self) -> bool:
        """Whether a trace of the backward pass can stand for this call (`ReplayedVJP`):
        its pair runs on the host and reads no variable, so its arguments are all its
        inputs."""
        plan = self._plan
        return plan.device is None and not any(
            isinstance(c.value.type, ResourceType)
            for graph in (plan.forward, plan.backward) for c in graph.captures)


class ReplayedVJP:
    """`StagedVJP`'s rule in a trace of a tape's backward pass (`models.backward_runner`):
    the forward graph replayed on the call's arguments for its residuals, then the backward
    graph on them. The residuals the call saved are not the graphs': `remat` chose them
    when the pair was compiled, so the trace recomputes its own (fused with the rest)."""

    differentiable = True

    def __init__(self, plan: ForwardBackward) -> None:
        self.name = plan.name
        self._plan = plan

    def vjp(self, cotangents: list, inputs: list, outputs: list) -> list:
        plan = self._plan
        residuals = replay(plan.forward, inputs)[plan.n_outputs:]
        filled = [g if g is not None else zeros_like(y)
                  for g, y in zip(cotangents, outputs, strict=True)]
        grads = iter(replay(plan.backward, residuals + filled))
        return [next(grads) if connected else None for connected in plan.connected]


def call_under_tape(concrete: Any, arguments: list) -> list | None:
    """Run `concrete` as one taped op (forward graph, staged backward), or None when this
    call needs the op-by-op replay instead (nested tapes: higher order; variable args)."""

    if tape.recording_tapes() != 1 or not all(isinstance(a, Tensor) for a in arguments):
        return None
    if concrete.on_host and not any(isinstance(a, PlacedTensor) for a in arguments):
        plan = concrete._forward_backward
        if plan is None:
            plan = concrete._forward_backward = ForwardBackward(concrete)
    else:
        device = runtime_devices.get(concrete.graph.device)
        if device.remote or any(eq.device for eq in concrete.graph.equations):
            return None  # op by op, each op on its device
        plan = concrete._placed_forward_backward.get(device.name)
        if plan is None:
            plan = concrete._placed_forward_backward[device.name] = ForwardBackward(
                concrete, device)
    reads = [v.read_value() for v in plan.variables]  # watched like any variable read
    outputs, residuals = plan.run_forward(arguments)
    results = [plan.wrap(y) for y in outputs]
    tape.record(StagedVJP(plan, residuals), list(arguments) + reads, {}, tuple(results))
    return results


def _as_symbol(trace: GraphTrace, value: Any) -> Any:
    """`value` as a tensor of `trace`: the very object when it is one (the tape knows
    tensors by identity), else a symbol for its captured value."""
    if isinstance(value, SymbolicTensor) and value._trace is trace:
        return value
    return trace.symbolic(trace.value_of(value, "return"))


def _residuals(arguments: list[Value], forward: list[Equation], backward: list[Equation],
               grad_values: list[Value]) -> list[Value]:
    """Forward values (and arguments) the backward pass reads, each once, in order."""
    defined = {id(v) for v in arguments}
    defined.update(id(v) for eq in forward for v in eq.outputs)
    needed: dict[int, Value] = {}
    for value in [v for eq in backward for v in eq.inputs] + grad_values:
        if id(value) in defined and not isinstance(value.type, ResourceType):
            needed.setdefault(id(value), value)
    return list(needed.values())


def _used_captures(joint: Graph, equations: list[Equation], outputs: list[Value]) -> list:
    used = {id(v) for eq in equations for v in eq.inputs} | {id(v) for v in outputs}
    return [Capture(c.value, c.source) for c in joint.captures if id(c.value) in used]


def _runtime(source: Any) -> Any:
    return source if hasattr(source, "_store") else source._value
