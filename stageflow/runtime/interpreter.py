"""The interpreter: runs a traced graph op by op with the eager kernels.

It is the reference for compiled code and the `jit=False` path. A `Program` is built once
per graph (values numbered into slots), so a call costs one kernel call per op and no
lookups by name.
"""

from __future__ import annotations

from typing import Any

from stageflow.frontend.graph import Equation, Graph


def _located(eq: Equation, error: Exception) -> Exception:
    where = f"\n  at {eq.location}" if eq.location is not None else ""
    return type(error)(f"{eq.primitive.name}: {error}{where}")


def run_equation(eq: Equation, values: list[Any]) -> list[Any]:
    """Apply one equation's kernel; its results as a list."""
    try:
        result = eq.primitive.kernel(*values, **eq.params)
    except (ValueError, TypeError, IndexError, OverflowError) as error:
        raise _located(eq, error) from None
    return list(result) if eq.primitive.multiple_results else [result]


class Program:
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
            self.steps.append((eq.primitive.kernel, ins, eq.params, outs,
                               eq.primitive.multiple_results, eq))
        self.output_slots = [slot(v) for v in graph.outputs]
        self.size = len(slots)

    def run(self, inputs: list[Any]) -> list[Any]:
        if len(inputs) != len(self.input_slots):
            raise TypeError(f"expected {len(self.input_slots)} inputs, got {len(inputs)}")
        env: list[Any] = list(inputs)  # inputs occupy the first slots, in order
        env.extend([None] * (self.size - len(inputs)))
        for kernel, ins, params, outs, multiple, eq in self.steps:
            try:
                result = kernel(*[env[i] for i in ins], **params)
            except (ValueError, TypeError, IndexError, OverflowError) as error:
                raise _located(eq, error) from None
            if multiple:
                for index, value in zip(outs, result, strict=True):
                    env[index] = value
            else:
                env[outs[0]] = result
        return [env[i] for i in self.output_slots]
