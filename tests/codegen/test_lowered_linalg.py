"""Lowered factorizations and solvers (`codegen.lowered.linalg`): LAPACK called from compiled
code against the NumPy kernels, which call the same routines.

Each op compiled alone over hypothesis-drawn batch shapes, sizes and both dtypes returns
status 0 (the compiled code ran, not the kernel it falls back to) and eager's numbers bit
for bit (triangular_solve, whose kernel is an LU, to rounding); strided views are read in
place and bad dims refused with a status code. Staged functions of every op are one
compiled program, with static and unknown dims, and agree with eager and with NumPy;
singular, indefinite and NaN matrices raise eager's `LinAlgError` (slogdet gives 0 and
-inf, as NumPy does); gradients of a staged step equal the eager tape's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered import linalg
from stageflow.codegen.lowered.compile import CompiledOp, OpSpec, compile_ops, op_spec, rule_for
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.ir import parse_module
from stageflow.runtime.compiled_program import CompiledProgram

FLOATS = [np.float32, np.float64]
pytestmark = pytest.mark.skipif(not linalg.lapack_available(),
                                reason="NumPy's OpenBLAS exports no LAPACK here")
_compiled: dict[tuple, CompiledOp] = {}


def spec_for(name: str, arrays: list[np.ndarray], **params) -> OpSpec:
    """The op's spec with every dim unknown (as the rule compiles it anyway)."""
    inputs = tuple(ShapedType((None,) * a.ndim, a.dtype) for a in arrays)
    outputs = REGISTRY[name].shape_rule(*inputs, **params)
    return OpSpec(name, inputs, outputs if isinstance(outputs, tuple) else (outputs,), params)


def compiled(spec: OpSpec) -> CompiledOp:
    if spec.key not in _compiled:
        op = compile_ops([spec])[0]
        assert op is not None, f"no lowering for {spec}"
        _compiled[spec.key] = op
    return _compiled[spec.key]


def kernel(name: str, arrays: list[np.ndarray], **params) -> list[np.ndarray]:
    result = REGISTRY[name].kernel(*arrays, **params)
    return [np.asarray(r) for r in (result if isinstance(result, list) else [result])]


def run_alone(name: str, arrays: list[np.ndarray], **params) -> tuple[int, list[np.ndarray]]:
    """The compiled op's status and outputs (NaN-filled first, so none is left unwritten)."""
    outputs = [np.full(w.shape, np.nan, arrays[0].dtype) for w in kernel(name, arrays, **params)]
    return compiled(spec_for(name, arrays, **params)).call(arrays, outputs), outputs


