"""`sf.keras.models`: Keras' model classes and its saving functions.

`save_model` and `load_model` use stageflow's saved-function format (`sf.saved`): a saved
model loads as a callable object over live variables, without its Python class; a path
ending in ``.keras`` is a Keras archive instead (`sf.keras.saving`).
"""

from typing import TYPE_CHECKING, Any

from stageflow.core import lazy as _lazy
from stageflow.core.exports import public_dir as _public_dir
from stageflow.models import keras_archive as _archive
from stageflow.models import serializable as _serializable
from stageflow.models.layers.sequential import Sequential
from stageflow.models.training import Model

if TYPE_CHECKING:
    from stageflow.saved import load as _loading
else:  # the loader brings the IR's parser: not loaded with `sf.keras`
    _loading = _lazy.module("stageflow.saved.load")

__all__ = ["Model", "Sequential", "clone_model", "load_model", "save_model"]
__dir__ = _public_dir(globals())


def save_model(model: Model, filepath: str, overwrite: bool = True) -> None:
    """``model.save(filepath)``.

    >>> import shutil, tempfile
    >>> x = sf.keras.Input((2,))
    >>> model = sf.keras.Model(x, sf.keras.layers.Dense(1, kernel_initializer="ones")(x))
    >>> directory = tempfile.mkdtemp()
    >>> sf.keras.models.save_model(model, directory)
    >>> sf.keras.models.load_model(directory)(sf.ones((1, 2)))
    sf.Tensor([[2.]], shape=(1, 1), dtype=float32)
    >>> shutil.rmtree(directory)
    """
    model.save(filepath, overwrite=overwrite)


def load_model(filepath: str, custom_objects: dict | None = None, compile: bool = True,  # noqa: A002 - Keras' name
               safe_mode: bool = True) -> object:
    """A model saved by `Model.save`, as a callable `sf.saved.LoadedModule` (see there);
    from a ``.keras`` archive, a model of its own class (`sf.keras.saving.load_model`).

    >>> import shutil, tempfile
    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(3,))])
    >>> directory = tempfile.mkdtemp()
    >>> model.save(directory)
    >>> sf.keras.models.load_model(directory)(sf.ones((2, 3))).shape
    (2, 1)
    >>> shutil.rmtree(directory)
    """
    del compile
    if str(filepath).endswith(".keras"):
        return _archive.load(filepath, custom_objects, safe_mode)
    return _loading.load(filepath)


def clone_model(model: Model, input_tensors: Any = None, clone_function: Any = None,
                **kwargs: Any) -> Model:
    """A new model of the same layers' configs (Keras' ``clone_model``): new layers, with
    new weights (not the model's: copy them with ``set_weights(model.get_weights())``).

    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(2, input_shape=(3,))])
    >>> clone = sf.keras.models.clone_model(model)
    >>> clone.layers[0] is model.layers[0], [tuple(v.shape) for v in clone.variables]
    (False, [(3, 2), (2,)])
    """
    if input_tensors is not None or clone_function is not None or kwargs:
        raise NotImplementedError("clone_model: input_tensors, clone_function and the other "
                                  "options are not supported")
    return _serializable.deserialize(_serializable.serialize(model))
