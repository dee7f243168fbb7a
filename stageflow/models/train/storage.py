"""Checkpoint files: safetensors, written atomically and durably.

Why safetensors: it is what the field reads today (PyTorch, JAX and Hugging Face tools open
it), a flat table of named, typed tensors behind a JSON header: nothing runs on load (unlike
pickles), and a reader checks the header against the file's size, so a truncated file is
refused rather than half read. The object graph is JSON in the header's metadata, beside the
tensors it names, so one file is one checkpoint.

Why this module reads and writes the format itself rather than through the `safetensors`
package: the package copies every tensor into a bytes object on the way out and again on the
way in, which halved the bandwidth measured here (`benchmarks/checkpoint.py`); the format is
one little-endian u64, the JSON header and the raw tensors, so here each array goes from
its own memory to the file (and back into a fresh array) in one copy. The tests check that
the package reads our files and we read its files.

Why the dance in `_publish`: a save must never leave a half-written file under a name a
reader trusts. Each file is written under a temporary name in the same directory, fsynced,
renamed over its final name (atomic on POSIX), and the directory is fsynced so the rename
itself survives a crash. The `checkpoint` pointer file naming the latest checkpoint is
replaced the same way, after the checkpoint it names is in place.
"""

from __future__ import annotations

import io
import json
import os
import stat
import struct
import uuid
from typing import Any, BinaryIO

import ml_dtypes
import numpy as np

SUFFIX = ".safetensors"
POINTER = "checkpoint"
GRAPH_KEY = "stageflow.object_graph"
FORMAT = "stageflow.checkpoint/1"
_MAX_HEADER = 100 * 2**20  # the format's own limit
_DTYPES = {"BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
           "U16": np.dtype(np.uint16), "I16": np.dtype(np.int16), "F16": np.dtype(np.float16),
           "BF16": np.dtype(ml_dtypes.bfloat16), "U32": np.dtype(np.uint32),
           "I32": np.dtype(np.int32), "F32": np.dtype(np.float32), "U64": np.dtype(np.uint64),
           "I64": np.dtype(np.int64), "F64": np.dtype(np.float64),
           "C64": np.dtype(np.complex64)}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


def file_of(path: str) -> str:
    """The file a checkpoint path names (``ckpt-3`` -> ``ckpt-3.safetensors``)."""
    path = os.fspath(path)
    return path if path.endswith(SUFFIX) else path + SUFFIX


