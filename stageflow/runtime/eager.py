"""Eager execution: run a primitive's NumPy kernel at once, one op at a time.

No IR object is built here. The shape rule runs first so that bad input fails with the
op's own message (naming the shapes and the user's line) instead of a NumPy error.
Convolutions run their compiled lowering once it is compiled (`eager_kernels`).
"""

from __future__ import annotations

from typing import Any

from stageflow.core import context
from stageflow.core.errors import KERNEL_ERRORS
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.source import describe_location
from stageflow.frontend.tensor import Tensor, wrap
from stageflow.runtime.eager_kernels import KERNELS, MACS

CHECKED_LIMIT = 4096


class EagerTrace:
    """The bottom of every thread's trace stack: concrete tensors in, concrete tensors out.

    The shape rule of an op runs once per distinct (op, operand types, params); later calls
    with the same key skip it (a dict lookup instead of a few microseconds of Python).
    """

    def __init__(self) -> None:
        self._checked: set[tuple] = set()

    def process(self, primitive: Primitive, args: tuple, params: dict[str, Any]) -> Any:
        values = []
        for arg in args:
            if type(arg) is not Tensor:
                raise TypeError(
                    f"{primitive.name}: expected a tensor, got {type(arg).__name__}"
                    f"{describe_location()}"
                )
            values.append(arg._value)
        self._check(primitive, values, params)
        compiled = (KERNELS.lookup(primitive, values, params) if primitive.name in MACS
                    else None)
        try:
            result = (primitive.kernel(*values, **params) if compiled is None
                      else compiled(*values))
        except KERNEL_ERRORS as error:
            raise type(error)(f"{primitive.name}: {error}{describe_location()}") from None
        if primitive.multiple_results:
            return tuple(wrap(r) for r in result)
        return wrap(result)

    def _check(self, primitive: Primitive, values: list, params: dict[str, Any]) -> None:
        try:
            key = (primitive, *[(v.dtype, v.shape) for v in values], *params.items())
            if key in self._checked:
                return
        except TypeError:  # an unhashable param: check every time
            key = None
        primitive.abstract_eval(*(ShapedType(v.shape, v.dtype) for v in values), **params)
        if key is not None:
            if len(self._checked) >= CHECKED_LIMIT:
                self._checked.clear()
            self._checked.add(key)

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
