"""Eager reductions against NumPy: reduce_sum/mean/max/min/prod/logsumexp, argmax/argmin.

`axis` is None, an int or a tuple (negative axes too), `keepdims` both ways; the result keeps
the operand's dtype (an int32 sum stays int32) and arg-reductions give int64.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from strategies import ALL, FLOATS, INTS, NUMERIC, arrays, assert_matches, axes, shapes

import stageflow as sf


def _reduced_count(shape, axis) -> int:
    if axis is None:
        return int(np.prod(shape))
    listed = axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([shape[a] for a in listed]))


def _reference_logsumexp(x, axis, keepdims):
    """log(sum(exp(x))) in float64, shifted by the finite maximum, like scipy's logsumexp."""
    wide = x.astype(np.float64)
    shift = np.max(wide, axis=axis, keepdims=True) if wide.size else np.zeros((1,) * x.ndim)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(wide - shift), axis=axis, keepdims=True)) + shift
    if not keepdims:
        out = np.squeeze(out, axis=tuple(range(x.ndim)) if axis is None else axis)
    return out.astype(x.dtype)


@st.composite
def reduction_case(draw, dtypes, lo=-10, hi=10, nonempty=False):
    dtype = draw(st.sampled_from(dtypes))
    x = draw(arrays(dtype, shapes(), lo=lo, hi=hi))
    axis = draw(axes(x.ndim))
    if nonempty:
        assume(_reduced_count(x.shape, axis) > 0)
    return x, axis, draw(st.booleans())


@given(case=reduction_case(NUMERIC))
def test_reduce_sum_matches_numpy_and_keeps_dtype(case):
    x, axis, keepdims = case
    got = sf.reduce_sum(sf.constant(x), axis=axis, keepdims=keepdims)
    expected = np.sum(x, axis=axis, keepdims=keepdims)
    assert_matches(got, expected, dtype=x.dtype, rtol=1e-5, atol=1e-5)


