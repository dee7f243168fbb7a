"""`sf.layers`: Keras-style layers — modules that create their variables on first call.

A layer's `build(input_shape)` runs on its first call, when the input's last dim is known;
its variables get Glorot-uniform kernels and zero biases, as Keras does. Inside
`sf.function` the first call happens while tracing: initial values are computed eagerly
(initializers run under `sf.init_scope`), so the first trace creates the variables and the
function is traced once more to use them (the paper's state-creation rule). Layers are
`sf.Module`s, so their variables are tracked through attributes like any module's.

``training=`` (Keras' argument) is a Python bool decided at trace time: a staged function
taking it as an argument is traced once per mode. Layers whose `call` takes it (batch norm,
dropout, `Sequential`) get the caller's value, or the enclosing layer call's, or False.
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.shapes import format_shape, normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.activations import get_activation
from stageflow.frontend.composite import Composite
from stageflow.frontend.initializers import get_initializer
from stageflow.frontend.module import Module, camel_to_snake
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import nn
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.linalg import matmul
from stageflow.frontend.ops.reductions import reduce_mean
from stageflow.frontend.ops.shape import reshape
from stageflow.frontend.tape import stop_gradient
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable

__all__ = ["Add", "AveragePooling2D", "BatchNormalization", "Conv2D", "Dense", "Dropout",
           "Flatten", "GlobalAveragePooling2D", "Layer", "MaxPool2D", "ReLU", "Sequential",
           "get_activation", "get_initializer"]

_name_counts: dict[str, int] = {}


def _unique_name(base: str) -> str:
    """Keras' default layer names: ``dense``, ``dense_1``, ``dense_2``, ..."""
    count = _name_counts.get(base, 0)
    _name_counts[base] = count + 1
    return base if count == 0 else f"{base}_{count}"


# --------------------------------------------------------------------------- layers


