"""Keras' squared and categorical hinge and binary focal losses, `sf.losses.get`, the
polynomial, inverse-time and restarting cosine schedules, `sf.optimizers.get`, and the
`ReduceLROnPlateau` and `TerminateOnNaN` callbacks: against values observed from Keras
(hard-coded), eagerly, staged, and inside `fit`."""

import numpy as np
import pytest

import stageflow as sf

Y_TRUE = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)
Y_PRED = np.array([[0.6, 0.4], [0.3, 0.8]], np.float32)


@pytest.mark.parametrize(("name", "options", "expected"), [
    ("squared_hinge", {}, [1.46, 1.865]),
    ("categorical_hinge", {}, [1.2, 1.5]),
    ("binary_focal_crossentropy", {}, [0.32986468, 0.8099935]),
    ("binary_focal_crossentropy", {"apply_class_balancing": True, "alpha": 0.25, "gamma": 2.0,
                                   "from_logits": True, "label_smoothing": 0.1},
     [0.15784699, 0.19927491]),
])
def test_loss_functions_match_keras(name, options, expected):
    fn = getattr(sf.losses, name)
    np.testing.assert_allclose(fn(Y_TRUE, Y_PRED, **options).numpy(), expected, rtol=1e-5)
    staged = sf.function(lambda t, p: fn(t, p, **options))
    np.testing.assert_allclose(staged(sf.constant(Y_TRUE), sf.constant(Y_PRED)).numpy(),
                               expected, rtol=1e-5)


def test_loss_classes_match_keras_and_their_configs():
    assert float(sf.losses.SquaredHinge()(Y_TRUE, Y_PRED)) == pytest.approx(1.6625, 1e-6)
    assert float(sf.losses.CategoricalHinge()(Y_TRUE, Y_PRED)) == pytest.approx(1.35, 1e-6)
    focal = sf.losses.BinaryFocalCrossentropy()
    assert float(focal(Y_TRUE, Y_PRED)) == pytest.approx(0.5699291, 1e-5)
    assert focal.get_config() == {"name": "binary_focal_crossentropy",
                                  "reduction": "sum_over_batch_size",
                                  "apply_class_balancing": False, "alpha": 0.25, "gamma": 2.0,
                                  "from_logits": False, "label_smoothing": 0.0, "axis": -1}
    assert sf.losses.SquaredHinge().get_config() == {"name": "squared_hinge",
                                                     "reduction": "sum_over_batch_size"}
    again = sf.losses.BinaryFocalCrossentropy.from_config(focal.get_config())
    assert again.get_config() == focal.get_config()


def test_losses_get():
    assert sf.losses.get("mse") is sf.losses.mean_squared_error
    assert sf.losses.get("squared_hinge") is sf.losses.squared_hinge
    assert isinstance(sf.losses.get("BinaryFocalCrossentropy"),
                      sf.losses.BinaryFocalCrossentropy)
    assert sf.losses.get(None) is None and sf.losses.get(len) is len
    with pytest.raises(ValueError, match="unknown loss"):
        sf.losses.get("nope")


@pytest.mark.parametrize("loss", [sf.losses.SquaredHinge(), sf.losses.CategoricalHinge(),
                                  sf.losses.BinaryFocalCrossentropy(from_logits=True)])
