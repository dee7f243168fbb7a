"""Activations by name, for the `activation=` argument of layers (Keras' names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stageflow.frontend.ops import nn
from stageflow.frontend.tensor import Tensor
from stageflow.models import activation_functions as keras_fns

__all__ = ["ACTIVATIONS", "get_activation"]

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
    "selu": keras_fns.selu,
    "softsign": keras_fns.softsign,
    "exponential": keras_fns.exponential,
    "hard_sigmoid": keras_fns.hard_sigmoid,
    "mish": keras_fns.mish,
}


def get_activation(activation: str | Callable | None) -> Callable[[Any], Any] | None:
    """A callable for an activation given by name (``"relu"``, ...), callable, or None:
    what the layers' ``activation=`` argument accepts (None is no activation; an unknown
    name is a ValueError listing the known ones). The callable keeps shape and dtype.

    >>> relu = sf.layers.get_activation("relu")
    >>> relu(sf.constant([-1.0, 2.0]))
    sf.Tensor([0., 2.], shape=(2,), dtype=float32)
    >>> sf.layers.get_activation(sf.nn.gelu) is sf.nn.gelu, sf.layers.get_activation(None)
    (True, None)
    """
    if activation is None or callable(activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]
    names = ", ".join(sorted(ACTIVATIONS))
    raise ValueError(f"sf.layers: unknown activation {activation!r} (use a callable, None, "
                     f"or one of {names})")
