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
from stageflow.frontend.ops.dispatch import for_composites
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.reductions import reduce_sum
from stageflow.frontend.ops.shape import broadcast_to, concat, reshape
from stageflow.frontend.tensor import Tensor
from stageflow.primitives import scan

__all__ = ["add_n", "clip_by_global_norm", "clip_by_norm", "cosh", "cumprod", "cumsum",
           "global_norm", "is_finite", "is_inf", "is_nan", "meshgrid", "reduce_all",
           "reduce_any", "reverse", "roll", "sinh", "tan"]


@math_op
def add_n(inputs: Sequence[Any]) -> Tensor:
    """The elementwise sum of a list of tensors of one shape and dtype (TensorFlow's
    ``tf.add_n``: a model's regularization losses, ``sf.add_n(model.losses)``).

    >>> sf.add_n([sf.constant([1.0, 2.0]), sf.constant([3.0, 4.0]), sf.constant([5.0, 6.0])])
    sf.Tensor([ 9., 12.], shape=(2,), dtype=float32)
    """
    tensors = [convert_to_tensor(x) for x in inputs]
    if not tensors:
        raise ValueError(f"add_n: needs at least one tensor{describe_location()}")
    for tensor in tensors[1:]:
        if tensor.dtype != tensors[0].dtype or tuple(tensor.shape) != tuple(tensors[0].shape):
            raise ValueError(
                f"add_n: every input must have the first's shape and dtype "
                f"{tensors[0].dtype.name}{list(tensors[0].shape)}, got "
                f"{tensor.dtype.name}{list(tensor.shape)}{describe_location()}")
    total = tensors[0]
    for tensor in tensors[1:]:
        total = ew.add(total, tensor)
    return total


