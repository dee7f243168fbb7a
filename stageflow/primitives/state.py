"""Stateful primitives: variable reads and writes, and printing when the graph runs.

A variable enters a graph function as a resource handle (captured by reference), so a
staged `v.assign_add(1.0)` mutates the live Python variable (the paper's listing 7). Each
op declares its effect (a read, a write, output): passes never prune, fold or reorder them
across each other.
"""

from __future__ import annotations

import sys

import numpy as np

from stageflow.core.op_facts import Cost, Effect, Family, HostOnly, LoweredBy, Memory
from stageflow.core.primitive import Primitive, ResourceType, ShapedType
from stageflow.core.shapes import format_shape


def _read_rule(handle: ResourceType) -> ShapedType:
    if not isinstance(handle, ResourceType):
        raise TypeError(f"expected a variable handle, got {handle}")
    return handle.value


def _assign_rule(handle: ResourceType, value: ShapedType) -> tuple:
    target = _read_rule(handle)
    if value.dtype != target.dtype:
        raise TypeError(f"cannot assign {value.dtype.name} to a {target.dtype.name} variable")
    compatible = len(value.shape) == len(target.shape) and all(
        a == b or None in (a, b) for a, b in zip(value.shape, target.shape, strict=True)
    )
    if not compatible:
        raise ValueError(
            f"cannot assign shape {format_shape(value.shape)} to a variable of shape "
            f"{format_shape(target.shape)}"
        )
    return ()


def _assign(variable, value) -> tuple:
    variable._store(value)
    return ()


read_variable_p = Primitive(
    "read_variable",
    shape_rule=_read_rule,
    kernel=lambda variable: variable._current(),  # fetched, where a device keeps it
    summary="the current value of a variable",
    effects=Effect.READS,
    family=Family.STATE, memory=Memory.EXTERNAL, cost=Cost.STATE,
    lowered_by=LoweredBy.PROGRAM,
)

assign_variable_p = Primitive(
    "assign_variable",
    shape_rule=_assign_rule,
    kernel=_assign,
    summary="replace a variable's value",
    multiple_results=True,
    effects=Effect.WRITES,
    family=Family.STATE, cost=Cost.STATE, lowered_by=LoweredBy.PROGRAM,
)


def _print_rule(*values: ShapedType, pieces: tuple, sep: str, end: str = "\n",
                stream: str = "stdout") -> tuple:
    if sum(piece is None for piece in pieces) != len(values):
        raise ValueError(f"{len(values)} tensors for {pieces}")
    if stream not in ("stdout", "stderr") and not stream.startswith("file://"):
        raise ValueError(f"the stream is 'stdout', 'stderr' or 'file://PATH', got {stream!r}")
    return ()


def shown(value: np.ndarray, summarize: int | None = None) -> str:
    """A value as `sf.print` and `sf.strings.format` show it: NumPy's text, strings as
    TensorFlow prints them (a scalar's text alone, an array's elements in double quotes);
    `summarize` elements at each end of each longer dim, as TensorFlow's, where given."""
    options: dict = {}
    if summarize is not None and summarize >= 0:
        options = {"threshold": 0, "edgeitems": summarize}
    if value.dtype.kind != "O":
        return np.array2string(value, **options)
    if not value.ndim:
        return value[()].decode("utf-8", "backslashreplace")
    return np.array2string(value, formatter={
        "all": lambda b: '"' + b.decode("utf-8", "backslashreplace") + '"'}, **options)


def _print(*values, pieces: tuple, sep: str, end: str = "\n", stream: str = "stdout"
           ) -> tuple:
    tensors = iter(values)
    text = sep.join(shown(np.asarray(next(tensors))) if piece is None else piece
                    for piece in pieces)
    if stream.startswith("file://"):
        with open(stream[len("file://"):], "a", encoding="utf-8") as file:
            file.write(text + end)
    else:  # looked up at each print: whatever sys.stdout is then (a notebook's, a test's)
        print(text, end=end, file=getattr(sys, stream), flush=True)
    return ()


print_p = Primitive(
    "print",
    shape_rule=_print_rule,
    kernel=_print,
    summary="print tensor values when the op runs",
    multiple_results=True,
    effects=Effect.OUTPUT,
    family=Family.STATE, cost=Cost.STATE,
    lowered_by=HostOnly("it prints from Python when the op runs"),
    takes_strings=True,
)
print_p.def_nondifferentiable()
# read_variable and assign_variable have no rule here: the tape maps a read back to its
# variable (autodiff.HANDLED_BY_TAPE).
