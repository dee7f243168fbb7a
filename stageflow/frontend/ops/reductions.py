"""Public reductions: `reduce_sum`, `reduce_mean`, `reduce_logsumexp`, `argmax`, ...

`axis` is None (every axis), an int or a tuple, as in NumPy and TensorFlow; composites
(mean, logsumexp) are written with primitives so that later layers see only primitives.
"""

from __future__ import annotations

from typing import Any

from stageflow.core import dtypes
from stageflow.core.primitive import Primitive
from stageflow.core.shapes import normalize_axes
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import fill
from stageflow.frontend.ops.dispatch import for_composites
from stageflow.frontend.ops.namespaces import math_op
from stageflow.frontend.ops.shape import pad, reshape_to
from stageflow.frontend.tensor import Tensor
from stageflow.primitives import reduction as red
from stageflow.primitives.structural import dim_size_p

Axis = int | tuple[int, ...] | list[int] | None


def _axes(x: Tensor, axis: Axis, op: str) -> tuple[int, ...]:
    if axis is not None and not isinstance(axis, tuple | list):
        axis = (axis,)
    try:
        return normalize_axes(None if axis is None else tuple(int(a) for a in axis), x.ndim)
    except ValueError as error:
        raise ValueError(f"{op}: {error} (shape {x.shape}){describe_location()}") from None


def _reduce(primitive: Primitive, x: Any, axis: Axis, keepdims: bool) -> Tensor:
    x = convert_to_tensor(x)
    return primitive.bind(x, axes=_axes(x, axis, primitive.name), keepdims=bool(keepdims))


