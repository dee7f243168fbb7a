"""`sf.layers`: Keras-style layers — modules that create their variables on first call.

A layer's `build(input_shape)` runs on its first call, when the input's last dim is known;
its variables get Glorot-uniform kernels and zero biases, as Keras does. Inside
`sf.function` the first call happens while tracing: initial values are computed eagerly
(initializers run under `sf.init_scope`), so the first trace creates the variables and the
function is traced once more to use them (the paper's state-creation rule). Layers are
`sf.Module`s, so their variables are tracked through attributes like any module's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.module import Module, camel_to_snake
from stageflow.frontend.ops import nn
from stageflow.frontend.ops import random as sf_random
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones, zeros
from stageflow.frontend.ops.linalg import matmul
from stageflow.frontend.ops.shape import reshape
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable

__all__ = ["Conv2D", "Dense", "Flatten", "Layer", "Sequential", "get_activation",
           "get_initializer"]

_name_counts: dict[str, int] = {}


def _unique_name(base: str) -> str:
    """Keras' default layer names: ``dense``, ``dense_1``, ``dense_2``, ..."""
    count = _name_counts.get(base, 0)
    _name_counts[base] = count + 1
    return base if count == 0 else f"{base}_{count}"


# --------------------------------------------------------------------------- activations

ACTIVATIONS: dict[str, Callable[[Any], Tensor]] = {
    "linear": lambda x: x,
    "relu": nn.relu,
    "relu6": nn.relu6,
    "leaky_relu": nn.leaky_relu,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "swish": nn.silu,
    "softplus": nn.softplus,
    "sigmoid": nn.sigmoid,
    "tanh": nn.tanh,
    "softmax": nn.softmax,
    "log_softmax": nn.log_softmax,
}


def get_activation(activation: str | Callable | None) -> Callable[[Any], Any] | None:
    """A callable for an activation given by name (``"relu"``, ...), callable, or None."""
    if activation is None or callable(activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]
    names = ", ".join(sorted(ACTIVATIONS))
    raise ValueError(f"sf.layers: unknown activation {activation!r} (use a callable, None, "
                     f"or one of {names})")


