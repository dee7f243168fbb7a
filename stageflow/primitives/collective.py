"""Collective primitives: ops over the values that replicas of one computation hold.

A data-parallel step traced once per replica into one graph combines the replicas'
values (their gradients) with one `all_reduce` over all of them: n operands of one shape
and dtype, one result of that shape and dtype. It is elementwise (element i of the result
combines element i of every operand), so it fuses with the ops around it, the optimizer
update that follows it among them.

The operands are combined left to right, ``((x0 + x1) + x2) + ...`` (a mean then divides by
n in their dtype), by the eager kernel and by compiled code alike (which folds them with the
rules of `add`, `maximum` or `minimum`, rounding each step as those ops do), so both give
the same bits: a sum over a stacked axis (``np.sum``) may add in another order (pairwise,
in blocks) and round differently. Max and min keep the first of equal operands, as compiled
loops do (so of +0 and -0 the earlier one, where NumPy's maximum may give the later), and a
NaN wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import PYTHON, D, DimArith
from stageflow.core.op_facts import Cost
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.primitives.autodiff import cast, constant, floating_only
from stageflow.primitives.elementwise import (
    ARITHMETIC,
    ELEMENTWISE_FACTS,
    INEXACT,
    NUMERIC,
    add_p,
    divide_p,
    equal_p,
    maximum_p,
    minimum_p,
    multiply_p,
)


@dataclass(frozen=True)
class Reduction:
    """How `all_reduce` combines its operands: folding them with the binary elementwise
    primitive `combine`, then dividing by their count where `mean`; `operand_dtypes` are
    the dtypes it is defined on."""

    combine: Primitive
    operand_dtypes: tuple[np.dtype, ...]
    mean: bool = False


# Mean only of floats (an integer mean would need a dtype of its own); no order of complex.
REDUCTIONS: dict[str, Reduction] = {
    "sum": Reduction(add_p, ARITHMETIC),
    "mean": Reduction(add_p, INEXACT, mean=True),
    "max": Reduction(maximum_p, NUMERIC),
    "min": Reduction(minimum_p, NUMERIC),
}


def _same_dims(a: tuple[int | None, ...], b: tuple[int | None, ...]) -> bool:
    """Equal ranks and dims, an unknown dim (None) matching any."""
    return len(a) == len(b) and all(x is None or y is None or x == y
                                    for x, y in zip(a, b, strict=True))


def _all_reduce_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]],
                     **_: object) -> list[D]:
    """The operands' dims, which are equal: on each axis the best known of them."""
    return [d.same([dims[axis] for dims in operands]) for axis in range(len(operands[0]))]


def _all_reduce_rule(*xs: ShapedType, reduction: str) -> ShapedType:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(map(repr, REDUCTIONS))}, "
                         f"got {reduction!r}")
    if not xs:
        raise ValueError("it takes one value per replica, at least one; got none")
    first = xs[0]
    for i, x in enumerate(xs[1:], 1):
        if x.dtype != first.dtype:
            raise TypeError(f"operand {i} has dtype {x.dtype.name} and operand 0 "
                            f"{first.dtype.name}: every replica's value must have one dtype")
        if not _same_dims(x.shape, first.shape):
            raise ValueError(f"operand {i} has shape {format_shape(x.shape)} and operand 0 "
                             f"{format_shape(first.shape)}: every replica's value must have "
                             "one shape (a collective does not broadcast)")
    allowed = REDUCTIONS[reduction].operand_dtypes
    if first.dtype not in allowed:
        raise TypeError(f"reduction {reduction!r}: {dtypes.refusal(first.dtype, allowed)}")
    return ShapedType(tuple(_all_reduce_dims(PYTHON, [x.shape for x in xs])), first.dtype)


def _extreme(x: np.ndarray, y: np.ndarray, greater: bool) -> np.ndarray:
    """max (min) of x and y as compiled loops compute it: x where x >= y (x <= y) or x is
    NaN, else y. NumPy's maximum agrees but for equal zeros, where it may give y."""
    with np.errstate(invalid="ignore"):
        keep = (x >= y) if greater else (x <= y)
    if dtypes.is_floating(x.dtype):
        keep |= np.isnan(x)
    return np.where(keep, x, y)


def _all_reduce(*xs: np.ndarray, reduction: str) -> np.ndarray:
    kind = REDUCTIONS[reduction]
    xs = tuple(np.asarray(x) for x in xs)
    shapes = {x.shape for x in xs}
    if len(shapes) > 1:  # unknown dims were traced as compatible: they differ at run time
        raise ValueError(f"the values have different shapes {sorted(shapes)}")
    total = xs[0].copy()  # new memory, also for one operand
    for x in xs[1:]:
        if kind.combine is add_p:
            total = np.add(total, x)
        else:
            total = _extreme(total, x, greater=kind.combine is maximum_p)
    if kind.mean:
        total = np.true_divide(total, np.asarray(len(xs), total.dtype))
    return np.asarray(total, xs[0].dtype)


all_reduce_p = Primitive(
    "all_reduce",
    shape_rule=_all_reduce_rule,
    kernel=_all_reduce,
    dims=_all_reduce_dims,
    summary="the replicas' values x0..x{n-1} combined elementwise by `reduction` (sum, "
            "mean, max or min), left to right",
    cost=Cost.ELEMENTWISE,
    **ELEMENTWISE_FACTS,
)


@all_reduce_p.def_vjp
@floating_only
def _all_reduce_vjp(cotangents, inputs, outputs, *, reduction):
    """Sum: every operand gets g; mean: g / n; max and min: g where the operand is the
    result, shared evenly among the operands equal to it (none where the result is NaN)."""
    (g,), (out,) = cotangents, outputs
    kind = REDUCTIONS[reduction]
    if kind.combine is add_p:
        share = divide_p.bind(g, constant(len(inputs), g.dtype)) if kind.mean else g
        return [share] * len(inputs)
    wins = [cast(equal_p.bind(x, out), g.dtype) for x in inputs]
    count = wins[0]
    for win in wins[1:]:
        count = add_p.bind(count, win)
    share = divide_p.bind(g, maximum_p.bind(count, constant(1, g.dtype)))
    return [multiply_p.bind(share, win) for win in wins]
