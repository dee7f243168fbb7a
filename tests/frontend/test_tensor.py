"""Eager `sf.Tensor` behaviour: construction and default dtypes, repr,
NumPy interop, Python conversions, iteration, device, hashing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import ALL, arrays, assert_matches, shapes

import stageflow as sf


def test_repr_matches_the_documented_form():
    assert repr(sf.constant([[2.0]])) == "sf.Tensor([[2.]], shape=(1, 1), dtype=float32)"
    assert repr(sf.constant(3)) == "sf.Tensor(3, shape=(), dtype=int32)"
    assert repr(sf.constant([True, False])) == (
        "sf.Tensor([ True, False], shape=(2,), dtype=bool)"
    )
    assert repr(sf.zeros((0, 2))) == "sf.Tensor([], shape=(0, 2), dtype=float32)"
    assert str(sf.constant([1.5])) == repr(sf.constant([1.5]))


@pytest.mark.parametrize(
    ("value", "dtype", "shape"),
    [
        (1.0, sf.float32, ()),
        (1, sf.int32, ()),
        (True, sf.bool, ()),
        ([1.0, 2.0], sf.float32, (2,)),
        ([[1, 2], [3, 4]], sf.int32, (2, 2)),
        ([True, False], sf.bool, (2,)),
        ([1, 2.5], sf.float32, (2,)),
        (2**40, sf.int64, ()),
        ([], sf.float32, (0,)),
        (np.array([1.0, 2.0]), sf.float64, (2,)),
        (np.array([1.0], np.float32), sf.float32, (1,)),
        (np.array([1, 2], np.int64), sf.int64, (2,)),
        (np.array([1, 2], np.int32), sf.int32, (2,)),
        (np.array([True]), sf.bool, (1,)),
        (np.float64(1.5), sf.float64, ()),
        (np.int64(3), sf.int64, ()),
        (np.array(2.0, np.float16), sf.float16, ()),
    ],
)
def test_default_dtypes(value, dtype, shape):
    for make in (sf.constant, sf.convert_to_tensor):
        t = make(value)
        assert isinstance(t, sf.Tensor)
        assert t.dtype == dtype
        assert t.shape == shape


def test_dtypes_compare_with_numpy_and_names():
    t = sf.constant([1.0])
    assert t.dtype == sf.float32
    assert t.dtype.name == "float32"
    assert t.dtype == np.float32
    for dtype, name in [(sf.float16, "float16"), (sf.bfloat16, "bfloat16"),
                        (sf.float32, "float32"), (sf.float64, "float64"), (sf.int32, "int32"),
                        (sf.int64, "int64"), (sf.bool, "bool")]:
        assert dtype.name == name
        assert sf.constant([1], dtype).dtype == dtype
        assert sf.constant([1], dtype).dtype.name == name
        assert sf.constant([1], name).dtype == dtype


@given(data=st.data())
def test_constant_round_trips_numpy_arrays(data):
    x = data.draw(arrays(data.draw(st.sampled_from(ALL))))
    t = sf.constant(x)
    assert_matches(t, x)
    assert t.ndim == x.ndim
    assert isinstance(t.shape, tuple) and t.shape == x.shape
    np.testing.assert_array_equal(np.asarray(t), x)
    assert np.asarray(t).dtype == x.dtype
    if x.size:
        assert_matches(sf.constant(x.tolist(), x.dtype), x)
    assert_matches(sf.convert_to_tensor(t), x)
    assert sf.convert_to_tensor(t) is t


@given(shape=shapes(), value=st.floats(-10, 10, width=32))
def test_constant_fills_a_scalar_into_a_shape(shape, value):
    assert_matches(sf.constant(value, shape=shape), np.full(shape, value, np.float32))
    assert_matches(sf.constant(value, sf.float64, shape), np.full(shape, value, np.float64))


def test_constant_with_dtype_and_shape():
    assert_matches(sf.constant([1, 2, 3, 4, 5, 6], shape=(2, 3)),
                   np.arange(1, 7, dtype=np.int32).reshape(2, 3))
    assert_matches(sf.constant([1, 2, 3, 4], sf.float64, [4, 1]),
                   np.array([[1.0], [2.0], [3.0], [4.0]]))
    assert_matches(sf.constant(7, sf.int64, (2, 2)), np.full((2, 2), 7, np.int64))
    assert_matches(sf.constant([[5.0]], shape=(3,)), np.full(3, 5.0, np.float32))
    assert_matches(sf.constant(1.0, dtype=sf.float64), np.array(1.0))
    assert_matches(sf.constant(True, shape=(2,)), np.array([True, True]))
    with pytest.raises(ValueError):
        sf.constant([1, 2, 3], shape=(2, 2))


def test_convert_to_tensor_checks_the_dtype_of_tensors():
    t = sf.constant([1.0])
    assert sf.convert_to_tensor(t, sf.float32) is t
    with pytest.raises(TypeError):
        sf.convert_to_tensor(t, sf.float64)
    assert sf.convert_to_tensor([1, 2], sf.float64).dtype == sf.float64


@pytest.mark.parametrize(
    "value",
    [
        np.array([1, 2], np.float128),
        np.array([1, 2], np.int8).view([("a", np.int8)]),
        np.array([1j], np.clongdouble),
        object(),
        None,
        np.array([1], np.dtype("M8[s]")),
    ],
    ids=lambda v: type(v).__name__ + str(getattr(v, "dtype", "")),
)
def test_unsupported_values_raise_type_error(value):
    with pytest.raises(TypeError):
        sf.constant(value)
    with pytest.raises(TypeError):
        sf.convert_to_tensor(value)


@pytest.mark.parametrize("dtype", [np.clongdouble, np.float128, "U3", object])
def test_unsupported_dtypes_raise_type_error(dtype):
    with pytest.raises(TypeError):
        sf.constant([1], dtype)
    with pytest.raises(TypeError):
        sf.zeros((2,), dtype)


def test_ragged_lists_raise_value_error():
    with pytest.raises(ValueError):
        sf.constant([[1, 2], [3]])


# Found by the bad-inputs campaign (`stageflow.testing.bad_inputs`).

@pytest.mark.parametrize("value", [None, [1.0, None], (None,)])
def test_none_with_a_dtype_is_refused_not_made_nan(value):
    """NumPy makes None a NaN when asked for floats."""
    with pytest.raises(TypeError, match="holds None"):
        sf.constant(value, sf.float32)


@pytest.mark.parametrize("value", [1 + 2j, np.ones(2, np.complex64)])
def test_complex_values_with_a_real_dtype_are_refused(value):
    """NumPy drops the imaginary parts with only a warning."""
    with pytest.raises(TypeError, match="complex"):
        sf.constant(value, sf.float32)


def test_arrays_of_the_other_byte_order_are_the_same_numbers():
    """Once 'cannot make a tensor of dtype >f4'."""
    swapped = np.arange(3, dtype=np.float32).astype(">f4")
    tensor = sf.constant(swapped)
    assert tensor.dtype == np.float32 and tensor.numpy().tolist() == [0.0, 1.0, 2.0]


def test_an_operand_that_cannot_be_a_tensor_names_the_line():
    """An op's operand converted inside the op: the message says which line passed it."""
    with pytest.raises(TypeError, match="dtype object\n  at .*test_tensor.py"):
        sf.constant([1.0]) * np.array([object()])


