"""The compiled matmul on every layout of its operands: where our own gemm serves
(`own_blas`), A transposed is read in place and B transposed packed from where it lies; the BLAS
reads both as they are; either way the product is NumPy's, at sizes on both sides of a
tile's edge. Constant weights read transposed are stored transposed once (`prepack`); a
batch of small products splits its batch indices over the cores."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered.compile import CompiledOp, OpSpec, compile_ops
from stageflow.core.primitive import REGISTRY, ShapedType

_compiled: dict[tuple, CompiledOp] = {}


def compiled(dtype: np.dtype, transpose_a: bool, transpose_b: bool) -> CompiledOp:
    """The matmul compiled alone with every dim unknown."""
    params = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    inputs = (ShapedType((None, None), dtype),) * 2
    spec = OpSpec("matmul", inputs, (REGISTRY["matmul"].shape_rule(*inputs, **params),),
                  params)
    if spec.key not in _compiled:
        _compiled[spec.key] = compile_ops([spec])[0]
    return _compiled[spec.key]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("transpose_a", "transpose_b"),
                         [(False, False), (False, True), (True, False), (True, True)])
@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 70),
       seed=st.integers(0, 2**16))
def test_every_layout_gives_numpys_product(dtype, transpose_a, transpose_b, m, n, k, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if transpose_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(dtype)
    out = np.full((m, n), np.nan, dtype)
    assert compiled(np.dtype(dtype), transpose_a, transpose_b).call([a, b], [out]) == 0
    want = (a.T if transpose_a else a).astype(np.float64) @ (b.T if transpose_b else b)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, want, rtol=tolerance, atol=tolerance * np.sqrt(k))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [8, 16, 19])
def test_every_count_of_rows_left_by_the_one_vector_tiles(dtype, n):
    """Columns one vector wide (whole, or masked past n) run in tiles of twice a tile's
    rows; the rows left over run in tiles of 8, 4, 2 and 1 as their count's bits say: every
    count from 1 to 23 gives NumPy's product."""
    rng = np.random.default_rng(n)
    for m in range(1, 24):
        a = rng.standard_normal((m, 40)).astype(dtype)
        b = rng.standard_normal((40, n)).astype(dtype)
        out = np.full((m, n), np.nan, dtype)
        assert compiled(np.dtype(dtype), False, False).call([a, b], [out]) == 0
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 3, 4, 8])
@pytest.mark.parametrize(("k", "n"), [(1, 1), (15, 50), (16, 7), (17, 300), (100, 2000)])
def test_few_rows_by_a_transposed_b_read_it_in_place(dtype, m, k, n):
    """At most `own_blas.DOT_ROWS` rows by B transposed (a decoder's logits against its
    embedding): dot products of A's rows with B's stored rows, the last vector of each
    masked, the columns split over the cores; NumPy's product."""
    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype)
    out = np.full((m, n), np.nan, dtype)
    assert compiled(np.dtype(dtype), False, True).call([a, b], [out]) == 0
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.T, rtol=tolerance,
                               atol=tolerance * np.sqrt(k))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize(("m", "k", "n"), [(9, 1, 1), (9, 15, 16), (16, 16, 33), (40, 17, 47),
                                           (23, 255, 7), (12, 257, 70), (30, 300, 64)])
def test_a_transposed_b_is_packed_by_squares_transposed_in_registers(dtype, transpose_a, m,
                                                                      k, n):
    """More rows than dot products serve by B transposed: our own gemm copies B's panels
    from its stored rows a square of a vector's lanes at a time, cut short past n and past
    each chunk of k (`conv.gemm.square_function`); B's rows here lie wider apart than k, a
    slice of a wider matrix. NumPy's product, at edges of squares, panels and chunks."""
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((k, m) if transpose_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k + 5)).astype(dtype)[:, :k]
    out = np.full((m, n), np.nan, dtype)
    assert compiled(np.dtype(dtype), transpose_a, True).call([a, b], [out]) == 0
    want = (a.T if transpose_a else a).astype(np.float64) @ b.T
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, want, rtol=tolerance, atol=tolerance * np.sqrt(k))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("transpose_a", "transpose_b"), [(True, False), (True, True)])
def test_a_transposed_read_in_place_splits_over_the_cores(dtype, transpose_a, transpose_b):
    """A product large enough to split its rows over the cores, A read transposed where it
    lies (our own gemm) or by the BLAS: NumPy's product, every task's rows in place."""
    rng = np.random.default_rng(1)
    m, n, k = 301, 133, 290
    a = rng.standard_normal((k, m)).astype(dtype)
    b = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(dtype)
    out = np.full((m, n), np.nan, dtype)
    assert compiled(np.dtype(dtype), transpose_a, transpose_b).call([a, b], [out]) == 0
    want = a.T.astype(np.float64) @ (b.T if transpose_b else b)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, want, rtol=tolerance, atol=tolerance * np.sqrt(k))


@pytest.mark.parametrize("bias", [False, True])
def test_constant_weights_read_transposed_give_the_same_numbers(bias):
    """A few rows by constant weights read transposed (a classifier's ``Gemm(transB=1)``),
    staged: the transposed copy the pass stores gives what the weights as given give (to
    rounding: the bias may be added in another order)."""
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((40, 75)).astype(np.float32)
    shift = rng.standard_normal(40).astype(np.float32)
    x = rng.standard_normal((8, 75)).astype(np.float32)

    def product(x, w):
        y = sf.matmul(x, w, transpose_b=True)
        return y + shift if bias else y

    constant = sf.function(lambda x: product(x, sf.constant(weights)))
    given_weights = sf.function(product)
    optimized = constant.get_concrete_function(x).ir(stage="optimized")
    assert "transpose_b = true" not in optimized
    np.testing.assert_allclose(constant(x).numpy(), given_weights(x, weights).numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("a_batch", "b_batch"), [((7,), (7,)), ((3, 5), (1, 5)), ((1,), (9,))])
@pytest.mark.parametrize(("transpose_a", "transpose_b"), [(False, False), (True, True)])
def test_a_batch_of_small_products_split_over_the_cores_is_numpys(a_batch, b_batch,
                                                                   transpose_a, transpose_b):
    """Batches of gemms too small to split themselves (an attention's heads) run as tasks
    of batch indices, the batch dims broadcast as NumPy's; every product lands in its
    place."""
    rng = np.random.default_rng(5)
    m, k, n = 37, 45, 29
    a = rng.standard_normal((*a_batch, *((k, m) if transpose_a else (m, k)))).astype(np.float32)
    b = rng.standard_normal((*b_batch, *((n, k) if transpose_b else (k, n)))).astype(np.float32)
    got = sf.function(lambda a, b: sf.matmul(a, b, transpose_a=transpose_a,
                                             transpose_b=transpose_b) * 2.0)(a, b).numpy()
    want = 2.0 * np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a,
                           np.swapaxes(b, -1, -2) if transpose_b else b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
