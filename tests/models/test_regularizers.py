"""Keras' regularizers: their penalties against NumPy, layers' `losses`, and `fit`
minimising the regularized loss (as a hand-written step does, eagerly and staged, and
over the replicas of a strategy)."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

R = sf.keras.regularizers


@pytest.mark.parametrize(("regularizer", "expected"), [
    (R.L1(0.1), lambda x: 0.1 * np.abs(x).sum()),
    (R.L2(0.2), lambda x: 0.2 * (x * x).sum()),
    (R.L1L2(l1=0.3, l2=0.4), lambda x: 0.3 * np.abs(x).sum() + 0.4 * (x * x).sum()),
    (R.get("l2"), lambda x: 0.01 * (x * x).sum()),
    (R.l1_l2(), lambda x: 0.01 * np.abs(x).sum() + 0.01 * (x * x).sum()),
])
def test_penalties_match_numpy(regularizer, expected):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(regularizer(sf.constant(x)), expected(x), rtol=1e-6)


def test_layers_collect_weight_and_activity_penalties_and_refuse_what_they_lack():
    dense = sf.keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="ones",
                                  kernel_regularizer="l2", bias_regularizer=R.L1(0.5),
                                  activity_regularizer=R.L2(0.1))
    conv = sf.keras.layers.Conv2D(1, 1, kernel_initializer="ones", kernel_regularizer="l1")
    model = sf.keras.Sequential([dense])
    outputs = model(sf.ones((2, 3)))
    assert [float(p) for p in dense.losses] == pytest.approx(
        [0.01 * 6, 0.5 * 2, 0.1 * float(sf.reduce_sum(outputs * outputs)) / 2])
    assert len(model.losses) == 3
    conv(sf.ones((1, 2, 2, 1)))
    assert [float(p) for p in conv.losses] == pytest.approx([0.01])
    with pytest.raises(TypeError, match="Flatten: has no kernel"):
        sf.keras.layers.Flatten(kernel_regularizer="l2")
    with pytest.raises(ValueError, match="unknown regularizer 'l3'"):
        sf.keras.layers.Dense(2, kernel_regularizer="l3")


def _data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 5)).astype(np.float32)
    return x, (x @ rng.standard_normal((5, 2))).astype(np.float32)


def _model():
    sf.random.set_seed(2)
    return sf.keras.Sequential([
        sf.keras.layers.Dense(4, activation="tanh", kernel_regularizer=R.L2(0.05),
                              activity_regularizer=R.L1(0.01)),
        sf.keras.layers.Dense(2, bias_regularizer=R.L1(0.02))])


@pytest.mark.parametrize("run_eagerly", [False, True], ids=["staged", "eager"])
def test_fit_minimises_the_regularized_loss_as_a_hand_written_step(run_eagerly):
    x, y = _data()
    reference = _model()
    reference.build((None, 5))
    optimizer = sf.optimizers.SGD(0.1)
    losses = []
    for _ in range(3):
        for start in range(0, 32, 16):
            with sf.GradientTape() as tape:
                data_loss = sf.reduce_mean((reference(x[start:start + 16]) - y[start:start + 16])
                                           ** 2)
                loss = data_loss + sf.add_n(reference.losses)
            optimizer.apply_gradients(zip(tape.gradient(loss, reference.trainable_variables),
                                          reference.trainable_variables, strict=True))
            losses.append(float(loss))

    model = _model()
    model.compile(optimizer=sf.optimizers.SGD(0.1), loss="mse", run_eagerly=run_eagerly)
    history = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    for got, want in zip(model.trainable_variables, reference.trainable_variables,
                         strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(history.history["loss"],
                               [np.mean(losses[i:i + 2]) for i in (0, 2, 4)], rtol=1e-5)


def test_fit_counts_the_penalty_once_over_the_replicas():
    x, y = _data()

    def fitted(strategy):
        with strategy.scope():
            model = _model()
            model.compile(optimizer=sf.optimizers.SGD(0.1), loss="mse")
        history = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        return [v.numpy() for v in model.trainable_variables], history.history["loss"]

    want, want_loss = fitted(sf.distribute.get_strategy())
    got, loss = fitted(sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"]))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
