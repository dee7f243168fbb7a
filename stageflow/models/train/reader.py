"""Reading a checkpoint without the objects that wrote it: the names, shapes and dtypes of
the tensors it holds, and any one of them (TensorFlow's ``tf.train.load_checkpoint``,
``tf.train.list_variables`` and ``tf.train.load_variable``).

Tensors are named as TensorFlow names those of an object-based checkpoint:

- a variable: the edge names from the root to it joined by ``/`` (each escaped as
  TensorFlow escapes them: ``.`` as ``..``, ``/`` as ``.S``) and the attribute suffix,
  ``net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE``;
- an optimizer's slot: its variable's name, ``.OPTIMIZER_SLOT``, the optimizer's name and
  the slot's, ``net/l1/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE``;
- an array in another object's state (`NumpyState`): its path and the suffix, as above;
- the rest of an object's state, as JSON text: ``iterator/.ATTRIBUTES/ITERATOR_STATE`` for
  a dataset iterator, ``<path>/.ATTRIBUTES/py_state`` for others (`PythonState`);
- the object graph itself, as JSON text: ``_CHECKPOINTABLE_OBJECT_GRAPH``.

So code that filters TensorFlow's names by their parts (``"kernel" in name``) works alike.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.models.train import storage
from stageflow.models.train.checkpoint import latest_checkpoint
from stageflow.models.train.graph import TENSOR

SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _escape(name: str) -> str:
    return name.replace(".", "..").replace("/", ".S")


def _file(ckpt_dir_or_file: str) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        latest = latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"no checkpoint in directory {path!r}")
        path = latest
    return path


def _names(nodes: list[dict[str, Any]]) -> list[str | None]:
    """Each node's name: its first path from the root, breadth first, escaped and joined by
    ``/``, and the slots' ``.OPTIMIZER_SLOT`` names."""
    names: list[str | None] = [None] * len(nodes)
    names[0] = ""
    queue = [0]
    while queue:
        number = queue.pop(0)
        for edge, child in nodes[number]["children"]:
            if names[child] is None:
                names[child] = f"{names[number]}/{_escape(edge)}" if names[number] else (
                    _escape(edge))
                queue.append(child)
    for number, node in enumerate(nodes):
        for variable, slot, slot_node in node["slots"]:
            if names[slot_node] is None and names[variable] is not None:
                names[slot_node] = (f"{names[variable]}/.OPTIMIZER_SLOT/{names[number]}/"
                                    f"{_escape(slot)}")
    return names


def _only_tensors(state: Any) -> bool:
    if isinstance(state, dict):
        return TENSOR in state or (bool(state) and all(map(_only_tensors, state.values())))
    if isinstance(state, list):
        return bool(state) and all(map(_only_tensors, state))
    return False


def _json(state: Any, tensors: dict[str, np.ndarray]) -> Any:
    if isinstance(state, dict):
        if TENSOR in state:
            return np.asarray(tensors[state[TENSOR]]).tolist()
        return {k: _json(v, tensors) for k, v in state.items()}
    if isinstance(state, list):
        return [_json(v, tensors) for v in state]
    return state


def _text(value: Any) -> np.ndarray:
    array = np.empty((), dtype=object)
    array[()] = json.dumps(value).encode()
    return array


