"""Ragged and sparse leaves of dataset elements, kept as NumPy arrays inside the pipeline.

An `sf.RaggedTensor` leaf is a `RaggedArray` (its flat values and row splits), an
`sf.SparseTensor` leaf a `SparseArray` (indices, values, dense shape), as `tf.data` keeps
them: `from_tensor_slices` slices them into rows, `batch` stacks rows into a ragged (or
sparse) tensor of one more dim, `unbatch` splits them again. A row of a ragged tensor with
one ragged dim is a `RaggedArray` of no ragged dims: the user receives it as a dense tensor
(TensorFlow's ``RaggedTensorSpec`` of ``ragged_rank=0``), and `batch` stacks such rows,
whatever their lengths, into a ragged tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.frontend.composite_specs import RaggedTensorSpec, SparseTensorSpec
from stageflow.frontend.ragged_tensor import RaggedTensor
from stageflow.frontend.sparse_tensor import SparseTensor
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import wrap


class RaggedArray:
    """A ragged leaf of an element: `flat` values cut by each of `splits` (outermost
    first; none: the values whole, a dense tensor to the user that batches to ragged)."""

    __slots__ = ("flat", "splits")

    def __init__(self, flat: np.ndarray, splits: tuple[np.ndarray, ...]) -> None:
        self.flat, self.splits = flat, tuple(splits)

    @property
    def dtype(self) -> np.dtype:
        return self.flat.dtype

    @property
    def shape(self) -> tuple[int | None, ...]:
        if not self.splits:
            return self.flat.shape
        return (len(self.splits[0]) - 1, *(None,) * len(self.splits), *self.flat.shape[1:])

    @property
    def ndim(self) -> int:
        return len(self.splits) + self.flat.ndim

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: int) -> Any:
        if not self.splits:
            return self.flat[index]
        start, stop = int(self.splits[0][index]), int(self.splits[0][index + 1])
        inner = []
        for splits in self.splits[1:]:
            part = splits[start:stop + 1]
            inner.append(part - part[0])
            start, stop = int(part[0]), int(part[-1])
        return RaggedArray(self.flat[start:stop], tuple(inner))

    def tensor(self) -> Any:
        """The leaf as the user receives it: an `sf.RaggedTensor` (a tensor without splits)."""
        return RaggedTensor._nest_rebuild(len(self.splits),
                                          [wrap(self.flat), *(wrap(s) for s in self.splits)])

    def spec(self) -> RaggedTensorSpec:
        return RaggedTensorSpec(self.shape, self.dtype, len(self.splits))


class SparseArray:
    """A sparse leaf of an element: `indices` [entries, rank], `values`, `dense_shape`."""

    __slots__ = ("indices", "values", "dense_shape")

    def __init__(self, indices: np.ndarray, values: np.ndarray, dense_shape: np.ndarray) -> None:
        self.indices, self.values, self.dense_shape = indices, values, dense_shape

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.dense_shape)

    @property
    def ndim(self) -> int:
        return len(self.dense_shape)

    def __getitem__(self, index: int) -> SparseArray:
        keep = self.indices[:, 0] == index
        return SparseArray(self.indices[keep, 1:], self.values[keep], self.dense_shape[1:])

    def tensor(self) -> SparseTensor:
        return SparseTensor(wrap(self.indices), wrap(self.values), wrap(self.dense_shape))

    def spec(self) -> SparseTensorSpec:
        return SparseTensorSpec(self.shape, self.dtype)


COMPOSITE_ARRAYS = (RaggedArray, SparseArray)


def composite_array(leaf: Any) -> RaggedArray | SparseArray | None:
    """A ragged or sparse tensor leaf as pipeline arrays (None for other leaves)."""
    if isinstance(leaf, RaggedTensor):
        return RaggedArray(_numpy(leaf.flat_values),
                           tuple(_numpy(s) for s in leaf.nested_row_splits))
    if isinstance(leaf, SparseTensor):
        return SparseArray(_numpy(leaf.indices), _numpy(leaf.values), _numpy(leaf.dense_shape))
    return None


def _numpy(tensor: Any) -> np.ndarray:
    return np.asarray(tensor._value)


def stack_composites(column: list[Any], op: str = "Dataset.batch") -> Any:
    """One leaf of a batch: rows (ragged or dense arrays, or sparse) as one of a dim more."""
    if all(isinstance(leaf, SparseArray) for leaf in column):
        return _stack_sparse(column)
    if any(isinstance(leaf, SparseArray) for leaf in column):
        raise ValueError(f"{op}: a leaf is sparse in some elements only")
    rows = [leaf if isinstance(leaf, RaggedArray) else RaggedArray(np.asarray(leaf), ())
            for leaf in column]
    depth = {len(r.splits) for r in rows}
    if len(depth) != 1:
        raise ValueError(f"{op}: elements of different ragged ranks cannot be batched: "
                         f"{sorted(depth)}")
    inner = {r.flat.shape[1:] for r in rows}
    if len(inner) != 1:
        raise ValueError(f"{op}: ragged rows of different inner shapes cannot be batched: "
                         f"{sorted(inner)}")
    counts = [r.flat.shape[0] if not r.splits else len(r.splits[0]) - 1 for r in rows]
    splits = [_offsets(counts)]
    for level in range(depth.pop()):
        parts = [r.splits[level] for r in rows]
        shifts = _offsets([int(p[-1]) for p in parts])
        splits.append(np.concatenate([parts[0][:1] * 0] + [
            p[1:] + shift for p, shift in zip(parts, shifts[:-1], strict=True)]))
    flat = np.concatenate([r.flat for r in rows]) if rows else np.zeros((0,))
    return RaggedArray(flat.astype(rows[0].flat.dtype, copy=False), tuple(splits))


def _offsets(counts: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)


def _stack_sparse(column: list[SparseArray]) -> SparseArray:
    ranks = {leaf.ndim for leaf in column}
    if len(ranks) != 1:
        raise ValueError(f"Dataset.batch: sparse elements of different ranks cannot be "
                         f"batched: {sorted(ranks)}")
    indices = [np.concatenate([np.full((len(leaf.indices), 1), i, np.int64),
                               leaf.indices.astype(np.int64)], 1)
               for i, leaf in enumerate(column)]
    shape = np.max(np.stack([leaf.dense_shape for leaf in column]), 0)
    return SparseArray(np.concatenate(indices), np.concatenate([c.values for c in column]),
                       np.concatenate([[len(column)], shape]).astype(np.int64))


def to_ragged(leaf: np.ndarray, spec: Any) -> Any:
    """A dense leaf as `dense_to_ragged_batch` batches it: a `RaggedArray` of its dims up
    to the last one its spec leaves unknown (a leaf of a known shape stays dense)."""
    if not isinstance(spec, TensorSpec) or None not in tuple(spec.shape):
        return leaf
    rank = max(axis for axis, size in enumerate(spec.shape) if size is None)
    splits = []
    for axis in range(1, rank + 1):
        rows = int(np.prod(leaf.shape[:axis], dtype=np.int64))
        splits.append(np.arange(rows + 1, dtype=np.int64) * leaf.shape[axis])
    return RaggedArray(leaf.reshape((-1, *leaf.shape[rank + 1:])) if rank else leaf,
                       tuple(splits))


def ragged_spec(spec: Any) -> Any:
    """The spec `to_ragged` gives a leaf of `spec`."""
    if not isinstance(spec, TensorSpec) or None not in tuple(spec.shape):
        return spec
    rank = max(axis for axis, size in enumerate(spec.shape) if size is None)
    return RaggedTensorSpec(tuple(spec.shape), spec.dtype, rank)


def batched_spec(spec: Any, dim: int | None) -> Any:
    """The spec of a batch of `dim` elements of `spec` (None: some number)."""
    if isinstance(spec, RaggedTensorSpec):
        return RaggedTensorSpec((dim, *spec.shape), spec.dtype, spec.ragged_rank + 1)
    if isinstance(spec, SparseTensorSpec):
        return SparseTensorSpec((dim, *spec.shape), spec.dtype)
    return TensorSpec((dim, *spec.shape), spec.dtype)


def row_spec(spec: Any) -> Any:
    """The spec of one row of a leaf of `spec` (`unbatch`, `from_tensor_slices`)."""
    if isinstance(spec, RaggedTensorSpec):
        if spec.ragged_rank == 0:
            return TensorSpec(tuple(spec.shape)[1:], spec.dtype)
        return RaggedTensorSpec(tuple(spec.shape)[1:], spec.dtype, spec.ragged_rank - 1)
    if isinstance(spec, SparseTensorSpec):
        return SparseTensorSpec(tuple(spec.shape)[1:], spec.dtype)
    return TensorSpec(tuple(spec.shape)[1:], spec.dtype)


def leaf_spec(leaf: Any) -> Any:
    """The spec of one leaf of an element."""
    if isinstance(leaf, COMPOSITE_ARRAYS):
        return leaf.spec()
    return TensorSpec(leaf.shape, leaf.dtype)


__all__ = ["COMPOSITE_ARRAYS", "RaggedArray", "SparseArray", "batched_spec", "composite_array",
           "leaf_spec", "ragged_spec", "row_spec", "stack_composites", "to_ragged"]
