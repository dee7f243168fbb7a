"""Convolution layers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stageflow.frontend.ops import nn
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import (
    _KernelLayer,
    _padding_mode,
    _pair,
)

__all__ = ["Conv2D"]


class Conv2D(_KernelLayer):
    """2-D convolution of NHWC inputs with a ``[kh, kw, in, filters]`` kernel, plus bias.

    `strides` and `kernel_size` are an int or a pair; `padding` is ``"valid"`` or
    ``"same"`` (TensorFlow's rule), as in Keras.

    Inputs ``[N, H, W, C]`` (C known when the kernel is created), outputs ``[N, Ho, Wo,
    filters]``: with ``"same"`` ``Ho = ceil(H / stride)``, with ``"valid"`` ``Ho =
    ceil((H - kh + 1) / stride)``.

    >>> conv = sf.layers.Conv2D(8, 3, padding="same", activation="relu")
    >>> images = sf.ones((2, 16, 16, 3))
    >>> conv(images).shape
    (2, 16, 16, 8)
    >>> conv.kernel.shape, conv.bias.shape
    ((3, 3, 3, 8), (8,))
    >>> sf.layers.Conv2D(4, (3, 3), strides=2)(images).shape
    (2, 7, 7, 4)
    """

    def __init__(self, filters: int, kernel_size: int | Sequence[int], strides: Any = 1,
                 padding: str = "valid", activation: str | Callable | None = None,
                 use_bias: bool = True, kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(activation, use_bias, kernel_initializer, bias_initializer,
                         trainable, name, dtype)
        if int(filters) < 1:
            raise ValueError(f"Conv2D: filters must be a positive int, got {filters!r}")
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2D")
        self.strides = _pair(strides, "strides", "Conv2D")
        self.padding = _padding_mode(padding, "Conv2D")

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        channels = self._last_dim(input_shape, 4)
        self._create((*self.kernel_size, channels, self.filters), self.filters)

    def call(self, inputs: Any) -> Tensor:
        return self._epilogue(nn.conv2d(inputs, self.kernel, self.strides,
                                        self.padding.upper()))
