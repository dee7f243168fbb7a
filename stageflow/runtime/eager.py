"""Eager execution: run a primitive's NumPy kernel at once, one op at a time.

No IR object is built here. The shape rule runs first so that bad input fails with the
op's own message (naming the shapes and the user's line) instead of a NumPy error.
"""

from __future__ import annotations

from typing import Any

from stageflow.frontend import context
from stageflow.frontend.primitives.base import Primitive, ShapedType
from stageflow.frontend.source import describe_location
from stageflow.frontend.tensor import Tensor, wrap


class EagerTrace:
    """The bottom of every thread's trace stack: concrete tensors in, concrete tensors out."""

    def process(self, primitive: Primitive, args: tuple, params: dict[str, Any]) -> Any:
        values = []
        for arg in args:
            if type(arg) is not Tensor:
                raise TypeError(
                    f"{primitive.name}: expected a tensor, got {type(arg).__name__}"
                    f"{describe_location()}"
                )
            values.append(arg._value)
        primitive.abstract_eval(*(ShapedType(v.shape, v.dtype) for v in values), **params)
        try:
            result = primitive.kernel(*values, **params)
        except (ValueError, IndexError, TypeError, OverflowError) as error:
            raise type(error)(f"{primitive.name}: {error}{describe_location()}") from None
        if primitive.multiple_results:
            return tuple(wrap(r) for r in result)
        return wrap(result)

    def constant(self, array: Any) -> Tensor:
        return wrap(array)

    def read_variable(self, variable: Any) -> Tensor:
        return wrap(variable._value)

    def assign_variable(self, variable: Any, value: Tensor) -> None:
        variable._store(value._value)

    def lift(self, value: Any) -> Any:
        """Values are already concrete here."""
        return value

    def variable_created(self, variable: Any) -> None:
        """Eagerly, variables may be created at any time."""


context.set_eager_trace(EagerTrace())
