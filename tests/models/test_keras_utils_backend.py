"""`sf.keras.utils` and `sf.keras.backend`: Keras' array utilities against its observed
outputs (hard-coded), the seeding of every stream, the custom-object registry, `PyDataset`
batches in `fit`, `evaluate` and `predict`, and the global settings."""

import random

import numpy as np
import pytest

import stageflow as sf

utils = sf.keras.utils


def test_to_categorical_matches_keras():
    np.testing.assert_array_equal(utils.to_categorical([0, 2, 1]),
                                  [[1, 0, 0], [0, 0, 1], [0, 1, 0]])
    out = utils.to_categorical(np.array([[1], [0]]), 3)  # a trailing dim of 1 dropped
    np.testing.assert_array_equal(out, [[0, 1, 0], [1, 0, 0]])
    assert out.dtype == np.float64
    assert utils.to_categorical(sf.constant([[0, 1], [1, 0]]), 2).shape == (2, 2, 2)


def test_pad_sequences_matches_keras():
    sequences = [[1, 2, 3], [4, 5], [6]]
    out = utils.pad_sequences(sequences, maxlen=2)
    np.testing.assert_array_equal(out, [[2, 3], [4, 5], [0, 6]])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(
        utils.pad_sequences(sequences, padding="post", truncating="post", value=-1),
        [[1, 2, 3], [4, 5, -1], [6, -1, -1]])
    floats = utils.pad_sequences([[1.5, 2], [3]], dtype="float32")
    np.testing.assert_array_equal(floats, [[1.5, 2.0], [0.0, 3.0]])
    with pytest.raises(ValueError, match="padding"):
        utils.pad_sequences(sequences, padding="middle")


def test_normalize_matches_keras():
    np.testing.assert_allclose(utils.normalize(np.array([[3.0, 4.0], [1.0, 0.0]])),
                               [[0.6, 0.8], [1.0, 0.0]])
    np.testing.assert_allclose(utils.normalize(np.array([[3.0, 4.0]]), order=1),
                               [[3 / 7, 4 / 7]])
    np.testing.assert_array_equal(utils.normalize(np.zeros((1, 2))), [[0.0, 0.0]])


def test_set_random_seed_seeds_python_numpy_and_stageflow():
    utils.set_random_seed(11)
    first = (random.random(), np.random.rand(), sf.random.uniform((3,)).numpy())
    utils.set_random_seed(11)
    second = (random.random(), np.random.rand(), sf.random.uniform((3,)).numpy())
    assert first[0] == second[0] and first[1] == second[1]
    np.testing.assert_array_equal(first[2], second[2])


def test_custom_objects_registry():
    @utils.register_keras_serializable(package="UtilsTest")
    def triple(x):
        return 3 * x

    assert utils.register_keras_serializable is sf.keras.saving.register_keras_serializable
    assert utils.get_custom_objects()["UtilsTest>triple"] is triple
    with utils.custom_object_scope({"Scoped": triple}):
        assert sf.keras.saving.get_registered_object("Scoped") is triple
    assert sf.keras.saving.get_registered_object("Scoped") is None


class Batches(utils.PyDataset):
    def __init__(self, x, y, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = x, y, batch_size
        self.epochs_ended = 0

    def __len__(self):
        return -(-len(self.x) // self.batch_size)

    def __getitem__(self, index):
        rows = slice(index * self.batch_size, (index + 1) * self.batch_size)
        return self.x[rows], self.y[rows]

    def on_epoch_end(self):
        self.epochs_ended += 1


def _model():
    model = sf.keras.Sequential([sf.keras.layers.Dense(1, kernel_initializer="zeros",
                                                       input_shape=(2,))])
    model.compile(sf.keras.optimizers.SGD(0.1), "mse")
    return model


def test_py_dataset_trains_like_arrays():
    x = np.arange(16, dtype=np.float64).reshape(8, 2) / 10  # float64 batches: as float32
    y = x.sum(1, keepdims=True)
    data = Batches(x, y, 4, workers=2)
    assert utils.Sequence is utils.PyDataset and data.num_batches == 2
    by_dataset, by_arrays = _model(), _model()
    history = by_dataset.fit(data, epochs=3, verbose=0)
    by_arrays.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 3 and data.epochs_ended == 3
    np.testing.assert_allclose(by_dataset.layers[0].kernel.numpy(),
                               by_arrays.layers[0].kernel.numpy(), rtol=1e-6)
    loss = by_dataset.evaluate(data, verbose=0)
    np.testing.assert_allclose(loss, by_arrays.evaluate(x, y, batch_size=4, verbose=0),
                               rtol=1e-6)
    predicted = by_dataset.predict(data)
    np.testing.assert_allclose(predicted, by_arrays.predict(x), rtol=1e-6)


def test_backend_settings():
    backend = sf.keras.backend
    assert backend.floatx() == "float32" and backend.epsilon() == 1e-7
    assert backend.image_data_format() == "channels_last"
    backend.set_epsilon(1e-5)
    assert backend.epsilon() == 1e-5
    backend.set_epsilon(1e-7)
    with pytest.raises(ValueError, match="floatx"):
        backend.set_floatx("int8")
    backend.set_floatx("float64")
    try:
        layer = sf.keras.layers.Dense(2)
        layer.build((None, 2))  # built without a floating input: variables of floatx
        assert layer.kernel.dtype == np.float64
    finally:
        backend.set_floatx("float32")
    assert sf.keras.layers.Embedding(3, 2).dtype == "float32"
