"""The shape of a ragged tensor (TensorFlow's ``tf.experimental.DynamicRaggedShape``): what
``sf.shape(ragged)`` gives, and what ``sf.reshape``, ``sf.zeros``, ``sf.ones`` and
``sf.fill`` take to make ragged tensors of that shape.

A shape is its row partitions, outermost first (each a `RowPartition`: the row splits of
one ragged or uniform dim), and the inner shape, the dense shape of the flat values (its
first dim the values' count). Its `lengths` are the dims as TensorFlow prints them: the
number of rows, each partition's row lengths (a tuple where they differ), then the inner
dims after the first.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops import creation, shape_of
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import shape as shape_ops
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.dispatch import register
from stageflow.frontend.ragged_tensor import SPLITS, RaggedTensor, splits_of_lengths
from stageflow.frontend.tensor import Tensor

__all__ = ["DynamicRaggedShape", "RowPartition"]


class RowPartition:
    """How one dim cuts the values below it into rows: its row splits (TensorFlow's
    ``tf.experimental.RowPartition``).

    >>> sf.experimental.RowPartition.from_row_lengths([2, 0, 1]).row_splits()
    sf.Tensor([0, 2, 2, 3], shape=(4,), dtype=int64)
    """

    def __init__(self, row_splits: Any, uniform_row_length: int | None = None) -> None:
        self._splits = ew.cast(convert_to_tensor(row_splits), SPLITS)
        self.uniform_row_length = uniform_row_length  # every row's length, where uniform

    @classmethod
    def from_row_splits(cls, row_splits: Any, validate: bool = True,
                        dtype: Any = None) -> RowPartition:
        """The partition of these row splits (0 first, never decreasing)."""
        del validate, dtype
        return cls(row_splits)

    @classmethod
    def from_row_lengths(cls, row_lengths: Any, validate: bool = True,
                         dtype: Any = None) -> RowPartition:
        """Consecutive rows of these lengths."""
        del validate, dtype
        return cls(splits_of_lengths(convert_to_tensor(row_lengths)))

    @classmethod
    def from_uniform_row_length(cls, uniform_row_length: int, nvals: int) -> RowPartition:
        """`nvals` values in rows of `uniform_row_length` each."""
        length = operator.index(uniform_row_length)
        rows = operator.index(nvals) // length if length else 0
        return cls(np.arange(rows + 1, dtype=np.int64) * length, length)

    def row_splits(self) -> Tensor:
        return self._splits

    def row_lengths(self) -> Tensor:
        return self._splits[1:] - self._splits[:-1]

    def nrows(self) -> Tensor:
        return convert_to_tensor(np.asarray(self._splits.shape[0] - 1, SPLITS))

    def nvals(self) -> Tensor:
        return self._splits[-1]

    def __repr__(self) -> str:
        return f"sf.experimental.RowPartition(row_splits={self._splits.numpy()})"


class DynamicRaggedShape:
    """The shape of a ragged (or dense) tensor: `row_partitions`, outermost first, and the
    `inner_shape` of the flat values below them.

    >>> rt = sf.ragged.constant([[1], [2, 3, 4], [], [5, 6]])
    >>> shape = sf.shape(rt)
    >>> shape
    <DynamicRaggedShape lengths=[4, (1, 3, 0, 2)] num_row_partitions=1>
    >>> sf.zeros(shape, sf.int32)
    <sf.RaggedTensor [[0], [0, 0, 0], [], [0, 0]]>
    >>> int(shape[0]), shape[:1]
    (4, <DynamicRaggedShape lengths=[4] num_row_partitions=0>)
    """

    def __init__(self, row_partitions: Sequence[RowPartition], inner_shape: Any,
                 dtype: Any = None, validate: bool = True) -> None:
        del validate
        self.row_partitions = tuple(row_partitions)
        self.dtype = dtypes.as_dtype(dtype or dtypes.int64)
        # ints, or scalar tensors for the dims of a traced tensor known only when it runs
        self._inner: tuple[Any, ...] = tuple(inner_shape) if isinstance(
            inner_shape, list | tuple) else tuple(int(d) for d in np.asarray(
                inner_shape.numpy()).reshape(-1))
        if not self._inner:
            raise ValueError(f"DynamicRaggedShape: the inner shape needs a dim (the flat "
                             f"values' count){describe_location()}")

    @classmethod
    def from_lengths(cls, lengths: Sequence[Any], num_row_partitions: int | None = None,
                     dtype: Any = dtypes.int64) -> DynamicRaggedShape:
        """The shape of these dims: ints (uniform) and tuples of row lengths (ragged, as
        many as the values above them), the number of rows first.

        >>> sf.experimental.DynamicRaggedShape.from_lengths([4, (2, 1, 0, 8), 12])
        <DynamicRaggedShape lengths=[4, (2, 1, 0, 8), 12] num_row_partitions=1>
        """
        lengths = list(lengths)
        ragged = [i for i, d in enumerate(lengths) if isinstance(d, tuple | list)]
        count = (ragged[-1] if ragged else 0) if num_row_partitions is None else \
            num_row_partitions
        partitions, values = [], operator.index(lengths[0])
        for dim in lengths[1:count + 1]:
            if isinstance(dim, tuple | list):
                if len(dim) != values:
                    raise ValueError(f"DynamicRaggedShape.from_lengths: {len(dim)} row "
                                     f"lengths for {values} rows{describe_location()}")
                partitions.append(RowPartition.from_row_lengths(np.asarray(dim, np.int64)))
                values = int(sum(dim))
            else:
                partitions.append(RowPartition.from_uniform_row_length(dim, values * dim))
                values *= operator.index(dim)
        inner = [values, *(operator.index(d) for d in lengths[count + 1:])]
        return cls(partitions, inner, dtype)

    @classmethod
    def from_tensor(cls, t: Any, dtype: Any = None) -> DynamicRaggedShape:
        """The shape of `t`, a ragged or dense tensor."""
        partitions = []
        while isinstance(t, RaggedTensor):
            partitions.append(RowPartition(t.row_splits, t.uniform_row_length))
            t = t.values
        t = convert_to_tensor(t)
        dims = [d if d is not None else shape_of.shape(t, dtypes.int64)[axis]
                for axis, d in enumerate(t.shape)]
        return cls(partitions, dims, dtype)

    @property
    def num_row_partitions(self) -> int:
        return len(self.row_partitions)

    @property
    def inner_shape(self) -> Tensor:
        return shape_ops.stack([ew.cast(convert_to_tensor(d), self.dtype)
                                for d in self._inner])

    @property
    def rank(self) -> int:
        return self.num_row_partitions + len(self._inner)

    def _dims(self) -> list[int | tuple[int, ...]]:
        """The lengths: rows, each partition's row lengths (its length where it is
        uniform), the inner dims after the first."""
        if not self.row_partitions:
            return list(self._inner)
        dims: list[int | tuple[int, ...]] = [int(self.row_partitions[0].nrows().numpy())]
        for partition in self.row_partitions:
            dims.append(partition.uniform_row_length if partition.uniform_row_length
                        is not None else tuple(int(n) for n in
                                               partition.row_lengths().numpy()))
        return dims + list(self._inner[1:])

    def __getitem__(self, index: Any) -> Any:
        """A uniform dim as a scalar tensor (a ragged one is a ValueError, as TensorFlow
        says it); a slice of leading dims as a shape."""
        if isinstance(index, slice):
            stop = self.rank if index.stop is None else index.stop % (self.rank + 1)
            if index.start not in (None, 0) or index.step not in (None, 1):
                raise ValueError(f"DynamicRaggedShape: only leading dims ([:k]) can be "
                                 f"sliced, got {index}{describe_location()}")
            return self._leading(stop)
        position = operator.index(index) % self.rank
        dim = self._dims()[position]
        if isinstance(dim, tuple):
            raise ValueError(f"Index {position} is not uniform")
        return convert_to_tensor(np.asarray(dim, self.dtype))

    def _leading(self, count: int) -> DynamicRaggedShape:
        if 0 < count <= self.num_row_partitions:
            kept = self.row_partitions[:count - 1]
            values = (int(kept[-1].nvals().numpy()) if kept
                      else int(self.row_partitions[0].nrows().numpy()))
            return DynamicRaggedShape(kept, [values], self.dtype)
        extra = count - self.num_row_partitions
        return DynamicRaggedShape(self.row_partitions, list(self._inner[:extra]), self.dtype)

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self._dims())
        return f"<DynamicRaggedShape lengths=[{dims}] num_row_partitions=" \
               f"{self.num_row_partitions}>"

    def _ragged(self, flat: Tensor) -> Any:
        """`flat` (of the inner shape) cut into this shape's rows."""
        return RaggedTensor.from_nested_row_splits(
            flat, [p.row_splits() for p in self.row_partitions])


def _shape(input: Any, out_type: Any = dtypes.int32) -> DynamicRaggedShape:  # noqa: A002
    return DynamicRaggedShape.from_tensor(input, out_type)


def _reshape(x: Any, shape: DynamicRaggedShape) -> Any:
    return shape._ragged(shape_ops.reshape(x, list(shape._inner)))


def _fill(dims: DynamicRaggedShape, value: Any, dtype: Any = None) -> Any:
    if not all(isinstance(d, int) for d in dims._inner):
        raise ValueError(f"sf.fill: the ragged shape's values are counted only when the "
                         f"function runs (a traced tensor's shape); fill like the tensor "
                         f"itself instead: sf.ragged.map_flat_values(sf.ones_like, rt)"
                         f"{describe_location()}")
    return dims._ragged(creation.fill(list(dims._inner), value, dtype))


register(shape_of.shape, RaggedTensor, _shape)
register(shape_ops.reshape, DynamicRaggedShape, _reshape)
register(creation.fill, DynamicRaggedShape, _fill)
