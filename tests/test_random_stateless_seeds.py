"""`sf.random`'s stateless categorical and truncated normal draws and the seed ops: the same
seed gives the same values eagerly and staged, and the distributions are right."""

import numpy as np

import stageflow as sf


def test_stateless_categorical_frequencies_and_staging():
    logits = np.log(np.array([[0.2, 0.3, 0.5]], np.float32))
    draws = sf.random.stateless_categorical(logits, 20000, seed=[3, 4]).numpy()
    np.testing.assert_allclose(np.bincount(draws[0], minlength=3) / 20000, [0.2, 0.3, 0.5],
                               atol=0.015)
    staged = sf.function(lambda x: sf.random.stateless_categorical(x, 50, seed=[3, 4]))
    eager = sf.random.stateless_categorical(logits, 50, seed=[3, 4]).numpy()
    np.testing.assert_array_equal(staged(sf.constant(logits)).numpy(), eager)


def test_stateless_truncated_normal_moments():
    z = sf.random.stateless_truncated_normal([50000], seed=[1, 2], mean=1.0, stddev=2.0).numpy()
    assert np.all(np.abs(z - 1.0) <= 4.0 + 1e-6)
    # the standard normal cut at two deviations has mean 0 and deviation 0.8796
    assert abs(z.mean() - 1.0) < 0.03
    assert abs(z.std() - 2 * 0.8796) < 0.03
    again = sf.random.stateless_truncated_normal([5], seed=[1, 2]).numpy()
    staged = sf.function(lambda: sf.random.stateless_truncated_normal([5], seed=[1, 2]))()
    np.testing.assert_array_equal(staged.numpy(), again)


def test_seed_ops_as_tensorflow():
    seeds = sf.random.experimental.stateless_split([1, 2], num=3)
    assert seeds.shape == (3, 2) and seeds.dtype == sf.int32
    assert len({tuple(s) for s in seeds.numpy().tolist()}) == 3
    folded = sf.random.fold_in([1, 2], 3)
    assert folded.numpy()[1] == 3 and folded.dtype == sf.int32  # TensorFlow: [draw, data]
    np.testing.assert_array_equal(folded.numpy(),
                                  sf.random.experimental.stateless_fold_in([1, 2], 3).numpy())
    # TensorFlow's state for seed 5 is counter 5, key 0; for -1 all ones
    assert sf.random.create_rng_state(5, "philox").tolist() == [0, 0, 5, 0]
    assert sf.random.create_rng_state(-1, "philox").tolist() == [2**32 - 1] * 4
    state = sf.random.create_rng_state(7, "philox")
    np.testing.assert_array_equal(sf.random.Generator.from_state(state, "philox").normal([3]),
                                  sf.random.Generator.from_seed(7).normal([3]))
