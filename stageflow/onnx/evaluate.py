"""Running an ONNX graph on values: the loop every import, subgraph and backend call shares.

`run_graph` walks the nodes in order (ONNX requires topological order), finds each one's
converter and calls it with the values of its inputs, under `located_at` the node, so that
the sf ops it traces carry the node's name as their IR location and an error names it. A
node whose inputs are all known at import is evaluated eagerly then (`sf.init_scope`) and
its outputs are known in turn: the folding ONNX's exporters count on (Shape, Gather, Concat,
Reshape chains) happens here, once, whatever the staged function does later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from stageflow.core.context import init_scope
from stageflow.core.source import SourceLocation, located_at
from stageflow.frontend.tensor import Tensor
from stageflow.onnx.converters import (
    DEFAULT_DOMAIN,
    Node,
    OnnxError,
    Value,
    lookup,
    supported_ops,
)

__all__ = ["Scope", "dense", "initializer_values", "run_graph"]


class Scope:
    """Names to values: a graph's own, then its enclosing graphs' (a subgraph reads the
    values of the graphs around it by name)."""

    def __init__(self, values: Mapping[str, Value], outer: Scope | None = None) -> None:
        self.values: dict[str, Value] = dict(values)
        self.outer = outer

    def __getitem__(self, name: str) -> Value:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.outer
        raise KeyError(name)


def initializer_values(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """The graph's initializers (dense and sparse) as arrays, by name."""
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for sparse in graph.sparse_initializer:
        values[sparse.values.name] = dense(sparse)
    return values


def dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """A sparse tensor's dense array: its indices are flat (one per value) or
    coordinates (a row per value)."""
    nonzeros = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices)
    dense = np.zeros(tuple(sparse.dims), nonzeros.dtype)
    if indices.ndim == 2:
        dense[tuple(indices.T)] = nonzeros
    else:
        dense.reshape(-1)[indices] = nonzeros
    return dense


def run_graph(graph: onnx.GraphProto, inputs: Sequence[Value], opsets: Mapping[str, int],
              filename: str, outer: Scope | None = None,
              initializers: Mapping[str, Value] | None = None) -> list[Value]:
    """The values of `graph`'s outputs, given its inputs' values (in the order of
    `graph.input`, the initializers left out), the enclosing graphs' scope, and the
    initializers' values where the caller has made them already (as variables, say)."""
    scope = Scope(initializer_values(graph) if initializers is None else initializers, outer)
    formal = [i.name for i in graph.input if i.name not in scope.values]
    if len(formal) != len(inputs):
        raise OnnxError(f"ONNX graph {graph.name!r} takes {len(formal)} inputs "
                        f"({', '.join(formal)}), given {len(inputs)}")
    scope.values.update(zip(formal, inputs, strict=True))
    for index, proto in enumerate(graph.node):
        _run_node(proto, index, scope, opsets, filename)
    return [scope[output.name] for output in graph.output]


def _run_node(proto: onnx.NodeProto, index: int, scope: Scope, opsets: Mapping[str, int],
              filename: str) -> None:
    domain = DEFAULT_DOMAIN if proto.domain == "ai.onnx" else proto.domain
    location = SourceLocation(filename, index + 1, 0, proto.name or f"{proto.op_type}_{index}")

    def run_subgraph(graph: onnx.GraphProto, values: list[Value]) -> list[Value]:
        return run_graph(graph, values, opsets, filename, scope)

    node = Node.of(proto, opsets.get(domain, 0), location, run_subgraph)
    converter = lookup(proto.op_type, domain)
    if converter is None:
        if domain and all(d != domain for d, _ in supported_ops()):
            raise node.error(f"stageflow imports no op of domain {domain!r} (another "
                             f"runtime's custom ops); export the model with standard ONNX "
                             f"ops (`stageflow onnx-ops` lists the ops it imports)")
        where = f"domain {domain!r}" if domain else "the default domain"
        raise node.error(f"stageflow has no converter for {proto.op_type} in {where} "
                         f"(`stageflow onnx-ops` lists the ops it imports)")
    args = [_input(scope, name, node) if name else None for name in proto.input]
    known = converter.fold and all(a is None or isinstance(a, np.ndarray) for a in args) \
        and not any(a.type == onnx.AttributeProto.GRAPH for a in proto.attribute)
    try:
        with located_at(location):
            if known:
                with init_scope():
                    results = _as_list(converter.function(node, *args))
                results = [r.numpy() if isinstance(r, Tensor) else np.asarray(r)
                           for r in results]
            else:
                results = _as_list(converter.function(node, *args))
    except OnnxError:
        raise
    except Exception as error:  # an sf op refused the node's inputs: name the node
        first = (str(error).strip().splitlines() or [""])[0]
        raise node.error(f"{type(error).__name__}: {first}; the node's inputs do not fit "
                         f"its op (onnx.checker.check_model(model, full_check=True) checks "
                         f"a model's shapes)") from error
    outputs = [name for name in proto.output]
    if len(results) < len([o for o in outputs if o]):
        raise node.error(f"the converter returned {len(results)} outputs, the node names "
                         f"{len(outputs)}")
    for name, value in zip(outputs, results, strict=False):
        if name:
            scope.values[name] = value


def _input(scope: Scope, name: str, node: Node) -> Value:
    try:
        return scope[name]
    except KeyError:
        raise node.error(f"input {name!r} is neither a graph input, an initializer nor an "
                         f"earlier node's output (the graph is not in topological "
                         f"order, or the name is misspelt)") from None


def _as_list(results: object) -> list[Value]:
    if isinstance(results, list | tuple):
        return list(results)
    return [results]
