"""`sf.io.decode_raw`: the bytes of string tensors read as numbers, as TensorFlow's
``tf.io.decode_raw`` reads fixed-size records (image bytes, serialized arrays).

String tensors are host-only values, so this runs eagerly (calling it while a function is
traced raises, naming the op and the line).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.strings import _host
from stageflow.frontend.tensor import Tensor, wrap

__all__ = ["decode_raw"]

# TensorFlow's allowed `out_type`s (its C names, for the messages).
_OUT_TYPES = {dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double",
              dtypes.int32: "int32", dtypes.uint16: "uint16", dtypes.uint8: "uint8",
              dtypes.int16: "int16", dtypes.int8: "int8", dtypes.int64: "int64",
              dtypes.complex64: "complex64", dtypes.complex128: "complex128",
              dtypes.bool_: "bool", dtypes.bfloat16: "bfloat16"}


def _fixed(item: bytes, length: int) -> bytes:
    return item[:length] + bytes(max(0, length - len(item)))


def decode_raw(input_bytes: Any, out_type: Any, little_endian: bool = True,
               fixed_length: int | None = None) -> Tensor:
    """Each string's bytes as numbers of `out_type`, in one more (last) dim.

    Without `fixed_length` all strings must have the same length, a multiple of the type's
    size; with it each string is cut or zero-padded to `fixed_length` bytes first (a
    multiple of the size). `little_endian` says the bytes' order within a number.

    input_bytes: string tensor [...]; out_type: float16/32/64, bfloat16, int8/16/32/64,
    uint8/16, complex64/128 or bool; returns [..., length / size] of out_type.

    >>> sf.io.decode_raw(sf.constant("Duck"), sf.uint8)
    sf.Tensor([ 68, 117,  99, 107], shape=(4,), dtype=uint8)
    >>> sf.io.decode_raw(sf.constant(["\\x01\\x00", "\\x00\\x01"]), sf.int16)
    sf.Tensor([[  1],
               [256]], shape=(2, 1), dtype=int16)
    """
    dtype = dtypes.as_dtype(out_type)
    if dtype not in _OUT_TYPES:
        raise TypeError(f"sf.io.decode_raw: out_type must be one of "
                        f"{', '.join(d.name for d in _OUT_TYPES)}, got {dtype.name}"
                        f"{describe_location()}")
    array = _host("decode_raw", input_bytes)
    items = list(array.reshape(-1))
    size = dtype.itemsize
    if fixed_length is not None:
        length = operator.index(fixed_length)
        if length % size:
            raise InvalidArgumentError(f"sf.io.decode_raw: fixed_length ({length}) must be a "
                                       f"multiple of the size of out_type ({size})"
                                       f"{describe_location()}")
        items = [_fixed(item, length) for item in items]
    else:
        length = len(items[0]) if items else 0
        for index, item in enumerate(items):
            if len(item) != length:
                raise InvalidArgumentError(
                    f"sf.io.decode_raw requires input strings to all be the same size, but "
                    f"element {index} has size {len(item)} != {length} (fixed_length pads "
                    f"or cuts them){describe_location()}")
        if length % size:
            raise InvalidArgumentError(
                f"sf.io.decode_raw: input has length {length} that is not a multiple of "
                f"{size}, the size of {_OUT_TYPES[dtype]}{describe_location()}")
    data = b"".join(items)
    if dtype == dtypes.bool_:  # any nonzero byte is true, as TensorFlow reads them
        values = np.frombuffer(data, dtype=np.uint8) != 0
    else:
        order = dtype.newbyteorder("<" if little_endian else ">") if size > 1 else dtype
        values = np.frombuffer(data, dtype=order).astype(dtype)
    return wrap(values.reshape(*array.shape, length // size))
