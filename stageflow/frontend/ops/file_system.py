"""`sf.io.gfile`: TensorFlow's ``tf.io.gfile`` file functions and `GFile`, on local paths
(Python's `os`, `shutil` and `glob` underneath); names are `str` or `bytes` paths, and a
missing file raises Python's ``FileNotFoundError``, as ``tf.errors.NotFoundError`` would.
"""

from __future__ import annotations

import glob as globbing
import os
import shutil
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["GFile", "copy", "exists", "glob", "isdir", "join", "listdir", "makedirs", "mkdir",
           "remove", "rename", "rmtree", "walk"]


def _text(path: Any) -> str:
    return os.fsdecode(path)


class GFile:
    """A file opened in `mode` ("r", "w", "a", with "b" for bytes), as Python's ``open``
    with TensorFlow's method names besides (`size`, `seek`, `tell`, `flush`, `close`);
    a context manager.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.txt")
    >>> with sf.io.gfile.GFile(path, "w") as file:
    ...     _ = file.write("abc")
    >>> sf.io.gfile.GFile(path).read()
    'abc'
    """

    def __init__(self, name: Any, mode: str = "r") -> None:
        self.name, self.mode = _text(name), mode
        self._file: IO[Any] = open(self.name, mode)  # noqa: SIM115 - closed by close()

    def read(self, n: int = -1) -> Any:
        return self._file.read(n)

    def readline(self) -> Any:
        return self._file.readline()

    def readlines(self) -> list[Any]:
        return self._file.readlines()

    def write(self, data: Any) -> int:
        return self._file.write(data)

    def seek(self, offset: int = 0, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def size(self) -> int:
        return os.path.getsize(self.name)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._file)

    def __enter__(self) -> GFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def exists(path: Any) -> bool:
    """Whether a file or folder exists at `path`.

    >>> sf.io.gfile.exists("/no/such/place")
    False
    """
    return os.path.exists(_text(path))


def isdir(path: Any) -> bool:
    """Whether `path` is a folder.

    >>> import tempfile
    >>> sf.io.gfile.isdir(tempfile.gettempdir())
    True
    """
    return os.path.isdir(_text(path))


def join(path: Any, *paths: Any) -> str:
    """Path parts joined with the separator (a later absolute part restarts the path).

    >>> sf.io.gfile.join("logs", "run", "events")
    'logs/run/events'
    """
    return os.path.join(_text(path), *(_text(p) for p in paths))


def listdir(path: Any) -> list[str]:
    """The names of the entries of a folder (not their paths), in no set order.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> sf.io.gfile.makedirs(os.path.join(folder, "sub"))
    >>> sf.io.gfile.listdir(folder)
    ['sub']
    """
    return os.listdir(_text(path))


def glob(pattern: Any) -> list[str]:
    """The paths that match a glob pattern.

    >>> sf.io.gfile.glob("/no/such/place/*")
    []
    """
    return globbing.glob(_text(pattern))


def mkdir(path: Any) -> None:
    """Make one folder (its parent must exist; an existing folder is left as it is).

    >>> import os, tempfile
    >>> sf.io.gfile.mkdir(os.path.join(tempfile.mkdtemp(), "new"))
    """
    folder = _text(path)
    if not os.path.isdir(folder):
        os.mkdir(folder)


def makedirs(path: Any) -> None:
    """Make a folder and the missing ones above it.

    >>> import os, tempfile
    >>> sf.io.gfile.makedirs(os.path.join(tempfile.mkdtemp(), "a", "b"))
    """
    os.makedirs(_text(path), exist_ok=True)


def remove(path: Any) -> None:
    """Delete a file.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "gone")
    >>> sf.io.gfile.GFile(path, "w").close()
    >>> sf.io.gfile.remove(path)
    """
    os.remove(_text(path))


def rmtree(path: Any) -> None:
    """Delete a folder and everything in it.

    >>> import tempfile
    >>> sf.io.gfile.rmtree(tempfile.mkdtemp())
    """
    shutil.rmtree(_text(path))


def copy(oldpath: Any, newpath: Any, overwrite: bool = False) -> None:
    """Copy a file; an existing `newpath` raises ``FileExistsError`` unless `overwrite`.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> sf.io.write_file(os.path.join(folder, "a"), "x")
    >>> sf.io.gfile.copy(os.path.join(folder, "a"), os.path.join(folder, "b"))
    """
    source, target = _text(oldpath), _text(newpath)
    if not overwrite and os.path.exists(target):
        raise FileExistsError(f"sf.io.gfile.copy: {target} exists (pass overwrite=True)")
    shutil.copyfile(source, target)


def rename(oldname: Any, newname: Any, overwrite: bool = False) -> None:
    """Move a file or folder; an existing `newname` raises ``FileExistsError`` unless
    `overwrite`.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> sf.io.write_file(os.path.join(folder, "a"), "x")
    >>> sf.io.gfile.rename(os.path.join(folder, "a"), os.path.join(folder, "b"))
    """
    source, target = _text(oldname), _text(newname)
    if not overwrite and os.path.exists(target):
        raise FileExistsError(f"sf.io.gfile.rename: {target} exists (pass overwrite=True)")
    os.replace(source, target)


def walk(top: Any, topdown: bool = True) -> Iterator[tuple[str, list[str], list[str]]]:
    """(folder, subfolder names, file names) for each folder under `top`, as ``os.walk``.

    >>> import tempfile
    >>> len(list(sf.io.gfile.walk(tempfile.mkdtemp())))
    1
    """
    yield from os.walk(_text(top), topdown=topdown)
