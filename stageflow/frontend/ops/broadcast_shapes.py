"""TensorFlow's shape arithmetic and checks: `sf.broadcast_static_shape`,
`sf.broadcast_dynamic_shape` and `sf.ensure_shape`."""

from __future__ import annotations

from typing import Any

from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.shape import concat, identity
from stageflow.frontend.ops.static_value import get_static_value
from stageflow.frontend.tensor import Tensor

__all__ = ["broadcast_dynamic_shape", "broadcast_static_shape", "ensure_shape"]


def _broadcast_dims(x: list, y: list, op: str) -> list:
    x, y = [1] * (len(y) - len(x)) + list(x), [1] * (len(x) - len(y)) + list(y)
    dims = []
    for a, b in zip(x, y, strict=True):
        if a == 1 or a == b:
            dims.append(b)
        elif b == 1:
            dims.append(a)
        elif a is None or b is None:
            dims.append(a if b is None else b)
        else:
            raise ValueError(f"{op}: incompatible shapes {x} and {y}{describe_location()}")
    return dims


def broadcast_static_shape(shape_x: Any, shape_y: Any) -> TensorShape:
    """The shape two shapes broadcast to (TensorFlow's ``tf.broadcast_static_shape``); a
    ValueError if they do not.

    >>> sf.broadcast_static_shape(sf.TensorShape([2, 1]), sf.TensorShape([3]))
    (2, 3)
    """
    x, y = TensorShape(shape_x), TensorShape(shape_y)
    return TensorShape(_broadcast_dims(x.as_list(), y.as_list(), "broadcast_static_shape"))


def broadcast_dynamic_shape(shape_x: Any, shape_y: Any) -> Tensor:
    """The shape two shapes broadcast to, as a 1-d int tensor (TensorFlow's
    ``tf.broadcast_dynamic_shape``: shapes as `sf.shape` gives them, also in a trace).

    >>> sf.broadcast_dynamic_shape([2, 1], [3])
    sf.Tensor([2, 3], shape=(2,), dtype=int32)
    """
    x, y = convert_to_tensor(shape_x), convert_to_tensor(shape_y)
    known_x, known_y = get_static_value(x), get_static_value(y)
    if known_x is not None and known_y is not None:
        dims = _broadcast_dims(known_x.tolist(), known_y.tolist(), "broadcast_dynamic_shape")
        return convert_to_tensor(dims, x.dtype)
    y = ew.cast(y, x.dtype)
    ones = convert_to_tensor([1] * abs(x.shape[0] - y.shape[0]), x.dtype)
    if x.shape[0] < y.shape[0]:
        x = concat([ones, x], 0)
    elif y.shape[0] < x.shape[0]:
        y = concat([ones, y], 0)
    return ew.where(ew.equal(x, 1), y, x)


def ensure_shape(x: Any, shape: Any) -> Tensor:
    """`x`, after checking that its shape is compatible with `shape` (None for any dim;
    TensorFlow's ``tf.ensure_shape``): eagerly a mismatch raises InvalidArgumentError, in a
    trace a mismatch of known dims raises ValueError.

    >>> sf.ensure_shape(sf.zeros((2, 3)), [None, 3]).shape
    (2, 3)
    """
    x = convert_to_tensor(x)
    wanted = TensorShape(shape)
    if not wanted.is_compatible_with(TensorShape(x.shape)):
        message = (f"ensure_shape: shape of tensor {list(x.shape)} is not compatible with "
                   f"expected shape {wanted.as_list()}{describe_location()}")
        raise (InvalidArgumentError if get_static_value(x) is not None else ValueError)(message)
    return identity(x)
