"""Replaying a graph's equations through `Primitive.bind`, so that active tapes see them.

Differentiating a staged computation (a staged function called under a tape, a branch of a
`cond` in a gradient rule) means running its graph op by op in the current trace: each
primitive is bound again, so the tapes record it and can differentiate through it, to any
order. State ops act on the live variables (or are re-emitted while tracing), once.
Control flow replays as itself: eagerly the taken branch or the loop's iterations (the
tape records their ops), while tracing one region op again holding the same regions.
"""

from __future__ import annotations

from typing import Any

from stageflow.core import context
from stageflow.frontend.graph import Graph
from stageflow.frontend.regions import emit
from stageflow.frontend.tracer import GraphTrace
from stageflow.primitives import state
from stageflow.primitives.control import branch_index, cond_p, while_p
from stageflow.primitives.functional import call_p


def replay(graph: Graph, arguments: list, captured: list | None = None) -> list:
    """Run `graph` on `arguments` (its inputs) through `Primitive.bind` in the current
    trace; its captures take `captured` (a region's operands from above) or, by default,
    the sources they were captured from."""
    env: dict[int, Any] = {id(v): a for v, a in zip(graph.inputs, arguments, strict=True)}
    sources = captured if captured is not None else [c.source for c in graph.captures]
    env.update((id(c.value), s) for c, s in zip(graph.captures, sources, strict=True))
    for eq in graph.equations:
        operands = [env[id(v)] for v in eq.inputs]
        if eq.primitive is state.read_variable_p:
            results = [operands[0].read_value()]
        elif eq.primitive is state.assign_variable_p:
            operands[0].assign(operands[1])
            results = []
        elif eq.primitive is call_p:
            results = replay(eq.params["callee"].graph, operands)
        elif eq.primitive in (cond_p, while_p):
            results = replay_control(eq.primitive, operands, eq.params)
        else:
            result = eq.primitive.bind(*operands, **eq.params)
            results = list(result) if eq.primitive.multiple_results else [result]
        env.update((id(v), r) for v, r in zip(eq.outputs, results, strict=True))
    return [env[id(v)] for v in graph.outputs]


def replay_control(primitive: Any, operands: list, params: dict) -> list:
    """A `cond` or `while` equation's op on `operands`: emitted again while tracing, run
    eagerly otherwise."""
    trace = context.current_trace()
    if isinstance(trace, GraphTrace):
        return emit(trace, primitive, operands, params)
    if primitive is cond_p:
        branches = params["branches"]
        chosen = branches[branch_index(operands[0]._value, len(branches))]
        return replay(chosen, [], operands[1:])
    count = len(params["body"].inputs)
    carried, above = operands[:count], operands[count:]
    while bool(replay(params["cond"], carried, above)[0]):
        carried = replay(params["body"], carried, above)
    return carried
