"""`sf.RaggedTensorSpec` and `sf.SparseTensorSpec`: the signatures of composite tensor
arguments (TensorFlow's ``TypeSpec``s), for an `input_signature` or
`get_concrete_function`.

Each is a composite of `TensorSpec`s, the specs of the tensors the composite is passed
as, so that `sf.function` traces with them as it does with the specs a ragged or sparse
argument's `_nest_shapes` gives; tracing rebuilds the composite from its tensors.
"""

from __future__ import annotations

from typing import Any

from stageflow.core import dtypes
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend.ragged_tensor import SPLITS, RaggedTensor
from stageflow.frontend.sparse_tensor import INDEX, SparseTensor
from stageflow.frontend.spec import TensorSpec

__all__ = ["RaggedTensorSpec", "SparseTensorSpec"]


class RaggedTensorSpec:
    """The signature of ragged tensor arguments (TensorFlow's ``tf.RaggedTensorSpec``):
    their `shape` (None for unknown and ragged dims), `dtype` and number of ragged dims,
    for an `input_signature` or `get_concrete_function`. A `ragged_rank` of 0 is a tensor
    (a row of a ragged tensor, as a dataset's elements are, which `batch` makes ragged).

    >>> spec = sf.RaggedTensorSpec(shape=[None, None], dtype=sf.int32)
    >>> @sf.function(input_signature=[spec])
    ... def longest(rt):
    ...     return sf.reduce_max(rt, axis=1)
    >>> longest(sf.ragged.constant([[1, 2], [3], [4, 5, 6]]))
    sf.Tensor([2, 3, 6], shape=(3,), dtype=int32)
    """

    def __init__(self, shape: Any = None, dtype: Any = dtypes.float32,
                 ragged_rank: int | None = None, row_splits_dtype: Any = SPLITS,
                 flat_values_spec: Any = None) -> None:
        if shape is None:
            raise ValueError("sf.RaggedTensorSpec: shape=None (any rank) is not supported: "
                             "give the dims, None where unknown or ragged")
        self.shape = TensorShape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.ragged_rank = len(self.shape) - 1 if ragged_rank is None else int(ragged_rank)
        if len(self.shape) < 1 or (ragged_rank is None and len(self.shape) < 2):
            raise ValueError(f"sf.RaggedTensorSpec: a ragged tensor has rank 2 or more, got "
                             f"shape {self.shape}")
        if not 0 <= self.ragged_rank < len(self.shape):
            raise ValueError(f"sf.RaggedTensorSpec: ragged_rank must lie in [0, "
                             f"{len(self.shape) - 1}], got {ragged_rank}")

    def _nest_components(self) -> tuple[list[TensorSpec], int]:
        if self.ragged_rank == 0:  # no ragged dims: a tensor (a dataset's ragged rows)
            return [TensorSpec(self.shape, self.dtype)], 0
        rows = self.shape[0]
        splits = [TensorSpec((None if rows is None else rows + 1,), SPLITS)]
        splits += [TensorSpec((None,), SPLITS)] * (self.ragged_rank - 1)
        flat = TensorSpec((None, *self.shape[self.ragged_rank + 1:]), self.dtype)
        return [flat, *splits], self.ragged_rank

    _nest_rebuild = RaggedTensor._nest_rebuild

    @property
    def value_type(self) -> type:
        """The type of the values this spec describes (TensorFlow's ``value_type``)."""
        return RaggedTensor

    def __repr__(self) -> str:
        return (f"sf.RaggedTensorSpec(shape={self.shape}, dtype={self.dtype.name}, "
                f"ragged_rank={self.ragged_rank})")


class SparseTensorSpec:
    """The signature of sparse tensor arguments (TensorFlow's ``tf.SparseTensorSpec``):
    the dense `shape` (None where unknown) and `dtype`, any number of entries.

    >>> @sf.function(input_signature=[sf.SparseTensorSpec([2, 3], sf.float32)])
    ... def total(st):
    ...     return sf.sparse.reduce_sum(st)
    >>> total(sf.SparseTensor([[0, 1], [1, 2]], [1.5, 2.0], [2, 3]))
    sf.Tensor(3.5, shape=(), dtype=float32)
    """

    def __init__(self, shape: Any = None, dtype: Any = dtypes.float32) -> None:
        if shape is None:
            raise ValueError("sf.SparseTensorSpec: shape=None (any rank) is not supported: "
                             "give the dims, None where unknown")
        self.shape = TensorShape(shape)
        self.dtype = dtypes.as_dtype(dtype)

    def _nest_components(self) -> tuple[list[TensorSpec], tuple]:
        rank = len(self.shape)
        return [TensorSpec((None, rank), INDEX), TensorSpec((None,), self.dtype),
                TensorSpec((rank,), INDEX)], tuple(self.shape)

    _nest_rebuild = SparseTensor._nest_rebuild

    @property
    def value_type(self) -> type:
        """The type of the values this spec describes (TensorFlow's ``value_type``).

        >>> sf.SparseTensorSpec([2, 3]).value_type is sf.SparseTensor
        True
        """
        return SparseTensor

    def __repr__(self) -> str:
        return f"sf.SparseTensorSpec(shape={self.shape}, dtype={self.dtype.name})"
