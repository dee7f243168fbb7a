"""Sorting: `sort` orders keys along one axis and carries payloads along (XLA's variadic sort).

``sort(keys, *payloads, axis, descending)`` returns the sorted keys, the permutation that
sorts them (int32: result position j holds input position perm[j]) and each payload (same
shape as the keys, any dtype) permuted the same way. `sf.sort`, `sf.argsort`,
`sf.math.top_k` and `sf.random.shuffle` are composites of it, and so is its own gradient:
a cotangent goes back to the position its value came from by sorting it along with the
permutation as keys (which sorts the permutation back to the identity), with no index
arithmetic, so it works for unknown dims too.

The order is stable (ties keep their input order) and total: ascending puts NaN last, as
NumPy does; descending is exactly the reverse of ascending on the reversed axis (NaN
first, ties still in input order), as JAX's ``descending=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import PYTHON, DimArith
from stageflow.core.op_facts import Cost, Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape, normalize_axis

SORTABLE = dtypes.FLOATING + dtypes.INTEGER


def _sort_dims(d: DimArith, operands: Sequence[Sequence[Any]], **_: object) -> list:
    """Every result has the keys' dims, which the payloads share (one list per result)."""
    dims = [d.same([shape[axis] for shape in operands]) for axis in range(len(operands[0]))]
    return [list(dims) for _ in range(len(operands) + 1)]


def _sort_rule(keys: ShapedType, *payloads: ShapedType, axis: int, descending: bool
               ) -> tuple[ShapedType, ...]:
    del descending
    if keys.dtype not in SORTABLE:
        raise TypeError(f"cannot sort {keys.dtype.name} keys (numbers only)")
    if keys.ndim == 0:
        raise ValueError("needs at least one dim to sort along")
    normalize_axis(axis, keys.ndim)
    for payload in payloads:
        if len(payload.shape) != keys.ndim or any(
                p is not None and k is not None and p != k
                for p, k in zip(payload.shape, keys.shape, strict=True)):
            raise ValueError(f"a payload of shape {format_shape(payload.shape)} does not "
                             f"match the keys' {format_shape(keys.shape)}")
    shapes = _sort_dims(PYTHON, [keys.shape, *(p.shape for p in payloads)])
    return (ShapedType(tuple(shapes[0]), keys.dtype), ShapedType(tuple(shapes[1]), dtypes.int32),
            *(ShapedType(tuple(shape), p.dtype) for shape, p in zip(shapes[2:], payloads,
                                                                     strict=True)))


def _sort(keys: np.ndarray, *payloads: np.ndarray, axis: int, descending: bool
          ) -> list[np.ndarray]:
    keys = np.asarray(keys)
    # ml_dtypes' bfloat16 has no ordering of its own for NumPy's sorts: rank as float32.
    ranked = keys.astype(np.float32) if keys.dtype == dtypes.bfloat16 else keys
    if descending:  # the reverse of a stable ascending sort of the reversed axis
        flipped = np.argsort(np.flip(ranked, axis), axis=axis, kind="stable")
        order = (keys.shape[axis] - 1) - np.flip(flipped, axis)
    else:
        order = np.argsort(ranked, axis=axis, kind="stable")
    return [np.ascontiguousarray(np.take_along_axis(keys, order, axis=axis)),
            order.astype(np.int32),
            *(np.ascontiguousarray(np.take_along_axis(np.asarray(p), order, axis=axis))
              for p in payloads)]


sort_p = Primitive(
    "sort", shape_rule=_sort_rule, kernel=_sort, dims=_sort_dims,
    summary="keys sorted along an axis (stable, NaN last ascending), the permutation, and "
            "payloads permuted alike",
    multiple_results=True, family=Family.STRUCTURAL, cost=Cost.REDUCTION,
    lowered_by=LoweredBy.OP_RULE,
)


def unsort(g, permutation, axis: int):
    """`g`, laid out as sorted by `permutation`, back in input order."""
    return sort_p.bind(permutation, g, axis=axis, descending=False)[2]


@sort_p.def_vjp
def _sort_vjp(cotangents, inputs, outputs, *, axis, descending):
    del descending
    permutation = outputs[1]
    sorted_like = [cotangents[0], *cotangents[2:]]
    return [None if g is None or not dtypes.is_floating(x.dtype) else unsort(g, permutation, axis)
            for g, x in zip(sorted_like, [inputs[0], *inputs[1:]], strict=True)]


__all__ = ["SORTABLE", "sort_p", "unsort"]
