"""`sf.image`'s flips, rotations, crops and pads, `convert_image_dtype`, adjustments,
standardization and grayscale, against NumPy references of TensorFlow's documented rules
(and the examples of TensorFlow's documentation), 3-D and 4-D, eager, interpreted and
compiled, and differentiated."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]
RNG = np.random.default_rng(7)
IMAGE = RNG.random((5, 4, 3)).astype(np.float32)
BATCH = RNG.random((2, 5, 4, 3)).astype(np.float32)


def staged(mode: str, fn):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled")


def run(mode: str, fn, *args):
    return staged(mode, fn)(*[sf.constant(a) for a in args]).numpy()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("images", [IMAGE, BATCH], ids=["3d", "4d"])
def test_flips_transpose_and_rotations(mode, images):
    h, w = images.ndim - 3, images.ndim - 2
    np.testing.assert_array_equal(run(mode, sf.image.flip_left_right, images),
                                  np.flip(images, w))
    np.testing.assert_array_equal(run(mode, sf.image.flip_up_down, images), np.flip(images, h))
    np.testing.assert_array_equal(run(mode, sf.image.transpose, images),
                                  np.swapaxes(images, h, w))
    for k in (-1, 0, 1, 2, 3, 5):
        np.testing.assert_array_equal(run(mode, lambda x, k=k: sf.image.rot90(x, k), images),
                                      np.rot90(images, k, axes=(h, w)))


def test_rank_and_k_are_checked():
    with pytest.raises(ValueError, match=r"sf.image.flip_left_right: .*3-D or 4-D.*\(5, 4\)"):
        sf.image.flip_left_right(IMAGE[..., 0])
    with pytest.raises(TypeError, match="k must be a Python int"):
        sf.function(lambda x, k: sf.image.rot90(x, k))(sf.constant(IMAGE), sf.constant(1))
    assert sf.image.rot90(IMAGE, sf.constant(1)).shape == (4, 5, 3)  # an eager k


U8 = np.array([0, 1, 127, 128, 200, 255], np.uint8)
UNIT = np.array([0.0, 0.1, 0.5, 0.999, 1.0], np.float32)


@pytest.mark.parametrize("mode", MODES)
def test_convert_image_dtype_scales_as_tensorflow(mode):
    convert = sf.image.convert_image_dtype

    def to(dtype, saturate=False):
        return lambda x: convert(x, dtype, saturate=saturate)

    np.testing.assert_allclose(run(mode, to(sf.float32), U8), U8 / np.float32(255), rtol=1e-7)
    np.testing.assert_array_equal(run(mode, to(sf.uint8), UNIT),
                                  (UNIT * np.float32(255.5)).astype(np.uint8))
    # Integers to integers: a power-of-two shift (2**31 // 2**8 = 2**23).
    np.testing.assert_array_equal(run(mode, to(sf.int32), U8), U8.astype(np.int32) * 2**23)
    wide = U8.astype(np.int32) * 2**23 + 12345
    np.testing.assert_array_equal(run(mode, to(sf.uint8), wide), U8)
    np.testing.assert_array_equal(run(mode, to(sf.uint16), U8), U8.astype(np.uint16) * 256)
    # Out-of-range floats saturate when asked to.
    over = np.array([-0.5, 0.5, 1.5], np.float32)
    np.testing.assert_array_equal(run(mode, to(sf.uint8, saturate=True), over), [0, 127, 255])
    np.testing.assert_array_equal(run(mode, to(sf.float64), UNIT), UNIT.astype(np.float64))


def test_convert_image_dtype_keeps_its_dtype_and_refuses_others():
    x = sf.constant(U8)
    assert sf.image.convert_image_dtype(x, sf.uint8) is x
    with pytest.raises(TypeError, match="bool is neither a float nor an integer"):
        sf.image.convert_image_dtype(x, sf.bool)


def _via_float(image: np.ndarray, adjust) -> np.ndarray:
    """TensorFlow's adjustment of a uint8 image: to float32 in [0, 1], adjust, back with
    saturation (times 255.5, clamped, truncated)."""
    adjusted = adjust(image.astype(np.float32) / np.float32(255))
    return np.clip(adjusted * np.float32(255.5), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("mode", MODES)
def test_brightness_and_contrast(mode):
    for images in (IMAGE, BATCH):
        np.testing.assert_allclose(
            run(mode, lambda x: sf.image.adjust_brightness(x, 0.25), images), images + 0.25,
            rtol=1e-6)
        mean = images.mean(axis=(-3, -2), keepdims=True)
        np.testing.assert_allclose(
            run(mode, lambda x: sf.image.adjust_contrast(x, 1.7), images),
            (images - mean) * 1.7 + mean, rtol=1e-5, atol=1e-6)
    pixels = (IMAGE * 255).astype(np.uint8)
    bright = run(mode, lambda x: sf.image.adjust_brightness(x, 0.3), pixels)
    assert bright.dtype == np.uint8
    np.testing.assert_array_equal(bright, _via_float(pixels, lambda f: f + np.float32(0.3)))

    def contrast(f):
        mean = f.mean(axis=(0, 1), keepdims=True, dtype=np.float32)
        return (f - mean) * np.float32(2.0) + mean

    result = run(mode, lambda x: sf.image.adjust_contrast(x, 2.0), pixels)
    assert np.abs(result.astype(int) - _via_float(pixels, contrast).astype(int)).max() <= 1


@pytest.mark.parametrize("mode", MODES)
def test_per_image_standardization(mode):
    # TensorFlow's documented example.
    example = np.arange(1, 13, dtype=np.int32).reshape(2, 2, 3)
    result = run(mode, sf.image.per_image_standardization, example)
    assert result.dtype == np.float32
    np.testing.assert_allclose(result[0], [[-1.593255, -1.3035723, -1.0138896],
                                           [-0.7242068, -0.4345241, -0.14484136]], rtol=1e-6)
    # Per image of a batch, and a uniform image divides by 1/sqrt(N), not by 0.
    batch = np.stack([BATCH[0], np.full_like(BATCH[1], 0.5)])
    result = run(mode, sf.image.per_image_standardization, batch)
    expected = (BATCH[0] - BATCH[0].mean()) / max(BATCH[0].std(), 1 / np.sqrt(60))
    np.testing.assert_allclose(result[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(result[1], 0.0)


@pytest.mark.parametrize("mode", MODES)
def test_crops_and_pads(mode):
    for images in (IMAGE, BATCH):
        np.testing.assert_array_equal(
            run(mode, lambda x: sf.image.crop_to_bounding_box(x, 1, 2, 3, 2), images),
            images[..., 1:4, 2:4, :])
        padded = run(mode, lambda x: sf.image.pad_to_bounding_box(x, 2, 1, 8, 6), images)
        expected = np.zeros(images.shape[:-3] + (8, 6, 3), np.float32)
        expected[..., 2:7, 1:5, :] = images
        np.testing.assert_array_equal(padded, expected)
    # TensorFlow's documented central_crop example: a 4x4 image, fraction 0.5.
    example = np.arange(1.0, 49.0, dtype=np.float32).reshape(4, 4, 3)
    np.testing.assert_array_equal(run(mode, lambda x: sf.image.central_crop(x, 0.5), example),
                                  example[1:3, 1:3])
    # int((5 - 5 * 0.5) / 2) = 1 row cut from each side; int((4 - 2) / 2) = 1 column.
    np.testing.assert_array_equal(run(mode, lambda x: sf.image.central_crop(x, 0.5), BATCH),
                                  BATCH[:, 1:4, 1:3])
    assert sf.image.central_crop(IMAGE, 1.0).shape == IMAGE.shape


def test_boxes_that_do_not_fit_are_errors():
    with pytest.raises(ValueError, match=r"a 3x3 window at \(3, 0\) does not fit in a 5x4"):
        sf.image.crop_to_bounding_box(IMAGE, 3, 0, 3, 3)
    with pytest.raises(ValueError, match=r"a 5x4 image at \(1, 0\) does not fit in 5x4"):
        sf.image.pad_to_bounding_box(IMAGE, 1, 0, 5, 4)
    with pytest.raises(ValueError, match=r"offset_width must be an int >= 0"):
        sf.image.crop_to_bounding_box(IMAGE, 0, -1, 1, 1)
    with pytest.raises(ValueError, match=r"central_fraction must be in \(0, 1\]"):
        sf.image.central_crop(IMAGE, 0.0)


@pytest.mark.parametrize("mode", MODES)
def test_rgb_to_grayscale(mode):
    weights = np.array([0.2989, 0.5870, 0.1140], np.float32)
    for images in (IMAGE, BATCH):
        gray = run(mode, sf.image.rgb_to_grayscale, images)
        np.testing.assert_allclose(gray, (images @ weights)[..., None], rtol=1e-6)
    pixels = (IMAGE * 255).astype(np.uint8)
    gray = run(mode, sf.image.rgb_to_grayscale, pixels)
    assert gray.dtype == np.uint8 and gray.shape == (5, 4, 1)
    expected = ((pixels.astype(np.float32) / np.float32(255)) @ weights * np.float32(255.5))
    assert np.abs(gray[..., 0].astype(int) - expected.astype(np.uint8).astype(int)).max() <= 1
    with pytest.raises(ValueError, match="the last dim must be 3"):
        sf.image.rgb_to_grayscale(BATCH[..., :2])


@pytest.mark.parametrize("jit", [False, True])
def test_gradients_flow_through(jit):
    cotangent = RNG.random((2, 4, 5, 3)).astype(np.float32)

    @sf.function(jit=jit)
    def grads(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.image.rot90(sf.image.flip_left_right(x)) * 2.0
            z = sf.image.per_image_standardization(x)
            loss = sf.reduce_sum(y * cotangent) + sf.reduce_sum(z * z)
        return tape.gradient(loss, x)

    x = BATCH
    g = grads(sf.constant(x)).numpy()
    # d/dx of sum(rot90(flip(x)) * 2 * c) is flip^-1(rot90^-1(2c)); sum(z^2) = N per image
    # whatever x is, so its gradient is (numerically) zero.
    expected = np.flip(np.rot90(2 * cotangent, -1, axes=(1, 2)), 2)
    np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-4)
