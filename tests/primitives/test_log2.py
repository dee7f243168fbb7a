"""`sf.math.log2`, the worked example of "Adding an elementwise primitive, step by step"
(docs/contributing/layout.md): its values eagerly, staged and interpreted (``jit=False``)
and staged and compiled, each against NumPy's `np.log2`; powers of two (subnormal ones
included), zeros, negative numbers, infinities and NaN exactly as NumPy gives them each way;
and its gradient, ``g / (x ln 2)``, against finite differences each way.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import FLOATS, arrays, assert_matches, numeric_gradient

import stageflow as sf

MODES = ("eager", "interpreted", "compiled")
F64 = np.dtype(np.float64)


def vectors(dtype: np.dtype, lo: float, hi: float):
    return arrays(dtype, st.tuples(st.integers(0, 40)), lo=lo, hi=hi)


@functools.cache
def staged(fn, dtype: np.dtype, mode: str):
    """`fn` eagerly, or staged over 1-D tensors of `dtype` of any length (one trace and,
    compiled, one program for every call)."""
    if mode == "eager":
        return fn
    return sf.function(fn, input_signature=[sf.TensorSpec([None], dtype)],
                       jit=mode == "compiled")


def log2_gradient(x: sf.Tensor) -> sf.Tensor:
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(sf.math.log2(x))
    return tape.gradient(y, x)


@pytest.mark.parametrize("mode", MODES)
@given(data=st.data())
def test_log2_matches_numpy(mode: str, data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from(FLOATS))
    x = data.draw(vectors(dtype, 1e-3, 1e3))
    assert_matches(staged(sf.math.log2, dtype, mode)(sf.constant(x)), np.log2(x))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", MODES)
def test_log2_of_powers_of_two_and_special_values_is_numpys(mode: str, dtype: np.dtype) -> None:
    info = np.finfo(dtype)
    exponents = np.arange(info.minexp - info.nmant, info.maxexp)  # smallest subnormal up
    powers = np.ldexp(np.ones(len(exponents), dtype), exponents)
    special = np.array([0.0, -0.0, -1.0, -info.tiny, np.inf, -np.inf, np.nan], dtype)
    x = np.concatenate([powers, special])
    with np.errstate(divide="ignore", invalid="ignore"):
        got = staged(sf.math.log2, dtype, mode)(sf.constant(x)).numpy()
        want = np.log2(x)
    np.testing.assert_array_equal(got[:len(powers)], exponents.astype(dtype))
    np.testing.assert_array_equal(got, want)


def test_compiled_log2_runs_as_one_program() -> None:
    function = staged(sf.math.log2, FLOATS[0], "compiled")
    function(sf.constant(np.ones(8, FLOATS[0])))
    concrete = function.get_concrete_function()
    assert concrete.stats()["steps_reasons"] == {}
    assert concrete.program.program is not None


@pytest.mark.parametrize("mode", MODES)
@given(x=vectors(F64, 0.1, 100.0))
def test_log2_gradient_matches_finite_differences(mode: str, x: np.ndarray) -> None:
    got = staged(log2_gradient, F64, mode)(sf.constant(x))
    expected = numeric_gradient(lambda v: np.sum(np.log2(v)), x)
    # a central difference of a sum of up to 40 terms (near 270) carries a few 1e-6 of
    # relative round-off where the derivative is small (x near 100)
    assert_matches(got, expected, rtol=1e-5, atol=1e-8)
