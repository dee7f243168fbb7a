"""Pooling layers: windows reduced to their maximum or mean, and global means."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops import nn
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.reductions import reduce_mean
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import (
    Layer,
    _padding_mode,
    _pair,
)

__all__ = ["AveragePooling2D", "GlobalAveragePooling2D", "MaxPool2D"]


class _Pooling2D(Layer):
    """A window reduction over the height and width of NHWC inputs (Keras' arguments:
    `pool_size`, `strides` defaulting to it, ``"valid"`` or ``"same"`` padding)."""

    def __init__(self, pool_size: int | Sequence[int] = (2, 2), strides: Any = None,
                 padding: str = "valid", trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        layer = type(self).__name__
        self.pool_size = _pair(pool_size, "pool_size", layer)
        self.strides = self.pool_size if strides is None else _pair(strides, "strides", layer)
        self.padding = _padding_mode(padding, layer)

    def call(self, inputs: Any) -> Tensor:
        return self._pool(inputs, self.pool_size, self.strides, self.padding.upper())

    _pool = staticmethod(nn.max_pool2d)


class MaxPool2D(_Pooling2D):
    """The maximum of each window (padding never wins).

    Inputs ``[N, H, W, C]``, outputs ``[N, Ho, Wo, C]`` of their dtype (`Conv2D`'s sizes);
    ``pool_size`` defaults to 2x2 with strides equal to it, halving H and W.

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> sf.reshape(sf.layers.MaxPool2D()(x), (2, 2))
    sf.Tensor([[ 5.,  7.],
               [13., 15.]], shape=(2, 2), dtype=float32)
    >>> sf.layers.MaxPool2D(3, strides=1, padding="same")(x).shape
    (1, 4, 4, 1)
    """


class AveragePooling2D(_Pooling2D):
    """The mean of each window, over its real elements only (TensorFlow's ``"same"``).

    Inputs ``[N, H, W, C]`` (floating), outputs ``[N, Ho, Wo, C]`` of their dtype.

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> sf.reshape(sf.layers.AveragePooling2D(pool_size=2)(x), (2, 2))
    sf.Tensor([[ 2.5,  4.5],
               [10.5, 12.5]], shape=(2, 2), dtype=float32)
    """

    _pool = staticmethod(nn.avg_pool2d)


class GlobalAveragePooling2D(Layer):
    """The mean over height and width: ``[N, H, W, C] -> [N, C]`` (``[N, 1, 1, C]`` with
    `keepdims`), the dtype kept: a convnet's features, whatever the image size, for its
    classifier.

    >>> features = sf.ones((2, 7, 7, 64))
    >>> sf.layers.GlobalAveragePooling2D()(features).shape
    (2, 64)
    >>> sf.layers.GlobalAveragePooling2D(keepdims=True)(features).shape
    (2, 1, 1, 64)
    """

    def __init__(self, keepdims: bool = False, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.keepdims = bool(keepdims)

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        if inputs.ndim != 4:
            raise ValueError(f"GlobalAveragePooling2D: expected NHWC inputs of rank 4, got "
                             f"shape {format_shape(inputs.shape)}{describe_location()}")
        return reduce_mean(inputs, (1, 2), keepdims=self.keepdims)


