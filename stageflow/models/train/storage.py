"""Checkpoint files: safetensors, written atomically and durably, checked when read.

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

Why checksums: safetensors has none, so a flipped bit in a tensor's bytes would restore
silently. Each tensor's XXH3-64 (of its dtype, its shape and its bytes) and the object
graph's are stored in the header's metadata (`CHECKSUMS_KEY`) and verified by every read.
XXH3 (the `xxhash` package) hashes several times faster than the disk and the page cache
move bytes and than zlib's CRC-32 (`benchmarks/checkpoint.py` measures the save and the
restore with it), so the sums are computed in line, on the arrays as they are written or
read, and add little to either. Files written before the checksums (no such key) restore
unverified.

Why `schema`: the header, the object graph, the checksums and the pointer file are JSON a
user can edit; each is checked against its schema before any of it is used, so that every
damage is one `CheckpointError` naming the file and the field.

Why the locks: a save reads the pointer, writes a checkpoint, replaces the pointer and
deletes what it dropped; two saves at once (threads or processes) would each drop the
other's checkpoints from the list and leave their files behind. `locked` takes a lock on
the directory itself (``flock``, no file added), so saves to one directory run one at a
time. A temporary file is locked by its writer from its creation until it is renamed:
`sweep` deletes the temporaries no live process holds, those a killed save left.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import math
import os
import re
import stat
import struct
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO

import ml_dtypes
import numpy as np
import xxhash

from stageflow.models.train import schema

SUFFIX = ".safetensors"
POINTER = "checkpoint"
GRAPH_KEY = "stageflow.object_graph"
CHECKSUMS_KEY = "stageflow.checksums"
_ALGORITHM = "xxh3_64"  # the checksums' record in the metadata
FORMAT = "stageflow.checkpoint/1"
_MAX_HEADER = 100 * 2**20  # the format's own limit
_MAX_BYTES = 2**62  # an array NumPy can make: its nonzero dims times its itemsize below this
_TEMPORARY = re.compile(rf"(?:{re.escape(POINTER)}|.+{re.escape(SUFFIX)})\.tmp-[0-9a-f]{{12}}")
_DTYPES = {"BOOL": np.dtype(np.bool_), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
           "U16": np.dtype(np.uint16), "I16": np.dtype(np.int16), "F16": np.dtype(np.float16),
           "BF16": np.dtype(ml_dtypes.bfloat16), "U32": np.dtype(np.uint32),
           "I32": np.dtype(np.int32), "F32": np.dtype(np.float32), "U64": np.dtype(np.uint64),
           "I64": np.dtype(np.int64), "F64": np.dtype(np.float64),
           "C64": np.dtype(np.complex64)}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


class CheckpointError(ValueError):
    """A checkpoint file, or a pointer file, that cannot be read: the file, the field (a
    path into its JSON, None for the file as a whole) and what is wrong."""

    def __init__(self, file: str, what: str, field: str | None = None) -> None:
        self.file = file
        self.field = field
        self.what = what
        super().__init__(f"sf.train: {file!r} {what}")

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as built, not from the message alone
        return type(self), (self.file, self.what, self.field)


def file_of(path: str) -> str:
    """The file a checkpoint path names (``ckpt-3`` -> ``ckpt-3.safetensors``)."""
    path = os.fspath(path)
    return path if path.endswith(SUFFIX) else path + SUFFIX


def write(path: str, tensors: dict[str, np.ndarray], graph: dict[str, Any]) -> None:
    """Write one checkpoint file atomically: complete under its name, or not there."""
    final = file_of(path)
    directory = os.path.dirname(os.path.abspath(final))
    os.makedirs(directory, exist_ok=True)
    graph_text = json.dumps({"format": FORMAT, **graph})
    entries: dict[str, dict[str, Any]] = {}
    arrays = []
    offset = 0
    for key, value in tensors.items():
        array = np.ascontiguousarray(value).reshape(-1)  # a view unless it was strided
        if array.dtype not in _NAMES:
            raise TypeError(f"sf.train: cannot save {key!r} of dtype {array.dtype}")
        entries[key] = {"dtype": _NAMES[array.dtype], "shape": list(value.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        arrays.append(array)
    graph_sum = _hex(xxhash.xxh3_64_intdigest(graph_text.encode()))
    # The header holds the checksums, computed as the data is written after it: its length
    # is known first (each sum is 16 hex digits), the header written last.
    length = len(_header_text(graph_text, graph_sum, dict.fromkeys(entries, 0), entries))
    temporary, descriptor = _create_temporary(final)
    try:
        try:
            # Reserving the file's blocks up front doubles the writes' bandwidth into the
            # page cache: the file system allocates once, not at every write. The fsync
            # then dominates.
            _reserve(descriptor, 8 + length + offset)
            os.lseek(descriptor, 8 + length, os.SEEK_SET)
            sums = {}
            for (key, entry), array in zip(entries.items(), arrays, strict=True):
                sums[key] = _digest(entry, array)
                _write_all(descriptor, array.view(np.uint8).data)
            text = _header_text(graph_text, graph_sum, sums, entries)
            os.lseek(descriptor, 0, os.SEEK_SET)
            _write_all(descriptor, struct.pack("<Q", len(text)) + text)
            os.fsync(descriptor)
            _publish(temporary, final)  # renamed while locked: a sweep never takes it
        finally:
            os.close(descriptor)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _header_text(graph_text: str, graph_sum: str, sums: dict[str, int],
                 entries: dict[str, dict[str, Any]]) -> bytes:
    """The JSON header, padded so that the data starts 8-byte aligned."""
    checksums = {_ALGORITHM: {"graph": graph_sum,
                           "tensors": {key: _hex(value) for key, value in sums.items()}}}
    header = {"__metadata__": {GRAPH_KEY: graph_text, CHECKSUMS_KEY: json.dumps(checksums)},
              **entries}
    text = json.dumps(header, separators=(",", ":")).encode()
    return text + b" " * (-(8 + len(text)) % 8)


def _digest(entry: dict[str, Any], array: np.ndarray) -> int:
    """A tensor's XXH3-64: of its dtype and shape (as the header gives them), then its
    bytes, so that a header edited to read the same bytes as another dtype or shape is
    refused."""
    digest = xxhash.xxh3_64(f"{entry['dtype']} {json.dumps(entry['shape'])}".encode())
    digest.update(array.reshape(-1).view(np.uint8).data)
    return digest.intdigest()


def _open_regular(path: str) -> BinaryIO:
    """`path` opened for reading, if it is a regular file: opened without blocking (opening
    a FIFO waits for a writer, forever), checked, then read as usual; a CheckpointError
    naming it otherwise."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise CheckpointError(path, "is not a regular file (a FIFO, a device or a "
                                        "directory is never a checkpoint)")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The object graph and the tensors of a checkpoint; FileNotFoundError naming the path
    when it is missing, CheckpointError (a ValueError) naming the file, and the field or
    tensor, when it is truncated, damaged, edited or not a stageflow checkpoint."""
    file = file_of(path)
    if not os.path.exists(file):
        raise FileNotFoundError(f"sf.train: no checkpoint at {os.fspath(path)!r} "
                                f"({file!r} does not exist)")
    with _open_regular(file) as f:
        size = os.fstat(f.fileno()).st_size
        header, start = _header(f, size, file)
        entries = {key: entry for key, entry in header.items() if key != "__metadata__"}
        metadata = header.get("__metadata__", {})
        graph = _graph(metadata, entries, file)
        sums = _sums(metadata, entries, file)
        if (sums is not None and _hex(xxhash.xxh3_64_intdigest(metadata[GRAPH_KEY].encode()))
                != sums["graph"]):
            raise CheckpointError(file, "does not match its checksum: its object graph "
                                        "changed after it was written",
                                  schema.field_path("header.__metadata__", GRAPH_KEY))
        _check_sizes(entries, start, size, file)
        tensors = _tensors(f, entries, start, sums, file)
    return graph, tensors


def _hex(digest: int) -> str:
    """A 64-bit sum as the metadata writes it: 16 hex digits, so that the header's length
    does not depend on the sums."""
    return f"{digest:016x}"


def _json(text: str | bytes, file: str, field: str) -> Any:
    """`text` parsed, or a CheckpointError naming `field` of `file`."""
    try:
        return json.loads(text.decode() if isinstance(text, bytes) else text)
    except RecursionError:
        raise CheckpointError(file, f"is not a valid checkpoint: field {field} nests too "
                                    f"deeply to be read", field) from None
    except ValueError as error:  # UnicodeDecodeError included
        raise CheckpointError(file, f"is not a valid checkpoint: field {field} is not JSON "
                                    f"({error})", field) from None


def _checked(check: Any, file: str, *args: Any) -> None:
    """`check(*args)`, its FieldError a CheckpointError naming `file` and the field."""
    try:
        check(*args)
    except schema.FieldError as error:
        raise CheckpointError(file, f"is not a valid checkpoint: {error}", error.path) from None


def _header(f: Any, size: int, file: str) -> tuple[dict[str, Any], int]:
    """The header of a safetensors file, checked against its schema, and its length."""
    prefix = f.read(8)
    if len(prefix) < 8:
        raise CheckpointError(file, f"is not a complete checkpoint (a file of {size} bytes)")
    (length,) = struct.unpack("<Q", prefix)
    if length > _MAX_HEADER or 8 + length > size:
        raise CheckpointError(file, f"is not a complete checkpoint (a header of {length} "
                                    f"bytes in a file of {size})")
    header = _json(f.read(length), file, "header")
    _checked(schema.check_header, file, header, _DTYPES)
    return header, 8 + length


def _graph(metadata: dict[str, str], entries: dict[str, Any], file: str) -> dict[str, Any]:
    where = schema.field_path("header.__metadata__", GRAPH_KEY)
    if GRAPH_KEY not in metadata:
        raise CheckpointError(file, f"is a safetensors file without a stageflow object graph "
                                    f"(field {where} is missing: not written by "
                                    f"sf.train.Checkpoint, or edited)", where)
    graph = _json(metadata[GRAPH_KEY], file, where)
    _checked(schema.check_graph, file, graph, FORMAT, entries)
    return graph


def _sums(metadata: dict[str, str], entries: dict[str, Any], file: str
          ) -> dict[str, Any] | None:
    """The checksums' record of `_ALGORITHM`, None for a file written before them."""
    if CHECKSUMS_KEY not in metadata:
        return None
    checksums = _json(metadata[CHECKSUMS_KEY], file,
                      schema.field_path("header.__metadata__", CHECKSUMS_KEY))
    _checked(schema.check_checksums, file, checksums, entries)
    return checksums[_ALGORITHM]


