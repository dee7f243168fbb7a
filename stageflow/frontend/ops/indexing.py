"""Basic indexing, `t[1, ::2, None, ...]`, as one slice primitive plus one reshape.

Ints, slices with steps, `None`/`np.newaxis` and `...` follow NumPy. An integer tensor (or
list) used as the only index of an axis gathers along it, as in TensorFlow and NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.errors import InvalidIndexError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor, is_tensor
from stageflow.frontend.ops.selection import boolean_mask
from stageflow.frontend.ops.shape import gather, reshape_to
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor
from stageflow.primitives import structural as st

_FULL = (None, None, None)


def _expand_ellipsis(key: tuple, ndim: int) -> tuple:
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexError(f"too many indices ({consumed}) for a rank-{ndim} tensor")
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    fill = (slice(None),) * (ndim - consumed)
    if ellipses:
        i = ellipses[0]
        return key[:i] + fill + key[i + 1 :]
    return key + fill


def getitem(x: Any, key: Any) -> Tensor:
    """`x[key]` with NumPy's basic indexing rules; while tracing, an integer scalar tensor
    indexes an axis like an int (as a gather, its value being unknown until run time)."""
    x = convert_to_tensor(x)
    if not isinstance(key, tuple):
        key = (key,)
    if len(key) == 1 and _is_mask(key[0]):
        return boolean_mask(x, key[0])
    if len(key) == 1 and _is_index_array(key[0]):
        indices = key[0]
        if isinstance(indices, list) and not indices:
            indices = np.zeros((0,), np.int32)
        return gather(x, indices, axis=0)
    try:
        key = _expand_ellipsis(key, x.ndim)
    except IndexError as error:
        raise IndexError(f"{error} of shape {x.shape}{describe_location()}") from None
    slices: list[tuple] = []
    shape: list[int | None] = []
    gathers: list[tuple[int, Any]] = []  # (result axis, traced index) taken after slicing
    axis = 0
    for k in key:
        if k is None:
            shape.append(1)
            continue
        dim = x.shape[axis]
        if isinstance(k, SymbolicTensor) and _is_integer(k):
            gathers.append((len(shape), k))  # its value is known only when the graph runs
            slices.append(_FULL)
            shape.append(dim)
        elif isinstance(k, slice):
            start, stop, step = (_index_value(v) for v in (k.start, k.stop, k.step))
            slices.append((start, stop, step))
            known = dim is not None
            shape.append(len(range(*slice(start, stop, step).indices(dim))) if known else None)
        elif isinstance(k, bool) or not _is_integer(k):
            raise TypeError(
                f"index {k!r} is not supported (ints, slices, None, ..., or one integer "
                f"tensor){describe_location()}"
            )
        else:
            i = int(k)
            if dim is not None and not -dim <= i < dim:
                raise InvalidIndexError(
                    f"index {i} is out of bounds for axis {axis} with size {dim} "
                    f"(shape {x.shape}){describe_location()}"
                )
            if dim is None:  # checked when the graph runs: a gather (a slice would be empty)
                gathers.append((len(shape), convert_to_tensor(np.int32(i))))
                slices.append(_FULL)
                shape.append(dim)
                axis += 1
                continue
            slices.append((i, i + 1 if i != -1 else None, None))
        axis += 1
    out = x
    if any(s != _FULL for s in slices):
        out = st.slice_p.bind(x, slices=tuple(slices))
    out = reshape_to(out, shape)
    for position, index in reversed(gathers):
        out = gather(out, index, axis=position)
    return out


def _is_mask(value: Any) -> bool:
    """A bool array or tensor index: NumPy's boolean indexing."""
    if isinstance(value, list):
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        return value.dtype == np.bool_ and value.ndim > 0
    return is_tensor(value) and convert_to_tensor(value).dtype == dtypes.bool_ and \
        convert_to_tensor(value).ndim > 0


def _is_index_array(value: Any) -> bool:
    if isinstance(value, list | np.ndarray):
        return True
    return is_tensor(value) and convert_to_tensor(value).ndim > 0


def _is_integer(value: Any) -> bool:
    if is_tensor(value):
        t = convert_to_tensor(value)
        return t.ndim == 0 and dtypes.is_integer(t.dtype)
    return hasattr(value, "__index__")


def _index_value(value: Any) -> int | None:
    return None if value is None else int(value)

