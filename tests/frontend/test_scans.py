"""`sf.cumsum` and `sf.cumprod` with TensorFlow's `exclusive` and `reverse`, against NumPy,
eagerly, interpreted and compiled."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf


def reference(x, axis, exclusive, reverse, product):
    accumulate = np.cumprod if product else np.cumsum
    y = np.flip(x, axis) if reverse else x
    out = accumulate(y, axis=axis)
    if exclusive:
        start = np.ones_like(np.take(y, [0], axis)) if product else np.zeros_like(
            np.take(y, [0], axis))
        out = np.concatenate([start, np.take(out, range(y.shape[axis] - 1), axis)], axis)
    return np.flip(out, axis) if reverse else out


@settings(max_examples=30, deadline=None)
@given(array=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1,
                                                     max_side=4),
                        elements=st.floats(-2, 2)),
       exclusive=st.booleans(), reverse=st.booleans(), product=st.booleans(),
       way=st.sampled_from(["eager", "interpreted", "compiled"]), data=st.data())
def test_scans_match_numpy(array, exclusive, reverse, product, way, data):
    axis = data.draw(st.integers(-array.ndim, array.ndim - 1))
    op = sf.cumprod if product else sf.cumsum

    def f(x):
        return op(x, axis=axis, exclusive=exclusive, reverse=reverse)

    fn = f if way == "eager" else sf.function(f, jit=way == "compiled")
    np.testing.assert_allclose(fn(sf.constant(array)).numpy(),
                               reference(array, axis % array.ndim, exclusive, reverse,
                                         product), rtol=1e-12, atol=1e-12)


def test_tensorflow_examples():
    x = sf.constant([1.0, 2.0, 3.0])
    assert sf.cumsum(x).numpy().tolist() == [1.0, 3.0, 6.0]
    assert sf.cumsum(x, exclusive=True).numpy().tolist() == [0.0, 1.0, 3.0]
    assert sf.cumsum(x, reverse=True).numpy().tolist() == [6.0, 5.0, 3.0]
    assert sf.cumsum(x, exclusive=True, reverse=True).numpy().tolist() == [5.0, 3.0, 0.0]
    assert sf.cumprod(x, exclusive=True).numpy().tolist() == [1.0, 1.0, 2.0]
    with pytest.raises(TypeError, match="numeric"):
        sf.cumsum(sf.constant([True, False]))
