"""Reduction primitives: sum, max, min, prod over a set of axes, argmax/argmin; gradients.

`axes` are normalised (sorted, non-negative) by the op functions before binding, so that
equal reductions print and compare equal in the IR.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import PYTHON, D, DimArith
from stageflow.core.op_facts import Cost, Family, LoweredBy, ReductionKind
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import normalize_axes, normalize_axis
from stageflow.primitives.autodiff import (
    broadcast_like,
    cast,
    conj,
    equal,
    floating_only,
    reshape,
    where,
)
from stageflow.primitives.elementwise import add_p, maximum_p, minimum_p, multiply_p

NUMERIC = dtypes.FLOATING + dtypes.INTEGER
ORDERED = (*NUMERIC, dtypes.bool_)  # complex has no max
# The dtypes compiled loops accumulate reductions in (see `ReductionKind.native_dtypes`):
# sums and products of complex numbers too, which have no max or min; max and min of half
# floats too, combined in float32 and stored back exactly (the result is one of the
# elements), where a half sum would round otherwise than its float32-accumulating kernel.
NATIVE = frozenset({dtypes.float32, dtypes.float64, *dtypes.INTEGER})
NATIVE_SUMS = NATIVE | frozenset(dtypes.COMPLEX)
NATIVE_EXTREMA = NATIVE | frozenset({dtypes.float16, dtypes.bfloat16})
_FACTS = {"family": Family.REDUCTION, "cost": Cost.REDUCTION, "lowered_by": LoweredBy.OP_RULE}


def _reduction_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                    axes: tuple[int, ...], keepdims: bool) -> list[D]:
    """The operand's dims without the reduced `axes` (or with 1 there, `keepdims`)."""
    (x,) = operands
    if keepdims:
        return [d.const(1) if i in axes else dim for i, dim in enumerate(x)]
    return [dim for i, dim in enumerate(x) if i not in axes]


def reduction(kind: ReductionKind, reducer, summary: str, allowed) -> Primitive:
    """The primitive ``reduce_<kind.name>``, combining elements over `axes` as `kind` says."""

    def shape_rule(x: ShapedType, *, axes: tuple[int, ...], keepdims: bool) -> ShapedType:
        if x.dtype not in allowed:
            raise TypeError(dtypes.refusal(x.dtype, allowed))
        if tuple(normalize_axes(axes, x.ndim)) != tuple(axes):
            raise ValueError(f"axes {axes} must be sorted, unique and in [0, {x.ndim})")
        shape = _reduction_dims(PYTHON, [x.shape], axes=axes, keepdims=keepdims)
        return ShapedType(tuple(shape), x.dtype)

    def kernel(x, *, axes, keepdims):
        return reducer(x, axis=axes, keepdims=keepdims)

    return Primitive(f"reduce_{kind.name}", shape_rule=shape_rule, kernel=kernel,
                     summary=summary, dims=_reduction_dims, reduction=kind, **_FACTS)


def _accumulator(dtype: np.dtype) -> np.dtype:
    """Half-precision sums accumulate in float32 (as TensorFlow and JAX do)."""
    return dtypes.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else dtype


def _sum(x, axis, keepdims):
    accumulator = _accumulator(x.dtype)
    total = np.add.reduce(x, axis=axis, keepdims=keepdims, dtype=accumulator)
    return total if accumulator is x.dtype else np.asarray(total).astype(x.dtype)


def _prod(x, axis, keepdims):
    accumulator = _accumulator(x.dtype)
    total = np.multiply.reduce(x, axis=axis, keepdims=keepdims, dtype=accumulator)
    return total if accumulator is x.dtype else np.asarray(total).astype(x.dtype)


def _extremum(numpy_reducer):
    def reduce(x, axis, keepdims):
        if x.size == 0 and any(x.shape[a] == 0 for a in axis):
            raise ValueError("cannot take the max/min of an empty set of elements")
        return numpy_reducer(x, axis=axis, keepdims=keepdims)

    return reduce


