"""`sf.RaggedTensor`: rows of different lengths (TensorFlow's ``tf.RaggedTensor``).

A ragged tensor is its `values` (a tensor, or another ragged tensor for each further
ragged dim) cut into rows by `row_splits`, an int64 vector: row ``i`` is
``values[row_splits[i]:row_splits[i + 1]]``. Every method is written with the op
functions, without a value read back into Python, so it runs the same eagerly and in a
staged function, and differentiates with respect to the values. Where a result's size
depends on the values (the padded width of `to_tensor`, the values an index keeps) it
is found with `nonzero`, whose result size may be unknown while tracing, and the values
are gathered: string tensors gather too, and gathers differentiate.

Its arithmetic and comparison operators are installed by `ragged_operators`. It is a
composite (`stageflow.core.nest`): an `sf.function` takes and returns it as its
flat values and row splits, keyed as TensorFlow's ``RaggedTensorSpec`` is: the dtype, the
number of rows and the uniform inner dims, not the number of values, so a new batch of
the same number of rows reuses the trace.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones_like
from stageflow.frontend.ops.creation import range as arange
from stageflow.frontend.ops.math_ops import cumsum, reduce_any
from stageflow.frontend.ops.nd_indexing import (
    gather_rows,
    tensor_scatter_nd_add,
    unsorted_segment_sum,
    with_default_row,
)
from stageflow.frontend.ops.reductions import reduce_max
from stageflow.frontend.ops.selection import nonzero
from stageflow.frontend.ops.shape import concat, expand_dims, gather, reshape
from stageflow.frontend.ops.shape_of import shape as shape_of
from stageflow.frontend.sparse_tensor import SparseTensor
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import GraphTrace, SymbolicTensor

__all__ = ["RaggedTensor"]

SPLITS = dtypes.int64


def staged() -> bool:
    """Whether ops are being traced into a graph (values are not at hand)."""
    return isinstance(context.current_trace(), GraphTrace)


def _splits(value: Any, op: str) -> Tensor:
    tensor = convert_to_tensor(value)
    if tensor.ndim != 1 or not dtypes.is_integer(tensor.dtype):
        raise TypeError(f"{op}: expected a 1-D integer tensor, got "
                        f"{tensor.dtype.name}{list(tensor.shape)}{describe_location()}")
    return ew.cast(tensor, SPLITS) if tensor.dtype != SPLITS else tensor


def row_positions(values: Any) -> Tensor:
    """0, 1, ... one int64 per row of `values` (a tensor's first dim, a ragged tensor's
    rows), also where their number is known only when the function runs."""
    if isinstance(values, RaggedTensor):
        splits = values.row_splits
        if splits.shape[0] is not None:
            return arange(splits.shape[0] - 1, dtype=SPLITS)
        return cumsum(ones_like(splits[1:])) - 1
    if values.shape[0] is not None:
        return arange(values.shape[0], dtype=SPLITS)
    first = values[(slice(None),) + (0,) * (values.ndim - 1)]
    return cumsum(ones_like(first, SPLITS)) - 1


def _check(condition: bool, op: str, message: str) -> None:
    if not condition:
        raise InvalidArgumentError(f"{op}: {message}{describe_location()}")


def _validated(values: Any, splits: Tensor, op: str) -> None:
    """TensorFlow's checks of row splits, made where the values are at hand (eagerly)."""
    if staged() or isinstance(splits, SymbolicTensor):
        return
    have = np.asarray(splits._value)
    _check(have.size >= 1, op, "row_splits must have at least one element")
    _check(have[0] == 0, op, f"row_splits must start with 0, got {have[0]}")
    _check(bool(np.all(np.diff(have) >= 0)), op, f"row_splits must be sorted, got {have}")
    rows = _nrows_static(values)
    if rows is not None:
        _check(have[-1] == rows, op, f"the last row split ({have[-1]}) must be the number of "
                                     f"values ({rows})")


def _nrows_static(values: Any) -> int | None:
    if isinstance(values, RaggedTensor):
        return values.row_splits.shape[0] - 1 if values.row_splits.shape[0] else None
    return values.shape[0]


