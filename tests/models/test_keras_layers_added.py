"""Keras layers: `InputLayer`, `Identity`, `Masking`, `GaussianDropout`,
`ActivityRegularization`, `SpatialDropout1D`, `UnitNormalization`, and the image layers
`Resizing`, `CenterCrop`, `RandomFlip`, `RandomContrast`, `RandomCrop`: against outputs
observed from Keras (hard-coded) and NumPy, their configs, and inside `fit`."""

import numpy as np
import pytest

import stageflow as sf

layers = sf.keras.layers
IMAGES = np.arange(2 * 4 * 6, dtype=np.float32).reshape(2, 4, 6, 1)


def _fit(model, x, y, **kwargs):
    model.compile(sf.keras.optimizers.SGD(0.01), "mse")
    history = model.fit(x, y, epochs=2, batch_size=2, verbose=0, **kwargs)
    assert np.all(np.isfinite(history.history["loss"]))
    return model


def test_input_layer_builds_a_sequential_and_trains():
    model = sf.keras.Sequential([layers.InputLayer(shape=(3,)), layers.Dense(2)])
    assert [tuple(v.shape) for v in model.variables] == [(3, 2), (2,)]
    _fit(model, np.ones((4, 3), np.float32), np.ones((4, 2), np.float32))
    batch = layers.InputLayer(batch_shape=(None, 5))
    assert batch.batch_input_shape == (None, 5)
    assert layers.InputLayer(shape=(2,)).get_config()["shape"] == (2,)


def test_identity_and_masking():
    x = sf.constant([[[1.0, 2.0], [0.0, 0.0], [0.0, 3.0]]])
    assert layers.Identity()(x) is x
    np.testing.assert_array_equal(layers.Masking()(x).numpy(), x.numpy())
    masked = layers.Masking(mask_value=1.0)(sf.constant([[[1.0, 1.0], [1.0, 2.0]]])).numpy()
    np.testing.assert_array_equal(masked, [[[0.0, 0.0], [1.0, 2.0]]])
    assert layers.Masking(1.0).get_config()["mask_value"] == 1.0
    model = sf.keras.Sequential([layers.Masking(input_shape=(3, 2)), layers.Flatten(),
                                 layers.Dense(1)])
    _fit(model, np.ones((4, 3, 2), np.float32), np.ones((4, 1), np.float32))


def test_gaussian_dropout_statistics_and_identity_at_inference():
    drop = layers.GaussianDropout(0.2, seed=1)
    x = sf.ones((20000,))
    assert drop(x) is not None and np.array_equal(drop(x).numpy(), x.numpy())
    noisy = drop(x, training=True).numpy()
    assert abs(noisy.mean() - 1.0) < 0.02
    assert abs(noisy.std() - np.sqrt(0.2 / 0.8)) < 0.02
    assert drop.get_config() == {"name": drop.name, "trainable": True, "rate": 0.2, "seed": 1}
    model = sf.keras.Sequential([layers.Dense(3, input_shape=(2,)), layers.GaussianDropout(0.3),
                                 layers.Dense(1)])
    _fit(model, np.ones((4, 2), np.float32), np.ones((4, 1), np.float32))


def test_spatial_dropout_1d_drops_whole_channels():
    y = layers.SpatialDropout1D(0.5, seed=2)(sf.ones((4, 6, 8)), training=True).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert (y == y[:, :1]).all()
    np.testing.assert_array_equal(layers.SpatialDropout1D(0.5)(sf.ones((1, 2, 2))).numpy(),
                                  np.ones((1, 2, 2)))


def test_activity_regularization_matches_keras_and_joins_the_loss():
    layer = layers.ActivityRegularization(l1=0.5, l2=0.25)
    out = layer(sf.constant([[1.0, -2.0], [3.0, 0.0]]))
    np.testing.assert_array_equal(out.numpy(), [[1.0, -2.0], [3.0, 0.0]])
    np.testing.assert_allclose([float(v) for v in layer.losses], [3.25])  # Keras' value
    assert layer.get_config()["l1"] == 0.5 and layer.get_config()["l2"] == 0.25
    model = sf.keras.Sequential([layers.Dense(2, kernel_initializer="ones", use_bias=False,
                                              input_shape=(1,)),
                                 layers.ActivityRegularization(l1=1.0)])
    model.compile(sf.keras.optimizers.SGD(0.0), "mse")
    history = model.fit(np.ones((2, 1), np.float32), np.ones((2, 2), np.float32),
                        batch_size=2, verbose=0)
    np.testing.assert_allclose(history.history["loss"], [2.0], rtol=1e-6)  # penalty: 4 / 2


def test_unit_normalization_matches_keras():
    np.testing.assert_allclose(layers.UnitNormalization()(sf.constant([[3.0, 4.0]])).numpy(),
                               [[0.6, 0.8]], rtol=1e-6)
    out = layers.UnitNormalization(axis=[1, 2])(sf.constant([[[3.0, 0.0], [0.0, 4.0]]]))
    np.testing.assert_allclose(out.numpy(), [[[0.6, 0.0], [0.0, 0.8]]], rtol=1e-6)
    model = sf.keras.Sequential([layers.Dense(3, input_shape=(2,)), layers.UnitNormalization()])
    _fit(model, np.ones((4, 2), np.float32), np.ones((4, 3), np.float32) / np.sqrt(3))


