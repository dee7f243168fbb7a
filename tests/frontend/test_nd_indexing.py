"""`gather_nd`, `scatter_nd`, `tensor_scatter_nd_update/add` and `unsorted_segment_sum`:
TensorFlow's examples and NumPy references, eagerly, interpreted and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]


def way(name, fn):
    return fn if name == "eager" else sf.function(fn, jit=name == "compiled")


@pytest.mark.parametrize("name", WAYS)
def test_tensorflow_examples(name):
    params = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    tensor = np.ones((4, 2), np.float32)

    def ops(params, tensor):
        return (sf.gather_nd(params, [[0, 1], [1, 0]]), sf.gather_nd(params, [[1]]),
                sf.scatter_nd([[4], [3], [1], [7]], [9.0, 10.0, 11.0, 12.0], [8]),
                sf.tensor_scatter_nd_update(tensor, [[1], [3]], [[5.0, 6.0], [7.0, 8.0]]),
                sf.tensor_scatter_nd_add(tensor, [[1], [1]], [[1.0, 1.0], [2.0, 2.0]]),
                sf.unsorted_segment_sum(tensor * 2.0, [0, 2, 0, 2], 3))

    got = way(name, ops)(sf.constant(params), sf.constant(tensor))
    want = ([2.0, 3.0], [[3.0, 4.0]], [0, 11, 0, 10, 9, 0, 0, 12],
            [[1, 1], [5, 6], [1, 1], [7, 8]], [[1, 1], [4, 4], [1, 1], [1, 1]],
            [[4, 4], [0, 0], [4, 4]])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


def test_out_of_range_and_bad_indices_are_errors():
    with pytest.raises(IndexError, match="out of range"):
        sf.gather_nd(sf.ones([2, 2]), [[2, 0]])
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        sf.gather_nd(sf.ones([2, 2]), sf.constant([[0.0]]))
    with pytest.raises(ValueError, match="updates must be"):
        sf.tensor_scatter_nd_update(sf.ones([4]), [[0]], [1.0, 2.0])


def test_segment_sum_gradient_is_a_gather():
    data = sf.constant(np.arange(8.0).reshape(4, 2))
    with sf.GradientTape() as tape:
        tape.watch(data)
        sums = sf.unsorted_segment_sum(data, [1, 0, 1, 1], 2)
        loss = sf.reduce_sum(sums * sf.constant(np.array([[1.0, 2.0], [3.0, 4.0]])))
    np.testing.assert_array_equal(tape.gradient(loss, data).numpy(),
                                  [[3, 4], [1, 2], [3, 4], [3, 4]])


def test_segment_sums_in_sf_math_as_tensorflow_names_them():
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    got = sf.math.segment_sum(data, [0, 0, 1, 3])
    np.testing.assert_array_equal(got.numpy(), [[2, 4], [4, 5], [0, 0], [6, 7]])
    np.testing.assert_array_equal(
        sf.math.unsorted_segment_sum(data, [3, 0, 3, 1], 4).numpy(),
        [[2, 3], [6, 7], [0, 0], [4, 6]])
    staged = sf.function(lambda x: sf.math.segment_sum(x, [0, 1, 1, 1]))  # constant ids
    np.testing.assert_array_equal(staged(data).numpy(), [[0, 1], [12, 15]])
    with pytest.raises(ValueError, match="non-decreasing"):
        sf.math.segment_sum(data, [1, 0, 2, 2])
    traced_ids = sf.function(lambda x, ids: sf.math.segment_sum(x, ids))
    with pytest.raises(ValueError, match="unsorted_segment_sum.data, segment_ids, num_seg"):
        traced_ids(data, sf.constant([0, 0, 1, 1]))
