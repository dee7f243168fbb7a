"""Layers that merge several inputs into one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.shape import concat
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Add", "Concatenate"]


class Add(Layer):
    """The sum of a list of inputs: ``Add()([residual, shortcut])`` closes a residual
    block. The inputs broadcast against each other, as `sf.add`'s do.

    >>> shortcut = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> sf.layers.Add()([sf.ones((2, 2)), shortcut])
    sf.Tensor([[2., 3.],
               [4., 5.]], shape=(2, 2), dtype=float32)
    """

    def __init__(self, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.built = True  # nothing to create, and the input is a list, not a tensor

    def call(self, inputs: Sequence[Any]) -> Tensor:
        if not isinstance(inputs, list | tuple) or not inputs:
            raise ValueError(f"Add: expected a non-empty list of tensors, got "
                             f"{type(inputs).__name__}{describe_location()}")
        total = convert_to_tensor(inputs[0])
        for value in inputs[1:]:
            total = ew.add(total, value)
        return total


class Concatenate(Layer):
    """A list of inputs joined along `axis` (the last by default), as `sf.concat` joins
    them: ``Concatenate()([features, embedding])``.

    >>> sf.layers.Concatenate()([sf.ones((2, 1)), sf.zeros((2, 2))])
    sf.Tensor([[1., 0., 0.],
               [1., 0., 0.]], shape=(2, 3), dtype=float32)
    """

    def __init__(self, axis: int = -1, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.axis = int(axis)
        self.built = True  # nothing to create, and the input is a list, not a tensor

    def call(self, inputs: Sequence[Any]) -> Tensor:
        if not isinstance(inputs, list | tuple) or len(inputs) < 2:
            raise ValueError(f"Concatenate: expected a list of at least two tensors, got "
                             f"{type(inputs).__name__}{describe_location()}")
        return concat(list(inputs), self.axis)
