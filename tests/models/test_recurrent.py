"""SimpleRNN, LSTM and GRU: Keras' equations (checked against NumPy with the layers' own
weights), eagerly and staged as one compiled loop whose IR holds the cell once, with
gradients through the loop matching finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def simple_rnn(x, layer):
    w, u, b = (v.numpy() for v in (layer.kernel, layer.recurrent_kernel, layer.bias))
    h, outputs = np.zeros((x.shape[0], layer.units)), []
    for t in range(x.shape[1]):
        h = np.tanh(x[:, t] @ w + h @ u + b)
        outputs.append(h)
    return np.stack(outputs, 1), [h]


def lstm(x, layer):
    w, u, b = (v.numpy() for v in (layer.kernel, layer.recurrent_kernel, layer.bias))
    n = layer.units
    h = c = np.zeros((x.shape[0], n))
    outputs = []
    for t in range(x.shape[1]):
        z = x[:, t] @ w + h @ u + b
        i, f, o = sigmoid(z[:, :n]), sigmoid(z[:, n:2 * n]), sigmoid(z[:, 3 * n:])
        c = f * c + i * np.tanh(z[:, 2 * n:3 * n])
        h = o * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs, 1), [h, c]


def gru(x, layer):
    w, u, b = (v.numpy() for v in (layer.kernel, layer.recurrent_kernel, layer.bias))
    n = layer.units
    h, outputs = np.zeros((x.shape[0], n)), []
    for t in range(x.shape[1]):
        xs, hs = x[:, t] @ w + b[0], h @ u + b[1]
        z, r = sigmoid(xs[:, :n] + hs[:, :n]), sigmoid(xs[:, n:2 * n] + hs[:, n:2 * n])
        h = z * h + (1 - z) * np.tanh(xs[:, 2 * n:] + r * hs[:, 2 * n:])
        outputs.append(h)
    return np.stack(outputs, 1), [h]


LAYERS = {"simple_rnn": (sf.layers.SimpleRNN, simple_rnn), "lstm": (sf.layers.LSTM, lstm),
          "gru": (sf.layers.GRU, gru)}


@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("staged", [False, True])
def test_layers_match_numpy(kind, staged):
    make, reference = LAYERS[kind]
    layer = make(5, return_sequences=True, return_state=True)
    x = np.random.default_rng(0).normal(size=(3, 6, 4))
    call = sf.function(lambda v: layer(v)) if staged else layer
    sequence, *state = call(sf.constant(x))
    want_sequence, want_state = reference(x, layer)
    np.testing.assert_allclose(sequence.numpy(), want_sequence, rtol=1e-10, atol=1e-12)
    for got, want in zip(state, want_state, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    if kind == "lstm":
        np.testing.assert_array_equal(layer.bias.numpy()[5:10], 1.0)  # unit_forget_bias


def test_last_output_and_go_backwards():
    layer = sf.layers.GRU(3)
    x = np.random.default_rng(1).normal(size=(2, 4, 2))
    last = layer(sf.constant(x))
    np.testing.assert_allclose(last.numpy(), gru(x, layer)[1][0], rtol=1e-10)
    backwards = sf.layers.GRU(3, go_backwards=True)
    backwards(sf.constant(x))
    for name in ("kernel", "recurrent_kernel", "bias"):
        getattr(backwards, name).assign(getattr(layer, name))
    np.testing.assert_allclose(backwards(sf.constant(x)).numpy(),
                               gru(x[:, ::-1], layer)[1][0], rtol=1e-10)


def test_lstm_over_100_steps_is_one_loop_and_its_gradient_matches():
    layer = sf.layers.LSTM(3)
    x = sf.constant(np.random.default_rng(2).normal(size=(2, 100, 2)) * 0.5)

    @sf.function
    def loss(x):
        return sf.reduce_sum(layer(x))

    value = loss(x)
    concrete = loss.get_concrete_function(x)
    text = concrete.ir()
    assert text.count("sf.while") == 1 and text.count("sf.matmul") == 2
    assert concrete.stats()["steps_reasons"] == {}
    assert float(value) == pytest.approx(float(np.sum(lstm(x.numpy(), layer)[1][0])))
    with sf.GradientTape() as tape:
        total = loss(x)
    grads = tape.gradient(total, [layer.kernel, layer.recurrent_kernel])
    for variable, grad in zip([layer.kernel, layer.recurrent_kernel], grads, strict=True):
        start = variable.numpy().copy()
        numeric = np.zeros_like(start)
        for index in np.ndindex(start.shape):
            values = []
            for sign in (1, -1):
                moved = start.copy()
                moved[index] += sign * 1e-6
                variable.assign(moved)
                values.append(float(loss(x)))
            numeric[index] = (values[0] - values[1]) / 2e-6
        variable.assign(start)
        np.testing.assert_allclose(grad.numpy(), numeric, rtol=1e-5, atol=1e-7)


def test_training_a_staged_lstm_reduces_its_loss():
    rng = np.random.default_rng(3)
    x = sf.constant(rng.normal(size=(8, 10, 2)).astype(np.float32))
    y = sf.constant(np.cumsum(x.numpy()[:, :, 0], axis=1)[:, -1:] * 0.1)
    model = sf.layers.Sequential([sf.layers.LSTM(8), sf.layers.Dense(1)])
    optimizer = sf.optimizers.Adam(0.05)

    @sf.function
    def step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(model(x) - y))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables, strict=True))
        return loss

    first = float(step(x, y))
    for _ in range(30):
        last = float(step(x, y))
    assert last < 0.5 * first
