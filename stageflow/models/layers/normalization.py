"""Normalization layers: batch normalization and layer normalization.

Both compute in their variables' dtype: under a mixed policy (``mixed_bfloat16``) the
inputs come in bfloat16, are normalised in float32 (a mean of squares in bfloat16 loses
too much) and go out in bfloat16 again, as Keras' layers do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from stageflow.core.shapes import format_shape, normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.normalization import l2_normalize, layer_normalization
from stageflow.frontend.ops.reductions import reduce_mean
from stageflow.frontend.ops.shape import reshape
from stageflow.frontend.tape import stop_gradient
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.models.composite import Composite
from stageflow.models.initializers import get_initializer
from stageflow.models.layers.base import Layer

__all__ = ["BatchNormalization", "LayerNormalization", "UnitNormalization"]


class BatchNormalization(Layer):
    """Batch normalization over the channel axis `axis` (-1: NHWC), Keras' layer.

    Training (``training=True``) normalises with the batch's mean and (biased) variance
    over every axis but `axis`, and moves the moving statistics towards them,
    ``moving = moving * momentum + batch * (1 - momentum)``, with `assign`: a staged step
    updates them too. Inference normalises with the moving statistics. Then ``gamma * x +
    beta`` where `scale` and `center`. As in Keras, a layer made non-trainable normalises
    with its moving statistics even in training (fine-tuning keeps them frozen).

    Inputs of any rank with a known channel dim, outputs of their shape and dtype;
    `gamma`, `beta` and the moving statistics are ``[channels]``, in the variable dtype the
    normalisation computes in.

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
        # Replicas of a distribution strategy each update these from their own batch: every
        # copy takes the mean of the replicas' updates, as in Keras.
        self.moving_mean = self.add_weight("moving_mean", shape, init["moving_mean"],
                                           trainable=False, aggregation="mean")
        self.moving_variance = self.add_weight("moving_variance", shape,
                                               init["moving_variance"], trainable=False,
                                               aggregation="mean")

    def _channel_axis(self, ndim: int) -> int:
        try:
            return normalize_axis(self.axis, ndim)
        except ValueError:
            raise ValueError(f"BatchNormalization {self.name!r}: axis {self.axis} is out of "
                             f"range for inputs of rank {ndim}{describe_location()}") from None

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        given = convert_to_tensor(inputs)
        inputs = _as(given, self._variable_dtype(None))
        axis = self._channel_axis(inputs.ndim)
        gamma = None if self.gamma is None else self.gamma.read_value()
        beta = None if self.beta is None else self.beta.read_value()
        moving = self.moving_mean.read_value(), self.moving_variance.read_value()
        if training and self.trainable:
            normalize = _batch_norm_training(axis, inputs.ndim, self.epsilon, self.momentum)
            outputs, mean, variance = normalize(inputs, gamma, beta, *moving)
            self.moving_mean.assign(mean)
            self.moving_variance.assign(variance)
            return _as(outputs, given.dtype)
        normalize = _batch_norm_inference(axis, inputs.ndim, self.epsilon)
        return _as(normalize(inputs, gamma, beta, *moving), given.dtype)


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


class LayerNormalization(Layer):
    """Each example normalised over `axis` (the features) to mean 0 and variance 1, then
    ``* gamma + beta`` (learned, of the normalised dims' shape; `scale`/`center` False
    leaves them out). Unlike batch normalisation it needs no batch statistics, so training
    and inference compute the same; the shape and dtype are the input's.

    >>> ln = sf.layers.LayerNormalization()            # over the last axis
    >>> ln(sf.constant([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]]))
    sf.Tensor([[-1.2238274,  0.       ,  1.2238274],
               [-1.2247357,  0.       ,  1.2247357]], shape=(2, 3), dtype=float32)
    >>> ln.gamma.shape, ln.beta.shape
    ((3,), (3,))
    """

    def __init__(self, axis: int | Sequence[int] = -1, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True,
                 beta_initializer: str | Callable = "zeros",
                 gamma_initializer: str | Callable = "ones", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.axis = (axis,) if isinstance(axis, int) else tuple(axis)
        self.epsilon, self.center, self.scale = float(epsilon), bool(center), bool(scale)
        self.beta_initializer = get_initializer(beta_initializer)
        self.gamma_initializer = get_initializer(gamma_initializer)
        self.gamma = self.beta = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        rank = len(input_shape)
        axes = sorted(a % rank if -rank <= a < rank else _bad_axis(a, rank) for a in self.axis)
        self._axes = tuple(axes)
        shape = [1] * rank
        for a in axes:
            if input_shape[a] is None:
                raise ValueError(f"LayerNormalization: dim {a} of the input {input_shape} "
                                 f"must be known{describe_location()}")
            shape[a] = input_shape[a]
        shape = shape[min(axes):]  # broadcasts against the input's trailing dims
        if self.scale:
            self.gamma = self.add_weight("gamma", shape, self.gamma_initializer)
        if self.center:
            self.beta = self.add_weight("beta", shape, self.beta_initializer)

    def call(self, inputs: Any) -> Tensor:
        given = convert_to_tensor(inputs)
        gamma, beta = (None if v is None else v.read_value() for v in (self.gamma, self.beta))
        outputs = layer_normalization(_as(given, self._variable_dtype(None)), self._axes,
                                      self.epsilon, gamma, beta)
        return _as(outputs, given.dtype)


def _as(x: Tensor, dtype: Any) -> Tensor:
    return x if x.dtype == dtype else ew.cast(x, dtype)


def _bad_axis(axis: int, rank: int) -> int:
    raise ValueError(f"LayerNormalization: axis {axis} is out of range for rank {rank}"
                     f"{describe_location()}")


class UnitNormalization(Layer):
    """Each vector along `axis` (an int or a list) scaled to unit L2 norm:
    ``x / sqrt(max(sum(x**2), 1e-12))``.

    >>> sf.keras.layers.UnitNormalization()(sf.constant([[3.0, 4.0]]))
    sf.Tensor([[0.6, 0.8]], shape=(1, 2), dtype=float32)
    """

    def __init__(self, axis: int | Sequence[int] = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = axis if isinstance(axis, int) else list(axis)

    def call(self, inputs: Any) -> Tensor:
        return l2_normalize(convert_to_tensor(inputs), axis=self.axis, epsilon=1e-12)
