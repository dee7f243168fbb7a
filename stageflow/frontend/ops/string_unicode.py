"""`sf.strings.unicode_encode`: code points to strings (TensorFlow's
``tf.strings.unicode_encode``), eagerly on the host as the other string ops run."""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.strings import _host
from stageflow.frontend.ragged_tensor import RaggedTensor
from stageflow.frontend.tensor import Tensor, wrap

__all__ = ["unicode_encode"]

_ENCODINGS = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be"}
_ERRORS = ("replace", "ignore", "strict")


def _encode(points: Any, codec: str, errors: str, replacement: int) -> bytes:
    chars = []
    for point in np.asarray(points).reshape(-1).tolist():
        if 0 <= point <= 0x10FFFF and not 0xD800 <= point <= 0xDFFF:
            chars.append(chr(point))
        elif errors == "replace":
            chars.append(chr(replacement))
        elif errors == "strict":
            raise InvalidArgumentError(f"sf.strings.unicode_encode: {point} is not a valid "
                                       f"code point{describe_location()}")
    return "".join(chars).encode(codec)


def unicode_encode(input: Any, output_encoding: str, errors: str = "replace",  # noqa: A002
                   replacement_char: int = 65533) -> Tensor:
    """Strings encoded in `output_encoding` (``"UTF-8"``, ``"UTF-16-BE"`` or
    ``"UTF-32-BE"``) from int32 code points along the last dim of `input` (a tensor, or a 2-D
    `sf.RaggedTensor` with ragged rows). Invalid code points are replaced by
    `replacement_char` (``errors="replace"``), dropped (``"ignore"``) or refused
    (``"strict"``, InvalidArgumentError).

    >>> sf.strings.unicode_encode([[104, 105], [233, 0x1F600]], "UTF-8")
    sf.Tensor([b'hi', b'\\xc3\\xa9\\xf0\\x9f\\x98\\x80'], shape=(2,), dtype=string)
    >>> sf.strings.unicode_encode(sf.ragged.constant([[104, 105], [33]]), "UTF-8")
    sf.Tensor([b'hi', b'!'], shape=(2,), dtype=string)
    """
    if output_encoding not in _ENCODINGS:
        raise ValueError(f"sf.strings.unicode_encode: output_encoding must be one of "
                         f"{sorted(_ENCODINGS)}, got {output_encoding!r}{describe_location()}")
    if errors not in _ERRORS:
        raise ValueError(f"sf.strings.unicode_encode: errors must be one of {_ERRORS}, got "
                         f"{errors!r}{describe_location()}")
    codec = _ENCODINGS[output_encoding]
    if isinstance(input, RaggedTensor):
        if input.ragged_rank != 1 or input.flat_values.ndim != 1:
            raise ValueError(f"sf.strings.unicode_encode: a ragged input must be 2-D with its "
                             f"last dim ragged, got {input.ragged_rank} ragged dims"
                             f"{describe_location()}")
        _host("unicode_encode", input.flat_values, strings=False)
        out = np.empty(int(input.nrows()), dtype=object)
        out[:] = [_encode(row, codec, errors, replacement_char) for row in input.to_list()]
        return wrap(out)
    array = _host("unicode_encode", input, strings=False)
    if array.ndim < 1:
        raise ValueError(f"sf.strings.unicode_encode: input must have at least one dim (the "
                         f"code points){describe_location()}")
    out = np.empty(array.shape[:-1], dtype=object)
    for index in np.ndindex(out.shape):
        out[index] = _encode(array[index], codec, errors, replacement_char)
    return wrap(out)