class Layer(Module):
    """A module whose `build(input_shape)` runs once, on its first call, before `call`.

    ``trainable=False`` freezes the layer: its variables (and its sub-layers') are made
    non-trainable, so tapes do not watch them and `trainable_variables` leaves them out.

    Subclass it with a `build` that creates the variables with `add_weight` (the input's
    shape is known by then, so no layer asks for its input size) and a `call`; variables
    take the input's floating dtype, else float32:

    >>> class Scale(sf.layers.Layer):
    ...     def build(self, input_shape):
    ...         self.w = self.add_weight("w", (input_shape[-1],), "ones")
    ...     def call(self, inputs):
    ...         return inputs * self.w
    >>> layer = Scale(name="scale")
    >>> layer(sf.constant([[1.0, 2.0, 3.0]], sf.float64))
    sf.Tensor([[1., 2., 3.]], shape=(1, 3), dtype=float64)
    >>> layer.w
    sf.Variable([1., 1., 1.], name='scale/w', shape=(3,), dtype=float64)
    >>> layer.trainable = False
    >>> layer.trainable_variables
    []
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

    def __call__(self, inputs: Any, *args: Any, training: Any = None, **kwargs: Any) -> Any:
        """Build on the first call, then `call`. ``training`` (Keras' argument) is given
        to `call` when it takes one: this call's value, else that of the layer call this
        one runs in (a block calling its batch norm without passing it), else False."""
        if not self.built:
            if not hasattr(inputs, "shape"):
                inputs = convert_to_tensor(inputs)
            self._dtype = self._variable_dtype(getattr(inputs, "dtype", None))
            self.build(tuple(inputs.shape))
            self.built = True
        training = _resolve_training(training)
        if takes_training(self.call):
            kwargs["training"] = training
        # The mode pushed for the calls inside, without a context manager: a generator-based
        # one cost 1.5 us of a layer call's 4.5 (the small ResNet's step makes 22).
        modes = _training_modes()
        modes.append(training)
        try:
            return self.call(inputs, *args, **kwargs)
        finally:
            modes.pop()

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


# --------------------------------------------------------------------------- training mode

# The training mode of the layer calls in progress on this thread, innermost last.
_training_stack = threading.local()


def _resolve_training(training: Any) -> bool:
    """An explicit value wins; otherwise the enclosing layer call's; otherwise False."""
    if training is not None:
        return bool(training)
    stack = getattr(_training_stack, "modes", None)
    return stack[-1] if stack else False


def _training_modes() -> list[bool]:
    """This thread's stack of the modes of the layer calls in progress."""
    try:
        return _training_stack.modes
    except AttributeError:
        modes = _training_stack.modes = []
        return modes


# Signatures are read once per function (the check runs on every layer call).
_TAKES_TRAINING: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def takes_training(fn: Callable) -> bool:
    """Whether `fn` (a layer, a module with a `call`, a function) has a ``training``
    parameter: `Sequential` passes the mode only to those (a lambda would reject it)."""
    if isinstance(fn, Layer):
        return True  # `Layer.__call__` takes it, whether or not its `call` does
    if isinstance(fn, Module) and hasattr(fn, "call"):
        fn = fn.call
    key = getattr(fn, "__func__", fn)
    try:
        return _TAKES_TRAINING[key]
    except (KeyError, TypeError):  # not seen yet, or not weakly referable
        pass
    try:
        takes = "training" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        takes = False
    try:
        _TAKES_TRAINING[key] = takes
    except TypeError:
        pass
    return takes


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

    Inputs ``[..., input_dim]`` (rank 1 or more), outputs ``[..., units]`` of the
    variables' dtype.

    >>> layer = sf.layers.Dense(4, activation="relu")
    >>> y = layer(sf.ones((2, 3)))          # the first call creates the variables
    >>> y.shape, y.dtype.name
    ((2, 4), 'float32')
    >>> layer.kernel.shape, layer.bias.shape
    ((3, 4), (4,))
    >>> sf.layers.Dense(2, kernel_initializer="ones")(sf.constant([[1.0, 2.0, 3.0]]))
    sf.Tensor([[6., 6.]], shape=(1, 2), dtype=float32)
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


def _pair(value: int | Sequence[int], name: str, layer: str) -> tuple[int, int]:
    values = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(values) != 2 or min(int(v) for v in values) < 1:
        raise ValueError(f"{layer}: {name} must be a positive int or a pair, got {value!r}")
    return int(values[0]), int(values[1])


def _padding_mode(padding: Any, layer: str) -> str:
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(f"{layer}: padding must be 'valid' or 'same', got {padding!r}")
    return padding.lower()


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


class Sequential(Layer):
    """Layers (or any callables) applied in order: ``Sequential([Dense(64, "relu"),
    Dense(10)])``. Its variables are its layers' variables, in layer order, so an optimizer
    or a checkpoint given the model reaches them all.

    >>> model = sf.layers.Sequential([sf.layers.Dense(8, activation="relu"),
    ...                               sf.layers.Dropout(0.5),
    ...                               sf.layers.Dense(2)])
    >>> model(sf.ones((4, 3)), training=True).shape   # Dropout gets training=True
    (4, 2)
    >>> [v.shape for v in model.trainable_variables]
    [(3, 8), (8,), (8, 2), (2,)]
    """

    def __init__(self, layers: Iterable[Callable] | None = None, trainable: bool = True,
                 name: str | None = None) -> None:
        super().__init__(trainable=trainable, name=name)
        self.layers: list[Callable] = []
        for layer in layers or ():
            self.add(layer)

    def add(self, layer: Callable) -> None:
        if not callable(layer):
            raise TypeError(f"Sequential: layers must be callable, got {type(layer).__name__}")
        self.layers = [*self.layers, layer]  # an assignment: a restore may wait for it

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Nothing to do: each layer builds itself on its first call."""

    def call(self, inputs: Any, training: bool = False) -> Any:
        """Each layer in turn; those that take ``training`` get this call's mode."""
        outputs = inputs
        for layer in self.layers:
            if takes_training(layer):
                outputs = layer(outputs, training=training)
            else:
                outputs = layer(outputs)
        return outputs



# --------------------------------------------------------------------------- normalization


class BatchNormalization(Layer):
    """Batch normalization over the channel axis `axis` (-1: NHWC), Keras' layer.

    Training (``training=True``) normalises with the batch's mean and (biased) variance
    over every axis but `axis`, and moves the moving statistics towards them,
    ``moving = moving * momentum + batch * (1 - momentum)``, with `assign`: a staged step
    updates them too. Inference normalises with the moving statistics. Then ``gamma * x +
    beta`` where `scale` and `center`. As in Keras, a layer made non-trainable normalises
    with its moving statistics even in training (fine-tuning keeps them frozen).

    Inputs of any rank with a known channel dim, outputs of their shape and dtype;
    `gamma`, `beta` and the moving statistics are ``[channels]``.

    >>> bn = sf.layers.BatchNormalization(momentum=0.9)
    >>> x = sf.constant([[0.0, 10.0], [2.0, 30.0]])    # batch mean [1, 20], variance [1, 100]
    >>> np.round(bn(x, training=True).numpy(), 2)
    array([[-1., -1.],
           [ 1.,  1.]], dtype=float32)
    >>> bn.moving_mean.numpy()                       # 0.9 * 0 + 0.1 * [1, 20]
    array([0.1, 2. ], dtype=float32)
    >>> bn(x).shape                                  # inference: the moving statistics
    (2, 2)
    """

    def __init__(self, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True,
                 beta_initializer: str | Callable = "zeros",
                 gamma_initializer: str | Callable = "ones",
                 moving_mean_initializer: str | Callable = "zeros",
                 moving_variance_initializer: str | Callable = "ones",
                 trainable: bool = True, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.axis = int(axis)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center = bool(center)
        self.scale = bool(scale)
        self.initializers = {"beta": beta_initializer, "gamma": gamma_initializer,
                             "moving_mean": moving_mean_initializer,
                             "moving_variance": moving_variance_initializer}
        self.gamma: Variable | None = None
        self.beta: Variable | None = None
        self.moving_mean: Variable | None = None
        self.moving_variance: Variable | None = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        axis = self._channel_axis(len(input_shape))
        if input_shape[axis] is None:
            raise ValueError(f"BatchNormalization {self.name!r}: the channel dim (axis "
                             f"{self.axis}) must be known, got shape "
                             f"{format_shape(input_shape)}{describe_location()}")
        shape = (int(input_shape[axis]),)
        init = self.initializers
        if self.scale:
            self.gamma = self.add_weight("gamma", shape, init["gamma"])
        if self.center:
            self.beta = self.add_weight("beta", shape, init["beta"])
        self.moving_mean = self.add_weight("moving_mean", shape, init["moving_mean"],
                                           trainable=False)
        self.moving_variance = self.add_weight("moving_variance", shape,
                                               init["moving_variance"], trainable=False)

    def _channel_axis(self, ndim: int) -> int:
        try:
            return normalize_axis(self.axis, ndim)
        except ValueError:
            raise ValueError(f"BatchNormalization {self.name!r}: axis {self.axis} is out of "
                             f"range for inputs of rank {ndim}{describe_location()}") from None

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        inputs = convert_to_tensor(inputs)
        axis = self._channel_axis(inputs.ndim)
        gamma = None if self.gamma is None else self.gamma.read_value()
        beta = None if self.beta is None else self.beta.read_value()
        moving = self.moving_mean.read_value(), self.moving_variance.read_value()
        if training and self.trainable:
            normalize = _batch_norm_training(axis, inputs.ndim, self.epsilon, self.momentum)
            outputs, mean, variance = normalize(inputs, gamma, beta, *moving)
            self.moving_mean.assign(mean)
            self.moving_variance.assign(variance)
            return outputs
        return _batch_norm_inference(axis, inputs.ndim, self.epsilon)(inputs, gamma, beta,
                                                                       *moving)


@functools.cache
def _batch_norm_training(axis: int, ndim: int, epsilon: float, momentum: float) -> Composite:
    """Batch norm in training, one composite (eagerly one compiled call, forward and
    backward): the batch's mean and (biased) variance over every axis but `axis`, the
    normalised inputs, and the moving statistics moved towards the batch's,
    ``moving * momentum + batch * (1 - momentum)``."""
    reduced = tuple(a for a in range(ndim) if a != axis)

    def batch_norm_training(x: Tensor, gamma: Tensor | None, beta: Tensor | None,
                            moving_mean: Tensor, moving_variance: Tensor
                            ) -> tuple[Tensor, Tensor, Tensor]:
        mean = reduce_mean(x, reduced)
        # The variance's gradient through the mean is zero (the deviations sum to 0),
        # so the tape need not differentiate it (tf.nn.moments does the same).
        deviation = x - _per_channel(stop_gradient(mean), axis, ndim)
        variance = reduce_mean(ew.square(deviation), reduced)
        outputs = _normalize(x, mean, variance, gamma, beta, epsilon, axis)
        return (outputs,
                moving_mean * momentum + stop_gradient(mean) * (1.0 - momentum),
                moving_variance * momentum + stop_gradient(variance) * (1.0 - momentum))

    return Composite(batch_norm_training, "batch_norm_training")


@functools.cache
def _batch_norm_inference(axis: int, ndim: int, epsilon: float) -> Composite:
    """Batch norm with given statistics, one composite (eagerly one compiled pass)."""

    def batch_norm_inference(x: Tensor, gamma: Tensor | None, beta: Tensor | None,
                             mean: Tensor, variance: Tensor) -> Tensor:
        return _normalize(x, mean, variance, gamma, beta, epsilon, axis)

    return Composite(batch_norm_inference, "batch_norm_inference")


def _normalize(x: Tensor, mean: Tensor, variance: Tensor, gamma: Tensor | None,
               beta: Tensor | None, epsilon: float, axis: int) -> Tensor:
    """``x * inv + (beta - mean * inv)`` with ``inv = gamma / sqrt(variance + epsilon)``
    (TensorFlow's form): one multiply and one add over x, the rest per channel."""
    inv = ew.rsqrt(variance + epsilon)
    if gamma is not None:
        inv = inv * gamma
    shift = -(mean * inv)
    if beta is not None:
        shift = shift + beta
    return x * _per_channel(inv, axis, x.ndim) + _per_channel(shift, axis, x.ndim)


def _per_channel(values: Tensor, axis: int, ndim: int) -> Tensor:
    """Per-channel values shaped to broadcast against inputs whose channels are `axis`."""
    if axis == ndim - 1:
        return values
    shape = [1] * ndim
    shape[axis] = -1
    return reshape(values, shape)


# --------------------------------------------------------------------------- pooling


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


# --------------------------------------------------------------------------- others


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


class Add(Layer):
    """The sum of a list of inputs: ``Add()([residual, shortcut])`` closes a residual
    block. The inputs broadcast against each other, as `sf.add`'s do.

    >>> shortcut = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> sf.layers.Add()([sf.ones((2, 2)), shortcut])
    sf.Tensor([[2., 3.],
               [4., 5.]], shape=(2, 2), dtype=float32)
    """

    def __init__(self, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.built = True  # nothing to create, and the input is a list, not a tensor

    def call(self, inputs: Sequence[Any]) -> Tensor:
        if not isinstance(inputs, list | tuple) or not inputs:
            raise ValueError(f"Add: expected a non-empty list of tensors, got "
                             f"{type(inputs).__name__}{describe_location()}")
        total = convert_to_tensor(inputs[0])
        for value in inputs[1:]:
            total = ew.add(total, value)
        return total
