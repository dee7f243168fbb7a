"""The runner of eager optimizer steps (`models.optimizers`): one staged function per
optimizer, set of variables and gradient signature, compiled in the background.

A step's updates are a few small ops per variable: eagerly each is a dispatch, which adds
up to a noticeable share of a small model's training step. Staged, they are
one compiled call reading every gradient and writing every variable (and slot, and the
step count) under the variables' locks, as a staged training step's updates are.

The traced function is `Optimizer.apply_updates` over the step's variables, which it
captures; the learning rate is an argument, computed eagerly before the call (a schedule's
Python runs every step, as it does op by op). A step whose function is not compiled yet
starts its compile on a worker thread and runs op by op, as do steps under an active tape
(the updates would be recorded) or with tensors or variables off the host. The compiled
functions are kept by the optimizer (`_fused_steps`), so that they go with it; an error
while tracing or compiling leaves that signature op by op for good and is raised by
`settle()`, which waits for the compiles under way (tests and benchmarks).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from stageflow.core import config, context, devices, nest
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import GraphTrace
from stageflow.frontend.variables import Variable
from stageflow.staging.background import BackgroundBuilds
from stageflow.staging.concrete import ConcreteFunction, trace_function
from stageflow.staging.function import Function

if TYPE_CHECKING:
    from stageflow.models.optimizers import Optimizer

__all__ = ["settle"]

MAX_STEPS = 16  # compiled steps kept per optimizer (the oldest forgotten first)

Pairs = list[tuple[Tensor, Variable]]


class UpdateRunner:
    """Compiles optimizer steps on a worker thread; runs them once compiled."""

    def __init__(self) -> None:
        self._builds = BackgroundBuilds("stageflow-updates")
        self._lock = threading.Lock()

    def __call__(self, optimizer: Optimizer, rate: Tensor, pairs: Pairs) -> bool:
        if (not config.eager_compile or context.state.tape_count
                or isinstance(context.current_trace(), GraphTrace)
                or devices.current() not in (None, devices.HOST) or type(rate) is not Tensor):
            return False
        signature: list[Any] = [rate._value.dtype]
        gradients = []
        for gradient, variable in pairs:
            if type(gradient) is not Tensor or variable.device != devices.HOST:
                return False
            value = gradient._value
            signature.append((id(variable), value.dtype, value.shape))
            gradients.append(gradient)
        key = tuple(signature)
        steps = optimizer._fused_steps
        entry = steps.get(key)  # the variables it captures keep their ids unique
        if entry is None:
            self._start(steps, key, optimizer, rate, pairs)
            return False
        if not entry.done() or entry.result() is None:
            return False
        entry.result().call_on_host([rate, *gradients])  # (the flat arguments)
        return True

    def _start(self, steps: dict[tuple, Any], key: tuple, optimizer: Optimizer, rate: Tensor,
               pairs: Pairs) -> None:
        variables = [v for _, v in pairs]
        specs = (TensorSpec(rate.shape, rate.dtype),
                 [TensorSpec(g.shape, g.dtype) for g, _ in pairs])
        with self._lock:
            if len(steps) >= MAX_STEPS:
                del steps[next(iter(steps))]
            steps[key] = self._builds.submit(lambda: self._build(optimizer, variables, specs))

    def _build(self, optimizer: Optimizer, variables: list[Variable],
               specs: tuple[TensorSpec, list[TensorSpec]]) -> ConcreteFunction:
        def step(rate: Tensor, gradients: list[Tensor]) -> None:
            optimizer.apply_updates(rate, list(zip(gradients, variables, strict=True)))

        function = Function(step, name=f"{type(optimizer).__name__.lower()}_step",
                            autograph=False)
        leaves, treedef = nest.flatten(specs)
        concrete = trace_function(function, leaves, treedef, False)
        concrete.program  # noqa: B018 - compiles
        return concrete

    def settle(self) -> None:
        """Wait for the compiles under way; the first error of one that failed since the
        last `settle` is raised here (its steps keep running op by op)."""
        self._builds.settle()


RUNNER = UpdateRunner()
settle = RUNNER.settle
