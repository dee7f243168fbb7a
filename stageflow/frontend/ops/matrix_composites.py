"""More of TensorFlow's `tf.linalg`, as composites of matrix and elementwise ops:
`band_part`, `adjoint`, `matvec`, `set_diag`, `logdet`, `cross`, `normalize`, and
`l2_normalize`/`global_norm` (the `sf.nn` and top-level ops) under `sf.linalg`."""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.complex_numbers import conj
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.ops.linalg import matmul
from stageflow.frontend.ops.matrix import cholesky, diag_part, matrix_transpose, norm
from stageflow.frontend.ops.matrix_diag import diag
from stageflow.frontend.ops.reductions import reduce_sum
from stageflow.frontend.ops.shape import expand_dims, stack
from stageflow.frontend.ops.shape import squeeze as _squeeze
from stageflow.frontend.tensor import Tensor

__all__ = ["adjoint", "band_part", "cross", "logdet", "matvec", "normalize", "set_diag"]


def _matrix(op: str, x: Any) -> Tensor:
    x = convert_to_tensor(x)
    if x.ndim < 2 or x.shape[-1] is None or x.shape[-2] is None:
        raise ValueError(f"{op}: needs a [..., m, n] tensor with known m and n, got "
                         f"{list(x.shape)}{describe_location()}")
    return x


def band_part(input: Any, num_lower: int, num_upper: int) -> Tensor:  # noqa: A002
    """The band of each matrix: entries at most `num_lower` below and `num_upper` above the
    diagonal kept, the rest zeroed (a negative count keeps that whole triangle; TensorFlow's
    ``tf.linalg.band_part``: ``band_part(x, -1, 0)`` is the lower triangle).

    >>> sf.linalg.band_part(sf.ones((3, 3)), 1, 0)
    sf.Tensor([[1., 0., 0.],
               [1., 1., 0.],
               [0., 1., 1.]], shape=(3, 3), dtype=float32)
    """
    x = _matrix("band_part", input)
    rows, cols = np.arange(x.shape[-2])[:, None], np.arange(x.shape[-1])[None, :]
    lower, upper = int(num_lower), int(num_upper)
    keep = ((lower < 0) | (rows - cols <= lower)) & ((upper < 0) | (cols - rows <= upper))
    return ew.where(keep, x, ew.cast(0, x.dtype))


def adjoint(matrix: Any) -> Tensor:
    """The conjugate transpose of each matrix (TensorFlow's ``tf.linalg.adjoint``; the
    transpose for real matrices).

    >>> sf.linalg.adjoint([[1.0, 2.0], [3.0, 4.0]])
    sf.Tensor([[1., 3.],
               [2., 4.]], shape=(2, 2), dtype=float32)
    """
    x = convert_to_tensor(matrix)
    return matrix_transpose(conj(x) if x.dtype.kind == "c" else x)


def matvec(a: Any, b: Any, transpose_a: bool = False, adjoint_a: bool = False) -> Tensor:
    """The matrix-vector product ``a @ b`` over the last dims (TensorFlow's
    ``tf.linalg.matvec``): a [..., m, n], b [..., n]; returns [..., m].

    >>> sf.linalg.matvec([[1.0, 2.0], [3.0, 4.0]], [1.0, 1.0])
    sf.Tensor([3., 7.], shape=(2,), dtype=float32)
    """
    a, b = binary_operands(a, b)
    if adjoint_a:
        a = adjoint(a)
    elif transpose_a:
        a = matrix_transpose(a)
    return _squeeze(matmul(a, expand_dims(b, -1)), -1)


def set_diag(input: Any, diagonal: Any, k: int = 0) -> Tensor:  # noqa: A002
    """Each matrix with its `k`-th diagonal replaced by `diagonal` (TensorFlow's
    ``tf.linalg.set_diag`` for one diagonal: 0 the main one, > 0 above it, < 0 below).

    >>> sf.linalg.set_diag(sf.zeros((2, 3)), [1.0, 2.0])
    sf.Tensor([[1., 0., 0.],
               [0., 2., 0.]], shape=(2, 3), dtype=float32)
    """
    x = _matrix("set_diag", input)
    rows, cols = x.shape[-2], x.shape[-1]
    diagonal = convert_to_tensor(diagonal, x.dtype)
    placed = diag(diagonal, k=int(k), num_rows=rows, num_cols=cols)
    on_diagonal = np.eye(rows, cols, int(k), dtype=bool)
    return ew.where(on_diagonal, placed, x)


def logdet(matrix: Any) -> Tensor:
    """``log(det(matrix))`` of Hermitian positive-definite matrices, from the Cholesky
    factor, ``2 * sum(log(diag(L)))``, so that large determinants do not overflow
    (TensorFlow's ``tf.linalg.logdet``).

    >>> sf.linalg.logdet([[2.0, 1.0], [1.0, 2.0]])
    sf.Tensor(1.0986123, shape=(), dtype=float32)
    """
    factor = cholesky(matrix)
    return ew.cast(2, factor.dtype) * reduce_sum(ew.log(diag_part(factor)), axis=-1)


def cross(a: Any, b: Any) -> Tensor:
    """The cross product of 3-vectors along the last axis (TensorFlow's
    ``tf.linalg.cross``).

    >>> sf.linalg.cross([1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    sf.Tensor([0., 0., 1.], shape=(3,), dtype=float32)
    """
    a, b = binary_operands(a, b)
    if a.shape[-1:] != (3,) or b.shape[-1:] != (3,):
        raise ValueError(f"cross: needs vectors of 3 along the last axis, got "
                         f"{list(a.shape)} and {list(b.shape)}{describe_location()}")
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def normalize(tensor: Any, ord: Any = "euclidean", axis: Any = None) -> tuple[Tensor, Tensor]:  # noqa: A002
    """`tensor` divided by its norm over `axis`, and that norm kept as a dim of 1
    (TensorFlow's ``tf.linalg.normalize``; `ord` and `axis` as `sf.norm`'s).

    >>> unit, length = sf.linalg.normalize([3.0, 4.0])
    >>> unit, length
    (sf.Tensor([0.6, 0.8], shape=(2,), dtype=float32), sf.Tensor([5.], shape=(1,), dtype=float32))
    """
    x = convert_to_tensor(tensor)
    length = norm(x, ord=ord, axis=axis, keepdims=True)
    return x / length, length