class RaggedTensor:
    """Rows of different lengths: `values` cut into rows at `row_splits`.

    Build one with `sf.ragged.constant` or a ``from_*`` constructor; methods, indexing,
    arithmetic and the reductions of `sf` work on it eagerly and in staged functions.

    >>> rt = sf.ragged.constant([[3, 1, 4, 1], [], [5, 9, 2], [6], []])
    >>> rt
    <sf.RaggedTensor [[3, 1, 4, 1], [], [5, 9, 2], [6], []]>
    >>> rt.shape
    (5, None)
    >>> rt.row_lengths()
    sf.Tensor([4, 0, 3, 1, 0], shape=(5,), dtype=int64)
    >>> rt[2]
    sf.Tensor([5, 9, 2], shape=(3,), dtype=int32)
    >>> rt * 2 + 1
    <sf.RaggedTensor [[7, 3, 9, 3], [], [11, 19, 5], [13], []]>
    """

    __slots__ = ("_values", "_row_splits", "_uniform")
    _dense_hint = "its .to_tensor()"  # named where an op refuses it

    def __init__(self, values: Any, row_splits: Any, internal: bool = False) -> None:
        if not internal:
            raise ValueError("sf.RaggedTensor is built with sf.ragged.constant or "
                             "RaggedTensor.from_row_splits / from_row_lengths / "
                             "from_value_rowids / from_tensor")
        self._values = values
        self._row_splits = row_splits
        self._uniform: int | None = None  # the row length, where every row has it

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def from_row_splits(cls, values: Any, row_splits: Any, name: str | None = None,
                        validate: bool = True) -> RaggedTensor:
        """Rows ``values[row_splits[i]:row_splits[i + 1]]``.

        >>> sf.RaggedTensor.from_row_splits([3, 1, 4, 1, 5, 9, 2], [0, 4, 4, 6, 7])
        <sf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2]]>
        """
        values = _as_values(values)
        splits = _splits(row_splits, "RaggedTensor.from_row_splits")
        if validate:
            _validated(values, splits, "RaggedTensor.from_row_splits")
        return cls(values, splits, internal=True)

    @classmethod
    def from_row_lengths(cls, values: Any, row_lengths: Any, name: str | None = None,
                         validate: bool = True) -> RaggedTensor:
        """Consecutive rows of the given lengths.

        >>> sf.RaggedTensor.from_row_lengths([3, 1, 4, 1, 5, 9, 2], [4, 0, 2, 1])
        <sf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2]]>
        """
        lengths = _splits(row_lengths, "RaggedTensor.from_row_lengths")
        return cls.from_row_splits(values, splits_of_lengths(lengths), validate=validate)

    @classmethod
    def from_value_rowids(cls, values: Any, value_rowids: Any, nrows: int | None = None,
                          name: str | None = None, validate: bool = True) -> RaggedTensor:
        """Row ``i`` holds the values whose row id is ``i`` (ids sorted); `nrows` rows
        (default: the last id + 1, which must then be known: a Python int when traced).

        >>> sf.RaggedTensor.from_value_rowids([3, 1, 4, 1, 5, 9, 2], [0, 0, 0, 0, 2, 2, 3])
        <sf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2]]>
        """
        op = "RaggedTensor.from_value_rowids"
        rowids = _splits(value_rowids, op)
        if nrows is None:
            if isinstance(rowids, SymbolicTensor):
                raise ValueError(f"{op}: nrows must be given as a Python int when the "
                                 f"function is traced (the row ids' values decide it)"
                                 f"{describe_location()}")
            ids = np.asarray(rowids._value)
            nrows = int(ids[-1]) + 1 if ids.size else 0
        if not staged() and not isinstance(rowids, SymbolicTensor):
            ids = np.asarray(rowids._value)
            _check(bool(np.all(np.diff(ids) >= 0)), op, f"value_rowids must be sorted, got {ids}")
            _check(not ids.size or (ids[0] >= 0 and ids[-1] < nrows), op,
                   f"value_rowids must lie in [0, {nrows}), got {ids}")
        lengths = unsorted_segment_sum(ones_like(rowids), rowids, operator.index(nrows))
        return cls.from_row_splits(values, splits_of_lengths(lengths), validate=validate)

    @classmethod
    def from_row_starts(cls, values: Any, row_starts: Any, name: str | None = None,
                        validate: bool = True) -> RaggedTensor:
        """Row ``i`` starts at ``row_starts[i]`` and ends where the next one starts (the
        last one at the end of `values`).

        >>> sf.RaggedTensor.from_row_starts([3, 1, 4, 1, 5, 9, 2], [0, 4, 4, 6])
        <sf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2]]>
        """
        values = _as_values(values)
        starts = _splits(row_starts, "RaggedTensor.from_row_starts")
        end = reshape(ew.cast(_value_count(values), SPLITS), (1,))
        return cls.from_row_splits(values, concat([starts, end], 0), validate=validate)

    @classmethod
    def from_row_limits(cls, values: Any, row_limits: Any, name: str | None = None,
                        validate: bool = True) -> RaggedTensor:
        """Row ``i`` ends at ``row_limits[i]`` and starts where the one before ends (the
        first one at 0).

        >>> sf.RaggedTensor.from_row_limits([3, 1, 4, 1, 5, 9, 2], [4, 4, 6, 7])
        <sf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2]]>
        """
        limits = _splits(row_limits, "RaggedTensor.from_row_limits")
        return cls.from_row_splits(values, concat([np.zeros(1, np.int64), limits], 0),
                                   validate=validate)

    @classmethod
    def from_uniform_row_length(cls, values: Any, uniform_row_length: Any,
                                nrows: Any = None, validate: bool = True,
                                name: str | None = None) -> RaggedTensor:
        """Rows of `uniform_row_length` values each: a dim of known size over `values`
        (a tensor, or a ragged tensor whose rows it groups). `nrows` (default: the number
        of values over the row length) must be given where the length is 0.

        >>> rt = sf.RaggedTensor.from_uniform_row_length(
        ...     sf.RaggedTensor.from_row_splits([10, 11, 12, 13, 14, 15], [0, 3, 5, 5, 6]), 2)
        >>> rt
        <sf.RaggedTensor [[[10, 11, 12], [13, 14]], [[], [15]]]>
        >>> rt.shape
        (2, 2, None)
        """
        op = "RaggedTensor.from_uniform_row_length"
        values = _as_values(values)
        length = uniform_row_length
        if isinstance(length, Tensor) and not isinstance(length, SymbolicTensor):
            length = length._value
        if np.ndim(length) != 0 or isinstance(length, SymbolicTensor):
            raise ValueError(f"{op}: uniform_row_length must be a scalar known when the "
                             f"function is traced, got {uniform_row_length!r}"
                             f"{describe_location()}")
        length = operator.index(np.asarray(length).item())
        _check(length >= 0, op, f"uniform_row_length must be >= 0, got {length}")
        count = _nrows_static(values)
        if nrows is None:
            if length == 0:
                nrows = 0
            elif count is None:
                raise ValueError(f"{op}: the number of values must be known when the "
                                 f"function is traced (or nrows given){describe_location()}")
            else:
                nrows = count // length
        if isinstance(nrows, Tensor) and not isinstance(nrows, SymbolicTensor):
            nrows = nrows._value
        nrows = operator.index(np.asarray(nrows).item())
        if validate and count is not None:
            _check(count == nrows * length, op, f"{count} values do not make {nrows} rows "
                                                f"of {length}")
        result = cls(values, convert_to_tensor(np.arange(nrows + 1, dtype=np.int64) * length),
                     internal=True)
        result._uniform = length
        return result

    @classmethod
    def from_nested_row_lengths(cls, flat_values: Any, nested_row_lengths: Sequence[Any],
                                name: str | None = None, validate: bool = True
                                ) -> RaggedTensor:
        """One ragged dim per row lengths vector, outermost first.

        >>> sf.RaggedTensor.from_nested_row_lengths([1, 2, 3], ([1, 1], [2, 1]))
        <sf.RaggedTensor [[[1, 2]], [[3]]]>
        """
        result = flat_values
        for lengths in reversed(list(nested_row_lengths)):
            result = cls.from_row_lengths(result, lengths, validate=validate)
        return result

    @classmethod
    def from_nested_value_rowids(cls, flat_values: Any, nested_value_rowids: Sequence[Any],
                                 nested_nrows: Sequence[Any] | None = None,
                                 name: str | None = None, validate: bool = True
                                 ) -> RaggedTensor:
        """One ragged dim per row ids vector (and its number of rows), outermost first.

        >>> sf.RaggedTensor.from_nested_value_rowids([1, 2, 3], ([0, 1], [0, 0, 1]))
        <sf.RaggedTensor [[[1, 2]], [[3]]]>
        """
        rowids = list(nested_value_rowids)
        counts = [None] * len(rowids) if nested_nrows is None else list(nested_nrows)
        if len(counts) != len(rowids):
            raise ValueError(f"RaggedTensor.from_nested_value_rowids: {len(rowids)} row ids "
                             f"vectors and {len(counts)} nrows{describe_location()}")
        result = flat_values
        for ids, count in reversed(list(zip(rowids, counts, strict=True))):
            result = cls.from_value_rowids(result, ids, count, validate=validate)
        return result

    @classmethod
    def from_nested_row_splits(cls, flat_values: Any, nested_row_splits: Sequence[Any],
                               name: str | None = None, validate: bool = True) -> RaggedTensor:
        """One ragged dim per splits vector, outermost first.

        >>> sf.RaggedTensor.from_nested_row_splits([1, 2, 3], ([0, 1, 2], [0, 2, 3]))
        <sf.RaggedTensor [[[1, 2]], [[3]]]>
        """
        result = flat_values
        for splits in reversed(list(nested_row_splits)):
            result = cls.from_row_splits(result, splits, validate=validate)
        return result

    @classmethod
    def from_tensor(cls, tensor: Any, lengths: Any = None, padding: Any = None,
                    ragged_rank: int = 1, name: str | None = None) -> RaggedTensor:
        """The rows of a dense tensor: whole, cut to `lengths`, or with the trailing
        `padding` values of each row dropped.

        >>> sf.RaggedTensor.from_tensor([[1, 3, -1, -1], [2, -1, -1, -1], [4, 5, 8, 9]],
        ...                             padding=-1)
        <sf.RaggedTensor [[1, 3], [2], [4, 5, 8, 9]]>
        """
        op = "RaggedTensor.from_tensor"
        tensor = convert_to_tensor(tensor)
        if tensor.ndim < 2:
            raise ValueError(f"{op}: expected a tensor of rank 2 or more, got shape "
                             f"{list(tensor.shape)}{describe_location()}")
        if ragged_rank != 1:
            raise NotImplementedError(f"{op}: ragged_rank={ragged_rank}; only 1 is "
                                      f"supported{describe_location()}")
        if lengths is not None and padding is not None:
            raise ValueError(f"{op}: give lengths or padding, not both{describe_location()}")
        width = tensor.shape[1]
        if width is None:
            raise ValueError(f"{op}: the tensor's second dim must be known when the function "
                             f"is traced, got shape {list(tensor.shape)}{describe_location()}")
        columns = arange(width, dtype=SPLITS)
        rows = row_positions(tensor) * 0
        if padding is not None:
            kept = ew.not_equal(tensor, convert_to_tensor(padding, tensor.dtype))
            for _ in range(tensor.ndim - 2):
                kept = reduce_any(kept, axis=-1)
            ends = ew.where(kept, expand_dims(columns, 0) + 1, np.int64(0))
            lengths = reduce_max(ends, axis=1) if width else rows
        elif lengths is None:
            lengths = rows + width
        lengths = ew.minimum(_splits(lengths, op), np.int64(width))
        keep = ew.less(expand_dims(columns, 0), expand_dims(lengths, 1))
        rows = reshape(tensor, (-1, *tensor.shape[2:]))
        return cls(selected(rows, reshape(keep, (-1,))), splits_of_lengths(lengths),
                   internal=True)

    # -- what it is ---------------------------------------------------------------------------

    @property
    def values(self) -> Any:
        """The values the rows cut (a tensor, or a ragged tensor for further ragged dims)."""
        return self._values

    @property
    def row_splits(self) -> Tensor:
        """Where rows start and end in `values`: int64, one more than the rows."""
        return self._row_splits

    @property
    def flat_values(self) -> Tensor:
        """The innermost values, a tensor."""
        values = self._values
        while isinstance(values, RaggedTensor):
            values = values._values
        return values

    @property
    def nested_row_splits(self) -> tuple[Tensor, ...]:
        """The row splits of each ragged dim, outermost first."""
        inner = self._values.nested_row_splits if isinstance(self._values, RaggedTensor) else ()
        return (self._row_splits, *inner)

    @property
    def uniform_row_length(self) -> int | None:
        """The length of every row, where `from_uniform_row_length` made them (else None)."""
        return self._uniform

    def nested_row_lengths(self) -> tuple[Tensor, ...]:
        """The row lengths of each ragged dim, outermost first."""
        return tuple(s[1:] - s[:-1] for s in self.nested_row_splits)

    def nested_value_rowids(self) -> tuple[Tensor, ...]:
        """The row ids of the values of each ragged dim, outermost first."""
        inner = (self._values.nested_value_rowids()
                 if isinstance(self._values, RaggedTensor) else ())
        return (self.value_rowids(), *inner)

    @property
    def ragged_rank(self) -> int:
        """How many dims are ragged."""
        return len(self.nested_row_splits)

    @property
    def dtype(self) -> np.dtype:
        return self.flat_values.dtype

    @property
    def row_splits_dtype(self) -> np.dtype:
        return SPLITS

    @property
    def shape(self) -> TensorShape:
        """The static shape: the rows, None for each ragged dim, the uniform inner dims."""
        rows = self._row_splits.shape[0]
        inner = self._values.shape[1:]
        return TensorShape((None if rows is None else rows - 1, self._uniform, *inner))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def nrows(self, out_type: Any = SPLITS) -> Tensor:
        """The number of rows, a scalar."""
        rows = self._row_splits.shape[0]
        if rows is not None:
            return convert_to_tensor(np.asarray(rows - 1, dtypes.as_dtype(out_type)))
        return ew.cast(shape_of(self._row_splits, SPLITS)[0] - 1, out_type)

    def row_lengths(self, axis: int = 1) -> Tensor:
        """The length of each row."""
        if axis != 1:
            raise NotImplementedError(f"RaggedTensor.row_lengths: axis={axis}; only 1 is "
                                      f"supported{describe_location()}")
        return self._row_splits[1:] - self._row_splits[:-1]

    def row_starts(self) -> Tensor:
        return self._row_splits[:-1]

    def row_limits(self) -> Tensor:
        return self._row_splits[1:]

    def value_rowids(self) -> Tensor:
        """The row of each value, int64 (sorted)."""
        positions = row_positions(self._values)
        bumps = concat([positions * 0, np.zeros(1, np.int64)], 0)
        inner = self._row_splits[1:-1]
        bumps = tensor_scatter_nd_add(bumps, expand_dims(inner, 1), ones_like(inner))
        return cumsum(bumps)[:-1]

    def bounding_shape(self) -> Tensor:
        """The smallest dense shape that holds every row, int64.

        >>> sf.ragged.constant([[1], [2, 3, 4], []]).bounding_shape()
        sf.Tensor([3, 3], shape=(2,), dtype=int64)
        """
        longest = reduce_max(concat([self.row_lengths(), np.zeros(1, np.int64)], 0))
        values = self._values
        inner = (values.bounding_shape()[1:] if isinstance(values, RaggedTensor)
                 else convert_to_tensor(np.asarray(values.shape[1:], np.int64)))
        if not isinstance(values, RaggedTensor) and None in values.shape[1:]:
            raise ValueError(f"RaggedTensor.bounding_shape: the inner dims must be known, got "
                             f"{self.shape}{describe_location()}")
        return concat([reshape(self.nrows(), (1,)), reshape(longest, (1,)),
                       ew.cast(inner, SPLITS)], 0)

    # -- conversions --------------------------------------------------------------------------

    def to_tensor(self, default_value: Any = None, name: str | None = None,
                  shape: Any = None) -> Tensor:
        """A dense tensor: rows padded with `default_value` (0, or ``b""`` for strings) to
        the longest row, or cut or padded to `shape`'s width where it gives one.

        >>> sf.ragged.constant([[1, 2], [3]]).to_tensor()
        sf.Tensor([[1, 2],
                   [3, 0]], shape=(2, 2), dtype=int32)
        """
        values = self._values
        if isinstance(values, RaggedTensor):
            inner = None if shape is None else shape[1:]
            values = values.to_tensor(default_value, shape=None if inner is None else (
                None, *inner[1:]))
        width = None if shape is None or len(shape) < 2 else shape[1]
        if default_value is None:
            default_value = b"" if values.dtype.kind == "O" else 0
        return padded(values, self._row_splits, default_value, width)[0]

    def to_list(self) -> list:
        """The rows as nested Python lists (values as Python numbers or `bytes`)."""
        return _rows_numpy(self, "to_list", lists=True)

    def numpy(self) -> np.ndarray:
        """The rows as NumPy (TensorFlow's form): one array where every row has the same
        length, else an object array of the rows, each an array."""
        if staged() or isinstance(self.flat_values, SymbolicTensor):
            _traced_refusal("RaggedTensor.numpy")
        values = self._values
        values = values.numpy() if isinstance(values, RaggedTensor) else np.asarray(
            values._value)
        splits = np.asarray(self._row_splits._value).tolist()
        rows = [values[a:b] for a, b in zip(splits[:-1], splits[1:], strict=True)]
        if not rows:
            return np.zeros((0, 0, *values.shape[1:]), dtype=values.dtype)
        if any(len(row) != len(rows[0]) for row in rows):
            return _object_array(rows)
        try:
            return np.array(rows)
        except ValueError:  # rows of object arrays NumPy cannot stack
            return _object_array(rows)

    def to_sparse(self) -> SparseTensor:
        """The same values as an `sf.SparseTensor` (row, position in the row, ...)."""
        rowids = self.value_rowids()
        values = self._values
        if isinstance(values, RaggedTensor) or values.ndim != 1:
            raise NotImplementedError(f"RaggedTensor.to_sparse: only 2-D ragged tensors are "
                                      f"supported, got shape {self.shape}{describe_location()}")
        column = row_positions(values) - gather(self._row_splits, rowids)
        rows = self._row_splits.shape[0]
        width = reduce_max(concat([self.row_lengths(), np.zeros(1, np.int64)], 0))
        count = convert_to_tensor(np.int64(rows - 1)) if rows is not None else self.nrows()
        return SparseTensor(ew.cast(concat([expand_dims(rowids, 1), expand_dims(column, 1)], 1),
                                    SPLITS), values, concat([reshape(count, (1,)),
                                                            reshape(width, (1,))], 0))

    @classmethod
    def from_sparse(cls, st_input: SparseTensor, name: str | None = None) -> RaggedTensor:
        """The rows of a 2-D `sf.SparseTensor` whose indices are in row-major order, each
        row its values (the positions within a row are not kept, as in TensorFlow).

        >>> st = sf.SparseTensor([[0, 0], [2, 0], [2, 1]], ["a", "b", "c"], [3, 3])
        >>> sf.RaggedTensor.from_sparse(st)
        <sf.RaggedTensor [[b'a'], [], [b'b', b'c']]>
        """
        if len(st_input.shape) != 2:
            raise ValueError(f"RaggedTensor.from_sparse: expected a 2-D SparseTensor, got "
                             f"shape {st_input.shape}{describe_location()}")
        rows = st_input.shape[0]
        if rows is None:
            raise ValueError(f"RaggedTensor.from_sparse: the number of rows must be known"
                             f"{describe_location()}")
        return cls.from_value_rowids(st_input.values, st_input.indices[:, 0], rows)

    def with_values(self, new_values: Any) -> RaggedTensor:
        """The same rows over other values (as many)."""
        return RaggedTensor(_as_values(new_values), self._row_splits, internal=True)

    def with_flat_values(self, new_values: Any) -> RaggedTensor:
        """The same ragged dims over other flat values (as many)."""
        if isinstance(self._values, RaggedTensor):
            return self.with_values(self._values.with_flat_values(new_values))
        return self.with_values(new_values)

    # -- indexing ------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, tuple):
            key = (key,)
        if not key:
            return self
        first, rest = key[0], key[1:]
        rows = self._row_splits.shape[0]
        count = None if rows is None else rows - 1
        if isinstance(first, slice):
            result = self._row_slice(first, count)
            return result._column_slice(rest) if rest else result
        index = operator.index(first)
        if count is not None and not -count <= index < count:
            raise IndexError(f"RaggedTensor: row {index} is out of range for "
                             f"{count} rows{describe_location()}")
        if index < 0:
            if count is None:
                raise IndexError(f"RaggedTensor: row {index} counts from an end unknown when "
                                 f"the function is traced{describe_location()}")
            index += count
        row = _row_range(self, index, index + 1)._values
        return row[rest] if rest else row

    def _row_slice(self, key: slice, count: int | None) -> RaggedTensor:
        if key.step not in (None, 1):
            raise NotImplementedError(f"RaggedTensor: row slices with a step are not "
                                      f"supported{describe_location()}")
        if count is None:
            raise NotImplementedError(f"RaggedTensor: slicing rows needs the number of rows"
                                      f"{describe_location()}")
        start, stop, _ = key.indices(count)
        return _row_range(self, start, max(start, stop))

    def _column_slice(self, rest: tuple) -> RaggedTensor:
        inner = rest[0]
        if isinstance(inner, slice):
            if inner.step not in (None, 1):
                raise NotImplementedError(f"RaggedTensor: slices with a step are not "
                                          f"supported{describe_location()}")
            lengths = self.row_lengths()
            start = _clipped(inner.start, lengths, 0)
            stop = _clipped(inner.stop, lengths, None)
            stop = ew.maximum(stop, start)
            rowids = self.value_rowids()
            column = row_positions(self._values) - gather(self._row_splits, rowids)
            keep = ew.logical_and(ew.greater_equal(column, gather(start, rowids)),
                                  ew.less(column, gather(stop, rowids)))
            values = _mask_rows(self._values, keep)
            result = RaggedTensor(values, splits_of_lengths(stop - start), internal=True)
            if len(rest) > 1:
                return result.with_values(_apply_rest(result._values, rest[1:]))
            return result
        raise NotImplementedError(f"RaggedTensor: indexing a ragged dim with {inner!r} is not "
                                  f"supported (rows of different lengths have no common "
                                  f"column); take a row first, rt[i][j]{describe_location()}")

    def __len__(self) -> int:
        count = self.shape[0]
        if count is None:
            raise TypeError(f"len of a RaggedTensor of unknown rows{describe_location()}")
        return count

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    __hash__ = object.__hash__  # by identity: arithmetic and comparisons are elementwise

    # -- composite ------------------------------------------------------------------------------

    def _nest_components(self) -> tuple[list[Tensor], int]:
        return [self.flat_values, *self.nested_row_splits], self.ragged_rank

    @classmethod
    def _nest_rebuild(cls, ragged_rank: int, components: list[Tensor]) -> RaggedTensor:
        result = components[0]
        for splits in reversed(components[1:]):
            result = cls(result, splits, internal=True)
        return result

    def _nest_shapes(self) -> list[tuple]:
        """The shapes an `sf.function` keys and traces the components with: the number of
        values left open (TensorFlow's ``RaggedTensorSpec``), the outer rows kept."""
        flat = self.flat_values.shape
        splits = [tuple(s.shape) if i == 0 else (None,)
                  for i, s in enumerate(self.nested_row_splits)]
        return [(None, *flat[1:]), *splits]

    # -- printing --------------------------------------------------------------------------------

    def __repr__(self) -> str:
        flat = self.flat_values
        if staged() or isinstance(flat, SymbolicTensor) or not isinstance(flat, Tensor):
            return f"sf.RaggedTensor(values={self._values!r}, row_splits={self._row_splits!r})"
        with np.printoptions(formatter={"all": _formatted}):
            text = _formatted(self.numpy())
        return f"<sf.RaggedTensor {text}>"


