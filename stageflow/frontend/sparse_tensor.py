"""`sf.SparseTensor`: a tensor stored as the positions and values of its entries
(TensorFlow's ``tf.SparseTensor``, COO form).

`indices` is int64 [count, rank], one row per stored entry, `values` [count] their
values, `dense_shape` int64 [rank] the shape of the tensor they describe; positions not
listed are zero (or the `default_value` of `sf.sparse.to_dense`). The static shape (what
`.shape` says, None for a dim known only at run time) travels beside the tensors, so that
staged ops that make dense tensors know their shape when they are traced.

It is a composite (`stageflow.core.nest`): an `sf.function` takes and returns it as its
three tensors, keyed as TensorFlow's ``SparseTensorSpec`` is, on the dtype and the dense
shape, not on the number of entries.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.nd_indexing import gather_nd
from stageflow.frontend.ops.shape import broadcast_to
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor

__all__ = ["SparseTensor"]

INDEX = dtypes.int64


def _static_dims(dense_shape: Any) -> tuple[int | None, ...] | None:
    """The dense shape as Python ints where they are known before the tensors run."""
    if isinstance(dense_shape, SymbolicTensor):
        return (None,) * dense_shape.shape[0] if dense_shape.shape[0] is not None else None
    if isinstance(dense_shape, Tensor):
        return tuple(int(d) for d in np.asarray(dense_shape._value).reshape(-1))
    return tuple(None if d is None else operator.index(d) for d in dense_shape)


class SparseTensor:
    """The entries `values` of a tensor of shape `dense_shape` at `indices`, zero elsewhere.

    >>> st = sf.SparseTensor(indices=[[0, 3], [2, 4]], values=[10, 20], dense_shape=[3, 10])
    >>> st.shape
    (3, 10)
    >>> sf.sparse.to_dense(st)[2]
    sf.Tensor([ 0,  0,  0,  0, 20,  0,  0,  0,  0,  0], shape=(10,), dtype=int32)
    """

    __slots__ = ("_indices", "_values", "_dense_shape", "_shape")
    _dense_hint = "sf.sparse.to_dense"  # named where an op refuses it

    def __init__(self, indices: Any, values: Any, dense_shape: Any) -> None:
        op = "sf.SparseTensor"
        static = _static_dims(dense_shape)
        self._indices = ew.cast(convert_to_tensor(indices, None), INDEX) if not (
            isinstance(indices, Tensor) and indices.dtype == INDEX) else indices
        self._values = convert_to_tensor(values)
        shape_tensor = convert_to_tensor(dense_shape) if isinstance(dense_shape, Tensor) else (
            convert_to_tensor(np.asarray(static, np.int64)) if static is not None and
            None not in static else convert_to_tensor(dense_shape))
        self._dense_shape = ew.cast(shape_tensor, INDEX) if shape_tensor.dtype != INDEX else (
            shape_tensor)
        if self._indices.ndim == 1 and self._indices.shape[0] == 0:  # [] for no entries
            self._indices = self._indices[:, None][:, :0] if not static else ew.cast(
                convert_to_tensor(np.zeros((0, len(static)), np.int64)), INDEX)
        rank = self._dense_shape.shape[0] if self._dense_shape.ndim == 1 else None
        if self._dense_shape.ndim != 1 or self._indices.ndim != 2 or self._values.ndim != 1:
            raise ValueError(f"{op}: expected indices [count, rank], values [count] and "
                             f"dense_shape [rank], got shapes {list(self._indices.shape)}, "
                             f"{list(self._values.shape)} and {list(self._dense_shape.shape)}"
                             f"{describe_location()}")
        count, width = self._indices.shape
        if width is not None and rank is not None and width != rank:
            raise ValueError(f"{op}: indices have {width} columns but dense_shape has rank "
                             f"{rank}{describe_location()}")
        if count is not None and self._values.shape[0] is not None and (
                count != self._values.shape[0]):
            raise ValueError(f"{op}: {count} indices but {self._values.shape[0]} values"
                             f"{describe_location()}")
        self._shape = TensorShape(static if static is not None else (None,) * (rank or 0))
        self._validate(op)

    def _validate(self, op: str) -> None:
        """Refuse indices outside the dense shape where both are at hand (eagerly)."""
        if isinstance(self._indices, SymbolicTensor) or not self._shape.is_fully_defined():
            return
        indices = np.asarray(self._indices._value)
        shape = np.asarray(self._shape, np.int64)
        if (shape < 0).any():
            raise InvalidArgumentError(f"{op}: dense_shape must not be negative, got "
                                       f"{list(self._shape)}{describe_location()}")
        bad = np.nonzero(((indices < 0) | (indices >= shape)).any(axis=1))[0]
        if bad.size:
            raise InvalidArgumentError(f"{op}: index {indices[bad[0]].tolist()} (entry "
                                       f"{bad[0]}) is out of bounds for dense_shape "
                                       f"{list(self._shape)}{describe_location()}")

    @classmethod
    def _make(cls, indices: Tensor, values: Tensor, dense_shape: Tensor,
              shape: tuple) -> SparseTensor:
        sparse = cls.__new__(cls)
        sparse._indices, sparse._values, sparse._dense_shape = indices, values, dense_shape
        sparse._shape = TensorShape(shape)
        return sparse

    # -- what it is -------------------------------------------------------------------------

    @property
    def indices(self) -> Tensor:
        """The positions of the stored entries, int64 [count, rank]."""
        return self._indices

    @property
    def values(self) -> Tensor:
        """The stored entries, [count]."""
        return self._values

    @property
    def dense_shape(self) -> Tensor:
        """The shape of the dense tensor, an int64 vector."""
        return self._dense_shape

    @property
    def shape(self) -> TensorShape:
        """The dense shape as far as it is known when traced (None dims otherwise)."""
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._values.dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def with_values(self, new_values: Any) -> SparseTensor:
        """The same positions holding `new_values` (as many)."""
        return self._make(self._indices, convert_to_tensor(new_values), self._dense_shape,
                          self._shape)

    # -- arithmetic with dense operands -------------------------------------------------------

    def _dense_at_entries(self, other: Any, op: str) -> Tensor:
        """`other` (a scalar, or a dense tensor that broadcasts to the dense shape) at the
        stored positions."""
        dense = other if isinstance(other, Tensor) else convert_to_tensor(other, self.dtype)
        if dense.ndim == 0:
            return dense
        if not self._shape.is_fully_defined():
            raise ValueError(f"SparseTensor.{op}: a dense operand needs the dense shape, "
                             f"unknown when traced: {self._shape}{describe_location()}")
        return gather_nd(broadcast_to(dense, tuple(self._shape)), self._indices)

    def __mul__(self, other: Any) -> SparseTensor:
        return self.with_values(ew.multiply(self._values, self._dense_at_entries(other,
                                                                                "__mul__")))

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> SparseTensor:
        return self.with_values(ew.divide(self._values, self._dense_at_entries(other,
                                                                              "__truediv__")))

    def __neg__(self) -> SparseTensor:
        return self.with_values(ew.negative(self._values))

    __hash__ = object.__hash__

    # -- composite --------------------------------------------------------------------------

    def _nest_components(self) -> tuple[list[Tensor], tuple]:
        return [self._indices, self._values, self._dense_shape], tuple(self._shape)

    @classmethod
    def _nest_rebuild(cls, shape: tuple, components: list[Tensor]) -> SparseTensor:
        indices, values, dense_shape = components
        return cls._make(indices, values, dense_shape, shape)

    def _nest_shapes(self) -> list[tuple]:
        """The shapes an `sf.function` keys and traces the components with: the number of
        entries left open (TensorFlow's ``SparseTensorSpec``)."""
        rank = len(self._shape)
        return [(None, rank), (None,), (rank,)]

    def __repr__(self) -> str:
        return (f"SparseTensor(indices={self._indices!r}, values={self._values!r}, "
                f"dense_shape={self._dense_shape!r})")