def _check_sizes(entries: dict[str, Any], start: int, size: int, file: str) -> None:
    """As the format's readers check: every tensor's bytes fit its dtype and shape, and
    together they cover the data exactly, up to the end of the file."""
    spans = []
    for key, entry in entries.items():
        itemsize = _DTYPES[entry["dtype"]].itemsize
        begin, end = entry["data_offsets"]
        where = schema.field_path("header", key)
        if math.prod(max(d, 1) for d in entry["shape"]) * itemsize >= _MAX_BYTES:
            raise CheckpointError(file, f"is not a valid checkpoint: field {where}.shape "
                                        f"{entry['shape']} is too large for an array",
                                  f"{where}.shape")
        want = math.prod(entry["shape"]) * itemsize
        if end - begin != want:
            raise CheckpointError(file, f"is not a valid checkpoint: field "
                                        f"{where}.data_offsets spans {end - begin} bytes, a "
                                        f"{entry['dtype']}{entry['shape']} tensor has {want}",
                                  f"{where}.data_offsets")
        spans.append((begin, end))
    covered = 0
    for begin, end in sorted(spans):
        if begin != covered:
            raise CheckpointError(file, "is not a valid checkpoint: the tensors' data_offsets "
                                        "overlap or leave gaps", "header")
        covered = end
    if start + covered != size:
        raise CheckpointError(file, f"is not a complete checkpoint (the header describes "
                                    f"{start + covered} bytes, the file has {size}: truncated "
                                    f"or extended)")