def values(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def spd(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    """Symmetric positive definite matrices of `shape` [..., n, n]."""
    x = np.random.default_rng(seed).standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def triangular(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    """Well-conditioned triangles (a large diagonal) with the other triangle random."""
    return (values(shape, np.float64, seed) + (shape[-1] + 2) * np.eye(shape[-1])).astype(dtype)


def cases(batch: tuple[int, ...], n: int, k: int, m: int, dtype, seed: int):
    """(op name, inputs, params) of every op and variant on matrices of these sizes."""
    general = values((*batch, n, n), dtype, seed)
    rhs = values((*batch, n, k), dtype, seed + 1)
    rect = values((*batch, m, n), dtype, seed + 2)
    yield "inv", [general], {}
    yield "solve", [general, rhs], {}
    yield "cholesky", [spd((*batch, n, n), dtype, seed)], {}
    yield "eigh", [spd((*batch, n, n), dtype, seed) - 2.0 * np.eye(n, dtype=dtype)], {}
    yield "slogdet", [general], {}
    for full in (False, True):
        yield "qr", [rect], {"full_matrices": full}
        yield "svd", [rect], {"full_matrices": full}


@settings(max_examples=25, deadline=None)
@given(batch=st.lists(st.integers(0, 3), max_size=2).map(tuple), n=st.integers(0, 6),
       k=st.integers(0, 3), m=st.integers(0, 7), dtype=st.sampled_from(FLOATS),
       seed=st.integers(0, 1000))
def test_each_op_alone_gives_eagers_numbers_bit_for_bit(batch, n, k, m, dtype, seed):
    for name, arrays, params in cases(batch, n, k, m, dtype, seed):
        code, got = run_alone(name, arrays, **params)
        assert code == 0, (name, params)
        for g, want in zip(got, kernel(name, arrays, **params), strict=True):
            assert g.dtype == dtype and g.shape == want.shape
            np.testing.assert_array_equal(g, want, err_msg=f"{name} {params}")


@settings(max_examples=25, deadline=None)
@given(batch=st.lists(st.integers(0, 3), max_size=2).map(tuple), n=st.integers(0, 6),
       k=st.integers(0, 3), dtype=st.sampled_from(FLOATS), lower=st.booleans(),
       adjoint=st.booleans(), seed=st.integers(0, 1000))
def test_triangular_solve_reads_one_triangle_and_matches_the_kernel(batch, n, k, dtype, lower,
                                                                   adjoint, seed):
    """trtrs substitutes where the kernel factors the triangle: equal to rounding; the
    other triangle, NaN here, is never read."""
    a = triangular((*batch, n, n), dtype, seed)
    rhs = values((*batch, n, k), dtype, seed + 1)
    other = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    poisoned = np.where(other, np.nan, a).astype(dtype)
    params = {"lower": lower, "adjoint": adjoint}
    code, (got,) = run_alone("triangular_solve", [poisoned, rhs], **params)
    assert code == 0
    (want,) = kernel("triangular_solve", [a, rhs], **params)
    tolerance = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", FLOATS)
def test_large_matrices_where_openblas_threads(dtype):
    """Sizes where OpenBLAS blocks and threads the factorizations: eager's numbers to
    rounding (thread scheduling may order sums differently)."""
    n = 160
    general, rect = values((n, n), dtype), values((n + 30, n), dtype, seed=1)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-10,
                                                                            "atol": 1e-10}
    for name, arrays, params in [("inv", [general], {}), ("cholesky", [spd((n, n), dtype)], {}),
                                 ("eigh", [spd((n, n), dtype)], {}), ("slogdet", [general], {}),
                                 ("qr", [rect], {"full_matrices": False}),
                                 ("svd", [rect], {"full_matrices": True})]:
        code, got = run_alone(name, arrays, **params)
        assert code == 0
        for g, want in zip(got, kernel(name, arrays, **params), strict=True):
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(g / scale, want / scale, err_msg=name, **tolerance)


def test_strided_views_are_read_in_place():
    """Transposed, reversed and broadcast operands: copied into LAPACK's storage through
    their strides (no status code, no kernel)."""
    a = spd((3, 4, 4), np.float64)
    rhs = values((3, 4, 2), np.float64)
    views = {
        "transposed": np.swapaxes(values((3, 4, 4), np.float64), -1, -2),
        "reversed": a[::-1, ::-1, ::-1],
        "every_other": values((6, 4, 8), np.float64)[::2, :, ::2],
    }
    for label, view in views.items():
        for name in ("inv", "slogdet", "eigh"):
            code, got = run_alone(name, [view])
            assert code == 0, (label, name)
            for g, want in zip(got, kernel(name, [np.ascontiguousarray(view)]), strict=True):
                np.testing.assert_array_equal(g, want, err_msg=f"{label} {name}")
    one = np.broadcast_to(a[:1], (1, 4, 4))  # one matrix for the whole batch of rhs
    code, (got,) = run_alone("solve", [one, rhs])
    assert code == 0
    np.testing.assert_array_equal(got, np.linalg.solve(a[:1], rhs))


def test_bad_dims_are_refused_with_a_status_code():
    square = compiled(spec_for("inv", [np.zeros((2, 3, 3))]))
    assert square.call([np.zeros((2, 3, 4))], [np.zeros((2, 3, 4))]) == 1
    assert square.call([np.eye(3)[None]], [np.zeros((2, 3, 3))]) == 2  # the output's dims
    solve = compiled(spec_for("solve", [np.zeros((2, 3, 3)), np.zeros((2, 3, 1))]))
    assert solve.call([np.eye(3)[None], np.ones((1, 2, 1))], [np.zeros((1, 2, 1))]) == 2
    assert solve.call([np.stack([np.eye(3)] * 2), np.ones((3, 3, 1))],
                      [np.zeros((3, 3, 1))]) == 1  # a batch of 2 cannot serve 3
    qr = compiled(spec_for("qr", [np.zeros((4, 2))], full_matrices=False))
    assert qr.call([np.ones((4, 2))], [np.zeros((4, 4)), np.zeros((4, 2))]) == 2


@pytest.mark.parametrize("dtype", FLOATS)
def test_lapack_failures_return_a_code_and_slogdet_of_a_singular_matrix_does_not(dtype):
    singular = np.array([[[1.0, 2.0], [2.0, 4.0]]], dtype)
    indefinite = np.array([[[1.0, 2.0], [2.0, 1.0]]], dtype)
    zero_diagonal = np.array([[[1.0, 0.0], [5.0, 0.0]]], dtype)
    nan = np.full((1, 3, 3), np.nan, dtype)  # (LAPACK converges on a NaN 2x2)
    for name, arrays, params in [("inv", [singular], {}),
                                 ("solve", [singular, np.ones((1, 2, 1), dtype)], {}),
                                 ("cholesky", [indefinite], {}),
                                 ("triangular_solve", [zero_diagonal, np.ones((1, 2, 1), dtype)],
                                  {"lower": True, "adjoint": False}),
                                 ("eigh", [nan], {})]:
        arrays_out = [np.empty(s.shape, dtype) for s in
                      _shapes(name, arrays, **params)]
        assert compiled(spec_for(name, arrays, **params)).call(arrays, arrays_out) == 1, name
    code, (sign, log_abs) = run_alone("slogdet", [singular])
    assert code == 0 and sign[0] == 0.0 and log_abs[0] == -np.inf


def _shapes(name: str, arrays: list[np.ndarray], **params) -> list[np.ndarray]:
    types = REGISTRY[name].shape_rule(*[ShapedType(a.shape, a.dtype) for a in arrays], **params)
    return [np.empty(t.shape) for t in (types if isinstance(types, tuple) else (types,))]


# -- whole programs -------------------------------------------------------------------------


def one_program(concrete) -> None:
    """The concrete function runs as one compiled program (no step plan, no reason)."""
    assert concrete.stats()["steps_reasons"] == {}
    assert concrete.program.program is not None


@pytest.fixture
def no_fallback(monkeypatch):
    """A program's error code (which would run its steps instead) fails the test."""
    def failed(self, values):
        raise AssertionError(f"{self} returned an error code")

    monkeypatch.setattr(CompiledProgram, "_failed", failed)


def everything(a, s, b, tall):
    """Every op, and a matmul and elementwise ops between them (kernels of the program)."""
    low = sf.linalg.cholesky(s)
    w, v = sf.linalg.eigh(s)
    q, r = sf.linalg.qr(tall)
    full_q, full_r = sf.linalg.qr(tall, full_matrices=True)
    sv, u, vv = sf.linalg.svd(tall)
    _, full_u, full_v = sf.linalg.svd(tall, full_matrices=True)
    sign, log_abs = sf.linalg.slogdet(a)
    return {
        "inv": sf.linalg.inv(a) * 2.0, "solve": sf.linalg.solve(a, b),
        "cholesky": low, "cholesky_solve": sf.linalg.cholesky_solve(low, b),
        "upper_adjoint": sf.linalg.triangular_solve(a, b, lower=False, adjoint=True),
        "eigenvalues": w, "eigenvectors": v, "q": q, "r": r, "full_q": full_q,
        "full_r": full_r, "s": sv, "u": u, "v": vv, "full_u": full_u, "full_v": full_v,
        "sign": sign, "log_abs": log_abs, "gram": sf.matmul(q, q, transpose_a=True),
    }


def numpy_everything(a, s, b, tall):
    """NumPy's own answers (what the kernels compute, without stageflow)."""
    low = np.linalg.cholesky(s)
    w, v = np.linalg.eigh(s)
    q, r = np.linalg.qr(tall)
    full_q, full_r = np.linalg.qr(tall, mode="complete")
    u, sv, vh = np.linalg.svd(tall, full_matrices=False)
    full_u, _, full_vh = np.linalg.svd(tall)
    sign, log_abs = np.linalg.slogdet(a)
    t = np.swapaxes(np.triu(a), -1, -2)
    return {
        "inv": np.linalg.inv(a) * 2.0, "solve": np.linalg.solve(a, b), "cholesky": low,
        "cholesky_solve": np.linalg.solve(s, b), "upper_adjoint": np.linalg.solve(t, b),
        "eigenvalues": w, "eigenvectors": v, "q": q, "r": r, "full_q": full_q,
        "full_r": full_r, "s": sv, "u": u, "v": np.swapaxes(vh, -1, -2), "full_u": full_u,
        "full_v": np.swapaxes(full_vh, -1, -2), "sign": sign, "log_abs": log_abs,
        "gram": np.swapaxes(q, -1, -2) @ q,
    }


def program_inputs(batch: int, n: int, m: int, dtype) -> list[np.ndarray]:
    return [triangular((batch, n, n), dtype, 1), spd((batch, n, n), dtype, 2),
            values((batch, n, 2), dtype, 3), values((batch, m, n), dtype, 4)]


@pytest.mark.parametrize("dtype", FLOATS)
def test_every_op_in_one_program_with_static_and_unknown_dims(dtype, no_fallback):
    static = sf.function(everything)
    dyn = sf.function(everything, input_signature=[
        sf.TensorSpec([None, None, None], dtype), sf.TensorSpec([None, None, None], dtype),
        sf.TensorSpec([None, None, 2], dtype), sf.TensorSpec([None, None, None], dtype)])
    one_program(dyn.get_concrete_function())
    tolerance = {"rtol": 2e-5, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-11,
                                                                            "atol": 1e-11}
    for batch, n, m in [(2, 4, 6), (3, 3, 5), (1, 5, 5), (0, 2, 3)]:
        arrays = program_inputs(batch, n, m, dtype)
        one_program(static.get_concrete_function(*map(sf.constant, arrays)))
        eager = {k: t.numpy() for k, t in everything(*map(sf.constant, arrays)).items()}
        reference = numpy_everything(*[a.astype(np.float64) for a in arrays])
        for f in (static, dyn):
            got = {k: t.numpy() for k, t in f(*arrays).items()}
            for key, want in eager.items():
                assert got[key].dtype == dtype and got[key].shape == want.shape, key
                if key in ("cholesky_solve", "upper_adjoint"):  # trtrs against the kernel's LU
                    np.testing.assert_allclose(got[key], want, err_msg=key, **tolerance)
                else:  # the kernels' routines on the same storage
                    np.testing.assert_array_equal(got[key], want, err_msg=key)
                np.testing.assert_allclose(got[key], reference[key].astype(dtype),
                                           err_msg=key, **tolerance)


@pytest.mark.parametrize("unknown", [False, True])
def test_singular_indefinite_and_nan_matrices_raise_eagers_error(unknown):
    """The op's status stops the program; its steps run and the kernel raises NumPy's
    error, with the message eager execution gives."""
    spec = [sf.TensorSpec([None, None, None], sf.float64)] if unknown else None
    inverse = sf.function(lambda a: sf.linalg.inv(a) + 1.0, input_signature=spec)
    cholesky = sf.function(lambda a: sf.linalg.cholesky(a) * 2.0, input_signature=spec)
    eigh = sf.function(lambda a: sf.linalg.eigh(a)[0], input_signature=spec)
    svd = sf.function(lambda a: sf.linalg.svd(a)[0], input_signature=spec)
    singular = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
    indefinite = np.array([[[4.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]])
    nan = np.full((1, 3, 3), np.nan)
    for f, x in [(inverse, singular), (cholesky, indefinite), (eigh, nan), (svd, nan)]:
        one_program(f.get_concrete_function(*([] if unknown else [sf.constant(x)])))
        with pytest.raises(np.linalg.LinAlgError) as eager:
            f.python_function(sf.constant(x))
        with pytest.raises(np.linalg.LinAlgError) as staged:
            f(x)
        assert str(staged.value).splitlines()[0] == str(eager.value).splitlines()[0]
    np.testing.assert_allclose(inverse(np.eye(2)[None] * 2.0).numpy(), [np.eye(2) * 0.5 + 1.0])


def test_slogdet_and_det_of_singular_matrices_in_a_program(no_fallback):
    f = sf.function(lambda a: (sf.linalg.slogdet(a)[0], sf.linalg.det(a)))
    a = np.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 2.0], [3.0, 0.0]]])
    one_program(f.get_concrete_function(sf.constant(a)))
    sign, det = (t.numpy() for t in f(a))
    np.testing.assert_array_equal(sign, [0.0, -1.0])
    np.testing.assert_allclose(det, [0.0, -6.0])


