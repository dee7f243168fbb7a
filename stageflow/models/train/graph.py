"""The object graph a checkpoint stores: objects as nodes, named edges between them.

Nodes are the objects that hold state or lead to it: variables, modules (layers, models,
optimizers, metrics), lists, tuples and dicts of them, random generators, and any object
following the checkpoint protocol (dataset iterators, `NumpyState`, `PythonState`):

- ``_checkpoint_children() -> dict[str, object]``: its named edges;
- ``_checkpoint_state() -> nest``: its own state, JSON values and NumPy arrays;
- ``_checkpoint_prepare(state, where) -> commit``: check a saved state (raising before
  anything changes) and return the function that applies it.

Edges are attribute names, list indices and dict keys. An optimizer's slot variables are not
edges of the optimizer: each is recorded with the node of the variable it belongs to, so it is
matched through that variable whatever attribute path reaches it. A node's path (the first
edge names reaching it, joined by dots: ``model.layers.0.kernel``) names its tensors in the
file and the object in messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stageflow.core.shapes import format_shape
from stageflow.frontend.ops.random import Generator
from stageflow.frontend.variables import Variable
from stageflow.models.module import Module
from stageflow.models.optimizers import Optimizer

Commit = Callable[[], None]
VARIABLE_VALUE = "VARIABLE_VALUE"
TENSOR = "__tensor__"  # {TENSOR: key} in a saved state: the file's tensor `key`
KINDS = ("variable", "list", "dict", "object")  # what `kind` returns
# How deeply a node's saved state may nest: saving refuses deeper state and reading refuses
# deeper metadata, so that neither recurses out of the stack on a value a file can hold.
MAX_DEPTH = 100

@dataclass
class Node:
    """One object of the graph as saved: its path, kind, edges and (optimizers) slots."""

    obj: Any
    path: str
    children: list[tuple[str, int]] = field(default_factory=list)
    slots: list[tuple[int, str, int]] = field(default_factory=list)  # (variable, slot, node)

def kind(obj: Any) -> str:
    """The name a node's saved kind is checked against on restore."""
    if isinstance(obj, Variable):
        return "variable"
    if isinstance(obj, list | tuple):
        return "list"
    if isinstance(obj, dict):
        return "dict"
    return "object"

def is_trackable(obj: Any) -> bool:
    return isinstance(obj, Variable | Module | Generator | list | tuple | dict) or hasattr(
        obj, "_checkpoint_children") or hasattr(obj, "_checkpoint_state")

def children(obj: Any) -> dict[str, Any]:
    """The named edges out of `obj` to trackable objects, in a fixed order."""
    if isinstance(obj, Variable):
        return {}
    if isinstance(obj, Generator):
        return {"state": obj._state}
    if hasattr(obj, "_checkpoint_children"):
        edges = obj._checkpoint_children()
    elif isinstance(obj, Module):
        ignored = type(obj)._TRACKING_IGNORED
        if isinstance(obj, Optimizer):  # slots are saved keyed by their variables
            ignored = ignored | {"_slot_variables"}
        edges = {k: v for k, v in vars(obj).items() if k not in ignored}
    elif isinstance(obj, dict):
        edges = {}
        for key, value in obj.items():
            if not isinstance(key, str | int):
                raise TypeError(f"sf.train: a dict key in a checkpointed object must be a str "
                                f"or an int (an edge name), got {key!r}")
            edges[str(key)] = value
    elif isinstance(obj, list | tuple):
        edges = {str(i): value for i, value in enumerate(obj)}
    else:
        edges = {}
    return {name: value for name, value in edges.items() if is_trackable(value)}

def slots(obj: Any) -> list[tuple[Variable, str, Variable]]:
    """``(variable, slot name, slot)`` for each slot of an optimizer (none for others)."""
    if not isinstance(obj, Optimizer):
        return []
    return [(ref(), name, slot) for ref, named in list(obj._slots.values()) if ref() is not None
            for name, slot in named.items()]

def walk(root: Any) -> list[Node]:
    """The graph reachable from `root`, breadth first (so a node's path is its shortest),
    each object once; then the slots of its optimizers whose variables are in it."""
    nodes = [Node(root, "")]
    index = {id(root): 0}
    position = 0
    while position < len(nodes):
        node = nodes[position]
        position += 1
        for name, child in children(node.obj).items():
            if id(child) not in index:
                index[id(child)] = len(nodes)
                nodes.append(Node(child, f"{node.path}.{name}" if node.path else name))
            node.children.append((name, index[id(child)]))
    for node in list(nodes):
        for variable, name, slot in slots(node.obj):
            if id(variable) not in index or id(slot) in index:
                continue  # slots of variables this checkpoint does not hold
            index[id(slot)] = len(nodes)
            nodes.append(Node(slot, f"{node.path}.{name}.{nodes[index[id(variable)]].path}"))
            node.slots.append((index[id(variable)], name, index[id(slot)]))
    return nodes

def state(obj: Any) -> Any:
    """What a node saves of its own (None when it holds nothing but edges)."""
    if isinstance(obj, Variable):
        return {VARIABLE_VALUE: obj._value}  # written out before anything can assign it
    if hasattr(obj, "_checkpoint_state"):
        return obj._checkpoint_state()
    return None

def prepare(obj: Any, saved: Any, where: str) -> Commit:
    """Check `saved` against `obj` and return the function restoring it; raises ValueError
    naming `where` (the checkpoint and the object's path) before anything changes."""
    if isinstance(obj, Variable):
        value = saved[VARIABLE_VALUE]
        if value.shape != obj.shape or value.dtype != obj.dtype:
            raise ValueError(
                f"{where}: the variable {obj.name!r} is "
                f"{obj.dtype.name}{format_shape(obj.shape)}, the checkpoint holds "
                f"{value.dtype.name}{format_shape(value.shape)}")
        return lambda: obj._store(value)
    return obj._checkpoint_prepare(saved, where)

__all__ = ["KINDS", "MAX_DEPTH", "TENSOR", "VARIABLE_VALUE", "Commit", "Node", "children",
           "is_trackable", "kind", "prepare", "slots", "state", "walk"]
