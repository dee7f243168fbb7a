"""A graph function's nodes, and their Graphviz DOT text drawn like the paper's figure 2.

`graph_nodes` walks a graph once into what any drawing needs: arguments, captured tensors
and variables, ops and results, each with the nodes it reads and the types it produces.
`graph_dot` draws them: ops are filled boxes, arguments and results ellipses, captured
tensors plain boxes and variables unfilled double octagons (state); every edge is a
tensor labelled with its type. TensorBoard's graphs (`sf.summary.trace_export`) are drawn
from the same nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stageflow.core.primitive import ResourceType


@dataclass(frozen=True)
class Node:
    """One node of a graph function: `id` unique in it (``arg0``, ``capture0``, ``op3``,
    ``out0``), `op` what it is (an op's primitive, or ``argument``, ``capture``,
    ``variable``, ``result``), `title` and `detail` its text (an op's parameters, a
    variable's name), `inputs` the ids of the nodes it reads with the type of each, and
    `outputs` the types it produces."""

    id: str
    op: str
    title: str
    detail: str
    inputs: tuple[str, ...]
    input_types: tuple[Any, ...]
    outputs: tuple[Any, ...]


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def _params(params: dict[str, Any]) -> str:
    shown = []
    for name, value in params.items():
        if name == "callee":
            continue
        if isinstance(value, np.ndarray):  # a few values shown, more only their type
            text = repr(value.tolist()) if value.size <= 4 else f"<{value.dtype}{value.shape}>"
        elif isinstance(value, np.dtype):  # (it has a `shape`, but no `dtype`)
            text = value.name
        else:
            text = repr(value)
        shown.append(f"{name}={text[:40]}")
    return "\n".join(shown)


def graph_nodes(graph: Any) -> list[Node]:
    """The nodes of `graph` (a traced `Graph`) in order: arguments, captures, ops,
    results."""
    nodes = []
    producer: dict[int, str] = {}

    def reads(values: list) -> dict[str, Any]:
        return {"inputs": tuple(producer[id(v)] for v in values),
                "input_types": tuple(v.type for v in values)}

    for i, value in enumerate(graph.inputs):
        nodes.append(Node(f"arg{i}", "argument", f"arg {i}: {value.type}", "",
                          (), (), (value.type,)))
        producer[id(value)] = nodes[-1].id
    for i, capture in enumerate(graph.captures):
        if isinstance(capture.value.type, ResourceType):
            name = getattr(capture.source, "name", "variable")
            nodes.append(Node(f"capture{i}", "variable", name, str(capture.value.type.value),
                              (), (), (capture.value.type,)))
        else:
            nodes.append(Node(f"capture{i}", "capture", f"captured {capture.value.type}", "",
                              (), (), (capture.value.type,)))
        producer[id(capture.value)] = nodes[-1].id
    for i, eq in enumerate(graph.equations):
        callee = eq.params.get("callee")
        op = eq.primitive.name
        title = f"{op} @{callee.name}" if callee is not None else op
        nodes.append(Node(f"op{i}", op, title, _params(eq.params), **reads(eq.inputs),
                          outputs=tuple(v.type for v in eq.outputs)))
        for value in eq.outputs:
            producer[id(value)] = nodes[-1].id
    for i, value in enumerate(graph.outputs):
        nodes.append(Node(f"out{i}", "result", f"result {i}", "", **reads([value]),
                          outputs=()))
    return nodes


_SHAPES = {"argument": "shape=ellipse", "result": "shape=ellipse", "capture": "shape=box",
           "variable": "shape=doubleoctagon, style=solid",
           "op": "shape=box, style=filled, fillcolor=lightgrey"}


def graph_dot(concrete: Any) -> str:
    """DOT for `concrete`'s graph: `dot -Tsvg` renders it."""
    lines = [f"digraph {_quote(concrete.name)} {{", "  rankdir=TB;",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    for node in graph_nodes(concrete.graph):
        label = f"{node.title}\n{node.detail}" if node.detail else node.title
        lines.append(f"  {node.id} [{_SHAPES.get(node.op, _SHAPES['op'])}, "
                     f"label={_quote(label)}];")
        lines.extend(f"  {source} -> {node.id} [label={_quote(str(ty))}];"
                     for source, ty in zip(node.inputs, node.input_types, strict=True))
    lines.append("}")
    return "\n".join(lines) + "\n"