def step(a, s, tall):
    """A loss of every op (sign-invariant where signs are LAPACK's convention) and its
    gradients."""
    with sf.GradientTape() as tape:
        tape.watch([a, s, tall])
        sym = (s + sf.linalg.matrix_transpose(s)) * 0.5
        w, v = sf.linalg.eigh(sym)
        q, r = sf.linalg.qr(tall)
        sv, u, vv = sf.linalg.svd(tall)
        low = sf.linalg.cholesky(sym)
        loss = (sf.reduce_sum(sf.square(sf.linalg.inv(a)))
                + sf.reduce_sum(sf.linalg.solve(a, tall[..., :3, :]))
                + sf.reduce_sum(sf.linalg.triangular_solve(a, tall[..., :3, :], lower=False))
                + sf.reduce_sum(sf.linalg.slogdet(a)[1]) + sf.reduce_sum(low * low)
                + sf.reduce_sum(w * w) + sf.reduce_sum(sf.abs(v[..., 0]))
                + sf.reduce_sum(q * q * 0.5) + sf.reduce_sum(r * r) + sf.reduce_sum(sv)
                + sf.reduce_sum(sf.abs(u)) + sf.reduce_sum(sf.abs(vv)))
    return (loss, *tape.gradient(loss, [a, s, tall]))


