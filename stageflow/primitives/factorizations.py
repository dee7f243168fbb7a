"""Matrix factorizations and solvers over the last two dims, batched over the leading ones:
`inv`, `solve`, `triangular_solve`, `cholesky`, `eigh`, `qr`, `svd`, `slogdet`; gradients.

The kernels are NumPy's LAPACK calls (`numpy.linalg`, batched). Compiled code calls the same
LAPACK routines, from the OpenBLAS NumPy bundles (`codegen.lowered.linalg`), so a staged
function using them is one compiled program and gets eager's numbers; where LAPACK reports a
singular or indefinite matrix, the kernel runs and raises NumPy's `LinAlgError`. Each
primitive's dims are arithmetic on its operand's (`dims`), so programs with unknown dims
size their results at run time.
The gradient rules are the standard ones (Giles' "extended collection of matrix derivative
results", Murray's for Cholesky, Townsend's for the SVD), written with matmuls, these ops and
masks, so they are staged and differentiable again. The rules for `eigh` and `svd` assume
distinct eigen/singular values, and for `qr` a matrix with at least as many rows as
columns, as TensorFlow's and JAX's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import PYTHON, D, DimArith, same_dims
from stageflow.core.op_facts import Cost, Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.primitives.autodiff import (
    constant,
    floating_only,
    matmul,
    reshape,
    where,
)
from stageflow.primitives.structural import transpose_p

_FACTS = {"family": Family.LINALG, "cost": Cost.OPAQUE, "lowered_by": LoweredBy.OP_RULE}


def _check(x: ShapedType, op: str, square: bool = True) -> None:
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError(f"{op} needs float32 or float64 matrices, got {x.dtype.name}")
    if x.ndim < 2:
        raise ValueError(f"{op} needs matrices (rank >= 2), got shape {format_shape(x.shape)}")
    m, n = x.shape[-2:]
    if square and m is not None and n is not None and m != n:
        raise ValueError(f"{op} needs square matrices, got shape {format_shape(x.shape)}")


def _square(op: str):
    def rule(x: ShapedType) -> ShapedType:
        _check(x, op)
        return x
    return rule


# -- the primitives ------------------------------------------------------------------------

inv_p = Primitive("inv", shape_rule=_square("inv"), kernel=np.linalg.inv, dims=same_dims,
                  summary="the inverse of each square matrix", **_FACTS)
cholesky_p = Primitive("cholesky", shape_rule=_square("cholesky"), kernel=np.linalg.cholesky,
                       dims=same_dims, summary="the lower Cholesky factor of each symmetric "
                                               "positive definite matrix", **_FACTS)


def _solve_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], **_: object) -> list[D]:
    """The right-hand sides' dims (`solve` and `triangular_solve`)."""
    return list(operands[1])


def _solve_rule(a: ShapedType, b: ShapedType) -> ShapedType:
    _check(a, "solve")
    if b.dtype != a.dtype or b.ndim != a.ndim:
        raise TypeError(f"solve: the right-hand sides must be {a.dtype.name} of rank {a.ndim} "
                        f"([..., n, k]), got {b.dtype.name}{format_shape(b.shape)}")
    if None not in (a.shape[-1], b.shape[-2]) and a.shape[-1] != b.shape[-2]:
        raise ValueError(f"solve: matrices {format_shape(a.shape)} and right-hand sides "
                         f"{format_shape(b.shape)} do not match")
    return b


solve_p = Primitive("solve", shape_rule=_solve_rule,
                    kernel=lambda a, b: np.linalg.solve(a, b), dims=_solve_dims,
                    summary="x with a @ x = b for square a", **_FACTS)


def _triangular(a: np.ndarray, lower: bool) -> np.ndarray:
    return np.tril(a) if lower else np.triu(a)


def _triangular_solve(a, b, *, lower: bool, adjoint: bool):
    """Only `a`'s `lower` (or upper) triangle is read, as LAPACK's trtrs does."""
    t = _triangular(np.asarray(a), lower)
    return np.linalg.solve(np.swapaxes(t, -1, -2) if adjoint else t, b)


