"""Keras' automatic names: a class name in snake case (``Conv2D`` -> ``conv2d``), made
unique by a counter per name (``dense``, ``dense_1``, ...) that `clear_session` resets.

Layers, models and the functional API's inputs share the counters, as in Keras 3, so that
the names a program prints are those its TensorFlow version prints. `sf.Module` keeps
TensorFlow's own rule (``tf.Module``'s ``conv2_d``, no counter): it is not a Keras object.
"""

from __future__ import annotations

import collections
import gc
import re
import threading

__all__ = ["auto_name", "clear_session", "to_snake_case"]

_counts: collections.Counter[str] = collections.Counter()
_lock = threading.Lock()


def to_snake_case(name: str) -> str:
    """Keras' snake case of a class name: words split where a capital starts a lower-case
    word or follows a lower-case letter, so digits stay with their word.

    >>> to_snake_case("Conv2DTranspose"), to_snake_case("MaxPooling2D"), to_snake_case("ReLU")
    ('conv2d_transpose', 'max_pooling2d', 're_lu')
    """
    name = re.sub(r"\W+", "", name)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def auto_name(class_name: str) -> str:
    """The next default name for an object of `class_name`: its snake case, then with
    ``_1``, ``_2``, ... appended.

    >>> clear_session()
    >>> auto_name("Dense"), auto_name("Dense"), auto_name("BatchNormalization")
    ('dense', 'dense_1', 'batch_normalization')
    """
    base = to_snake_case(class_name)
    with _lock:
        count = _counts[base]
        _counts[base] = count + 1
    return base if count == 0 else f"{base}_{count}"


def clear_session(free_memory: bool = True) -> None:
    """Reset the name counters (Keras' ``keras.backend.clear_session()``): layers and
    models made afterwards are named ``dense``, ``sequential``, ... again. With
    `free_memory`, Python's garbage collector runs too, as Keras' does.

    >>> sf.keras.backend.clear_session()
    >>> sf.keras.layers.Dense(2).name
    'dense'
    """
    with _lock:
        _counts.clear()
    if free_memory:
        gc.collect()
