"""`sf.tensor_scatter_nd_min/max`: TensorFlow's results (duplicates, slices, negative
indices) and gradients (ties split), eagerly, interpreted and compiled, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]


def way(name, fn):
    return fn if name == "eager" else sf.function(fn, jit=name == "compiled")


def numpy_scatter(tensor, indices, updates, reduce):
    out = np.array(tensor, copy=True)
    k = indices.shape[-1]
    flat = indices.reshape(-1, k)
    reduce.at(out, tuple(flat.T), updates.reshape((-1, *out.shape[k:])))
    return out


@pytest.mark.parametrize("name", WAYS)
def test_tensorflow_examples(name):
    def ops(tensor, matrix):
        return (sf.tensor_scatter_nd_min(tensor, [[0], [2], [0]], sf.constant([0, 7, -2])),
                sf.tensor_scatter_nd_max(matrix, [[1]], sf.constant([[9, 0]])))

    low, high = way(name, ops)(sf.constant([1, 5, 3]), sf.constant([[1, 5], [3, 3]]))
    assert low.numpy().tolist() == [-2, 5, 3]
    assert high.numpy().tolist() == [[1, 5], [9, 3]]


@pytest.mark.parametrize("name", WAYS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8,
                                   np.int8])
def test_against_numpy_with_duplicates_and_slices(name, dtype):
    rng = np.random.default_rng(3)
    tensor = rng.integers(0, 50, (4, 3, 2)).astype(dtype)
    indices = rng.integers(0, 3, (5, 2)).astype(np.int32)  # duplicated tuples
    updates = rng.integers(0, 50, (5, 2)).astype(dtype)

    def ops(t, i, u):
        return sf.tensor_scatter_nd_min(t, i, u), sf.tensor_scatter_nd_max(t, i, u)

    low, high = way(name, ops)(sf.constant(tensor), sf.constant(indices), sf.constant(updates))
    assert low.dtype == tensor.dtype and low.shape == tensor.shape
    np.testing.assert_array_equal(low.numpy(), numpy_scatter(tensor, indices, updates,
                                                             np.minimum))
    np.testing.assert_array_equal(high.numpy(), numpy_scatter(tensor, indices, updates,
                                                              np.maximum))


def test_negative_and_batched_indices():
    tensor = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = sf.tensor_scatter_nd_max(tensor, [[[-1, 0]], [[1, 0]]], [[9.0], [4.0]])
    np.testing.assert_array_equal(got.numpy(), [[0, 1, 2], [9, 4, 5]])


@pytest.mark.parametrize("name", ["eager", "interpreted"])
def test_gradient_is_tensorflows(name):
    # TensorFlow 2: the output's gradient goes to the inputs equal to it, ties split evenly
    x, y = sf.constant([1.0, 5.0, 3.0, 4.0]), sf.constant([1.0, 2.0, 0.0, 2.0])
    weights = sf.constant([1.0, 2.0, 3.0, 4.0])

    def grads(x, y):
        with sf.GradientTape() as tape:
            tape.watch(x)
            tape.watch(y)
            loss = sf.reduce_sum(sf.tensor_scatter_nd_min(x, [[0], [1], [2], [1]], y) * weights)
        return tape.gradient(loss, [x, y])

    dx, dy = way(name, grads)(x, y)
    np.testing.assert_allclose(dx.numpy(), [0.5, 0.0, 0.0, 4.0])
    np.testing.assert_allclose(dy.numpy(), [0.5, 1.0, 3.0, 1.0])


def test_errors():
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        sf.tensor_scatter_nd_min([1.0, 2.0], [[0.0]], [0.0])
    with pytest.raises(ValueError, match=r"updates must be \(1,\)"):
        sf.tensor_scatter_nd_min([1, 2], [[0]], [0, 1])
    with pytest.raises(TypeError, match="real-number dtype"):
        sf.tensor_scatter_nd_max([True, False], [[0]], [False])
    with pytest.raises(IndexError, match="out of range"):
        sf.tensor_scatter_nd_min([1, 2], [[2]], [0])
