"""More of TensorFlow's `tf.nn`, as composites of existing ops: `selu`, `l2_loss`,
`weighted_cross_entropy_with_logits`, `local_response_normalization`, `atrous_conv2d`,
N-d `max_pool`/`avg_pool`/`pool` (the 1-d and 2-d cases), and `top_k`/`in_top_k` (the
`sf.math` ops) under `sf.nn`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.ops.nn import avg_pool2d, conv2d, max_pool2d
from stageflow.frontend.ops.ranking import in_top_k
from stageflow.frontend.ops.reductions import reduce_sum
from stageflow.frontend.ops.shape import expand_dims, pad
from stageflow.frontend.ops.shape import squeeze as _squeeze
from stageflow.frontend.ops.sorting import top_k
from stageflow.frontend.tensor import Tensor

__all__ = ["atrous_conv2d", "avg_pool", "in_top_k", "l2_loss", "local_response_normalization",
           "max_pool", "pool", "selu", "top_k", "weighted_cross_entropy_with_logits"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(features: Any) -> Tensor:
    """The scaled exponential linear unit, ``scale * (x if x > 0 else alpha * (exp(x) - 1))``
    with TensorFlow's self-normalising constants (``tf.nn.selu``).

    >>> sf.nn.selu([-1.0, 1.0])
    sf.Tensor([-1.1113307,  1.050701 ], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(features)
    negative = ew.cast(_SELU_ALPHA, x.dtype) * ew.expm1(ew.minimum(x, ew.cast(0, x.dtype)))
    return ew.cast(_SELU_SCALE, x.dtype) * ew.where(ew.greater(x, 0), x, negative)


def l2_loss(t: Any) -> Tensor:
    """Half the sum of the squares, ``sum(t ** 2) / 2`` (TensorFlow's ``tf.nn.l2_loss``: a
    weight-decay term).

    >>> sf.nn.l2_loss([1.0, 2.0])
    sf.Tensor(2.5, shape=(), dtype=float32)
    """
    t = convert_to_tensor(t)
    return reduce_sum(ew.square(t)) / ew.cast(2, t.dtype)


def weighted_cross_entropy_with_logits(labels: Any, logits: Any, pos_weight: Any) -> Tensor:
    """The sigmoid cross-entropy with the positive term weighted by `pos_weight`,
    ``labels * -log(sigmoid(logits)) * pos_weight + (1 - labels) * -log(1 - sigmoid(logits))``,
    computed without overflow (TensorFlow's ``tf.nn.weighted_cross_entropy_with_logits``:
    recall traded against precision).

    >>> sf.nn.weighted_cross_entropy_with_logits([1.0, 0.0], [0.5, -1.0], 2.0)
    sf.Tensor([0.948154 , 0.313261...], shape=(2,), dtype=float32)
    """
    labels, logits = binary_operands(labels, logits)
    weight = 1 + (ew.cast(pos_weight, logits.dtype) - 1) * labels
    softplus_negative = ew.log1p(ew.exp(-ew.abs(logits))) + ew.maximum(-logits, 0)
    return (1 - labels) * logits + weight * softplus_negative


def local_response_normalization(input: Any, depth_radius: int = 5,  # noqa: A002
                                 bias: float = 1.0, alpha: float = 1.0,
                                 beta: float = 0.5) -> Tensor:
    """Each value divided by ``(bias + alpha * sum of squares over the 2 * depth_radius + 1
    neighbouring channels) ** beta`` (TensorFlow's ``tf.nn.local_response_normalization``,
    AlexNet's normalisation; input [N, H, W, C]).

    >>> x = sf.reshape(sf.range(4.0), (1, 1, 1, 4))
    >>> sf.reshape(sf.nn.local_response_normalization(x, depth_radius=1), (4,))
    sf.Tensor([0. , 0.408248..., 0.516397..., 0.801783...], shape=(4,), dtype=float32)
    """
    x = convert_to_tensor(input)
    if x.ndim != 4:
        raise ValueError(f"local_response_normalization: needs a 4-d input, got "
                         f"{list(x.shape)}{describe_location()}")
    radius, channels = int(depth_radius), x.shape[-1]
    padded = pad(ew.square(x), [[0, 0], [0, 0], [0, 0], [radius, radius]])
    window = padded[..., 0:channels]
    for offset in range(1, 2 * radius + 1):
        window = window + padded[..., offset:offset + channels]
    scale = ew.cast(bias, x.dtype) + ew.cast(alpha, x.dtype) * window
    return x * ew.pow(scale, ew.cast(-beta, x.dtype))


def atrous_conv2d(value: Any, filters: Any, rate: int, padding: str) -> Tensor:
    """A 2-d convolution with the filter dilated by `rate` (holes of ``rate - 1`` between its
    taps), stride 1 (TensorFlow's ``tf.nn.atrous_conv2d``; `sf.nn.conv2d` with
    ``dilations=rate``).

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> sf.reshape(sf.nn.atrous_conv2d(x, sf.ones((2, 2, 1, 1)), 2, "VALID"), (2, 2))
    sf.Tensor([[20., 24.],
               [36., 40.]], shape=(2, 2), dtype=float32)
    """
    return conv2d(value, filters, strides=1, padding=padding, dilations=int(rate))


def _window(value: Any, spatial: int, name: str) -> list[int]:
    values = [int(value)] if isinstance(value, int) else [int(v) for v in value]
    if len(values) == 1:
        return values * spatial
    if len(values) == spatial + 2:
        return values[1:-1]
    if len(values) != spatial:
        raise ValueError(f"pool: {name} must have 1, {spatial} or {spatial + 2} entries, got "
                         f"{values}{describe_location()}")
    return values


def _pool(kind: str, input: Any, ksize: Any, strides: Any, padding: str,  # noqa: A002
          data_format: str | None) -> Tensor:
    x = convert_to_tensor(input)
    spatial = x.ndim - 2
    if spatial not in (1, 2):
        raise ValueError(f"{kind}_pool: supports 1-d and 2-d pooling (inputs of rank 3 or 4), "
                         f"got rank {x.ndim}{describe_location()}")
    if data_format not in (None, "NWC", "NHWC"):
        raise ValueError(f"{kind}_pool: data_format must be channels-last, got "
                         f"{data_format!r}{describe_location()}")
    window, stride = _window(ksize, spatial, "ksize"), _window(strides, spatial, "strides")
    pool2d = max_pool2d if kind == "max" else avg_pool2d
    if spatial == 2:
        return pool2d(x, window, stride, padding)
    out = pool2d(expand_dims(x, 1), [1, *window], [1, *stride], padding)
    return _squeeze(out, 1)


def max_pool(input: Any, ksize: Any, strides: Any, padding: str,  # noqa: A002
             data_format: str | None = None) -> Tensor:
    """The maximum over each window of a [N, W, C] or [N, H, W, C] input (TensorFlow's
    ``tf.nn.max_pool``, its 1-d and 2-d cases): `ksize` and `strides` an int, one per
    spatial dim, or one per dim.

    >>> x = sf.reshape(sf.range(8.0), (1, 8, 1))
    >>> sf.reshape(sf.nn.max_pool(x, 2, 2, "VALID"), (4,))
    sf.Tensor([1., 3., 5., 7.], shape=(4,), dtype=float32)
    """
    return _pool("max", input, ksize, strides, padding, data_format)


def avg_pool(input: Any, ksize: Any, strides: Any, padding: str,  # noqa: A002
             data_format: str | None = None) -> Tensor:
    """The mean over each window of a [N, W, C] or [N, H, W, C] input, padding not counted
    (TensorFlow's ``tf.nn.avg_pool``, its 1-d and 2-d cases).

    >>> x = sf.reshape(sf.range(8.0), (1, 8, 1))
    >>> sf.reshape(sf.nn.avg_pool(x, 2, 2, "VALID"), (4,))
    sf.Tensor([0.5, 2.5, 4.5, 6.5], shape=(4,), dtype=float32)
    """
    return _pool("avg", input, ksize, strides, padding, data_format)


def pool(input: Any, window_shape: Sequence[int], pooling_type: str,  # noqa: A002
         strides: Sequence[int] | None = None, padding: str = "VALID",
         data_format: str | None = None, dilations: Sequence[int] | None = None) -> Tensor:
    """`max_pool` or `avg_pool` by `pooling_type` ("MAX" or "AVG"), strides 1 by default
    (TensorFlow's ``tf.nn.pool``; dilations other than 1 are not supported).

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> sf.reshape(sf.nn.pool(x, [2, 2], "MAX", strides=[2, 2]), (2, 2))
    sf.Tensor([[ 5.,  7.],
               [13., 15.]], shape=(2, 2), dtype=float32)
    """
    if dilations is not None and any(int(d) != 1 for d in dilations):
        raise NotImplementedError(f"pool: dilations other than 1{describe_location()}")
    kinds = {"MAX": "max", "AVG": "avg"}
    if pooling_type not in kinds:
        raise ValueError(f"pool: pooling_type must be 'MAX' or 'AVG', got {pooling_type!r}"
                         f"{describe_location()}")
    strides = [1] * len(window_shape) if strides is None else strides
    return _pool(kinds[pooling_type], input, window_shape, strides, padding, data_format)

