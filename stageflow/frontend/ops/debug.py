"""`sf.print`: print values when the op runs — at once eagerly, at every call when staged."""

from __future__ import annotations

from typing import Any

from stageflow.frontend.ops.convert import convert_to_tensor, is_tensor
from stageflow.primitives.state import print_p


def print(*values: Any, sep: str = " ") -> None:  # noqa: A001 - the public name is sf.print
    """Print tensors (their values when the graph runs) and Python values (fixed at trace).

    >>> sf.print("x:", sf.constant([1.0, 2.0]))
    x: [1. 2.]
    """
    tensors = [convert_to_tensor(v) for v in values if is_tensor(v)]
    pieces = tuple(None if is_tensor(v) else str(v) for v in values)
    print_p.bind(*tensors, pieces=pieces, sep=sep)
