"""`sf.ragged` (TensorFlow's ``tf.ragged``) and the `sf` ops that take ragged tensors:
`constant`, `map_flat_values`, `range`, and `reduce_sum/mean/max/min/prod` and `concat`,
registered for `RaggedTensor` with `dispatch` (``sf.reduce_mean(rt, axis=1)``).

A sum over the ragged dim is a sum by segments (rows); the other reductions pad the rows
with their identity (1, the dtype's lowest or highest value) into a dense [rows, longest
row, ...] tensor and reduce that, as TensorFlow's segment reductions give: an empty row's
sum is 0, its max the dtype's lowest value, its mean NaN (the mean of integers is float64,
as in TensorFlow).
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.shapes import normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend import functional_ops
from stageflow.frontend.composite_specs import RaggedTensorSpec
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import math_ops, normalization, reductions
from stageflow.frontend.ops import shape as shape_ops
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones_like
from stageflow.frontend.ops.dispatch import register
from stageflow.frontend.ops.nd_indexing import gather_rows, unsorted_segment_sum
from stageflow.frontend.ops.shape import concat, gather
from stageflow.frontend.ops.shape_of import shape as shape_of
from stageflow.frontend.ops.sorting import argsort
from stageflow.frontend.ragged_operators import check_same_rows
from stageflow.frontend.ragged_tensor import (
    SPLITS,
    RaggedTensor,
    padded,
    row_positions,
    splits_of_lengths,
)
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor

__all__ = ["constant", "map_flat_values", "range"]


# -- constant ---------------------------------------------------------------------------------


def _depth(value: Any) -> int | None:
    """The nesting depth of the scalars in `value` (lists and tuples are levels), or None
    where there are none; a ValueError where scalars sit at different depths."""
    if not isinstance(value, list | tuple):
        return 0
    depths = {d for d in (_depth(item) for item in value) if d is not None}
    if len(depths) > 1:
        raise ValueError(f"sf.ragged.constant: all scalar values must have the same nesting "
                         f"depth, got {value!r}{describe_location()}")
    return depths.pop() + 1 if depths else None


def constant(pylist: Any, dtype: Any = None, ragged_rank: int | None = None,
             inner_shape: Sequence[int] | None = None, name: str | None = None,
             row_splits_dtype: Any = SPLITS) -> RaggedTensor:
    """A ragged tensor from nested Python lists whose rows may differ in length.

    Every dim but the innermost `len(inner_shape)` ones is ragged (`ragged_rank`, by
    default all but the scalars' level); the dtype is `sf.constant`'s for the scalars
    (int32, float32, string), or `dtype`.

    >>> sf.ragged.constant([[1, 2], [3]])
    <sf.RaggedTensor [[1, 2], [3]]>
    >>> sf.ragged.constant([[[1, 2], [3, 4]], [[5, 6]]], ragged_rank=1).shape
    (2, None, 2)
    """
    if dtypes.as_dtype(row_splits_dtype) != SPLITS:
        raise NotImplementedError(f"sf.ragged.constant: row splits are int64 "
                                  f"{describe_location()}")
    depth = _depth(pylist)
    if depth is None:  # no scalars: every level is empty
        depth = 1 + (ragged_rank or 1) + len(inner_shape or ())
    if depth < 2:
        raise ValueError(f"sf.ragged.constant: expected nested lists of rank 2 or more, got "
                         f"{pylist!r}{describe_location()}")
    if ragged_rank is None:
        ragged_rank = depth - 1 - len(inner_shape or ())
    if not 0 < ragged_rank < depth:
        raise ValueError(f"sf.ragged.constant: ragged_rank must lie in [1, {depth - 1}] for "
                         f"values of rank {depth}, got {ragged_rank}{describe_location()}")
    level, nested_splits = list(pylist), []
    for _ in builtins.range(ragged_rank):
        nested_splits.append(np.cumsum([0, *(len(row) for row in level)], dtype=np.int64))
        level = [item for row in level for item in row]
    inner = tuple(inner_shape) if inner_shape is not None else None
    try:
        array = np.array(level, dtype=object if dtype is None else None)
        if array.dtype == object and array.size:
            kinds = {type(v) for v in array.reshape(-1)}
            if any(issubclass(k, str | bytes) for k in kinds) and not all(
                    issubclass(k, str | bytes) for k in kinds):
                raise ValueError("the values mix strings and numbers")
        if inner is not None and not level:
            array = np.zeros((0, *inner))
        values = convert_to_tensor(array.tolist() if array.size else array.astype(
            np.float32 if dtype is None else dtypes.as_dtype(dtype)), dtype)
    except ValueError as error:
        raise ValueError(f"sf.ragged.constant: cannot make one tensor of the values "
                         f"{level!r} ({error}){describe_location()}") from None
    if not level and inner is None:
        values = shape_ops.reshape(values, (0, *([0] * (depth - ragged_rank - 1))))
    result = values
    for splits in reversed(nested_splits):
        result = RaggedTensor.from_row_splits(result, splits, validate=False)
    return result


# -- functions of the values ---------------------------------------------------------------------


def map_flat_values(op: Callable[..., Any], *args: Any, **kwargs: Any) -> RaggedTensor:
    """`op` applied to the flat values of the ragged tensors among the arguments (which
    must have the same row splits), keeping their ragged dims.

    >>> sf.ragged.map_flat_values(sf.square, sf.ragged.constant([[1, 2], [3]]))
    <sf.RaggedTensor [[1, 4], [9]]>
    """
    ragged = [a for a in (*args, *kwargs.values()) if isinstance(a, RaggedTensor)]
    if not ragged:
        raise ValueError(f"sf.ragged.map_flat_values: no RaggedTensor among the arguments"
                         f"{describe_location()}")
    first = ragged[0]
    for other in ragged[1:]:
        check_same_rows(first, other, "ragged.map_flat_values")

    def flat(a: Any) -> Any:
        return a.flat_values if isinstance(a, RaggedTensor) else a

    result = op(*(flat(a) for a in args), **{k: flat(v) for k, v in kwargs.items()})
    return first.with_flat_values(result)


def range(starts: Any, limits: Any = None, deltas: Any = 1, dtype: Any = None,  # noqa: A001
          name: str | None = None, row_splits_dtype: Any = SPLITS) -> RaggedTensor:
    """Row ``i`` is ``sf.range(starts[i], limits[i], deltas[i])`` (one start of 0 when only
    `starts` is given, which is then the limits); values must be at hand (eagerly).

    >>> sf.ragged.range([3, 5, 2])
    <sf.RaggedTensor [[0, 1, 2], [0, 1, 2, 3, 4], [0, 1]]>
    """
    if limits is None:
        starts, limits = 0, starts
    parts = [convert_to_tensor(v) for v in (starts, limits, deltas)]
    if any(isinstance(p, SymbolicTensor) for p in parts):
        raise TypeError(f"sf.ragged.range: the row bounds decide the shape, so they must be "
                        f"known when the function is traced{describe_location()}")
    arrays = np.broadcast_arrays(*(np.asarray(p._value) for p in parts))
    kind = dtype if dtype is not None else parts[1].dtype
    rows = [np.arange(a, b, d, dtype=dtypes.as_dtype(kind)) for a, b, d in zip(*arrays,
                                                                               strict=True)]
    values = np.concatenate(rows) if rows else np.zeros(0, dtypes.as_dtype(kind))
    return RaggedTensor.from_row_lengths(values, np.asarray([len(r) for r in rows], np.int64))


# -- reductions over ragged dims -----------------------------------------------------------------


def _lowest(dtype: np.dtype) -> Any:
    return np.finfo(dtype).min if dtypes.is_floating(dtype) else np.iinfo(dtype).min


def _highest(dtype: np.dtype) -> Any:
    return np.finfo(dtype).max if dtypes.is_floating(dtype) else np.iinfo(dtype).max


# The reductions that pad: (public op, the identity a padded position holds per dtype).
_PADDED: list[tuple[Callable[..., Any], Callable[[np.dtype], Any]]] = [
    (reductions.reduce_sum, lambda dtype: 0),
    (reductions.reduce_prod, lambda dtype: 1),
    (reductions.reduce_max, _lowest),
    (reductions.reduce_min, _highest),
]
_dense_sum = reductions.reduce_sum.__wrapped__


def _ragged_reduction(public: Callable[..., Any], identity: Callable[[np.dtype], Any]
                      ) -> Callable[..., Any]:
    dense_op, label = public.__wrapped__, public.__name__

    def reduce(x: RaggedTensor, axis: Any = None, keepdims: bool = False,
               name: str | None = None) -> Any:
        """TensorFlow's reduction of a ragged tensor (see the module's docstring)."""
        return _reduce(x, axis, keepdims, label, lambda values, splits: padded(
            values, splits, identity(values.dtype))[0], dense_op)

    reduce.__name__ = label
    return reduce


def _reduce(x: RaggedTensor, axis: Any, keepdims: bool, op: str,
            pad: Callable[[Tensor, Tensor], Tensor], dense_op: Callable[..., Tensor]) -> Any:
    """`dense_op` over `axis` of `x`: all of it, a ragged or uniform dim of a ragged tensor
    with one ragged dim, or a uniform inner dim of any ragged tensor."""
    if axis is None:
        return dense_op(x.flat_values, None, keepdims)
    if isinstance(axis, list | tuple):
        if len(axis) != 1:
            raise NotImplementedError(f"sf.{op}: one axis at a time over a ragged tensor, got "
                                      f"{axis}{describe_location()}")
        axis = axis[0]
    axis = normalize_axis(operator.index(axis), x.ndim)
    if axis > x.ragged_rank:  # a uniform dim inside each value
        return x.with_values(_reduce_values(x.values, axis - 1, keepdims, op, pad, dense_op))
    if x.ragged_rank != 1:
        raise NotImplementedError(f"sf.{op}: over axis {axis} of a ragged tensor with "
                                  f"{x.ragged_rank} ragged dims; only one ragged dim is "
                                  f"supported there{describe_location()}")
    rows = x.row_splits.shape[0]
    if dense_op is _dense_sum and axis == 1 and rows is not None:
        # Sums by segment: no padding, and no op whose result size depends on the values
        # (which compiled programs run as a Python step).
        summed = unsorted_segment_sum(x.values, x.value_rowids(), rows - 1)
        return shape_ops.expand_dims(summed, 1) if keepdims else summed
    return dense_op(pad(x.values, x.row_splits), axis, keepdims)


def _reduce_values(values: Any, axis: int, keepdims: bool, op: str, pad: Callable,
                   dense_op: Callable) -> Any:
    if isinstance(values, RaggedTensor):
        return _reduce(values, axis, keepdims, op, pad, dense_op)
    return dense_op(values, axis, keepdims)


def _ragged_mean(x: RaggedTensor, axis: Any = None, keepdims: bool = False,
                 name: str | None = None) -> Any:
    """The mean: the sum over the count of real values (NaN for an empty row)."""
    values = x.flat_values
    kind = values.dtype if dtypes.is_floating(values.dtype) else dtypes.float64
    label = reductions.reduce_mean.__name__
    summed = _reduce(x.with_flat_values(ew.cast(values, kind)), axis, keepdims, label,
                     lambda v, s: padded(v, s, 0)[0], _dense_sum)
    count = _reduce(x.with_flat_values(ones_like(values, kind)), axis, keepdims, label,
                    lambda v, s: padded(v, s, 0)[0], _dense_sum)
    if isinstance(summed, RaggedTensor):
        summed, count = summed.flat_values, count.flat_values
        return x.with_flat_values(_divided(summed, count))
    return _divided(summed, count)


def _divided(total: Tensor, count: Tensor) -> Tensor:
    """`total / count`, NaN where the count is 0 (no warning from the eager kernel)."""
    some = ew.greater(count, 0)
    return ew.where(some, total / ew.maximum(count, 1), np.nan)


# -- concatenation -------------------------------------------------------------------------------


def _as_ragged(value: Any, ragged_rank: int) -> RaggedTensor:
    if isinstance(value, RaggedTensor):
        return value
    dense = convert_to_tensor(value)
    if ragged_rank != 1:
        raise NotImplementedError(f"sf.concat: a dense operand beside ragged tensors with "
                                  f"{ragged_rank} ragged dims{describe_location()}")
    return RaggedTensor.from_tensor(dense)


def _ragged_concat(values: Sequence[Any], axis: int, name: str | None = None) -> RaggedTensor:
    """Ragged tensors (and dense ones, as ragged) joined: after each other (axis 0), or
    row by row (axis 1, one ragged dim)."""
    first = next(v for v in values if isinstance(v, RaggedTensor))
    parts = [_as_ragged(v, first.ragged_rank) for v in values]
    axis = normalize_axis(operator.index(axis), first.ndim)
    if any(p.ragged_rank != first.ragged_rank for p in parts):
        raise ValueError(f"sf.concat: the ragged operands have different ragged ranks"
                         f"{describe_location()}")
    if axis == 0:
        return _stacked_rows(parts)
    if axis == 1 and first.ragged_rank == 1:
        return _joined_rows(parts)
    raise NotImplementedError(f"sf.concat: axis {axis} of ragged tensors with "
                              f"{first.ragged_rank} ragged dims{describe_location()}")


def _stacked_rows(parts: list[RaggedTensor]) -> RaggedTensor:
    """The rows of each part after those of the one before."""
    splits, offset = [parts[0].row_splits], parts[0].row_splits[-1]
    for part in parts[1:]:
        splits.append(part.row_splits[1:] + offset)
        offset = offset + part.row_splits[-1]
    values = [p.values for p in parts]
    joined = (_stacked_rows(values) if isinstance(values[0], RaggedTensor)
              else concat(values, 0))
    return RaggedTensor(joined, concat(splits, 0), internal=True)


def _joined_rows(parts: list[RaggedTensor]) -> RaggedTensor:
    """Row ``i`` of each part after row ``i`` of the one before (one ragged dim)."""
    lengths = [p.row_lengths() for p in parts]
    total = lengths[0]
    for length in lengths[1:]:
        total = total + length
    splits = splits_of_lengths(total)
    destinations, before = [], splits[:-1]
    for part, length in zip(parts, lengths, strict=True):
        rowids = part.value_rowids()
        within = row_positions(part.values) - gather(part.row_splits, rowids)
        destinations.append(gather(before, rowids) + within)
        before = before + length
    order = argsort(concat(destinations, 0))
    return RaggedTensor(gather_rows(concat([p.values for p in parts], 0), order), splits,
                        internal=True)


# -- reversal -----------------------------------------------------------------------------------


def _ragged_reverse(x: RaggedTensor, axis: Any) -> RaggedTensor:
    """The order of the rows (axis 0), of the values within each row (axis 1), or of an
    inner dim reversed (TensorFlow's ``tf.reverse`` of a ragged tensor)."""
    result = x
    for one in [axis] if isinstance(axis, int) else list(axis):
        one = normalize_axis(operator.index(one), x.ndim)
        if one > result.ragged_rank:
            result = result.with_values(math_ops.reverse(result.values, [one - 1]))
        elif result.ragged_rank != 1:
            raise NotImplementedError(f"sf.reverse: axis {one} of a ragged tensor with "
                                      f"{result.ragged_rank} ragged dims{describe_location()}")
        else:
            result = _reversed_rows(result) if one == 0 else _reversed_within(result)
    return result


def _reversed_within(x: RaggedTensor) -> RaggedTensor:
    rowids, splits = x.value_rowids(), x.row_splits
    column = row_positions(x.values) - gather(splits, rowids)
    last = gather(splits[1:], rowids) - 1
    return x.with_values(gather_rows(x.values, last - column))


def _reversed_rows(x: RaggedTensor) -> RaggedTensor:
    splits = x.row_splits
    lengths = x.row_lengths()
    flipped = splits_of_lengths(math_ops.reverse(lengths, [0]))
    placed = RaggedTensor(x.values, flipped, internal=True)
    rowids = placed.value_rowids()
    source_rows = (x.nrows() - 1) - rowids
    column = row_positions(x.values) - gather(flipped, rowids)
    return RaggedTensor(gather_rows(x.values, gather(splits, source_rows) + column), flipped,
                        internal=True)


# -- tiling and mapping -------------------------------------------------------------------------


def _ragged_tile(x: RaggedTensor, multiples: Sequence[int]) -> RaggedTensor:
    """The rows repeated `multiples[0]` times, each row's values `multiples[1]` times
    (one ragged dim), inner dims as `sf.tile` repeats them."""
    multiples = [operator.index(m) for m in multiples]
    if len(multiples) != x.ndim or x.ragged_rank != 1:
        raise NotImplementedError(f"sf.tile: {len(multiples)} multiples for a ragged tensor of "
                                  f"shape {x.shape} (one ragged dim, a multiple per dim)"
                                  f"{describe_location()}")
    values = x.values
    if any(m != 1 for m in multiples[2:]):
        values = shape_ops.tile(values, [1, *multiples[2:]])
    lengths, splits, times = x.row_lengths(), x.row_splits, multiples[1]
    grown = splits_of_lengths(lengths * times)
    placed = RaggedTensor(concat([values] * times, 0) if times else values[:0], grown,
                          internal=True)
    rowids = placed.value_rowids()
    column = row_positions(placed.values) - gather(grown, rowids)
    within = ew.mod(column, ew.maximum(gather(lengths, rowids), np.int64(1)))
    rows = RaggedTensor(gather_rows(values, gather(splits, rowids) + within), grown,
                        internal=True)
    return _stacked_rows([rows] * multiples[0]) if multiples[0] != 1 else rows


def _ragged_map_fn(fn: Callable[[Any], Any], elems: RaggedTensor, dtype: Any = None,
                   parallel_iterations: int | None = None, back_prop: bool = True,
                   swap_memory: bool = False, infer_shape: bool = True, name: str | None = None,
                   fn_output_signature: Any = None) -> Any:
    """`fn` of each row (a tensor, or a ragged tensor for more ragged dims), as TensorFlow's
    ``map_fn`` of a ragged tensor: the results are the rows of a ragged tensor, or, given a
    dtype or `sf.TensorSpec` as `fn_output_signature`, stacked into a tensor. The rows are
    taken one by one in Python (a staged function holds one copy of `fn` per row)."""
    rows = elems.shape[0]
    if rows is None:
        raise ValueError(f"sf.map_fn: mapping over the rows of a ragged tensor needs their "
                         f"number when the function is traced{describe_location()}")
    results = [convert_to_tensor(fn(elems[i])) for i in builtins.range(rows)]
    signature = fn_output_signature if fn_output_signature is not None else dtype
    if signature is not None and not isinstance(signature, RaggedTensorSpec) or any(
            r.ndim == 0 for r in results):
        return shape_ops.stack(results) if results else convert_to_tensor(np.zeros(0))
    lengths = [convert_to_tensor(np.int64(r.shape[0])) if r.shape[0] is not None else
               ew.cast(shape_of(r)[0], SPLITS) for r in results]
    return RaggedTensor.from_row_lengths(concat(results, 0), shape_ops.stack(lengths))


for _public, _identity in _PADDED:
    register(_public, RaggedTensor, _ragged_reduction(_public, _identity))
register(reductions.reduce_mean, RaggedTensor, _ragged_mean)
register(shape_ops.concat, RaggedTensor, _ragged_concat)
register(math_ops.reverse, RaggedTensor, _ragged_reverse)
register(shape_ops.tile, RaggedTensor, _ragged_tile)
register(functional_ops.map_fn, RaggedTensor, _ragged_map_fn)


def _ragged_embedding_lookup(params: Any, ids: RaggedTensor, *args: Any, **kwargs: Any
                             ) -> RaggedTensor:
    """The rows of `params` at ragged ids: a ragged tensor of their rows (one more dim)."""
    return ids.with_flat_values(normalization.embedding_lookup(params, ids.flat_values,
                                                               *args, **kwargs))


register(normalization.embedding_lookup, RaggedTensor, _ragged_embedding_lookup)
