"""NumPy's tensor methods (`.T`, `.reshape`, `.astype`, `.sum`, ...) give NumPy's values,
eagerly and staged, on tensors and variables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf

REDUCTIONS = ["sum", "prod", "mean", "max", "min"]


@settings(max_examples=25, deadline=None)
@given(array=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1,
                                                     max_side=4),
                        elements=st.floats(-3, 3, width=32)),
       name=st.sampled_from(REDUCTIONS), keepdims=st.booleans(), data=st.data())
def test_reductions_match_numpy(array, name, keepdims, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-array.ndim, array.ndim - 1)))
    want = getattr(array, name)(axis=axis, keepdims=keepdims)
    for fn in (lambda x: getattr(x, name)(axis=axis, keepdims=keepdims),
               sf.function(lambda x: getattr(x, name)(axis=axis, keepdims=keepdims))):
        np.testing.assert_allclose(fn(sf.constant(array)).numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("staged", [False, True])
def test_shape_and_conversion_methods(staged):
    array = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = {
        "T": (lambda x: x.T, array.T),
        "reshape": (lambda x: x.reshape(6, 4), array.reshape(6, 4)),
        "reshape tuple": (lambda x: x.reshape((4, -1)), array.reshape((4, -1))),
        "transpose": (lambda x: x.transpose(1, 0, 2), array.transpose(1, 0, 2)),
        "flatten": (lambda x: x.flatten(), array.flatten()),
        "squeeze": (lambda x: x[:1].squeeze(0), array[:1].squeeze(0)),
        "astype": (lambda x: x.astype(sf.int32), array.astype(np.int32)),
        "argmax": (lambda x: x.argmax(axis=2), array.argmax(axis=2)),
        "abs": (lambda x: (-x).abs(), np.abs(-array)),
        "clip": (lambda x: x.clip(3.0, 7.0), array.clip(3.0, 7.0)),
    }
    for name, (method, want) in cases.items():
        fn = sf.function(method) if staged else method
        got = fn(sf.constant(array)).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert got.dtype == want.dtype or name == "argmax", name


def test_item_and_tolist_are_eager_values():
    x = sf.constant([[1.5, 2.0]])
    assert x.tolist() == [[1.5, 2.0]]
    assert x.sum().item() == 3.5
    with pytest.raises(TypeError, match="one element"):
        x.item()

    @sf.function
    def traced(v):
        return v.item()

    with pytest.raises(sf.errors.StagingError):
        traced(x)


def test_variables_have_the_methods_too():
    v = sf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert v.T.shape == (3, 2)
    assert float(v.sum()) == 15.0
    assert v.reshape(3, 2).shape == (3, 2)
