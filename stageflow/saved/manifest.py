"""The manifest of a saved directory as a declared schema, checked once before it is used.

`sf.saved.load` reads a file users can edit: every field it uses is checked here against
`SCHEMA` first, so that a deleted, renamed or retyped field is refused with its path
(``functions.call.concrete[0].jit must be a bool, got int 5``) instead of tripping a
KeyError deep in the loader. A schema is written with plain values:

- ``str``, ``bool``, ``int`` (``int``: a count or an index, so at least 0; never a bool);
- a tuple: one of these values (``("function", "object")``);
- ``[item]``: a list of `item`s; ``{"*": value}``: a dict from strings to `value`s;
- a dict: a record with exactly these fields (a field named ``"name?"`` may be absent);
- a function ``check(value, path)``: anything else (the structure nodes, dtypes, shapes).

What the schema cannot say (indices into other lists, agreement with the IR) the loader
checks afterwards, naming the same paths.

Each format `sf.saved` has written has its schema (`SCHEMAS`): ``stageflow-saved-2``
(`FORMAT`) records the SHA-256 of every other file of the directory in ``files``, covered by
the manifest's ``digest`` (both required); ``stageflow-saved-1`` had neither field (its
``digest``, when there is one, covers the manifest alone) and is still read, as a saved
directory may outlive the source that could save it again.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from stageflow.core import dtypes
from stageflow.saved.structure import JSON_SCALARS

__all__ = ["FILES", "FORMAT", "FORMAT_1", "SCHEMA", "SCHEMAS", "SCHEMA_1", "ManifestError",
           "check", "field_path"]

FORMAT = "stageflow-saved-2"
FORMAT_1 = "stageflow-saved-1"
# The files of a saved directory besides the manifest, each read by the loader.
FILES = ("module.mlir", "variables.npz")


class ManifestError(ValueError):
    """A field of the manifest that does not fit the schema: its path and what is wrong."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what
        super().__init__(f"field {path} {what}")


def field_path(path: str, key: str | int) -> str:
    """`path` extended by `key`: ``concrete[0]`` for an index, ``concrete[0].jit`` for a
    field named like an identifier, ``functions['a b']`` for any other."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _scalar(value: Any, path: str) -> None:
    if not isinstance(value, JSON_SCALARS):
        raise ManifestError(path, f"must be a number, string, bool or null, got "
                                  f"{_describe(value)}")


def _dtype(value: Any, path: str) -> None:
    if not isinstance(value, str) or value not in _DTYPE_NAMES:
        raise ManifestError(path, f"must name a dtype ({', '.join(_DTYPE_NAMES)}), got "
                                  f"{_describe(value)}")


_DTYPE_NAMES = [dtype.name for dtype in dtypes.ALL]


def _dim(value: Any, path: str) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise ManifestError(path, f"must be a dim (an int at least 0, or null for an unknown "
                                  f"one), got {_describe(value)}")


def _node(kinds: dict[str, Any]) -> Callable[[Any, str], None]:
    """A structure node: a dict of exactly one of `kinds`, its value checked against it."""
    def node(value: Any, path: str) -> None:
        if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in kinds:
            raise ManifestError(path, f"must be a dict with one field, one of "
                                      f"{', '.join(kinds)}; got {_describe(value)}")
        ((kind, child),) = value.items()
        _check(child, kinds[kind], field_path(path, kind))
    return node


def _items(child: Any) -> Callable[[Any, str], None]:
    """A dict node's items: ``[key, node]`` pairs, keys strings or ints."""
    def items(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise ManifestError(path, f"must be a list of [key, node] pairs, got "
                                      f"{_describe(value)}")
        for index, pair in enumerate(value):
            where = field_path(path, index)
            if (not isinstance(pair, list) or len(pair) != 2
                    or not isinstance(pair[0], str | int) or isinstance(pair[0], bool)):
                raise ManifestError(where, f"must be a [key, node] pair with a string or int "
                                           f"key, got {_describe(pair)}")
            _check(pair[1], child, field_path(where, 1))
    return items


TENSOR = {"shape": [_dim], "dtype": _dtype}
ARGUMENT: dict[str, Any] = {"tensor": TENSOR, "variable": int, "value": _scalar}
RESULT: dict[str, Any] = {"output": int, "value": _scalar}
for _kinds in (ARGUMENT, RESULT):
    _kinds.update(list=[_node(_kinds)], tuple=[_node(_kinds)], dict=_items(_node(_kinds)))

CONCRETE = {
    "module": str,
    "entry": str,
    "jit": bool,
    "arguments": _node({"tuple": [_node(ARGUMENT)]}),
    "captures": [_node({"variable": int, "constant": int})],
    "outputs": _node(RESULT),
}
PARAMETER = {"name": str,
             "kind": tuple(kind.name for kind in type(inspect.Parameter.POSITIONAL_ONLY)),
             "default?": _scalar}
SCHEMA_1 = {
    "format": str,
    "kind": ("function", "object"),
    "functions": {"*": {"parameters": [PARAMETER], "concrete": [CONCRETE]}},
    "variables": [{"name": str, "trainable": bool}],
    "digest?": str,
}
SCHEMA = {**{name: value for name, value in SCHEMA_1.items() if name != "digest?"},
          "files": dict.fromkeys(FILES, str),
          "digest": str}
SCHEMAS = {FORMAT: SCHEMA, FORMAT_1: SCHEMA_1}


def _check(value: Any, schema: Any, path: str) -> None:
    if schema in (str, bool, int):
        if type(value) is not schema or (schema is int and value < 0):
            want = {str: "a string", bool: "a bool", int: "an int at least 0"}[schema]
            raise ManifestError(path, f"must be {want}, got {_describe(value)}")
    elif isinstance(schema, tuple):
        if not any(type(value) is type(v) and value == v for v in schema):
            raise ManifestError(path, f"must be one of {', '.join(map(repr, schema))}, got "
                                      f"{_describe(value)}")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise ManifestError(path, f"must be a list, got {_describe(value)}")
        for index, item in enumerate(value):
            _check(item, schema[0], field_path(path, index))
    elif isinstance(schema, dict) and "*" in schema:
        if not isinstance(value, dict):
            raise ManifestError(path, f"must be a dict, got {_describe(value)}")
        for key, item in value.items():
            _check(item, schema["*"], field_path(path, key))
    elif isinstance(schema, dict):
        _record(value, schema, path)
    else:
        schema(value, path)


def _record(value: Any, schema: dict[str, Any], path: str) -> None:
    if not isinstance(value, dict):
        raise ManifestError(path or "(the whole file)", f"must be a dict with the fields "
                                                        f"{', '.join(schema)}, got "
                                                        f"{_describe(value)}")
    fields = {name.rstrip("?"): name.endswith("?") for name in schema}
    unknown = [key for key in value if key not in fields]
    if unknown:
        raise ManifestError(field_path(path, unknown[0]), f"is not a field of this record "
                                                          f"(it has {', '.join(fields)})")
    for name, optional in fields.items():
        if name in value:
            _check(value[name], schema[name + "?" if optional else name],
                   field_path(path, name))
        elif not optional:
            raise ManifestError(field_path(path, name), "is missing")


def check(manifest: Any) -> None:
    """Raise `ManifestError` naming the first field of `manifest` that the schema of its
    format (one of `SCHEMAS`, which the caller has checked) refuses."""
    _check(manifest, SCHEMAS[manifest["format"]], "")
