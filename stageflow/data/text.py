"""Datasets of text files: `TextLineDataset`, the lines of files as string elements."""

from __future__ import annotations

import gzip
import itertools
import os
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.data.dataset import _Generated
from stageflow.frontend.spec import TensorSpec

_COMPRESSIONS = ("", "GZIP", "ZLIB")


class TextLineDataset(_Generated):
    """The lines of one or more text files, each a string element without its line end
    (``\\n`` or ``\\r\\n``), file after file (TensorFlow's ``tf.data.TextLineDataset``).
    `compression_type` is ``""`` (none), ``"GZIP"`` or ``"ZLIB"``; with
    `num_parallel_reads` of k > 1, k files are read at once and their lines interleaved
    one by one, a finished file's place taken by the next, as TensorFlow interleaves them.
    The files are opened again at every epoch; `buffer_size` (a read buffer's bytes in
    TensorFlow) changes nothing here.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> _ = open(path, "w").write("first\\nsecond\\r\\nthird")
    >>> [line.decode() for line in sf.data.TextLineDataset(path).as_numpy_iterator()]
    ['first', 'second', 'third']
    """

    def __init__(self, filenames: Any, compression_type: str | None = None,
                 buffer_size: int | None = None, num_parallel_reads: int | None = None,
                 name: str | None = None) -> None:
        del buffer_size, name
        paths = _paths(filenames)
        compression = (compression_type or "").upper()
        if compression not in _COMPRESSIONS:
            raise ValueError(f"TextLineDataset: compression_type must be one of "
                             f"{list(_COMPRESSIONS)}, got {compression_type!r}"
                             f"{describe_location()}")
        for path in paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"TextLineDataset: no file {path!r}"
                                        f"{describe_location()}")
        width = max(1, int(num_parallel_reads or 1))
        super().__init__(lambda: _interleaved(paths, compression, width),
                         TensorSpec((), dtypes.string), ())

    def _stage(self) -> str:
        return "TextLineDataset"


def _paths(filenames: Any) -> list[str]:
    """The file names given as a path, a list of them, or a string tensor."""
    if hasattr(filenames, "numpy"):
        filenames = np.asarray(filenames.numpy()).reshape(-1).tolist()
    if isinstance(filenames, str | bytes | os.PathLike):
        filenames = [filenames]
    paths = [os.fsdecode(f) for f in filenames]
    if not paths:
        raise ValueError(f"TextLineDataset: no file names given{describe_location()}")
    return paths


def _lines(path: str, compression: str) -> Iterator[bytes]:
    """A file's lines, their ends removed."""
    if compression == "ZLIB":
        with open(path, "rb") as file:
            content = zlib.decompress(file.read())
        stream: Any = iter(content.splitlines(keepends=True))
    else:
        stream = (gzip.open if compression == "GZIP" else open)(path, "rb")
    try:
        for line in stream:
            yield line[:-1].removesuffix(b"\r") if line.endswith(b"\n") else line
    finally:
        if hasattr(stream, "close"):
            stream.close()


def _interleaved(paths: list[str], compression: str, width: int) -> Iterator[bytes]:
    """The files' lines, `width` files at a time, one line from each in turn."""
    pending = iter(paths)
    readers = [_lines(path, compression) for path in itertools.islice(pending, width)]
    while readers:
        for slot in range(len(readers)):
            reader = readers[slot]
            while reader is not None:
                try:
                    yield next(reader)
                    break
                except StopIteration:
                    following = next(pending, None)
                    reader = None if following is None else _lines(following, compression)
                    readers[slot] = reader
        readers = [r for r in readers if r is not None]
