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
from stageflow.models.regularizers import L1L2

__all__ = ["ActivityRegularization", "Dropout", "GaussianDropout", "GaussianNoise",
           "SpatialDropout1D", "SpatialDropout2D"]


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


class SpatialDropout1D(Layer):
    """Dropout of whole channels of ``(batch, steps, channels)`` inputs while training:
    each (example, channel) is zeroed with probability `rate` at every step, the rest
    scaled by ``1 / (1 - rate)``; the identity otherwise.

    >>> drop = sf.keras.layers.SpatialDropout1D(0.5, seed=3)
    >>> y = drop(sf.ones((2, 5, 4)), training=True).numpy()
    >>> bool(((y == 0) | (y == 2)).all()), bool((y == y[:, :1]).all())
    (True, True)
    """

    def __init__(self, rate: float, seed: int | None = None, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.rate = _rate(rate, "SpatialDropout1D")
        self.seed = seed

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        x = convert_to_tensor(inputs)
        if x.ndim != 3 or x.shape[0] is None or x.shape[2] is None:
            raise ValueError(f"SpatialDropout1D: expected (batch, steps, channels) inputs of "
                             f"known batch and channels, got shape {format_shape(x.shape)}"
                             f"{describe_location()}")
        if not training or self.rate == 0.0:
            return x
        noise = sf_random.uniform((x.shape[0], 1, x.shape[2]), 0.0, 1.0, seed=self.seed)
        keep = ew.cast(ew.greater_equal(noise, self.rate), x.dtype) * (1.0 / (1.0 - self.rate))
        return x * keep


class GaussianDropout(Layer):
    """While training, ``inputs`` times noise of mean 1 and standard deviation
    ``sqrt(rate / (1 - rate))`` (fresh on every call); the identity otherwise.

    >>> drop = sf.keras.layers.GaussianDropout(0.5, seed=0)
    >>> x = sf.ones((10000,))
    >>> bool(sf.reduce_all(drop(x) == x))
    True
    >>> round(float(np.std(drop(x, training=True).numpy())), 1)
    1.0
    """

    def __init__(self, rate: float, seed: int | None = None, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.rate = _rate(rate, "GaussianDropout")
        self.seed = seed

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        x = convert_to_tensor(inputs)
        if not training or self.rate == 0.0:
            return x
        stddev = (self.rate / (1.0 - self.rate)) ** 0.5
        return x * sf_random.normal(x.shape, 1.0, stddev, dtype=x.dtype, seed=self.seed)


class ActivityRegularization(Layer):
    """Its input, unchanged, with an L1/L2 penalty on it added to the layer's `losses`
    (``l1 * sum(|x|) + l2 * sum(x**2)``, divided by the batch size, as Keras does).

    >>> layer = sf.keras.layers.ActivityRegularization(l1=0.5)
    >>> _ = layer(sf.constant([[1.0, -2.0]]))
    >>> layer.losses
    [sf.Tensor(1.5, shape=(), dtype=float32)]
    """

    def __init__(self, l1: float = 0.0, l2: float = 0.0, **kwargs: Any) -> None:  # noqa: E741 - Keras' name
        super().__init__(**kwargs)
        self.l1, self.l2 = float(l1), float(l2)
        self.activity_regularizer = L1L2(l1=self.l1, l2=self.l2)

    def call(self, inputs: Any) -> Any:
        return inputs
