"""Keras 3's activation functions, with its arguments: those `sf.nn` lacks are made of
elementwise ops, so they differentiate and stage like any."""

from __future__ import annotations

from typing import Any

from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import nn
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor

__all__ = ["elu", "exponential", "gelu", "hard_sigmoid", "leaky_relu", "linear", "mish", "relu",
           "relu6", "selu", "sigmoid", "silu", "softmax", "softplus", "softsign", "swish",
           "tanh"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _float(x: Any) -> Tensor:
    """`x` as a tensor: Python numbers and lists as float32."""
    return convert_to_tensor(x) if hasattr(x, "dtype") else convert_to_tensor(x, "float32")


def relu(x: Any, negative_slope: float = 0.0, max_value: float | None = None,
         threshold: float = 0.0) -> Tensor:
    """max(x, 0); with Keras' arguments: `negative_slope` times ``x - threshold`` at and
    below `threshold`, and at most `max_value`.

    >>> sf.keras.activations.relu(sf.constant([-2.0, 1.0, 8.0]), negative_slope=0.5,
    ...                           max_value=6.0)
    sf.Tensor([-1.,  1.,  6.], shape=(3,), dtype=float32)
    """
    x = _float(x)
    if negative_slope == 0.0 and max_value is None and threshold == 0.0:
        return nn.relu(x)
    out = ew.where(x > threshold, x, negative_slope * (x - threshold))
    if max_value is not None:
        out = ew.minimum(out, ew.cast(max_value, x.dtype))
    return out


def leaky_relu(x: Any, negative_slope: float = 0.2) -> Tensor:
    """x where x > 0, else ``negative_slope * x``.

    >>> sf.keras.activations.leaky_relu(sf.constant([-1.0, 2.0]))
    sf.Tensor([-0.2,  2. ], shape=(2,), dtype=float32)
    """
    return nn.leaky_relu(_float(x), alpha=negative_slope)


def relu6(x: Any) -> Tensor:
    """min(max(x, 0), 6).

    >>> sf.keras.activations.relu6(sf.constant([-1.0, 7.0]))
    sf.Tensor([0., 6.], shape=(2,), dtype=float32)
    """
    return nn.relu6(_float(x))


def elu(x: Any, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else ``alpha * (exp(x) - 1)``.

    >>> sf.keras.activations.elu(sf.constant([0.0, 2.0]))
    sf.Tensor([0., 2.], shape=(2,), dtype=float32)
    """
    x = _float(x)
    return nn.elu(x) if alpha == 1.0 else ew.where(x > 0, x, alpha * ew.expm1(x))


def selu(x: Any) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants of Klambauer et al.

    >>> sf.keras.activations.selu(sf.constant([0.0]))
    sf.Tensor([0.], shape=(1,), dtype=float32)
    """
    x = _float(x)
    return _SELU_SCALE * ew.where(x > 0, x, _SELU_ALPHA * ew.expm1(x))


def gelu(x: Any, approximate: bool = False) -> Tensor:
    """x times the unit normal's CDF at x (its tanh approximation with `approximate`).

    >>> sf.keras.activations.gelu(sf.constant([0.0]))
    sf.Tensor([0.], shape=(1,), dtype=float32)
    """
    return nn.gelu(_float(x), approximate=approximate)


def sigmoid(x: Any) -> Tensor:
    """1 / (1 + exp(-x)).

    >>> sf.keras.activations.sigmoid(sf.constant([0.0]))
    sf.Tensor([0.5], shape=(1,), dtype=float32)
    """
    return nn.sigmoid(_float(x))


def hard_sigmoid(x: Any) -> Tensor:
    """``relu6(x + 3) / 6``: Keras 3's piecewise-linear sigmoid.

    >>> sf.keras.activations.hard_sigmoid(sf.constant([-3.0, 0.0, 3.0]))
    sf.Tensor([0. , 0.5, 1. ], shape=(3,), dtype=float32)
    """
    return nn.relu6(_float(x) + 3.0) / 6.0


def tanh(x: Any) -> Tensor:
    """The hyperbolic tangent.

    >>> sf.keras.activations.tanh(sf.constant([0.0]))
    sf.Tensor([0.], shape=(1,), dtype=float32)
    """
    return nn.tanh(_float(x))


def silu(x: Any) -> Tensor:
    """``x * sigmoid(x)`` (also called swish).

    >>> sf.keras.activations.silu(sf.constant([0.0]))
    sf.Tensor([0.], shape=(1,), dtype=float32)
    """
    return nn.silu(_float(x))


swish = silu


def mish(x: Any) -> Tensor:
    """``x * tanh(softplus(x))``.

    >>> sf.keras.activations.mish(sf.constant([0.0]))
    sf.Tensor([0.], shape=(1,), dtype=float32)
    """
    x = _float(x)
    return x * nn.tanh(nn.softplus(x))


def softplus(x: Any) -> Tensor:
    """log(exp(x) + 1).

    >>> round(float(sf.keras.activations.softplus(sf.constant(0.0))), 4)
    0.6931
    """
    return nn.softplus(_float(x))


def softsign(x: Any) -> Tensor:
    """x / (|x| + 1).

    >>> sf.keras.activations.softsign(sf.constant([1.0, -3.0]))
    sf.Tensor([ 0.5 , -0.75], shape=(2,), dtype=float32)
    """
    x = _float(x)
    return x / (ew.abs(x) + 1.0)


def exponential(x: Any) -> Tensor:
    """exp(x).

    >>> sf.keras.activations.exponential(sf.constant([0.0]))
    sf.Tensor([1.], shape=(1,), dtype=float32)
    """
    return ew.exp(_float(x))


def softmax(x: Any, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis`.

    >>> sf.keras.activations.softmax(sf.constant([[0.0, 0.0]]))
    sf.Tensor([[0.5, 0.5]], shape=(1, 2), dtype=float32)
    """
    return nn.softmax(_float(x), axis=axis)


def linear(x: Any) -> Any:
    """x, unchanged.

    >>> sf.keras.activations.linear(sf.constant([-1.0]))
    sf.Tensor([-1.], shape=(1,), dtype=float32)
    """
    return x
