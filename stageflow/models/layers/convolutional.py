"""Convolution layers: 1-D and 2-D, depthwise, separable and transposed, NHWC (NWC) as
Keras' default layout."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops import nn
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.models.initializers import get_initializer
from stageflow.models.layers.base import (
    _KernelLayer,
    _padding_mode,
    _pair,
)

__all__ = ["Conv1D", "Conv2D", "Conv2DTranspose", "DepthwiseConv2D", "SeparableConv2D"]


class Conv2D(_KernelLayer):
    """2-D convolution of NHWC inputs with a ``[kh, kw, in, filters]`` kernel, plus bias.

    `strides` and `kernel_size` are an int or a pair; `padding` is ``"valid"`` or
    ``"same"`` (TensorFlow's rule), as in Keras. `groups` (Keras' argument) splits the
    channels into that many groups, each convolved with its ``filters / groups`` filters:
    the kernel is ``[kh, kw, C / groups, filters]``.

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
    >>> grouped = sf.layers.Conv2D(6, 1, groups=3)
    >>> grouped(images).shape, grouped.kernel.shape
    ((2, 16, 16, 6), (1, 1, 1, 6))
    """

    def __init__(self, filters: int, kernel_size: int | Sequence[int], strides: Any = 1,
                 padding: str = "valid", activation: str | Callable | None = None,
                 use_bias: bool = True, kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None, groups: int = 1) -> None:
        super().__init__(activation, use_bias, kernel_initializer, bias_initializer,
                         trainable, name, dtype)
        if int(filters) < 1:
            raise ValueError(f"Conv2D: filters must be a positive int, got {filters!r}")
        if isinstance(groups, bool) or int(groups) < 1 or int(filters) % int(groups):
            raise ValueError(f"Conv2D: groups must be a positive int dividing filters "
                             f"({filters}), got {groups!r}")
        self.filters = int(filters)
        self.groups = int(groups)
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2D")
        self.strides = _pair(strides, "strides", "Conv2D")
        self.padding = _padding_mode(padding, "Conv2D")

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        channels = self._last_dim(input_shape, 4)
        if channels % self.groups:
            raise ValueError(f"Conv2D: the input's {channels} channels are not divisible "
                             f"by groups={self.groups} (input shape "
                             f"{format_shape(tuple(input_shape))})")
        self._create((*self.kernel_size, channels // self.groups, self.filters),
                     self.filters)

    def call(self, inputs: Any) -> Tensor:
        return self._epilogue(nn.conv2d(inputs, self.kernel, self.strides,
                                        self.padding.upper()))


class Conv1D(_KernelLayer):
    """1-D convolution of ``[batch, steps, channels]`` inputs with a ``[k, channels,
    filters]`` kernel, plus bias (Keras' arguments: `strides`, `dilation_rate`, `padding`
    ``"valid"``, ``"same"`` or ``"causal"``, which pads ``(k - 1) * dilation`` steps on
    the left only, so that no output sees a later step).

    Inputs ``[b, steps, c]``, outputs ``[b, steps_out, filters]`` (`Conv2D`'s sizes; with
    ``"causal"`` those of ``"valid"`` over the padded steps).

    >>> conv = sf.layers.Conv1D(4, 3, padding="causal")
    >>> conv(sf.ones((2, 10, 3))).shape
    (2, 10, 4)
    >>> conv.kernel.shape
    (3, 3, 4)
    >>> x = sf.reshape(sf.range(5.0), (1, 5, 1))
    >>> sf.reshape(sf.layers.Conv1D(1, 2, kernel_initializer="ones")(x), (4,))
    sf.Tensor([1., 3., 5., 7.], shape=(4,), dtype=float32)
    """

    def __init__(self, filters: int, kernel_size: int | Sequence[int], strides: Any = 1,
                 padding: str = "valid", dilation_rate: Any = 1,
                 activation: str | Callable | None = None, use_bias: bool = True,
                 kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(activation, use_bias, kernel_initializer, bias_initializer,
                         trainable, name, dtype)
        if int(filters) < 1:
            raise ValueError(f"Conv1D: filters must be a positive int, got {filters!r}")
        self.filters = int(filters)
        self.kernel_size = _single(kernel_size, "kernel_size")
        self.strides = _single(strides, "strides")
        self.dilation_rate = _single(dilation_rate, "dilation_rate")
        causal = isinstance(padding, str) and padding.lower() == "causal"
        self.padding = "causal" if causal else _padding_mode(padding, "Conv1D")

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        channels = self._last_dim(input_shape, 3)
        self._create((self.kernel_size, channels, self.filters), self.filters)

    def call(self, inputs: Any) -> Tensor:
        padding: Any = self.padding.upper()
        if self.padding == "causal":
            padding = ((self.kernel_size - 1) * self.dilation_rate, 0)
        return self._epilogue(nn.conv1d(inputs, self.kernel, self.strides, padding,
                                        dilations=self.dilation_rate))


def _single(value: int | Sequence[int], name: str) -> int:
    """Keras' 1-D size: an int or a one-element tuple, positive."""
    values = (value,) if isinstance(value, int) else tuple(value)
    if len(values) != 1 or int(values[0]) < 1:
        raise ValueError(f"Conv1D: {name} must be a positive int, got {value!r}")
    return int(values[0])


