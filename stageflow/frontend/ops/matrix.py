"""`sf.linalg`: TensorFlow's matrix functions, batched over leading dims: factorizations and
solvers (primitives in `stageflow.primitives.factorizations`) and composites of them
(`det`, `norm`, `trace`, `matrix_transpose`, `cholesky_solve`, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core.shapes import normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.ops.creation import eye
from stageflow.frontend.ops.reductions import reduce_max, reduce_sum
from stageflow.frontend.ops.shape import transpose
from stageflow.frontend.tensor import Tensor
from stageflow.primitives import factorizations as fz

__all__ = ["cholesky", "cholesky_solve", "det", "diag_part", "eigh", "eigvalsh", "inv",
           "matrix_transpose", "norm", "qr", "slogdet", "solve", "svd", "trace",
           "triangular_solve"]


def matrix_transpose(a: Any) -> Tensor:
    """The last two dims swapped: [..., m, n] -> [..., n, m].

    a: tensor [..., m, n] of any dtype; returns [..., n, m] of its dtype.

    >>> sf.linalg.matrix_transpose([[1, 2, 3]])
    sf.Tensor([[1],
               [2],
               [3]], shape=(3, 1), dtype=int32)
    >>> sf.linalg.matrix_transpose(sf.ones((4, 2, 3))).shape
    (4, 3, 2)
    """
    a = convert_to_tensor(a)
    if a.ndim < 2:
        raise ValueError(f"matrix_transpose: needs rank >= 2, got shape {a.shape}"
                         f"{describe_location()}")
    return transpose(a, [*range(a.ndim - 2), a.ndim - 1, a.ndim - 2])


def inv(input: Any) -> Tensor:  # noqa: A002
    """The inverse of each square matrix [..., n, n] (float32/float64); a singular matrix
    raises. ``sf.linalg.inv([[2., 0.], [0., 4.]])`` -> ``[[0.5, 0.], [0., 0.25]]``.

    input: float32/float64 tensor [..., n, n]; returns [..., n, n] of its dtype.

    >>> sf.linalg.inv([[2.0, 0.0], [0.0, 4.0]])
    sf.Tensor([[0.5 , 0.  ],
               [0.  , 0.25]], shape=(2, 2), dtype=float32)
    """
    return fz.inv_p.bind(convert_to_tensor(input))


def solve(matrix: Any, rhs: Any, adjoint: bool = False) -> Tensor:
    """x with ``matrix @ x = rhs`` (``matrix^T @ x`` with `adjoint`): matrix [..., n, n],
    rhs [..., n, k], x like rhs. ``sf.linalg.solve([[2., 0.], [0., 4.]], [[2.], [4.]])``
    -> ``[[1.], [1.]]``.

    >>> sf.linalg.solve([[2.0, 0.0], [0.0, 4.0]], [[2.0], [8.0]])
    sf.Tensor([[1.],
               [2.]], shape=(2, 1), dtype=float32)
    """
    matrix, rhs = binary_operands(matrix, rhs)
    return fz.solve_p.bind(matrix_transpose(matrix) if adjoint else matrix, rhs)


def triangular_solve(matrix: Any, rhs: Any, lower: bool = True, adjoint: bool = False
                     ) -> Tensor:
    """x with ``t @ x = rhs`` for the lower (or upper) triangle `t` of `matrix` (the rest is
    not read); ``t^T @ x = rhs`` with `adjoint`. Shapes as for `solve`.

    >>> sf.linalg.triangular_solve([[2.0, 0.0], [1.0, 1.0]], [[4.0], [3.0]])
    sf.Tensor([[2.],
               [1.]], shape=(2, 1), dtype=float32)
    """
    return fz.triangular_solve_p.bind(*binary_operands(matrix, rhs), lower=bool(lower),
                                      adjoint=bool(adjoint))


def cholesky(input: Any) -> Tensor:  # noqa: A002
    """The lower-triangular L with ``L @ L^T = input`` for each symmetric positive definite
    matrix. ``sf.linalg.cholesky([[4., 2.], [2., 2.]])`` -> ``[[2., 0.], [1., 1.]]``.

    input: float32/float64 tensor [..., n, n]; returns L [..., n, n] of its dtype.

    >>> sf.linalg.cholesky([[4.0, 2.0], [2.0, 2.0]])
    sf.Tensor([[2., 0.],
               [1., 1.]], shape=(2, 2), dtype=float32)
    """
    return fz.cholesky_p.bind(convert_to_tensor(input))


def cholesky_solve(chol: Any, rhs: Any) -> Tensor:
    """x with ``A @ x = rhs`` given A's Cholesky factor `chol` (two triangular solves).

    chol: float32/float64 [..., n, n] (from `cholesky`); rhs: [..., n, k] of its dtype; returns
    [..., n, k].

    >>> a = sf.constant([[4.0, 2.0], [2.0, 2.0]])
    >>> sf.linalg.cholesky_solve(sf.linalg.cholesky(a), [[6.0], [4.0]])
    sf.Tensor([[1.],
               [1.]], shape=(2, 1), dtype=float32)
    """
    y = triangular_solve(chol, rhs, lower=True)
    return triangular_solve(chol, y, lower=True, adjoint=True)


def eigh(tensor: Any) -> tuple[Tensor, Tensor]:
    """Eigenvalues (ascending) [..., n] and eigenvectors (columns) [..., n, n] of each
    symmetric matrix (its lower triangle is read). Differentiable for distinct eigenvalues.
    ``sf.linalg.eigh([[2., 0.], [0., 1.]])[0]`` -> ``[1., 2.]``.

    tensor: float32/float64 [..., n, n]; returns eigenvalues [..., n] and eigenvectors [..., n,
    n] of its dtype.

    >>> w, v = sf.linalg.eigh([[2.0, 1.0], [1.0, 2.0]])
    >>> w
    sf.Tensor([1., 3.], shape=(2,), dtype=float32)
    >>> v.shape
    (2, 2)
    >>> sf.reduce_max(sf.abs(v @ sf.diag(w) @ sf.transpose(v) - [[2.0, 1.0], [1.0, 2.0]])) < 1e-6
    sf.Tensor(True, shape=(), dtype=bool)
    """
    values, vectors = fz.eigh_p.bind(convert_to_tensor(tensor))
    return values, vectors


def eigvalsh(tensor: Any) -> Tensor:
    """The eigenvalues of each symmetric matrix, ascending.

    tensor: float32/float64 [..., n, n]; returns [..., n] of its dtype.

    >>> sf.linalg.eigvalsh([[2.0, 1.0], [1.0, 2.0]])
    sf.Tensor([1., 3.], shape=(2,), dtype=float32)
    """
    return eigh(tensor)[0]


def qr(input: Any, full_matrices: bool = False) -> tuple[Tensor, Tensor]:  # noqa: A002
    """q [..., m, k] with orthonormal columns and upper-triangular r [..., k, n], ``q @ r
    = input`` (k = min(m, n), or m with `full_matrices`).

    input: float32/float64 [..., m, n]; returns q and r of its dtype.

    >>> q, r = sf.linalg.qr([[3.0, 1.0], [4.0, 2.0]])
    >>> q.shape, r.shape
    ((2, 2), (2, 2))
    >>> sf.reduce_max(sf.abs(q @ r - [[3.0, 1.0], [4.0, 2.0]])) < 1e-6
    sf.Tensor(True, shape=(), dtype=bool)
    """
    q, r = fz.qr_p.bind(convert_to_tensor(input), full_matrices=bool(full_matrices))
    return q, r


def svd(tensor: Any, full_matrices: bool = False, compute_uv: bool = True) -> Any:
    """Singular values s [..., k] (descending) and, with `compute_uv`, u [..., m, k] and
    v [..., n, k] with ``tensor = u @ diag(s) @ v^T`` (TensorFlow's order: s, u, v).

    tensor: float32/float64 [..., m, n]; every result has its dtype.

    >>> s, u, v = sf.linalg.svd([[3.0, 0.0], [0.0, -4.0]])
    >>> s
    sf.Tensor([4., 3.], shape=(2,), dtype=float32)
    >>> sf.linalg.svd([[3.0, 0.0], [0.0, -4.0]], compute_uv=False)
    sf.Tensor([4., 3.], shape=(2,), dtype=float32)
    """
    s, u, v = fz.svd_p.bind(convert_to_tensor(tensor), full_matrices=bool(full_matrices))
    return (s, u, v) if compute_uv else s


def slogdet(input: Any) -> tuple[Tensor, Tensor]:  # noqa: A002
    """The sign and the log of the absolute value of each square matrix's determinant.

    input: float32/float64 tensor [..., n, n]; returns sign and log|det| [...] of its dtype.

    >>> sign, logdet = sf.linalg.slogdet([[0.0, 2.0], [3.0, 0.0]])
    >>> sign
    sf.Tensor(-1., shape=(), dtype=float32)
    >>> logdet
    sf.Tensor(1.7917595, shape=(), dtype=float32)
    """
    sign, log_abs = fz.slogdet_p.bind(convert_to_tensor(input))
    return sign, log_abs


def det(input: Any) -> Tensor:  # noqa: A002
    """The determinant of each square matrix, ``sign * exp(log |det|)``.
    ``sf.linalg.det([[2., 0.], [0., 3.]])`` -> ``6.``.

    input: float32/float64 tensor [..., n, n]; returns [...] of its dtype.

    >>> sf.linalg.det([[2.0, 0.0], [0.0, 3.0]])
    sf.Tensor(6., shape=(), dtype=float32)
    >>> sf.linalg.det(sf.stack([sf.eye(2), 2.0 * sf.eye(2)]))
    sf.Tensor([1., 4.], shape=(2,), dtype=float32)
    """
    sign, log_abs = slogdet(input)
    return sign * ew.exp(log_abs)


def diag_part(input: Any) -> Tensor:  # noqa: A002
    """The main diagonal of each matrix [..., n, n] -> [..., n].

    input: tensor [..., n, n] of any dtype; returns [..., n] of its dtype.

    >>> sf.linalg.diag_part([[1, 2], [3, 4]])
    sf.Tensor([1, 4], shape=(2,), dtype=int32)
    """
    x = convert_to_tensor(input)
    n = x.shape[-1]
    if x.ndim < 2 or n is None or x.shape[-2] != n:
        raise ValueError(f"diag_part: needs square matrices of known size, got shape "
                         f"{x.shape}{describe_location()}")
    return reduce_sum(x * eye(n, dtype=x.dtype), axis=-1)


def trace(x: Any) -> Tensor:
    """The sum of each matrix's diagonal.

    x: numeric tensor [..., n, n]; returns [...] of its dtype.

    >>> sf.linalg.trace([[1.0, 2.0], [3.0, 4.0]])
    sf.Tensor(5., shape=(), dtype=float32)
    """
    return reduce_sum(diag_part(x), axis=-1)


def norm(tensor: Any, ord: Any = "euclidean",  # noqa: A002
         axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """A vector or matrix norm (TensorFlow's `tf.norm`): `ord` 'euclidean' (the default;
    Frobenius for matrices), 'fro', or a number p >= 1 or inf for vectors over one `axis`;
    'fro', 1, inf or 2 (the largest singular value) for matrices over two axes.
    ``sf.linalg.norm([3., 4.])`` -> ``5.``.

    tensor: float tensor; returns its dtype without `axis` (a scalar for axis=None).

    >>> sf.linalg.norm([3.0, 4.0])
    sf.Tensor(5., shape=(), dtype=float32)
    >>> sf.linalg.norm([[3.0, -4.0], [1.0, 0.0]], ord=1, axis=1)
    sf.Tensor([7., 1.], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(tensor)
    axes = tuple(range(x.ndim)) if axis is None else (
        (normalize_axis(axis, x.ndim),) if isinstance(axis, int) else
        tuple(normalize_axis(a, x.ndim) for a in axis))
    if ord in ("euclidean", "fro"):
        return ew.sqrt(reduce_sum(x * x, axis=axes, keepdims=keepdims))
    if len(axes) == 1 and isinstance(ord, int | float) and ord >= 1:
        magnitude = ew.abs(x)
        if ord == np.inf:
            return reduce_max(magnitude, axis=axes, keepdims=keepdims)
        if ord == 1:
            return reduce_sum(magnitude, axis=axes, keepdims=keepdims)
        return ew.pow(reduce_sum(ew.pow(magnitude, float(ord)), axis=axes, keepdims=keepdims),
                      1.0 / ord)
    if len(axes) == 2 and ord in (1, np.inf):
        rows, columns = axes
        summed = reduce_sum(ew.abs(x), axis=rows if ord == 1 else columns, keepdims=True)
        result = reduce_max(summed, axis=columns if ord == 1 else rows, keepdims=True)
        return result if keepdims else reduce_sum(result, axis=axes)
    if len(axes) == 2 and ord == 2:
        moved = transpose(x, [*(a for a in range(x.ndim) if a not in axes), *axes])
        largest = reduce_max(svd(moved, compute_uv=False), axis=-1)
        if not keepdims:
            return largest
        shape = [1 if a in axes else d for a, d in enumerate(x.shape)]
        return largest.reshape(shape)
    raise ValueError(f"norm: ord {ord!r} over {len(axes)} axes is not supported (vectors: "
                     "'euclidean', p >= 1, inf; matrices: 'fro', 1, inf, 2)"
                     f"{describe_location()}")
