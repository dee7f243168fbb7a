"""Layers that change a tensor's shape, not its values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.shape import reshape
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Flatten", "Reshape"]


class Flatten(Layer):
    """``[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]``, the dtype kept: between
    convolutions and dense layers. The non-batch dims must be known (the batch need not).

    >>> sf.layers.Flatten()(sf.ones((2, 3, 4, 5))).shape
    (2, 60)
    """

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        rest = inputs.shape[1:]
        if None in rest:
            raise ValueError(f"Flatten: the non-batch dims must be known, got shape "
                             f"{format_shape(inputs.shape)}{describe_location()}")
        return reshape(inputs, (-1, math.prod(rest)))


class Reshape(Layer):
    """Each example reshaped to `target_shape` (the batch dim kept; -1 inferred once), the
    dtype kept: ``[batch, *dims] -> [batch, *target_shape]``.

    >>> sf.layers.Reshape((2, -1))(sf.ones((4, 6))).shape
    (4, 2, 3)
    """

    def __init__(self, target_shape: Sequence[int], trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.target_shape = tuple(int(d) for d in target_shape)

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        target = list(self.target_shape)
        per_example = inputs.shape[1:]
        if -1 in target and None not in per_example:  # resolve it here: the batch may be
            known = math.prod(d for d in target if d != -1)  # the one unknown dim
            target[target.index(-1)] = math.prod(per_example) // max(known, 1)
        batch = inputs.shape[0]
        return reshape(inputs, (batch if batch is not None else -1, *target))
