"""`sf.linalg` against NumPy on batches of matrices (float32 and float64), eagerly and staged,
and every factorization's gradient against finite differences (float64)."""

from __future__ import annotations

import numpy as np
import pytest
from strategies import numeric_gradient

import stageflow as sf

WAYS = ["eager", "staged"]


def run(f, way, *args):
    return (f if way == "eager" else sf.function(f))(*args)


def spd(rng, batch, n):
    a = rng.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_numpy(way, dtype):
    rng = np.random.default_rng(0)
    tol = {"rtol": 2e-4, "atol": 2e-4} if dtype == np.float32 else {"rtol": 1e-9,
                                                                      "atol": 1e-9}
    a = rng.standard_normal((2, 4, 4)).astype(dtype)
    b = rng.standard_normal((2, 4, 3)).astype(dtype)
    s = spd(rng, (2,), 4).astype(dtype)
    tall = rng.standard_normal((2, 5, 3)).astype(dtype)

    def everything(a, b, s, tall):
        low = sf.linalg.cholesky(s)
        return {
            "inv": sf.linalg.inv(a), "solve": sf.linalg.solve(a, b),
            "solve_adjoint": sf.linalg.solve(a, b, adjoint=True),
            "lower": sf.linalg.triangular_solve(a, b, lower=True),
            "upper_adjoint": sf.linalg.triangular_solve(a, b, lower=False, adjoint=True),
            "cholesky": low, "cholesky_solve": sf.linalg.cholesky_solve(low, b),
            "eigvalsh": sf.linalg.eigvalsh(s), "det": sf.linalg.det(a),
            "logdet": sf.linalg.slogdet(a)[1], "sign": sf.linalg.slogdet(a)[0],
            "svals": sf.linalg.svd(tall, compute_uv=False), "trace": sf.linalg.trace(a),
            "diag": sf.linalg.diag_part(a), "transpose": sf.linalg.matrix_transpose(tall),
            "fro": sf.linalg.norm(a, axis=[-2, -1]), "l1": sf.linalg.norm(b, ord=1, axis=-1),
            "inf": sf.linalg.norm(a, ord=np.inf, axis=[-2, -1]),
            "spectral": sf.linalg.norm(tall, ord=2, axis=[-2, -1]),
            "p3": sf.linalg.norm(b, ord=3, axis=1),
        }

    got = {k: v.numpy() for k, v in run(everything, way, a, b, s, tall).items()}
    want = {
        "inv": np.linalg.inv(a), "solve": np.linalg.solve(a, b),
        "solve_adjoint": np.linalg.solve(np.swapaxes(a, -1, -2), b),
        "lower": np.linalg.solve(np.tril(a), b),
        "upper_adjoint": np.linalg.solve(np.swapaxes(np.triu(a), -1, -2), b),
        "cholesky": np.linalg.cholesky(s), "cholesky_solve": np.linalg.solve(s, b),
        "eigvalsh": np.linalg.eigvalsh(s), "det": np.linalg.det(a),
        "logdet": np.linalg.slogdet(a)[1], "sign": np.linalg.slogdet(a)[0],
        "svals": np.linalg.svd(tall, compute_uv=False), "trace": np.trace(a, axis1=1, axis2=2),
        "diag": np.diagonal(a, axis1=1, axis2=2), "transpose": np.swapaxes(tall, -1, -2),
        "fro": np.linalg.norm(a, axis=(-2, -1)), "l1": np.linalg.norm(b, ord=1, axis=-1),
        "inf": np.linalg.norm(a, ord=np.inf, axis=(-2, -1)),
        "spectral": np.linalg.norm(tall, ord=2, axis=(-2, -1)),
        "p3": np.linalg.norm(b, ord=3, axis=1),
    }
    for key in want:
        np.testing.assert_allclose(got[key], want[key], err_msg=key, **tol)


@pytest.mark.parametrize("way", WAYS)
def test_factorizations_reconstruct_their_input(way):
    rng = np.random.default_rng(1)
    s = spd(rng, (3,), 4)
    tall = rng.standard_normal((3, 6, 4))

    def factors(s, tall):
        w, v = sf.linalg.eigh(s)
        q, r = sf.linalg.qr(tall)
        sv, u, vv = sf.linalg.svd(tall)
        return w, v, q, r, sv, u, vv

    w, v, q, r, sv, u, vv = (t.numpy() for t in run(factors, way, s, tall))
    np.testing.assert_allclose(v @ (w[..., None] * np.swapaxes(v, -1, -2)), s, atol=1e-10)
    np.testing.assert_allclose(q @ r, tall, atol=1e-10)
    np.testing.assert_allclose(np.triu(r), r)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(4),
                                                                           (3, 4, 4)),
                               atol=1e-10)
    np.testing.assert_allclose((u * sv[..., None, :]) @ np.swapaxes(vv, -1, -2), tall,
                               atol=1e-10)
    assert q.shape == (3, 6, 4) and r.shape == (3, 4, 4)
    full_q, full_r = sf.linalg.qr(tall, full_matrices=True)
    assert full_q.shape == (3, 6, 6) and full_r.shape == (3, 6, 4)



