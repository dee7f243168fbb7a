"""From the tracer's `Graph` to `sf` dialect IR: one ``func.func`` per concrete function.

Tracing records equations (cheap Python objects); the IR is built from them only when it is
wanted (dumps, verification, passes, code generation). Each equation becomes the op of its
primitive with the user's source line as its ``loc``; inputs (arguments, then captures)
become block arguments; a call to another concrete function becomes ``sf.call`` with the
callee's symbol, and every callee, direct or indirect, is emitted into the same module
under a unique symbol name (two traces of one Python function share a name otherwise).
Placement shows as a ``device`` attribute: on the function when it runs on a device other
than ``/device:CPU:0``, on each op a ``sf.device`` scope inside the function placed.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, Region, SSAValue

from stageflow.core.devices import HOST
from stageflow.frontend.graph import Equation, Graph
from stageflow.ir.attributes import SymbolRef
from stageflow.ir.builder import build_function, build_op, location_attr
from stageflow.ir.control import CondOp, WhileOp, YieldOp
from stageflow.ir.text import module_to_text
from stageflow.ir.types import ir_type
from stageflow.primitives.control import cond_p, while_p

DEVICE = "device"


class _Symbols:
    """Unique function names, one per graph (keyed by identity)."""

    def __init__(self) -> None:
        self.by_graph: dict[int, str] = {}
        self.taken: set[str] = set()

    def name(self, graph: Graph, wanted: str) -> str:
        if id(graph) not in self.by_graph:
            name, suffix = wanted, 0
            while name in self.taken:
                suffix += 1
                name = f"{wanted}_{suffix}"
            self.taken.add(name)
            self.by_graph[id(graph)] = name
        return self.by_graph[id(graph)]


def _params(params: dict[str, Any], symbols: _Symbols) -> dict[str, Any]:
    """Params with every concrete function (anything holding a `.graph`) as its symbol."""
    return {
        key: SymbolRef(symbols.name(value.graph, value.name))
        if isinstance(getattr(value, "graph", None), Graph)
        else value
        for key, value in params.items()
    }


def graph_function(graph: Graph, name: str, symbols: _Symbols | None = None) -> FuncOp:
    """The ``func.func @name`` computing `graph` (its callees are referenced by symbol)."""
    symbols = symbols or _Symbols()

    def body(args: tuple[SSAValue, ...]) -> tuple[list[Operation], list[SSAValue]]:
        values: dict[Any, SSAValue] = dict(zip(graph.all_inputs, args, strict=True))
        ops = _equations(graph.equations, values, symbols)
        return ops, [values[v] for v in graph.outputs]

    function = build_function(name, [v.type for v in graph.all_inputs], body)
    if graph.device != HOST:
        function.attributes[DEVICE] = StringAttr(graph.device)
    return function


def _equations(equations: list[Equation], values: dict[Any, SSAValue],
               symbols: _Symbols) -> list[Operation]:
    """The ops of `equations`; `values` maps graph values to SSA values (and is extended)."""
    ops: list[Operation] = []
    for eq in equations:
        operands = [values[v] for v in eq.inputs]
        result_types = [ir_type(v.type) for v in eq.outputs]
        if eq.primitive is cond_p:
            branches = eq.params["branches"]
            regions = [_region(branch, [], operands[1:], symbols) for branch in branches]
            op: Operation = CondOp.create(operands=operands[:1], result_types=result_types,
                                          regions=regions)
        elif eq.primitive is while_p:
            count = len(eq.params["body"].inputs)
            carried = [v.type for v in eq.params["body"].inputs]
            regions = [_region(eq.params[key], carried, operands[count:], symbols)
                       for key in ("cond", "body")]
            op = WhileOp.create(operands=operands[:count], result_types=result_types,
                                regions=regions)
        else:
            op = build_op(eq.primitive, operands, _params(eq.params, symbols),
                          [v.type for v in eq.outputs], eq.location)
        if eq.location is not None and eq.primitive in (cond_p, while_p):
            op.location = location_attr(eq.location)
        if eq.device is not None:
            op.attributes[DEVICE] = StringAttr(eq.device)
        ops.append(op)
        values.update(zip(eq.outputs, op.results, strict=True))
    return ops


def _region(graph: Graph, arg_types: list, captured: list[SSAValue],
            symbols: _Symbols) -> Region:
    """A region computing `graph`: its inputs are the block's arguments, its captures the
    values `captured` from above; it ends in ``sf.yield`` of its outputs."""
    block = Block(arg_types=[ir_type(t) for t in arg_types])
    values: dict[Any, SSAValue] = dict(zip(graph.inputs, block.args, strict=True))
    values.update(zip((c.value for c in graph.captures), captured, strict=True))
    block.add_ops(_equations(graph.equations, values, symbols))
    block.add_op(YieldOp(*(values[v] for v in graph.outputs)))
    return Region(block)


def graph_module(graph: Graph, name: str | None = None) -> ModuleOp:
    """A module holding `graph` as ``@name`` (default: the graph's) and all its callees."""
    return graphs_module([(graph, name or graph.name)])


def graphs_module(graphs: list[tuple[Graph, str]]) -> ModuleOp:
    """A module holding each `(graph, name)` as ``@name`` and every callee of any of them,
    once (the forward and backward functions of a gradient share their callees)."""
    symbols = _Symbols()
    for graph, name in graphs:
        symbols.name(graph, name)
    callees: dict[int, Any] = {}
    for graph, _ in graphs:
        for callee in graph.callees():
            callees.setdefault(id(callee.graph), callee)
    for callee in callees.values():  # name them all before any call op refers to one
        symbols.name(callee.graph, callee.name)
    functions = [graph_function(graph, symbols.name(graph, name), symbols)
                 for graph, name in graphs]
    functions += [
        graph_function(callee.graph, symbols.name(callee.graph, callee.name), symbols)
        for callee in callees.values()
    ]
    return ModuleOp(functions)


def module_text(function: Any, *, debuginfo: bool = False) -> str:
    """The IR text of a concrete function (anything with `.graph` and `.name`)."""
    return module_to_text(graph_module(function.graph, function.name), debuginfo=debuginfo)
