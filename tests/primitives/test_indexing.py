"""Tensor indexing against NumPy: ints (negative too), slices with (negative) steps, None,
Ellipsis and their combinations; errors; an integer list or tensor index gathers."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import ALL, INDICES, arrays, assert_matches, shapes

import stageflow as sf


@given(data=st.data())
def test_basic_indexing_matches_numpy(data):
    x = data.draw(arrays(data.draw(st.sampled_from(ALL)), shapes(max_side=5)))
    index = data.draw(hnp.basic_indices(x.shape, allow_newaxis=True, allow_ellipsis=True))
    assert_matches(sf.constant(x)[index], x[index])


@given(data=st.data())
def test_slices_with_any_step_match_numpy(data):
    x = data.draw(arrays(data.draw(st.sampled_from(ALL)), shapes(min_dims=1, max_side=6)))
    bound = st.none() | st.integers(-8, 8)
    step = st.none() | st.integers(-3, 3).filter(bool)
    index = tuple(
        slice(data.draw(bound), data.draw(bound), data.draw(step)) for _ in range(x.ndim)
    )
    assert_matches(sf.constant(x)[index], x[index])
    assert_matches(sf.constant(x)[index[0]], x[index[0]])


@given(data=st.data())
def test_int_indices_match_numpy(data):
    x = data.draw(arrays(data.draw(st.sampled_from(ALL)), shapes(min_dims=1, min_side=1)))
    count = data.draw(st.integers(1, x.ndim))
    index = tuple(data.draw(st.integers(-d, d - 1)) for d in x.shape[:count])
    assert_matches(sf.constant(x)[index], x[index])
    assert_matches(sf.constant(x)[index[0]], x[index[0]])


def test_documented_forms():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = sf.constant(x)
    for index in [
        1, -1, (1, 2), (-1, -2, -3), slice(None), slice(1, None), slice(None, None, 2),
        slice(None, None, -1), (slice(None, None, -2), 0), (..., 1), (1, ...), (None,),
        (None, 1, None), (..., None), (0, ..., None, slice(1, 4, 2)), (slice(3, 0, -1), None, -1),
        (np.newaxis, ..., np.newaxis), (), ..., (slice(10, 20),), (np.int64(1), np.int32(-1)),
    ]:
        assert_matches(t[index], x[index])


def test_indexing_a_0d_tensor():
    x = np.array(3.5, np.float32)
    t = sf.constant(x)
    assert_matches(t[...], x[...])
    assert_matches(t[()], x[()])
    assert_matches(t[None], x[None])
    assert_matches(t[None, ..., None], x[None, ..., None])
    with pytest.raises(IndexError):
        t[0]  # noqa: B018


def test_out_of_range_int_index_raises_index_error():
    t = sf.zeros((2, 3))
    line = sys._getframe().f_lineno + 2
    with pytest.raises(IndexError) as info:
        t[2]  # noqa: B018
    assert "(2, 3)" in str(info.value)
    assert f"test_indexing.py:{line}" in str(info.value)
    for index in [-3, (0, 3), (0, -4), (..., 3), (None, 2)]:
        with pytest.raises(IndexError):
            t[index]  # noqa: B018
    with pytest.raises(IndexError):
        sf.zeros((0,))[0]  # noqa: B018


def test_too_many_indices_raise_index_error():
    t = sf.zeros((2, 3))
    with pytest.raises(IndexError):
        t[0, 0, 0]  # noqa: B018
    with pytest.raises(IndexError):
        t[..., 0, ...]  # noqa: B018


def test_unsupported_indices_raise_type_error():
    t = sf.zeros((2, 3))
    for index in [1.0, "a", (0, 0.5), sf.constant(1.0)]:
        with pytest.raises(TypeError):
            t[index]  # noqa: B018


def test_slice_bounds_may_be_tensors():
    x = np.arange(10, dtype=np.int32)
    t = sf.constant(x)
    assert_matches(t[sf.constant(2):sf.constant(8):sf.constant(3)], x[2:8:3])
    assert_matches(t[sf.constant(-1)], x[-1])


@given(data=st.data())
def test_integer_list_and_tensor_indices_gather(data):
    x = data.draw(arrays(data.draw(st.sampled_from(ALL)), shapes(min_dims=1, min_side=1)))
    size = x.shape[0]
    indices = data.draw(arrays(data.draw(st.sampled_from(INDICES)), shapes(max_dims=2),
                               lo=-size, hi=size - 1))
    t = sf.constant(x)
    assert_matches(t[sf.constant(indices)], x[indices])
    if indices.ndim == 1 and indices.size:
        assert_matches(t[indices.tolist()], x[indices.tolist()])


def test_gathering_index_examples_and_errors():
    x = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    t = sf.constant(x)
    assert_matches(t[[0, 2]], x[[0, 2]])
    assert_matches(t[[-1, 0, -1]], x[[-1, 0, -1]])
    assert_matches(t[sf.constant([[2], [1]])], x[np.array([[2], [1]])])
    assert_matches(t[sf.constant(1, sf.int64)], x[1])
    with pytest.raises(IndexError):
        t[[3]]  # noqa: B018
    with pytest.raises(IndexError):
        t[[-4]]  # noqa: B018


def test_indexing_results_do_not_alias_the_tensor():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = sf.constant(x)
    row = t[0].numpy()
    row[:] = -1
    assert_matches(t, x)
    x[:] = 100
    assert_matches(t[1], np.array([3.0, 4.0, 5.0], np.float32))


def test_integer_tensor_usable_as_python_index():
    items = [10, 20, 30]
    assert items[sf.constant(1)] == 20
    assert items[sf.constant(-1, sf.int64)] == 30
    with pytest.raises(TypeError):
        items[sf.constant(1.0)]  # noqa: B018


@given(data=st.data())
def test_basic_indexing_with_unknown_dims_matches_numpy(data):
    """Traced with every dim unknown (sizes 0 and 1 included), integer indices and None
    reshape to dims that only the input's run-time dims give (two unknown ones, or one
    beside a 0): compiled and interpreted agree with NumPy."""
    x = data.draw(arrays(data.draw(st.sampled_from(ALL)), shapes(min_dims=1, max_side=4)))
    index = data.draw(hnp.basic_indices(x.shape, allow_newaxis=True, allow_ellipsis=True))
    signature = [sf.TensorSpec([None] * x.ndim, x.dtype)]
    for jit in (True, False):
        staged = sf.function(lambda t: t[index], input_signature=signature, jit=jit)
        assert_matches(staged(x), x[index])


@pytest.mark.parametrize("jit", [True, False])
def test_squeeze_of_unknown_dims_and_its_gradient(jit):
    """A squeeze and an expand_dims between unknown dims, and their gradients (reshapes
    back to the operand's unknown dims)."""
    x = np.arange(24.0).reshape(2, 1, 3, 4)

    @sf.function(input_signature=[sf.TensorSpec([None, 1, None, None], sf.float64)], jit=jit)
    def f(t):
        with sf.GradientTape() as tape:
            tape.watch(t)
            y = sf.expand_dims(sf.squeeze(t, 1), -1)
            loss = sf.reduce_sum(y * y)
        return y, tape.gradient(loss, t)

    y, g = f(x)
    assert_matches(y, x[:, 0, :, :, None])
    np.testing.assert_array_equal(g.numpy(), 2 * x)
    empty = np.zeros((0, 1, 3, 0))
    y, g = f(empty)
    assert y.shape == (0, 3, 0, 1) and g.shape == empty.shape