@given(case=reduction_case(NUMERIC, lo=-2, hi=2))
def test_reduce_prod_matches_numpy_and_keeps_dtype(case):
    x, axis, keepdims = case
    got = sf.reduce_prod(sf.constant(x), axis=axis, keepdims=keepdims)
    expected = np.prod(x, axis=axis, keepdims=keepdims)
    assert_matches(got, expected, dtype=x.dtype, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
@given(data=st.data())
def test_reduce_max_min_match_numpy(name, data):
    x, axis, keepdims = data.draw(reduction_case(ALL))
    fn = getattr(sf, name)
    reference = np.max if name == "reduce_max" else np.min
    if _reduced_count(x.shape, axis) == 0:
        with pytest.raises(ValueError):
            fn(sf.constant(x), axis=axis, keepdims=keepdims)
        return
    got = fn(sf.constant(x), axis=axis, keepdims=keepdims)
    assert_matches(got, reference(x, axis=axis, keepdims=keepdims))


@given(case=reduction_case(FLOATS, nonempty=True))
def test_reduce_mean_of_floats_matches_numpy(case):
    x, axis, keepdims = case
    got = sf.reduce_mean(sf.constant(x), axis=axis, keepdims=keepdims)
    assert_matches(got, np.mean(x, axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-5)


@given(case=reduction_case(INTS, lo=0, hi=100, nonempty=True))
def test_reduce_mean_of_non_negative_ints_truncates(case):
    x, axis, keepdims = case
    got = sf.reduce_mean(sf.constant(x), axis=axis, keepdims=keepdims)
    total = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
    expected = (total // _reduced_count(x.shape, axis)).astype(x.dtype)
    assert_matches(got, expected)


@pytest.mark.parametrize("dtype", [sf.int32, sf.int64])
def test_reduce_mean_of_negative_ints_truncates_toward_zero(dtype):
    got = sf.reduce_mean(sf.constant([[-1, -2], [1, 2]], dtype), axis=1)
    # TensorFlow: tf.reduce_mean([[-1, -2], [1, 2]], axis=1) == [-1, 1] (C integer division).
    assert_matches(got, np.array([-1, 1], dtype))


@given(case=reduction_case(FLOATS, lo=-50, hi=50, nonempty=True))
def test_reduce_logsumexp_matches_reference(case):
    x, axis, keepdims = case
    got = sf.reduce_logsumexp(sf.constant(x), axis=axis, keepdims=keepdims)
    assert_matches(got, _reference_logsumexp(x, axis, keepdims), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [sf.float32, sf.float64])
def test_reduce_logsumexp_is_stable_for_large_values(dtype):
    x = np.array([[1000.0, 1000.0], [-1000.0, -1000.0], [1e4, 0.0]], dtype)
    got = sf.reduce_logsumexp(sf.constant(x), axis=1)
    expected = np.array([1000.0 + np.log(2.0), -1000.0 + np.log(2.0), 1e4], dtype)
    assert np.all(np.isfinite(got.numpy()))
    assert_matches(got, expected, rtol=1e-6)


@pytest.mark.parametrize("dtype", [sf.float32, sf.float64])
def test_reduce_logsumexp_ignores_minus_inf_entries(dtype):
    x = np.array([[0.0, -np.inf, 0.0], [-np.inf, 1.0, -np.inf]], dtype)
    got = sf.reduce_logsumexp(sf.constant(x), axis=-1, keepdims=True)
    assert_matches(got, np.array([[np.log(2.0)], [1.0]], dtype))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [sf.float32, sf.float64])
def test_reduce_logsumexp_of_minus_inf_rows(dtype):
    inf = np.inf
    x = np.array([[-inf, -inf, -inf], [0.0, -inf, 0.0], [inf, 1.0, -inf]], dtype)
    got = sf.reduce_logsumexp(sf.constant(x), axis=-1, keepdims=True)
    expected = np.array([[-inf], [np.log(2.0)], [inf]], dtype)
    assert_matches(got, expected)
    assert_matches(sf.reduce_logsumexp(sf.constant(x[:1])), np.array(-inf, dtype))


def test_reduce_logsumexp_of_empty_axis_is_minus_inf():
    got = sf.reduce_logsumexp(sf.zeros((2, 0)), axis=1)
    assert_matches(got, np.array([-np.inf, -np.inf], np.float32))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(data=st.data())
def test_arg_reductions_match_numpy(name, data):
    dtype = data.draw(st.sampled_from(NUMERIC))
    x = data.draw(arrays(dtype, shapes(min_dims=1), lo=-3, hi=3))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    fn = getattr(sf, name)
    if x.shape[axis] == 0:
        with pytest.raises(ValueError):
            fn(sf.constant(x), axis=axis)
        return
    got = fn(sf.constant(x), axis=axis)
    assert_matches(got, getattr(np, name)(x, axis=axis), dtype=np.int64)


def test_argmax_defaults_to_axis_0_and_takes_the_first_tie():
    x = sf.constant([[1, 5, 5], [7, 2, 7]])
    assert_matches(sf.argmax(x), np.array([1, 0, 1], np.int64))
    assert_matches(sf.argmin(x), np.array([0, 1, 0], np.int64))
    assert_matches(sf.argmax(x, axis=1), np.array([1, 0], np.int64))
    assert_matches(sf.argmin(x, axis=-1), np.array([0, 1], np.int64))
    assert sf.argmax(sf.constant([3.0, 9.0, 1.0])).dtype == sf.int64


def test_reductions_keep_integer_dtypes():
    for dtype in (sf.int32, sf.int64):
        x = sf.constant([[1, 2], [3, 4]], dtype)
        for fn in (sf.reduce_sum, sf.reduce_prod, sf.reduce_max, sf.reduce_min, sf.reduce_mean):
            assert fn(x).dtype == dtype
            assert fn(x, axis=0).dtype == dtype
    assert_matches(sf.reduce_sum(sf.constant([1, 2, 3])), np.array(6, np.int32))
    assert_matches(sf.reduce_mean(sf.constant([1, 2])), np.array(1, np.int32))


def test_axis_forms():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = sf.constant(x)
    assert_matches(sf.reduce_sum(t), np.sum(x))
    assert_matches(sf.reduce_sum(t, axis=1), np.sum(x, axis=1))
    assert_matches(sf.reduce_sum(t, axis=-1), np.sum(x, axis=-1))
    assert_matches(sf.reduce_sum(t, axis=(0, 2)), np.sum(x, axis=(0, 2)))
    assert_matches(sf.reduce_sum(t, axis=(-1, 0)), np.sum(x, axis=(0, 2)))
    assert_matches(sf.reduce_sum(t, axis=[0, 1]), np.sum(x, axis=(0, 1)))
    assert_matches(sf.reduce_sum(t, axis=(), keepdims=True), x)
    assert_matches(sf.reduce_max(t, axis=(0, 1), keepdims=True), np.max(x, (0, 1), keepdims=True))
    assert_matches(sf.reduce_mean(t, axis=None, keepdims=True), np.mean(x, keepdims=True))


@pytest.mark.parametrize(
    "fn", [sf.reduce_sum, sf.reduce_mean, sf.reduce_max, sf.reduce_min, sf.reduce_prod,
           sf.reduce_logsumexp]
)
def test_bad_axes_raise_value_error_naming_the_op(fn):
    t = sf.zeros((2, 3))
    with pytest.raises(ValueError) as info:
        fn(t, axis=2)
    assert fn.__name__ in str(info.value)
    with pytest.raises(ValueError):
        fn(t, axis=-3)
    with pytest.raises(ValueError):
        fn(t, axis=(0, 0))
    with pytest.raises(ValueError):
        fn(t, axis=(1, -1))


def test_arg_reduction_errors():
    with pytest.raises(ValueError):
        sf.argmax(sf.zeros((2, 3)), axis=2)
    with pytest.raises(ValueError):
        sf.argmin(sf.constant(1.0))
    with pytest.raises(ValueError):
        sf.argmax(sf.zeros((0, 3)), axis=0)


def test_reductions_of_scalars_and_empty_tensors():
    assert_matches(sf.reduce_sum(sf.constant(3.5)), np.array(3.5, np.float32))
    assert_matches(sf.reduce_prod(sf.constant(3)), np.array(3, np.int32))
    assert_matches(sf.reduce_max(sf.constant(-2.0)), np.array(-2.0, np.float32))
    assert_matches(sf.reduce_sum(sf.zeros((0, 3))), np.array(0.0, np.float32))
    assert_matches(sf.reduce_sum(sf.zeros((0, 3)), axis=0), np.zeros(3, np.float32))
    assert_matches(sf.reduce_prod(sf.zeros((2, 0)), axis=1), np.ones(2, np.float32))
    assert_matches(sf.reduce_max(sf.zeros((2, 0)), axis=0), np.zeros(0, np.float32))
    with pytest.raises(ValueError):
        sf.reduce_max(sf.zeros((2, 0)), axis=1)
    with pytest.raises(ValueError):
        sf.reduce_min(sf.zeros((0,)))


def test_reductions_of_bool_tensors():
    b = sf.constant([[True, False], [False, False]])
    assert_matches(sf.reduce_max(b, axis=1), np.array([True, False]))
    assert_matches(sf.reduce_min(b), np.array(False))
    with pytest.raises(TypeError):
        sf.reduce_sum(b)
    with pytest.raises(TypeError):
        sf.argmax(b)


def test_reductions_accept_python_data():
    assert_matches(sf.reduce_sum([[1.0, 2.0], [3.0, 4.0]], axis=0),
                   np.array([4.0, 6.0], np.float32))
    assert_matches(sf.reduce_max([3, 9, 2]), np.array(9, np.int32))
    assert_matches(sf.argmax([3, 9, 2]), np.array(1, np.int64))


@pytest.mark.parametrize("dtype", [sf.float16, sf.bfloat16])
def test_reductions_keep_half_precision_dtypes(dtype):
    x = sf.constant([[0.5, 1.0, 2.0], [4.0, -1.0, 0.25]], dtype)
    expected = {
        sf.reduce_sum: [3.5, 3.25], sf.reduce_mean: [3.5 / 3, 3.25 / 3],
        sf.reduce_max: [2.0, 4.0], sf.reduce_min: [0.5, -1.0], sf.reduce_prod: [1.0, -1.0],
        sf.reduce_logsumexp: np.log(np.exp([[0.5, 1.0, 2.0], [4.0, -1.0, 0.25]]).sum(1)),
    }
    for fn, values in expected.items():
        got = fn(x, axis=1)
        assert got.dtype == dtype and got.shape == (2,), fn.__name__
        np.testing.assert_allclose(got.numpy().astype(np.float64), values, rtol=1e-2)
    assert sf.argmax(x, axis=1).dtype == sf.int64


@pytest.mark.parametrize("n", [300, 1000])
def test_bfloat16_sums_accumulate_accurately(n):
    ones = sf.ones((n,), sf.bfloat16)
    expected = float(np.asarray(n, sf.bfloat16))
    assert float(sf.reduce_sum(ones)) == expected
    assert float(sf.reduce_mean(ones)) == 1.0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("keepdims", [True, False])
def test_reduce_logsumexp_over_an_unknown_dim_that_is_empty_is_minus_inf_staged(jit, keepdims):
    """Eager knows the axis is empty and fills -inf; staged over an unknown dim, the same
    function meets the empty axis only at run time (where a max over it would raise)."""
    inf = np.inf
    signature = [sf.TensorSpec([None, None], sf.float32)]
    staged = sf.function(lambda x: sf.reduce_logsumexp(x, axis=1, keepdims=keepdims), jit=jit,
                         input_signature=signature)
    for x in (np.zeros((3, 0), np.float32), np.array([[-inf, 0.0], [1.0, inf]], np.float32),
              np.full((2, 3), -inf, np.float32)):
        want = sf.reduce_logsumexp(x, axis=1, keepdims=keepdims).numpy()
        np.testing.assert_array_equal(staged(x).numpy(), want)


@pytest.mark.parametrize("output_type", [sf.int32, sf.int64, sf.int16, sf.uint16])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions_give_the_output_type_asked_for(op, output_type):
    """TensorFlow's `output_type`: an int32 argmax compares with int32 labels."""
    x = np.array([[1.0, 9.0, 3.0], [7.0, 2.0, 7.0]], np.float32)
    got = getattr(sf, op)(x, axis=1, output_type=output_type)
    assert got.dtype == output_type
    np.testing.assert_array_equal(got.numpy(), getattr(np, op)(x, axis=1))
    staged = sf.function(lambda v: getattr(sf, op)(v, 1, output_type=output_type))
    np.testing.assert_array_equal(staged(x).numpy(), got.numpy())
    labels = sf.constant(np.array([1, 0], np.int32))
    if output_type == sf.int32:
        assert sf.equal(sf.argmax(x, 1, output_type=sf.int32), labels).numpy().all()
    with pytest.raises(TypeError, match=f"{op}: output_type must be one of int64, int32"):
        getattr(sf, op)(x, output_type=sf.float32)
