"""Regularization layers: noise while training, the identity otherwise."""

from __future__ import annotations

from typing import Any

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import nn
from stageflow.frontend.ops import random as sf_random
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Dropout", "GaussianNoise", "SpatialDropout2D"]


def _rate(rate: float, layer: str) -> float:
    if not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"{layer}: rate must be in [0, 1), got {rate!r}")
    return float(rate)


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
        self.rate = _rate(rate, "Dropout")
        self.seed = seed

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        return nn.dropout(inputs, self.rate, training=training, seed=self.seed)


class SpatialDropout2D(Layer):
    """Dropout of whole feature maps: while training each (example, channel) of NHWC
    inputs is zeroed with probability `rate` across all its pixels, the rest scaled by
    ``1 / (1 - rate)`` (neighbouring pixels are correlated, so dropping single ones
    regularises little); the identity otherwise.

    >>> drop = sf.layers.SpatialDropout2D(0.5, seed=3)
    >>> y = drop(sf.ones((2, 3, 3, 4)), training=True).numpy()
    >>> bool(((y == 0) | (y == 2)).all()), bool((y == y[:, :1, :1]).all())
    (True, True)
    """

    def __init__(self, rate: float, seed: int | None = None, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.rate = _rate(rate, "SpatialDropout2D")
        self.seed = seed

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        x = convert_to_tensor(inputs)
        if x.ndim != 4 or x.shape[0] is None or x.shape[3] is None:
            raise ValueError(f"SpatialDropout2D: expected NHWC inputs of known batch and "
                             f"channels, got shape {format_shape(x.shape)}{describe_location()}")
        if not training or self.rate == 0.0:
            return x
        noise = sf_random.uniform((x.shape[0], 1, 1, x.shape[3]), 0.0, 1.0, seed=self.seed)
        keep = ew.cast(ew.greater_equal(noise, self.rate), x.dtype) * (1.0 / (1.0 - self.rate))
        return x * keep


class GaussianNoise(Layer):
    """While training, ``inputs + N(0, stddev**2)`` noise (fresh on every call); the
    identity otherwise: a regulariser, and data augmentation for real-valued inputs.

    >>> noisy = sf.layers.GaussianNoise(0.1, seed=0)
    >>> x = sf.zeros((1000,))
    >>> bool(sf.reduce_all(noisy(x) == x))
    True
    >>> round(float(np.std(noisy(x, training=True).numpy())), 1)
    0.1
    """

    def __init__(self, stddev: float, seed: int | None = None, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.stddev = float(stddev)
        self.seed = seed

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        x = convert_to_tensor(inputs)
        if not training:
            return x
        return x + sf_random.normal(x.shape, 0.0, self.stddev, dtype=x.dtype, seed=self.seed)
