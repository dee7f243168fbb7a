"""JSON that users can edit, checked against a declared schema before any of it is used.

A saved directory's manifest (`stageflow.saved.manifest`) and a checkpoint's header, object
graph, checksums and pointer file (`stageflow.models.train.schema`) are read from files a
user can edit, damage or write with another tool: each is checked here first, so that a
deleted, renamed, retyped, huge or deeply nested field is refused with its path
(``functions.call.concrete[0].jit must be a bool, got int 5``) instead of a KeyError, a
TypeError or a RecursionError deep in the reader. A schema is written with plain values:

- ``str``, ``bool``, ``int`` (``int``: a count, an offset or an index, so at least 0; never
  a bool);
- a tuple: one of these values (``("function", "object")``);
- ``[item]``: a list of `item`s; ``{"*": value}``: a dict from strings to `value`s;
- a dict: a record with exactly these fields (a field named ``"name?"`` may be absent);
- a function ``check(value, path)``: anything else, raising `FieldError`.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["FieldError", "check", "describe", "field_path"]


class FieldError(ValueError):
    """A field that does not fit its schema: its path and what is wrong."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what
        super().__init__(f"field {path} {what}")


def field_path(path: str, key: str | int) -> str:
    """`path` extended by `key`: ``nodes[3]`` for an index, ``nodes[3].kind`` for a field
    named like an identifier, ``header['model.v']`` for any other."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


_SHORT = reprlib.Repr()  # bounded in depth and length: a value may nest hundreds deep
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 2, 40, 40, 40


def describe(value: Any) -> str:
    """A value as an error shows it: its type and a short repr."""
    return f"{type(value).__name__} {_SHORT.repr(value)}"


_SCALARS = {str: "a string", bool: "a bool", int: "an int at least 0"}


def check(value: Any, schema: Any, path: str) -> None:
    """`value` (at `path`) against `schema`; a `FieldError` naming the first misfit."""
    if isinstance(schema, type) and schema in _SCALARS:
        if type(value) is not schema or (schema is int and value < 0):
            raise FieldError(path, f"must be {_SCALARS[schema]}, got {describe(value)}")
    elif isinstance(schema, tuple):
        if not any(type(value) is type(v) and value == v for v in schema):
            raise FieldError(path, f"must be one of {', '.join(map(repr, schema))}, got "
                                   f"{describe(value)}")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise FieldError(path, f"must be a list, got {describe(value)}")
        for index, item in enumerate(value):
            check(item, schema[0], field_path(path, index))
    elif isinstance(schema, dict) and "*" in schema:
        if not isinstance(value, dict):
            raise FieldError(path, f"must be a dict, got {describe(value)}")
        for key, item in value.items():
            check(item, schema["*"], field_path(path, key))
    elif isinstance(schema, dict):
        _record(value, schema, path)
    else:
        schema(value, path)


def _record(value: Any, schema: dict[str, Any], path: str) -> None:
    if not isinstance(value, dict):
        raise FieldError(path or "(the whole file)", f"must be a dict with the fields "
                                                     f"{', '.join(schema)}, got "
                                                     f"{describe(value)}")
    fields = {name.rstrip("?"): name.endswith("?") for name in schema}
    unknown = [key for key in value if key not in fields]
    if unknown:
        raise FieldError(field_path(path, unknown[0]), f"is not a field of this record (it "
                                                       f"has {', '.join(fields)})")
    for name, optional in fields.items():
        if name in value:
            check(value[name], schema[name + "?" if optional else name],
                  field_path(path, name))
        elif not optional:
            raise FieldError(field_path(path, name), "is missing")
