"""Shape arithmetic shared by the shape rules: broadcasting and axis normalisation.

Dims are ints or ``None`` (unknown until run time, while tracing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from stageflow.core.primitive import Shape


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting of shapes that may contain unknown dims."""
    ndim = max((len(s) for s in shapes), default=0)
    result: list[int | None] = []
    for axis in range(ndim):
        dims = [s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            listed = " and ".join(format_shape(s) for s in shapes)
            raise ValueError(f"shapes {listed} are incompatible for broadcasting")
        if known:
            result.append(known.pop())
        elif any(d is None for d in dims):
            result.append(None)
        else:
            result.append(1)
    return tuple(result)


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
