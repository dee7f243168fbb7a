"""Cast and CastLike: conversions between the element types stageflow has (`onnx.dtypes`).

ONNX's numeric conversions are NumPy's (floats to integers truncate, integers wrap, nonzero
is true) and so sf.cast's. `saturate` and `round_mode` concern only the 8-bit and 4-bit
floats, which stageflow has no tensors of: a cast to or from those, or strings, is refused.
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from stageflow.onnx import dtypes
from stageflow.onnx.converters import Node, Value, converts


def _target(node: Node, code: int) -> np.dtype:
    dtype = dtypes.from_onnx(code)
    if dtype is None:
        raise node.error(f"casts to {dtypes.type_name(code)}, which stageflow has no tensors "
                         f"of")
    return dtype


def _cast(x: Value, dtype: np.dtype) -> Value:
    if x.dtype == dtype and isinstance(x, np.ndarray):
        return x
    return sf.cast(x, dtype)


@converts("Cast")
def cast(node: Node, x: Value) -> Value:
    return _cast(x, _target(node, node.attr("to")))


@converts("CastLike")
def cast_like(node: Node, x: Value, target: Value) -> Value:
    """x converted to `target`'s element type (target's values are not read)."""
    return _cast(x, target.dtype)