def _formatted(x: Any) -> str:
    """TensorFlow's text of a ragged tensor's rows: NumPy's, values separated by commas."""
    if isinstance(x, np.ndarray):
        return np.array2string(x, separator=", ") if x.size else repr(x.tolist())
    return str(x)


def _as_values(values: Any) -> Any:
    if isinstance(values, RaggedTensor):
        return values
    tensor = convert_to_tensor(values)
    if tensor.ndim == 0:
        raise ValueError(f"RaggedTensor: the values must have a first dim, got a scalar"
                         f"{describe_location()}")
    return tensor


def _value_count(values: Any) -> Tensor:
    """The number of rows of `values` (a tensor, or a ragged tensor), a scalar."""
    if isinstance(values, RaggedTensor):
        return values.nrows()
    count = values.shape[0]
    return convert_to_tensor(np.int64(count)) if count is not None else shape_of(values,
                                                                                  SPLITS)[0]


def splits_of_lengths(lengths: Tensor) -> Tensor:
    return concat([np.zeros(1, np.int64), cumsum(ew.cast(lengths, SPLITS))], 0)


def _clipped(bound: int | None, lengths: Tensor, default: int | None) -> Tensor:
    """A Python slice bound per row (negative: from the row's end), clipped to the row."""
    if bound is None:
        return lengths * 0 if default == 0 else lengths
    bound = operator.index(bound)
    at = lengths + bound if bound < 0 else lengths * 0 + bound
    return ew.minimum(ew.maximum(at, np.int64(0)), lengths)


