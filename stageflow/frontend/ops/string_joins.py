"""`sf.strings`' joins along dims and segments (TensorFlow's ``tf.strings.reduce_join``
and ``tf.strings.unsorted_segment_join``) and the rewriting of strings by a regular
expression (``regex_replace``), eagerly on the host as the other string ops run.

Regular expressions are Python's `re` (TensorFlow's are RE2); in a rewrite, ``\\1`` to
``\\9`` name groups and ``\\0`` the whole match, as in RE2.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.strings import _each, _host, _per_value
from stageflow.frontend.tensor import Tensor, wrap

__all__ = ["reduce_join", "regex_replace", "unsorted_segment_join"]


def _bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def reduce_join(inputs: Any, axis: Any = None, keepdims: bool = False,
                separator: str = "") -> Tensor:
    """The strings of `inputs` joined along `axis` (an int, a list of them, or None for
    every dim) with `separator` between. TensorFlow's order: the first axis listed varies
fastest (so ``axis=[1, 0]`` and None join in row-major order, ``axis=[0, 1]`` column by
column).

    >>> sf.strings.reduce_join([["a", "b"], ["c", "d"]], axis=1, separator="-")
    sf.Tensor([b'a-b', b'c-d'], shape=(2,), dtype=string)
    >>> sf.strings.reduce_join([["a", "b"], ["c", "d"]])
    sf.Tensor(b'abcd', shape=(), dtype=string)
    """
    array = _host("reduce_join", inputs)
    axes = list(range(array.ndim)) if axis is None else np.asarray(axis).reshape(-1).tolist()
    for a in axes:
        if not -array.ndim <= a < array.ndim:
            raise InvalidArgumentError(f"sf.strings.reduce_join: axis {a} is out of range for "
                                       f"a rank-{array.ndim} input{describe_location()}")
    if axis is None:
        axes = list(range(array.ndim - 1, -1, -1))
    axes = list(dict.fromkeys(a % array.ndim for a in axes)) if array.ndim else []
    kept = [d for d in range(array.ndim) if d not in axes]
    moved = np.transpose(array, kept + axes[::-1])
    kept_shape = tuple(array.shape[d] for d in kept)
    flat = moved.reshape((*kept_shape, -1)) if moved.size else moved.reshape(
        (*kept_shape, 0))
    glue = _bytes(separator)
    out = np.empty(kept_shape, dtype=object)
    for index in np.ndindex(kept_shape):
        out[index] = glue.join(flat[index])
    if keepdims:
        out = out.reshape(tuple(1 if d in axes else array.shape[d] for d in range(array.ndim)))
    return wrap(out)


@_per_value
def regex_replace(input: Any, pattern: str, rewrite: str,  # noqa: A002 - TF's name
                  replace_global: bool = True) -> Tensor:
    """Each string with the matches of `pattern` replaced by `rewrite` (all of them, or
    the first only where not `replace_global`).

    >>> sf.strings.regex_replace(["a1b22", "c"], "[0-9]+", "#")
    sf.Tensor([b'a#b#', b'c'], shape=(2,), dtype=string)
    >>> sf.strings.regex_replace("hello world", r"(\\w+) (\\w+)", r"\\2 \\1")
    sf.Tensor(b'world hello', shape=(), dtype=string)
    """
    array = _host("regex_replace", input)
    try:
        compiled = re.compile(_bytes(pattern))
    except re.error as error:
        raise InvalidArgumentError(f"sf.strings.regex_replace: invalid pattern {pattern!r}: "
                                   f"{error}{describe_location()}") from None
    template = re.sub(rb"\\0", rb"\\g<0>", _bytes(rewrite))
    count = 0 if replace_global else 1
    return wrap(_each(array, lambda item: compiled.sub(template, item, count=count)))


def unsorted_segment_join(inputs: Any, segment_ids: Any, num_segments: Any,
                          separator: str = "") -> Tensor:
    """The strings of `inputs` joined per segment: output ``[num_segments] +
    inputs.shape[segment_ids.ndim:]``, each the strings whose id is its index, in order,
    with `separator` between (empty for segments without strings).

    >>> sf.strings.unsorted_segment_join(["a", "b", "c"], [1, 0, 1], 3, separator=",")
    sf.Tensor([b'b', b'a,c', b''], shape=(3,), dtype=string)
    """
    array = _host("unsorted_segment_join", inputs)
    ids = _host("unsorted_segment_join", segment_ids, strings=False).astype(np.int64)
    count = int(np.asarray(_host("unsorted_segment_join", num_segments, strings=False)))
    if array.shape[:ids.ndim] != ids.shape:
        raise InvalidArgumentError(f"sf.strings.unsorted_segment_join: segment_ids' shape "
                                   f"{ids.shape} is not a prefix of the inputs' "
                                   f"{array.shape}{describe_location()}")
    if ids.size and (ids.max() >= count or ids.min() < 0):
        raise InvalidArgumentError(f"sf.strings.unsorted_segment_join: segment ids must be in "
                                   f"[0, {count}), got {ids.min()} to {ids.max()}"
                                   f"{describe_location()}")
    inner = array.shape[ids.ndim:]
    rows = array.reshape((-1, *inner))
    parts: list[list[np.ndarray]] = [[] for _ in range(count)]
    for row, segment in zip(rows, ids.reshape(-1), strict=True):
        if segment >= 0:
            parts[segment].append(row)
    out = np.empty((count, *inner), dtype=object)
    glue = _bytes(separator)
    for segment, members in enumerate(parts):
        for index in np.ndindex(inner):
            out[(segment, *index)] = glue.join(m[index] if inner else m for m in members)
    return wrap(out)
