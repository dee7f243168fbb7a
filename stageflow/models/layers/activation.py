"""Activation layers."""

from __future__ import annotations

from typing import Any

from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import nn
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["ReLU"]


class ReLU(Layer):
    """Keras' ReLU: `max_value` above it, x from `threshold` up, and
    ``negative_slope * (x - threshold)`` below (plain ``max(x, 0)`` by default). The
    shape and dtype are the input's.

    >>> sf.layers.ReLU(max_value=6.0, negative_slope=0.1)(sf.constant([-10.0, 3.0, 8.0]))
    sf.Tensor([-1.,  3.,  6.], shape=(3,), dtype=float32)
    """

    def __init__(self, max_value: float | None = None, negative_slope: float = 0.0,
                 threshold: float = 0.0, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.max_value = None if max_value is None else float(max_value)
        self.negative_slope = float(negative_slope)
        self.threshold = float(threshold)

    def call(self, inputs: Any) -> Tensor:
        x = convert_to_tensor(inputs)
        if self.negative_slope == 0.0 and self.threshold == 0.0:
            y = nn.relu(x)
        else:
            below = (x - self.threshold) * self.negative_slope
            y = ew.where(ew.greater_equal(x, self.threshold), x, below)
        return y if self.max_value is None else ew.minimum(y, self.max_value)
