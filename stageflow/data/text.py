"""Datasets of text files: `TextLineDataset`, the lines of files as string elements, and
`CsvDataset`, their comma-separated records as tuples of scalars. Both open their files
when iterated, as TensorFlow's do: a missing file is an error of the first element."""

from __future__ import annotations

import csv
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
    The files are opened again at every epoch (a missing one fails there, as in TensorFlow);
    `buffer_size` (a read buffer's bytes in TensorFlow) changes nothing here.

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
        compression = _compression(compression_type, "TextLineDataset")
        width = max(1, int(num_parallel_reads or 1))
        super().__init__(lambda: _interleaved(paths, compression, width),
                         TensorSpec((), dtypes.string), ())

    def _stage(self) -> str:
        return "TextLineDataset"


def _compression(compression_type: str | None, who: str) -> str:
    """TensorFlow's name of a compression, checked: "" (none), "GZIP" or "ZLIB"."""
    compression = (compression_type or "").upper()
    if compression not in _COMPRESSIONS:
        raise ValueError(f"{who}: compression_type must be one of {list(_COMPRESSIONS)}, got "
                         f"{compression_type!r}{describe_location()}")
    return compression


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
    if not os.path.isfile(path):
        raise FileNotFoundError(f"sf.data: no file {path!r}")
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


class CsvDataset(_Generated):
    """The records of CSV files, each a tuple of scalars, one per column kept (TensorFlow's
    ``tf.data.experimental.CsvDataset``). `record_defaults` gives a column's type: a value
    (its dtype's, and the value an empty field or `na_value` takes) or a dtype (the field is
    required). `select_cols` (or `exclude_cols`) keeps some columns, in order; `header`
    skips each file's first line; quoted fields may hold the delimiter where
    `use_quote_delim`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "data.csv")
    >>> _ = open(path, "w").write("1,2.5,a\\n,3.5,b\\n")
    >>> rows = sf.data.experimental.CsvDataset(path, [0, sf.float32, "?"])
    >>> [(int(i), float(x), s.decode()) for i, x, s in rows.as_numpy_iterator()]
    [(1, 2.5, 'a'), (0, 3.5, 'b')]
    """

    def __init__(self, filenames: Any, record_defaults: list[Any],
                 compression_type: str | None = None, buffer_size: int | None = None,
                 header: bool = False, field_delim: str = ",", use_quote_delim: bool = True,
                 na_value: str = "", select_cols: list[int] | None = None,
                 exclude_cols: list[int] | None = None) -> None:
        del buffer_size
        if select_cols is not None and exclude_cols is not None:
            raise ValueError(f"CsvDataset: give select_cols or exclude_cols, not both"
                             f"{describe_location()}")
        columns = [_column(default) for default in record_defaults]
        paths = _paths(filenames)
        compression = _compression(compression_type, "CsvDataset")
        reader = _Records(paths, compression, columns, header, field_delim, use_quote_delim,
                          na_value, select_cols, exclude_cols)
        super().__init__(reader.records,
                         tuple(TensorSpec((), dtype) for dtype, _ in columns), ())

    def _stage(self) -> str:
        return "CsvDataset"


_CSV_DTYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.string)


def _column(default: Any) -> tuple[np.dtype, Any]:
    """A column's (dtype, default) from its record default: a dtype alone is a required
    column (default None); a Python int, float or string is int32, float32 or a string
    column (as TensorFlow converts them), an array or tensor keeps its dtype."""
    if isinstance(default, bool):
        raise TypeError(f"CsvDataset: a record default is a number, a string or a dtype, "
                        f"got {default!r}{describe_location()}")
    if isinstance(default, str | bytes):
        return dtypes.string, default.encode() if isinstance(default, str) else default
    if isinstance(default, int | float):
        dtype = dtypes.int32 if isinstance(default, int) else dtypes.float32
        return dtype, np.asarray(default, dtype)
    try:
        dtype = dtypes.as_dtype(default)
    except (TypeError, ValueError):
        value = np.asarray(default.numpy() if hasattr(default, "numpy") else default)
        dtype, default = value.dtype, value.reshape(())
        if value.size != 1:
            raise ValueError(f"CsvDataset: a record default is a scalar or a dtype, got "
                             f"shape {value.shape}{describe_location()}") from None
    else:
        default = None
    if dtype.kind in "SUO":
        dtype = dtypes.string
    if dtype not in _CSV_DTYPES:
        raise TypeError(f"CsvDataset: a column is one of "
                        f"{[d.name for d in _CSV_DTYPES]}, got {dtype.name}"
                        f"{describe_location()}")
    return dtype, default


class _Records:
    """What a `CsvDataset` reads: its files' records as tuples of NumPy scalars."""

    def __init__(self, paths: list[str], compression: str, columns: list[tuple[Any, Any]],
                 header: bool, delimiter: str, quoting: bool, na_value: str,
                 select: list[int] | None, exclude: list[int] | None) -> None:
        self.paths, self.compression, self.columns = paths, compression, columns
        self.header, self.delimiter, self.quoting, self.na_value = (header, delimiter,
                                                                    quoting, na_value)
        self.select, self.exclude = select, exclude

    def kept(self, width: int) -> list[int]:
        if self.select is not None:
            return list(self.select)
        skipped = set(self.exclude or ())
        return [i for i in range(width) if i not in skipped]

    def records(self) -> Iterator[tuple[Any, ...]]:
        for path in self.paths:
            lines = (line.decode() for line in _lines(path, self.compression))
            if self.header:
                next(lines, None)
            rows = csv.reader(lines, delimiter=self.delimiter,
                              quoting=csv.QUOTE_MINIMAL if self.quoting else csv.QUOTE_NONE)
            for number, fields in enumerate(rows, start=2 if self.header else 1):
                kept = self.kept(len(fields))
                if len(kept) != len(self.columns) or max(kept, default=-1) >= len(fields):
                    raise ValueError(f"sf.data.experimental.CsvDataset: {path}:{number} has "
                                     f"{len(fields)} fields; the dataset reads "
                                     f"{len(self.columns)} (record_defaults), columns {kept}")
                yield tuple(self.field(fields[i], column, path, number)
                            for i, column in zip(kept, self.columns, strict=True))

    def field(self, text: str, column: tuple[Any, Any], path: str, number: int) -> Any:
        dtype, default = column
        if text == "" or text == self.na_value:
            if default is None:
                raise ValueError(f"sf.data.experimental.CsvDataset: {path}:{number}: a "
                                 f"required field ({dtype.name}, no default) is empty")
            return default
        if dtype == dtypes.string:
            return text.encode()
        try:
            return np.asarray(float(text) if dtype.kind == "f" else int(text), dtype)
        except ValueError:
            raise ValueError(f"sf.data.experimental.CsvDataset: {path}:{number}: "
                             f"{text!r} is not a {dtype.name}") from None
