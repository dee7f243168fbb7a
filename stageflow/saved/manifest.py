"""The manifest of a saved directory as a declared schema, checked once before it is used.

`sf.saved.load` reads a file users can edit: every field it uses is checked here against
`SCHEMA` first, so that a deleted, renamed or retyped field is refused with its path
(``functions.call.concrete[0].jit must be a bool, got int 5``) instead of tripping a
KeyError deep in the loader. The schema is written in
`stageflow.core.json_schema`'s plain values, its functions checking the structure nodes,
dtypes and shapes.

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
from stageflow.core.json_schema import FieldError, describe, field_path
from stageflow.core.json_schema import check as check_schema
from stageflow.saved.structure import JSON_SCALARS

__all__ = ["FILES", "FORMAT", "FORMAT_1", "SCHEMA", "SCHEMAS", "SCHEMA_1", "ManifestError",
           "check", "field_path"]

# A field of the manifest that does not fit the schema: its path and what is wrong.
ManifestError = FieldError

FORMAT = "stageflow-saved-2"
FORMAT_1 = "stageflow-saved-1"
# The files of a saved directory besides the manifest, each read by the loader.
FILES = ("module.mlir", "variables.npz")


def _scalar(value: Any, path: str) -> None:
    if not isinstance(value, JSON_SCALARS):
        raise ManifestError(path, f"must be a number, string, bool or null, got "
                                  f"{describe(value)}")


def _dtype(value: Any, path: str) -> None:
    if not isinstance(value, str) or value not in _DTYPE_NAMES:
        raise ManifestError(path, f"must name a dtype ({', '.join(_DTYPE_NAMES)}), got "
                                  f"{describe(value)}")


_DTYPE_NAMES = [dtype.name for dtype in dtypes.ALL]


def _dim(value: Any, path: str) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise ManifestError(path, f"must be a dim (an int at least 0, or null for an unknown "
                                  f"one), got {describe(value)}")


def _node(kinds: dict[str, Any]) -> Callable[[Any, str], None]:
    """A structure node: a dict of exactly one of `kinds`, its value checked against it."""
    def node(value: Any, path: str) -> None:
        if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in kinds:
            raise ManifestError(path, f"must be a dict with one field, one of "
                                      f"{', '.join(kinds)}; got {describe(value)}")
        ((kind, child),) = value.items()
        check_schema(child, kinds[kind], field_path(path, kind))
    return node


def _items(child: Any) -> Callable[[Any, str], None]:
    """A dict node's items: ``[key, node]`` pairs, keys strings or ints."""
    def items(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise ManifestError(path, f"must be a list of [key, node] pairs, got "
                                      f"{describe(value)}")
        for index, pair in enumerate(value):
            where = field_path(path, index)
            if (not isinstance(pair, list) or len(pair) != 2
                    or not isinstance(pair[0], str | int) or isinstance(pair[0], bool)):
                raise ManifestError(where, f"must be a [key, node] pair with a string or int "
                                           f"key, got {describe(pair)}")
            check_schema(pair[1], child, field_path(where, 1))
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


def check(manifest: Any) -> None:
    """Raise `ManifestError` naming the first field of `manifest` that the schema of its
    format (one of `SCHEMAS`, which the caller has checked) refuses."""
    check_schema(manifest, SCHEMAS[manifest["format"]], "")
