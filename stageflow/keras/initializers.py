"""`sf.keras.initializers`: Keras' initializer classes, their snake-case aliases (the classes
themselves, as in Keras 3), and `get`, `serialize`, `deserialize`.

>>> layer = sf.keras.layers.Dense(2, kernel_initializer=sf.keras.initializers.Constant(0.5))
>>> layer(sf.ones((1, 2)))
sf.Tensor([[1. 1.]], shape=(1, 2), dtype=float32)
"""

from typing import Any

from stageflow.core.exports import public_dir as _public_dir
from stageflow.models import serializable as _serializable
from stageflow.models.initializer_classes import (
    Constant,
    GlorotNormal,
    GlorotUniform,
    HeNormal,
    HeUniform,
    Identity,
    Initializer,
    LecunNormal,
    LecunUniform,
    Ones,
    Orthogonal,
    RandomNormal,
    RandomUniform,
    TruncatedNormal,
    VarianceScaling,
    Zeros,
)

constant = Constant
glorot_normal = GlorotNormal
glorot_uniform = GlorotUniform
he_normal = HeNormal
he_uniform = HeUniform
identity = Identity
lecun_normal = LecunNormal
lecun_uniform = LecunUniform
ones = Ones
orthogonal = Orthogonal
random_normal = RandomNormal
random_uniform = RandomUniform
truncated_normal = TruncatedNormal
variance_scaling = VarianceScaling
zeros = Zeros

__all__ = ["Constant", "GlorotNormal", "GlorotUniform", "HeNormal", "HeUniform", "Identity",
           "Initializer", "LecunNormal", "LecunUniform", "Ones", "Orthogonal", "RandomNormal",
           "RandomUniform", "TruncatedNormal", "VarianceScaling", "Zeros", "constant",
           "deserialize", "get", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
           "identity", "lecun_normal", "lecun_uniform", "ones", "orthogonal", "random_normal",
           "random_uniform", "serialize", "truncated_normal", "variance_scaling", "zeros"]
__dir__ = _public_dir(globals())

_CLASSES = {cls.__name__: cls for cls in (
    Constant, GlorotNormal, GlorotUniform, HeNormal, HeUniform, Identity, LecunNormal,
    LecunUniform, Ones, Orthogonal, RandomNormal, RandomUniform, TruncatedNormal,
    VarianceScaling, Zeros)}
_NAMES = {name: cls for name, cls in globals().items()
          if name.islower() and isinstance(cls, type) and cls in _CLASSES.values()}
_NAMES["uniform"] = RandomUniform
_NAMES["normal"] = RandomNormal


def serialize(initializer: Initializer) -> dict[str, Any]:
    """An initializer as Keras' JSON config: its class's name and config.

    >>> sf.keras.initializers.serialize(sf.keras.initializers.Constant(2.0))["config"]
    {'value': 2.0}
    """
    return _serializable.serialize(initializer)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Any:
    """The initializer `serialize` wrote.

    >>> init = sf.keras.initializers.Constant(2.0)
    >>> sf.keras.initializers.deserialize(sf.keras.initializers.serialize(init)).value
    2.0
    """
    return _serializable.deserialize(config, custom_objects)


def get(identifier: Any) -> Any:
    """An initializer from a name (``"glorot_uniform"``, ``"GlorotUniform"``), a config, a
    class (made without arguments), or an initializer or callable (returned); None for None.

    >>> sf.keras.initializers.get("he_normal")
    <...HeNormal object at ...>
    >>> sf.keras.initializers.get({"class_name": "Constant", "config": {"value": 1.0}}).value
    1.0
    """
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        cls = _CLASSES.get(identifier.get("class_name")) or _serializable.get_registered_object(
            identifier.get("class_name", ""))
        if cls is None:
            raise ValueError(f"sf.keras.initializers: unknown initializer {identifier!r}")
        return cls.from_config(identifier.get("config", {}))
    if isinstance(identifier, str):
        cls = _NAMES.get(identifier) or _CLASSES.get(identifier)
        if cls is None:
            raise ValueError(f"sf.keras.initializers: unknown initializer {identifier!r} (one "
                             f"of {', '.join(sorted(_NAMES))})")
        return cls()
    if isinstance(identifier, type):
        return identifier()
    if callable(identifier):
        return identifier
    raise ValueError(f"sf.keras.initializers: cannot interpret {identifier!r} as an "
                     f"initializer")
