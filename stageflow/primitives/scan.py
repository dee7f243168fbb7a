"""Cumulative (scan) primitives: `cumsum` and `cumprod` along one axis, inclusive or
exclusive, forwards or reversed; gradients.

Each output element combines the elements up to it along `axis` (TensorFlow's `tf.cumsum`
/ `tf.cumprod` arguments). One primitive per combination, as the reductions are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import same_dims
from stageflow.core.op_facts import Cost, Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import normalize_axis
from stageflow.primitives.autodiff import floating_only, where

NUMERIC = dtypes.FLOATING + dtypes.INTEGER


def _scan_rule(x: ShapedType, *, axis: int, exclusive: bool, reverse: bool) -> ShapedType:
    del exclusive, reverse
    if x.dtype not in NUMERIC:
        raise TypeError(f"needs a numeric tensor, got {x.dtype.name}")
    if x.ndim == 0:
        raise ValueError("needs at least one dim to scan along")
    normalize_axis(axis, x.ndim)
    return x


def _kernel(accumulate: Any, identity: float) -> Any:
    def scan(x: np.ndarray, *, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
        if reverse:
            x = np.flip(x, axis)
        result = accumulate(x, axis=axis, dtype=x.dtype)
        if exclusive:
            shape = list(x.shape)
            shape[axis] = 1
            start = np.full(shape, identity, x.dtype)
            result = np.concatenate([start, np.delete(result, -1, axis)], axis) if \
                x.shape[axis] else result
        return np.ascontiguousarray(np.flip(result, axis) if reverse else result)
    return scan


def _scan(name: str, accumulate: Any, identity: float, summary: str) -> Primitive:
    return Primitive(name, shape_rule=_scan_rule, kernel=_kernel(accumulate, identity),
                     dims=same_dims, summary=summary, family=Family.STRUCTURAL,
                     cost=Cost.REDUCTION, lowered_by=LoweredBy.OP_RULE)


cumsum_p = _scan("cumsum", np.cumsum, 0, "running sums along an axis")
cumprod_p = _scan("cumprod", np.cumprod, 1, "running products along an axis")


@cumsum_p.def_vjp
@floating_only
def _cumsum_vjp(cotangents, inputs, outputs, *, axis, exclusive, reverse):
    # each input feeds the outputs after it (before it, reversed): the cotangent summed
    # the other way round
    (g,) = cotangents
    return [cumsum_p.bind(g, axis=axis, exclusive=exclusive, reverse=not reverse)]


@cumprod_p.def_vjp
@floating_only
def _cumprod_vjp(cotangents, inputs, outputs, *, axis, exclusive, reverse):
    # d out_j / d x_i = out_j / x_i for the i it includes: the reversed running sum of
    # g * out, divided by x (TensorFlow's rule; an input of exactly 0 gets 0, not the
    # limit, as there)
    (g,), (x,), (y,) = cotangents, inputs, outputs
    total = cumsum_p.bind(g * y, axis=axis, exclusive=exclusive, reverse=not reverse)
    zero = x * 0
    return [where(x == zero, zero, total / where(x == zero, zero + 1, x))]