def symmetric(x):
    return (x + sf.linalg.matrix_transpose(x)) * 0.5


rng_ = np.random.default_rng(2)
WEIGHTS = {k: rng_.standard_normal(shape) for k, shape in
           {"m": (2, 3, 3), "b": (2, 3, 2), "v": (2, 3), "tall": (2, 4, 3), "s": (2, 3)}.items()}
GRADIENT_CASES = {
    "inv": (lambda a: sf.linalg.inv(a) * WEIGHTS["m"], "general"),
    "solve": (lambda a: sf.linalg.solve(a, a[..., :2]) * WEIGHTS["b"], "general"),
    "triangular_solve": (lambda a: sf.linalg.triangular_solve(a, a[..., :2], lower=False)
                         * WEIGHTS["b"], "general"),
    "triangular_solve_adjoint": (lambda a: sf.linalg.triangular_solve(
        a, a[..., :2], adjoint=True) * WEIGHTS["b"], "general"),
    "cholesky": (lambda a: sf.linalg.cholesky(
        sf.linalg.matmul(a, a, transpose_b=True) + 3.0 * sf.eye(3, dtype=sf.float64))
        * WEIGHTS["m"], "general"),
    "eigh": (lambda a: (sf.linalg.eigh(symmetric(a))[0] * WEIGHTS["v"],
                        sf.abs(sf.linalg.eigh(symmetric(a))[1]) * WEIGHTS["m"]), "general"),
    "qr": (lambda a: (sf.linalg.qr(a)[0] * WEIGHTS["tall"], sf.linalg.qr(a)[1] * WEIGHTS["m"]),
           "tall"),
    "svd": (lambda a: (sf.linalg.svd(a)[0] * WEIGHTS["s"],
                       sf.abs(sf.linalg.svd(a)[1]) * WEIGHTS["tall"],
                       sf.abs(sf.linalg.svd(a)[2]) * WEIGHTS["m"]), "tall"),
    "slogdet": (lambda a: sf.linalg.slogdet(a)[1] * WEIGHTS["v"][:, 0], "general"),
    "det": (lambda a: sf.linalg.det(a) * WEIGHTS["v"][:, 0], "general"),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
def test_gradients_match_finite_differences(name):
    f, kind = GRADIENT_CASES[name]
    rng = np.random.default_rng(3)
    shape = (2, 4, 3) if kind == "tall" else (2, 3, 3)
    x = rng.standard_normal(shape) + (0 if kind == "tall" else 3.0 * np.eye(3))

    def loss(a):
        parts = f(a)
        parts = parts if isinstance(parts, tuple) else (parts,)
        total = sf.reduce_sum(parts[0])
        for part in parts[1:]:
            total = total + sf.reduce_sum(part)
        return total

    with sf.GradientTape() as tape:
        a = sf.constant(x)
        tape.watch(a)
        value = loss(a)
    got = tape.gradient(value, a).numpy()
    want = numeric_gradient(lambda v: float(loss(sf.constant(v)).numpy()), x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_staged_functions_with_them_are_one_compiled_program():
    f = sf.function(lambda a: sf.linalg.inv(a) * 2.0)
    a = np.eye(3) * 2.0
    np.testing.assert_allclose(f(a).numpy(), np.eye(3))
    concrete = f.get_concrete_function(a)
    assert concrete.stats()["steps_reasons"] == {}
    assert concrete.program.program is not None


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="square"):
        sf.linalg.inv(sf.ones((2, 3)))
    with pytest.raises(TypeError, match="float32 or float64"):
        sf.linalg.cholesky(sf.constant([[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match="do not match"):
        sf.linalg.solve(sf.ones((3, 3)), sf.ones((2, 1)))
    with pytest.raises(ValueError, match="not supported"):
        sf.linalg.norm(sf.ones((2, 2)), ord="nuc", axis=[0, 1])
