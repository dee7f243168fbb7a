"""Float sums along the innermost axis: rows read a vector at a time where contiguous and
gathered element by element otherwise, both against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from stageflow.codegen.lowered.compile import compile_ops
from stageflow.codegen.lowered.rule import OpSpec
from stageflow.core.primitive import ShapedType


def row_sum(shape: tuple[int, ...], dtype: np.dtype, keepdims: bool):
    out = shape[:-1] + ((1,) if keepdims else ())
    spec = OpSpec("reduce_sum", (ShapedType(shape, dtype),), (ShapedType(out, dtype),),
                  {"axes": (len(shape) - 1,), "keepdims": keepdims})
    op = compile_ops([spec])[0]
    assert op is not None
    return op, out


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)])
@pytest.mark.parametrize("shape", [(5, 3), (4, 8), (3, 29), (2, 3, 100), (64, 10)])
def test_row_sums_of_contiguous_and_strided_rows_match_numpy(shape, dtype):
    op, out = row_sum(shape, dtype, keepdims=False)
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    result = np.empty(out, dtype)
    for view in (x, np.asfortranarray(x), x[..., ::-1]):
        assert op.call([view], [result]) == 0
        np.testing.assert_allclose(result, view.sum(axis=-1), rtol=1e-5, atol=1e-5)


def test_rows_of_a_sliced_view_start_where_the_view_does():
    op, out = row_sum((4, 12), np.dtype(np.float32), keepdims=True)
    base = np.arange(80, dtype=np.float32).reshape(5, 16)
    view = base[1:, 3:15]
    result = np.empty(out, np.float32)
    assert op.call([view], [result]) == 0
    np.testing.assert_array_equal(result, view.sum(axis=-1, keepdims=True))
