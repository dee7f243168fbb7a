"""`sf.dtypes` (TensorFlow's ``tf.dtypes``), `sf.as_dtype` and `saturate_cast`, against
TensorFlow's documented behaviour: clamp to the target dtype's range, then cast; eager and
staged give the same numbers, and the gradient flows where the value was not clamped."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]


def staged(mode: str, fn):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled")


def test_the_namespace_holds_the_dtypes_and_tensorflows_aliases():
    assert sf.dtypes.float32 is sf.float32 and sf.dtypes.int64 is sf.int64
    assert sf.dtypes.double == np.float64 and sf.double == np.float64
    assert sf.dtypes.half == np.float16 and sf.half == np.float16
    assert sf.dtypes.bool == np.bool_ and sf.dtypes.bfloat16 == ml_dtypes.bfloat16
    assert isinstance(sf.float32, sf.dtypes.DType)
    assert sf.dtypes.cast is sf.cast and sf.dtypes.complex is sf.complex
    assert sf.dtypes.as_dtype is sf.as_dtype and sf.dtypes.saturate_cast is sf.saturate_cast


@pytest.mark.parametrize(("given", "expected"), [
    ("float32", np.float32), (np.int64, np.int64), (sf.bfloat16, ml_dtypes.bfloat16),
    ("f16", np.float16), (np.dtype("uint8"), np.uint8), (bool, np.bool_)])
def test_as_dtype(given, expected):
    dtype = sf.as_dtype(given)
    assert dtype == np.dtype(expected)
    assert sf.constant([1], dtype).dtype == dtype


@pytest.mark.parametrize("given", ["float128", "complex256", "not_a_dtype"])
def test_as_dtype_refuses_what_is_not_a_dtype(given):
    with pytest.raises(TypeError):
        sf.as_dtype(given)


@pytest.mark.parametrize("given", ["string", object])
def test_as_dtype_of_strings_is_the_host_only_string_dtype(given):
    assert sf.as_dtype(given) == sf.string == sf.dtypes.string


def _reference(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """TensorFlow's rule, written with exact (Python) arithmetic: clamp, then cast."""
    info = np.iinfo(dtype) if dtype.kind in "iu" else ml_dtypes.finfo(dtype)
    out = [min(max(float(v), float(info.min)), float(info.max)) for v in values]
    return np.array([int(v) if dtype.kind in "iu" else v for v in out]).astype(dtype)


CASES = [
    (np.array([-300.5, -1.0, 0.9, 254.9, 255.5, 1e30], np.float32), np.uint8),
    (np.array([-1e10, -2.5, 2.5, 1e10], np.float64), np.int32),
    (np.array([-70000, -5, 32767, 32768, 70000], np.int32), np.int16),
    (np.array([-1, 0, 2**40], np.int64), np.uint32),
    (np.array([-1e6, 1.5, 65504.0, 1e6], np.float32), np.float16),
    (np.array([-1e300, 1.0, 1e300], np.float64), np.float32),
    (np.array([0, 200, 255], np.uint8), np.int8),
    (np.array([-5, 7], np.int8), np.float32),  # no clamp: every int8 is a float32
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("values", "dtype"), CASES, ids=[f"{v.dtype}-{np.dtype(d)}"
                                                         for v, d in CASES])
def test_saturate_cast_clamps_then_casts(mode, values, dtype):
    result = staged(mode, lambda x: sf.saturate_cast(x, dtype))(sf.constant(values))
    assert result.dtype == dtype
    np.testing.assert_array_equal(result.numpy(), _reference(values, np.dtype(dtype)))


@pytest.mark.parametrize("mode", MODES)
def test_floats_to_int32_stay_in_range(mode):
    # int32's greatest value is not a float32: the clamp uses the greatest float32 below it,
    # so a huge float never casts to int32's least value as a plain cast would.
    x = sf.constant([3e9, np.inf, -3e9, -np.inf], sf.float32)
    out = staged(mode, lambda v: sf.saturate_cast(v, sf.int32))(x).numpy()
    assert out.tolist() == [2147483520, 2147483520, -2147483648, -2147483648]


def test_complex_to_real_keeps_the_real_part_clamped():
    x = sf.constant([300.0 + 4.0j, -2.0 - 1.0j, 7.5 + 0.0j], sf.complex64)
    np.testing.assert_array_equal(sf.saturate_cast(x, sf.uint8).numpy(), [255, 0, 7])
    assert sf.saturate_cast(x, sf.complex128).dtype == sf.complex128


def test_gradient_flows_where_not_clamped():
    x = sf.constant([-2.0, 0.5, 3.0])
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.saturate_cast(x * 1e5, sf.float16)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0.0, 1e5, 0.0])