def test_new_losses_train_in_fit(loss):
    model = sf.keras.Sequential([sf.keras.layers.Dense(2, kernel_initializer="zeros",
                                                       input_shape=(2,))])
    model.compile(sf.keras.optimizers.SGD(0.1), loss)
    x = np.array([[1.0, 0.0], [0.0, 1.0]] * 4, np.float32)
    history = model.fit(x, x, epochs=4, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


SCHEDULES = [  # (schedule, steps, Keras' rates)
    (sf.optimizers.schedules.PolynomialDecay(0.1, 100, 0.01, power=2.0), (0, 50, 100, 150),
     [0.1, 0.0325, 0.01, 0.01]),
    (sf.optimizers.schedules.PolynomialDecay(0.1, 100, 0.01, cycle=True),
     (0, 50, 100, 150, 250), [0.1, 0.055, 0.01, 0.0325, 0.025]),
    (sf.optimizers.schedules.InverseTimeDecay(0.1, 10, 0.5), (0, 5, 10, 25),
     [0.1, 0.08, 0.066667, 0.044444]),
    (sf.optimizers.schedules.InverseTimeDecay(0.1, 10, 0.5, staircase=True), (0, 5, 10, 25),
     [0.1, 0.1, 0.066667, 0.05]),
    (sf.optimizers.schedules.CosineDecayRestarts(0.1, 10), (0, 5, 10, 15, 29, 30, 40, 75),
     [0.1, 0.05, 0.1, 0.085355, 0.000616, 0.1, 0.085355, 0.099039]),
    (sf.optimizers.schedules.CosineDecayRestarts(0.1, 10, t_mul=1.0, m_mul=0.5, alpha=0.1),
     (0, 5, 10, 15, 20, 25), [0.1, 0.055, 0.055, 0.0325, 0.0325, 0.02125]),
]


@pytest.mark.parametrize(("schedule", "steps", "expected"), SCHEDULES,
                         ids=[f"{type(s).__name__}{i}" for i, (s, _, _) in enumerate(SCHEDULES)])
def test_schedules_match_keras_eager_and_staged(schedule, steps, expected):
    np.testing.assert_allclose([float(schedule(s)) for s in steps], expected, atol=1e-6)
    staged = sf.function(lambda step: schedule(step))
    np.testing.assert_allclose([float(staged(sf.constant(s, sf.int64))) for s in steps],
                               expected, atol=1e-6)


def test_schedule_configs_are_keras():
    schedules = sf.optimizers.schedules
    assert schedules.PolynomialDecay(0.1, 100).get_config() == {
        "initial_learning_rate": 0.1, "decay_steps": 100, "end_learning_rate": 0.0001,
        "power": 1.0, "cycle": False, "name": "PolynomialDecay"}
    assert schedules.CosineDecayRestarts(0.1, 10).get_config() == {
        "initial_learning_rate": 0.1, "first_decay_steps": 10, "t_mul": 2.0, "m_mul": 1.0,
        "alpha": 0.0, "name": "SGDRDecay"}
    config = schedules.InverseTimeDecay(0.1, 10, 0.5).get_config()
    assert schedules.InverseTimeDecay.from_config(config).get_config() == config


def test_schedule_drives_sgd_in_fit():
    schedule = sf.optimizers.schedules.InverseTimeDecay(1.0, 1, 1.0)  # 1 / (1 + step)
    model = sf.keras.Sequential([sf.keras.layers.Dense(1, kernel_initializer="zeros",
                                                       use_bias=False, input_shape=(1,))])
    model.compile(sf.keras.optimizers.SGD(schedule), "mae")
    model.fit(np.ones((3, 1), np.float32), 10 * np.ones((3, 1), np.float32), batch_size=1,
              epochs=1, shuffle=False, verbose=0)
    # MAE's gradient is -1 at each step: w = 1 + 1/2 + 1/3
    np.testing.assert_allclose(model.layers[0].kernel.numpy(), [[1 + 1 / 2 + 1 / 3]],
                               rtol=1e-5)


def test_optimizers_get():
    adam = sf.optimizers.get("adam")
    assert isinstance(adam, sf.optimizers.Adam)
    assert float(adam.learning_rate) == pytest.approx(0.001)
    assert isinstance(sf.optimizers.get("RMSprop"), sf.optimizers.RMSprop)
    sgd = sf.optimizers.get({"class_name": "SGD", "config": {"learning_rate": 0.5}})
    assert float(sgd.learning_rate) == 0.5 and sf.optimizers.get(sgd) is sgd
    with pytest.raises(ValueError, match="unknown optimizer"):
        sf.optimizers.get("nope")


def _fit(callback, x, epochs, lr=0.1):
    model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(1,))])
    model.compile(sf.keras.optimizers.SGD(lr), "mse")
    history = model.fit(x, np.ones((len(x), 1), np.float32), batch_size=1, epochs=epochs,
                        shuffle=False, verbose=0, callbacks=[callback])
    return model, history


def test_reduce_lr_on_plateau_follows_keras_rule():
    # Nothing improves by 100: after each `patience` epochs the rate is halved, then
    # `cooldown` epochs pass without counting.
    reduce = sf.keras.callbacks.ReduceLROnPlateau("loss", factor=0.5, patience=2, cooldown=1,
                                                  min_delta=100.0, min_lr=0.02)
    model, history = _fit(reduce, np.ones((2, 1), np.float32), epochs=8)
    rates = history.history["learning_rate"]
    # Keras' rates (each epoch's, before its reduction), its cooldown ending in the epoch
    # after a reduction, the last one stopped at min_lr
    np.testing.assert_allclose(rates, [0.1, 0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.02],
                               rtol=1e-6)
    assert float(model.optimizer.learning_rate) == pytest.approx(0.02)
    with pytest.raises(ValueError, match="factor"):
        sf.keras.callbacks.ReduceLROnPlateau(factor=1.0)


def test_reduce_lr_on_plateau_keeps_rate_while_improving():
    reduce = sf.keras.callbacks.ReduceLROnPlateau("loss", patience=1, min_delta=0.0)
    _, history = _fit(reduce, np.ones((4, 1), np.float32), epochs=3, lr=0.01)
    np.testing.assert_allclose(history.history["learning_rate"], [0.01] * 3, rtol=1e-6)


def test_terminate_on_nan_stops_at_the_bad_batch(capsys):
    x = np.array([[1.0], [1.0], [np.nan], [1.0]], np.float32)
    seen = []
    counter = sf.keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(batch))
    model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(1,))])
    model.compile("sgd", "mse")
    history = model.fit(x, np.ones((4, 1), np.float32), batch_size=1, epochs=3,
                        shuffle=False, verbose=0,
                        callbacks=[sf.keras.callbacks.TerminateOnNaN(), counter])
    assert seen == [0, 1, 2] and len(history.epoch) == 1
    assert "Batch 2: Invalid loss, terminating training" in capsys.readouterr().out
