"""`sf.linalg.diag`: TensorFlow's batched matrices from diagonals (`k`, `num_rows`,
`num_cols`, `padding_value`, `align`), eagerly, interpreted and compiled; expected values
are TensorFlow 2's."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]


def way(name, fn):
    return fn if name == "eager" else sf.function(fn, jit=name == "compiled")


@pytest.mark.parametrize("name", WAYS)
def test_batched_main_diagonal_against_numpy(name):
    values = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
    got = way(name, sf.linalg.diag)(sf.constant(values))
    assert got.shape == (2, 3, 4, 4) and got.dtype == sf.float32
    want = np.stack([np.stack([np.diag(row) for row in batch]) for batch in values])
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name", WAYS)
def test_tensorflow_examples(name):
    def ops(v, band):
        return (sf.linalg.diag(v, k=1), sf.linalg.diag(v, k=-1, num_cols=4),
                sf.linalg.diag(band, k=(0, 1), num_rows=3, num_cols=4),
                sf.linalg.diag(sf.reverse(band, [0]), k=(-1, 0), align="LEFT_RIGHT"),
                sf.linalg.diag(v, padding_value=9))

    got = way(name, ops)(sf.constant([1, 2]), sf.constant([[1, 2, 3], [4, 5, 0]]))
    want = ([[0, 1, 0], [0, 0, 2], [0, 0, 0]], [[0, 0, 0, 0], [1, 0, 0, 0], [0, 2, 0, 0]],
            [[4, 1, 0, 0], [0, 5, 2, 0], [0, 0, 0, 3]],
            [[4, 0, 0], [2, 5, 0], [0, 3, 0]], [[1, 9], [9, 2]])
    for g, w in zip(got, want, strict=True):
        assert g.numpy().tolist() == w


def test_default_alignment_of_a_band():
    got = sf.linalg.diag([[0, 2, 3], [4, 5, 6]], k=(0, 1))
    assert got.numpy().tolist() == [[4, 2, 0], [0, 5, 3], [0, 0, 6]]


def test_gradient_is_the_diagonal_of_the_cotangent():
    v = sf.constant([1.0, 2.0, 3.0])
    weights = sf.constant(np.arange(9, dtype=np.float32).reshape(3, 3))
    with sf.GradientTape() as tape:
        tape.watch(v)
        loss = sf.reduce_sum(sf.linalg.diag(v) * weights)
    np.testing.assert_array_equal(tape.gradient(loss, v).numpy(), [0.0, 4.0, 8.0])


def test_errors():
    with pytest.raises(ValueError, match="not consistent with k"):
        sf.linalg.diag([1, 2], num_rows=5, num_cols=5)
    with pytest.raises(ValueError, match="align must be one of"):
        sf.linalg.diag([1, 2], align="MIDDLE")
    with pytest.raises(ValueError, match=r"need a diagonal of shape \[..., 2, length\]"):
        sf.linalg.diag([1, 2, 3], k=(0, 1))
