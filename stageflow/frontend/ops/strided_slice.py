"""`sf.strided_slice`: TensorFlow's strided slice with its bit masks, read as the Python
index (slices, ints, `None`, `...`) they encode and applied by tensor indexing, so it
differentiates and stages as indexing does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.static_value import get_static_value
from stageflow.frontend.tensor import Tensor

__all__ = ["strided_slice"]


def _ints(name: str, values: Any) -> list[int]:
    known = get_static_value(values)
    if known is None:
        raise ValueError(f"strided_slice: {name} must be known when the function is traced"
                         f"{describe_location()}")
    return [int(v) for v in known.reshape(-1)]


def strided_slice(input_: Any, begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None, begin_mask: int = 0, end_mask: int = 0,
                  ellipsis_mask: int = 0, new_axis_mask: int = 0,
                  shrink_axis_mask: int = 0) -> Tensor:
    """``input_[begin:end:strides]`` dim by dim, as TensorFlow's ``tf.strided_slice``: bit
    ``i`` of `begin_mask`/`end_mask` ignores ``begin[i]``/``end[i]`` (the full range), of
    `ellipsis_mask` makes entry ``i`` a ``...``, of `new_axis_mask` a new axis of length 1,
    of `shrink_axis_mask` the single index ``begin[i]`` (that dim removed).

    >>> x = sf.reshape(sf.range(24), (2, 3, 4))
    >>> sf.strided_slice(x, [0, 1, 1], [2, 3, 4], [1, 1, 2], shrink_axis_mask=1)
    sf.Tensor([[ 5,  7],
               [ 9, 11]], shape=(2, 2), dtype=int32)
    """
    x = convert_to_tensor(input_)
    begin, end = _ints("begin", begin), _ints("end", end)
    strides = [1] * len(begin) if strides is None else _ints("strides", strides)
    if not len(begin) == len(end) == len(strides):
        raise ValueError(f"strided_slice: begin, end and strides must have one length, got "
                         f"{len(begin)}, {len(end)} and {len(strides)}{describe_location()}")
    if any(s == 0 for s in strides):
        raise ValueError(f"strided_slice: strides must be non-zero{describe_location()}")
    index: list[Any] = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides, strict=True)):
        bit = 1 << i
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_axis_mask & bit:
            index.append(b)
        else:
            index.append(slice(None if begin_mask & bit else b, None if end_mask & bit else e,
                               s))
    return x[tuple(index)]
