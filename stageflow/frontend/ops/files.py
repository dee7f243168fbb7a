"""`sf.io`'s file and base64 ops: `read_file`, `write_file`, `matching_files`,
`encode_base64` and `decode_base64`, as TensorFlow's ``tf.io`` names.

They read and write string tensors, which are host-only values: they run eagerly, and
calling one while a function is traced raises, naming the op (read the file outside the
function and pass it the numbers). Paths are local paths; a missing file raises Python's
``FileNotFoundError``.
"""

from __future__ import annotations

import base64
import binascii
import glob as globbing
import os
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor, wrap
from stageflow.frontend.tracer import GraphTrace

__all__ = ["decode_base64", "encode_base64", "matching_files", "read_file", "write_file"]


def _strings(op: str, value: Any) -> np.ndarray:
    """The bytes of a string operand of `op`, eagerly; a TypeError while traced."""
    if isinstance(context.current_trace(), GraphTrace):
        raise TypeError(f"sf.io.{op} works on string tensors, host-only values that "
                        f"sf.function cannot stage: call it outside the function, where it "
                        f"runs eagerly{describe_location()}")
    tensor = convert_to_tensor(value)
    if not dtypes.is_string(tensor.dtype):
        raise TypeError(f"sf.io.{op}: expected a string tensor, got {tensor.dtype.name}"
                        f"{describe_location()}")
    return np.asarray(tensor._value)


def _path(op: str, value: Any) -> str:
    array = _strings(op, value)
    if array.ndim:
        raise ValueError(f"sf.io.{op}: expected one file name (a scalar), got shape "
                         f"{array.shape}{describe_location()}")
    item = array.item()
    return item.decode("utf-8") if isinstance(item, bytes) else str(item)


def _each(array: np.ndarray, func: Any) -> Tensor:
    out = np.empty(array.shape, dtype=object)
    for index, item in np.ndenumerate(array):
        out[index] = func(item)
    return wrap(out)


def read_file(filename: Any, name: str | None = None) -> Tensor:
    """The whole contents of a file, as a scalar string tensor of its bytes.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "note.txt")
    >>> sf.io.write_file(path, "hello")
    >>> sf.io.read_file(path)
    sf.Tensor(b'hello', shape=(), dtype=string)
    """
    with open(_path("read_file", filename), "rb") as file:
        return wrap(np.array(file.read(), dtype=object))


def write_file(filename: Any, contents: Any, name: str | None = None) -> None:
    """Write the bytes of a scalar string tensor to a file, replacing it (the folders on
    the way are made, as TensorFlow makes them).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "new", "out.bin")
    >>> sf.io.write_file(path, sf.constant(b"\\x00\\x01"))
    >>> sf.io.read_file(path)
    sf.Tensor(b'\\x00\\x01', shape=(), dtype=string)
    """
    path = _path("write_file", filename)
    data = _strings("write_file", contents)
    if data.ndim:
        raise ValueError(f"sf.io.write_file: contents must be a scalar, got shape "
                         f"{data.shape}{describe_location()}")
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    item = data.item()
    with open(path, "wb") as file:
        file.write(item if isinstance(item, bytes) else str(item).encode("utf-8"))


def matching_files(pattern: Any, name: str | None = None) -> Tensor:
    """The file names that match the glob `pattern` (or any of a 1-D tensor of patterns),
    sorted, as a 1-D string tensor.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> sf.io.write_file(os.path.join(folder, "a.txt"), "")
    >>> [p.endswith(b"a.txt") for p in sf.io.matching_files(folder + "/*.txt").numpy()]
    [True]
    """
    patterns = _strings("matching_files", pattern).reshape(-1)
    found: list[bytes] = []
    for item in patterns:
        text = item.decode("utf-8") if isinstance(item, bytes) else str(item)
        found.extend(path.encode("utf-8") for path in sorted(globbing.glob(text)))
    out = np.empty(len(found), dtype=object)
    out[:] = found
    return wrap(out)


def encode_base64(input: Any, pad: bool = False, name: str | None = None) -> Tensor:  # noqa: A002
    """Each string in web-safe base64 (``-`` and ``_`` for ``+`` and ``/``), without the
    ``=`` padding unless `pad`, as TensorFlow encodes.

    >>> sf.io.encode_base64([b"hello?>", b"\\xff\\xfe"])
    sf.Tensor([b'aGVsbG8_Pg', b'__4'], shape=(2,), dtype=string)
    """
    def encode(item: bytes) -> bytes:
        text = base64.urlsafe_b64encode(item)
        return text if pad else text.rstrip(b"=")

    return _each(_strings("encode_base64", input), encode)


def decode_base64(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The bytes of web-safe base64 strings, padded or not (`encode_base64`'s inverse).

    >>> sf.io.decode_base64("aGVsbG8_Pg")
    sf.Tensor(b'hello?>', shape=(), dtype=string)
    """
    def decode(item: bytes) -> bytes:
        text = item.rstrip(b"=")
        try:
            return base64.urlsafe_b64decode(text + b"=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raise InvalidArgumentError(f"sf.io.decode_base64: invalid base64 data {item!r}"
                                       f"{describe_location()}") from None

    return _each(_strings("decode_base64", input), decode)
