"""Public creation ops: zeros, ones, fill, eye, diag, range, linspace, ..._like.

They build on `iota` and broadcasting, so a traced `sf.zeros((n, 4))` is one broadcast of a
scalar constant rather than a large constant baked into the IR.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.errors import StagingError
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.dispatch import for_composites
from stageflow.frontend.ops.shape import broadcast_to, gather, reshape
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor
from stageflow.primitives import structural as st


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    if hasattr(shape, "__index__"):
        return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)


@for_composites
def fill(dims: int | Sequence[int], value: Any, dtype: Any = None) -> Tensor:
    """A tensor of shape `dims` holding `value` everywhere.

    Returns `dims` of `dtype` (by default, value's dtype: float32 for a Python float).

    >>> sf.fill([2, 3], 7)
    sf.Tensor([[7, 7, 7],
               [7, 7, 7]], shape=(2, 3), dtype=int32)
    >>> sf.fill(2, 0.5)
    sf.Tensor([0.5, 0.5], shape=(2,), dtype=float32)
    """
    return broadcast_to(convert_to_tensor(value, dtype), _shape(dims))


def zeros(shape: int | Sequence[int], dtype: Any = dtypes.float32) -> Tensor:
    """A tensor of zeros.

    Returns `shape` of `dtype` (float32 by default).

    >>> sf.zeros([2])
    sf.Tensor([0., 0.], shape=(2,), dtype=float32)
    >>> sf.zeros((2, 2), dtype=sf.int64).dtype
    dtype('int64')
    """
    return fill(shape, 0, dtype)


def ones(shape: int | Sequence[int], dtype: Any = dtypes.float32) -> Tensor:
    """A tensor of ones.

    Returns `shape` of `dtype` (float32 by default).

    >>> sf.ones((2, 3)).shape
    (2, 3)
    >>> sf.ones(2, dtype=sf.int32)
    sf.Tensor([1, 1], shape=(2,), dtype=int32)
    """
    return fill(shape, 1, dtype)


def _fill_like(x: Any, value: int, dtype: Any) -> Tensor:
    x = convert_to_tensor(x)
    dtype = x.dtype if dtype is None else dtypes.as_dtype(dtype)
    if None not in x.shape:
        return fill(x.shape, value, dtype)
    # Unknown dims (while tracing): take the shape from x through a broadcasting select.
    shaped = ew.cast(x, dtype)
    return ew.where(convert_to_tensor(True), convert_to_tensor(value, dtype), shaped)


def zeros_like(x: Any, dtype: Any = None) -> Tensor:
    """Zeros with the shape (and, by default, the dtype) of `x`.

    >>> sf.zeros_like([1.5, 2.5])
    sf.Tensor([0., 0.], shape=(2,), dtype=float32)
    """
    return _fill_like(x, 0, dtype)


def ones_like(x: Any, dtype: Any = None) -> Tensor:
    """Ones with the shape (and, by default, the dtype) of `x`.

    >>> sf.ones_like([[1, 2]])
    sf.Tensor([[1, 1]], shape=(1, 2), dtype=int32)
    """
    return _fill_like(x, 1, dtype)


def eye(num_rows: int, num_columns: int | None = None, batch_shape: Sequence[int] = (),
        dtype: Any = dtypes.float32) -> Tensor:
    """An identity matrix (or a batch of them) with ones on the main diagonal.

    Returns [*batch_shape, num_rows, num_columns] of `dtype` (float32 by default).

    >>> sf.eye(2)
    sf.Tensor([[1., 0.],
               [0., 1.]], shape=(2, 2), dtype=float32)
    >>> sf.linalg.eye(2, 3, dtype=sf.int32)
    sf.Tensor([[1, 0, 0],
               [0, 1, 0]], shape=(2, 3), dtype=int32)
    >>> sf.eye(2, batch_shape=[4]).shape
    (4, 2, 2)
    """
    dtype = dtypes.as_dtype(dtype)
    shape = (int(num_rows), int(num_rows if num_columns is None else num_columns))
    rows = st.iota_p.bind(shape=shape, dtype=dtypes.int32, dimension=0)
    cols = st.iota_p.bind(shape=shape, dtype=dtypes.int32, dimension=1)
    matrix = ew.cast(ew.equal(rows, cols), dtype)
    return broadcast_to(matrix, tuple(batch_shape) + shape) if batch_shape else matrix


def diag(v: Any) -> Tensor:
    """NumPy's `diag`: a vector becomes a diagonal matrix; a matrix gives its diagonal.

    v: [n] or [n, n] tensor of any dtype; returns [n, n] or [n] of its dtype.

    >>> sf.diag([1, 2])
    sf.Tensor([[1, 0],
               [0, 2]], shape=(2, 2), dtype=int32)
    >>> sf.diag([[1, 2], [3, 4]])
    sf.Tensor([1, 4], shape=(2,), dtype=int32)
    """
    v = convert_to_tensor(v)
    if v.ndim == 1:
        mask = ew.cast(eye(v.shape[0]), dtypes.bool_)
        return ew.where(mask, v, zeros_like(v))
    if v.ndim == 2:
        rows, cols = v.shape
        k = min(rows, cols)
        positions = st.iota_p.bind(shape=(k,), dtype=dtypes.int64, dimension=0)
        return gather(reshape(v, (-1,)), ew.multiply(positions, cols + 1))
    raise ValueError(f"diag: expected rank 1 or 2, got shape {v.shape}{describe_location()}")


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None) -> Tensor:  # noqa: A001
    """start, start + delta, ... up to but excluding `limit` (like Python's `range`).

    Returns a 1-D tensor of the arguments' dtype (int32 for Python ints, float32 for floats,
    a tensor argument's own) unless `dtype` says otherwise. Tensor arguments are scalars; in
    a staged function one must be known while tracing (``sf.shape(x)[1]`` of a known dim),
    as the result's length depends on it.

    >>> sf.range(4)
    sf.Tensor([0, 1, 2, 3], shape=(4,), dtype=int32)
    >>> sf.range(1.0, 2.0, 0.25)
    sf.Tensor([1.  , 1.25, 1.5 , 1.75], shape=(4,), dtype=float32)
    >>> sf.function(lambda x: sf.range(sf.shape(x)[1]))(sf.zeros((2, 3)))
    sf.Tensor([0, 1, 2], shape=(3,), dtype=int32)
    """
    if limit is None:
        start, limit = 0, start
    tensors = [v for v in (start, limit, delta) if isinstance(v, Tensor)]
    start, limit, delta = (_range_scalar(v, name) for v, name in
                           ((start, "start"), (limit, "limit"), (delta, "delta")))
    values = (start, limit, delta)
    if dtype is None and tensors:
        dtype = np.result_type(*(t.dtype for t in tensors))
    if dtype is None:
        dtype = dtypes.float32 if any(isinstance(v, float) for v in values) else dtypes.int32
    dtype = dtypes.as_dtype(dtype)
    if delta == 0:
        raise ValueError(f"range: delta must not be zero{describe_location()}")
    count = max(0, math.ceil((limit - start) / delta))
    steps = st.iota_p.bind(shape=(count,), dtype=dtype, dimension=0)
    scaled = ew.multiply(steps, convert_to_tensor(delta, dtype))
    return ew.add(scaled, convert_to_tensor(start, dtype))


def _range_scalar(value: Any, name: str) -> Any:
    """A `range` argument as a Python number: a tensor's value (a traced one's where
    constants alone give it while tracing)."""
    if not isinstance(value, Tensor):
        return value
    if value.ndim != 0:
        raise ValueError(f"range: {name} must be a scalar, got shape {value.shape}"
                         f"{describe_location()}")
    if isinstance(value, SymbolicTensor):
        known = value._trace.static_value(value)
        if known is None:  # a staging limit: `Dataset.map` then runs its function eagerly
            raise StagingError(
                f"range: {name} is a traced tensor whose value is known only when the "
                "function runs, and the result's length depends on it; give a Python "
                "number or a dim the trace knows (x.shape[i], sf.shape(x)[i] of a known "
                f"dim){describe_location()}")
        return np.asarray(known).item()
    return np.asarray(value._value).item()


def linspace(start: float, stop: float, num: int, dtype: Any = dtypes.float32) -> Tensor:
    """`num` evenly spaced values from `start` to `stop`, both included.

    Returns [num] of `dtype` (float32 by default).

    >>> sf.linspace(0.0, 1.0, 5)
    sf.Tensor([0.  , 0.25, 0.5 , 0.75, 1.  ], shape=(5,), dtype=float32)
    """
    dtype = dtypes.as_dtype(dtype)
    num = int(num)
    if num < 1:
        raise ValueError(f"linspace: num must be at least 1, got {num}{describe_location()}")
    # Integer results are computed in float64 and truncated, as NumPy does.
    compute = dtype if dtypes.is_floating(dtype) else dtypes.float64
    steps = st.iota_p.bind(shape=(num,), dtype=compute, dimension=0)
    step = (stop - start) / (num - 1) if num > 1 else 0.0
    scaled = ew.multiply(steps, convert_to_tensor(step, compute))
    values = ew.add(scaled, convert_to_tensor(start, compute))
    if num > 1:
        is_last = ew.equal(steps, convert_to_tensor(num - 1, compute))
        values = ew.where(is_last, convert_to_tensor(stop, compute), values)
    return ew.cast(values, dtype)
