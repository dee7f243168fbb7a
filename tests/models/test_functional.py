"""The functional API: `sf.keras.Input`, layers called on symbolic values, and
`sf.keras.Model(inputs, outputs)`, checked against the same layers applied by hand and
against NumPy; Keras' shape keywords on a `Sequential`'s first layer."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import stageflow as sf

keras = sf.keras
layers = sf.keras.layers


def test_a_chain_of_layers_computes_what_the_layers_compute_by_hand():
    x = keras.Input((3,), name="x")
    dense1, dense2 = layers.Dense(4, activation="relu"), layers.Dense(2)
    y = dense2(dense1(x))
    assert x.shape == (None, 3) and y.shape == (None, 2) and y.dtype == np.float32
    model = keras.Model(x, y)
    assert model.variables == [*dense1.variables, *dense2.variables]

    data = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    w1, b1, w2, b2 = (v.numpy() for v in model.variables)
    want = np.maximum(data @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(model(sf.constant(data)).numpy(), want, rtol=1e-5, atol=1e-6)
    staged = sf.function(lambda t: model(t))
    np.testing.assert_allclose(staged(sf.constant(data)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_several_inputs_and_outputs_a_shared_layer_and_operators():
    a, b = keras.Input((2,), name="a"), keras.Input((3,), name="b")
    shared = layers.Dense(2, use_bias=False)
    joined = layers.Concatenate()([shared(a), b])          # (None, 5)
    total = joined[:, :2] + shared(a) * 2.0 - 1.0
    model = keras.Model(inputs={"a": a, "b": b},
                        outputs={"joined": joined, "total": total})
    assert [v.shape for v in model.variables] == [(2, 2)]  # the shared layer once

    rng = np.random.default_rng(1)
    xa, xb = rng.standard_normal((4, 2), np.float32), rng.standard_normal((4, 3), np.float32)
    out = model({"a": sf.constant(xa), "b": sf.constant(xb)})
    kernel = shared.variables[0].numpy()
    np.testing.assert_allclose(out["joined"].numpy(), np.concatenate([xa @ kernel, xb], 1),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["total"].numpy(), 3 * (xa @ kernel) - 1, rtol=1e-5,
                               atol=1e-6)


def test_a_model_is_a_layer_of_another_and_trains_through_fit():
    inner_in = keras.Input((4,))
    inner = keras.Model(inner_in, layers.Dense(3, activation="tanh")(inner_in), name="inner")
    x = keras.Input((4,))
    logits = layers.Dense(2)(layers.Dropout(0.1)(inner(x)))
    model = keras.Model(x, logits)
    assert len(model.trainable_variables) == 4

    rng = np.random.default_rng(2)
    data = rng.standard_normal((64, 4)).astype(np.float32)
    labels = (data[:, 0] > 0).astype(np.int32)
    model.compile(keras.optimizers.Adam(0.05),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(data, labels, batch_size=16, epochs=8, verbose=0, seed=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0]
    assert model.evaluate(data, labels, verbose=0)[1] > 0.9


def test_staged_and_eager_fit_of_a_functional_model_agree():
    def build():
        sf.random.set_seed(3)
        x = keras.Input((5,))
        return keras.Model(x, layers.Dense(1)(layers.Dense(8, activation="relu")(x)))

    rng = np.random.default_rng(3)
    data = rng.standard_normal((40, 5)).astype(np.float32)
    target = data.sum(1, keepdims=True)
    histories = []
    for run_eagerly in (False, True):
        model = build()
        model.compile("sgd", "mse", run_eagerly=run_eagerly)
        histories.append(model.fit(data, target, batch_size=8, epochs=3, verbose=0,
                                   seed=4).history["loss"])
    np.testing.assert_allclose(histories[0], histories[1], rtol=1e-5)


def test_summary_of_a_functional_model_lists_inputs_calls_and_parameters():
    x = keras.Input((6,), name="pixels")
    h = layers.Dense(4, name="hidden")(x)
    model = keras.Model(x, layers.Dense(2, name="out")(h) + h[:, :2])
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "pixels (InputLayer)" in text and "(None, 6)" in text
    assert "hidden (Dense)" in text and "28" in text and "out (Dense)" in text
    assert "Total params: 38" in text


def test_sequential_builds_from_an_input_or_a_first_layers_input_shape():
    for first in ([keras.Input((3,))], []):
        dense = (layers.Dense(4) if first else layers.Dense(4, input_shape=(3,)))
        model = keras.Sequential([*first, dense, layers.Dense(1)])
        assert dense.built and [v.shape for v in model.variables] == [(3, 4), (4,), (4, 1),
                                                                      (1,)]
        lines = []
        model.summary(print_fn=lines.append)
        assert "Total params: 21" in "\n".join(lines)
    assert layers.Dense(2, input_dim=7).batch_input_shape == (None, 7)
    assert layers.Dense(2, batch_input_shape=(8, 7)).batch_input_shape == (8, 7)
    with pytest.raises(ValueError, match="Input must come first"):
        keras.Sequential([layers.Dense(2), keras.Input((3,))])


def _image_classifier() -> sf.keras.Model:
    """The tutorials' fully convolutional classifier: images of any size."""
    images = keras.Input(shape=(None, None, 3))
    x = layers.Conv2D(8, 3, activation="relu")(images)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(4, 3, strides=2, padding="same")(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(images, layers.Dense(2)(x))


def test_an_input_with_unknown_spatial_dims_feeds_convolutions_and_pooling():
    model = _image_classifier()
    assert model.inputs.shape == (None, None, None, 3)
    conv, conv2, dense = (layer for layer in model.layers if layer.variables)
    assert [v.shape for v in conv.variables] == [(3, 3, 3, 8), (8,)]
    assert [v.shape for v in dense.variables] == [(4, 2), (2,)]
    assert model.outputs.shape == (None, 2)
    rng = np.random.default_rng(0)
    for height, width in ((20, 30), (11, 9)):
        images = rng.standard_normal((2, height, width, 3)).astype(np.float32)
        # the same layers applied by hand, on an image of this size
        hidden = conv2(layers.MaxPooling2D()(conv(sf.constant(images))))
        want = dense(sf.reduce_mean(hidden, axis=(1, 2)))
        got = model(sf.constant(images))
        assert got.shape == (2, 2)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_the_summary_shows_the_unknown_dims_as_keras_does():
    lines: list[str] = []
    _image_classifier().summary(print_fn=lines.append)
    text = "\n".join(lines)
    for shape in ("(None, None, None, 3)", "(None, None, None, 8)", "(None, None, None, 4)",
                  "(None, 4)", "(None, 2)"):
        assert shape in text
    sequential = keras.Sequential([keras.Input((None, None, 3)), layers.Conv2D(4, 3),
                                   layers.GlobalAveragePooling2D(), layers.Dense(2)])
    lines.clear()
    sequential.summary(print_fn=lines.append)
    assert "(None, None, None, 4)" in "\n".join(lines) and "Total params: 122 (488.00 B)" in lines


def test_a_model_on_images_of_any_size_fits():
    model = _image_classifier()
    model.compile(keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(1)
    images = rng.standard_normal((8, 16, 16, 3)).astype(np.float32)
    labels = np.arange(8) % 2
    losses = model.fit(images, labels, epochs=4, batch_size=4, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert model.predict(images[:, :12, :10], verbose=0).shape == (8, 2)


def test_a_dim_computed_from_an_unknown_one_stays_unknown():
    """A stride or pooling window maps the two example sizes to different sizes, so no
    dim derived from an unknown one looks known."""
    x = keras.Input((None, 5))
    assert layers.MaxPooling1D(4)(x).shape == (None, None, 5)
    assert layers.Conv1D(3, 5, strides=8, padding="same")(x).shape == (None, None, 3)
    assert layers.Flatten()(x).shape == (None, None)
    assert layers.GlobalMaxPooling1D()(x).shape == (None, 5)
    assert layers.Dense(2)(x).shape == (None, None, 2)


def test_mistakes_are_named():
    with pytest.raises(ValueError, match=r"Dense 'd' on symbolic inputs of shapes \(\?, \?\), "
                                         r"which needs a dim the Input leaves unknown"):
        layers.Dense(2, name="d")(keras.Input((None,)))  # Keras: the last dim must be defined
    a, b = keras.Input((2,)), keras.Input((2,), name="other")
    with pytest.raises(ValueError, match="other"):
        keras.Model(a, layers.Add()([a, b]))
    with pytest.raises(TypeError, match="sf.keras.Input values"):
        keras.Model(a, sf.ones((1, 2)))
    with pytest.raises(ValueError, match="inputs and outputs"):
        keras.Model(a)
    with pytest.raises(ValueError, match=r"Concatenate 'cat' on symbolic inputs of shapes "
                                         r"\(\?, 2\), \(\?, 2, 3\)"):
        layers.Concatenate(name="cat")([keras.Input((2,)), keras.Input((2, 3))])
    with pytest.raises(TypeError, match="no truth value"):
        bool(keras.Input((2,)))
    with pytest.raises(NotImplementedError, match="define `call`"):
        keras.Model()(sf.ones((1, 2)))
    model = keras.Model(a, layers.Dense(1)(a))
    with pytest.raises(ValueError, match="expected 1 input"):
        model([sf.ones((1, 2)), sf.ones((1, 2))])


def test_save_load_model_and_weights(tmp_path):
    x = keras.Input((4,))
    model = keras.Model(x, layers.Dense(3)(layers.Dense(5, activation="relu")(x)))
    data = sf.constant(np.random.default_rng(4).standard_normal((6, 4)).astype(np.float32))
    want = model(data).numpy()

    model.save(tmp_path / "saved")
    loaded = keras.models.load_model(tmp_path / "saved")
    np.testing.assert_array_equal(loaded(data).numpy(), want)
    np.testing.assert_array_equal(sf.saved_model.load(tmp_path / "saved")(data).numpy(), want)
    with pytest.raises(FileExistsError, match="overwrite=False"):
        model.save(tmp_path / "saved", overwrite=False)

    path = model.save_weights(tmp_path / "weights")
    twin = keras.Model(x, layers.Dense(3)(layers.Dense(5, activation="relu")(x)))
    twin.load_weights(path).assert_consumed()
    np.testing.assert_array_equal(twin(data).numpy(), want)
    with pytest.raises(ValueError, match="has not been called"):
        keras.Sequential([layers.Dense(2)]).save(tmp_path / "unbuilt")


@pytest.mark.parametrize("name, variance", [("glorot_normal", 2 / (200 + 300)),
                                            ("he_normal", 2 / 200), ("lecun_normal", 1 / 200),
                                            ("random_normal", 0.05 ** 2),
                                            ("lecun_uniform", 1 / 200)])
def test_keras_initializer_names_draw_with_keras_variances(name, variance):
    sf.random.set_seed(0)
    kernel = layers.Dense(300, kernel_initializer=name)
    kernel(sf.ones((1, 200)))
    values = kernel.variables[0].numpy()
    assert values.var() == pytest.approx(variance, rel=0.05)
    if name.endswith("_normal") and name != "random_normal":  # truncated at two stddevs
        assert np.abs(values).max() <= 2 * np.sqrt(variance) / 0.8796 + 1e-6


def test_a_function_initializer_gets_the_dtype_by_keyword_as_keras_passes_it():
    sf.random.set_seed(1)
    dense = layers.Dense(4, kernel_initializer=sf.random.normal)
    dense(sf.ones((2, 3), sf.float64))
    assert dense.variables[0].dtype == np.float64 and dense.variables[0].shape == (3, 4)
    assert sf.keras.losses.MSE is sf.keras.losses.mean_squared_error


def test_predict_of_an_uncompiled_model_stages_once():
    x = keras.Input((3,))
    model = keras.Model(x, layers.Dense(2)(x))
    data = np.ones((10, 3), np.float32)
    first = model.predict(data, batch_size=5, verbose=0)
    again = model.predict(data, batch_size=5, verbose=0)
    np.testing.assert_array_equal(first, again)
    assert model._steps["predict"].tracing_count == 1


def test_tensorflows_keras_imports_with_the_module_name_swapped():
    code = ("from stageflow.keras.layers import Dense, Flatten\n"
            "from stageflow.keras.optimizers import Adam\n"
            "from stageflow.keras import Model\n"
            "import stageflow as sf\n"
            "model = sf.keras.models.Sequential([Flatten(input_shape=(2, 3)), Dense(4)])\n"
            "print(model.layers[0].batch_input_shape, Adam is sf.optimizers.Adam,\n"
            "      Model is sf.keras.Model)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.split() == ["(None,", "2,", "3)", "True", "True"], result.stderr
