"""`sf.keras.utils`: Keras' utilities: one-hot labels, padding, normalization
(`stageflow.models.sequence_utils`), the `PyDataset` base of batch datasets
(`stageflow.models.py_dataset`), the seeding of every random stream at once, and the registry
of custom objects (`sf.keras.saving`'s)."""

from __future__ import annotations

import contextlib
import random as _random
from collections.abc import Iterator
from typing import Any

import numpy as np

from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.ops import random as _sf_random
from stageflow.models import serializable as _serializable
from stageflow.models.py_dataset import PyDataset
from stageflow.models.sequence_utils import normalize, pad_sequences, to_categorical
from stageflow.models.serializable import register_keras_serializable

Sequence = PyDataset

__all__ = ["PyDataset", "Sequence", "custom_object_scope", "get_custom_objects", "normalize",
           "pad_sequences", "register_keras_serializable", "set_random_seed", "to_categorical"]
__dir__ = _public_dir(globals())


def set_random_seed(seed: int) -> None:
    """Seed Python's `random`, NumPy's global generator and stageflow's
    (`sf.random.set_seed`) at once, as Keras' does for its backends.

    >>> sf.keras.utils.set_random_seed(3)
    >>> a = sf.random.uniform((2,)), np.random.rand()
    >>> sf.keras.utils.set_random_seed(3)
    >>> b = sf.random.uniform((2,)), np.random.rand()
    >>> bool(sf.reduce_all(a[0] == b[0])) and a[1] == b[1]
    True
    """
    if not isinstance(seed, int | np.integer):
        raise ValueError(f"set_random_seed: seed must be an int, got {seed!r}")
    _random.seed(int(seed))
    np.random.seed(int(seed))
    _sf_random.set_seed(int(seed))


def get_custom_objects() -> dict[str, Any]:
    """The registry of custom objects by name (what `register_keras_serializable` and
    `custom_object_scope` fill, and loading looks names up in): a live dict, as Keras'.

    >>> @sf.keras.utils.register_keras_serializable(package="Doc")
    ... def twice(x):
    ...     return 2 * x
    >>> sf.keras.utils.get_custom_objects()["Doc>twice"] is twice
    True
    """
    return _serializable._REGISTERED


@contextlib.contextmanager
def custom_object_scope(*args: dict[str, Any]) -> Iterator[None]:
    """A scope in which the objects of the given dicts are found by name on loading.

    >>> with sf.keras.utils.custom_object_scope({"Ten": 10}):
    ...     sf.keras.saving.get_registered_object("Ten")
    10
    >>> sf.keras.saving.get_registered_object("Ten") is None
    True
    """
    registry = _serializable._REGISTERED
    saved = dict(registry)
    for objects in args:
        registry.update(objects or {})
    try:
        yield
    finally:
        registry.clear()
        registry.update(saved)
