"""A gather of a constant run of consecutive indices becomes a slice (`simplify_shapes.
GatherOfRun`): on drawn shapes, axes (negative too) and runs (one index or several,
counted from the end or not), the staged function compiled and interpreted gives the eager
gather's numbers and its optimized IR holds no gather; indices that are not such a run stay
a gather, and one out of range still raises the gather's error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple), data=st.data(),
       scalar=st.booleans(), from_end=st.booleans())
def test_a_run_of_indices_is_a_slice_with_the_gathers_numbers(shape, data, scalar, from_end):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    first = data.draw(st.integers(0, size - 1))
    count = 1 if scalar else data.draw(st.integers(1, size - first))
    run = np.arange(first, first + count) - (size if from_end else 0)
    indices = np.int64(run[0]) if scalar else run.astype(np.int32)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)

    def take(x):
        return sf.gather(x, sf.constant(indices), axis=axis) * 2.0

    want = np.take(x, indices, axis=axis) * 2.0
    compiled = sf.function(take)
    assert "sf.gather" not in compiled.get_concrete_function(x).ir(stage="optimized")
    for jit in (True, False):
        np.testing.assert_array_equal(sf.function(take, jit=jit)(x).numpy(), want)


def test_other_indices_stay_a_gather_and_out_of_range_still_raises():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    shuffled = sf.function(lambda x: sf.gather(x, sf.constant([2, 0]), axis=0))
    assert "sf.gather" in shuffled.get_concrete_function(x).ir(stage="optimized")
    np.testing.assert_array_equal(shuffled(x).numpy(), x[[2, 0]])
    outside = sf.function(lambda x: sf.gather(x, sf.constant([3, 4]), axis=0))
    with pytest.raises(sf.errors.InvalidArgumentError, match="gather: an index is out of range"):
        outside(x)