def test_numpy_returns_a_copy_that_does_not_alias():
    source = np.array([1.0, 2.0, 3.0], np.float32)
    t = sf.constant(source)
    source[0] = 100.0
    assert_matches(t, np.array([1.0, 2.0, 3.0], np.float32))
    value = t.numpy()
    assert isinstance(value, np.ndarray)
    value[1] = -5.0
    assert_matches(t, np.array([1.0, 2.0, 3.0], np.float32))
    assert t.numpy() is not t.numpy()
    assert not np.shares_memory(t.numpy(), t.numpy())
    for derived in (sf.zeros((2, 3)), sf.reshape(t, (3, 1)), t[::2], sf.broadcast_to(t, (2, 3))):
        copy = derived.numpy()
        copy[...] = 7
        assert not np.all(derived.numpy() == 7)


def test_np_asarray_cannot_mutate_the_tensor():
    t = sf.constant([1.0, 2.0])
    view = np.asarray(t)
    try:
        view[0] = 100.0
    except ValueError:
        pass  # a read-only view is fine
    assert_matches(t, np.array([1.0, 2.0], np.float32))


def test_np_asarray_and_array_protocol():
    t = sf.constant([[1, 2], [3, 4]])
    value = np.asarray(t)
    assert isinstance(value, np.ndarray) and value.dtype == np.int32
    np.testing.assert_array_equal(value, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), [[1.0, 2.0], [3.0, 4.0]])
    assert np.array(t).dtype == np.int32
    assert np.sum(t) == 10


