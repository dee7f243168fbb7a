"""`sf.sparse` (TensorFlow's ``tf.sparse``): ops on `sf.SparseTensor`, written with the op
functions so that they run eagerly and staged alike and differentiate with respect to the
values and dense operands.

Entries are found by their row-major linear position (``sum(index * strides)``): sorting
those puts entries in TensorFlow's canonical order (`reorder`), and equal ones are the
same entry (`add` sums them). A dense result (`to_dense`, `reduce_sum` over some axes,
`sparse_dense_matmul`) needs the dense shape when traced: `SparseTensor.shape`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stageflow.core.errors import InvalidArgumentError
from stageflow.core.shapes import normalize_axes
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import fill, ones_like, zeros_like
from stageflow.frontend.ops.math_ops import cumsum, reduce_all
from stageflow.frontend.ops.nd_indexing import (
    gather_nd,
    gather_rows,
    scatter_nd,
    tensor_scatter_nd_add,
    tensor_scatter_nd_update,
    unsorted_segment_sum,
    with_default_row,
)
from stageflow.frontend.ops.reductions import reduce_max as dense_reduce_max
from stageflow.frontend.ops.reductions import reduce_sum as dense_reduce_sum
from stageflow.frontend.ops.selection import boolean_mask, nonzero, unique
from stageflow.frontend.ops.shape import concat as dense_concat
from stageflow.frontend.ops.shape import expand_dims, gather, reshape, stack, transpose
from stageflow.frontend.ops.shape_of import shape as shape_of
from stageflow.frontend.ops.sorting import argsort
from stageflow.frontend.sparse_tensor import INDEX, SparseTensor
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor

__all__ = ["add", "concat", "from_dense", "map_values", "reduce_max", "reduce_sum", "reorder",
           "reshape", "slice", "sparse_dense_matmul", "to_dense", "transpose"]

_reshape, _transpose = reshape, transpose


def _sparse(value: Any, op: str) -> SparseTensor:
    if not isinstance(value, SparseTensor):
        raise TypeError(f"{op}: expected an sf.SparseTensor, got "
                        f"{type(value).__name__}{describe_location()}")
    return value


def _known_shape(sp: SparseTensor, op: str) -> tuple[int, ...]:
    if not sp.shape.is_fully_defined():
        raise ValueError(f"{op}: the dense shape must be known when the function is "
                         f"traced, got {sp.shape}{describe_location()}")
    return tuple(sp.shape)


def _linear(indices: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The row-major position of each index row."""
    strides = np.cumprod((*shape[1:], 1)[::-1])[::-1].astype(np.int64)
    return dense_reduce_sum(indices * strides, axis=1)