def _triangular_solve_rule(a: ShapedType, b: ShapedType, *, lower: bool, adjoint: bool
                           ) -> ShapedType:
    del lower, adjoint
    return _solve_rule(a, b)


triangular_solve_p = Primitive(
    "triangular_solve", shape_rule=_triangular_solve_rule, kernel=_triangular_solve,
    dims=_solve_dims,
    summary="x with t @ x = b (or t^T @ x = b, adjoint) for the lower (upper) triangle t "
            "of a", **_FACTS)


def _eigh_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], **_: object
               ) -> list[list[D]]:
    """Eigenvalues [..., n], eigenvectors [..., n, n]."""
    a = list(operands[0])
    return [a[:-1], a]


def _eigh_rule(a: ShapedType) -> tuple[ShapedType, ShapedType]:
    _check(a, "eigh")
    values, vectors = _eigh_dims(PYTHON, [a.shape])
    return ShapedType(tuple(values), a.dtype), ShapedType(tuple(vectors), a.dtype)


eigh_p = Primitive("eigh", shape_rule=_eigh_rule, dims=_eigh_dims,
                   kernel=lambda a: list(np.linalg.eigh(a, UPLO="L")),
                   summary="eigenvalues (ascending) and eigenvectors of each symmetric "
                           "matrix (its lower triangle read)", multiple_results=True,
                   **_FACTS)


def _qr_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *, full_matrices: bool,
             **_: object) -> list[list[D]]:
    """q [..., m, k] and r [..., k, n], k = m for full matrices, else min(m, n)."""
    *batch, m, n = operands[0]
    k = m if full_matrices else d.min(m, n)
    return [[*batch, m, k], [*batch, k, n]]


def _qr_rule(a: ShapedType, *, full_matrices: bool) -> tuple[ShapedType, ShapedType]:
    _check(a, "qr", square=False)
    q, r = _qr_dims(PYTHON, [a.shape], full_matrices=full_matrices)
    return ShapedType(tuple(q), a.dtype), ShapedType(tuple(r), a.dtype)


qr_p = Primitive("qr", shape_rule=_qr_rule, dims=_qr_dims,
                 kernel=lambda a, *, full_matrices: list(
                     np.linalg.qr(a, mode="complete" if full_matrices else "reduced")),
                 summary="q (orthonormal columns) and upper-triangular r with a = q @ r",
                 multiple_results=True, **_FACTS)


def _svd_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *, full_matrices: bool,
              **_: object) -> list[list[D]]:
    """s [..., k], u [..., m, k] and v [..., n, k], k = min(m, n) (u [..., m, m] and v
    [..., n, n] for full matrices)."""
    *batch, m, n = operands[0]
    k = d.min(m, n)
    return [[*batch, k], [*batch, m, m if full_matrices else k],
            [*batch, n, n if full_matrices else k]]


def _svd_rule(a: ShapedType, *, full_matrices: bool) -> tuple[ShapedType, ...]:
    _check(a, "svd", square=False)
    return tuple(ShapedType(tuple(dims), a.dtype)
                 for dims in _svd_dims(PYTHON, [a.shape], full_matrices=full_matrices))


def _svd(a, *, full_matrices: bool):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return [s, u, np.ascontiguousarray(np.swapaxes(vh, -1, -2))]


svd_p = Primitive("svd", shape_rule=_svd_rule, kernel=_svd, dims=_svd_dims,
                  summary="singular values (descending), u and v with a = u diag(s) v^T",
                  multiple_results=True, **_FACTS)


def _slogdet_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], **_: object
                  ) -> list[list[D]]:
    """The sign and log |det|, one per matrix: the batch dims."""
    batch = list(operands[0][:-2])
    return [batch, list(batch)]


def _slogdet_rule(a: ShapedType) -> tuple[ShapedType, ShapedType]:
    _check(a, "slogdet")
    sign, log_abs = _slogdet_dims(PYTHON, [a.shape])
    return ShapedType(tuple(sign), a.dtype), ShapedType(tuple(log_abs), a.dtype)


slogdet_p = Primitive("slogdet", shape_rule=_slogdet_rule, dims=_slogdet_dims,
                      kernel=lambda a: [np.asarray(v) for v in np.linalg.slogdet(a)],
                      summary="the sign and log |det| of each square matrix",
                      multiple_results=True, **_FACTS)


