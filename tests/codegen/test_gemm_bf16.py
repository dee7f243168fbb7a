"""bfloat16 matmuls on the CPU's bfloat16 dot products (`codegen.lowered.gemm_bf16`), or on a
CPU without them on float32 copies (`gemm_widened`): the compiled op against a float64
product of the same bfloat16 operands, through every path of the kernel (A read in place
or packed, B's panels interleaved, transposed by squares or copied element by element,
tiles cut short in rows and columns, odd k, several tasks), in staged functions and
eagerly. Both round float32 sums once, so one tolerance serves; on a CPU with the dot
products the float32 copies are built too, for a platform without them."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered import gemm_bf16
from stageflow.codegen.lowered.compile import OpSpec, compile_ops, module_text, rule_for
from stageflow.codegen.lowered.matmul import Matmul
from stageflow.codegen.targets import platform
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.runtime.eager_kernels import KERNELS

BF16 = np.dtype(ml_dtypes.bfloat16)
_compiled: dict[tuple, object] = {}


@pytest.fixture(scope="module", params=["dot products", "float32 copies"])
def kernel(request) -> platform.Platform:
    """The host's platform, or the host's without AVX-512 BF16 (`gemm_widened`)."""
    host = platform.host()
    if request.param == "dot products":
        if not gemm_bf16.host_available():
            pytest.skip("this CPU has no AVX-512 BF16")
        return host
    features = ",".join(f for f in host.features.split(",") if f != gemm_bf16.FEATURE)
    return dataclasses.replace(host, features=features)


def spec_for(name: str, arrays: list[np.ndarray], unknown: bool, **params) -> OpSpec:
    inputs = tuple(ShapedType(tuple(None if unknown else d for d in a.shape), a.dtype)
                   for a in arrays)
    return OpSpec(name, inputs, (REGISTRY[name].shape_rule(*inputs, **params),), params)


def run(kernel: platform.Platform, name: str, arrays: list[np.ndarray], unknown: bool = True,
        **params) -> np.ndarray:
    spec = spec_for(name, arrays, unknown, **params)
    key = (kernel.features, spec.key)
    if key not in _compiled:
        with platform.building_for(kernel):
            _compiled[key] = compile_ops([spec])[0]
    return _compiled[key](*arrays)


def operands(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(BF16)


def reference(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool,
              alpha: float = 1.0, addend: np.ndarray | None = None) -> np.ndarray:
    """The product in float64 of the bfloat16 operands (exactly what the dot products
    multiply), scaled, plus the addend: what the kernel rounds once to bfloat16."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    product = alpha * np.matmul(np.swapaxes(a64, -1, -2) if transpose_a else a64,
                                np.swapaxes(b64, -1, -2) if transpose_b else b64)
    return product if addend is None else product + addend.astype(np.float64)


def assert_rounded(got: np.ndarray, want: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """`got` is `want` rounded to bfloat16 (half an ulp, 2**-9 relative), give or take the
    float32 sums' rounding, bounded by k * 2**-24 times the terms' magnitudes."""
    assert got.dtype == BF16 and got.shape == want.shape
    depth = a.shape[-1] + b.shape[-1]
    scale = float(np.abs(a.astype(np.float32)).max(initial=0)
                  * np.abs(b.astype(np.float32)).max(initial=0))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2**-8,
                               atol=depth * scale * 2**-22 + 1e-30)


@pytest.mark.parametrize("transposes", [(False, False), (True, False), (False, True),
                                        (True, True)])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (2, 45, 77), (1, 300, 64), (1, 37, 77),
                                     (3, 50, 100), (5, 41, 70), (8, 45, 77), (9, 20, 40),
                                     (12, 32, 2), (13, 33, 5), (11, 31, 1), (25, 130, 64),
                                     (100, 70, 31), (300, 200, 257), (30, 70, 2501),
                                     (4, 1100, 520)])
def test_products_of_every_layout_and_edge(m, n, k, transposes, kernel):
    """Tiles of 12 rows and panels of 32 columns, cut short on both sides; odd k; A read
    in place (row-major) or packed into pairs (transposed); B's panels interleaved
    (row-major) or transposed in registers by squares of 16 pairs by 16 columns
    (transposed); the largest case splits over tasks and groups. A single tile of rows
    reads a row-major B in place, and up to 8 rows take dot products with a transposed B's
    columns, column after column, in a tile of 1, 2, 4 or 8 rows (k in blocks of 32, the
    last one masked; a tile's last row read again past A's). A k of more than `DEPTH`
    pairs runs in chunks, the sums kept in float32 between them. Without the dot products
    (float32 copies), up to 4 rows by a transposed B take float32 dot products instead,
    16 elements of k at a time, then one by one; 4 rows by 1100 columns split over the
    cores."""
    transpose_a, transpose_b = transposes
    a = operands((k, m) if transpose_a else (m, k), 1)
    b = operands((n, k) if transpose_b else (k, n), 2)
    spec = spec_for("matmul", [a, b], True, transpose_a=transpose_a, transpose_b=transpose_b)
    assert isinstance(rule_for(spec), Matmul)
    with platform.building_for(kernel):
        widened = "sf.gemm.bf16.widened" in module_text([spec])
    assert widened != gemm_bf16.available(kernel.features)
    got = run(kernel, "matmul", [a, b], transpose_a=transpose_a, transpose_b=transpose_b)
    assert_rounded(got, reference(a, b, transpose_a, transpose_b), a, b)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), transposes=st.tuples(st.booleans(), st.booleans()),
       unknown=st.booleans(), alpha=st.sampled_from([1.0, -0.5, 3.0]), add=st.booleans())