class CheckpointReader:
    """The tensors of one checkpoint, by TensorFlow's names (what
    `sf.train.load_checkpoint` returns; TensorFlow's ``CheckpointReader``).

    >>> import tempfile
    >>> path = sf.train.Checkpoint(w=sf.Variable([[1.0, 2.0]])).save(tempfile.mkdtemp() + "/c")
    >>> reader = sf.train.load_checkpoint(path)
    >>> reader.get_variable_to_shape_map()["w/.ATTRIBUTES/VARIABLE_VALUE"]
    [1, 2]
    >>> reader.get_tensor("w/.ATTRIBUTES/VARIABLE_VALUE")
    array([[1., 2.]], dtype=float32)
    """

    def __init__(self, path: str) -> None:
        self._path = path
        graph, tensors = storage.read(storage.file_of(path))
        nodes = graph["nodes"]
        names = _names(nodes)
        by_name: dict[str, np.ndarray] = {OBJECT_GRAPH: _text(graph)}
        for number, node in enumerate(nodes):
            saved, name = node["state"], names[number]
            if saved is None or name is None:
                continue
            if node["kind"] == "variable":
                for attribute, ref in saved.items():
                    by_name[f"{name}/.ATTRIBUTES/{attribute}"] = tensors[ref[TENSOR]]
                continue
            prefix = node["path"]
            for key, value in tensors.items():  # arrays of the state: by their own paths
                if key == prefix or key.startswith(f"{prefix}."):
                    by_name[key.replace(".", "/") + SUFFIX] = value
            if not _only_tensors(saved):
                attribute = ("ITERATOR_STATE" if node["type"].endswith("Iterator")
                             else "py_state")
                by_name[f"{name}/.ATTRIBUTES/{attribute}"] = _text(_json(saved, tensors))
        self._tensors = dict(sorted(by_name.items()))

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        """Each tensor's name and shape (a list of ints)."""
        return {name: list(np.shape(value)) for name, value in self._tensors.items()}

    def get_variable_to_dtype_map(self) -> dict[str, np.dtype]:
        """Each tensor's name and dtype (``sf.string`` for JSON text)."""
        return {name: dtypes.as_dtype(np.asarray(value).dtype)
                for name, value in self._tensors.items()}

    def has_tensor(self, name: str) -> bool:
        """Whether the checkpoint holds a tensor named `name`."""
        return name in self._tensors

    def get_tensor(self, name: str) -> Any:
        """The value of tensor `name`: a NumPy array (bytes for a scalar of JSON text);
        ValueError when the checkpoint has no such tensor."""
        value = self._tensors.get(name)
        if value is None:
            raise ValueError(f"Key {name} not found in checkpoint {self._path!r}")
        value = np.array(value)
        return value[()] if value.dtype == object and value.ndim == 0 else value

    def __repr__(self) -> str:
        return f"<sf.train.CheckpointReader of {self._path!r}: {len(self._tensors)} tensors>"


def load_checkpoint(ckpt_dir_or_file: str) -> CheckpointReader:
    """A `CheckpointReader` of a checkpoint (a directory: its latest checkpoint).

    >>> import tempfile
    >>> path = sf.train.Checkpoint(w=sf.Variable([1.0, 2.0])).save(tempfile.mkdtemp() + "/c")
    >>> sorted(sf.train.load_checkpoint(path).get_variable_to_shape_map())
    ['_CHECKPOINTABLE_OBJECT_GRAPH', 'save_counter/.ATTRIBUTES/VARIABLE_VALUE', \
'w/.ATTRIBUTES/VARIABLE_VALUE']
    """
    return CheckpointReader(_file(ckpt_dir_or_file))


def list_variables(ckpt_dir_or_file: str) -> list[tuple[str, list[int]]]:
    """The ``(name, shape)`` of every tensor of a checkpoint (a directory: its latest),
    sorted by name, as `load_checkpoint`'s reader names them.

    >>> import tempfile
    >>> path = sf.train.Checkpoint(w=sf.Variable([[1.0, 2.0]])).save(tempfile.mkdtemp() + "/c")
    >>> sf.train.list_variables(path)[1:]
    [('save_counter/.ATTRIBUTES/VARIABLE_VALUE', []), ('w/.ATTRIBUTES/VARIABLE_VALUE', [1, 2])]
    """
    return sorted(load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map().items())


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """The value of tensor `name` (as `list_variables` names it; the attribute suffix may
    be left out) of a checkpoint.

    >>> import tempfile
    >>> path = sf.train.Checkpoint(w=sf.Variable([1.0, 2.0])).save(tempfile.mkdtemp() + "/c")
    >>> sf.train.load_variable(path, "w")
    array([1., 2.], dtype=float32)
    """
    reader = load_checkpoint(ckpt_dir_or_file)
    for candidate in (name, name.rstrip("/") + SUFFIX):
        if reader.has_tensor(candidate):
            return reader.get_tensor(candidate)
    raise ValueError(f"checkpoint {os.fspath(ckpt_dir_or_file)!r} has no tensor {name!r}; "
                     f"it has {sorted(reader.get_variable_to_shape_map())}")
