"""`sf.keras.saving`: Keras' saving functions and its registry of serializable classes.

A model saved to a path ending in ``.keras`` is a Keras archive: its config and weights,
loaded back as a model of its own class; classes of your own are found by the name
`register_keras_serializable` gives them.

>>> import os, tempfile
>>> @sf.keras.saving.register_keras_serializable(package="Doc")
... class Shift(sf.keras.layers.Layer):
...     def __init__(self, amount, **kwargs):
...         super().__init__(**kwargs)
...         self.amount = amount
...     def call(self, x):
...         return x + self.amount
>>> x = sf.keras.Input((2,))
>>> model = sf.keras.Model(x, Shift(1.0)(x))
>>> path = os.path.join(tempfile.mkdtemp(), "shift.keras")
>>> model.save(path)
>>> sf.keras.saving.load_model(path)(sf.zeros((1, 2)))
sf.Tensor([[1. 1.]], shape=(1, 2), dtype=float32)
"""

from typing import Any

from stageflow.core.exports import public_dir as _public_dir
from stageflow.keras import models as _models
from stageflow.models import keras_archive as _archive
from stageflow.models.serializable import (
    deserialize as deserialize_keras_object,
)
from stageflow.models.serializable import (
    get_registered_name,
    get_registered_object,
    register_keras_serializable,
)
from stageflow.models.serializable import (
    serialize as serialize_keras_object,
)

__all__ = ["deserialize_keras_object", "get_registered_name", "get_registered_object",
           "load_model", "register_keras_serializable", "save_model",
           "serialize_keras_object"]
__dir__ = _public_dir(globals())


def save_model(model: Any, filepath: str, overwrite: bool = True) -> None:
    """``model.save(filepath)``: a ``.keras`` path is a Keras archive."""
    model.save(filepath, overwrite=overwrite)


def load_model(filepath: str, custom_objects: dict[str, Any] | None = None,
               compile: bool = True, safe_mode: bool = True) -> Any:  # noqa: A002 - Keras' name
    """A model `Model.save` wrote: from a ``.keras`` archive, a model of its own class
    (its custom classes registered, or named in `custom_objects`; a lambda's code only
    with `safe_mode` off), its weights restored; otherwise as
    `sf.keras.models.load_model`."""
    del compile  # the archive holds no optimizer
    if str(filepath).endswith(".keras"):
        return _archive.load(filepath, custom_objects, safe_mode)
    return _models.load_model(filepath)