def _unravel(positions: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Index rows [count, rank] of row-major positions."""
    strides = np.cumprod((*shape[1:], 1)[::-1])[::-1].astype(np.int64)
    columns = [ew.floordiv(positions, np.int64(s)) % np.int64(d) for s, d in
               zip(strides, shape, strict=True)]
    return stack(columns, axis=1)


def _same_shape(a: SparseTensor, b: Any, op: str) -> None:
    shape_b = tuple(b.shape)
    if len(a.shape) != len(shape_b) or any(x is not None and y is not None and x != y
                                           for x, y in zip(a.shape, shape_b, strict=True)):
        raise InvalidArgumentError(f"{op}: operand shapes do not match: {a.shape} "
                                   f"and {shape_b}{describe_location()}")


# -- conversions ------------------------------------------------------------------------------


def to_dense(sp_input: SparseTensor, default_value: Any = None, validate_indices: bool = True,
             name: str | None = None) -> Tensor:
    """The dense tensor: the entries at their positions, `default_value` (0, or ``b""``)
    elsewhere.

    >>> sf.sparse.to_dense(sf.SparseTensor([[0, 1], [1, 0]], [5, 7], [2, 3]))
    sf.Tensor([[0, 5, 0],
               [7, 0, 0]], shape=(2, 3), dtype=int32)
    """
    sp = _sparse(sp_input, "sf.sparse.to_dense")
    shape = _known_shape(sp, "sf.sparse.to_dense")
    if default_value is None:
        default_value = b"" if sp.dtype.kind == "O" else 0
    if validate_indices and not isinstance(sp.indices, SymbolicTensor):
        positions = np.asarray(_linear(sp.indices, shape)._value)
        if np.unique(positions).size != positions.size:
            raise InvalidArgumentError(f"sf.sparse.to_dense: indices repeat an entry; use "
                                       f"sf.sparse.add to sum duplicates{describe_location()}")
    # Each position's entry number (the count of entries where none is stored), then a
    # gather from the entries with the default after them: string tensors gather too.
    entries = cumsum(ones_like(sp.values, INDEX)) - 1
    count = ew.cast(shape_of(sp.values)[0], INDEX)
    slots = tensor_scatter_nd_update(fill(shape, count), sp.indices, entries)
    return gather_rows(with_default_row(sp.values, default_value), slots)


def from_dense(tensor: Any, name: str | None = None) -> SparseTensor:
    """The non-zero entries of a dense tensor, in row-major order.

    >>> sf.sparse.from_dense([[1, 0, 0, 8], [0, 0, 0, 0], [0, 0, 3, 0]]).indices
    sf.Tensor([[0, 0],
               [0, 3],
               [2, 2]], shape=(3, 2), dtype=int64)
    """
    dense = convert_to_tensor(tensor)
    zero = b"" if dense.dtype.kind == "O" else 0
    indices = nonzero(ew.not_equal(dense, convert_to_tensor(zero, dense.dtype)))
    shape = tuple(dense.shape)
    if None in shape:
        raise ValueError(f"sf.sparse.from_dense: the shape must be known when the function is "
                         f"traced, got {dense.shape}{describe_location()}")
    return SparseTensor(indices, gather_nd(dense, indices), list(shape))


def reorder(sp_input: SparseTensor, name: str | None = None) -> SparseTensor:
    """The same entries in row-major (canonical) order.

    >>> sf.sparse.reorder(sf.SparseTensor([[1, 0], [0, 2]], [1, 2], [2, 3])).values
    sf.Tensor([2, 1], shape=(2,), dtype=int32)
    """
    sp = _sparse(sp_input, "sf.sparse.reorder")
    order = argsort(_linear(sp.indices, _known_shape(sp, "sf.sparse.reorder")))
    return SparseTensor._make(gather(sp.indices, order), gather_rows(sp.values, order),
                              sp.dense_shape, tuple(sp.shape))


# -- arithmetic -------------------------------------------------------------------------------


def add(a: Any, b: Any, threshold: Any = 0) -> Any:
    """`a + b`: two sparse tensors give a sparse one (entries at the same position summed,
    in row-major order; sums smaller in magnitude than `threshold` dropped), a sparse and a
    dense one give a dense tensor.

    >>> x = sf.SparseTensor([[0, 2], [3, 4]], [31, 2], [4, 10])
    >>> y = sf.SparseTensor([[0, 2], [3, 0]], [56, 38], [4, 10])
    >>> sf.sparse.add(x, y).values
    sf.Tensor([87, 38,  2], shape=(3,), dtype=int32)
    """
    if not isinstance(a, SparseTensor):
        a, b = b, a
    a = _sparse(a, "sf.sparse.add")
    if not isinstance(b, SparseTensor):
        dense = convert_to_tensor(b, a.dtype) if not isinstance(b, Tensor) else b
        _same_shape(a, dense, "sf.sparse.add")
        return tensor_scatter_nd_add(dense, a.indices, a.values)
    _same_shape(a, b, "sf.sparse.add")
    if a.dtype != b.dtype:
        raise TypeError(f"sf.sparse.add: operand dtypes differ: {a.dtype.name} and "
                        f"{b.dtype.name}{describe_location()}")
    shape = _known_shape(a, "sf.sparse.add")
    positions = _linear(dense_concat([a.indices, b.indices], 0), shape)
    values = dense_concat([a.values, b.values], 0)
    order = argsort(positions)
    positions, values = gather(positions, order), gather_rows(values, order)
    distinct, slot = unique(positions, out_idx=INDEX)
    sums = tensor_scatter_nd_add(zeros_like(distinct, a.dtype), expand_dims(slot, 1), values)
    indices = _unravel(distinct, shape)
    if threshold:
        keep = ew.greater_equal(ew.abs(sums), convert_to_tensor(threshold, a.dtype))
        indices, sums = boolean_mask(indices, keep), boolean_mask(sums, keep)
    return SparseTensor._make(indices, sums, a.dense_shape, shape)


def sparse_dense_matmul(sp_a: Any, b: Any, adjoint_a: bool = False, adjoint_b: bool = False,
                        name: str | None = None) -> Tensor:
    """The matrix product of a 2-D sparse and a dense matrix (either order), the entries'
    products summed into their rows: ``op(a) @ op(b)``, `adjoint_*` transposing.

    >>> a = sf.SparseTensor([[0, 1], [1, 0], [1, 1]], [13, 15, 17], [2, 2])
    >>> sf.sparse.sparse_dense_matmul(a, [[4], [6]])
    sf.Tensor([[ 78],
               [162]], shape=(2, 1), dtype=int32)
    """
    if not isinstance(sp_a, SparseTensor):
        if not isinstance(b, SparseTensor):
            raise TypeError(f"sf.sparse.sparse_dense_matmul: one operand must be an "
                            f"sf.SparseTensor{describe_location()}")
        flipped = sparse_dense_matmul(b, convert_to_tensor(sp_a, b.dtype),
                                      adjoint_a=not adjoint_b, adjoint_b=not adjoint_a)
        return _transpose(flipped)
    op = "sf.sparse.sparse_dense_matmul"
    sp = _sparse(sp_a, op)
    dense = convert_to_tensor(b, sp.dtype) if not isinstance(b, Tensor) else b
    if len(sp.shape) != 2 or dense.ndim != 2:
        raise ValueError(f"{op}: expected 2-D operands, got shapes {sp.shape} and "
                         f"{dense.shape}{describe_location()}")
    if dense.dtype != sp.dtype:
        raise TypeError(f"{op}: operand dtypes differ: {sp.dtype.name} and "
                        f"{dense.dtype.name}{describe_location()}")
    rows, columns = (1, 0) if adjoint_a else (0, 1)
    if adjoint_b:
        dense = _transpose(dense)
    outer, inner = sp.shape[rows], sp.shape[columns]
    if inner is not None and dense.shape[0] is not None and inner != dense.shape[0]:
        raise ValueError(f"{op}: inner dims differ: {inner} and {dense.shape[0]} "
                         f"(shapes {sp.shape} and {dense.shape}){describe_location()}")
    if outer is None:
        raise ValueError(f"{op}: the sparse operand's rows must be known when the "
                         f"function is traced, got {sp.shape}{describe_location()}")
    products = expand_dims(sp.values, 1) * gather_rows(dense, sp.indices[:, columns])
    return unsorted_segment_sum(products, sp.indices[:, rows], outer)


def map_values(op: Callable[..., Any], *args: Any, **kwargs: Any) -> SparseTensor:
    """`op` applied to the values of the sparse tensors among the arguments (which must
    have the same indices), keeping their positions.

    >>> st = sf.sparse.from_dense([1, 0, 3])
    >>> sf.sparse.to_dense(sf.sparse.map_values(sf.add, st, 5))
    sf.Tensor([6, 0, 8], shape=(3,), dtype=int32)
    """
    sparse = [a for a in (*args, *kwargs.values()) if isinstance(a, SparseTensor)]
    if not sparse:
        raise ValueError(f"sf.sparse.map_values: no SparseTensor among the arguments"
                         f"{describe_location()}")
    first = sparse[0]
    for other in sparse[1:]:
        if other.indices is first.indices:
            continue
        if isinstance(other.indices, SymbolicTensor) or isinstance(first.indices,
                                                                   SymbolicTensor):
            raise ValueError(f"sf.sparse.map_values: the sparse operands must share their "
                             f"indices tensor when traced{describe_location()}")
        if not np.array_equal(other.indices._value, first.indices._value):
            raise InvalidArgumentError(f"sf.sparse.map_values: the sparse operands have "
                                       f"different indices{describe_location()}")

    def values(a: Any) -> Any:
        return a.values if isinstance(a, SparseTensor) else a

    result = op(*(values(a) for a in args), **{k: values(v) for k, v in kwargs.items()})
    return first.with_values(result)


# -- reductions -------------------------------------------------------------------------------


def _axes(sp: SparseTensor, axis: Any, op: str) -> tuple[int, ...]:
    if axis is not None and not isinstance(axis, list | tuple):
        axis = (axis,)
    try:
        return normalize_axes(None if axis is None else tuple(operator.index(a) for a in axis),
                              len(sp.shape))
    except ValueError as error:
        raise ValueError(f"{op}: {error} (shape {sp.shape}){describe_location()}"
                         ) from None


def reduce_sum(sp_input: SparseTensor, axis: Any = None, keepdims: bool = False,
               output_is_sparse: bool = False, name: str | None = None) -> Tensor:
    """The sum of the entries over `axis` (all of them when None), a dense tensor.

    >>> st = sf.SparseTensor([[0, 0], [0, 2], [1, 1]], [1.0, 2.0, 3.0], [2, 3])
    >>> sf.sparse.reduce_sum(st, axis=1)
    sf.Tensor([3., 3.], shape=(2,), dtype=float32)
    """
    sp = _sparse(sp_input, "sf.sparse.reduce_sum")
    if output_is_sparse:
        raise NotImplementedError(f"sf.sparse.reduce_sum: output_is_sparse=True; take "
                                  f"sf.sparse.from_dense of the result{describe_location()}")
    axes = _axes(sp, axis, "sf.sparse.reduce_sum")
    shape = _known_shape(sp, "sf.sparse.reduce_sum")
    kept = [d for d in range(len(shape)) if d not in axes]
    if not kept:
        total = dense_reduce_sum(sp.values)
        return reshape(total, (1,) * len(shape)) if keepdims else total
    result = scatter_nd(gather(sp.indices, kept, axis=1), sp.values, [shape[d] for d in kept])
    if keepdims:
        result = reshape(result, [1 if d in axes else shape[d] for d in range(len(shape))])
    return result


def reduce_max(sp_input: SparseTensor, axis: Any = None, keepdims: bool = False,
               output_is_sparse: bool = False, name: str | None = None) -> Tensor:
    """The largest stored entry (positions not stored do not count, as in TensorFlow);
    over all axes only.

    >>> sf.sparse.reduce_max(sf.sparse.from_dense([-5, 0, -3]))
    sf.Tensor(-3, shape=(), dtype=int32)
    """
    sp = _sparse(sp_input, "sf.sparse.reduce_max")
    if axis is not None or output_is_sparse:
        raise NotImplementedError(f"sf.sparse.reduce_max: over all axes only (axis=None)"
                                  f"{describe_location()}")
    result = dense_reduce_max(sp.values)
    return reshape(result, (1,) * len(sp.shape)) if keepdims else result


# -- shape -----------------------------------------------------------------------------------


def reshape(sp_input: SparseTensor, shape: Sequence[int], name: str | None = None
            ) -> SparseTensor:
    """The same entries in a dense tensor of another shape of as many elements (one dim
    may be -1), row-major as `sf.reshape`.

    >>> sf.sparse.reshape(sf.SparseTensor([[1, 2]], [7], [2, 3]), [3, 2]).indices
    sf.Tensor([[2, 1]], shape=(1, 2), dtype=int64)
    """
    if isinstance(sp_input, Tensor):
        return _reshape(sp_input, shape)
    sp = _sparse(sp_input, "sf.sparse.reshape")
    old = _known_shape(sp, "sf.sparse.reshape")
    new = [operator.index(d) for d in shape]
    size = int(np.prod(old))
    if new.count(-1) > 1:
        raise ValueError(f"sf.sparse.reshape: at most one dim may be -1, got {new}"
                         f"{describe_location()}")
    if -1 in new:
        rest = int(np.prod([d for d in new if d != -1]))
        new[new.index(-1)] = size // rest if rest else 0
    if int(np.prod(new)) != size:
        raise ValueError(f"sf.sparse.reshape: cannot reshape a SparseTensor of shape "
                         f"{list(old)} ({size} elements) to {list(shape)}{describe_location()}")
    indices = _unravel(_linear(sp.indices, old), tuple(new))
    return SparseTensor._make(indices, sp.values, convert_to_tensor(np.asarray(new, np.int64)),
                              tuple(new))


def transpose(sp_input: SparseTensor, perm: Sequence[int] | None = None,
              name: str | None = None) -> SparseTensor:
    """The dims permuted (reversed by default), entries in row-major order again.

    >>> sf.sparse.transpose(sf.SparseTensor([[0, 3], [2, 4]], [15, 25], [3, 10])).shape
    (10, 3)
    """
    sp = _sparse(sp_input, "sf.sparse.transpose")
    rank = len(sp.shape)
    perm = list(range(rank))[::-1] if perm is None else [operator.index(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise ValueError(f"sf.sparse.transpose: perm {perm} is not a permutation of the "
                         f"{rank} dims{describe_location()}")
    shape = tuple(sp.shape[p] for p in perm)
    moved = SparseTensor._make(gather(sp.indices, perm, axis=1), sp.values,
                               gather(sp.dense_shape, perm), shape)
    return reorder(moved)


def concat(axis: int, sp_inputs: Sequence[SparseTensor], expand_nonconcat_dims: bool = False,
           name: str | None = None) -> SparseTensor:
    """Sparse tensors joined along `axis` (their other dims equal), row-major.

    >>> a = sf.SparseTensor([[0, 0]], [1], [2, 2])
    >>> sf.sparse.concat(1, [a, a]).indices
    sf.Tensor([[0, 0],
               [0, 2]], shape=(2, 2), dtype=int64)
    """
    inputs = [_sparse(s, "sf.sparse.concat") for s in sp_inputs]
    if not inputs:
        raise ValueError(f"sf.sparse.concat: no inputs{describe_location()}")
    shapes = [_known_shape(s, "sf.sparse.concat") for s in inputs]
    rank = len(shapes[0])
    axis = normalize_axes((operator.index(axis),), rank)[0]
    if expand_nonconcat_dims:
        raise NotImplementedError(f"sf.sparse.concat: expand_nonconcat_dims=True"
                                  f"{describe_location()}")
    others = {tuple(s[:axis] + s[axis + 1:]) for s in shapes}
    if len(others) != 1 or any(len(s) != rank for s in shapes):
        raise ValueError(f"sf.sparse.concat: the shapes {shapes} differ beside axis {axis}"
                         f"{describe_location()}")
    offset, indices = 0, []
    for sp, shape in zip(inputs, shapes, strict=True):
        shift = np.zeros(rank, np.int64)
        shift[axis] = offset
        indices.append(sp.indices + shift)
        offset += shape[axis]
    shape = tuple(offset if d == axis else shapes[0][d] for d in range(rank))
    joined = SparseTensor._make(dense_concat(indices, 0),
                                dense_concat([s.values for s in inputs], 0),
                                convert_to_tensor(np.asarray(shape, np.int64)), shape)
    return reorder(joined)


def slice(sp_input: SparseTensor, start: Sequence[int], size: Sequence[int],  # noqa: A001
          name: str | None = None) -> SparseTensor:
    """The entries inside the box from `start` of `size` (cut at the dense shape), their
    indices relative to `start`.

    >>> sf.sparse.slice(sf.SparseTensor([[0, 1], [2, 3]], [1, 2], [3, 4]), [1, 1], [2, 3]).indices
    sf.Tensor([[1, 2]], shape=(1, 2), dtype=int64)
    """
    sp = _sparse(sp_input, "sf.sparse.slice")
    shape = _known_shape(sp, "sf.sparse.slice")
    start = np.asarray([operator.index(s) for s in start], np.int64)
    stop = np.minimum(start + np.asarray([operator.index(s) for s in size], np.int64),
                      np.asarray(shape, np.int64))
    inside = reduce_all(ew.logical_and(ew.greater_equal(sp.indices, start),
                                       ew.less(sp.indices, stop)), axis=1)
    new_shape = tuple(int(d) for d in np.maximum(stop - start, 0))
    return SparseTensor._make(boolean_mask(sp.indices, inside) - start,
                              boolean_mask(sp.values, inside),
                              convert_to_tensor(np.asarray(new_shape, np.int64)), new_shape)