@math_op
@for_composites
def reduce_sum(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Sum over `axis` (all axes when None); the dtype is kept (no int64 widening).

    x: tensor of any shape; axis: None (all axes), an int or a list of ints; returns x's dtype
    with those axes removed (kept as size 1 with keepdims=True).

    >>> x = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> sf.reduce_sum(x)
    sf.Tensor(10., shape=(), dtype=float32)
    >>> sf.reduce_sum(x, axis=0)
    sf.Tensor([4., 6.], shape=(2,), dtype=float32)
    >>> sf.reduce_sum(x, axis=1, keepdims=True)
    sf.Tensor([[3.],
               [7.]], shape=(2, 1), dtype=float32)
    """
    return _reduce(red.reduce_sum_p, x, axis, keepdims)


@math_op
@for_composites
def reduce_prod(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Product over `axis`.

    x: tensor of any shape; axis: None (all axes), an int or a list of ints; returns x's dtype
    with those axes removed (kept as size 1 with keepdims=True).

    >>> sf.reduce_prod([[1.0, 2.0], [3.0, 4.0]], axis=1)
    sf.Tensor([ 2., 12.], shape=(2,), dtype=float32)
    """
    return _reduce(red.reduce_prod_p, x, axis, keepdims)


@math_op
@for_composites
def reduce_max(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Maximum over `axis`; an empty reduction is an error, as in NumPy.

    x: tensor of any shape; axis: None (all axes), an int or a list of ints; returns x's dtype
    with those axes removed (kept as size 1 with keepdims=True).

    >>> sf.reduce_max([[1.0, 5.0], [3.0, 4.0]], axis=0)
    sf.Tensor([3., 5.], shape=(2,), dtype=float32)
    """
    return _reduce(red.reduce_max_p, x, axis, keepdims)


@math_op
@for_composites
def reduce_min(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Minimum over `axis`.

    x: tensor of any shape; axis: None (all axes), an int or a list of ints; returns x's dtype
    with those axes removed (kept as size 1 with keepdims=True).

    >>> sf.reduce_min([[1.0, 5.0], [3.0, 4.0]], axis=1)
    sf.Tensor([1., 3.], shape=(2,), dtype=float32)
    """
    return _reduce(red.reduce_min_p, x, axis, keepdims)


def _count(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """The number of reduced elements as a scalar of x's dtype; unknown dims are read at run
    time with `dim_size`."""
    count = 1
    unknown = []
    for a in axes:
        if x.shape[a] is None:
            unknown.append(ew.cast(dim_size_p.bind(x, axis=a), x.dtype))
        else:
            count *= x.shape[a]
    total = convert_to_tensor(count, x.dtype)
    for size in unknown:
        total = ew.multiply(total, size)
    return total


@math_op
@for_composites
def reduce_mean(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Mean over `axis` (integer tensors: integer mean truncated, as TensorFlow does, their
    sum taken in int64 so that the mean of values of the dtype is one, never a wrapped sum
    divided).

    x: tensor of any shape; axis: None (all axes), an int or a list of ints; returns x's dtype
    with those axes removed (kept as size 1 with keepdims=True).

    >>> sf.reduce_mean([[1.0, 2.0], [3.0, 4.0]], axis=1)
    sf.Tensor([1.5, 3.5], shape=(2,), dtype=float32)
    >>> sf.reduce_mean(sf.constant([1, 2]))
    sf.Tensor(1, shape=(), dtype=int32)
    """
    x = convert_to_tensor(x)
    axes = _axes(x, axis, "reduce_mean")
    if not dtypes.is_integer(x.dtype):  # floats (a bool is refused by the sum)
        total = red.reduce_sum_p.bind(x, axes=axes, keepdims=bool(keepdims))
        return ew.divide(total, _count(x, axes))
    wide = x if x.dtype == dtypes.int64 else ew.cast(x, dtypes.int64)
    total = red.reduce_sum_p.bind(wide, axes=axes, keepdims=bool(keepdims))
    mean = ew.multiply(ew.sign(total), ew.floordiv(ew.abs(total), _count(wide, axes)))
    return mean if x.dtype == dtypes.int64 else ew.cast(mean, x.dtype)


@math_op
def reduce_logsumexp(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """log(sum(exp(x))) over `axis`, computed stably by shifting by the maximum.

    x: float tensor; axis: None (all axes), an int or a list of ints; returns x's dtype with
    those axes removed (kept as size 1 with keepdims=True).

    >>> sf.reduce_logsumexp([0.0, 0.0])
    sf.Tensor(0.6931472, shape=(), dtype=float32)
    >>> sf.reduce_logsumexp([1000.0, 1000.0])
    sf.Tensor(1000.6932, shape=(), dtype=float32)
    """
    x = convert_to_tensor(x)
    axes = _axes(x, axis, "reduce_logsumexp")
    keepdims = bool(keepdims)
    if any(x.shape[a] == 0 for a in axes):  # the log of an empty sum

        shape = [1 if i in axes else d for i, d in enumerate(x.shape)
                 if keepdims or i not in axes]
        return fill(shape, float("-inf"), x.dtype)
    # An unknown dim may be 0 at run time, where the max would raise: a -inf beside x there
    # is a max of nothing that adds nothing to the sum.
    padded = pad(x, [(0, int(i in axes and d is None)) for i, d in enumerate(x.shape)],
                 constant_values=float("-inf"))
    shift = red.reduce_max_p.bind(padded, axes=axes, keepdims=True)
    shift = ew.where(ew.equal(ew.abs(shift), float("inf")), 0.0, shift)
    summed = red.reduce_sum_p.bind(ew.exp(ew.subtract(x, shift)), axes=axes, keepdims=keepdims)
    # Reducing the size-1 dims of `shift` drops them exactly when keepdims is False.
    return ew.add(ew.log(summed), red.reduce_max_p.bind(shift, axes=axes, keepdims=keepdims))


def _arg_reduce(primitive: Primitive, x: Any, axis: int | None, output_type: Any) -> Tensor:
    wanted = dtypes.as_dtype(output_type)
    if wanted not in _ARG_TYPES:
        raise TypeError(f"{primitive.name}: output_type must be one of "
                        f"{', '.join(t.name for t in _ARG_TYPES)}, got {wanted.name}"
                        f"{describe_location()}")
    x = convert_to_tensor(x)
    if axis is None:

        x, axis = reshape_to(x, (x.size,)), 0
    index = primitive.bind(x, axis=_axes(x, int(axis), primitive.name)[0])
    return index if wanted == dtypes.int64 else ew.cast(index, wanted)


# TensorFlow's output types of argmax and argmin.
_ARG_TYPES = (dtypes.int64, dtypes.int32, dtypes.int16, dtypes.uint16)


@math_op
def argmax(x: Any, axis: int | None = 0, output_type: Any = dtypes.int64) -> Tensor:
    """Index of the first maximum along `axis` (of the flattened tensor if None), as
    `output_type`: int64 (the default), int32, int16 or uint16, as in TensorFlow, so that it
    compares with int32 labels: ``sf.equal(sf.argmax(logits, 1, output_type=sf.int32),
    labels)``.

    x: int or float tensor; returns x's shape without `axis` (a scalar for axis=None).

    >>> x = sf.constant([[1.0, 9.0, 3.0], [7.0, 2.0, 7.0]])
    >>> sf.argmax(x, axis=1)
    sf.Tensor([1, 0], shape=(2,), dtype=int64)
    >>> sf.argmax(x, axis=None)
    sf.Tensor(1, shape=(), dtype=int64)
    >>> sf.argmax(x, axis=1, output_type=sf.int32)
    sf.Tensor([1, 0], shape=(2,), dtype=int32)
    """
    return _arg_reduce(red.argmax_p, x, axis, output_type)


@math_op
def argmin(x: Any, axis: int | None = 0, output_type: Any = dtypes.int64) -> Tensor:
    """Index of the first minimum along `axis` (of the flattened tensor if None), as
    `output_type` (int64 by default; see `argmax`).

    x: int or float tensor; returns x's shape without `axis` (a scalar for axis=None).

    >>> sf.argmin([[1.0, 9.0], [0.0, 2.0]], axis=0)
    sf.Tensor([1, 1], shape=(2,), dtype=int64)
    """
    return _arg_reduce(red.argmin_p, x, axis, output_type)