def _apply_rest(values: Any, rest: tuple) -> Any:
    return values[(slice(None), *rest)]


def _mask_rows(values: Any, keep: Tensor) -> Any:
    """The rows of `values` where `keep` is true."""
    if isinstance(values, RaggedTensor):
        inner = _mask_rows(values._values, gather(keep, values.value_rowids()))
        return RaggedTensor(inner, splits_of_lengths(selected(values.row_lengths(), keep)),
                            internal=True)
    return selected(values, keep)


def selected(values: Tensor, keep: Tensor) -> Tensor:
    """The rows of `values` where the bool vector `keep` is true (`boolean_mask` as a
    gather, which string tensors allow too)."""
    return gather_rows(values, reshape(nonzero(keep), (-1,)))


def _row_range(rt: RaggedTensor, start: Any, stop: Any) -> RaggedTensor:
    """Rows ``start .. stop - 1`` (int64 scalars or Python ints) of `rt`."""
    splits = rt.row_splits
    positions = row_positions(rt)
    keep = ew.logical_and(ew.greater_equal(positions, start), ew.less(positions, stop))
    first = gather(splits, convert_to_tensor(np.int64(start)) if isinstance(start, int) else start)
    new_splits = concat([np.zeros(1, np.int64), selected(splits[1:], keep) - first], 0)
    values = rt.values
    value_positions = row_positions(values)
    last = gather(splits, convert_to_tensor(np.int64(stop)) if isinstance(stop, int) else stop)
    kept = ew.logical_and(ew.greater_equal(value_positions, first),
                          ew.less(value_positions, last))
    return RaggedTensor(_mask_rows(values, kept), new_splits, internal=True)


