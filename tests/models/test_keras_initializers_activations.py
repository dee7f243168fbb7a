"""`sf.keras.initializers` and `sf.keras.activations`: Keras 3's classes and functions,
against values observed from Keras (hard-coded) and NumPy, eagerly, staged, and as the
arguments of layers trained by `fit`."""

import numpy as np
import pytest

import stageflow as sf

init = sf.keras.initializers
act = sf.keras.activations

X = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 7.0], np.float32)

# Keras 3's outputs on X.
KERAS = {
    "sigmoid": [0.04742587, 0.26894143, 0.37754068, 0.5, 0.62245935, 0.7310586, 0.95257413,
                0.99908894],
    "gelu": [-0.0040497, -0.15865526, -0.15426877, 0.0, 0.34573123, 0.8413447, 2.9959502, 7.0],
    "swish": [-0.1422776, -0.2689414, -0.18877034, 0.0, 0.31122968, 0.7310586, 2.8577223,
              6.993623],
    "elu": [-0.95021296, -0.63212055, -0.39346933, 0.0, 0.5, 1.0, 3.0, 7.0],
    "selu": [-1.6705687, -1.1113307, -0.69175816, 0.0, 0.5253505, 1.050701, 3.152103,
             7.354907],
    "softplus": [0.04858736, 0.31326169, 0.47407699, 0.69314718, 0.97407693, 1.31326163,
                 3.04858708, 7.00091171],
    "softsign": [-0.75, -0.5, -0.33333334, 0.0, 0.33333334, 0.5, 0.75, 0.875],
    "exponential": np.exp(X).tolist(),
    "hard_sigmoid": [0.0, 0.33333334, 0.41666666, 0.5, 0.5833333, 0.6666667, 1.0, 1.0],
    "leaky_relu": [-0.6, -0.2, -0.1, 0.0, 0.5, 1.0, 3.0, 7.0],
    "relu6": [0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 3.0, 6.0],
    "mish": [-0.14564748, -0.3034015, -0.22074378, 0.0, 0.3752452, 0.8650984, 2.9865353,
             6.999989],
    "relu": [0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 3.0, 7.0],
    "tanh": np.tanh(X).tolist(),
    "linear": X.tolist(),
}


@pytest.mark.parametrize("name", sorted(KERAS))
def test_activation_matches_keras_eager_and_staged(name):
    fn = getattr(act, name)
    np.testing.assert_allclose(fn(sf.constant(X)).numpy(), KERAS[name], rtol=1e-5, atol=1e-6)
    staged = sf.function(lambda x: fn(x))
    np.testing.assert_allclose(staged(sf.constant(X)).numpy(), KERAS[name], rtol=1e-5,
                               atol=1e-6)


