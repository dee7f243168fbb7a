"""Eager shape ops against NumPy: reshape, transpose, expand_dims, squeeze, concat, stack,
split, broadcast_to, tile, pad, gather, one_hot, identity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import ALL, INDICES, arrays, assert_matches, shapes

import stageflow as sf

DTYPES = st.sampled_from(ALL)


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


@st.composite
def reshape_target(draw, shape):
    """A shape with as many elements as `shape`, maybe with one -1."""
    size = math.prod(shape)
    if size == 0:
        target = list(draw(shapes(max_dims=3)))
        target.insert(draw(st.integers(0, len(target))), 0)
        return tuple(target)
    factors = draw(st.permutations(_prime_factors(size)))
    ndim = draw(st.integers(0 if size == 1 else 1, 4))
    target = [1] * ndim
    for f in factors:
        target[draw(st.integers(0, ndim - 1))] *= f
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return tuple(target)


@given(data=st.data())
def test_reshape_matches_numpy(data):
    x = data.draw(arrays(data.draw(DTYPES)))
    target = data.draw(reshape_target(x.shape))
    assert_matches(sf.reshape(sf.constant(x), target), np.reshape(x, target))
    assert_matches(sf.reshape(sf.constant(x), list(target)), np.reshape(x, target))


def test_reshape_errors():
    with pytest.raises(ValueError) as info:
        sf.reshape(sf.zeros((2, 3)), (4, 2))
    assert "reshape" in str(info.value) and "(2, 3)" in str(info.value)
    with pytest.raises(ValueError):
        sf.reshape(sf.zeros((2, 3)), (-1, 4))
    with pytest.raises(ValueError):
        sf.reshape(sf.zeros((2, 3)), (-1, -1))
    with pytest.raises(ValueError):
        sf.reshape(sf.zeros((0, 3)), (0, -1))


@pytest.mark.parametrize("call, message", [
    (lambda x: sf.reshape(x, [None, 3]), r"reshape: the new shape \[None, 3\] holds None, "
                                         r"not an int \(-1 alone infers one dim; "
                                         r"sf.shape\(x\)\[i\] gives a dim known at run time\)"),
    (lambda x: sf.reshape(x, [1.5, 4]), r"reshape: the new shape \[1.5, 4\] holds 1.5"),
    (lambda x: sf.tile(x, [None, None]), r"tile: multiples \[None, None\] holds None"),
])
def test_dims_that_are_not_ints_name_the_op_the_argument_and_the_line(call, message):
    with pytest.raises(TypeError, match=message + r".*\n  at .*test_shape_ops.py:\d+"):
        call(sf.zeros((2, 3)))


@given(data=st.data())
def test_transpose_matches_numpy(data):
    x = data.draw(arrays(data.draw(DTYPES)))
    assert_matches(sf.transpose(sf.constant(x)), np.transpose(x))
    perm = data.draw(st.permutations(range(x.ndim)))
    assert_matches(sf.transpose(sf.constant(x), perm), np.transpose(x, perm))
    negative = [p - x.ndim for p in perm]
    assert_matches(sf.transpose(sf.constant(x), perm=negative), np.transpose(x, perm))


def test_transpose_errors():
    with pytest.raises(ValueError):
        sf.transpose(sf.zeros((2, 3)), (0, 0))
    with pytest.raises(ValueError):
        sf.transpose(sf.zeros((2, 3)), (0, 1, 2))


@given(data=st.data())
def test_expand_dims_matches_numpy(data):
    x = data.draw(arrays(data.draw(DTYPES)))
    axis = data.draw(st.integers(-x.ndim - 1, x.ndim))
    assert_matches(sf.expand_dims(sf.constant(x), axis), np.expand_dims(x, axis))


def test_expand_dims_negative_axis_and_errors():
    t = sf.zeros((2, 3))
    assert sf.expand_dims(t, -1).shape == (2, 3, 1)
    assert sf.expand_dims(t, -3).shape == (1, 2, 3)
    assert sf.expand_dims(t, 2).shape == (2, 3, 1)
    with pytest.raises(ValueError):
        sf.expand_dims(t, 3)
    with pytest.raises(ValueError):
        sf.expand_dims(t, -4)


@given(data=st.data())
def test_squeeze_matches_numpy(data):
    x = data.draw(arrays(data.draw(DTYPES), shapes(max_side=2)))
    assert_matches(sf.squeeze(sf.constant(x)), np.squeeze(x))
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    chosen = data.draw(st.lists(st.sampled_from(ones), unique=True) if ones else st.just([]))
    axis = tuple(a - x.ndim if data.draw(st.booleans()) else a for a in chosen)
    assert_matches(sf.squeeze(sf.constant(x), axis), np.squeeze(x, axis))
    if len(axis) == 1:
        assert_matches(sf.squeeze(sf.constant(x), axis[0]), np.squeeze(x, axis[0]))
        assert_matches(sf.squeeze(sf.constant(x), list(axis)), np.squeeze(x, axis))


def test_squeeze_of_a_non_unit_axis_raises():
    t = sf.zeros((1, 2, 1))
    with pytest.raises(ValueError) as info:
        sf.squeeze(t, axis=1)
    assert "squeeze" in str(info.value)
    with pytest.raises(ValueError):
        sf.squeeze(t, axis=(0, 1))
    with pytest.raises(ValueError):
        sf.squeeze(t, axis=3)
    assert sf.squeeze(t).shape == (2,)
    assert sf.squeeze(t, -1).shape == (1, 2)


@st.composite
def concat_case(draw):
    dtype = draw(DTYPES)
    base = list(draw(shapes(min_dims=1, max_dims=3)))
    axis = draw(st.integers(-len(base), len(base) - 1))
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        shape = list(base)
        shape[axis] = draw(st.integers(0, 3))
        parts.append(draw(arrays(dtype, tuple(shape))))
    return parts, axis


@given(case=concat_case())
def test_concat_matches_numpy(case):
    parts, axis = case
    got = sf.concat([sf.constant(p) for p in parts], axis)
    assert_matches(got, np.concatenate(parts, axis))
    assert_matches(sf.concat(parts, axis=axis), np.concatenate(parts, axis))


def test_concat_errors():
    with pytest.raises(ValueError) as info:
        sf.concat([sf.zeros((2, 3)), sf.zeros((2, 4))], 0)
    assert "concat" in str(info.value)
    with pytest.raises(TypeError):
        sf.concat([sf.zeros((2,)), sf.zeros((2,), sf.float64)], 0)
    with pytest.raises(ValueError):
        sf.concat([sf.zeros((2,)), sf.zeros((2,))], 1)
    with pytest.raises(ValueError):
        sf.concat([], 0)
    with pytest.raises(ValueError):
        sf.concat([sf.zeros((2,)), sf.zeros((2, 1))], 0)


def test_concat_of_one_tensor_checks_the_axis():
    with pytest.raises(ValueError):
        sf.concat([sf.zeros((2,))], axis=5)


@given(data=st.data())
def test_stack_matches_numpy(data):
    dtype = data.draw(DTYPES)
    shape = data.draw(shapes(max_dims=3))
    parts = [data.draw(arrays(dtype, shape)) for _ in range(data.draw(st.integers(1, 3)))]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    assert_matches(sf.stack([sf.constant(p) for p in parts], axis), np.stack(parts, axis))
    assert_matches(sf.stack(parts), np.stack(parts))


def test_stack_errors():
    with pytest.raises(ValueError):
        sf.stack([sf.zeros((2,)), sf.zeros((3,))])
    with pytest.raises(ValueError):
        sf.stack([sf.zeros((2,))], axis=2)
    with pytest.raises(ValueError):
        sf.stack([])


@given(data=st.data())
def test_split_into_equal_parts_matches_numpy(data):
    dtype = data.draw(DTYPES)
    shape = list(data.draw(shapes(min_dims=1, max_dims=3)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = data.draw(st.integers(1, 3))
    shape[axis] *= parts
    x = data.draw(arrays(dtype, tuple(shape)))
    got = sf.split(sf.constant(x), parts, axis)
    expected = np.split(x, parts, axis)
    assert isinstance(got, list) and len(got) == parts
    for g, e in zip(got, expected, strict=True):
        assert_matches(g, e)


@given(data=st.data())
def test_split_by_sizes_matches_numpy(data):
    dtype = data.draw(DTYPES)
    shape = list(data.draw(shapes(min_dims=1, max_dims=3)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    shape[axis] = sum(sizes)
    x = data.draw(arrays(dtype, tuple(shape)))
    got = sf.split(sf.constant(x), sizes, axis=axis)
    expected = np.split(x, np.cumsum(sizes)[:-1], axis)
    assert len(got) == len(sizes)
    for g, e in zip(got, expected, strict=True):
        assert_matches(g, e)


def test_split_errors():
    with pytest.raises(ValueError) as info:
        sf.split(sf.zeros((5,)), 2)
    assert "split" in str(info.value)
    with pytest.raises(ValueError):
        sf.split(sf.zeros((5,)), [2, 2])
    with pytest.raises(ValueError):
        sf.split(sf.zeros((4,)), 2, axis=1)


@given(data=st.data())
def test_broadcast_to_matches_numpy(data):
    target = data.draw(shapes())
    shape = data.draw(
        hnp.broadcastable_shapes(target, min_side=0, max_dims=len(target)).filter(
            lambda s: np.broadcast_shapes(s, target) == target
        )
    )
    x = data.draw(arrays(data.draw(DTYPES), shape))
    assert_matches(sf.broadcast_to(sf.constant(x), target), np.broadcast_to(x, target))


def test_broadcast_to_errors():
    with pytest.raises(ValueError) as info:
        sf.broadcast_to(sf.zeros((3,)), (2, 4))
    assert "broadcast_to" in str(info.value)
    with pytest.raises(ValueError):
        sf.broadcast_to(sf.zeros((2, 3)), (3,))


@given(data=st.data())
def test_tile_matches_numpy(data):
    x = data.draw(arrays(data.draw(DTYPES), shapes(max_dims=3, max_side=3)))
    extra = data.draw(st.integers(0, 1))
    multiples = data.draw(st.lists(st.integers(0, 3), min_size=x.ndim + extra,
                                   max_size=x.ndim + extra))
    assert_matches(sf.tile(sf.constant(x), multiples), np.tile(x, multiples))


@given(data=st.data())
def test_pad_matches_numpy(data):
    dtype = np.dtype(data.draw(DTYPES))
    x = data.draw(arrays(dtype, shapes(min_dims=1, max_dims=3)))
    paddings = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in x.shape]
    assert_matches(sf.pad(sf.constant(x), paddings), np.pad(x, paddings))
    value = True if dtype == np.bool_ else 7
    assert_matches(sf.pad(sf.constant(x), paddings, constant_values=value),
                   np.pad(x, paddings, constant_values=value))


def test_pad_errors():
    with pytest.raises(ValueError):
        sf.pad(sf.zeros((2,)), [(1, 1), (1, 1)])
    with pytest.raises(ValueError):
        sf.pad(sf.zeros((2,)), [(-1, 1)])
    with pytest.raises(ValueError):
        sf.pad(sf.zeros((2,)), [(1, 1)], mode="REFLECT")


@given(data=st.data())
def test_gather_matches_numpy(data):
    params = data.draw(arrays(data.draw(DTYPES), shapes(min_dims=1, max_dims=3)))
    axis = data.draw(st.integers(-params.ndim, params.ndim - 1))
    size = params.shape[axis]
    index_shape = data.draw(shapes(max_dims=2))
    if size == 0:
        assume(math.prod(index_shape) == 0)
    index_dtype = data.draw(st.sampled_from(INDICES))
    indices = data.draw(arrays(index_dtype, index_shape, lo=-size, hi=max(size - 1, 0)))
    got = sf.gather(sf.constant(params), sf.constant(indices), axis=axis)
    assert_matches(got, np.take(params, indices, axis=axis))


def test_gather_negative_indices_lists_and_errors():
    params = sf.constant([[1, 2, 3], [4, 5, 6]])
    assert_matches(sf.gather(params, [-1, 0]), np.array([[4, 5, 6], [1, 2, 3]], np.int32))
    assert_matches(sf.gather(params, [2, -3], axis=1), np.array([[3, 1], [6, 4]], np.int32))
    assert_matches(sf.gather(params, 1), np.array([4, 5, 6], np.int32))
    with pytest.raises(IndexError) as info:
        sf.gather(params, [2])
    assert "gather" in str(info.value)
    with pytest.raises(IndexError):
        sf.gather(params, [-3])
    with pytest.raises(IndexError):
        sf.gather(params, [3], axis=1)
    with pytest.raises(TypeError):
        sf.gather(params, [0.0])
    with pytest.raises(ValueError):
        sf.gather(params, [0], axis=2)


def _one_hot_reference(indices, depth, axis, on, off, dtype):
    hits = indices[..., None] == np.arange(depth)
    out = np.where(hits, on, off).astype(dtype)
    return np.moveaxis(out, -1, axis)


@given(data=st.data())
def test_one_hot_matches_reference(data):
    depth = data.draw(st.integers(0, 4))
    indices = data.draw(arrays(data.draw(st.sampled_from(INDICES)), shapes(max_dims=2),
                               lo=-1, hi=depth))
    axis = data.draw(st.integers(-indices.ndim - 1, indices.ndim))
    got = sf.one_hot(sf.constant(indices), depth, axis=axis)
    assert_matches(got, _one_hot_reference(indices, depth, axis, 1.0, 0.0, np.float32))
    got = sf.one_hot(sf.constant(indices), depth, on_value=5, off_value=-1, axis=axis,
                     dtype=sf.int32)
    assert_matches(got, _one_hot_reference(indices, depth, axis, 5, -1, np.int32))


@given(data=st.data(), jit=st.booleans())
def test_one_hot_of_indices_with_unknown_dims(data, jit):
    """The usual training step: labels of an unknown batch (``TensorSpec([None])``)."""
    depth = data.draw(st.integers(0, 4))
    indices = data.draw(arrays(np.int32, shapes(min_dims=1, max_dims=2), lo=-1, hi=depth))
    axis = data.draw(st.integers(-indices.ndim - 1, indices.ndim))
    staged = sf.function(lambda i: sf.one_hot(i, depth, axis=axis), jit=jit,
                         input_signature=[sf.TensorSpec([None] * indices.ndim, sf.int32)])
    assert_matches(staged(sf.constant(indices)),
                   _one_hot_reference(indices, depth, axis, 1.0, 0.0, np.float32))


def test_one_hot_examples():
    assert_matches(sf.one_hot([0, 2], 3), np.array([[1, 0, 0], [0, 0, 1]], np.float32))
    assert_matches(sf.one_hot([0, 2], 3, axis=0), np.array([[1, 0], [0, 0], [0, 1]], np.float32))
    assert_matches(sf.one_hot([1, -1, 5], 3), np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]],
                                                       np.float32))
    assert sf.one_hot([1], 2, dtype=sf.float64).dtype == sf.float64


@given(data=st.data())
def test_identity_returns_the_same_values(data):
    x = data.draw(arrays(data.draw(DTYPES)))
    t = sf.constant(x)
    assert_matches(sf.identity(t), x)
    assert_matches(sf.identity(x), x)
    assert_matches(sf.identity([1.0, 2.0]), np.array([1.0, 2.0], np.float32))


@pytest.mark.parametrize("perm", [(2, 3), (1, 2), (0, 5), (-3, 0)])
def test_transpose_rejects_out_of_range_axes(perm):
    with pytest.raises(ValueError):
        sf.transpose(sf.zeros((2, 3)), perm)


def test_split_into_zero_parts_raises_value_error():
    with pytest.raises(ValueError):
        sf.split(sf.zeros((4,)), 0)


def test_pad_rejects_a_float_constant_for_an_int_tensor():
    with pytest.raises(TypeError):
        sf.pad(sf.constant([1, 2]), [(1, 1)], constant_values=1.5)


@pytest.mark.parametrize("jit", [True, False])
def test_shape_size_and_rank_are_the_dims_the_call_brings(jit):
    """TensorFlow's ``tf.shape`` / ``tf.size`` / ``tf.rank``: tensors, unknown dims read when
    the function runs (``x.shape`` holds None for them)."""
    def dims(x):
        return sf.shape(x), sf.size(x), sf.rank(x), sf.shape(x, out_type=sf.int64)

    x = np.zeros((3, 0, 4), np.float32)
    eager = dims(x)
    staged = sf.function(dims, jit=jit,
                         input_signature=[sf.TensorSpec([None, None, 4], sf.float32)])
    for got in (eager, staged(x)):
        assert got[0].dtype == sf.int32 and got[0].numpy().tolist() == [3, 0, 4]
        assert int(got[1]) == 0 and int(got[2]) == 3
        assert got[3].dtype == sf.int64 and got[3].numpy().tolist() == [3, 0, 4]
    assert int(staged(np.zeros((5, 2, 4), np.float32))[1]) == 40
    with pytest.raises(TypeError, match="out_type must be int32 or int64"):
        sf.shape(x, out_type=sf.float32)


def test_a_traced_dim_in_a_new_shape_is_read_at_run_time():
    """``sf.reshape(x, [sf.shape(x)[0], 2, 2])``, as in TensorFlow (more in
    test_reshape_traced_dims.py)."""
    staged = sf.function(lambda x: sf.reshape(x, [sf.shape(x)[0], 2, 2]),
                         input_signature=[sf.TensorSpec([None, 4], sf.float32)])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(staged(x).numpy(), x.reshape(3, 2, 2))
