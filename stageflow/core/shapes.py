"""Shape arithmetic shared by the shape rules: broadcasting and axis normalisation.

Dims are ints or ``None`` (unknown until run time, while tracing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from stageflow.core.dims import PYTHON, broadcast_dims
from stageflow.core.primitive import Shape
from stageflow.core.tensor_shape import TensorShape


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting of shapes that may contain unknown dims (`broadcast_dims` on
    Python ints), rejecting known dims that disagree. Equal shapes, the common case of
    traced code, are their own broadcast and skip the per-axis work."""
    first = shapes[0] if shapes else ()
    if all(shape == first for shape in shapes):
        return tuple(first)
    result = broadcast_dims(PYTHON, shapes)
    check_broadcast(shapes, result)
    return tuple(result)


def check_broadcast(shapes: Sequence[Shape], result: Sequence[int | None]) -> None:
    """Raise ``ValueError`` naming `shapes` unless each of their known dims is 1 or the dim
    of `result` (their broadcast) it aligns with."""
    for shape in shapes:
        for dim, target in zip(reversed(shape), reversed(result), strict=False):
            if dim is not None and dim != 1 and dim != target:
                listed = " and ".join(format_shape(s) for s in shapes)
                raise ValueError(f"shapes {listed} are incompatible for broadcasting")


def format_shape(shape: Shape) -> str:
    """``(?, 3)``: a shape as messages and reprs print it (``<unknown>``: of unknown rank)."""
    if isinstance(shape, TensorShape) and shape.rank is None:
        return "<unknown>"
    inner = ", ".join("?" if d is None else str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for rank {ndim}")
    return axis % ndim


def normalize_axes(axes: Iterable[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted, non-negative, duplicate-free axes; ``None`` means every axis."""
    if axes is None:
        return tuple(range(ndim))
    normalized = tuple(sorted(normalize_axis(a, ndim) for a in axes))
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"repeated axis in {tuple(axes)}")
    return normalized


def num_elements(shape: Sequence[int | None]) -> int | None:
    total = 1
    for d in shape:
        if d is None:
            return None
        total *= d
    return total


def same_dim_reference(axis: int) -> int:
    """The entry of a reshape's `shape` that stands for the operand's dim `axis` (see
    `reshape_param`)."""
    return -2 - axis


def reshape_param(source: Shape, target: Sequence[int | None]) -> tuple[int, ...]:
    """The `shape` param of a reshape of `source` to `target`, whose unknown (None) dims
    are the run-time dims of `source`.

    An element count cannot always tell an unknown dim: not two of them, nor one beside a
    dim of size 0. But where `target` is `source` with dims of size 1 inserted or removed
    (a squeeze, an expand_dims, an integer index: row-major order keeps the others in
    place), each unknown dim is an operand's dim, which the param names by
    `same_dim_reference`. Otherwise one unknown dim is a -1; more raise ``ValueError``.
    """
    target = tuple(target)
    if None not in target:
        return tuple(int(d) for d in target)
    kept = [(i, d) for i, d in enumerate(source) if d != 1]
    wanted = [(j, d) for j, d in enumerate(target) if d != 1]
    if len(kept) == len(wanted) and all(a == b for (_, a), (_, b) in zip(kept, wanted,
                                                                          strict=True)):
        param = [-1 if d is None else int(d) for d in target]
        for (i, d), (j, _) in zip(kept, wanted, strict=True):
            if d is None:
                param[j] = same_dim_reference(i)
        return tuple(param)
    if sum(d is None for d in target) > 1:
        raise ValueError(f"cannot reshape {format_shape(source)} into {format_shape(target)}: "
                         "more than one unknown dim, not all of them the operand's")
    return tuple(-1 if d is None else int(d) for d in target)