def test_gradients_of_a_staged_step_are_one_program_and_match_the_eager_tape(no_fallback):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 3)) + 3.0 * np.eye(3)
    s = spd((2, 3, 3), np.float64, 6) + np.diag([0.0, 1.0, 2.0])  # distinct eigenvalues
    tall = rng.standard_normal((2, 5, 2))
    staged = sf.function(step)
    one_program(staged.get_concrete_function(*map(sf.constant, (a, s, tall))))
    eager = [t.numpy() for t in step(*map(sf.constant, (a, s, tall)))]
    got = [t.numpy() for t in staged(a, s, tall)]
    for g, e in zip(got, eager, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10)


def test_the_lowered_ops_are_shape_generic_lapack_calls():
    """The rule compiles every dim unknown (one function per params and dtype), and calls
    the double routine for float32 too, as NumPy does."""
    module = parse_module("""
    func.func @f(%a: tensor<3x3xf32>) -> (tensor<3xf32>, tensor<3x3xf32>) {
      %w, %v = sf.eigh %a : (tensor<3x3xf32>) -> (tensor<3xf32>, tensor<3x3xf32>)
      func.return %w, %v : tensor<3xf32>, tensor<3x3xf32>
    }
    """)
    op = next(iter(module.ops.first.body.block.ops))
    spec = op_spec(op)
    assert all(None in ty.shape for ty in spec.inputs + spec.outputs)
    assert isinstance(rule_for(spec), linalg.Eigh)
    assert "scipy_dsyevd_64_" in compiled(spec).llvm_ir
