"""Checkpoint files: safetensors, written atomically and durably.

Why safetensors: it is what the field reads today (PyTorch, JAX and Hugging Face tools open
it), it is a flat table of named, typed tensors with a JSON header (no code runs on load,
unlike pickles), the `safetensors` library validates a file's header against its size (a
truncated file is refused, not half read) and writes straight from the arrays. The object
graph is JSON in the header's metadata, beside the tensors it names, so one file is one
checkpoint.

Why the dance in `_publish`: a save must never leave a half-written file under a name a
reader trusts. Each file is written under a temporary name in the same directory, fsynced,
renamed over its final name (atomic on POSIX), and the directory is fsynced so the rename
itself survives a crash. The `checkpoint` pointer file naming the latest checkpoint is
replaced the same way, after the checkpoint it names is in place.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy

SUFFIX = ".safetensors"
POINTER = "checkpoint"
GRAPH_KEY = "stageflow.object_graph"
FORMAT = "stageflow.checkpoint/1"


def file_of(path: str) -> str:
    """The file a checkpoint path names (``ckpt-3`` -> ``ckpt-3.safetensors``)."""
    path = os.fspath(path)
    return path if path.endswith(SUFFIX) else path + SUFFIX


def write(path: str, tensors: dict[str, np.ndarray], graph: dict[str, Any]) -> None:
    """Write one checkpoint file atomically: complete under its name, or not there."""
    final = file_of(path)
    directory = os.path.dirname(os.path.abspath(final))
    os.makedirs(directory, exist_ok=True)
    temporary = _temporary(final)
    try:
        safetensors.numpy.save_file(tensors, temporary,
                                    metadata={GRAPH_KEY: json.dumps({"format": FORMAT, **graph})})
        _publish(temporary, final)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def read(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The object graph and the tensors of a checkpoint; ValueError naming the path when
    it is missing, truncated or not a stageflow checkpoint."""
    file = file_of(path)
    if not os.path.exists(file):
        raise FileNotFoundError(f"sf.train: no checkpoint at {os.fspath(path)!r} "
                                f"({file!r} does not exist)")
    try:
        with safetensors.safe_open(file, framework="numpy") as f:
            metadata = f.metadata() or {}
            tensors = {key: f.get_tensor(key) for key in f.keys()}  # noqa: SIM118 - no items()
    except (safetensors.SafetensorError, OSError) as error:
        raise ValueError(f"sf.train: {file!r} is not a complete checkpoint ({error})") from None
    try:
        graph = json.loads(metadata[GRAPH_KEY])
    except (KeyError, ValueError):
        graph = None
    if not isinstance(graph, dict) or graph.get("format") != FORMAT:
        raise ValueError(f"sf.train: {file!r} is a safetensors file without a stageflow object "
                         "graph (not written by sf.train.Checkpoint)")
    return graph, tensors


def read_pointer(directory: str) -> dict[str, Any]:
    """The pointer file of `directory`: ``{"latest": name, "all": [names]}`` (names relative
    to the directory), empty when there is none."""
    try:
        with open(os.path.join(directory, POINTER), encoding="utf-8") as f:
            pointer = json.load(f)
    except FileNotFoundError:
        return {}
    except ValueError as error:
        raise ValueError(f"sf.train: {os.path.join(directory, POINTER)!r} is not a checkpoint "
                         f"pointer file ({error})") from None
    return pointer if isinstance(pointer, dict) else {}


def write_pointer(directory: str, latest: str, paths: list[str]) -> None:
    """Make `latest` the directory's latest checkpoint, atomically; `paths` are all kept."""
    names = [os.path.relpath(p, directory) for p in paths]
    final = os.path.join(directory, POINTER)
    temporary = _temporary(final)
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump({"latest": os.path.relpath(latest, directory), "all": names}, f)
        _publish(temporary, final)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def remove(path: str) -> None:
    """Delete a checkpoint's file (gone already is fine)."""
    try:
        os.unlink(file_of(path))
    except FileNotFoundError:
        pass


def _temporary(final: str) -> str:
    return f"{final}.tmp-{uuid.uuid4().hex[:12]}"


def _publish(temporary: str, final: str) -> None:
    """fsync `temporary`, rename it to `final`, fsync the directory."""
    descriptor = os.open(temporary, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, final)
    directory = os.open(os.path.dirname(os.path.abspath(final)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


__all__ = ["FORMAT", "POINTER", "SUFFIX", "file_of", "read", "read_pointer", "remove", "write",
           "write_pointer"]
