"""ONNX's indexing ops: Gather, GatherElements, GatherND, ScatterElements (and the older
Scatter), ScatterND, TensorScatter, OneHot, NonZero, TopK, ArgMax, ArgMin and Unique.

Element-wise gathers and scatters become `sf.gather_nd` and the `tensor_scatter_nd`
family on full index tuples (`element_coordinates`); a scatter that multiplies or keeps the
maximum or minimum walks its updates in order in one `sf.fori_loop`, as ONNX specifies it.
Negative indices count from the end of their axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

import stageflow as sf
from stageflow.frontend.tensor import Tensor
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.shape import (
    axis_of,
    dim_of,
    dims_in,
    element_coordinates,
    ints,
    shape_value,
    static_shape,
)
from stageflow.primitives.sorting import sort_p


def _within(indices: Value, dims: Sequence[Value]) -> Value:
    """int64 `indices` whose last axis runs over `dims`, negative ones made positive."""
    indices = sf.cast(indices, sf.int64)
    size = sf.stack([sf.cast(d, sf.int64) for d in dims]) if dims else np.zeros(0, np.int64)
    return sf.where(sf.less(indices, 0), indices + size, indices)


def _positive(indices: Value, dim: Value) -> Value:
    indices = sf.cast(indices, sf.int64)
    return sf.where(sf.less(indices, 0), indices + dim, indices)


@converts("Gather")
def gather(node: Node, data: Value, indices: Value) -> Value:
    axis = axis_of(node, node.attr("axis", 0), len(data.shape))
    dims = dims_in(data)
    if dims is not None and not isinstance(data, np.ndarray) and isinstance(
            indices, np.ndarray) and indices.ndim <= 1 and all(
            -len(dims) <= i < len(dims) for i in indices.reshape(-1)):  # a shape value's
        picked = [dims[i] for i in indices.reshape(-1)]
        return shape_value(picked, lambda: sf.gather(data, indices, axis),
                           scalar=indices.ndim == 0)
    return sf.gather(data, indices, axis)


@converts("GatherElements")
def gather_elements(node: Node, data: Value, indices: Value) -> Value:
    axis = axis_of(node, node.attr("axis", 0), len(data.shape))
    static_shape(node, indices, "GatherElements")
    along = _positive(indices, dim_of(data, axis))
    return sf.gather_nd(data, element_coordinates(along, axis))


def _batch_coordinates(shape: Sequence[int], batch_dims: int) -> list[np.ndarray]:
    """Each batch coordinate of a `shape` of index tuples, as [*shape, 1] int64."""
    return [np.broadcast_to(np.arange(shape[b], dtype=np.int64).reshape(
        [-1 if a == b else 1 for a in range(len(shape))] + [1]), (*shape, 1))
        for b in range(batch_dims)]


@converts("GatherND")
def gather_nd(node: Node, data: Value, indices: Value) -> Value:
    """GatherND: the first `batch_dims` dims of data and indices correspond."""
    batch = node.attr("batch_dims", 0)
    shape = static_shape(node, indices, "GatherND")
    width = shape[-1]
    tuples = _within(indices, [dim_of(data, batch + j) for j in range(width)])
    if batch:
        tuples = sf.concat([*_batch_coordinates(shape[:-1], batch), tuples], -1)
    return sf.gather_nd(data, tuples)


def _loop_scatter(data: Value, tuples: Value, updates: Value,
                  combine: Callable[[Value, Value], Value]) -> Value:
    """`data` with `combine(data[t], u)` written at each index tuple t of `tuples`, one
    update after the other (repeated tuples combine in turn)."""
    shape = tuple(data.shape)
    width = tuples.shape[-1]
    rows, row = math.prod(shape[:width]), math.prod(shape[width:])
    strides = np.array([math.prod(shape[j + 1:width]) for j in range(width)], np.int64)
    flat = sf.reshape(sf.reduce_sum(tuples * strides, -1), [-1])
    values = sf.reshape(sf.convert_to_tensor(updates), [-1, row])
    table = sf.reshape(data, [rows, row])

    def body(i: Tensor, table: Tensor) -> Tensor:
        at = sf.gather(flat, i)
        current = sf.gather(table, at)
        return sf.dynamic_update_index(table, combine(current, sf.gather(values, i)), at)

    count = int(math.prod(tuples.shape[:-1]))
    return sf.reshape(sf.fori_loop(np.int64(0), np.int64(count), body, table), shape)


_COMBINE: dict[str, Callable[[Value, Value], Value]] = {
    "mul": sf.multiply,
    "max": sf.maximum,
    "min": sf.minimum,
}


def _scatter(node: Node, data: Value, tuples: Value, updates: Value) -> Value:
    reduction = node.attr("reduction", "none")
    if reduction == "none":
        return sf.tensor_scatter_nd_update(data, tuples, updates)
    if reduction == "add":
        return sf.tensor_scatter_nd_add(data, tuples, updates)
    if reduction not in _COMBINE:
        raise node.error(f"reduction {reduction!r} is not one of none, add, mul, max, min")
    static_shape(node, data, f"reduction {reduction!r}")
    static_shape(node, tuples, f"reduction {reduction!r} (of the indices)")
    return _loop_scatter(data, tuples, updates, _COMBINE[reduction])


@converts("ScatterElements", "Scatter")
def scatter_elements(node: Node, data: Value, indices: Value, updates: Value) -> Value:
    axis = axis_of(node, node.attr("axis", 0), len(data.shape))
    static_shape(node, indices, node.op_type)
    along = _positive(indices, dim_of(data, axis))
    return _scatter(node, data, element_coordinates(along, axis), updates)


@converts("ScatterND")
def scatter_nd(node: Node, data: Value, indices: Value, updates: Value) -> Value:
    width = indices.shape[-1]
    if width is None:
        raise node.error("the indices' last dim must be known at import")
    tuples = _within(indices, [dim_of(data, j) for j in range(width)])
    return _scatter(node, data, tuples, updates)


@converts("TensorScatter")
def tensor_scatter(node: Node, cache: Value, update: Value,
                   write_indices: Value | None = None) -> Value:
    """The cache with each batch entry's update written along `axis` from its write index
    (`circular`: wrapping around the axis)."""
    shape = static_shape(node, update, "TensorScatter")
    rank = len(shape)
    axis = axis_of(node, node.attr("axis", -2), rank)
    if axis == 0:
        raise node.error("axis 0 is the batch axis")
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise node.error(f"mode {mode!r} is not linear or circular")
    line = [1] * rank
    line[axis] = shape[axis]
    steps = np.arange(shape[axis], dtype=np.int64).reshape(line)
    starts = np.zeros(shape[0], np.int64) if write_indices is None else write_indices
    positions = sf.cast(sf.reshape(starts, [-1] + [1] * (rank - 1)), sf.int64) + steps
    if mode == "circular":
        positions = sf.mod(positions, dim_of(cache, axis))
    positions = sf.broadcast_to(positions, shape)
    return sf.tensor_scatter_nd_update(cache, element_coordinates(positions, axis), update)


@converts("OneHot")
def one_hot(node: Node, indices: Value, depth: Value, values: Value) -> Value:
    """values[1] where the index (negative: from the end of `depth`) is the position along
    the new axis, values[0] elsewhere."""
    size = int(node.const(depth, "the depth input").reshape(-1)[0])
    rank = len(indices.shape) + 1
    axis = axis_of(node, node.attr("axis", -1), rank)
    positions = np.arange(size, dtype=np.int64).reshape([-1 if a == axis else 1
                                                         for a in range(rank)])
    hits = sf.equal(sf.expand_dims(_positive(indices, np.int64(size)), axis), positions)
    return sf.where(hits, values[1], values[0])


@converts("NonZero")
def non_zero(node: Node, x: Value) -> Value:
    """The positions of the non-zero elements, one row per dim: [rank, count] int64."""
    if len(x.shape) == 0:
        raise node.error("a scalar input has no positions")
    return sf.transpose(sf.nonzero(x))


@converts("TopK")
def top_k(node: Node, x: Value, k: Value) -> list[Value]:
    """The k largest (or smallest) along `axis`, always sorted; of equal values the one
    at the lower index first."""
    count = ints(node, k, "the K input")[0]
    axis = axis_of(node, node.attr("axis", -1), len(x.shape))
    if count < 0 or (x.shape[axis] is not None and count > x.shape[axis]):
        raise node.error(f"K = {count} for axis {axis} of size {x.shape[axis]}")
    values, order = sort_p.bind(sf.convert_to_tensor(x), axis=axis,
                                descending=bool(node.attr("largest", 1)))[:2]
    key = tuple(slice(0, count) if a == axis else slice(None) for a in range(len(x.shape)))
    return [values[key], sf.cast(order[key], sf.int64)]


@converts("ArgMax", "ArgMin")
def arg_extremum(node: Node, data: Value) -> Value:
    axis = axis_of(node, node.attr("axis", 0), len(data.shape))
    find = sf.argmax if node.op_type == "ArgMax" else sf.argmin
    if node.attr("select_last_index", 0):
        index = dim_of(data, axis) - 1 - find(sf.reverse(data, axis), axis)
    else:
        index = find(data, axis)
    return sf.expand_dims(index, axis) if node.attr("keepdims", 1) else index


@converts("Unique")
def unique(node: Node, x: Value) -> list[Value]:
    """The distinct elements (or slices along `axis`), sorted or in order of first
    occurrence, with the first occurrence of each, the inverse indices and the counts.
    Each element is compared with each other one: fine for the small tensors Unique sees."""
    shape = static_shape(node, x, "Unique")
    axis = node.attr("axis", None)
    data = sf.convert_to_tensor(x)
    if axis is None:
        perm, rows = None, sf.reshape(data, [-1, 1])
    else:
        axis = axis_of(node, axis, len(shape))
        perm = [axis, *(a for a in range(len(shape)) if a != axis)]
        data = sf.transpose(data, perm)
        rows = sf.reshape(data, [shape[axis], -1])
    count = rows.shape[0]
    same = sf.reduce_all(sf.equal(sf.expand_dims(rows, 1), sf.expand_dims(rows, 0)), 2)
    first = sf.argmax(sf.cast(same, sf.int32), 1)  # where each row's value first occurs
    picked = sf.reshape(sf.nonzero(sf.equal(first, np.arange(count, dtype=np.int64))), [-1])
    if node.attr("sorted", 1):  # lexicographically: stable sorts from the last column
        for column in reversed(range(rows.shape[1])):
            keys = sf.gather(rows[:, column], picked)
            picked = sf.gather(picked, sf.argsort(keys))
    found = sf.equal(sf.expand_dims(first, 1), sf.expand_dims(picked, 0))
    inverse = sf.argmax(sf.cast(found, sf.int32), 1)
    counts = sf.reduce_sum(sf.cast(found, sf.int64), 0)
    values = sf.gather(rows, picked)
    if perm is None:
        values = sf.reshape(values, [-1])
    else:
        values = sf.reshape(values, [-1, *data.shape[1:]])
        values = sf.transpose(values, list(np.argsort(perm)))
    return [values, picked, inverse, counts]
