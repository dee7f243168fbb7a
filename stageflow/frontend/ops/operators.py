"""Python operators on tensors (`+ - * / // % ** @`, comparisons, indexing).

Operators are the public op functions themselves, installed on `Tensor` (and on any class
that converts to a tensor, such as `sf.Variable`), so `x * y` costs what `sf.multiply(x, y)`
costs.
"""

from __future__ import annotations

from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import indexing, linalg
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


install(Tensor)
install(Variable)
