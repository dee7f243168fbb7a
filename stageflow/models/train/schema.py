"""The JSON parts of a checkpoint as declared schemas, checked before any of them is used.

A checkpoint file is a file users can edit, damage or write with another tool: `storage`
checks its safetensors header, the object graph and the checksums in the header's metadata,
and the directory's pointer file here first, so that a deleted, retyped, huge or deeply
nested field is refused with its path (``object_graph.nodes[3].children[0][1] must be an
index of nodes (0 to 7), got int 9``) instead of a KeyError, a TypeError or a
RecursionError deep in the restore. The schemas are written in `stageflow.core.json_schema`'s
plain values, as the saved directories' manifest is, their functions checking edges,
tensor entries and states.

What a schema cannot say (indices into the list of nodes, states naming the file's tensors,
variables' states) `check_graph` checks afterwards, naming the same paths.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from stageflow.core.json_schema import FieldError, check, describe, field_path
from stageflow.models.train.graph import KINDS, MAX_DEPTH, TENSOR, VARIABLE_VALUE

__all__ = ["FieldError", "check_checksums", "check_graph", "check_header", "check_pointer",
           "field_path"]

MAX_DIMS = 64  # NumPy's limit on an array's dimensions


def _fixed(*items: Any) -> Callable[[Any, str], None]:
    """A list of exactly as many values as `items`, each checked against its item."""
    def fixed(value: Any, path: str) -> None:
        if not isinstance(value, list) or len(value) != len(items):
            raise FieldError(path, f"must be a list of {len(items)} values, got "
                                   f"{describe(value)}")
        for index, (item, schema) in enumerate(zip(value, items, strict=True)):
            check(item, schema, field_path(path, index))
    return fixed


def _shape(value: Any, path: str) -> None:
    check(value, [int], path)
    if len(value) > MAX_DIMS:
        raise FieldError(path, f"has {len(value)} dims, an array at most {MAX_DIMS}")


def _offsets(value: Any, path: str) -> None:
    _fixed(int, int)(value, path)
    if value[0] > value[1]:
        raise FieldError(path, f"must be [begin, end] with begin <= end, got {value}")


def _hex64(value: Any, path: str) -> None:
    if not (isinstance(value, str) and len(value) == 16
            and all(c in "0123456789abcdef" for c in value)):
        raise FieldError(path, f"must be an XXH3-64 sum as 16 hex digits, got "
                               f"{describe(value)}")


def _name(value: Any, path: str) -> None:
    """A checkpoint's name in a pointer file: a path relative to its directory, inside it
    (a manager deletes the files its pointer names, so none may lead out)."""
    if (not isinstance(value, str) or not value or "\0" in value or value.startswith("/")
            or ".." in value.split("/")):
        raise FieldError(path, f"must name a checkpoint inside the directory (a relative path "
                               f"without '..'), got {describe(value)}")


def _state(value: Any, path: str) -> None:
    """A node's saved state: JSON values nested at most `MAX_DEPTH` deep; walked without
    recursion, as the value may nest deeper than the stack allows."""
    stack = [(value, path, 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise FieldError(path, f"nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            if TENSOR in value and (len(value) != 1 or not isinstance(value[TENSOR], str)):
                raise FieldError(path, f"must be {{{TENSOR!r}: a tensor's name}} (a dict with "
                                       f"{TENSOR!r} names a tensor), got {describe(value)}")
            stack.extend((item, field_path(path, key), depth + 1)
                         for key, item in value.items() if isinstance(item, dict | list))
        elif isinstance(value, list):
            stack.extend((item, field_path(path, index), depth + 1)
                         for index, item in enumerate(value) if isinstance(item, dict | list))


NODE = {"kind": KINDS, "type": str, "path": str, "children": [_fixed(str, int)],
        "slots": [_fixed(int, str, int)], "state": _state}
CHECKSUMS = {"xxh3_64": {"graph": _hex64, "tensors": {"*": _hex64}}}
POINTER = {"latest": _name, "all": [_name], "dropped?": [_name]}


def check_header(header: Any, dtypes: Collection[str]) -> None:
    """A safetensors header: ``__metadata__`` (strings to strings) and a tensor entry
    (`dtypes`' names, a shape, data offsets) per other key; its path is ``header``."""
    if not isinstance(header, dict):
        raise FieldError("header", f"must be a dict, got {describe(header)}")
    entry = {"dtype": tuple(dtypes), "shape": _shape, "data_offsets": _offsets}
    for key, value in header.items():
        check(value, {"*": str} if key == "__metadata__" else entry,
               field_path("header", key))


def check_graph(graph: Any, format_name: str, tensors: Collection[str]) -> None:
    """The object graph (path ``object_graph``): the schema, then what it cannot say: edges
    and slots name nodes that exist, states name tensors the file holds, and a variable's
    state is its value's tensor."""
    check(graph, {"format": (format_name,), "nodes": [NODE]}, "object_graph")
    nodes = graph["nodes"]
    if not nodes:
        raise FieldError("object_graph.nodes", "is empty (the root is node 0)")
    for number, node in enumerate(nodes):
        where = field_path("object_graph.nodes", number)
        for index, (_, child) in enumerate(node["children"]):
            _index(child, len(nodes), field_path(field_path(f"{where}.children", index), 1))
        for index, (variable, _, slot) in enumerate(node["slots"]):
            at = field_path(f"{where}.slots", index)
            _index(variable, len(nodes), field_path(at, 0))
            _index(slot, len(nodes), field_path(at, 2))
        state = node["state"]
        if node["kind"] == "variable" and not (
                isinstance(state, dict) and list(state) == [VARIABLE_VALUE]
                and isinstance(state[VARIABLE_VALUE], dict) and TENSOR in state[VARIABLE_VALUE]):
            raise FieldError(f"{where}.state", f"must be {{{VARIABLE_VALUE!r}: {{{TENSOR!r}: a "
                                               f"tensor's name}}}} (a variable's value), got "
                                               f"{describe(state)}")
        _tensor_names(state, f"{where}.state", tensors)


def _index(value: int, count: int, path: str) -> None:
    if value >= count:
        raise FieldError(path, f"must be an index of nodes (0 to {count - 1}), got int {value}")


def _tensor_names(state: Any, path: str, tensors: Collection[str]) -> None:
    """Every ``{TENSOR: key}`` in `state` (checked by `_state`) names one of `tensors`."""
    stack = [(state, path)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict) and TENSOR in value:
            if value[TENSOR] not in tensors:
                raise FieldError(field_path(path, TENSOR), f"names the tensor "
                                                           f"{value[TENSOR]!r}, which the "
                                                           f"file does not hold")
        elif isinstance(value, dict):
            stack.extend((item, field_path(path, key)) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, field_path(path, index)) for index, item in enumerate(value))


def check_checksums(checksums: Any, tensors: Collection[str]) -> None:
    """The checksums (path ``checksums``): an XXH3-64 sum of the graph, and one of each
    tensor the file holds, of no other."""
    check(checksums, CHECKSUMS, "checksums")
    sums = checksums["xxh3_64"]["tensors"]
    missing = [key for key in tensors if key not in sums]
    if missing:
        raise FieldError(field_path("checksums.xxh3_64.tensors", missing[0]), "is missing (the "
                                                                            "file holds that "
                                                                            "tensor)")
    extra = [key for key in sums if key not in tensors]
    if extra:
        raise FieldError(field_path("checksums.xxh3_64.tensors", extra[0]), "names a tensor the "
                                                                          "file does not hold")


def check_pointer(pointer: Any) -> None:
    """A directory's pointer file: the latest checkpoint, all those kept, and those dropped
    from the list whose files may remain to be deleted."""
    check(pointer, POINTER, "")
