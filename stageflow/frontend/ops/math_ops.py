"""More of `tf.math` and of TensorFlow's top-level ops, as composites of existing op
functions: hyperbolic and tangent functions, NaN/infinity tests, any/all reductions,
reversal, rolling, meshgrids and global-norm clipping. Being composites, they
differentiate, fuse and compile as the ops they are made of do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.shapes import normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones_like
from stageflow.frontend.ops.reductions import reduce_sum
from stageflow.frontend.ops.shape import broadcast_to, concat, reshape
from stageflow.frontend.tensor import Tensor
from stageflow.primitives import scan

__all__ = ["clip_by_global_norm", "cosh", "cumprod", "cumsum", "global_norm", "is_finite",
           "is_inf", "is_nan", "meshgrid", "reduce_all", "reduce_any", "reverse", "roll",
           "sinh", "tan"]


def cumsum(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Tensor:
    """Running sums along `axis` (TensorFlow's arguments: `exclusive` starts from 0 without
    the element itself, `reverse` runs from the end)."""
    x = convert_to_tensor(x)
    return scan.cumsum_p.bind(x, axis=normalize_axis(axis, x.ndim), exclusive=bool(exclusive),
                              reverse=bool(reverse))


def cumprod(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Tensor:
    """Running products along `axis` (`exclusive`: from 1, without the element itself)."""
    x = convert_to_tensor(x)
    return scan.cumprod_p.bind(x, axis=normalize_axis(axis, x.ndim),
                               exclusive=bool(exclusive), reverse=bool(reverse))


def tan(x: Any) -> Tensor:
    """``sin(x) / cos(x)``, elementwise."""
    return ew.divide(ew.sin(x), ew.cos(x))


def sinh(x: Any) -> Tensor:
    """``(e**x - e**-x) / 2`` through expm1 (exact near 0), elementwise."""
    x = convert_to_tensor(x)
    return (ew.expm1(x) - ew.expm1(ew.negative(x))) * 0.5


def cosh(x: Any) -> Tensor:
    """``(e**x + e**-x) / 2``, elementwise."""
    x = convert_to_tensor(x)
    return (ew.exp(x) + ew.exp(ew.negative(x))) * 0.5


def is_nan(x: Any) -> Tensor:
    """Where `x` is NaN (a bool tensor; all false for integers)."""
    x = convert_to_tensor(x)
    if not dtypes.is_floating(x.dtype):
        return ew.not_equal(ones_like(x), ones_like(x))
    return ew.not_equal(x, x)


def is_inf(x: Any) -> Tensor:
    """Where `x` is +inf or -inf."""
    x = convert_to_tensor(x)
    if not dtypes.is_floating(x.dtype):
        return is_nan(x)
    return ew.equal(ew.abs(x), np.inf)


def is_finite(x: Any) -> Tensor:
    """Where `x` is neither NaN nor infinite."""
    return ew.logical_not(ew.logical_or(is_nan(x), is_inf(x)))


def _as_counts(x: Any) -> Tensor:
    x = convert_to_tensor(x)
    if x.dtype != np.bool_:
        x = ew.not_equal(x, 0)
    return ew.cast(x, dtypes.int32)


def reduce_any(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Whether any element over `axis` is true (non-zero); false over no elements."""
    return ew.greater(reduce_sum(_as_counts(x), axis, keepdims), 0)


def reduce_all(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Whether every element over `axis` is true (non-zero); true over no elements."""
    x = convert_to_tensor(x)
    falses = ew.cast(ew.logical_not(ew.cast(_as_counts(x), np.bool_)), dtypes.int32)
    return ew.equal(reduce_sum(falses, axis, keepdims), 0)


def reverse(x: Any, axis: int | Sequence[int]) -> Tensor:
    """`x` with the order of its elements reversed along each of `axis`."""
    x = convert_to_tensor(x)
    axes = {normalize_axis(a, x.ndim) for a in ([axis] if isinstance(axis, int) else axis)}
    return x[tuple(slice(None, None, -1) if a in axes else slice(None)
                   for a in range(x.ndim))]


def roll(x: Any, shift: int | Sequence[int], axis: int | Sequence[int]) -> Tensor:
    """Elements shifted by `shift` along `axis`, those that fall off re-entering at the
    other end (NumPy's `roll`; a known size along each axis)."""
    x = convert_to_tensor(x)
    shifts = [shift] if isinstance(shift, int) else list(shift)
    axes = [axis] if isinstance(axis, int) else list(axis)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes"
                         f"{describe_location()}")
    for s, a in zip(shifts, axes, strict=True):
        a = normalize_axis(a, x.ndim)
        size = x.shape[a]
        if size is None:
            raise ValueError(f"roll: dim {a} must be known{describe_location()}")
        if size == 0 or s % size == 0:
            continue
        cut = size - s % size
        head = tuple(slice(None) if d != a else slice(cut, None) for d in range(x.ndim))
        tail = tuple(slice(None) if d != a else slice(None, cut) for d in range(x.ndim))
        x = concat([x[head], x[tail]], a)
    return x


def meshgrid(*xs: Any, indexing: str = "xy") -> list[Tensor]:
    """Coordinate grids from 1-D tensors (NumPy's and TensorFlow's `meshgrid`; ``"xy"``
    swaps the first two output dims, ``"ij"`` keeps them in argument order)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}"
                         f"{describe_location()}")
    tensors = [convert_to_tensor(x) for x in xs]
    sizes = [t.shape[0] for t in tensors]
    if indexing == "xy" and len(tensors) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    grids = []
    for position, t in enumerate(tensors):
        target = position
        if indexing == "xy" and len(tensors) >= 2 and position < 2:
            target = 1 - position
        shape = [1] * len(tensors)
        shape[target] = -1
        grids.append(broadcast_to(reshape(t, shape), sizes))
    return grids


def global_norm(t_list: Sequence[Any]) -> Tensor:
    """``sqrt(sum of the squares of every element of every tensor)`` (Nones skipped)."""
    squares = [reduce_sum(ew.square(convert_to_tensor(t))) for t in t_list if t is not None]
    if not squares:
        raise ValueError(f"global_norm: no tensors{describe_location()}")
    total = squares[0]
    for s in squares[1:]:
        total = total + ew.cast(s, total.dtype)
    return ew.sqrt(total)


def clip_by_global_norm(t_list: Sequence[Any], clip_norm: float,
                        use_norm: Any = None) -> tuple[list[Any], Tensor]:
    """Every tensor scaled by ``clip_norm / max(global_norm, clip_norm)``: the list's joint
    norm is at most `clip_norm`. Returns the clipped list (Nones kept) and the norm."""
    norm = global_norm(t_list) if use_norm is None else convert_to_tensor(use_norm)
    scale = clip_norm / ew.maximum(norm, clip_norm)
    clipped = [None if t is None else convert_to_tensor(t) * ew.cast(scale, convert_to_tensor(
        t).dtype) for t in t_list]
    return clipped, norm
