"""Ops whose result size depends on the values: `nonzero` (TensorFlow's one-argument
``tf.where``) and `unique`.

Their results have an unknown dim that only running the op fixes, so they have no compiled
lowering: a whole-function program computes every buffer's dims before it runs, and these
would need a dim computed in the middle of it. A staged function using them runs as Python
steps (its `stats()["steps_reasons"]` says so); `boolean_mask` and ``x[mask]`` are gathers
at the positions `nonzero` finds, so they differentiate as gathers do.
"""

from __future__ import annotations

import numpy as np

from stageflow.core import dtypes
from stageflow.core.op_facts import Cost, Family, HostOnly
from stageflow.core.primitive import Primitive, ShapedType

_VALUE_DEPENDENT = HostOnly("its result's size depends on the values (programs fix every "
                            "dim before they run)")


def _nonzero_rule(x: ShapedType) -> ShapedType:
    if x.ndim == 0:
        raise ValueError("needs a tensor of rank >= 1 (a scalar has no positions)")
    return ShapedType((None, x.ndim), dtypes.int64)


def _nonzero(x: np.ndarray) -> np.ndarray:
    return np.argwhere(np.asarray(x)).astype(np.int64)


nonzero_p = Primitive(
    "nonzero", shape_rule=_nonzero_rule, kernel=_nonzero,
    summary="the [count, rank] int64 positions of the true (non-zero) elements, row-major",
    family=Family.STRUCTURAL, cost=Cost.REDUCTION, lowered_by=_VALUE_DEPENDENT,
)
nonzero_p.def_nondifferentiable()


def _unique_rule(x: ShapedType, *, index_dtype: np.dtype) -> tuple[ShapedType, ShapedType]:
    if x.ndim != 1:
        raise ValueError(f"needs a 1-D tensor, got rank {x.ndim}")
    if index_dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"out_idx must be int32 or int64, got {np.dtype(index_dtype).name}")
    return ShapedType((None,), x.dtype), ShapedType(x.shape, np.dtype(index_dtype))


def _unique(x: np.ndarray, *, index_dtype: np.dtype) -> list[np.ndarray]:
    """TensorFlow's order: the values in the order they first occur."""
    x = np.asarray(x)
    _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # sorted values -> order of first occurrence
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return [x[np.sort(first)], rank[inverse.reshape(-1)].astype(index_dtype)]


unique_p = Primitive(
    "unique", shape_rule=_unique_rule, kernel=_unique,
    summary="the distinct values of a 1-D tensor in order of first occurrence, and each "
            "element's position among them",
    multiple_results=True, family=Family.STRUCTURAL, cost=Cost.REDUCTION,
    lowered_by=_VALUE_DEPENDENT,
)
unique_p.def_nondifferentiable()

__all__ = ["nonzero_p", "unique_p"]
