"""The narrow dtypes (ml_dtypes' float8 and float4 formats, int4, uint4, int2, uint2): storage
types that are made, moved, compared and cast, eagerly, interpreted and compiled alike, and
refused with a way out by the ops that compute."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.core import dtypes

MODES = ["eager", "interpreted", "compiled"]
NARROW_FLOATS = [pytest.param(d, id=d.name) for d in dtypes.NARROW_FLOATING]


def run(mode: str, fn, *args):
    if mode == "eager":
        return fn(*args)
    return sf.function(fn, jit=mode == "compiled")(*args)


def same_bytes(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def every_code(dtype: np.dtype) -> np.ndarray:
    return np.arange(1 << ml_dtypes.finfo(dtype).bits, dtype=np.uint8).view(dtype)


@pytest.mark.parametrize("dtype", NARROW_FLOATS)
def test_a_compiled_cast_encodes_every_kind_of_float32_as_ml_dtypes_does(dtype):
    """Random bit patterns (NaN payloads of both signs, subnormals, overflow) and every
    midpoint between two neighbouring values, where rounding to even decides."""
    rng = np.random.default_rng(7)
    values = every_code(dtype).astype(np.float32)
    finite = np.unique(values[np.isfinite(values)])
    midpoints = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    near = np.concatenate([midpoints, np.nextafter(midpoints, np.inf),
                           np.nextafter(midpoints, -np.inf)]).astype(np.float32)
    bits = rng.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    special = np.float32([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38])
    x = np.concatenate([bits.view(np.float32), near, -near, special])
    with np.errstate(invalid="ignore", over="ignore"):
        want = x.astype(dtype)
    same_bytes(run("compiled", lambda v: sf.cast(v, dtype), x), want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", NARROW_FLOATS)
def test_every_value_decodes_exactly(mode, dtype):
    codes = every_code(dtype)
    for wide in (sf.float16, sf.float32, sf.float64):
        got = np.asarray(run(mode, lambda v, w=wide: sf.cast(v, w), codes))
        with np.errstate(over="ignore"):  # e8m0 to float16: infinities, as NumPy gives
            want = codes.astype(np.float32).astype(wide)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [pytest.param(d, id=d.name) for d in dtypes.NARROW_INTEGER])
def test_narrow_integers_cast_as_ml_dtypes_does(mode, dtype):
    """Integers keep their low bits; a float's truncation that does not fit gives 0, NaN
    and infinities too (ml_dtypes' rule from its 0.7, which the project requires)."""
    x = np.array([-9, -8, -3, -1, 0, 1, 3, 7, 8, 9, 300, -300], np.int32)
    f = np.array([2.5, -2.5, 7.9, -8.9, 15.5, np.nan, 1e10], np.float32)
    info = ml_dtypes.iinfo(dtype)
    every = np.arange(int(info.min), int(info.max) + 1).astype(dtype)

    def program(i, v, n):
        return sf.cast(i, dtype), sf.cast(v, dtype), sf.cast(n, sf.int64), sf.cast(n, sf.float32)

    got = run(mode, program, x, f, every)
    with np.errstate(invalid="ignore"):
        want = (x.astype(dtype), f.astype(dtype), every.astype(np.int64),
                every.astype(np.float32))
    for g, w in zip(got, want, strict=True):
        same_bytes(g, w)
    if dtype == dtypes.int4:
        assert got[1].astype(np.int8).tolist() == [2, -2, 7, -8, 0, 0, 0]


@pytest.mark.parametrize("mode", MODES)
def test_casts_between_narrow_dtypes_go_through_float32(mode):
    x = every_code(dtypes.float8_e5m2)
    targets = (sf.float8_e4m3fn, sf.float4_e2m1fn, sf.float8_e8m0fnu, sf.int4, sf.uint2)

    def program(v):
        return tuple(sf.cast(v, t) for t in targets)

    got = run(mode, program, x)
    with np.errstate(invalid="ignore", over="ignore"):
        want = [x.astype(np.float32).astype(t) for t in targets]
    for g, w in zip(got, want, strict=True):
        same_bytes(g, w)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=10, deadline=None)
@given(dtype=st.sampled_from(dtypes.NARROW), rows=st.integers(1, 4), cols=st.integers(1, 5),
       seed=st.integers(0, 2**16))
def test_moving_narrow_tensors_keeps_their_bytes(mode, dtype, rows, cols, seed):
    rng = np.random.default_rng(seed)
    if dtype in dtypes.NARROW_INTEGER:
        info = ml_dtypes.iinfo(dtype)
        x = rng.integers(int(info.min), int(info.max) + 1, (rows, cols)).astype(dtype)
    else:
        x = rng.choice(every_code(dtype), (rows, cols))
    index = rng.integers(0, rows, 3).astype(np.int32)

    def program(a, i):
        both = sf.concat([a, sf.reverse(a, [0])], 0)
        return (sf.transpose(both), sf.gather(a, i), a[:, ::-1], sf.reshape(a, (-1,)),
                sf.pad(a, [[1, 0], [0, 2]]), sf.where(sf.equal(a, a), a, sf.reverse(a, [1])))

    got = run(mode, program, x, index)
    both = np.concatenate([x, x[::-1]], 0)
    want = (both.T, x[index], x[:, ::-1], x.reshape(-1), np.pad(x, [[1, 0], [0, 2]]),
            np.where(x.view(np.uint8) == x.view(np.uint8), x, x[:, ::-1]))
    for g, w in zip(got[:5], want[:5], strict=True):
        same_bytes(g, w)
    equal = x.astype(np.float64) == x.astype(np.float64)  # NaN codes are not equal
    same_bytes(got[5], np.where(equal, x, x[:, ::-1]))


@pytest.mark.parametrize("op, call", [
    ("add", lambda x: sf.add(x, x)), ("reduce_sum", sf.reduce_sum),
    ("reduce_max", sf.reduce_max), ("exp", sf.exp),
    ("matmul", lambda x: sf.matmul(sf.reshape(x, (1, 3)), sf.reshape(x, (3, 1)))),
])
def test_ops_that_compute_refuse_them_and_say_to_cast(op, call):
    x = sf.cast(sf.constant([1.0, 2.0, 3.0]), sf.float8_e4m3fn)
    with pytest.raises(TypeError, match=rf"{op}\(float8_e4m3fn.*storage type.*"
                                        r"sf\.cast\(x, sf\.float32\)"):
        call(x)


def test_the_ir_names_them_as_mlir_does():
    f = sf.function(lambda x: sf.cast(sf.cast(x, sf.float8_e4m3fn), sf.int4))
    text = str(f.get_concrete_function(sf.TensorSpec([2], sf.float32)).ir())
    assert "tensor<2xf8E4M3FN>" in text and "tensor<2xi4>" in text