def test_resizing_and_center_crop_match_keras():
    np.testing.assert_allclose(layers.Resizing(2, 3)(IMAGES).numpy()[..., 0],
                               [[[3.5, 5.5, 7.5], [15.5, 17.5, 19.5]],
                                [[27.5, 29.5, 31.5], [39.5, 41.5, 43.5]]])
    np.testing.assert_allclose(
        layers.Resizing(2, 2, crop_to_aspect_ratio=True)(IMAGES).numpy()[0, ..., 0],
        [[4.5, 6.5], [16.5, 18.5]])
    np.testing.assert_allclose(
        layers.Resizing(3, 3, interpolation="nearest")(IMAGES).numpy()[0, ..., 0],
        [[1.0, 3.0, 5.0], [13.0, 15.0, 17.0], [19.0, 21.0, 23.0]])
    np.testing.assert_allclose(layers.CenterCrop(3, 4)(IMAGES).numpy()[0, ..., 0],
                               [[1, 2, 3, 4], [7, 8, 9, 10], [13, 14, 15, 16]])
    np.testing.assert_allclose(layers.CenterCrop(6, 6)(IMAGES).numpy()[0, :2, ..., 0],
                               [[1.0, 1.5, 2.1666667, 2.8333335, 3.5, 4.0],
                                [4.0, 4.5, 5.166667, 5.833334, 6.5, 7.0]], rtol=1e-5)
    assert layers.Resizing(2, 3)(IMAGES[0]).shape == (2, 3, 1)
    assert layers.CenterCrop(2, 2).get_config()["height"] == 2


def test_random_flip_flips_each_image_or_not_and_only_while_training():
    x = sf.constant(np.arange(8 * 2 * 3, dtype=np.float32).reshape(8, 2, 3, 1))
    for mode, flips in (("horizontal", (lambda a: a[:, ::-1],)),
                        ("vertical", (lambda a: a[::-1],)),
                        ("horizontal_and_vertical", (lambda a: a[:, ::-1], lambda a: a[::-1],
                                                     lambda a: a[::-1, ::-1]))):
        out = layers.RandomFlip(mode, seed=3)(x).numpy()
        for image, flipped in zip(x.numpy(), out, strict=True):
            assert any(np.array_equal(f(image), flipped) for f in (lambda a: a, *flips))
    np.testing.assert_array_equal(layers.RandomFlip()(x, training=False).numpy(), x.numpy())
    with pytest.raises(ValueError, match="mode"):
        layers.RandomFlip("diagonal")


def test_random_contrast_keeps_means_and_clips():
    contrast = layers.RandomContrast((0.5, 0.5), value_range=(0, 30), seed=4)
    x = sf.constant(IMAGES)
    out = contrast(x).numpy()
    assert out.min() >= 0.0 and out.max() <= 30.0
    # unclipped pixels: (x - mean) * f + mean with one f in [0.5, 1.5] per image
    for image, result in zip(IMAGES, out, strict=True):
        mean = image.mean()
        inside = (result > 0) & (result < 30)
        factors = (result[inside] - mean) / (image[inside] - mean)
        assert np.allclose(factors, factors[0], rtol=1e-4) and 0.5 <= factors[0] <= 1.5
    np.testing.assert_array_equal(contrast(x, training=False).numpy(), IMAGES)


def test_random_crop_crops_while_training_and_is_identity_otherwise():
    x = sf.constant(IMAGES)
    crop = layers.RandomCrop(2, 3, seed=5)
    out = crop(x).numpy()
    assert out.shape == (2, 2, 3, 1)
    windows = [IMAGES[:, i:i + 2, j:j + 3] for i in range(3) for j in range(4)]
    assert any(np.array_equal(out, w) for w in windows)
    np.testing.assert_array_equal(crop(x, training=False).numpy(), IMAGES)  # Keras 3's


def test_augmentations_train_in_fit_and_pass_through_predict():
    model = sf.keras.Sequential([
        layers.InputLayer(shape=(4, 6, 1)), layers.RandomFlip(seed=1),
        layers.RandomContrast(0.2, seed=2), layers.RandomCrop(2, 2, seed=3),
        layers.Resizing(3, 3), layers.CenterCrop(2, 2), layers.Flatten(), layers.Dense(1)])
    _fit(model, IMAGES, np.ones((2, 1), np.float32))
    direct = model(sf.constant(IMAGES[:, 1:3, 2:4]), training=False).numpy()  # not augmented
    assert direct.shape == (2, 1)
    predicted = model.predict(IMAGES)
    assert predicted.shape == (2, 1) and np.all(np.isfinite(predicted))
    # at inference the layers are deterministic: the same predictions twice
    np.testing.assert_array_equal(predicted, model.predict(IMAGES))


def test_clone_model_makes_new_layers_that_train_alone():
    x = sf.keras.Input((3,))
    hidden = layers.Dense(4, activation="relu")(x)
    functional = sf.keras.Model(x, layers.Dense(1)(hidden))
    sequential = sf.keras.Sequential([layers.Dense(2, input_shape=(3,)), layers.Dropout(0.1)])
    for model in (functional, sequential):
        clone = sf.keras.models.clone_model(model)
        assert type(clone) is type(model)
        assert [tuple(v.shape) for v in clone.variables] == [tuple(v.shape)
                                                             for v in model.variables]
        assert all(a is not b for a, b in zip(clone.variables, model.variables, strict=True))
        before = [v.numpy().copy() for v in model.variables]
        outputs = int(model.variables[-1].shape[0])
        _fit(clone, np.ones((4, 3), np.float32), np.ones((4, outputs), np.float32))
        for value, variable in zip(before, model.variables, strict=True):
            np.testing.assert_array_equal(value, variable.numpy())
