"""Layers that merge several inputs into one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Add"]


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