# -- gradients -------------------------------------------------------------------------------

def _mT(x):
    perm = (*range(len(x.shape) - 2), len(x.shape) - 1, len(x.shape) - 2)
    return transpose_p.bind(x, perm=perm)


def _mm(a, b, ta: bool = False, tb: bool = False):
    return matmul(a, b, transpose_a=ta, transpose_b=tb)


def _mask(x, keep: Any) -> Any:
    """`x` where the static [n, n] bool mask `keep(n)` holds, else 0."""
    n = x.shape[-1]
    if n is None:
        raise NotImplementedError("this gradient needs the matrices' size known")
    return where(constant(keep(n), dtypes.bool_), x, 0.0)


def _diag_matrix(v):
    """[..., n] -> [..., n, n] with v on the diagonal."""
    n = v.shape[-1]
    if n is None:
        raise NotImplementedError("this gradient needs the matrices' size known")
    column = reshape(v, (*v.shape, 1))  # [..., n, 1], broadcast along the rows' columns
    return where(constant(np.eye(n, dtype=bool), dtypes.bool_), column, 0.0)


def _pairwise_inverse(values, square: bool = False):
    """F[i, j] = 1 / (v_j - v_i) (of squares, `square`) off the diagonal, 0 on it: the
    factor of eigenvector and singular vector gradients (distinct values assumed)."""
    if square:
        values = values * values
    rows = reshape(values, (*values.shape[:-1], values.shape[-1], 1))
    columns = reshape(values, (*values.shape[:-1], 1, values.shape[-1]))
    difference = columns - rows
    safe = _mask(difference, lambda n: ~np.eye(n, dtype=bool)) + _diag_matrix(
        values * 0.0 + 1.0)  # 1 on the diagonal: no division by zero there
    return _mask(1.0 / safe, lambda n: ~np.eye(n, dtype=bool))


@inv_p.def_vjp
@floating_only
def _inv_vjp(cotangents, inputs, outputs):
    (g,), (out,) = cotangents, outputs
    return [-_mm(_mm(out, g, ta=True), out, tb=True)]


@solve_p.def_vjp
@floating_only
def _solve_vjp(cotangents, inputs, outputs):
    (g,), (a, _), (x,) = cotangents, inputs, outputs
    gb = solve_p.bind(_mT(a), g)
    return [-_mm(gb, x, tb=True), gb]


@triangular_solve_p.def_vjp
@floating_only
def _triangular_solve_vjp(cotangents, inputs, outputs, *, lower, adjoint):
    (g,), (a, _), (x,) = cotangents, inputs, outputs
    gb = triangular_solve_p.bind(a, g, lower=lower, adjoint=not adjoint)
    ga = -_mm(x, gb, tb=True) if adjoint else -_mm(gb, x, tb=True)
    return [_mask(ga, (lambda n: np.tril(np.ones((n, n), bool))) if lower else
                  (lambda n: np.triu(np.ones((n, n), bool)))), gb]


@cholesky_p.def_vjp
@floating_only
def _cholesky_vjp(cotangents, inputs, outputs):
    # Murray (2016): with P = Phi(L^T Lbar) (the lower triangle, its diagonal halved),
    # Abar = sym(L^-T P L^-1).
    (g,), (low,) = cotangents, outputs
    product = _mm(low, g, ta=True)
    phi = _mask(product, lambda n: np.tril(np.ones((n, n), bool), -1)) + 0.5 * _mask(
        product, lambda n: np.eye(n, dtype=bool))
    left = triangular_solve_p.bind(low, phi, lower=True, adjoint=True)  # L^-T P
    s = _mT(triangular_solve_p.bind(low, _mT(left), lower=True, adjoint=True))
    return [0.5 * (s + _mT(s))]


@slogdet_p.def_vjp
@floating_only
def _slogdet_vjp(cotangents, inputs, outputs):
    # d log|det a| = tr(a^-1 da): abar = g a^-T (the sign has no gradient)
    (_, g), (a,) = cotangents, inputs
    if g is None:
        return [None]
    scale = reshape(g, (*g.shape, 1, 1))
    return [scale * _mT(inv_p.bind(a))]