def _tensors(f: Any, entries: dict[str, Any], start: int, sums: dict[str, Any] | None,
             file: str) -> dict[str, np.ndarray]:
    """Every tensor read into a fresh array, its checksum verified when the file has them."""
    tensors = {}
    for key, entry in entries.items():
        begin, _ = entry["data_offsets"]
        array = np.empty(entry["shape"], _DTYPES[entry["dtype"]])
        f.seek(start + begin)
        if f.readinto(array.reshape(-1).view(np.uint8).data) != array.nbytes:
            raise CheckpointError(file, f"is not a complete checkpoint ({key!r} ends past "
                                        f"the end of the file)")
        if sums is not None and _hex(_digest(entry, array)) != sums["tensors"][key]:
            raise CheckpointError(file, f"does not match its checksum: the tensor {key!r} "
                                        f"({entry['dtype']}{entry['shape']}) changed after it "
                                        f"was written", schema.field_path("header", key))
        tensors[key] = array
    return tensors


def read_pointer(directory: str) -> dict[str, Any]:
    """The pointer file of `directory`: ``{"latest": name, "all": [names]}`` (names relative
    to the directory; ``"dropped"``: names whose files a save was deleting), checked; empty
    when there is none."""
    path = os.path.join(directory, POINTER)
    try:
        opened = _open_regular(path)
    except FileNotFoundError:
        return {}
    with io.TextIOWrapper(opened, encoding="utf-8") as f:
        try:
            text = f.read()
            pointer = json.loads(text)
        except (ValueError, RecursionError) as error:
            if text.lstrip().startswith(("model_checkpoint_path:", "all_model_checkpoint_paths:")):
                raise CheckpointError(path, "is TensorFlow's checkpoint state file: the "
                                      "directory holds TensorFlow checkpoints, which stageflow "
                                      "does not read or replace (save to another directory, or "
                                      "remove them)") from None
            raise CheckpointError(path, f"is not a checkpoint pointer file ({error})") from None
    try:
        schema.check_pointer(pointer)
    except schema.FieldError as error:
        raise CheckpointError(path, f"is not a valid checkpoint pointer file: {error}",
                              error.path) from None
    return pointer


