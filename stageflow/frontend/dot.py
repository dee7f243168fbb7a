"""Graphviz DOT text of a graph function, drawn like the paper's figure 2.

Ops are filled boxes, arguments and results ellipses, captured tensors plain boxes and
variables unfilled double octagons (state); every edge is a tensor labelled with its type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core.primitive import ResourceType


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


def graph_dot(concrete: Any) -> str:
    """DOT for `concrete`'s graph: `dot -Tsvg` renders it."""
    graph = concrete.graph
    lines = [f"digraph {_quote(concrete.name)} {{", "  rankdir=TB;",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    producer: dict[int, str] = {}
    for i, value in enumerate(graph.inputs):
        node = f"arg{i}"
        lines.append(f"  {node} [shape=ellipse, label={_quote(f'arg {i}: {value.type}')}];")
        producer[id(value)] = node
    for i, capture in enumerate(graph.captures):
        node = f"capture{i}"
        if isinstance(capture.value.type, ResourceType):
            name = getattr(capture.source, "name", "variable")
            label = f"{name}\n{capture.value.type.value}"
            lines.append(f"  {node} [shape=doubleoctagon, style=solid, label={_quote(label)}];")
        else:
            lines.append(f"  {node} [shape=box, label={_quote(f'captured {capture.value.type}')}];")
        producer[id(capture.value)] = node
    for i, eq in enumerate(graph.equations):
        node = f"op{i}"
        title = eq.primitive.name
        callee = eq.params.get("callee")
        if callee is not None:
            title = f"call @{callee.name}"
        detail = _params(eq.params)
        label = f"{title}\n{detail}" if detail else title
        lines.append(f"  {node} [shape=box, style=filled, fillcolor=lightgrey, "
                     f"label={_quote(label)}];")
        for value in eq.inputs:
            lines.append(f"  {producer[id(value)]} -> {node} [label={_quote(str(value.type))}];")
        for value in eq.outputs:
            producer[id(value)] = node
    for i, value in enumerate(graph.outputs):
        lines.append(f"  out{i} [shape=ellipse, label={_quote(f'result {i}')}];")
        lines.append(f"  {producer[id(value)]} -> out{i} [label={_quote(str(value.type))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
