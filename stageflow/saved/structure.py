"""Argument and result structures of saved functions as JSON, and calls matched against them.

A saved concrete function takes nested lists, tuples and dicts whose leaves are tensors of
a dtype and shape (``None`` dims accept any size), variables, or the Python values it was
traced with (those are baked into its graph, so a call must pass the same). Nodes::

    {"tensor": {"shape": [null, 784], "dtype": "float32"}}   {"variable": 3}
    {"value": 0.5}   {"list": [...]}   {"tuple": [...]}   {"dict": [["key", node], ...]}
    {"output": 0}    (results only: the graph's first result)

Dict items are kept in `nest.flatten` order (`nest.sorted_keys`), so walking a node visits
the leaves in the order of the graph's arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import dtypes, nest
from stageflow.core.shapes import format_shape
from stageflow.frontend.tensor import Tensor, wrap
from stageflow.frontend.variables import Variable

Node = dict[str, Any]
JSON_SCALARS = (bool, int, float, str, type(None))


def encode(structure: Any, leaf: Callable[[Any], Node]) -> Node:
    """The node for `structure`, with `leaf` encoding everything that is not a container."""
    if type(structure) is list:
        return {"list": [encode(child, leaf) for child in structure]}
    if isinstance(structure, tuple):  # namedtuples load as plain tuples
        return {"tuple": [encode(child, leaf) for child in structure]}
    if type(structure) is dict:
        keys = nest.sorted_keys(structure)
        if not all(isinstance(k, str | int) for k in keys):
            raise ValueError(f"sf.saved: dict keys must be strings or ints, got {keys!r}")
        return {"dict": [[k, encode(structure[k], leaf)] for k in keys]}
    return leaf(structure)


def value_node(value: Any, what: str) -> Node:
    """A Python value baked into a trace; only JSON scalars can be saved."""
    if not isinstance(value, JSON_SCALARS):
        raise ValueError(f"sf.saved: {what} is a Python {type(value).__name__} "
                         f"({value!r}); only tensors, variables and Python scalars can be saved")
    return {"value": value}


def describe(node: Node) -> str:
    """``(float32[?, 3], [variable, 2])``: a node for messages."""
    if "tensor" in node:
        return _type(node["tensor"])
    if "variable" in node:
        return "variable"
    if "value" in node:
        return repr(node["value"])
    if "list" in node:
        return "[" + ", ".join(describe(c) for c in node["list"]) + "]"
    if "tuple" in node:
        return "(" + ", ".join(describe(c) for c in node["tuple"]) + ")"
    return "{" + ", ".join(f"{k!r}: {describe(c)}" for k, c in node["dict"]) + "}"


def match(node: Node, value: Any, path: str, inputs: list, where: str) -> None:
    """Append the graph inputs `value` provides for `node` (arrays, variables) to `inputs`;
    raise TypeError (kind, dtype) or ValueError (rank, dims) naming the argument otherwise."""
    if "tensor" in node:
        inputs.append(_tensor(node["tensor"], value, path, where))
    elif "variable" in node:
        if not isinstance(value, Variable):
            raise TypeError(f"{where}: {path} must be an sf.Variable, got "
                            f"{type(value).__name__}")
        inputs.append(value)
    elif "value" in node:
        if type(value) is not type(node["value"]) or value != node["value"]:
            raise TypeError(f"{where}: {path} was {node['value']!r} when the function was "
                            f"saved (Python values are part of the graph), got {value!r}")
    elif "dict" in node:
        keys = [k for k, _ in node["dict"]]
        if not isinstance(value, dict) or set(value) != set(keys):  # walked in saved order
            raise TypeError(f"{where}: {path} must be a dict with keys {keys}, got {value!r}")
        for key, child in node["dict"]:
            match(child, value[key], f"{path}[{key!r}]", inputs, where)
    else:
        kind = "list" if "list" in node else "tuple"
        children = node[kind]
        if not isinstance(value, list | tuple) or len(value) != len(children):
            raise TypeError(f"{where}: {path} must be a {kind} of {len(children)} items "
                            f"{describe(node)}, got {type(value).__name__}")
        for index, (child, item) in enumerate(zip(children, value, strict=True)):
            match(child, item, f"{path}[{index}]", inputs, where)


def _tensor(spec: dict, value: Any, path: str, where: str) -> np.ndarray:
    if isinstance(value, Tensor | Variable):
        array = value._value
    elif isinstance(value, np.ndarray | np.generic):  # a NumPy scalar, as staged calls take
        array = np.asarray(value)
    else:
        raise TypeError(f"{where}: {path} must be a tensor {_type(spec)}, got "
                        f"{type(value).__name__}")
    want = dtypes.as_dtype(spec["dtype"])
    if array.dtype != want:
        raise TypeError(f"{where}: {path} has dtype {array.dtype.name}, the saved "
                        f"signature expects {want.name}")
    shape = spec["shape"]
    if len(array.shape) != len(shape) or any(
            w is not None and w != g for w, g in zip(shape, array.shape, strict=True)):
        raise ValueError(f"{where}: {path} has shape {format_shape(array.shape)}, the saved "
                         f"signature expects {format_shape(tuple(shape))}")
    return np.require(array, requirements="C")  # (ascontiguousarray makes a 0-d array 1-d)


def _type(spec: dict) -> str:
    dims = ", ".join("?" if d is None else str(d) for d in spec["shape"])
    return f"{spec['dtype']}[{dims}]"


def build(node: Node, results: list) -> Any:
    """The Python result: `node` with each ``{"output": i}`` the i-th result as a tensor."""
    if "output" in node:
        return wrap(results[node["output"]])
    if "value" in node:
        return node["value"]
    if "list" in node:
        return [build(child, results) for child in node["list"]]
    if "tuple" in node:
        return tuple(build(child, results) for child in node["tuple"])
    return {key: build(child, results) for key, child in node["dict"]}
