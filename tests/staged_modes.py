"""Run every op of a block as its own traced graph function (for the "staged" test path).

Inside `stage_each_op()`, each `Primitive.bind` is traced into a one-op graph function,
converted to `sf` dialect IR and verified, then run by the interpreter; so every eager op
test also proves the shape rule, the tracer, the dialect and the interpreter agree with
the eager kernel.
"""

from __future__ import annotations

from contextlib import contextmanager

from stageflow.core import context
from stageflow.core.primitive import ShapedType
from stageflow.frontend.graph import Graph
from stageflow.frontend.tensor import wrap
from stageflow.frontend.tracer import GraphTrace
from stageflow.runtime.eager import EagerTrace
from stageflow.runtime.interpreter import InterpreterPlan

_stageflow_internal = True  # errors name the test's line, not this helper's


class OpByOpStaging(EagerTrace):
    """An eager-looking trace that stages, verifies and interprets each op separately."""

    def __init__(self) -> None:
        self.ops = 0

    def process(self, primitive, args, params):
        graph = Graph(primitive.name)
        trace = GraphTrace(graph, self, allow_variable_creation=False)
        with context.push_trace(trace):
            symbols = [trace.symbolic(trace.add_input(ShapedType(a.shape, a.dtype)))
                       for a in args]
            result = primitive.bind(*symbols, **params)
            results = result if primitive.multiple_results else (result,)
            graph.outputs = [trace.value_of(r, "return") for r in results]
        verify_graph(graph)
        self.ops += 1
        values = InterpreterPlan(graph).run([a._value for a in args])
        tensors = tuple(wrap(v) for v in values)
        return tensors if primitive.multiple_results else tensors[0]


def verify_graph(graph: Graph) -> None:
    """Build the graph's `sf` dialect module and verify it (shape rules re-checked in IR)."""
    from stageflow.ir.from_graph import graph_module

    graph_module(graph).verify()


@contextmanager
def stage_each_op():
    staging = OpByOpStaging()
    with context.push_trace(staging):
        yield staging
