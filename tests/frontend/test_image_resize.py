"""`sf.image.resize` against NumPy references of TensorFlow 2's resampling written here
pixel by pixel: bilinear with half-pixel centres (``resize_bilinear``'s interpolation,
edges clamped), half-pixel nearest neighbour, and for antialiased bilinear Pillow's
(whose widened triangle filter TensorFlow's ``ScaleAndTranslate`` shares); eager,
interpreted and compiled, 3-D and 4-D, with TensorFlow's dtypes, and its gradient."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]
RNG = np.random.default_rng(3)
SIZES = [((4, 6), (8, 9)), ((9, 7), (4, 3)), ((5, 5), (5, 5)), ((6, 10), (3, 17)),
         ((1, 4), (3, 2))]


def staged(mode: str, fn, **kwargs):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled", **kwargs)


def bilinear_reference(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """TensorFlow's resize_bilinear with half_pixel_centers, one output pixel at a time."""
    in_h, in_w = image.shape[:2]

    def source(i: int, in_size: int, out_size: int) -> tuple[int, int, float]:
        x = (i + 0.5) * (in_size / out_size) - 0.5
        low = math.floor(x)
        return max(low, 0), min(math.ceil(x), in_size - 1), x - low

    out = np.zeros((out_h, out_w, image.shape[2]), np.float64)
    for y in range(out_h):
        y0, y1, ly = source(y, in_h, out_h)
        for x in range(out_w):
            x0, x1, lx = source(x, in_w, out_w)
            top = image[y0, x0] + (image[y0, x1] - image[y0, x0]) * lx
            bottom = image[y1, x0] + (image[y1, x1] - image[y1, x0]) * lx
            out[y, x] = top + (bottom - top) * ly
    return out


def nearest_reference(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    in_h, in_w = image.shape[:2]
    rows = [min(math.floor((y + 0.5) * in_h / out_h), in_h - 1) for y in range(out_h)]
    columns = [min(math.floor((x + 0.5) * in_w / out_w), in_w - 1) for x in range(out_w)]
    return image[rows][:, columns]


def antialiased_reference(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    channels = [np.asarray(Image.fromarray(np.ascontiguousarray(image[..., c]), mode="F")
                           .resize((out_w, out_h), Image.BILINEAR))
                for c in range(image.shape[2])]
    return np.stack(channels, axis=-1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("size", "new"), SIZES, ids=[f"{s}-{n}" for s, n in SIZES])
def test_bilinear_nearest_and_antialiased(mode, size, new):
    batch = RNG.random((2, *size, 3)).astype(np.float32)
    cases = [("bilinear", False, bilinear_reference), ("nearest", False, nearest_reference),
             ("bilinear", True, antialiased_reference)]
    for method, antialias, reference in cases:
        fn = staged(mode, lambda x, m=method, a=antialias: sf.image.resize(
            x, new, method=m, antialias=a))
        result = fn(sf.constant(batch)).numpy()
        assert result.shape == (2, *new, 3) and result.dtype == np.float32
        for image, got in zip(batch, result, strict=True):
            np.testing.assert_allclose(got, reference(image, *new), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{method} antialias={antialias}")
        single = fn(sf.constant(batch[0])).numpy()  # 3-D: one image
        np.testing.assert_allclose(single, result[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_dtypes_follow_tensorflow(mode):
    pixels = (RNG.random((5, 6, 3)) * 255).astype(np.uint8)
    bilinear = staged(mode, lambda x: sf.image.resize(x, [3, 4]))(sf.constant(pixels))
    assert bilinear.dtype == sf.float32  # bilinear always returns float32
    np.testing.assert_allclose(bilinear.numpy(), bilinear_reference(pixels.astype(float), 3, 4),
                               rtol=1e-5)
    nearest = staged(mode, lambda x: sf.image.resize(
        x, (7, 2), sf.image.ResizeMethod.NEAREST_NEIGHBOR))(sf.constant(pixels))
    assert nearest.dtype == sf.uint8  # nearest keeps the images' dtype, values exact
    np.testing.assert_array_equal(nearest.numpy(), nearest_reference(pixels, 7, 2))


def test_an_unknown_batch_dim_and_an_eager_size():
    fn = sf.function(lambda x: sf.image.resize(x, sf.constant([2, 3])),
                     input_signature=[sf.TensorSpec([None, 4, 4, 1])])
    for n in (1, 3):
        batch = RNG.random((n, 4, 4, 1)).astype(np.float32)
        np.testing.assert_allclose(fn(sf.constant(batch)).numpy()[-1],
                                   bilinear_reference(batch[-1], 2, 3), rtol=1e-5)
    assert fn.experimental_get_tracing_count() == 1


def test_preserve_aspect_ratio():
    image = RNG.random((4, 8, 1)).astype(np.float32)
    assert sf.image.resize(image, [10, 10], preserve_aspect_ratio=True).shape == (5, 10, 1)
    assert sf.image.resize(image, [2, 10], preserve_aspect_ratio=True).shape == (2, 4, 1)


@pytest.mark.parametrize("jit", [False, True])
def test_gradient_is_the_transposed_resampling(jit):
    # Bilinear resizing is linear: d sum(resize(x) * g) / dx is the resampling's transpose
    # applied to g, computed here column by column from the reference.
    image = RNG.random((3, 4, 1)).astype(np.float32)
    cotangent = RNG.random((5, 2, 1)).astype(np.float32)

    @sf.function(jit=jit)
    def grad(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            loss = sf.reduce_sum(sf.image.resize(x, [5, 2], antialias=True) * cotangent)
        return tape.gradient(loss, x)

    expected = np.zeros_like(image)
    for index in np.ndindex(image.shape):
        unit = np.zeros_like(image)
        unit[index] = 1.0
        expected[index] = (antialiased_reference(unit, 5, 2) * cotangent).sum()
    np.testing.assert_allclose(grad(sf.constant(image)).numpy(), expected, rtol=1e-5,
                               atol=1e-6)


def test_bad_arguments_are_named():
    image = np.zeros((4, 4, 1), np.float32)
    with pytest.raises(ValueError, match="method 'bicubic' is not supported; use one of "
                                         "bilinear, nearest"):
        sf.image.resize(image, [2, 2], method=sf.image.ResizeMethod.BICUBIC)
    with pytest.raises(ValueError, match=r"size must be \[new_height, new_width\]"):
        sf.image.resize(image, [2, 0])
    with pytest.raises(TypeError, match="size must be known when traced"):
        sf.function(lambda x, s: sf.image.resize(x, s))(sf.constant(image), sf.constant([2, 2]))
    with pytest.raises(ValueError, match=r"3-D or 4-D"):
        sf.image.resize(image[..., 0], [2, 2])
