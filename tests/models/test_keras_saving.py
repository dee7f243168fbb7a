"""`sf.keras.saving`: the registry of serializable classes, layer configs, and ``.keras``
archives loaded back as models of their own classes with their weights."""

import numpy as np
import pytest

import stageflow as sf


@sf.keras.saving.register_keras_serializable(package="SavingTest")
class Affine(sf.keras.layers.Layer):
    """A custom layer whose variables are made in `build` (as the guide's FlexibleDense)."""

    def __init__(self, out_features, **kwargs):
        super().__init__(**kwargs)
        self.out_features = out_features

    def build(self, input_shape):
        self.w = sf.Variable(sf.random.normal([input_shape[-1], self.out_features]), name="w")
        self.b = sf.Variable(sf.ones([self.out_features]), name="b")

    def call(self, inputs):
        return sf.matmul(inputs, self.w) + self.b


@sf.keras.saving.register_keras_serializable(package="SavingTest")
class TwoAffine(sf.keras.Model):
    """A subclassed model whose layers are made in its `__init__`."""

    def __init__(self, name=None, **kwargs):
        super().__init__(**kwargs)
        self.first = Affine(3)
        self.second = Affine(2)

    def call(self, x):
        return self.second(self.first(x))


def test_registered_names():
    assert sf.keras.saving.get_registered_name(Affine) == "SavingTest>Affine"
    assert sf.keras.saving.get_registered_object("SavingTest>Affine") is Affine
    assert sf.keras.saving.get_registered_name(sf.keras.layers.Dense) == "Dense"
    assert sf.keras.saving.get_registered_object("SavingTest>Missing") is None
    named = sf.keras.saving.register_keras_serializable("Pkg", "Renamed")(
        type("Local", (sf.keras.layers.Layer,), {}))
    assert sf.keras.saving.get_registered_name(named) == "Pkg>Renamed"


def test_config_records_constructor_arguments():
    layer = sf.keras.layers.Dense(4, activation="relu", input_shape=(3,), name="d")
    config = layer.get_config()
    assert config == {"name": "d", "trainable": True, "units": 4, "activation": "relu",
                      "input_shape": (3,)}
    again = sf.keras.layers.Dense.from_config(config)
    assert (again.units, again.name, again.batch_input_shape) == (4, "d", (None, 3))
    assert Affine(5, name="a").get_config() == {"name": "a", "trainable": True,
                                                "out_features": 5}


def test_subclassed_model_round_trip(tmp_path):
    model = TwoAffine(name="the_model")
    x = sf.constant([[2.0, 2.0, 2.0]])
    expected = model(x).numpy()
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = sf.keras.models.load_model(path)
    assert type(loaded) is TwoAffine
    np.testing.assert_allclose(loaded(x).numpy(), expected)


def test_functional_model_with_custom_layer_round_trip(tmp_path):
    inputs = sf.keras.Input(shape=[3])
    outputs = sf.keras.layers.Dense(2, activation="relu")(Affine(4)(inputs))
    model = sf.keras.Model(inputs=inputs, outputs=outputs)
    x = sf.ones((2, 3))
    path = str(tmp_path / "functional.keras")
    sf.keras.saving.save_model(model, path)
    loaded = sf.keras.saving.load_model(path)
    assert type(loaded) is sf.keras.Model
    assert [type(layer).__name__ for layer in loaded.layers] == ["Affine", "Dense"]
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy())


def test_sequential_round_trip(tmp_path):
    model = sf.keras.Sequential([sf.keras.Input((3,)), sf.keras.layers.Dense(4),
                                 sf.keras.layers.Dropout(0.5), sf.keras.layers.Dense(1)])
    x = sf.ones((2, 3))
    path = str(tmp_path / "sequential.keras")
    model.save(path)
    loaded = sf.keras.models.load_model(path)
    assert type(loaded) is sf.keras.Sequential
    assert loaded.input_spec.shape == (None, 3)
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy())


def test_unregistered_custom_class_is_refused(tmp_path):
    class Unknown(sf.keras.layers.Layer):
        def call(self, x):
            return x

    inputs = sf.keras.Input((2,))
    path = str(tmp_path / "unknown.keras")
    sf.keras.Model(inputs, Unknown()(inputs)).save(path)
    with pytest.raises(ValueError, match="register_keras_serializable"):
        sf.keras.models.load_model(path)
    loaded = sf.keras.models.load_model(path, custom_objects={"Unknown": Unknown})
    np.testing.assert_allclose(loaded(sf.ones((1, 2))).numpy(), [[1.0, 1.0]])


def test_embedding_mask_zero():
    embed = sf.keras.layers.Embedding(5, 2, mask_zero=True)
    ids = sf.constant([[3, 0, 1]])
    assert embed(ids).shape == (1, 3, 2)
    np.testing.assert_array_equal(embed.compute_mask(ids).numpy(), [[True, False, True]])
    assert sf.keras.layers.Embedding(5, 2).compute_mask(ids) is None


def test_functions_and_lambdas_in_a_config(tmp_path):
    """TensorFlow's basics guide saves a `Lambda` layer and a function initializer: the
    function is saved by name, the lambda by its code, which loads only with
    ``safe_mode=False`` (Keras 3's rule: loading it runs code from the file)."""
    model = sf.keras.Sequential([
        sf.keras.layers.Lambda(lambda x: sf.stack([x, x**2], axis=1)),
        sf.keras.layers.Dense(units=1, kernel_initializer=sf.random.normal)])
    x = np.linspace(-2, 2, 7).astype(np.float32)
    want = model(x).numpy()
    model.save(tmp_path / "m.keras")
    with pytest.raises(ValueError, match="safe_mode=False"):
        sf.keras.models.load_model(tmp_path / "m.keras")
    loaded = sf.keras.models.load_model(tmp_path / "m.keras", safe_mode=False)
    np.testing.assert_array_equal(loaded(x).numpy(), want)
    assert loaded.layers[1].get_config()["kernel_initializer"] is sf.random.normal


def test_a_function_saved_by_name_is_found_where_stageflow_exports_it(tmp_path):
    """`sf.nn.relu` is made by a factory: its module does not hold it under its name, so
    its name is saved with the namespace that does (TensorFlow's ragged guide saves a
    model with ``activation=tf.nn.relu``)."""
    model = sf.keras.Sequential([sf.keras.layers.Dense(2, activation=sf.nn.relu)])
    x = np.ones((3, 4), np.float32)
    want = model(x).numpy()
    model.save(tmp_path / "relu.keras")
    loaded = sf.keras.models.load_model(tmp_path / "relu.keras")
    np.testing.assert_array_equal(loaded(x).numpy(), want)
