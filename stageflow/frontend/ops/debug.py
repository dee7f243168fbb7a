"""`sf.print`: print values when the op runs — at once eagerly, at every call when staged."""

from __future__ import annotations

import sys
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor, is_tensor
from stageflow.primitives.state import print_p


def print(*values: Any, sep: str = " ", end: str = "\n",  # noqa: A001 - sf.print
          output_stream: Any = None) -> None:
    """Print tensors (their values when the graph runs) and Python values (fixed at trace).

    `output_stream` is TensorFlow's: ``sys.stdout`` (the default: whatever it is when the
    op runs), ``sys.stderr``, or a ``"file://PATH"`` string (appended to).

    >>> sf.print("x:", sf.constant([1.0, 2.0]))
    x: [1. 2.]
    """
    tensors = [convert_to_tensor(v) for v in values if is_tensor(v)]
    pieces = tuple(None if is_tensor(v) else str(v) for v in values)
    print_p.bind(*tensors, pieces=pieces, sep=sep, end=end, stream=_stream(output_stream))


def _stream(output_stream: Any) -> str:
    """The name the print op keeps of `output_stream` (a stream object cannot be staged)."""
    if output_stream is None or output_stream is sys.stdout or output_stream is sys.__stdout__:
        return "stdout"
    if output_stream is sys.stderr or output_stream is sys.__stderr__:
        return "stderr"
    if isinstance(output_stream, str) and output_stream.startswith("file://"):
        return output_stream
    raise ValueError(f"sf.print: output_stream must be sys.stdout, sys.stderr or a "
                     f"'file://PATH' string, got {output_stream!r}{describe_location()}")
