"""Value-dependent sizes: `sf.boolean_mask`, ``x[mask]``, one-argument `sf.where` and
`sf.unique` against NumPy, eagerly, interpreted and compiled (where they run as steps,
saying why), and gradients through masks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]


def run(f, way, *args):
    return (f if way == "eager" else sf.function(f, jit=way == "compiled"))(*args)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), way=st.sampled_from(WAYS))
def test_boolean_mask_matches_numpy(data, way):
    x = data.draw(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                             elements=st.floats(-5, 5, width=32)))
    axis = data.draw(st.integers(0, x.ndim - 1))
    k = data.draw(st.integers(1, x.ndim - axis))
    mask = data.draw(hnp.arrays(np.bool_, x.shape[axis:axis + k]))
    got = run(lambda a, m: sf.boolean_mask(a, m, axis=axis), way, sf.constant(x),
              sf.constant(mask))
    index = (slice(None),) * axis + (mask,)
    np.testing.assert_array_equal(got.numpy(), x[index])


@pytest.mark.parametrize("way", WAYS)
def test_mask_indexing_and_where_match_numpy(way):
    x = np.arange(12.0).reshape(3, 4)
    got = run(lambda a: (a[a > 4.5], sf.where(a > 4.5), a[[True, False, True]]), way,
              sf.constant(x))
    np.testing.assert_array_equal(got[0].numpy(), x[x > 4.5])
    np.testing.assert_array_equal(got[1].numpy(), np.argwhere(x > 4.5))
    assert got[1].dtype == sf.int64
    np.testing.assert_array_equal(got[2].numpy(), x[[True, False, True]])


@pytest.mark.parametrize("way", WAYS)
def test_unique_keeps_the_order_of_first_occurrence(way):
    values = np.array([4, 1, 4, 2, 1, 9, 2], np.int64)
    y, idx = run(lambda a: sf.unique(a), way, sf.constant(values))
    assert y.numpy().tolist() == [4, 1, 2, 9]
    assert idx.numpy().tolist() == [0, 1, 0, 2, 1, 3, 2]
    np.testing.assert_array_equal(y.numpy()[idx.numpy()], values)
    assert sf.unique(values, out_idx=sf.int64)[1].dtype == sf.int64


@given(values=hnp.arrays(np.float64, st.integers(0, 20), elements=st.sampled_from(
    [0.0, -1.5, 2.0, 7.0, np.inf])))
def test_unique_rebuilds_its_input(values):
    y, idx = sf.unique(values)
    np.testing.assert_array_equal(y.numpy()[idx.numpy()], values)
    assert len(set(y.numpy().tolist())) == len(y.numpy())
    assert sorted(y.numpy().tolist()) == sorted(set(values.tolist()))


def test_staged_functions_with_them_say_why_they_run_as_steps():
    f = sf.function(lambda a: sf.reduce_sum(sf.boolean_mask(a, a > 0.0)))
    assert float(f(sf.constant([-1.0, 2.0, 3.0])).numpy()) == 5.0
    reasons = f.get_concrete_function(sf.constant([-1.0, 2.0, 3.0])).stats()["steps_reasons"]
    assert any("depends on the values" in r for r in reasons.values())


@pytest.mark.parametrize("way", ["eager", "interpreted"])
def test_gradients_flow_to_the_chosen_elements(way):
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]])

    def gradient(a):
        with sf.GradientTape() as tape:
            tape.watch(a)
            loss = sf.reduce_sum(sf.boolean_mask(a, a > 0.0) ** 2)
        return tape.gradient(loss, a)

    got = run(gradient, way, sf.constant(x))
    np.testing.assert_allclose(got.numpy(), np.where(x > 0, 2 * x, 0.0))


def test_bad_masks_are_refused():
    with pytest.raises(TypeError, match="must be bool"):
        sf.boolean_mask(sf.ones((3,)), sf.constant([1, 0, 1]))
    with pytest.raises(ValueError, match="does not cover"):
        sf.boolean_mask(sf.ones((3, 2)), sf.constant([True, False]))
    with pytest.raises(ValueError, match="give both x and y"):
        sf.where(sf.constant([True]), 1.0)
    with pytest.raises(ValueError, match="1-D"):
        sf.unique(sf.ones((2, 2)))
