"""`sf.keras.activations`: Keras 3's activation functions, and `get`, `serialize` and
`deserialize` between them and their names.

>>> layer = sf.keras.layers.Dense(1, activation=sf.keras.activations.relu,
...                               kernel_initializer="ones")
>>> layer(sf.constant([[-1.0, -2.0]]))
sf.Tensor([[0.]], shape=(1, 1), dtype=float32)
"""

from collections.abc import Callable
from typing import Any

from stageflow.core.exports import public_dir as _public_dir
from stageflow.models import serializable as _serializable
from stageflow.models.activation_functions import (
    elu,
    exponential,
    gelu,
    hard_sigmoid,
    leaky_relu,
    linear,
    mish,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    softmax,
    softplus,
    softsign,
    swish,
    tanh,
)

__all__ = ["deserialize", "elu", "exponential", "gelu", "get", "hard_sigmoid", "leaky_relu",
           "linear", "mish", "relu", "relu6", "selu", "serialize", "sigmoid", "silu", "softmax",
           "softplus", "softsign", "swish", "tanh"]
__dir__ = _public_dir(globals())

_BY_NAME: dict[str, Callable[..., Any]] = {
    fn.__name__: fn for fn in (elu, exponential, gelu, hard_sigmoid, leaky_relu, linear, mish,
                               relu, relu6, selu, sigmoid, silu, softmax, softplus, softsign,
                               tanh)}
_BY_NAME["swish"] = silu


def serialize(activation: Callable[..., Any]) -> Any:
    """An activation's name (``swish`` is ``"silu"``, as in Keras); a function of your own
    as its registered name and module.

    >>> sf.keras.activations.serialize(sf.keras.activations.relu)
    'relu'
    """
    for name, fn in _BY_NAME.items():
        if fn is activation:
            return name
    return _serializable.serialize(activation)


def deserialize(config: Any, custom_objects: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The activation `serialize` wrote: a name, else a serialized function of your own.

    >>> sf.keras.activations.deserialize("tanh") is sf.keras.activations.tanh
    True
    """
    if isinstance(config, str):
        if custom_objects and config in custom_objects:
            return custom_objects[config]
        if config in _BY_NAME:
            return _BY_NAME[config]
        found = _serializable.get_registered_object(config, custom_objects)
        if found is None:
            raise ValueError(f"sf.keras.activations: unknown activation {config!r} (one of "
                             f"{', '.join(sorted(_BY_NAME))})")
        return found
    return _serializable.deserialize(config, custom_objects)


def get(identifier: Any) -> Callable[..., Any]:
    """An activation from a name, a serialized one, or a callable (returned); None is
    `linear`, as in Keras.

    >>> sf.keras.activations.get("relu")(sf.constant([-1.0, 1.0]))
    sf.Tensor([0., 1.], shape=(2,), dtype=float32)
    >>> sf.keras.activations.get(None) is sf.keras.activations.linear
    True
    """
    if identifier is None:
        return linear
    if isinstance(identifier, str | dict):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    raise TypeError(f"sf.keras.activations: cannot interpret {identifier!r} as an activation")
