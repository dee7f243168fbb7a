"""Shape arithmetic shared by the shape rules: broadcasting and axis normalisation.

Dims are ints or ``None`` (unknown until run time, while tracing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from stageflow.core.dims import PYTHON, broadcast_dims
from stageflow.core.primitive import Shape


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
