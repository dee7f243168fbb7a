"""Reading a checkpoint without the objects that wrote it: the names and shapes of the
tensors it holds, and any one of them (TensorFlow's ``tf.train.list_variables`` and
``tf.train.load_variable``).

A tensor's name is its path in the object graph with ``/`` between the steps and
TensorFlow's attribute suffix (``model/layers/0/kernel/.ATTRIBUTES/VARIABLE_VALUE``), so
code that filters TensorFlow's names by their parts (``"kernel" in name``) works alike.
"""

from __future__ import annotations

import os

import numpy as np

from stageflow.models.train import storage
from stageflow.models.train.checkpoint import latest_checkpoint

SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"


def _tensors(ckpt_dir_or_file: str) -> dict[str, np.ndarray]:
    """The tensors of a checkpoint (a directory: its latest), by name."""
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        latest = latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"no checkpoint in directory {path!r}")
        path = latest
    _, tensors = storage.read(storage.file_of(path))
    return {key.replace(".", "/") + SUFFIX: value for key, value in tensors.items()}


def list_variables(ckpt_dir_or_file: str) -> list[tuple[str, list[int]]]:
    """The ``(name, shape)`` of every tensor of a checkpoint (a directory: its latest),
    sorted by name.

    >>> import tempfile
    >>> path = sf.train.Checkpoint(w=sf.Variable([[1.0, 2.0]])).save(tempfile.mkdtemp() + "/c")
    >>> sf.train.list_variables(path)
    [('save_counter/.ATTRIBUTES/VARIABLE_VALUE', []), ('w/.ATTRIBUTES/VARIABLE_VALUE', [1, 2])]
    """
    return sorted((name, list(np.shape(value)))
                  for name, value in _tensors(ckpt_dir_or_file).items())


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """The value of tensor `name` (as `list_variables` names it; the attribute suffix may
    be left out) of a checkpoint.

    >>> import tempfile
    >>> path = sf.train.Checkpoint(w=sf.Variable([1.0, 2.0])).save(tempfile.mkdtemp() + "/c")
    >>> sf.train.load_variable(path, "w")
    array([1., 2.], dtype=float32)
    """
    tensors = _tensors(ckpt_dir_or_file)
    value = tensors.get(name, tensors.get(name.rstrip("/") + SUFFIX))
    if value is None:
        raise ValueError(f"checkpoint {os.fspath(ckpt_dir_or_file)!r} has no tensor {name!r}; "
                         f"it has {sorted(tensors)}")
    return np.array(value)
