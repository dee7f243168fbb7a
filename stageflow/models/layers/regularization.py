"""Regularization layers."""

from __future__ import annotations

from typing import Any

from stageflow.frontend.ops import nn
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Dropout"]


class Dropout(Layer):
    """`sf.nn.dropout` while training (a fresh mask on every call, staged or not); the
    identity otherwise. Kept elements are scaled by ``1 / (1 - rate)``, so the expected
    sum is unchanged; the shape and dtype are the input's.

    >>> drop = sf.layers.Dropout(0.5, seed=1)
    >>> x = sf.ones((2, 4))
    >>> bool(sf.reduce_all(drop(x) == x))            # inference: the identity
    True
    >>> np.unique(drop(x, training=True).numpy())    # dropped, or kept and doubled
    array([0., 2.], dtype=float32)
    """

    def __init__(self, rate: float, seed: int | None = None, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.seed = seed

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        return nn.dropout(inputs, self.rate, training=training, seed=self.seed)