def test_activation_arguments_match_keras():
    out = act.relu(sf.constant(X), negative_slope=0.1, max_value=5.0, threshold=0.5).numpy()
    np.testing.assert_allclose(out, [-0.35, -0.15, -0.1, -0.05, 0.0, 1.0, 3.0, 5.0], rtol=1e-6)
    approx = act.gelu(sf.constant(X), approximate=True).numpy()
    np.testing.assert_allclose(approx, [-0.00363743, -0.158808, -0.154286, 0.0, 0.345714,
                                        0.841192, 2.9963627, 7.0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(act.elu(sf.constant([-1.0]), alpha=2.0).numpy(),
                               [2 * np.expm1(-1.0)], rtol=1e-6)
    soft = act.softmax(sf.constant([[1.0, 2.0], [3.0, 5.0]]), axis=0).numpy()
    np.testing.assert_allclose(soft.sum(0), [1.0, 1.0], rtol=1e-6)


def test_activation_get_serialize_deserialize():
    assert act.get("relu") is act.relu and act.get(None) is act.linear
    assert act.get(act.tanh) is act.tanh
    assert act.serialize(act.swish) == "silu" and act.serialize(act.relu) == "relu"
    assert act.deserialize("swish") is act.silu
    with pytest.raises(ValueError, match="unknown activation"):
        act.get("nope")


@pytest.mark.parametrize("name", ["selu", "mish", "hard_sigmoid", "softsign", "exponential"])
def test_new_activation_names_train_in_fit(name):
    sf.random.set_seed(0)
    model = sf.keras.Sequential([sf.keras.layers.Dense(4, activation=name, input_shape=(3,)),
                                 sf.keras.layers.Dense(1, activation=act.get(name))])
    model.compile(sf.keras.optimizers.SGD(0.01), "mse")
    history = model.fit(np.ones((8, 3), np.float32), np.ones((8, 1), np.float32), epochs=2,
                        verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))


CONFIGS = [  # Keras 3's get_config, its input/output axes left out
    (init.GlorotUniform(seed=1), {"seed": 1}),
    (init.VarianceScaling(), {"seed": None, "scale": 1.0, "mode": "fan_in",
                              "distribution": "truncated_normal"}),
    (init.RandomNormal(), {"seed": None, "mean": 0.0, "stddev": 0.05}),
    (init.TruncatedNormal(), {"seed": None, "mean": 0.0, "stddev": 0.05}),
    (init.RandomUniform(), {"seed": None, "minval": -0.05, "maxval": 0.05}),
    (init.Constant(), {"value": 0.0}),
    (init.Orthogonal(), {"seed": None, "gain": 1.0}),
    (init.Zeros(), {}),
]


@pytest.mark.parametrize(("initializer", "config"), CONFIGS,
                         ids=[type(i).__name__ for i, _ in CONFIGS])
def test_initializer_config_is_keras(initializer, config):
    assert initializer.get_config() == config
    again = type(initializer).from_config(initializer.get_config())
    assert again.get_config() == config


SEEDED = ["GlorotUniform", "GlorotNormal", "HeNormal", "HeUniform", "LecunNormal",
          "LecunUniform", "RandomNormal", "RandomUniform", "TruncatedNormal", "Orthogonal",
          "VarianceScaling"]


@pytest.mark.parametrize("name", SEEDED)
def test_seeded_initializer_is_deterministic(name):
    a = getattr(init, name)(seed=5)((6, 4)).numpy()
    b = getattr(init, name)(seed=5)((6, 4)).numpy()
    c = getattr(init, name)(seed=6)((6, 4)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.float32 and a.shape == (6, 4)


@pytest.mark.parametrize(("name", "variance", "uniform"), [
    ("GlorotUniform", 2 / (200 + 300), True), ("GlorotNormal", 2 / (200 + 300), False),
    ("HeUniform", 2 / 200, True), ("HeNormal", 2 / 200, False),
    ("LecunUniform", 1 / 200, True), ("LecunNormal", 1 / 200, False)])
def test_variance_scaling_rules(name, variance, uniform):
    w = getattr(init, name)(seed=0)((200, 300)).numpy()
    assert abs(w.var() / variance - 1) < 0.05
    if uniform:
        assert np.abs(w).max() <= np.sqrt(3 * variance) + 1e-6
    else:  # truncated at two (untruncated) standard deviations
        assert np.abs(w).max() <= 2 * np.sqrt(variance) / 0.87962566 + 1e-6


def test_fixed_initializers_match_keras():
    np.testing.assert_array_equal(init.Identity(gain=2.0)((2, 3)).numpy(),
                                  [[2, 0, 0], [0, 2, 0]])
    np.testing.assert_array_equal(init.Constant(3.0)((2,)).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(init.Ones()((2,), sf.float64).numpy(), [1.0, 1.0])
    q = init.Orthogonal(gain=2.0, seed=3)((3, 5)).numpy()
    np.testing.assert_allclose(q @ q.T, 4 * np.eye(3), atol=1e-5)


def test_get_and_aliases():
    assert init.glorot_uniform is init.GlorotUniform
    assert isinstance(init.get("he_normal"), init.HeNormal)
    assert isinstance(init.get("GlorotUniform"), init.GlorotUniform)
    assert init.get(None) is None
    assert init.get({"class_name": "Constant", "config": {"value": 2.0}}).value == 2.0
    restored = init.deserialize(init.serialize(init.RandomNormal(stddev=0.5, seed=2)))
    assert restored.get_config() == {"seed": 2, "mean": 0.0, "stddev": 0.5}


def test_initializer_objects_and_classes_in_layers_and_fit():
    layer = sf.keras.layers.Dense(3, kernel_initializer=init.Constant(0.5),
                                  bias_initializer=init.Ones)
    np.testing.assert_allclose(layer(sf.ones((1, 2))).numpy(), [[2.0, 2.0, 2.0]])
    seeded = [sf.keras.layers.Dense(4, kernel_initializer=init.GlorotUniform(seed=7))
              for _ in range(2)]
    for dense in seeded:
        dense(sf.ones((1, 3)))
    np.testing.assert_array_equal(seeded[0].kernel.numpy(), seeded[1].kernel.numpy())
    model = sf.keras.Sequential([
        sf.keras.layers.Dense(4, kernel_initializer=init.HeNormal(seed=1), input_shape=(3,),
                              activation=act.relu),
        sf.keras.layers.Dense(1, kernel_initializer="zeros")])
    model.compile(sf.keras.optimizers.SGD(0.1), "mse")
    before = model.layers[1].kernel.numpy().copy()
    model.fit(np.ones((8, 3), np.float32), np.ones((8, 1), np.float32), epochs=2, verbose=0)
    assert not np.array_equal(before, model.layers[1].kernel.numpy())
