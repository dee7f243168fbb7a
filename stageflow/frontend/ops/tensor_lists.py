"""TensorFlow's ops between a tensor and a list of tensors: `sf.unstack`, `sf.identity_n`,
`sf.shape_n`, `sf.dynamic_partition` and `sf.dynamic_stitch`, as composites of slicing,
masking and gathering (so they differentiate as those do)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core import dtypes
from stageflow.core.shapes import normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import fill
from stageflow.frontend.ops.creation import range as sf_range
from stageflow.frontend.ops.scatter_extrema import tensor_scatter_nd_max
from stageflow.frontend.ops.selection import boolean_mask
from stageflow.frontend.ops.shape import concat, expand_dims, gather, identity, reshape, split
from stageflow.frontend.ops.shape import squeeze as _squeeze
from stageflow.frontend.ops.shape_of import shape
from stageflow.frontend.ops.static_value import get_static_value
from stageflow.frontend.tensor import Tensor

__all__ = ["dynamic_partition", "dynamic_stitch", "identity_n", "shape_n", "unstack"]


def unstack(value: Any, num: int | None = None, axis: int = 0) -> list[Tensor]:
    """The slices of `value` along `axis`, that axis removed (TensorFlow's ``tf.unstack``,
    the inverse of `sf.stack`); the axis' length must be known, or given as `num`.

    >>> a, b = sf.unstack(sf.constant([[1, 2], [3, 4]]), axis=1)
    >>> a, b
    (sf.Tensor([1, 3], shape=(2,), dtype=int32), sf.Tensor([2, 4], shape=(2,), dtype=int32))
    """
    value = convert_to_tensor(value)
    if value.ndim == 0:
        raise ValueError(f"unstack: needs a tensor of rank >= 1, got a scalar"
                         f"{describe_location()}")
    axis = normalize_axis(axis, value.ndim)
    length = value.shape[axis] if num is None else int(num)
    if length is None:
        raise ValueError(f"unstack: the length of axis {axis} is unknown: pass num"
                         f"{describe_location()}")
    if value.shape[axis] is not None and value.shape[axis] != length:
        raise ValueError(f"unstack: num={length} but axis {axis} has length "
                         f"{value.shape[axis]}{describe_location()}")
    if length == 0:
        return []
    return [_squeeze(part, axis) for part in split(value, length, axis)]


def identity_n(input: Sequence[Any]) -> list[Tensor]:  # noqa: A002 - TF's name
    """Each of the tensors unchanged, as a list (TensorFlow's ``tf.identity_n``).

    >>> sf.identity_n([1, 2.0])
    [sf.Tensor(1, shape=(), dtype=int32), sf.Tensor(2., shape=(), dtype=float32)]
    """
    return [identity(convert_to_tensor(x)) for x in input]


def shape_n(input: Sequence[Any], out_type: Any = dtypes.int32) -> list[Tensor]:  # noqa: A002
    """The shape of each tensor, as `sf.shape` gives it (TensorFlow's ``tf.shape_n``).

    >>> sf.shape_n([sf.zeros((2, 3)), sf.zeros(4)])
    [sf.Tensor([2, 3], shape=(2,), dtype=int32), sf.Tensor([4], shape=(1,), dtype=int32)]
    """
    return [shape(x, out_type) for x in input]


def dynamic_partition(data: Any, partitions: Any, num_partitions: int) -> list[Tensor]:
    """`data` split into `num_partitions` tensors: partition ``p`` holds, in order, the
    slices of `data` whose entry in `partitions` is ``p`` (TensorFlow's
    ``tf.dynamic_partition``; `partitions` covers the leading dims of `data`).

    >>> sf.dynamic_partition([10, 20, 30, 40], [0, 1, 0, 1], 2)
    [sf.Tensor([10, 30], shape=(2,), dtype=int32), sf.Tensor([20, 40], shape=(2,), dtype=int32)]
    """
    data = convert_to_tensor(data)
    partitions = convert_to_tensor(partitions)
    return [boolean_mask(data, ew.equal(partitions, ew.cast(p, partitions.dtype)))
            for p in range(int(num_partitions))]


def dynamic_stitch(indices: Sequence[Any], data: Sequence[Any]) -> Tensor:
    """The slices of `data` merged into one tensor at the positions `indices` gives them:
    ``merged[indices[m][i]] = data[m][i]``, a later (m, i) winning a position given twice
    (TensorFlow's ``tf.dynamic_stitch``, the inverse of `dynamic_partition`). The length is
    the largest index + 1, so the indices must be known (eagerly, or constants).

    >>> sf.dynamic_stitch([[0, 2], [1]], [[1.0, 3.0], [2.0]])
    sf.Tensor([1., 2., 3.], shape=(3,), dtype=float32)
    """
    ids = [convert_to_tensor(i, dtypes.int32) for i in indices]
    parts = [convert_to_tensor(d) for d in data]
    known = [get_static_value(i) for i in ids]
    if any(k is None for k in known):
        raise ValueError(f"dynamic_stitch: the output's length comes from the indices' "
                         f"values, which a trace does not have{describe_location()}")
    length = max((int(k.max()) for k in known if k.size), default=-1) + 1
    flat_ids = concat([reshape(i, (-1,)) for i in ids], 0)
    rows = [reshape(d, (-1, *d.shape[i.ndim:])) for i, d in zip(ids, parts, strict=True)]
    flat_data = concat(rows, 0)
    # The position of each output's last source: a max over the sources' positions.
    order = sf_range(flat_ids.shape[0], dtype=dtypes.int32)
    start = fill((length,), -1, dtypes.int32)
    last = tensor_scatter_nd_max(start, expand_dims(flat_ids, -1), order)
    return gather(flat_data, last)
