"""Pooling layers: windows reduced to their maximum or mean, and global means."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops import nn
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.reductions import reduce_max, reduce_mean
from stageflow.frontend.ops.shape import expand_dims, squeeze
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import (
    Layer,
    _padding_mode,
    _pair,
)

__all__ = ["AveragePooling1D", "AveragePooling2D", "AvgPool1D", "AvgPool2D",
           "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAvgPool1D",
           "GlobalAvgPool2D", "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPooling1D",
           "GlobalMaxPooling2D", "MaxPool1D", "MaxPool2D", "MaxPooling1D", "MaxPooling2D"]


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


class MaxPooling2D(_Pooling2D):
    """The maximum of each window (padding never wins).

    Inputs ``[N, H, W, C]``, outputs ``[N, Ho, Wo, C]`` of their dtype (`Conv2D`'s sizes);
    ``pool_size`` defaults to 2x2 with strides equal to it, halving H and W.

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> sf.reshape(sf.layers.MaxPooling2D()(x), (2, 2))
    sf.Tensor([[ 5.,  7.],
               [13., 15.]], shape=(2, 2), dtype=float32)
    >>> sf.layers.MaxPooling2D(3, strides=1, padding="same")(x).shape
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


class _Pooling1D(Layer):
    """A window reduction over the steps of ``[batch, steps, features]`` inputs: the 2-D
    pooling over a height of one (Keras' arguments: `pool_size` 2, `strides` defaulting
    to it, ``"valid"`` or ``"same"``)."""

    def __init__(self, pool_size: int = 2, strides: int | None = None,
                 padding: str = "valid", trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        layer = type(self).__name__
        self.pool_size = _pair((1, int(pool_size)), "pool_size", layer)[1]
        self.strides = self.pool_size if strides is None else _pair(
            (1, int(strides)), "strides", layer)[1]
        self.padding = _padding_mode(padding, layer)

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        if inputs.ndim != 3:
            raise ValueError(f"{type(self).__name__}: expected inputs [batch, steps, "
                             f"features], got shape {format_shape(inputs.shape)}"
                             f"{describe_location()}")
        pooled = self._pool(expand_dims(inputs, 1), (1, self.pool_size), (1, self.strides),
                            self.padding.upper())
        return squeeze(pooled, 1)

    _pool = staticmethod(nn.max_pool2d)


class MaxPooling1D(_Pooling1D):
    """The maximum of each window of steps: ``[b, steps, f] -> [b, steps_out, f]``
    (`MaxPool2D`'s sizes along the steps).

    >>> x = sf.reshape(sf.constant([1.0, 3.0, 2.0, 5.0, 4.0]), (1, 5, 1))
    >>> sf.reshape(sf.layers.MaxPooling1D()(x), (2,))
    sf.Tensor([3., 5.], shape=(2,), dtype=float32)
    >>> sf.layers.MaxPooling1D(padding="same")(x).shape
    (1, 3, 1)
    """


class AveragePooling1D(_Pooling1D):
    """The mean of each window of steps (over its real elements only, with ``"same"``).

    >>> x = sf.reshape(sf.constant([1.0, 3.0, 2.0, 5.0, 4.0]), (1, 5, 1))
    >>> sf.reshape(sf.layers.AveragePooling1D(padding="same")(x), (3,))
    sf.Tensor([2. , 3.5, 4. ], shape=(3,), dtype=float32)
    """

    _pool = staticmethod(nn.avg_pool2d)


class _GlobalPooling(Layer):
    """A reduction over every axis but the batch and the last: ``[b, ..., c] -> [b, c]``
    (``[b, 1, ..., 1, c]`` with `keepdims`), the dtype kept, for inputs of `rank`."""

    rank = 4

    def __init__(self, keepdims: bool = False, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.keepdims = bool(keepdims)

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        if inputs.ndim != self.rank:
            raise ValueError(f"{type(self).__name__}: expected inputs of rank {self.rank}, "
                             f"got shape {format_shape(inputs.shape)}{describe_location()}")
        return self._reduce(inputs, tuple(range(1, self.rank - 1)), keepdims=self.keepdims)

    _reduce = staticmethod(reduce_mean)


class GlobalAveragePooling2D(_GlobalPooling):
    """The mean over height and width: ``[N, H, W, C] -> [N, C]`` (``[N, 1, 1, C]`` with
    `keepdims`), the dtype kept: a convnet's features, whatever the image size, for its
    classifier.

    >>> features = sf.ones((2, 7, 7, 64))
    >>> sf.layers.GlobalAveragePooling2D()(features).shape
    (2, 64)
    >>> sf.layers.GlobalAveragePooling2D(keepdims=True)(features).shape
    (2, 1, 1, 64)
    """


class GlobalMaxPooling2D(_GlobalPooling):
    """The maximum over height and width: ``[N, H, W, C] -> [N, C]``.

    >>> x = sf.reshape(sf.range(8.0), (1, 2, 2, 2))
    >>> sf.layers.GlobalMaxPooling2D()(x)
    sf.Tensor([[6., 7.]], shape=(1, 2), dtype=float32)
    """

    _reduce = staticmethod(reduce_max)


class GlobalAveragePooling1D(_GlobalPooling):
    """The mean over the steps: ``[b, steps, f] -> [b, f]`` (a sequence's summary).

    >>> sf.layers.GlobalAveragePooling1D()(sf.reshape(sf.range(6.0), (1, 3, 2)))
    sf.Tensor([[2., 3.]], shape=(1, 2), dtype=float32)
    """

    rank = 3


class GlobalMaxPooling1D(_GlobalPooling):
    """The maximum over the steps: ``[b, steps, f] -> [b, f]``.

    >>> sf.layers.GlobalMaxPooling1D()(sf.reshape(sf.range(6.0), (1, 3, 2)))
    sf.Tensor([[4., 5.]], shape=(1, 2), dtype=float32)
    """

    rank = 3
    _reduce = staticmethod(reduce_max)


# Keras' other spellings of the pooling layers: the same classes (named by Keras' class
# names: a `MaxPool2D()` is a "max_pooling2d").
MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D
MaxPool1D = MaxPooling1D
AvgPool1D = AveragePooling1D
GlobalAvgPool1D = GlobalAveragePooling1D
GlobalAvgPool2D = GlobalAveragePooling2D
GlobalMaxPool1D = GlobalMaxPooling1D
GlobalMaxPool2D = GlobalMaxPooling2D
