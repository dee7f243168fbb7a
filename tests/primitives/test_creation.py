"""Eager creation ops against NumPy: zeros, ones, fill, zeros_like, ones_like, eye, diag,
range and linspace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import ALL, FLOATS, NUMERIC, arrays, assert_matches, shapes

import stageflow as sf


@given(shape=shapes(), dtype=st.sampled_from(ALL))
def test_zeros_and_ones(shape, dtype):
    assert_matches(sf.zeros(shape, dtype), np.zeros(shape, dtype))
    assert_matches(sf.ones(shape, dtype), np.ones(shape, dtype))
    assert_matches(sf.zeros(list(shape), dtype=dtype), np.zeros(shape, dtype))


def test_zeros_and_ones_defaults():
    assert_matches(sf.zeros((2, 3)), np.zeros((2, 3), np.float32))
    assert_matches(sf.ones(3), np.ones(3, np.float32))
    assert_matches(sf.zeros(()), np.zeros((), np.float32))
    assert_matches(sf.ones([0, 2], sf.int64), np.ones((0, 2), np.int64))
    assert_matches(sf.zeros((2,), "float64"), np.zeros(2, np.float64))
    assert sf.zeros((1,), sf.bfloat16).dtype == sf.bfloat16


@given(shape=shapes(), data=st.data())
def test_fill(shape, data):
    dtype = np.dtype(data.draw(st.sampled_from(NUMERIC)))
    value = data.draw(arrays(dtype, ())).item()
    assert_matches(sf.fill(shape, value, dtype), np.full(shape, value, dtype))


def test_fill_default_dtypes():
    assert_matches(sf.fill((2, 2), 2.5), np.full((2, 2), 2.5, np.float32))
    assert_matches(sf.fill([3], 7), np.full(3, 7, np.int32))
    assert_matches(sf.fill((2,), True), np.full(2, True))
    assert_matches(sf.fill((2,), sf.constant(1.5, sf.float64)), np.full(2, 1.5))


@given(data=st.data())
def test_zeros_like_and_ones_like(data):
    x = data.draw(arrays(data.draw(st.sampled_from(ALL))))
    t = sf.constant(x)
    assert_matches(sf.zeros_like(t), np.zeros_like(x))
    assert_matches(sf.ones_like(t), np.ones_like(x))
    assert_matches(sf.zeros_like(x), np.zeros_like(x))
    assert_matches(sf.ones_like(t, dtype=sf.float64), np.ones(x.shape, np.float64))


@given(rows=st.integers(0, 5), columns=st.none() | st.integers(0, 5),
       batch=shapes(max_dims=2, max_side=3), dtype=st.sampled_from(ALL))
def test_eye_matches_numpy(rows, columns, batch, dtype):
    expected = np.broadcast_to(np.eye(rows, columns, dtype=dtype),
                               batch + (rows, rows if columns is None else columns))
    assert_matches(sf.eye(rows, columns, batch, dtype), expected)
    assert_matches(sf.eye(rows, num_columns=columns, batch_shape=list(batch), dtype=dtype),
                   expected)


def test_eye_defaults():
    assert_matches(sf.eye(3), np.eye(3, dtype=np.float32))
    assert_matches(sf.eye(2, 3), np.eye(2, 3, dtype=np.float32))
    assert_matches(sf.eye(2, batch_shape=[4]), np.broadcast_to(np.eye(2, dtype=np.float32),
                                                               (4, 2, 2)))


@given(data=st.data())
def test_diag_of_a_vector(data):
    v = data.draw(arrays(data.draw(st.sampled_from(ALL)), shapes(min_dims=1, max_dims=1)))
    assert_matches(sf.diag(sf.constant(v)), np.diag(v))


@given(data=st.data())
def test_diag_of_a_matrix(data):
    m = data.draw(arrays(data.draw(st.sampled_from(ALL)), shapes(min_dims=2, max_dims=2)))
    assert_matches(sf.diag(sf.constant(m)), np.diag(m))


def test_diag_examples_and_errors():
    assert_matches(sf.diag([1, 2]), np.array([[1, 0], [0, 2]], np.int32))
    assert_matches(sf.diag([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), np.array([1.0, 5.0], np.float32))
    with pytest.raises(ValueError):
        sf.diag(sf.constant(1.0))
    with pytest.raises(ValueError):
        sf.diag(sf.zeros((2, 2, 2)))


@pytest.mark.parametrize(
    ("args", "dtype"),
    [
        ((5,), np.int32),
        ((0,), np.int32),
        ((-3,), np.int32),
        ((2, 7), np.int32),
        ((1, 10, 3), np.int32),
        ((10, 1, -3), np.int32),
        ((5, 0, -1), np.int32),
        ((5, 1), np.int32),
        ((1, 5, -1), np.int32),
        ((0.0, 1.0, 0.25), np.float32),
        ((0, 1.0, 0.3), np.float32),
        ((2.5,), np.float32),
        ((1.0, -1.0, -0.5), np.float32),
        ((3, 1, -0.5), np.float32),
        ((0.0, 1.0, -0.5), np.float32),
    ],
)
def test_range_matches_numpy_arange(args, dtype):
    expected = np.arange(*args).astype(dtype)
    assert_matches(sf.range(*args), expected, atol=1e-6, rtol=1e-6)


@given(start=st.integers(-20, 20), limit=st.integers(-20, 20),
       delta=st.integers(-5, 5).filter(bool))
def test_range_of_ints(start, limit, delta):
    assert_matches(sf.range(start, limit, delta), np.arange(start, limit, delta, dtype=np.int32))


@given(start=st.integers(-20, 20), limit=st.integers(-20, 20),
       delta=st.sampled_from([0.5, 0.25, -0.5, 2.0, -1.5]))
def test_range_of_floats(start, limit, delta):
    start, limit = float(start), float(limit)
    assert_matches(sf.range(start, limit, delta),
                   np.arange(start, limit, delta).astype(np.float32))


def test_range_keywords_dtype_and_errors():
    assert_matches(sf.range(0, 4, dtype=sf.float64), np.arange(4, dtype=np.float64))
    assert_matches(sf.range(0, 4, dtype=sf.int64), np.arange(4, dtype=np.int64))
    assert_matches(sf.range(start=1, limit=4, delta=2), np.array([1, 3], np.int32))
    with pytest.raises(ValueError):
        sf.range(0, 4, 0)


@given(start=st.floats(-10, 10), stop=st.floats(-10, 10), num=st.integers(1, 20),
       dtype=st.sampled_from(FLOATS))
def test_linspace_matches_numpy(start, stop, num, dtype):
    got = sf.linspace(start, stop, num, dtype=dtype)
    expected = np.linspace(start, stop, num).astype(dtype)
    assert_matches(got, expected, rtol=1e-5, atol=1e-5)
    assert got.numpy()[0] == expected[0] and got.numpy()[-1] == expected[-1]


def test_linspace_examples():
    assert_matches(sf.linspace(0.0, 1.0, 5), np.array([0.0, 0.25, 0.5, 0.75, 1.0], np.float32))
    assert_matches(sf.linspace(3.0, 7.0, 1), np.array([3.0], np.float32))
    assert_matches(sf.linspace(1.0, -1.0, 3), np.array([1.0, 0.0, -1.0], np.float32))
    with pytest.raises(ValueError):
        sf.linspace(0.0, 1.0, 0)


def test_linspace_with_an_integer_dtype_matches_numpy_or_raises():
    try:
        got = sf.linspace(0, 10, 5, dtype=sf.int32)
    except TypeError:
        return
    assert_matches(got, np.linspace(0, 10, 5, dtype=np.int32))


def test_range_takes_scalar_tensors_and_dims_known_while_tracing():
    """TensorFlow's ``tf.range(tf.shape(x)[1])``: a tensor argument is read (its dtype is
    the result's); traced, its value must be known while tracing, else a clear error."""
    assert sf.range(sf.constant(3, sf.int64)).dtype == sf.int64
    np.testing.assert_array_equal(sf.range(sf.constant(1.0), 2.0, 0.5).numpy(), [1.0, 1.5])
    positions = sf.function(lambda x: sf.range(sf.shape(x)[1]))(sf.zeros((2, 3)))
    np.testing.assert_array_equal(positions.numpy(), [0, 1, 2])
    unknown = sf.function(lambda x: sf.range(sf.shape(x)[0]),
                          input_signature=[sf.TensorSpec([None, 3])])
    with pytest.raises(sf.errors.StagingError, match="range: limit is a traced tensor whose "
                                                     "value is known only when the function "
                                                     "runs"):
        unknown(sf.zeros((2, 3)))
    with pytest.raises(ValueError, match="range: limit must be a scalar"):
        sf.range(sf.zeros((2,)))
