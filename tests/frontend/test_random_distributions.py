"""`sf.random.truncated_normal` and `sf.random.categorical`: their distributions (moments
and frequencies over many draws), reproducibility by seed, eagerly and staged."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf


@pytest.mark.parametrize("staged", [False, True])
def test_truncated_normal_stays_within_two_deviations(staged):
    def draw():
        return sf.random.Generator.from_seed(5).truncated_normal([40000], mean=1.0,
                                                                 stddev=0.5,
                                                                 dtype=sf.float64)

    values = (sf.function(draw)() if staged else draw()).numpy()
    assert values.min() >= 0.0 and values.max() <= 2.0
    # the standard normal truncated at +-2 has mean 0 and standard deviation 0.8796
    assert values.mean() == pytest.approx(1.0, abs=0.01)
    assert values.std() == pytest.approx(0.5 * 0.8796, rel=0.02)
    again = sf.random.Generator.from_seed(5).truncated_normal([40000], 1.0, 0.5,
                                                                dtype=sf.float64).numpy()
    if not staged:
        np.testing.assert_array_equal(values, again)


@pytest.mark.parametrize("staged", [False, True])
def test_categorical_frequencies_follow_the_softmax(staged):
    probabilities = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])

    def draw():
        return sf.random.Generator.from_seed(7).categorical(
            sf.constant(np.log(probabilities)), 20000)

    samples = (sf.function(draw)() if staged else draw()).numpy()
    assert samples.shape == (2, 20000) and samples.dtype == np.int64
    for row, want in zip(samples, probabilities, strict=True):
        np.testing.assert_allclose(np.bincount(row, minlength=3) / row.size, want, atol=0.015)
    with pytest.raises(ValueError, match="logits must be"):
        sf.random.categorical(sf.constant([0.0, 1.0]), 3)


def test_generator_takes_tensorflows_alg_and_reset_from_seed():
    g = sf.random.Generator.from_seed(1, alg="philox")
    first = g.normal([3]).numpy()
    g.reset_from_seed(1)
    np.testing.assert_array_equal(g.normal([3]).numpy(), first)
    with pytest.raises(ValueError, match="only Philox"):
        sf.random.Generator.from_seed(1, alg="threefry")


@pytest.mark.parametrize("way", ["eager", "interpreted", "compiled"])
def test_stateless_draws_are_functions_of_their_seed(way):
    def draws(seed):
        return (sf.random.stateless_uniform((4,), seed, minval=-1.0, maxval=1.0),
                sf.random.stateless_normal((2, 3), seed, mean=1.0, stddev=2.0))

    f = draws if way == "eager" else sf.function(draws, jit=way == "compiled")
    first = [t.numpy() for t in f(sf.constant([1, 2]))]
    again = [t.numpy() for t in f(sf.constant([1, 2]))]
    other = [t.numpy() for t in f(sf.constant([1, 3]))]
    eager = [t.numpy() for t in draws([1, 2])]
    for a, b, c, d in zip(first, again, other, eager, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, d, rtol=1e-6)  # compiled transcendentals: an ulp
        assert not np.allclose(a, c)
    assert np.all((first[0] >= -1.0) & (first[0] < 1.0))
    with pytest.raises(ValueError, match="shape \\[2\\]"):
        sf.random.stateless_normal((2,), seed=[1, 2, 3])


def test_split_generators_are_deterministic_and_independent():
    parent = sf.random.Generator.from_seed(7)
    children = [g.normal((4,)).numpy() for g in parent.split(3)]
    again = [g.normal((4,)).numpy() for g in sf.random.Generator.from_seed(7).split(3)]
    for a, b in zip(children, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(children[0], children[1])
    fresh = sf.random.Generator.from_seed(7).normal((4,)).numpy()
    assert not np.array_equal(parent.normal((4,)).numpy(), fresh)  # the parent advanced