def test_python_scalar_conversions():
    assert float(sf.constant(2.5)) == 2.5 and isinstance(float(sf.constant(2.5)), float)
    assert int(sf.constant(7)) == 7 and isinstance(int(sf.constant(7)), int)
    assert int(sf.constant(-2.7)) == -2
    assert float(sf.constant(3)) == 3.0
    assert bool(sf.constant(True)) is True
    assert bool(sf.constant(0.0)) is False
    assert bool(sf.constant([[1]])) is True
    assert float(sf.constant([[1.5]])) == 1.5
    assert float(sf.constant(1.5) * 2.0) == 3.0


@pytest.mark.parametrize("shape", [(2,), (0,), (2, 3)])
@pytest.mark.parametrize("convert", [float, int, bool])
def test_scalar_conversions_of_non_scalars_raise(shape, convert):
    with pytest.raises((TypeError, ValueError)) as info:
        convert(sf.zeros(shape))
    assert str(shape) in str(info.value)


def test_len_and_iteration():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    t = sf.constant(x)
    assert len(t) == 3
    assert len(sf.zeros((0, 4))) == 0
    rows = list(t)
    assert len(rows) == 3
    for row, expected in zip(rows, x, strict=True):
        assert_matches(row, expected)
    assert [float(v) for v in sf.constant([1.0, 2.0])] == [1.0, 2.0]
    assert list(sf.zeros((0, 2))) == []
    with pytest.raises(TypeError):
        len(sf.constant(1.0))
    with pytest.raises(TypeError):
        iter(sf.constant(1.0))


def test_device_shape_ndim():
    t = sf.zeros((2, 3, 4))
    assert t.device == "/device:CPU:0"
    assert sf.constant(1.0).device == "/device:CPU:0"
    assert (t + 1.0).device == "/device:CPU:0"
    assert t.shape == (2, 3, 4) and type(t.shape) is sf.TensorShape and isinstance(t.shape, tuple)
    assert t.shape.as_list() == [2, 3, 4] and t.shape[1:].as_list() == [3, 4]
    assert all(type(d) is int for d in t.shape)
    assert t.ndim == 3
    assert sf.constant(1.0).shape == () and sf.constant(1.0).ndim == 0


def test_tensors_are_unhashable_and_ref_is_hashable():
    t = sf.constant([1.0, 2.0])
    u = sf.constant([1.0, 2.0])
    with pytest.raises(TypeError):
        hash(t)
    with pytest.raises(TypeError):
        {t}  # noqa: B018
    refs = {t.ref(), u.ref(), t.ref()}
    assert len(refs) == 2
    assert t.ref() == t.ref() and t.ref() != u.ref()
    assert hash(t.ref()) == hash(t.ref())
    assert t.ref().deref() is t
    assert {t.ref(): "t"}[t.ref()] == "t"


