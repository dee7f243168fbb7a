"""The interpreter: runs a traced graph op by op with the eager kernels.

It is the reference for compiled code and the `jit=False` path. An `InterpreterPlan` is
built once per graph (values numbered into slots), so a call costs one kernel call per op
and no lookups by name. (The compiled counterparts: `runtime.executable.Plan`, the steps of
an optimised module, and `runtime.compiled_program.CompiledProgram`, a whole function as
one machine-code call.)
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from stageflow.core import profiling
from stageflow.core.errors import KERNEL_ERRORS, located_error
from stageflow.core.op_facts import Effect
from stageflow.frontend.graph import Graph
from stageflow.frontend.variables import Variable
from stageflow.runtime.locks import AssignedLocks


class Step(NamedTuple):
    """One call of a program over numbered value slots; shared with compiled executables.
    A tuple, so that `run_steps` unpacks it as fast as a plain one."""

    kernel: Any
    inputs: tuple[int, ...]  # slots read, in argument order
    params: dict
    outputs: tuple[int, ...]  # slots written
    multiple: bool  # the kernel returns a sequence of results
    name: str  # the op's name, for errors
    location: Any  # the user's source line, for errors


def run_steps(steps: list[Step], env: list[Any], output_slots: list[int]) -> list[Any]:
    """Run steps over the value slots `env` (inputs filled in); the output values."""
    for kernel, ins, params, outs, multiple, name, location in steps:
        try:
            result = kernel(*[env[i] for i in ins], **params)
        except KERNEL_ERRORS as error:
            raise located_error(name, location, error) from None
        if multiple:
            for index, value in zip(outs, result, strict=True):
                env[index] = value
        else:
            env[outs[0]] = result
    return [env[i] for i in output_slots]


# The steps an executable adds around the program's own (`runtime.executable._with_drops`):
# run, but not recorded.
BOOKKEEPING = frozenset({"drop", "measure"})


def run_steps_recorded(steps: list[Step], env: list[Any], output_slots: list[int],
                       category: str,
                       labels: dict[tuple[int, ...], tuple[str, str, dict]] | None = None
                       ) -> list[Any]:
    """`run_steps` with each step a profiler span of `category`, named by its op and
    holding the user's line; `labels` name some steps otherwise (by the slots they write:
    name, category, arguments), as an executable names its kernel calls."""
    for step in steps:
        if step.name in BOOKKEEPING:
            run_steps([step], env, [])
            continue
        start = time.perf_counter()
        run_steps([step], env, [])
        end = time.perf_counter()
        name, kind, args = (labels.get(step.outputs) if labels else None) or (
            step.name, category, {})
        profiling.complete(name, kind, start, end, {**args, "source": step.location})
    return [env[i] for i in output_slots]


class InterpreterPlan:
    """A graph flattened into slot-indexed steps for fast repeated interpretation."""

    def __init__(self, graph: Graph) -> None:
        slots: dict[int, int] = {}

        def slot(value) -> int:
            return slots.setdefault(id(value), len(slots))

        self.input_slots = [slot(v) for v in graph.all_inputs]
        assert self.input_slots == list(range(len(self.input_slots))), "duplicate input value"
        self.steps = []
        for eq in graph.equations:
            ins = tuple(slot(v) for v in eq.inputs)
            outs = tuple(slot(v) for v in eq.outputs)
            self.steps.append(Step(eq.primitive.kernel, ins, eq.params, outs,
                               eq.primitive.multiple_results, eq.primitive.name, eq.location))
        self.output_slots = [slot(v) for v in graph.outputs]
        self.size = len(slots)
        # A graph writing variables (here, in a region or a callee) runs holding the locks
        # of its variable inputs, as a compiled call does: its kernels may release the GIL
        # between a variable's read and its write (`runtime.locks`).
        self._locks = AssignedLocks() if any(
            Effect.WRITES in eq.primitive.effects for eq in graph.all_equations()) else None

    def run(self, inputs: list[Any]) -> list[Any]:
        if len(inputs) != len(self.input_slots):
            raise TypeError(f"expected {len(self.input_slots)} inputs, got {len(inputs)}")
        env: list[Any] = list(inputs)  # inputs occupy the first slots, in order
        env.extend([None] * (self.size - len(inputs)))
        if self._locks is None:
            return self._run(env)
        with self._locks.held([x for x in inputs if isinstance(x, Variable)]):
            return self._run(env)

    def _run(self, env: list[Any]) -> list[Any]:
        if profiling.state.session is not None:
            return run_steps_recorded(self.steps, env, self.output_slots, "interpreter")
        return run_steps(self.steps, env, self.output_slots)
