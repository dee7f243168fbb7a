"""`sf.sort`, `sf.argsort`, `sf.math.top_k` and `sf.random.shuffle` against NumPy, eagerly,
interpreted and compiled (known and unknown dims), with NaN, ties and every sortable dtype;
gradients against finite differences."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import numeric_gradient

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]
DTYPES = [np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
          np.uint32, np.uint64, np.float16, ml_dtypes.bfloat16]


def run(f, way, *args, signature=None):
    if way == "eager":
        return f(*args)
    staged = sf.function(f, jit=way == "compiled", input_signature=signature)
    return staged(*args)


def numpy_argsort(x, axis, descending):
    """The documented order: stable, NaN last; descending the reverse of the reversed."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - np.flip(flipped, axis)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES), descending=st.booleans(),
       way=st.sampled_from(WAYS), unknown=st.booleans())
def test_sort_and_argsort_match_numpy(data, dtype, descending, way, unknown):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=9))
    floating = np.dtype(dtype) in sf.core.dtypes.FLOATING
    elements = (st.sampled_from([-2.0, -1.0, 0.0, 1.0, 2.5, np.nan, np.inf]) if floating
                else st.integers(0 if np.dtype(dtype).kind == "u" else -3, 3))  # many ties
    x = data.draw(hnp.arrays(dtype, shape, elements=elements))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    direction = "DESCENDING" if descending else "ASCENDING"
    signature = [sf.TensorSpec([None] * x.ndim, dtype)] if unknown else None
    values, order = run(lambda v: (sf.sort(v, axis, direction), sf.argsort(v, axis, direction)),
                        way, sf.constant(x), signature=signature)
    # (NumPy cannot order bfloat16 itself: its order is float32's)
    ranked = x.astype(np.float32) if dtype == ml_dtypes.bfloat16 else x
    want = numpy_argsort(ranked, axis % x.ndim, descending)
    np.testing.assert_array_equal(order.numpy(), want)
    assert order.dtype == sf.int32
    got = values.numpy()
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.float64),
                                  np.take_along_axis(x, want, axis).astype(np.float64))


def test_the_orders_of_nan_and_ties():
    x = sf.constant([2.0, np.nan, 1.0, 2.0, -np.inf])
    assert sf.argsort(x).numpy().tolist() == [4, 2, 0, 3, 1]
    assert sf.argsort(x, direction="DESCENDING").numpy().tolist() == [1, 0, 3, 2, 4]
    with pytest.raises(ValueError, match="direction must be"):
        sf.sort(x, direction="up")
    with pytest.raises(TypeError, match="cannot sort bool"):
        sf.sort(sf.constant([True, False]))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16, np.int8])
@pytest.mark.parametrize("way", WAYS)
def test_a_large_sort_compiles_to_one_program(way, dtype):
    x = (np.random.default_rng(0).standard_normal((3, 5000)) * 40).astype(dtype)
    got = run(lambda v: sf.sort(v), way, sf.constant(x))
    want = np.take_along_axis(x, np.argsort(x.astype(np.float64), axis=-1, kind="stable"), -1)
    np.testing.assert_array_equal(got.numpy(), want)
    if way == "compiled":
        staged = sf.function(lambda v: sf.sort(v))
        staged(sf.constant(x))
        assert staged.get_concrete_function(sf.constant(x)).stats()["steps_reasons"] == {}


@pytest.mark.parametrize("way", WAYS)
def test_top_k_matches_numpy(way):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 6, (4, 9)).astype(np.float32)  # ties: the earlier position first
    values, indices = run(lambda v: sf.math.top_k(v, k=3), way, sf.constant(x))
    order = np.argsort(-x, axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, -1))
    assert sf.math.top_k([1.0, 5.0, 3.0, 5.0], k=2)[1].numpy().tolist() == [1, 3]
    with pytest.raises(ValueError, match="k must be"):
        sf.math.top_k(x, k=10)


@pytest.mark.parametrize("way", ["interpreted", "compiled"])
def test_top_k_of_more_than_an_unknown_row_holds_raises_at_run_time(way):
    """With the last dim unknown, k is checked against the row the call brings: a row of
    two cannot give three values (eager refuses it as it traces)."""
    signature = [sf.TensorSpec([None, None], sf.float32)]
    x = sf.constant([[1.0, 2.0]])
    with pytest.raises(IndexError, match="out of range"):
        run(lambda v: sf.math.top_k(v, k=3), way, x, signature=signature)
    values, indices = run(lambda v: sf.math.top_k(v, k=2), way, x, signature=signature)
    assert values.numpy().tolist() == [[2.0, 1.0]] and indices.numpy().tolist() == [[1, 0]]


def test_top_k_of_more_than_an_unknown_row_holds_returns_an_error_code_ahead_of_time(tmp_path):
    spec = sf.TensorSpec([None, None], sf.float32)
    library = sf.aot.compile(sf.function(lambda v: sf.math.top_k(v, k=3)[0]), spec, name="top")
    c = ctypes.CDLL(library.save(str(tmp_path / "libtop.so")))
    c.top_output_dims.argtypes, c.top.argtypes = [ctypes.c_void_p] * 2, [ctypes.c_void_p] * 3
    x, y = np.array([[1.0, 2.0, 0.5]], np.float32), np.zeros(3, np.float32)

    def call(row: int) -> int:
        dims, out_dims = (ctypes.c_int64 * 2)(1, row), (ctypes.c_int64 * 2)()
        assert c.top_output_dims(dims, out_dims) == 0 and list(out_dims) == [1, 3]
        return c.top((ctypes.c_void_p * 1)(x.ctypes.data), dims,
                     (ctypes.c_void_p * 1)(y.ctypes.data))

    assert call(3) == 0 and y.tolist() == [2.0, 1.0, 0.5]
    assert call(2) != 0


@pytest.mark.parametrize("way", WAYS)
def test_gradients_go_back_to_where_values_came_from(way):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 6))
    weights = rng.standard_normal((3, 6))
    top_weights = rng.standard_normal((3, 2))

    def loss(v):
        return (sf.reduce_sum(sf.sort(v, axis=0) * weights)
                + sf.reduce_sum(sf.math.top_k(v * v, k=2)[0] * top_weights))

    def gradient(v):
        with sf.GradientTape() as tape:
            tape.watch(v)
            value = loss(v)
        return tape.gradient(value, v)

    got = run(gradient, way, sf.constant(x))
    want = numeric_gradient(lambda a: float(loss(sf.constant(a)).numpy()), x)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("way", WAYS)
def test_shuffle_is_a_seeded_permutation_of_the_rows(way):
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    first = run(lambda v: sf.random.Generator.from_seed(3).shuffle(v), way, sf.constant(x))
    again = run(lambda v: sf.random.Generator.from_seed(3).shuffle(v), way, sf.constant(x))
    rows = first.numpy()
    np.testing.assert_array_equal(rows, again.numpy())
    assert sorted(rows[:, 0].tolist()) == x[:, 0].tolist()
    np.testing.assert_array_equal(rows[:, 1], rows[:, 0] + 1)  # whole rows move
    assert not np.array_equal(rows, x)
    counts = np.zeros((4, 4))
    generator = sf.random.Generator.from_seed(0)
    for _ in range(400):
        counts[np.arange(4), generator.shuffle(sf.range(4)).numpy()] += 1
    assert counts.min() > 60  # every value at every position, about 100 times each