def test_batched_products_and_the_fused_addend(data, transposes, unknown, alpha, add, kernel):
    m, n = (data.draw(st.integers(1, 40)) for _ in range(2))
    k = data.draw(st.one_of(st.integers(0, 40), st.integers(2 * gemm_bf16.DEPTH - 2,
                                                            2 * gemm_bf16.DEPTH + 40)))
    batch = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    transpose_a, transpose_b = transposes
    a = operands(batch + ((k, m) if transpose_a else (m, k)), 1)
    b = operands((n, k) if transpose_b else (k, n), 2)
    params = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    if add:
        product = batch + (m, n)
        shape = tuple(d if data.draw(st.booleans()) else 1 for d in product)[
            data.draw(st.integers(0, len(product))):]
        addend = operands(shape, 3)
        arrays, want = [a, b, addend], reference(a, b, *transposes, alpha, addend)
        name, params = "matmul_add", {**params, "alpha": alpha}
    else:
        arrays, want, name = [a, b], reference(a, b, *transposes), "matmul"
    assert_rounded(run(kernel, name, arrays, unknown, **params), want, a, b)


def test_nan_and_infinity_reach_their_rows_and_columns(kernel):
    clean_a, clean_b = operands((20, 9), 1), operands((9, 40), 2)
    a, b = clean_a.copy(), clean_b.copy()
    a[3, 4] = np.nan
    b[2, 35] = np.inf
    got = run(kernel, "matmul", [a, b], transpose_a=False, transpose_b=False).astype(np.float64)
    want = reference(a, b, False, False)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert_rounded(got[finite].astype(BF16).reshape(-1, 1), want[finite].reshape(-1, 1),
                   clean_a, clean_b)


def test_a_view_with_rows_apart_is_read_in_place(kernel):
    """A's rows at a stride larger than k (a slice of a wider matrix) are read where they
    lie; B's every other row is no row- or column-major matrix: NumPy's kernel runs."""
    wide, b = operands((40, 50), 1), operands((30, 20), 2)
    a = wide[:, 5:35]
    got = run(kernel, "matmul", [a, b], transpose_a=False, transpose_b=False)
    assert_rounded(got, reference(a, b, False, False), a, b)
    spaced = operands((60, 20), 3)[::2]
    got = run(kernel, "matmul", [a, spaced], transpose_a=False, transpose_b=False)
    np.testing.assert_array_equal(got, REGISTRY["matmul"].kernel(a, spaced, transpose_a=False,
                                                                  transpose_b=False))


def test_no_terms_give_zeros_or_the_addend(kernel):
    a, b, addend = operands((7, 0), 1), operands((0, 5), 2), operands((5,), 3)
    assert not run(kernel, "matmul", [a, b], transpose_a=False, transpose_b=False).astype(
        np.float32).any()
    got = run(kernel, "matmul_add", [a, b, addend], transpose_a=False, transpose_b=False, alpha=2.0)
    np.testing.assert_array_equal(got, np.broadcast_to(addend, (7, 5)))


def test_staged_and_eager_products_agree():
    """Staged, the matmul is the compiled op; eagerly, a bfloat16 matmul large enough runs
    the same compiled op once it is ready: the same numbers, to the bit."""
    a, b = operands((64, 96), 1), operands((96, 48), 2)
    staged = sf.function(lambda x, y: sf.matmul(x, y))(a, b).numpy()
    sf.matmul(a, b)  # the first call starts the eager op's compile
    KERNELS.settle()
    eager = sf.matmul(a, b).numpy()
    np.testing.assert_array_equal(eager, staged)
    assert_rounded(staged, reference(a, b, False, False), a, b)


def test_gradients_of_a_bfloat16_layer_match_finite_differences_of_float32():
    """The matmul's gradients are matmuls with transposed operands (both packing paths);
    in bfloat16 they match the float32 gradients to bfloat16's precision."""
    x, w = operands((33, 70), 1), operands((70, 45), 2)

    def loss(x, w):
        return sf.reduce_sum(sf.cast(sf.matmul(x, w), sf.float32) ** 2)

    def gradients(x, w):
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            value = loss(x, w)
        return tape.gradient(value, [x, w])

    got = sf.function(gradients)(sf.constant(x), sf.constant(w))
    want = gradients(sf.constant(x.astype(np.float32)), sf.constant(w.astype(np.float32)))
    for g, r in zip(got, want, strict=True):
        assert g.dtype == sf.bfloat16
        scale = np.abs(r.numpy()).max()
        np.testing.assert_allclose(g.numpy().astype(np.float32), r.numpy(), rtol=0.03,
                                   atol=0.03 * scale)