SUM = ReductionKind("sum", add_p, 0.0, NATIVE_SUMS)
PROD = ReductionKind("prod", multiply_p, 1.0, NATIVE_SUMS)
MAX = ReductionKind("max", maximum_p, -np.inf, NATIVE_EXTREMA, needs_elements=True)
MIN = ReductionKind("min", minimum_p, np.inf, NATIVE_EXTREMA, needs_elements=True)

reduce_sum_p = reduction(SUM, _sum, "sum over `axes`", NUMERIC + dtypes.COMPLEX)
reduce_prod_p = reduction(PROD, _prod, "product over `axes`", NUMERIC + dtypes.COMPLEX)
reduce_max_p = reduction(MAX, _extremum(np.max), "maximum over `axes`", ORDERED)
reduce_min_p = reduction(MIN, _extremum(np.min), "minimum over `axes`", ORDERED)


def _arg_reduction_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                        axis: int) -> list[D]:
    """The operand's dims without the one reduced."""
    (x,) = operands
    reduced = normalize_axis(axis, len(x))
    return [dim for i, dim in enumerate(x) if i != reduced]


def arg_reduction(name: str, numpy_arg, summary: str) -> Primitive:
    def shape_rule(x: ShapedType, *, axis: int) -> ShapedType:
        if x.dtype not in NUMERIC:
            raise TypeError(f"dtype {x.dtype.name} is not supported")
        if x.shape[normalize_axis(axis, x.ndim)] == 0:
            raise ValueError(f"axis {axis} has no elements")
        shape = _arg_reduction_dims(PYTHON, [x.shape], axis=axis)
        return ShapedType(tuple(shape), dtypes.int64)

    def kernel(x, *, axis):
        return numpy_arg(x, axis=axis).astype(np.int64)

    return Primitive(name, shape_rule=shape_rule, kernel=kernel, summary=summary,
                     dims=_arg_reduction_dims, **_FACTS)


argmax_p = arg_reduction("argmax", np.argmax, "index of the first maximum along `axis`")
argmin_p = arg_reduction("argmin", np.argmin, "index of the first minimum along `axis`")

# --------------------------------------------------------------------------- gradients


def _kept(g, x, axes: tuple[int, ...], keepdims: bool):
    """A reduction's cotangent (or result) with the reduced axes back as size-1 dims."""
    if keepdims:
        return g
    return reshape(g, [1 if i in axes else d for i, d in enumerate(x.shape)])


@reduce_sum_p.def_vjp
@floating_only
def _reduce_sum_vjp(cotangents, inputs, outputs, *, axes, keepdims):
    x = inputs[0]
    return [broadcast_like(_kept(cotangents[0], x, axes, keepdims), x)]


@reduce_prod_p.def_vjp
@floating_only
def _reduce_prod_vjp(cotangents, inputs, outputs, *, axes, keepdims):
    # d out / d x_i is the product of the other elements. Zeros are counted rather than
    # divided by: none -> out / x_i; one -> the product of the rest at the zero, 0 elsewhere;
    # more -> 0. (So the second derivative is not right at an exact zero.) Complex x: the
    # conjugate of that product, as for every holomorphic op.
    x = inputs[0]
    g = _kept(cotangents[0], x, axes, keepdims)
    is_zero = equal(x, 0.0)
    nonzero = where(is_zero, 1.0, x)
    rest = reduce_prod_p.bind(nonzero, axes=axes, keepdims=True)
    zeros = reduce_sum_p.bind(cast(is_zero, dtypes.int32), axes=axes, keepdims=True)
    one_zero = where(is_zero & (zeros == 1), rest, 0.0)
    return [g * conj(where(zeros == 0, rest / nonzero, one_zero))]


def _extremum_vjp(cotangents, inputs, outputs, *, axes, keepdims):
    # As TensorFlow: g goes to the elements equal to the result, split evenly among ties.
    x = inputs[0]
    g = _kept(cotangents[0], x, axes, keepdims)
    hits = cast(equal(x, _kept(outputs[0], x, axes, keepdims)), g.dtype)
    return [g * hits / reduce_sum_p.bind(hits, axes=axes, keepdims=True)]


reduce_max_p.def_vjp(floating_only(_extremum_vjp))
reduce_min_p.def_vjp(floating_only(_extremum_vjp))
argmax_p.def_nondifferentiable()
argmin_p.def_nondifferentiable()
