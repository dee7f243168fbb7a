"""The text `Function.pretty_printed_concrete_signatures` prints: TensorFlow's format.

One block per concrete function: the call as the Python function's parameters (Python
values, traced as constants, shown as ``name=value``), then under ``Args:`` each tensor
argument as ``x: float32 Tensor, shape=(None,)`` and under ``Returns:`` the result the same
way; a nested argument or result is shown as its structure of numbered markers, each
described on a line of its own (``<1>: ...``), as TensorFlow's ``pretty_printed_signature``
does.
"""

from __future__ import annotations

import pprint
from typing import Any

import numpy as np

from stageflow.core import nest
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.variables import Variable


class _Marker:
    """A numbered placeholder in a printed structure (``<1>``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _is_described(value: Any) -> bool:
    return isinstance(value, TensorSpec | Variable)


def _leaf_text(value: Any) -> str:
    if isinstance(value, TensorSpec):
        return f"{np.dtype(value.dtype).name} Tensor, shape={_shape(value.shape)}"
    if isinstance(value, Variable):
        return f"{np.dtype(value.dtype).name} Variable, shape={_shape(value.shape)}"
    return repr(value)


def _shape(shape: tuple) -> str:
    return str(tuple(shape))


def describe(value: Any) -> str:
    """A tensor, variable or Python value in words; a nest as its structure of markers with
    one line per described leaf."""
    leaves, treedef = nest.flatten(value)
    if treedef == (None,):
        return _leaf_text(value)
    markers = [_Marker(f"<{i + 1}>") for i in range(len(leaves))]
    text = pprint.pformat(nest.unflatten(treedef, markers), width=10000)
    return text + "".join(f"\n      {marker}: {_leaf_text(leaf)}"
                          for marker, leaf in zip(markers, leaves, strict=True))


def signature_text(name: str, arguments: dict[str, Any], result: Any) -> str:
    """One concrete function's block: ``name(args)``, ``  Args:``, ``  Returns:``."""
    header = []
    details = []
    for parameter, value in arguments.items():
        if any(_is_described(leaf) for leaf in nest.flatten(value)[0]):
            header.append(parameter)
            details.append(f"    {parameter}: {describe(value)}")
        else:
            header.append(f"{parameter}={value}")
    lines = [f"{name}({', '.join(header)})"]
    if details:
        lines += ["  Args:", *details]
    lines += ["  Returns:", f"    {describe(result)}"]
    return "\n".join(lines)