def write_pointer(directory: str, latest: str, paths: list[str],
                  dropped: list[str] | None = None) -> None:
    """Make `latest` the directory's latest checkpoint, atomically; `paths` are all kept,
    `dropped` are being deleted (a save killed before it deleted them leaves them to the
    next one, `dropped_files`)."""
    record = {"latest": os.path.relpath(latest, directory),
              "all": [os.path.relpath(p, directory) for p in paths]}
    if dropped:
        record["dropped"] = [os.path.relpath(p, directory) for p in dropped]
    final = os.path.join(directory, POINTER)
    temporary, descriptor = _create_temporary(final)
    try:
        try:
            _write_all(descriptor, json.dumps(record).encode())
            os.fsync(descriptor)
            _publish(temporary, final)
        finally:
            os.close(descriptor)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def dropped_files(directory: str, pointer: dict[str, Any]) -> list[str]:
    """The checkpoints `pointer` lists as dropped, not kept, whose files remain."""
    kept = set(pointer.get("all", []))
    return [os.path.join(directory, name) for name in pointer.get("dropped", [])
            if name not in kept and os.path.exists(file_of(os.path.join(directory, name)))]


def remove(path: str) -> None:
    """Delete a checkpoint's file (gone already is fine)."""
    try:
        os.unlink(file_of(path))
    except FileNotFoundError:
        pass


@contextlib.contextmanager
def locked(directory: str) -> Iterator[None]:
    """Hold `directory`'s lock: one save at a time in it, across threads (each takes its own
    open file description) and processes. A file system without locks is not locked."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(OSError):  # locks not supported here
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def sweep(directory: str) -> list[str]:
    """Delete the temporary files in `directory` that no live process is writing (a killed
    save's: their writer's lock went with it); returns their names."""
    try:
        names = os.listdir(directory)
    except OSError:  # gone, not a directory, unreadable: nothing of ours to sweep
        return []
    swept = []
    for name in names:
        if not _TEMPORARY.fullmatch(name):
            continue
        path = os.path.join(directory, name)
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                continue
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)
            swept.append(name)
        except OSError:  # held by its writer, no locks here, or renamed meanwhile
            continue
        finally:
            os.close(descriptor)
    return swept


def _create_temporary(final: str) -> tuple[str, int]:
    """A new temporary file beside `final`, open for writing and locked for as long as it
    is open. A sweep may take one between its creation and the lock: then the name no
    longer leads to it, and another is made."""
    while True:
        temporary = f"{final}.tmp-{uuid.uuid4().hex[:12]}"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError as error:
            if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                os.close(descriptor)
                raise
            return temporary, descriptor  # no locks here, and so no sweeps either
        try:
            if os.stat(temporary).st_ino == os.fstat(descriptor).st_ino:
                return temporary, descriptor
        except FileNotFoundError:
            pass
        os.close(descriptor)


def _reserve(descriptor: int, size: int) -> None:
    try:
        os.posix_fallocate(descriptor, 0, size)
    except OSError:  # not supported by this file system: allocate as it is written
        pass


def _write_all(descriptor: int, data: Any) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]


def _publish(temporary: str, final: str) -> None:
    """Rename the fsynced `temporary` to `final`, fsync the directory."""
    os.replace(temporary, final)
    directory = os.open(os.path.dirname(os.path.abspath(final)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


__all__ = ["CHECKSUMS_KEY", "FORMAT", "POINTER", "SUFFIX", "CheckpointError", "dropped_files",
           "file_of", "locked", "read", "read_pointer", "remove", "sweep", "write",
           "write_pointer"]