class DepthwiseConv2D(_KernelLayer):
    """Each channel of NHWC inputs convolved with its own `depth_multiplier` filters
    (`sf.nn.depthwise_conv2d`): `depthwise_kernel` is ``[kh, kw, channels,
    depth_multiplier]``, the bias ``[channels * depth_multiplier]``. MobileNet's block.

    Inputs ``[N, H, W, C]`` (H and W known), outputs ``[N, Ho, Wo, C * depth_multiplier]``
    (`Conv2D`'s sizes).

    >>> conv = sf.layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2)
    >>> conv(sf.ones((1, 8, 8, 4))).shape
    (1, 8, 8, 8)
    >>> conv.depthwise_kernel.shape
    (3, 3, 4, 2)
    """

    def __init__(self, kernel_size: int | Sequence[int], strides: Any = (1, 1),
                 padding: str = "valid", depth_multiplier: int = 1,
                 activation: str | Callable | None = None, use_bias: bool = True,
                 depthwise_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(activation, use_bias, depthwise_initializer, bias_initializer,
                         trainable, name, dtype)
        layer = type(self).__name__
        self.kernel_size = _pair(kernel_size, "kernel_size", layer)
        self.strides = _pair(strides, "strides", layer)
        self.padding = _padding_mode(padding, layer)
        if int(depth_multiplier) < 1:
            raise ValueError(f"{layer}: depth_multiplier must be a positive int, got "
                             f"{depth_multiplier!r}")
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_kernel = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        channels = self._last_dim(input_shape, 4)
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", (*self.kernel_size, channels, self.depth_multiplier),
            self.kernel_initializer)
        self._create_bias(channels * self.depth_multiplier)

    def _create_bias(self, outputs: int) -> None:
        if self.use_bias:
            self.bias = self.add_weight("bias", (outputs,), self.bias_initializer)

    def _depthwise(self, inputs: Any) -> Tensor:
        return nn.depthwise_conv2d(inputs, self.depthwise_kernel, self.strides,
                                   self.padding.upper())

    def call(self, inputs: Any) -> Tensor:
        return self._epilogue(self._depthwise(inputs))