def test_equality_is_elementwise():
    t = sf.constant([1, 2, 3])
    result = t == sf.constant([1, 0, 3])
    assert isinstance(result, sf.Tensor)
    assert_matches(result, np.array([True, False, True]))
    assert_matches(t != 2, np.array([True, False, True]))


def test_is_tensor_and_isinstance():
    t = sf.constant(1.0)
    assert isinstance(t, sf.Tensor)
    assert isinstance(t + 1.0, sf.Tensor)
    assert isinstance(sf.reduce_sum(sf.zeros((2,))), sf.Tensor)
    assert sf.is_tensor(t) and not sf.is_tensor(np.ones(2)) and not sf.is_tensor(1.0)


def test_zero_d_results_behave_like_arrays():
    s = sf.reduce_sum(sf.constant([1.0, 2.0]))
    assert s.shape == () and s.ndim == 0 and s.dtype == sf.float32
    assert isinstance(s.numpy(), np.ndarray) and s.numpy().shape == ()
    assert repr(s) == "sf.Tensor(3., shape=(), dtype=float32)"
    assert float(s) == 3.0
    assert_matches(s * 2.0 + sf.constant([1.0]), np.array([7.0], np.float32))



@pytest.mark.parametrize("dtype", [sf.float16, sf.float32, sf.float64, sf.complex64,
                                   sf.complex128])
def test_weak_python_scalars_under_a_tape_take_the_tensors_dtype(dtype):
    """Under a tape (ops through `Primitive.bind`) an int or float beside a floating or
    complex tensor becomes a constant of its dtype, and one NumPy cannot convert still
    fails with the message of `to_array`."""
    x = sf.constant([1.0, 2.0], dtype)
    with sf.GradientTape() as tape:
        tape.watch(x)
        values = [x * 2, 2.5 * x, x - 1, 0 + x]
        if dtype.kind != "c":
            values.append(sf.cast(x > 1, dtype))
    for v in values:
        assert v.dtype == dtype
    np.testing.assert_allclose(np.asarray(values[:4], np.float64 if dtype.kind != "c"
                                          else np.complex128),
                               [[2, 4], [2.5, 5], [0, 1], [1, 2]])
    assert tape.gradient(values[1], x).dtype == dtype
    with pytest.raises(OverflowError, match="cannot convert int to a tensor"), \
            sf.GradientTape() as tape:
        tape.watch(x)
        _ = x * 10**400


@pytest.mark.parametrize("way", ["eager", "interpreted", "compiled"])
def test_an_index_out_of_range_is_tensorflows_invalid_argument_and_an_index_error(way):
    def pick(x):
        return sf.gather(x, [1])

    f = pick if way == "eager" else sf.function(pick, jit=way == "compiled")
    with pytest.raises(sf.errors.InvalidArgumentError, match="gather: an index is out of"):
        f(sf.constant([1.0]))
    with pytest.raises(IndexError):
        f(sf.constant([1.0]))
    with pytest.raises(sf.errors.InvalidArgumentError, match="index 5 is out of bounds"):
        sf.constant([1.0, 2.0])[5]


@pytest.mark.parametrize("way", ["eager", "interpreted", "compiled"])
def test_slice_and_scatter_sub_as_tensorflows_slicing_guide_uses_them(way):
    def f(t, m):
        return sf.slice(t, begin=[1], size=[3]), sf.slice(m, [0, 1], [2, -1]), (
            sf.tensor_scatter_nd_sub(m, [[0, 0], [1, 1]], [1, 2]))

    g = f if way == "eager" else sf.function(f, jit=way == "compiled")
    t, m = sf.constant([0, 1, 2, 3, 4, 5]), sf.constant([[1, 2, 3], [4, 5, 6]])
    a, b, c = g(t, m)
    assert a.numpy().tolist() == [1, 2, 3]
    assert b.numpy().tolist() == [[2, 3], [5, 6]]
    assert c.numpy().tolist() == [[0, 2, 3], [4, 3, 6]]
    with pytest.raises(ValueError, match="one entry per dim"):
        sf.slice(m, [0], [1])
