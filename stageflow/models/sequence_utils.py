"""Keras' array utilities: one-hot class matrices, Lp normalization, and the padding of
sequences to a common length. They take and return NumPy arrays, as Keras' do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["normalize", "pad_sequences", "to_categorical"]


def _array(x: Any) -> np.ndarray:
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def to_categorical(x: Any, num_classes: int | None = None) -> np.ndarray:
    """Class ids as one-hot rows of `num_classes` (max id + 1 when None), float64 as
    Keras'; a trailing dim of 1 is dropped first.

    >>> sf.keras.utils.to_categorical([0, 2, 1])
    array([[1., 0., 0.],
           [0., 0., 1.],
           [0., 1., 0.]])
    """
    ids = _array(x).astype(np.int64)
    if ids.ndim > 1 and ids.shape[-1] == 1:
        ids = ids[..., 0]
    count = int(ids.max()) + 1 if num_classes is None else int(num_classes)
    out = np.zeros((*ids.shape, count))
    np.put_along_axis(out, ids[..., None], 1.0, axis=-1)
    return out


def normalize(x: Any, axis: int = -1, order: int = 2) -> np.ndarray:
    """`x` divided by its `order`-norm along `axis` (zero vectors stay zero).

    >>> sf.keras.utils.normalize(np.array([[3.0, 4.0]]))
    array([[0.6, 0.8]])
    """
    array = _array(x)
    norm = np.atleast_1d(np.linalg.norm(array, order, axis))
    norm[norm == 0] = 1
    return array / np.expand_dims(norm, axis)


def pad_sequences(sequences: Sequence[Any], maxlen: int | None = None, dtype: Any = "int32",
                  padding: str = "pre", truncating: str = "pre",
                  value: float = 0.0) -> np.ndarray:
    """Sequences as one array of ``(len(sequences), maxlen)`` (the longest's length when
    None): shorter ones padded with `value` before (``"pre"``) or after (``"post"``), longer
    ones cut at the start (``"pre"``) or the end (``"post"``).

    >>> sf.keras.utils.pad_sequences([[1, 2, 3], [4, 5], [6]], maxlen=2)
    array([[2, 3],
           [4, 5],
           [0, 6]], dtype=int32)
    """
    for name, mode in (("padding", padding), ("truncating", truncating)):
        if mode not in ("pre", "post"):
            raise ValueError(f"pad_sequences: {name} must be 'pre' or 'post', got {mode!r}")
    rows = [np.asarray(s) for s in sequences]
    if maxlen is None:
        maxlen = max((len(r) for r in rows), default=0)
    inner = next((r.shape[1:] for r in rows if len(r)), ())
    out = np.full((len(rows), maxlen, *inner), value, dtype=dtype)
    for i, row in enumerate(rows):
        if not len(row) or not maxlen:
            continue
        kept = row[-maxlen:] if truncating == "pre" else row[:maxlen]
        if padding == "post":
            out[i, :len(kept)] = kept
        else:
            out[i, -len(kept):] = kept
    return out