@math_op
def cumsum(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Tensor:
    """Running sums along `axis` (TensorFlow's arguments: `exclusive` starts from 0 without
    the element itself, `reverse` runs from the end).

    x: int or float tensor; returns x's shape and dtype.

    >>> sf.cumsum([1.0, 2.0, 3.0])
    sf.Tensor([1., 3., 6.], shape=(3,), dtype=float32)
    >>> sf.cumsum([1.0, 2.0, 3.0], exclusive=True, reverse=True)
    sf.Tensor([5., 3., 0.], shape=(3,), dtype=float32)
    """
    x = convert_to_tensor(x)
    return scan.cumsum_p.bind(x, axis=normalize_axis(axis, x.ndim), exclusive=bool(exclusive),
                              reverse=bool(reverse))


@math_op
def cumprod(x: Any, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Tensor:
    """Running products along `axis` (`exclusive`: from 1, without the element itself).

    x: int or float tensor; returns x's shape and dtype.

    >>> sf.cumprod([1.0, 2.0, 3.0])
    sf.Tensor([1., 2., 6.], shape=(3,), dtype=float32)
    >>> sf.cumprod([[1, 2], [3, 4]], axis=1, exclusive=True)
    sf.Tensor([[1, 1],
               [1, 3]], shape=(2, 2), dtype=int32)
    """
    x = convert_to_tensor(x)
    return scan.cumprod_p.bind(x, axis=normalize_axis(axis, x.ndim),
                               exclusive=bool(exclusive), reverse=bool(reverse))


@math_op
def tan(x: Any) -> Tensor:
    """``sin(x) / cos(x)``, elementwise.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.math.tan([0.0, 0.7853982])
    sf.Tensor([0., 1.], shape=(2,), dtype=float32)
    """
    return ew.divide(ew.sin(x), ew.cos(x))


@math_op
def sinh(x: Any) -> Tensor:
    """``(e**x - e**-x) / 2`` through expm1 (exact near 0), elementwise.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.math.sinh([0.0, 1.0])
    sf.Tensor([0.       , 1.1752012], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(x)
    return (ew.expm1(x) - ew.expm1(ew.negative(x))) * 0.5


@math_op
def cosh(x: Any) -> Tensor:
    """``(e**x + e**-x) / 2``, elementwise.

    x: float tensor (float16/bfloat16/float32/float64) of any shape; returns a tensor of x's
    shape and dtype.

    >>> sf.math.cosh([0.0, 1.0])
    sf.Tensor([1.       , 1.5430807], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(x)
    return (ew.exp(x) + ew.exp(ew.negative(x))) * 0.5


@math_op
def is_nan(x: Any) -> Tensor:
    """Where `x` is NaN (a bool tensor; all false for integers).

    x: tensor of any shape; returns a bool tensor of its shape.

    >>> sf.math.is_nan([1.0, float('inf'), float('nan')])
    sf.Tensor([False, False,  True], shape=(3,), dtype=bool)
    """
    x = convert_to_tensor(x)
    if not dtypes.is_floating(x.dtype):
        return ew.not_equal(ones_like(x), ones_like(x))
    return ew.not_equal(x, x)


@math_op
def is_inf(x: Any) -> Tensor:
    """Where `x` is +inf or -inf.

    x: tensor of any shape; returns a bool tensor of its shape.

    >>> sf.math.is_inf([1.0, float('-inf'), float('nan')])
    sf.Tensor([False,  True, False], shape=(3,), dtype=bool)
    """
    x = convert_to_tensor(x)
    if not dtypes.is_floating(x.dtype):
        return is_nan(x)
    return ew.equal(ew.abs(x), np.inf)


@math_op
def is_finite(x: Any) -> Tensor:
    """Where `x` is neither NaN nor infinite.

    x: tensor of any shape; returns a bool tensor of its shape.

    >>> sf.math.is_finite([1.0, float('inf'), float('nan')])
    sf.Tensor([ True, False, False], shape=(3,), dtype=bool)
    """
    return ew.logical_not(ew.logical_or(is_nan(x), is_inf(x)))


def _as_counts(x: Any) -> Tensor:
    x = convert_to_tensor(x)
    if x.dtype != np.bool_:
        x = ew.not_equal(x, 0)
    return ew.cast(x, dtypes.int32)


@math_op
def reduce_any(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Whether any element over `axis` is true (non-zero); false over no elements.

    x: bool (or numeric, non-zero is true) tensor; axis: None, an int or ints; returns a bool
    tensor without those axes.

    >>> sf.reduce_any([[True, False], [False, False]], axis=1)
    sf.Tensor([ True, False], shape=(2,), dtype=bool)
    """
    return ew.greater(reduce_sum(_as_counts(x), axis, keepdims), 0)


@math_op
def reduce_all(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Whether every element over `axis` is true (non-zero); true over no elements.

    x: bool (or numeric, non-zero is true) tensor; axis: None, an int or ints; returns a bool
    tensor without those axes.

    >>> sf.reduce_all([[True, False], [True, True]], axis=1)
    sf.Tensor([False,  True], shape=(2,), dtype=bool)
    """
    x = convert_to_tensor(x)
    falses = ew.cast(ew.logical_not(ew.cast(_as_counts(x), np.bool_)), dtypes.int32)
    return ew.equal(reduce_sum(falses, axis, keepdims), 0)


@for_composites
def reverse(x: Any, axis: int | Sequence[int]) -> Tensor:
    """`x` with the order of its elements reversed along each of `axis`.

    >>> sf.reverse([[1, 2], [3, 4]], axis=[1])
    sf.Tensor([[2, 1],
               [4, 3]], shape=(2, 2), dtype=int32)
    """
    x = convert_to_tensor(x)
    axes = {normalize_axis(a, x.ndim) for a in ([axis] if isinstance(axis, int) else axis)}
    return x[tuple(slice(None, None, -1) if a in axes else slice(None)
                   for a in range(x.ndim))]


def roll(x: Any, shift: int | Sequence[int], axis: int | Sequence[int]) -> Tensor:
    """Elements shifted by `shift` along `axis`, those that fall off re-entering at the
    other end (NumPy's `roll`; a known size along each axis).

    >>> sf.roll([1, 2, 3, 4], shift=1, axis=0)
    sf.Tensor([4, 1, 2, 3], shape=(4,), dtype=int32)
    """
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
    swaps the first two output dims, ``"ij"`` keeps them in argument order).

    xs: 1-D tensors [n0], [n1], ...; returns one tensor per input, of shape [n1, n0, ...] ("xy")
    or [n0, n1, ...] ("ij").

    >>> xx, yy = sf.meshgrid([1, 2, 3], [10, 20])
    >>> xx
    sf.Tensor([[1, 2, 3],
               [1, 2, 3]], shape=(2, 3), dtype=int32)
    >>> yy
    sf.Tensor([[10, 10, 10],
               [20, 20, 20]], shape=(2, 3), dtype=int32)
    """
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
    """``sqrt(sum of the squares of every element of every tensor)`` (Nones skipped).

    t_list: float tensors of any shapes; returns a scalar of their dtype.

    >>> sf.global_norm([sf.constant([3.0]), sf.constant([[4.0]])])
    sf.Tensor(5., shape=(), dtype=float32)
    """
    squares = [reduce_sum(ew.square(convert_to_tensor(t))) for t in t_list if t is not None]
    if not squares:
        raise ValueError(f"global_norm: no tensors{describe_location()}")
    total = squares[0]
    for s in squares[1:]:
        total = total + ew.cast(s, total.dtype)
    return ew.sqrt(total)


def clip_by_norm(t: Any, clip_norm: float, axes: Any = None) -> Tensor:
    """`t` scaled by ``clip_norm / max(norm, clip_norm)``, where `norm` is its L2 norm over
    `axes` (all axes by default): at most `clip_norm` long (TensorFlow's ``clip_by_norm``).

    t: float tensor; axes: None, an int or ints; returns t's shape and dtype.

    >>> sf.clip_by_norm([3.0, 4.0], 1.0)
    sf.Tensor([0.6, 0.8], shape=(2,), dtype=float32)
    >>> sf.clip_by_norm([[3.0, 4.0], [0.3, 0.4]], 1.0, axes=1)
    sf.Tensor([[0.6, 0.8],
               [0.3, 0.4]], shape=(2, 2), dtype=float32)
    """
    t = convert_to_tensor(t)
    if not dtypes.is_floating(t.dtype):
        raise TypeError(f"clip_by_norm: needs a float tensor, got {t.dtype.name}"
                        f"{describe_location()}")
    squares = reduce_sum(ew.square(t), axis=axes, keepdims=True)
    norm = ew.sqrt(squares)
    limit = ew.cast(convert_to_tensor(clip_norm), t.dtype)
    # Where the norm is 0 the tensor is too, and a scale of 1 keeps it.
    return ew.multiply(t, ew.divide(limit, ew.maximum(norm, limit)))


def clip_by_global_norm(t_list: Sequence[Any], clip_norm: float,
                        use_norm: Any = None) -> tuple[list[Any], Tensor]:
    """Every tensor scaled by ``clip_norm / max(global_norm, clip_norm)``: the list's joint
    norm is at most `clip_norm`. Returns the clipped list (Nones kept) and the norm.

    t_list: float tensors of any shapes (or None); returns the clipped list and the global norm
    (a scalar).

    >>> clipped, norm = sf.clip_by_global_norm([sf.constant([3.0, 0.0]), sf.constant([4.0])], 1.0)
    >>> norm
    sf.Tensor(5., shape=(), dtype=float32)
    >>> clipped[0], clipped[1]
    (sf.Tensor([0.6, 0. ], shape=(2,), dtype=float32), sf.Tensor([0.8], shape=(1,), dtype=float32))
    """
    norm = global_norm(t_list) if use_norm is None else convert_to_tensor(use_norm)
    scale = clip_norm / ew.maximum(norm, clip_norm)
    clipped = [None if t is None else convert_to_tensor(t) * ew.cast(scale, convert_to_tensor(
        t).dtype) for t in t_list]
    return clipped, norm
