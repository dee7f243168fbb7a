"""`Model.compile/fit/evaluate/predict/summary` (Keras' loop) against the loop written by
hand, staged and eagerly, with callbacks, validation and Keras' names."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

keras = sf.keras


def data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 1.0], np.float32) > 0).astype(np.int32)
    return x, y


def model_and_weights():
    model = keras.Sequential([keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    model(sf.zeros((1, 4)))
    return model, [v.numpy() for v in model.variables]


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_fit_takes_the_steps_a_loop_written_by_hand_takes(run_eagerly):
    x, y = data()
    model, initial = model_and_weights()
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], run_eagerly=run_eagerly)
    history = model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)

    by_hand, _ = model_and_weights()
    for variable, value in zip(by_hand.variables, initial, strict=True):
        variable.assign(value)
    optimizer = sf.optimizers.SGD(0.1)
    loss_fn = sf.losses.SparseCategoricalCrossentropy(from_logits=True)
    for _ in range(2):
        for start in range(0, len(x), 32):
            xs, ys = sf.constant(x[start:start + 32]), sf.constant(y[start:start + 32])
            with sf.GradientTape() as tape:
                loss = loss_fn(ys, by_hand(xs, training=True))
            grads = tape.gradient(loss, by_hand.trainable_variables)
            optimizer.apply_gradients(zip(grads, by_hand.trainable_variables, strict=True))
    for got, want in zip(model.variables, by_hand.variables, strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert list(history.history) == ["loss", "accuracy"] and len(history.epoch) == 2
    logits = model.predict(x, batch_size=40, verbose=0)
    np.testing.assert_allclose(logits, by_hand(sf.constant(x)).numpy(), rtol=1e-5, atol=1e-6)
    loss, accuracy = model.evaluate(x, y, verbose=0)
    assert accuracy == pytest.approx(np.mean(np.argmax(logits, 1) == y))
    assert loss == pytest.approx(float(loss_fn(y, logits)), rel=1e-5)


def test_validation_early_stopping_schedules_and_datasets():
    x, y = data(160)
    model, _ = model_and_weights()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["acc"])
    rates, seen = [], []
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=0, min_delta=10.0)
    history = model.fit(
        sf.data.Dataset.from_tensor_slices((x, y)).batch(40), epochs=5, verbose=0,
        validation_data=(x[:40], y[:40]), callbacks=[
            stopper, keras.callbacks.LearningRateScheduler(lambda epoch, rate: 0.01 / (1 + epoch)),
            keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(logs),
                                           on_epoch_begin=lambda epoch, logs=None: rates.append(
                                               float(model.optimizer.learning_rate)))])
    assert len(history.epoch) == 2 and stopper.stopped_epoch == 1  # no 10.0 improvement
    assert rates == pytest.approx([0.01, 0.005])
    assert set(seen[0]) == {"loss", "accuracy", "val_loss", "val_accuracy"}


def test_summary_lists_layers_shapes_and_parameters():
    model, _ = model_and_weights()
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "dense" in text and "(1, 8)" in text and "(1, 2)" in text  # its first call's
    assert "Total params: 58" in text and "Trainable params: 58" in text


def test_summary_shapes_are_those_the_model_was_built_for_with_the_bytes():
    """Keras 3's rule: a declared input's shapes (batch None), else the first call's, batch
    included; the totals with their bytes (float64 parameters take 8 each)."""
    keras.backend.clear_session()
    called = keras.Sequential([keras.layers.Dense(4), keras.layers.Dense(2)])
    called(sf.zeros((5, 3)))
    declared = keras.Sequential([keras.layers.Conv2D(1, 1, input_shape=(None, None, 3))])
    declared(sf.zeros((1, 2, 3, 3)))

    class Block(keras.Model):
        def __init__(self):
            super().__init__(name="")
            self.first = keras.layers.Dense(4)
            self.second = keras.layers.Dense(2, dtype="float64")

        def call(self, x):
            return self.second(self.first(x))

    block = Block()
    block(sf.zeros((7, 3)))
    texts = []
    for model in (called, declared, block):
        lines = []
        model.summary(print_fn=lines.append)
        texts.append("\n".join(lines))
    assert "(5, 4)" in texts[0] and "(5, 2)" in texts[0]
    assert "Total params: 26 (104.00 B)" in texts[0]
    assert "(None, None, None, 1)" in texts[1]
    assert 'Model: "block"' in texts[2] and "(7, 2)" in texts[2]
    assert "Total params: 26 (144.00 B)" in texts[2]
    assert "Non-trainable params: 0 (0.00 B)" in texts[2]
    assert block.layers == [block.first, block.second]


def test_misuse_is_named():
    model, _ = model_and_weights()
    x, y = data()
    with pytest.raises(RuntimeError, match="call compile"):
        model.fit(x, y, verbose=0)
    with pytest.raises(ValueError, match="unknown optimizer 'adamx'"):
        model.compile(optimizer="adamx", loss="mse")
    with pytest.raises(ValueError, match="'accuracy' follows the loss"):
        model.compile(loss="mse", metrics=["accuracy"])
    with pytest.raises(ValueError, match="summary: the model has not been called"):
        keras.Sequential([keras.layers.Dense(2)]).summary()
    model.compile(loss="mse")
    with pytest.raises(ValueError, match="x has 100 examples, y 99"):
        model.fit(x, y[:99], verbose=0)
