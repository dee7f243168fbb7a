"""Keras 3's default names (`stageflow.models.naming`): the layers, models and inputs a
program makes without ``name=`` are named as TensorFlow 2.16+ (Keras 3) names them, and
``sf.keras.backend.clear_session()`` starts the counters again."""

from __future__ import annotations

import stageflow as sf
from stageflow.models.naming import to_snake_case

keras = sf.keras
layers = sf.keras.layers


def test_layers_are_named_by_keras_snake_case_of_their_class():
    keras.backend.clear_session()
    made = [layers.Dense(2), layers.Dense(3), layers.Conv2D(2, 3), layers.Conv2D(2, 3),
            layers.BatchNormalization(), layers.MaxPooling2D(), layers.MaxPool2D(),
            layers.GlobalAveragePooling2D(), layers.Conv2DTranspose(2, 3), layers.Conv1D(2, 2),
            layers.DepthwiseConv2D(3), layers.ReLU(), layers.LeakyReLU(), layers.LSTM(2),
            layers.SimpleRNN(2), layers.MultiHeadAttention(2, 2), layers.UpSampling2D(),
            layers.LayerNormalization(), layers.Dropout(0.5), layers.Dense(1)]
    assert [layer.name for layer in made] == [
        "dense", "dense_1", "conv2d", "conv2d_1", "batch_normalization", "max_pooling2d",
        "max_pooling2d_1", "global_average_pooling2d", "conv2d_transpose", "conv1d",
        "depthwise_conv2d", "re_lu", "leaky_re_lu", "lstm", "simple_rnn",
        "multi_head_attention", "up_sampling2d", "layer_normalization", "dropout", "dense_2"]


def test_a_given_name_is_kept_and_takes_no_number():
    keras.backend.clear_session()
    assert layers.Dense(2, name="head").name == "head"
    assert layers.Dense(2).name == "dense"


def test_models_are_named_sequential_functional_and_by_their_class():
    keras.backend.clear_session()
    assert [keras.Sequential().name, keras.Sequential().name] == ["sequential", "sequential_1"]
    x = keras.Input((3,))
    assert x.name == "input_layer"  # Keras 3's InputLayer, the summary's first row
    y = layers.Dense(2)(x)
    assert y.name == "keras_tensor"
    assert [keras.Model(x, y).name, keras.Model(x, y).name] == ["functional", "functional_1"]

    class MyModel(keras.Model):
        def call(self, inputs):
            return inputs

    assert MyModel().name == "my_model" and keras.Model(x, y, name="net").name == "net"


def test_the_summary_prints_keras_names():
    keras.backend.clear_session()
    x = keras.Input((3,))
    hidden = layers.Dense(4)(x)
    model = keras.Model(x, layers.Dense(2)(hidden))
    lines: list[str] = []
    model.summary(print_fn=lines.append)
    assert lines[0] == 'Model: "functional"'
    rows = [line.split()[:2] for line in lines
            if "(" in line and "Model" not in line and "params" not in line]
    assert rows[1:] == [["input_layer", "(InputLayer)"], ["dense", "(Dense)"],
                        ["dense_1", "(Dense)"]]


def test_variables_are_named_by_their_keras_path():
    """Keras 3's ``variable.path``: the layer's name, then the weight's."""
    keras.backend.clear_session()
    model = keras.Sequential([layers.Dense(2), layers.BatchNormalization()])
    model.build((None, 3))
    assert [v.name for v in model.variables] == [
        "dense/kernel", "dense/bias", "batch_normalization/gamma", "batch_normalization/beta",
        "batch_normalization/moving_mean", "batch_normalization/moving_variance"]


def test_clear_session_starts_every_counter_again():
    keras.backend.clear_session()
    first = [layers.Dense(1).name, layers.Conv2D(1, 1).name, keras.Sequential().name]
    assert [layers.Dense(1).name, keras.Sequential().name] == ["dense_1", "sequential_1"]
    keras.backend.clear_session(free_memory=False)
    assert [layers.Dense(1).name, layers.Conv2D(1, 1).name, keras.Sequential().name] == first
    assert "clear_session" in dir(keras.backend)


def test_snake_case_keeps_digits_with_their_word():
    """Keras' rule, not `tf.Module`'s (``Conv2D`` is ``conv2d`` here, ``conv2_d`` there)."""
    assert to_snake_case("Conv2D") == "conv2d" and to_snake_case("GRU") == "gru"
    assert to_snake_case("PReLU") == "p_re_lu" and to_snake_case("MyFancyNet") == "my_fancy_net"
    assert type("Conv2D", (sf.Module,), {})().name == "conv2_d"