@eigh_p.def_vjp
@floating_only
def _eigh_vjp(cotangents, inputs, outputs):
    # abar = v (diag(wbar) + F o (v^T vbar)) v^T, projected onto symmetric matrices
    (gw, gv), (w, v) = cotangents, outputs
    inner = None
    if gw is not None:
        inner = _diag_matrix(gw)
    if gv is not None:
        term = _pairwise_inverse(w) * _mm(v, gv, ta=True)
        inner = term if inner is None else inner + term
    if inner is None:
        return [None]
    ga = _mm(_mm(v, inner), v, tb=True)
    return [0.5 * (ga + _mT(ga))]


@qr_p.def_vjp
@floating_only
def _qr_vjp(cotangents, inputs, outputs, *, full_matrices):
    # For m >= n (Walter and Lehmann; PyTorch's rule): M = R Rbar^T - Qbar^T Q,
    # abar = (Qbar + Q copyltu(M)) R^-T, copyltu(M) = tril(M) + tril(M, -1)^T.
    (gq, gr), (a,), (q, r) = cotangents, inputs, outputs
    m, n = a.shape[-2:]
    if full_matrices or m is None or n is None or m < n:
        raise NotImplementedError("the gradient of qr needs a reduced factorisation of a "
                                  "matrix with at least as many rows as columns, of known "
                                  "size")
    gq = gq if gq is not None else q * 0.0
    gr = gr if gr is not None else r * 0.0
    middle = _mm(r, gr, tb=True) - _mm(gq, q, ta=True)
    lower = _mask(middle, lambda k: np.tril(np.ones((k, k), bool)))
    strictly = _mask(middle, lambda k: np.tril(np.ones((k, k), bool), -1))
    copied = lower + _mT(strictly)
    b = gq + _mm(q, copied)
    # b R^-T: solve R x^T = b^T
    return [_mT(triangular_solve_p.bind(r, _mT(b), lower=False, adjoint=False))]


@svd_p.def_vjp
@floating_only
def _svd_vjp(cotangents, inputs, outputs, *, full_matrices):
    # Townsend (2016), reduced factorisation, distinct non-zero singular values:
    # abar = U [diag(sbar) + (F o (U^T Ubar - Ubar^T U)) S + S (F o (V^T Vbar - Vbar^T V))] V^T
    #        + (I - U U^T) Ubar S^-1 V^T + U S^-1 Vbar^T (I - V V^T), F_ij = 1/(s_j^2 - s_i^2)
    (gs, gu, gv), (s, u, v) = cotangents, outputs
    if full_matrices:
        raise NotImplementedError("the gradient of svd needs full_matrices=False")
    inner = _diag_matrix(gs) if gs is not None else None
    f = _pairwise_inverse(s, square=True)
    big_s = _diag_matrix(s)
    inverse_s = reshape(1.0 / s, (*s.shape[:-1], 1, s.shape[-1]))  # scales columns
    terms = [] if inner is None else [inner]
    extra = []
    if gu is not None:
        utgu = _mm(u, gu, ta=True)
        terms.append(_mm(f * (utgu - _mT(utgu)), big_s))
        projected = gu - _mm(u, utgu)  # (I - U U^T) Ubar
        extra.append(_mm(projected * inverse_s, v, tb=True))
    if gv is not None:
        vtgv = _mm(v, gv, ta=True)
        terms.append(_mm(big_s, f * (vtgv - _mT(vtgv))))
        projected = gv - _mm(v, vtgv)  # (I - V V^T) Vbar
        extra.append(_mm(u * inverse_s, projected, tb=True))
    if not terms and not extra:
        return [None]
    result = None
    if terms:
        core = terms[0]
        for term in terms[1:]:
            core = core + term
        result = _mm(_mm(u, core), v, tb=True)
    for term in extra:
        result = term if result is None else result + term
    return [result]


__all__ = ["cholesky_p", "eigh_p", "inv_p", "qr_p", "slogdet_p", "solve_p", "svd_p",
           "triangular_solve_p"]
