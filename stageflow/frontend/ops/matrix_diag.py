"""`sf.linalg.diag`: TensorFlow's batched ``tf.linalg.diag``, matrices built from their
diagonals (``MatrixDiagV3``).

The placement of each diagonal entry depends only on the sizes, never on the values, so it
is worked out in NumPy while the op is built and applied as one `gather` along the last
axis and a `where` for the padding: batched, differentiable in the diagonals, and staged
like any gather.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import fill
from stageflow.frontend.ops.shape import expand_dims, gather, reshape
from stageflow.frontend.tensor import Tensor

__all__ = ["diag"]

_ALIGNS = ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT")


def _known_int(value: Any, what: str) -> Any:
    """`value` (a number, a pair, or a tensor of one, known while tracing) as Python ints."""
    try:
        array = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
    except Exception:  # noqa: BLE001 - a traced value has none
        raise ValueError(f"linalg.diag: {what} must be known where the op is built, got "
                         f"{value!r}{describe_location()}") from None
    if array.ndim > 1 or array.size not in (1, 2) or array.dtype.kind not in "iu":
        raise ValueError(f"linalg.diag: {what} must be an int or a pair of ints, got "
                         f"{array.tolist()}{describe_location()}")
    return [int(v) for v in array.reshape(-1)]


def _placement(lower: int, upper: int, length: int, rows: int, cols: int, align: str
               ) -> tuple[np.ndarray, np.ndarray]:
    """For each entry of a [rows, cols] matrix, the flat position in the diagonals
    ``[upper - lower + 1, length]`` (row 0 the `upper` diagonal) and whether it takes one."""
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    offset = j - i
    sizes = np.minimum(rows + np.minimum(offset, 0), cols - np.maximum(offset, 0))
    superdiagonal = offset >= 0
    right = np.where(superdiagonal, align.startswith("RIGHT"), align.endswith("RIGHT"))
    along = np.minimum(i, j) + np.where(right, length - sizes, 0)
    inside = (offset >= lower) & (offset <= upper) & (along >= 0) & (along < length)
    flat = np.where(inside, (upper - offset) * length + along, 0)
    return flat.astype(np.int64), inside


def diag(diagonal: Any, name: str | None = None, k: Any = 0, num_rows: Any = -1,
         num_cols: Any = -1, padding_value: Any = 0, align: str = "RIGHT_LEFT") -> Tensor:
    """Matrices with the given diagonals, batched over the leading dims: the last axis
    becomes the diagonal (``k = 0``), a superdiagonal (``k > 0``) or a subdiagonal
    (``k < 0``) of a matrix of `padding_value` elsewhere.

    With ``k = (lower, upper)`` the diagonals are ``[..., upper - lower + 1, length]``, the
    `upper` one first; shorter ones sit at the `align` end of their row (TensorFlow's
    ``"RIGHT_LEFT"``: superdiagonals right, subdiagonals left). The matrix is square unless
    `num_rows` or `num_cols` say otherwise (-1: the smallest that fits).

    diagonal: [..., length] (or [..., num_diags, length]) of any numeric dtype; returns
    [..., num_rows, num_cols] of its dtype.

    >>> sf.linalg.diag([[1, 2], [3, 4]])
    sf.Tensor([[[1, 0],
                [0, 2]],
    <BLANKLINE>
               [[3, 0],
                [0, 4]]], shape=(2, 2, 2), dtype=int32)
    >>> sf.linalg.diag([1, 2], k=1)
    sf.Tensor([[0, 1, 0],
               [0, 0, 2],
               [0, 0, 0]], shape=(3, 3), dtype=int32)
    """
    del name  # TensorFlow's graph name
    values = convert_to_tensor(diagonal)
    bounds = _known_int(k, "k")
    lower, upper = bounds[0], bounds[-1]
    rows, cols = _known_int(num_rows, "num_rows")[0], _known_int(num_cols, "num_cols")[0]
    if align not in _ALIGNS:
        raise ValueError(f"linalg.diag: align must be one of {_ALIGNS}, got {align!r}"
                         f"{describe_location()}")
    if lower > upper:
        raise ValueError(f"linalg.diag: k's lower diagonal ({lower}) must not be above its "
                         f"upper one ({upper}){describe_location()}")
    count = upper - lower + 1
    if lower == upper:  # one diagonal: [..., length]
        values = expand_dims(values, -2)
    if values.ndim < 2 or values.shape[-2] != count or values.shape[-1] is None:
        raise ValueError(f"linalg.diag: {count} diagonals (k = {bounds}) need a diagonal of "
                         f"shape [..., {count}, length] of a known length, got "
                         f"{values.shape}{describe_location()}")
    length = values.shape[-1]
    min_rows, min_cols = length - min(upper, 0), length + max(lower, 0)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    if (rows != min_rows and cols != min_cols) or rows < 0 or cols < 0:
        raise ValueError(f"linalg.diag: the number of rows or columns is not consistent "
                         f"with k and the diagonals: {rows} x {cols} for diagonals of "
                         f"length {length} (k = {bounds}){describe_location()}")
    flat, inside = _placement(lower, upper, length, rows, cols, align)
    padding = convert_to_tensor(padding_value, values.dtype)
    batch = values.shape[:-2]
    if None in batch:
        raise ValueError(f"linalg.diag: the batch dims must be known, got {values.shape}"
                         f"{describe_location()}")
    if not length or not inside.any():
        return fill((*batch, rows, cols), padding)
    taken = gather(reshape(values, (*batch, count * length)), flat, axis=-1)
    return ew.where(inside, taken, padding)