# --------------------------------------------------------------------------- initializers


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """Keras' fan-in and fan-out: the last two dims, times the receptive field for convs."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def glorot_uniform(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """U(-l, l) with l = sqrt(6 / (fan_in + fan_out)) (Keras' default kernel initializer)."""
    fan_in, fan_out = _fans(shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return sf_random.uniform(shape, -limit, limit, dtype=dtype)


def he_uniform(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """U(-l, l) with l = sqrt(6 / fan_in) (for ReLU networks)."""
    limit = math.sqrt(6.0 / _fans(shape)[0])
    return sf_random.uniform(shape, -limit, limit, dtype=dtype)


INITIALIZERS: dict[str, Callable[..., Tensor]] = {
    "glorot_uniform": glorot_uniform,
    "he_uniform": he_uniform,
    "zeros": zeros,
    "ones": ones,
}


def get_initializer(initializer: str | Callable) -> Callable[..., Any]:
    """A callable ``(shape, dtype) -> value`` for an initializer name or callable."""
    if callable(initializer):
        return initializer
    if isinstance(initializer, str) and initializer in INITIALIZERS:
        return INITIALIZERS[initializer]
    names = ", ".join(sorted(INITIALIZERS))
    raise ValueError(f"sf.layers: unknown initializer {initializer!r} (use a callable "
                     f"(shape, dtype) -> value, or one of {names})")


# --------------------------------------------------------------------------- layers


class Layer(Module):
    """A module whose `build(input_shape)` runs once, on its first call, before `call`.

    ``trainable=False`` freezes the layer: its variables (and its sub-layers') are made
    non-trainable, so tapes do not watch them and `trainable_variables` leaves them out.
    """

    _TRACKING_IGNORED = Module._TRACKING_IGNORED | {"_activation_fn", "_dtype", "_trainable"}

    def __init__(self, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(name if name is not None else _unique_name(_default_name(self)))
        self.built = False
        self._trainable = bool(trainable)
        self._dtype = None if dtype is None else dtypes.as_dtype(dtype)

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)
        for variable in self.variables:
            variable.trainable = self._trainable
        for layer in self.submodules:
            if isinstance(layer, Layer):
                layer._trainable = self._trainable

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Create the variables for inputs of this shape (the default creates none)."""

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.built:
            shape = getattr(inputs, "shape", None)
            if shape is None:
                shape = convert_to_tensor(inputs).shape
            self.build(tuple(shape))
            self.built = True
        return self.call(inputs, *args, **kwargs)

    def call(self, inputs: Any) -> Any:
        return inputs

    def add_weight(self, name: str, shape: Sequence[int], initializer: str | Callable,
                   dtype: Any = None, trainable: bool = True) -> Variable:
        """A new variable named ``<layer>/<name>``, initialised eagerly even inside a trace."""
        init = get_initializer(initializer)
        dtype = dtypes.as_dtype(dtype or self._dtype or dtypes.float32)
        shape = tuple(int(d) for d in shape)
        return Variable(lambda: init(shape, dtype), trainable=trainable and self._trainable,
                        name=f"{self.name}/{name}", dtype=dtype)

    def _variable_dtype(self, input_dtype: Any) -> np.dtype:
        """The layer's dtype, else the input's floating dtype, else float32."""
        if self._dtype is not None:
            return self._dtype
        if input_dtype is not None and dtypes.is_floating(input_dtype):
            return dtypes.as_dtype(input_dtype)
        return dtypes.float32

    def _last_dim(self, input_shape: tuple[int | None, ...], min_rank: int) -> int:
        if len(input_shape) < min_rank or input_shape[-1] is None:
            raise ValueError(
                f"{type(self).__name__} {self.name!r}: needs inputs of rank >= {min_rank} "
                f"with a known last dim to create its variables, got shape "
                f"{format_shape(input_shape)}{describe_location()}")
        return int(input_shape[-1])


def _default_name(layer: Module) -> str:

    return camel_to_snake(type(layer).__name__)


class _KernelLayer(Layer):
    """A layer with a kernel, an optional bias and an activation (Dense, Conv2D): the shared
    arguments, variable creation and epilogue; subclasses give the kernel's shape and the
    product."""

    def __init__(self, activation: str | Callable | None, use_bias: bool,
                 kernel_initializer: str | Callable, bias_initializer: str | Callable,
                 trainable: bool, name: str | None, dtype: Any) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.activation = activation
        self._activation_fn = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.kernel: Variable | None = None
        self.bias: Variable | None = None

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        inputs = convert_to_tensor(inputs)
        if not self.built:
            self._dtype = self._variable_dtype(inputs.dtype)
        return super().__call__(inputs, *args, **kwargs)

    def _create(self, kernel_shape: tuple[int, ...], outputs: int) -> None:
        self.kernel = self.add_weight("kernel", kernel_shape, self.kernel_initializer)
        if self.use_bias:
            self.bias = self.add_weight("bias", (outputs,), self.bias_initializer)

    def _epilogue(self, outputs: Tensor) -> Tensor:
        if self.bias is not None:
            outputs = outputs + self.bias
        if self._activation_fn is not None:
            outputs = self._activation_fn(outputs)
        return outputs


class Dense(_KernelLayer):
    """``activation(inputs @ kernel + bias)`` over the last dim of the inputs.

    `kernel` is ``[input_dim, units]``, created on the first call with
    `kernel_initializer` (Glorot uniform), `bias` is ``[units]`` of `bias_initializer`
    (zeros). The variables take the input's floating dtype unless `dtype` is given.
    """

    def __init__(self, units: int, activation: str | Callable | None = None,
                 use_bias: bool = True, kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(activation, use_bias, kernel_initializer, bias_initializer,
                         trainable, name, dtype)
        if int(units) < 1:
            raise ValueError(f"Dense: units must be a positive int, got {units!r}")
        self.units = int(units)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self._create((self._last_dim(input_shape, 1), self.units), self.units)

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        if inputs.ndim == 1:
            outputs = matmul(reshape(inputs, (1, -1)), self.kernel)
            outputs = reshape(outputs, (self.units,))
        else:
            outputs = matmul(inputs, self.kernel)
        return self._epilogue(outputs)


class Conv2D(_KernelLayer):
    """2-D convolution of NHWC inputs with a ``[kh, kw, in, filters]`` kernel, plus bias.

    `strides` and `kernel_size` are an int or a pair; `padding` is ``"valid"`` or
    ``"same"`` (TensorFlow's rule), as in Keras.
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
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.strides = _pair(strides, "strides")
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            raise ValueError(f"Conv2D: padding must be 'valid' or 'same', got {padding!r}")
        self.padding = padding.lower()

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        channels = self._last_dim(input_shape, 4)
        self._create((*self.kernel_size, channels, self.filters), self.filters)

    def call(self, inputs: Any) -> Tensor:
        return self._epilogue(nn.conv2d(inputs, self.kernel, self.strides,
                                        self.padding.upper()))


def _pair(value: int | Sequence[int], name: str) -> tuple[int, int]:
    values = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(values) != 2 or min(int(v) for v in values) < 1:
        raise ValueError(f"Conv2D: {name} must be a positive int or a pair, got {value!r}")
    return int(values[0]), int(values[1])


class Flatten(Layer):
    """``[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]``."""

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        rest = inputs.shape[1:]
        if None in rest:
            raise ValueError(f"Flatten: the non-batch dims must be known, got shape "
                             f"{format_shape(inputs.shape)}{describe_location()}")
        return reshape(inputs, (-1, math.prod(rest)))


class Sequential(Layer):
    """Layers (or any callables) applied in order: ``Sequential([Dense(64, "relu"),
    Dense(10)])``. Its variables are its layers' variables, in layer order."""

    def __init__(self, layers: Iterable[Callable] | None = None, trainable: bool = True,
                 name: str | None = None) -> None:
        super().__init__(trainable=trainable, name=name)
        self.layers: list[Callable] = []
        for layer in layers or ():
            self.add(layer)

    def add(self, layer: Callable) -> None:
        if not callable(layer):
            raise TypeError(f"Sequential: layers must be callable, got {type(layer).__name__}")
        self.layers.append(layer)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Nothing to do: each layer builds itself on its first call."""

    def call(self, inputs: Any) -> Any:
        outputs = inputs
        for layer in self.layers:
            outputs = layer(outputs)
        return outputs

