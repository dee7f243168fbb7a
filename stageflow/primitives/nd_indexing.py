"""N-dimensional indexing primitives (TensorFlow's): `gather_nd` and the scatters
`scatter_nd_add` and `scatter_nd_update`, with their gradients.

An index tensor ``[..., k]`` holds one k-tuple per position (``k``, the `width` param, is
known where the op is built, also where the indices' dims are not); each tuple selects a slice
``params[i0, ..., ik-1]`` of the last ``params.ndim - k`` dims. `gather_nd` collects those
slices; the scatters copy a tensor and add (or write) update slices at the tuples, so a
duplicated tuple accumulates (`scatter_nd_add`; TensorFlow's `scatter_nd` and
`tensor_scatter_nd_add`, also `unsorted_segment_sum`) or one of its writes wins
(`scatter_nd_update`). An index out of range is an `IndexError` (eagerly and from the
compiled code's error code, as `gather` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import PYTHON, D, DimArith, same_dims
from stageflow.core.errors import InvalidIndexError
from stageflow.core.op_facts import Cost, Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.primitives.autodiff import floating_only, zeros_like

INDEX_DTYPES = (dtypes.int32, dtypes.int64)


def _check_width(params: ShapedType, indices: ShapedType, width: int) -> None:
    """Indices ``[..., width]`` of an integer dtype, for a tensor of rank >= width."""
    if indices.dtype not in INDEX_DTYPES:
        raise TypeError(f"indices must be int32 or int64, got {indices.dtype.name}")
    if indices.ndim == 0 or indices.shape[-1] not in (None, width):
        raise ValueError(f"indices must be [..., {width}], got {format_shape(indices.shape)}")
    if width > params.ndim:
        raise ValueError(f"index tuples of {width} for a tensor of rank {params.ndim}")


def _gather_nd_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                    width: int) -> list[D]:
    """The index tuples' positions, then the selected slices' dims."""
    params, indices = operands
    return [*indices[:-1], *params[width:]]


def _gather_nd_rule(params: ShapedType, indices: ShapedType, *, width: int) -> ShapedType:
    _check_width(params, indices, width)
    return ShapedType(tuple(_gather_nd_dims(PYTHON, [params.shape, indices.shape],
                                            width=width)), params.dtype)


def _positions(array: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, ...]:
    """The index tuples as NumPy advanced indices, negative ones from the end, checked."""
    width = indices.shape[-1]
    flat = indices.reshape(-1, width).astype(np.int64)
    bounds = np.array(array.shape[:width], np.int64)
    if flat.size and ((flat < -bounds).any() or (flat >= bounds).any()):
        raise InvalidIndexError(f"an index tuple is out of range for the dims "
                         f"{tuple(array.shape[:width])}")
    flat = np.where(flat < 0, flat + bounds, flat)
    return tuple(flat[:, axis] for axis in range(width))


def _gather_nd(params, indices, *, width):
    del width  # the indices' last dim
    positions = _positions(params, indices)
    taken = params[positions]
    return taken.reshape(indices.shape[:-1] + params.shape[indices.shape[-1]:])


gather_nd_p = Primitive(
    "gather_nd",
    shape_rule=_gather_nd_rule,
    kernel=_gather_nd,
    dims=_gather_nd_dims,
    summary="the slices of params at index tuples (indices [..., k], k = width)",
    family=Family.STRUCTURAL, cost=Cost.COPY, lowered_by=LoweredBy.OP_RULE,
)


def _scatter_rule(tensor: ShapedType, indices: ShapedType, updates: ShapedType, *,
                  width: int) -> ShapedType:
    _check_width(tensor, indices, width)
    want = (*indices.shape[:-1], *tensor.shape[width:])
    if updates.dtype != tensor.dtype:
        raise TypeError(f"updates are {updates.dtype.name}, the tensor {tensor.dtype.name}")
    if len(updates.shape) != len(want) or any(
            a is not None and b is not None and a != b
            for a, b in zip(updates.shape, want, strict=True)):
        raise ValueError(f"updates must be {format_shape(want)} for these indices, got "
                         f"{format_shape(updates.shape)}")
    return tensor


def _scatter(add: bool):
    def kernel(tensor, indices, updates, *, width):
        del width  # the indices' last dim
        out = np.array(tensor, copy=True)
        positions = _positions(out, indices)
        rows = updates.reshape((-1, *tensor.shape[indices.shape[-1]:]))
        if add:
            np.add.at(out, positions, rows)
        else:
            out[positions] = rows
        return out
    return kernel


scatter_nd_add_p = Primitive(
    "scatter_nd_add",
    shape_rule=_scatter_rule,
    kernel=_scatter(add=True),
    dims=same_dims,
    summary="tensor with update slices added at index tuples (duplicates accumulate)",
    family=Family.STRUCTURAL, cost=Cost.COPY, lowered_by=LoweredBy.OP_RULE,
)
scatter_nd_update_p = Primitive(
    "scatter_nd_update",
    shape_rule=_scatter_rule,
    kernel=_scatter(add=False),
    dims=same_dims,
    summary="tensor with the slices at index tuples replaced by update slices",
    family=Family.STRUCTURAL, cost=Cost.COPY, lowered_by=LoweredBy.OP_RULE,
)


@gather_nd_p.def_vjp
@floating_only
def _gather_nd_vjp(cotangents, inputs, outputs, *, width):
    (g,), (params, indices) = cotangents, inputs
    return [scatter_nd_add_p.bind(zeros_like(params), indices, g, width=width), None]


@scatter_nd_add_p.def_vjp
@floating_only
def _scatter_nd_add_vjp(cotangents, inputs, outputs, *, width):
    (g,), (_, indices, _) = cotangents, inputs
    return [g, None, gather_nd_p.bind(g, indices, width=width)]


@scatter_nd_update_p.def_vjp
@floating_only
def _scatter_nd_update_vjp(cotangents, inputs, outputs, *, width):
    # the replaced slices get no gradient; each update gets its slice's (for distinct
    # tuples: a duplicated tuple's earlier writes have no effect, yet get it too)
    (g,), (_, indices, updates) = cotangents, inputs
    return [scatter_nd_update_p.bind(g, indices, zeros_like(updates), width=width), None,
            gather_nd_p.bind(g, indices, width=width)]
