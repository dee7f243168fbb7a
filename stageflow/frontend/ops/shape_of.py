"""`sf.shape`, `sf.size` and `sf.rank`: a tensor's dims as tensors (TensorFlow's names).

``x.shape`` is what tracing knows (None for an unknown dim); ``sf.shape(x)`` is the dims
the call brings, a tensor, so that ``sf.reshape(x, sf.stack([sf.shape(x)[0], 2, 2]))``-style
code and loops bounded by a batch size work with unknown dims. Known dims are constants
(folded where they meet other constants); an unknown one is read when the function runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.dispatch import for_composites
from stageflow.frontend.ops.shape import concat, reshape
from stageflow.frontend.tensor import Tensor
from stageflow.primitives.structural import dim_size_p

__all__ = ["rank", "shape", "size"]

_OUT_TYPES = (dtypes.int32, dtypes.int64)


def _out_type(op: str, out_type: Any) -> np.dtype:
    wanted = dtypes.as_dtype(out_type)
    if wanted not in _OUT_TYPES:
        raise TypeError(f"{op}: out_type must be int32 or int64, got {wanted.name}"
                        f"{describe_location()}")
    return wanted


def _dim(x: Tensor, axis: int, out_type: np.dtype) -> Tensor:
    known = x.shape[axis]
    if known is not None:
        return convert_to_tensor(np.asarray(known, out_type))
    return ew.cast(dim_size_p.bind(x, axis=axis), out_type)


@for_composites
def shape(input: Any, out_type: Any = dtypes.int32) -> Tensor:  # noqa: A002 - TF's name
    """The dims of `input` as a 1-d tensor of `out_type` (int32 or int64).

    >>> sf.shape(sf.zeros((2, 3)))
    sf.Tensor([2, 3], shape=(2,), dtype=int32)
    """
    x = convert_to_tensor(input)
    wanted = _out_type("shape", out_type)
    if all(d is not None for d in x.shape):
        return convert_to_tensor(np.asarray(x.shape, wanted).reshape(x.ndim))
    return concat([reshape(_dim(x, axis, wanted), (1,)) for axis in range(x.ndim)], 0)


def size(input: Any, out_type: Any = dtypes.int32) -> Tensor:  # noqa: A002 - TF's name
    """The number of elements of `input`, a scalar of `out_type` (int32 or int64).

    >>> sf.size(sf.zeros((2, 3)))
    sf.Tensor(6, shape=(), dtype=int32)
    """
    x = convert_to_tensor(input)
    wanted = _out_type("size", out_type)
    total = convert_to_tensor(np.asarray(1, wanted))
    for axis in range(x.ndim):
        total = ew.multiply(total, _dim(x, axis, wanted))
    return total


def rank(input: Any) -> Tensor:  # noqa: A002 - TF's name
    """The number of dims of `input`, an int32 scalar (always known when tracing).

    >>> sf.rank(sf.zeros((2, 3)))
    sf.Tensor(2, shape=(), dtype=int32)
    """
    return convert_to_tensor(np.asarray(convert_to_tensor(input).ndim, np.int32))