def padded(values: Tensor, splits: Tensor, default: Any, width: int | None = None
           ) -> tuple[Tensor, Tensor]:
    """The rows of `values` (a tensor) padded with `default` to `width` (default: the
    longest row) as one dense tensor [rows, width, *inner], and the bool [rows, width]
    mask of the real values: a gather from the values with one row of `default` after
    them (which string tensors allow too)."""
    lengths = splits[1:] - splits[:-1]
    if width is None:
        longest = reduce_max(concat([lengths, np.zeros(1, np.int64)], 0))
        columns = reshape(nonzero(ew.less(row_positions(values), longest)), (-1,))
    else:
        columns = arange(operator.index(width), dtype=SPLITS)
    mask = ew.less(expand_dims(columns, 0), expand_dims(lengths, 1))
    inner = tuple(values.shape[1:])
    if None in inner:
        raise ValueError(f"RaggedTensor: padding rows needs the values' inner dims, got "
                         f"{list(values.shape)}{describe_location()}")
    position = expand_dims(splits[:-1], 1) + expand_dims(columns, 0)
    index = ew.where(mask, position, splits[-1])
    return gather_rows(with_default_row(values, default), index), mask


def _rows_numpy(rt: RaggedTensor, op: str, lists: bool) -> list:
    """The rows' values read back (eagerly only), nested as the ragged dims are: Python
    lists, or (not `lists`) NumPy arrays, object arrays for the outer ragged dims."""
    if staged() or isinstance(rt.flat_values, SymbolicTensor):
        _traced_refusal(f"RaggedTensor.{op}")
    values = rt.values
    if isinstance(values, RaggedTensor):
        inner = _rows_numpy(values, op, lists)
        inner = inner if lists else _object_array(inner)
    else:
        inner = np.asarray(values._value)
        inner = inner.tolist() if lists else inner
    splits = np.asarray(rt.row_splits._value).tolist()
    return [inner[a:b] for a, b in zip(splits[:-1], splits[1:], strict=True)]


def _object_array(rows: list) -> np.ndarray:
    """A 1-D object array of `rows` (NumPy would stack rows of one length)."""
    out = np.empty(len(rows), dtype=object)
    for i, row in enumerate(rows):
        out[i] = row
    return out


def _traced_refusal(op: str) -> Any:
    raise TypeError(f"{op} reads the values, which a traced function does not have: call it "
                    f"outside the sf.function (or return the ragged tensor){describe_location()}")