class SeparableConv2D(DepthwiseConv2D):
    """A depthwise convolution (`DepthwiseConv2D`) followed by a 1x1 one mixing the
    channels into `filters` (Xception's block): `depthwise_kernel` ``[kh, kw, C,
    depth_multiplier]``, `pointwise_kernel` ``[1, 1, C * depth_multiplier, filters]``, bias
    ``[filters]``; far fewer weights than a `Conv2D` of the same window.

    Inputs ``[N, H, W, C]`` (H and W known), outputs ``[N, Ho, Wo, filters]``.

    >>> conv = sf.layers.SeparableConv2D(16, 3, padding="same")
    >>> conv(sf.ones((1, 8, 8, 4))).shape
    (1, 8, 8, 16)
    >>> conv.depthwise_kernel.shape, conv.pointwise_kernel.shape
    ((3, 3, 4, 1), (1, 1, 4, 16))
    """

    def __init__(self, filters: int, kernel_size: int | Sequence[int], strides: Any = (1, 1),
                 padding: str = "valid", depth_multiplier: int = 1,
                 activation: str | Callable | None = None, use_bias: bool = True,
                 depthwise_initializer: str | Callable = "glorot_uniform",
                 pointwise_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(kernel_size, strides, padding, depth_multiplier, activation, use_bias,
                         depthwise_initializer, bias_initializer, trainable, name, dtype)
        if int(filters) < 1:
            raise ValueError(f"SeparableConv2D: filters must be a positive int, got "
                             f"{filters!r}")
        self.filters = int(filters)
        self.pointwise_initializer = get_initializer(pointwise_initializer)
        self.pointwise_kernel = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        channels = self._last_dim(input_shape, 4)
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", (*self.kernel_size, channels, self.depth_multiplier),
            self.kernel_initializer)
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", (1, 1, channels * self.depth_multiplier, self.filters),
            self.pointwise_initializer)
        self._create_bias(self.filters)

    def call(self, inputs: Any) -> Tensor:
        return self._epilogue(nn.conv2d(self._depthwise(inputs), self.pointwise_kernel, 1,
                                        "VALID"))


class Conv2DTranspose(_KernelLayer):
    """The transposed 2-D convolution (`sf.nn.conv2d_transpose`, the gradient of `Conv2D`
    with respect to its input), which upsamples: `kernel` ``[kh, kw, filters, channels]``
    (Keras' layout), plus bias.

    Inputs ``[N, H, W, C]`` (N, H and W known), outputs ``[N, Ho, Wo, filters]`` with
    Keras' sizes: ``H * stride`` with ``"same"``, ``H * stride + max(kh - stride, 0)`` with
    ``"valid"``.

    >>> up = sf.layers.Conv2DTranspose(8, 3, strides=2, padding="same")
    >>> up(sf.ones((1, 4, 4, 16))).shape
    (1, 8, 8, 8)
    >>> up.kernel.shape
    (3, 3, 8, 16)
    >>> sf.layers.Conv2DTranspose(1, 3, strides=2)(sf.ones((1, 4, 4, 1))).shape
    (1, 9, 9, 1)
    """

    def __init__(self, filters: int, kernel_size: int | Sequence[int], strides: Any = (1, 1),
                 padding: str = "valid", activation: str | Callable | None = None,
                 use_bias: bool = True, kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(activation, use_bias, kernel_initializer, bias_initializer,
                         trainable, name, dtype)
        if int(filters) < 1:
            raise ValueError(f"Conv2DTranspose: filters must be a positive int, got "
                             f"{filters!r}")
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2DTranspose")
        self.strides = _pair(strides, "strides", "Conv2DTranspose")
        self.padding = _padding_mode(padding, "Conv2DTranspose")

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        channels = self._last_dim(input_shape, 4)
        self._create((*self.kernel_size, self.filters, channels), self.filters)

    def call(self, inputs: Any) -> Tensor:
        x = convert_to_tensor(inputs)
        if x.ndim != 4 or None in x.shape[:3]:
            raise ValueError(f"Conv2DTranspose {self.name!r}: needs NHWC inputs of known "
                             f"batch, height and width, got shape {format_shape(x.shape)}"
                             f"{describe_location()}")
        sizes = [size * stride if self.padding == "same" else
                 size * stride + max(window - stride, 0)
                 for size, window, stride in zip(x.shape[1:3], self.kernel_size, self.strides,
                                                 strict=True)]
        output_shape = (x.shape[0], *sizes, self.filters)
        return self._epilogue(nn.conv2d_transpose(x, self.kernel, output_shape, self.strides,
                                                  self.padding.upper()))