def write(path: str, tensors: dict[str, np.ndarray], graph: dict[str, Any]) -> None:
    """Write one checkpoint file atomically: complete under its name, or not there."""
    final = file_of(path)
    directory = os.path.dirname(os.path.abspath(final))
    os.makedirs(directory, exist_ok=True)
    header: dict[str, Any] = {"__metadata__": {GRAPH_KEY: json.dumps({"format": FORMAT,
                                                                         **graph})}}
    arrays = []
    offset = 0
    for key, array in tensors.items():
        array = np.ascontiguousarray(array).reshape(-1)  # a view unless it was strided
        if array.dtype not in _NAMES:
            raise TypeError(f"sf.train: cannot save {key!r} of dtype {array.dtype}")
        header[key] = {"dtype": _NAMES[array.dtype], "shape": list(tensors[key].shape),
                       "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        arrays.append(array)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)  # the data starts 8-byte aligned
    temporary = _temporary(final)
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            # Reserving the file's blocks up front doubles the writes' bandwidth into the
            # page cache: the file system allocates once, not at every write. The fsync
            # then dominates.
            _reserve(descriptor, 8 + len(text) + offset)
            _write_all(descriptor, struct.pack("<Q", len(text)) + text)
            for array in arrays:
                _write_all(descriptor, array.view(np.uint8).data)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        _publish(temporary, final)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _open_regular(path: str) -> BinaryIO:
    """`path` opened for reading, if it is a regular file: opened without blocking (opening
    a FIFO waits for a writer, forever), checked, then read as usual; a ValueError naming
    it otherwise."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError(f"sf.train: {path!r} is not a regular file (a FIFO, a device or "
                             f"a directory is never a checkpoint)")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The object graph and the tensors of a checkpoint; FileNotFoundError or ValueError
    naming the path when it is missing, truncated or not a stageflow checkpoint."""
    file = file_of(path)
    if not os.path.exists(file):
        raise FileNotFoundError(f"sf.train: no checkpoint at {os.fspath(path)!r} "
                                f"({file!r} does not exist)")
    opened = _open_regular(file)
    try:
        with opened as f:
            header, start = _header(f, os.fstat(f.fileno()).st_size)
            tensors = {}
            for key, entry in header.items():
                if key == "__metadata__":
                    continue
                begin, _ = entry["data_offsets"]
                array = np.empty(entry["shape"], _DTYPES[entry["dtype"]])
                f.seek(start + begin)
                if f.readinto(array.reshape(-1).view(np.uint8).data) != array.nbytes:
                    raise ValueError(f"{key!r} ends past the end of the file")
                tensors[key] = array
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"sf.train: {file!r} is not a complete checkpoint ({error})") from None
    try:
        graph = json.loads(header.get("__metadata__", {})[GRAPH_KEY])
    except (KeyError, ValueError, TypeError):
        graph = None
    if not isinstance(graph, dict) or graph.get("format") != FORMAT:
        raise ValueError(f"sf.train: {file!r} is a safetensors file without a stageflow object "
                         "graph (not written by sf.train.Checkpoint)")
    return graph, tensors


def _header(f: Any, size: int) -> tuple[dict[str, Any], int]:
    """The header of a safetensors file, checked as its readers do: every tensor's bytes
    fit its dtype and shape, and together they cover the data exactly, up to the end."""
    length = struct.unpack("<Q", f.read(8))[0]
    if length > _MAX_HEADER or 8 + length > size:
        raise ValueError(f"a header of {length} bytes in a file of {size}")
    header = json.loads(f.read(length).decode())
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    spans = []
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ValueError(f"{key!r} has an unknown dtype {entry['dtype']!r}")
        begin, end = (int(x) for x in entry["data_offsets"])
        count = int(np.prod(entry["shape"], dtype=np.int64))
        if end - begin != count * dtype.itemsize or begin < 0:
            raise ValueError(f"{key!r}: {end - begin} bytes for {entry['dtype']}"
                             f"{entry['shape']}")
        spans.append((begin, end))
    covered = 0
    for begin, end in sorted(spans):
        if begin != covered:
            raise ValueError("the tensors do not cover the data exactly")
        covered = end
    if 8 + length + covered != size:
        raise ValueError(f"the header describes {8 + length + covered} bytes, the file has "
                         f"{size} (truncated or extended)")
    return header, 8 + length


def read_pointer(directory: str) -> dict[str, Any]:
    """The pointer file of `directory`: ``{"latest": name, "all": [names]}`` (names relative
    to the directory), empty when there is none."""
    try:
        with io.TextIOWrapper(_open_regular(os.path.join(directory, POINTER)),
                              encoding="utf-8") as f:
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
            f.flush()
            os.fsync(f.fileno())
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


def _reserve(descriptor: int, size: int) -> None:
    try:
        os.posix_fallocate(descriptor, 0, size)
    except OSError:  # not supported by this file system: allocate as it is written
        pass


def _write_all(descriptor: int, data: Any) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]


def _temporary(final: str) -> str:
    return f"{final}.tmp-{uuid.uuid4().hex[:12]}"


def _publish(temporary: str, final: str) -> None:
    """Rename the fsynced `temporary` to `final`, fsync the directory."""
    os.replace(temporary, final)
    directory = os.open(os.path.dirname(os.path.abspath(final)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


__all__ = ["FORMAT", "POINTER", "SUFFIX", "file_of", "read", "read_pointer", "remove", "write",
           "write_pointer"]
