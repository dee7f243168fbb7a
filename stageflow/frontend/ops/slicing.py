"""`sf.slice`: TensorFlow's block slicing, ``tf.slice(input_, begin, size)``, as basic
indexing (`stageflow.frontend.ops.indexing`)."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor, is_tensor
from stageflow.frontend.ops.indexing import getitem
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor


def slice(input_: Any, begin: Any, size: Any) -> Tensor:  # noqa: A001 - TF's name
    """The block of `input_` starting at `begin` with `size` elements along each dim (-1:
    the rest of the dim), as ``input_[begin[0]:begin[0] + size[0], ...]``; `begin` and
    `size` must be known when a function is traced (Python ints or eager tensors).

    >>> sf.slice(sf.constant([[1, 2, 3], [4, 5, 6]]), [0, 1], [2, -1])
    sf.Tensor([[2, 3],
               [5, 6]], shape=(2, 2), dtype=int32)
    """
    x = convert_to_tensor(input_)
    starts, sizes = _known_ints(begin, "begin"), _known_ints(size, "size")
    if len(starts) != x.ndim or len(sizes) != x.ndim:
        raise ValueError(f"slice: begin and size need one entry per dim of the rank-{x.ndim} "
                         f"input, got {len(starts)} and {len(sizes)}{describe_location()}")
    return getitem(x, tuple(builtins.slice(b, None if s == -1 else b + s)
                            for b, s in zip(starts, sizes, strict=True)))


def _known_ints(value: Any, what: str) -> list[int]:
    if isinstance(value, SymbolicTensor):
        raise TypeError(f"slice: {what} must be known when the function is traced (Python "
                        f"ints or an eager tensor), got a traced tensor{describe_location()}")
    return [int(v) for v in np.asarray(value.numpy() if is_tensor(value) else value)
            .reshape(-1)]
