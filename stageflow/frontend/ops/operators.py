"""Python operators on tensors (`+ - * / // % ** @`, comparisons, indexing) and NumPy's
methods (`.T`, `.reshape`, `.astype`, `.sum`, `.mean`, `.max`, `.item()`, ...).

Operators are the public op functions themselves, installed on `Tensor` (and on any class
that converts to a tensor, such as `sf.Variable`), so `x * y` costs what `sf.multiply(x, y)`
costs; methods call the op functions with NumPy's argument names.
"""

from __future__ import annotations

from typing import Any

from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import indexing, linalg, reductions, shape
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable


def _reflected(op):
    def reflected(self, other):
        return op(other, self)

    reflected.__name__ = f"r{op.__name__}"
    return reflected


def install(cls: type) -> None:
    """Give `cls` the arithmetic, comparison and indexing operators of a tensor."""

    pairs = {
        "add": ew.add,
        "sub": ew.subtract,
        "mul": ew.multiply,
        "truediv": ew.divide,
        "floordiv": ew.floordiv,
        "mod": ew.mod,
        "pow": ew.pow,
        "matmul": linalg.matmul,
        "and": ew.logical_and,
        "or": ew.logical_or,
    }
    for name, op in pairs.items():
        setattr(cls, f"__{name}__", op)
        setattr(cls, f"__r{name}__", _reflected(op))
    cls.__lt__ = ew.less
    cls.__le__ = ew.less_equal
    cls.__gt__ = ew.greater
    cls.__ge__ = ew.greater_equal
    cls.__eq__ = ew.equal
    cls.__ne__ = ew.not_equal
    cls.__neg__ = ew.negative
    cls.__abs__ = ew.abs
    cls.__invert__ = ew.logical_not
    cls.__pos__ = convert_to_tensor
    cls.__getitem__ = indexing.getitem
    for name, method in METHODS.items():
        setattr(cls, name, method)


def _reduction(op: Any) -> Any:
    def method(self: Any, axis: Any = None, dtype: Any = None, out: Any = None,
               keepdims: bool = False) -> Any:
        if out is not None:  # what `np.sum(tensor, out=...)` would ask of the method
            raise TypeError(f"{op.__name__}: tensors are immutable; out= is not supported")
        result = op(self, axis=axis, keepdims=keepdims)
        return result if dtype is None else ew.cast(result, dtype)

    method.__doc__ = (f"``{op.__name__}(self, axis, keepdims)`` (NumPy's method; "
                      "``np.sum(tensor)`` calls it too, with dtype and out).")
    return method


def _reshape(self: Any, *shape: Any) -> Any:
    """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``, -1 for one inferred dim."""
    return shape_module.reshape(self, shape[0] if len(shape) == 1 and isinstance(
        shape[0], tuple | list) else shape)


def _transpose(self: Any, *perm: Any) -> Any:
    """``x.transpose()`` reverses the dims; ``x.transpose(1, 0, 2)`` permutes them."""
    if len(perm) == 1 and isinstance(perm[0], tuple | list):
        perm = tuple(perm[0])
    return shape_module.transpose(self, perm or None)


def _item(self: Any) -> Any:
    """The one element as a Python number (eager tensors; a traced one has no value)."""
    return convert_to_tensor(self)._scalar("item")


def _tolist(self: Any) -> Any:
    """The elements as nested Python lists (eager tensors)."""
    return convert_to_tensor(self).numpy().tolist()


shape_module = shape
METHODS: dict[str, Any] = {
    "T": property(lambda self: shape.transpose(self)),
    "reshape": _reshape,
    "transpose": _transpose,
    "flatten": lambda self: shape.reshape(self, (-1,)),
    "squeeze": lambda self, axis=None: shape.squeeze(self, axis),
    "astype": lambda self, dtype: ew.cast(self, dtype),
    "sum": _reduction(reductions.reduce_sum),
    "prod": _reduction(reductions.reduce_prod),
    "mean": _reduction(reductions.reduce_mean),
    "max": _reduction(reductions.reduce_max),
    "min": _reduction(reductions.reduce_min),
    "argmax": lambda self, axis=None: reductions.argmax(self, axis),
    "argmin": lambda self, axis=None: reductions.argmin(self, axis),
    "abs": lambda self: ew.abs(self),
    "clip": lambda self, min=None, max=None: ew.clip_by_value(self, min, max),  # noqa: A002
    "item": _item,
    "tolist": _tolist,
}


install(Tensor)
install(Variable)
