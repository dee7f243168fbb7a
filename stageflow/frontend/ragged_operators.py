"""Python's arithmetic and comparison operators on `sf.RaggedTensor`, elementwise on the
values, as `ops.operators` installs them on `Tensor`: the other operand is a ragged tensor
of the same rows, a scalar, or a dense tensor that broadcasts (over the inner dims, or
one value per row: shape [rows, 1, ...]), as TensorFlow's ragged broadcasting allows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.debugging import assert_equal
from stageflow.frontend.ops.dispatch import register
from stageflow.frontend.ops.nd_indexing import gather_rows
from stageflow.frontend.ops.shape import reshape
from stageflow.frontend.ragged_tensor import RaggedTensor
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor

__all__ = ["check_same_rows", "elementwise"]


def elementwise(op: Callable[[Any, Any], Any], x: Any, y: Any) -> Any:
    """`op` of a ragged tensor and a ragged tensor of the same rows, a scalar, or a dense
    tensor that broadcasts (over the inner dims, or one row each: shape [rows, 1, ...])."""
    ragged = x if isinstance(x, RaggedTensor) else y
    other = y if ragged is x else x
    name = getattr(op, "__name__", "op")
    if isinstance(other, RaggedTensor):
        check_same_rows(ragged, other, name)
        a, b = (ragged.flat_values, other.flat_values)
        return ragged.with_flat_values(op(a, b) if ragged is x else op(b, a))
    dense = convert_to_tensor(other, ragged.dtype) if not isinstance(other, Tensor) else other
    flat = ragged.flat_values
    if dense.ndim <= flat.ndim - 1:
        operand = dense
    else:
        operand = _per_value(ragged, dense, name)
    return ragged.with_flat_values(op(flat, operand) if ragged is x else op(operand, flat))


def _per_value(ragged: RaggedTensor, dense: Tensor, op: str) -> Tensor:
    """A dense operand broadcast against a ragged tensor, as one row per value."""
    rank = ragged.ndim
    shape = (1,) * (rank - dense.ndim) + tuple(dense.shape)
    dense = reshape(dense, shape) if dense.ndim < rank else dense
    if ragged.ragged_rank != 1 or any(d not in (1,) for d in shape[1:2]):
        raise InvalidArgumentError(f"sf.{op}: a dense operand of shape {list(dense.shape)} "
                                   f"does not broadcast against a ragged tensor of shape "
                                   f"{ragged.shape} (its ragged dims must be 1)"
                                   f"{describe_location()}")
    rows = dense[:, 0]
    if shape[0] == 1:
        return rows[0]
    return gather_rows(rows, ragged.value_rowids())


def check_same_rows(x: RaggedTensor, y: RaggedTensor, op: str) -> None:
    """Refuse ragged operands whose rows differ (TensorFlow's InvalidArgumentError): when
    tracing already knows (ranks, row counts), else eagerly, else when the function runs."""
    if x.ragged_rank != y.ragged_rank:
        raise ValueError(f"sf.{op}: ragged ranks differ ({x.ragged_rank} and {y.ragged_rank})"
                         f"{describe_location()}")
    for a, b in zip(x.nested_row_splits, y.nested_row_splits, strict=True):
        if a is b:
            continue
        if a.shape[0] is not None and b.shape[0] is not None and a.shape[0] != b.shape[0]:
            raise InvalidArgumentError(f"sf.{op}: the ragged operands have different row "
                                       f"splits (shapes {list(a.shape)} and {list(b.shape)})"
                                       f"{describe_location()}")
        if not isinstance(a, SymbolicTensor) and not isinstance(b, SymbolicTensor):
            if not np.array_equal(a._value, b._value):
                raise InvalidArgumentError(f"sf.{op}: the ragged operands have different row "
                                           f"splits: {a._value} and {b._value}"
                                           f"{describe_location()}")
            continue
        assert_equal(a, b, f"sf.{op}: the ragged operands have different row splits")


def _binary(op: Callable[[Any, Any], Any], reflected: bool = False) -> Callable:
    def method(self: RaggedTensor, other: Any) -> Any:
        return elementwise(op, other, self) if reflected else elementwise(op, self, other)

    method.__name__ = f"{op.__name__} of a ragged tensor"
    return method


for _name, _op in {"__add__": ew.add, "__sub__": ew.subtract, "__mul__": ew.multiply,
                   "__truediv__": ew.divide, "__floordiv__": ew.floordiv, "__mod__": ew.mod,
                   "__pow__": ew.pow}.items():
    setattr(RaggedTensor, _name, _binary(_op))
    setattr(RaggedTensor, _name.replace("__", "__r", 1), _binary(_op, reflected=True))
for _name, _op in {"lt": ew.less, "le": ew.less_equal, "gt": ew.greater,
                   "ge": ew.greater_equal, "and": ew.logical_and, "or": ew.logical_or}.items():
    setattr(RaggedTensor, f"__{_name}__", _binary(_op))


def _unary(op: Callable[[Any], Any]) -> Callable:
    def method(self: RaggedTensor) -> RaggedTensor:
        return self.with_flat_values(op(self.flat_values))

    method.__name__ = f"{op.__name__} of a ragged tensor"
    return method


for _op in (ew.add, ew.subtract, ew.multiply, ew.divide, ew.floordiv, ew.mod, ew.pow,
            ew.maximum, ew.minimum, ew.less, ew.less_equal, ew.greater, ew.greater_equal,
            ew.logical_and, ew.logical_or):  # sf.add(ragged, 3)
    register(_op, RaggedTensor, functools.partial(elementwise, _op))

RaggedTensor.__neg__ = _unary(ew.negative)
RaggedTensor.__abs__ = _unary(ew.abs)
