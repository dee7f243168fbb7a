"""Tracing the regions of control-flow ops: a branch, a loop condition, a loop body.

A region is traced like a graph function, in a `RegionTrace` nested in the current trace:
values of enclosing traces become captures, so the region's graph is closed and the op
that holds it passes those values as operands. Two things differ from `sf.function`:

- a variable the region only reads is read once in the enclosing trace, just before the
  op (`share_captures`), and enters as a tensor: gradient tapes see the read (and
  differentiate through it) exactly as outside control flow, and the region stays free of
  effects. A variable the region assigns is captured by reference (its reads after the
  assignment must see it); `trace_regions` traces again once it knows which variables
  are assigned.
- results may be Python numbers (made constants) and must be tensors otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stageflow.core import context, nest
from stageflow.core.primitive import ResourceType, ShapedType
from stageflow.core.source import describe_location
from stageflow.frontend.graph import Capture, Graph, Value
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import GraphTrace, SymbolicTensor


class RegionTrace(GraphTrace):
    """The trace of one region; reads of variables it never assigns are hoisted out."""

    def __init__(self, graph: Graph, parent: GraphTrace, assigned: set[int]) -> None:
        super().__init__(graph, parent, allow_variable_creation=False,
                         frozen=isinstance(parent, GraphTrace) and parent.frozen)
        self.assigned = assigned  # ids of variables read through their handle
        self.assigns: dict[int, Any] = {}  # variables this region writes
        self._hoisted: dict[int, Value] = {}  # per variable read from outside, its value

    def read_variable(self, variable: Any) -> SymbolicTensor:
        if self.frozen or id(variable) in self.assigned:
            return super().read_variable(variable)
        value = self._hoisted.get(id(variable))
        if value is None:  # read in the enclosing trace when the op is emitted
            value = self._hoisted[id(variable)] = Value(ShapedType(variable.shape,
                                                                   variable.dtype))
            self.graph.captures.append(Capture(value, HoistedRead(variable)))
        return self.symbolic(value)

    def assign_variable(self, variable: Any, value: Tensor) -> None:
        self.assigns[id(variable)] = variable
        if id(variable) not in self.assigned:
            self.assigned.add(id(variable))  # later reads in this trace must see the write
        super().assign_variable(variable, value)

    def variable_created(self, variable: Any) -> None:
        raise ValueError("a variable cannot be created inside a control-flow branch or loop; "
                         f"create it before the sf.cond or sf.while_loop{describe_location()}")


@dataclass(eq=False)
class HoistedRead:
    """The source of a region's capture standing for a read of `variable` just before the
    region op (`share_captures` makes the read)."""

    variable: Any


@dataclass
class Region:
    """A traced region: its graph and how to rebuild the Python structure of its results."""

    graph: Graph
    treedef: Any
    assigns: dict[int, Any]

    def structure(self, outputs: Sequence[Any]) -> Any:
        return nest.unflatten(self.treedef, list(outputs))


def _trace_one(fn: Callable[..., Any], arg_types: Sequence[ShapedType], arg_treedef: Any,
               name: str, assigned: set[int], what: str) -> Region:
    parent = context.current_trace()
    graph = Graph(name)
    trace = RegionTrace(graph, parent, set(assigned))
    with context.push_trace(trace):
        args = [trace.symbolic(trace.add_input(t)) for t in arg_types]
        result = fn(*nest.unflatten(arg_treedef, args)) if arg_treedef is not None else fn()
        leaves, treedef = nest.flatten(result, expand_composites=True)
        for position, leaf in enumerate(leaves):
            if isinstance(leaf, bool | int | float | np.ndarray | np.generic):
                leaf = convert_to_tensor(leaf)  # a Python float is float32, as anywhere
            if not isinstance(leaf, Tensor):
                raise TypeError(f"{what} returned {type(leaf).__name__} at position {position} "
                                f"of its results; return tensors (or numbers){describe_location()}")
            graph.outputs.append(trace.value_of(leaf, what))
    return Region(graph, treedef, trace.assigns)


def trace_regions(fns: Sequence[Callable[..., Any]], arg_types: Sequence[ShapedType],
                  arg_treedef: Any, names: Sequence[str], what: str) -> list[Region]:
    """Trace each of `fns` as a region taking `arg_types` (a nest of `arg_treedef`; None:
    no arguments). If any assigns a variable that another read as a hoisted value, all are
    traced again with that variable read through its handle."""
    assigned: set[int] = set()
    while True:
        regions = [_trace_one(fn, arg_types, arg_treedef, name, assigned, what)
                   for fn, name in zip(fns, names, strict=True)]
        written = {key for region in regions for key in region.assigns}
        if written <= assigned:
            return regions
        assigned |= written


def share_captures(graphs: Sequence[Graph]) -> list[Any]:
    """Give every graph the same captures, the union of theirs in first-seen order (a graph
    gets an unused input for a capture it lacks); the capture sources, in that order.
    The variables the regions read from outside are read now, in the current trace, once
    each: only the traces kept, not those a retrace discarded, read them."""
    reads: dict[int, Any] = {}
    for graph in graphs:
        for capture in graph.captures:
            if isinstance(capture.source, HoistedRead):
                variable = capture.source.variable
                if id(variable) not in reads:
                    reads[id(variable)] = variable.read_value()
                capture.source = reads[id(variable)]
    sources: dict[int, Any] = {}
    for graph in graphs:
        for capture in graph.captures:
            sources.setdefault(id(capture.source), capture.source)
    for graph in graphs:
        own = {id(c.source): c for c in graph.captures}
        graph.captures = [own.get(key) or Capture(Value(_type_of(source)), source)
                          for key, source in sources.items()]
    return list(sources.values())


def _type_of(source: Any) -> ShapedType | ResourceType:
    if hasattr(source, "_store"):
        return ResourceType(ShapedType(source.shape, source.dtype))
    if isinstance(source, SymbolicTensor):
        return source._node.type
    value = source._value
    return ShapedType(value.shape, value.dtype)


def emit(trace: GraphTrace, primitive: Any, args: list, params: dict) -> list:
    """Apply a control-flow primitive in `trace` to tensors and variables (which pass
    their handles), and offer it to the active tapes as `Primitive.bind` does."""
    operands = [trace.operand(arg, primitive.name) for arg in args]
    results = trace._emit(primitive, operands, params)
    if context.state.tape_count:
        context.record_on_tapes(primitive, tuple(args), params, tuple(results))
    return results
