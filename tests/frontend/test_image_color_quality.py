"""sf.image's colour spaces, hue/saturation/gamma, measures (PSNR, SSIM, total variation),
Sobel edges and fitting, against values TensorFlow 2.21 gave, eagerly and staged."""

import numpy as np
import pytest

import stageflow as sf

IMG = np.array(
    [
        [[0.5, 0.5, 0.5], [0.2, 0.9, 0.9], [0.9, 0.9, 0.1]],
        [[0.1, 0.3, 0.7], [0.8, 0.2, 0.4], [0.0, 0.0, 0.0]],
    ],
    np.float32,
)
BIG = (np.arange(12 * 12 * 2).reshape(12, 12, 2) % 7 / 7).astype(np.float32)
BIG2 = (np.arange(12 * 12 * 2).reshape(12, 12, 2) % 5 / 5).astype(np.float32)

# TensorFlow 2.21's outputs for IMG, BIG and BIG2.
HSV = [
    [
        [0.0, 0.0, 0.5],
        [0.5, 0.7777777910232544, 0.8999999761581421],
        [0.1666666716337204, 0.8888888359069824, 0.8999999761581421],
    ],
    [
        [0.6111111044883728, 0.8571428060531616, 0.699999988079071],
        [0.9444444179534912, 0.75, 0.800000011920929],
        [0.0, 0.0, 0.0],
    ],
]
HUE = [
    [
        [0.5, 0.5, 0.5],
        [0.7600001096725464, 0.20000000298023224, 0.8999999761581421],
        [0.10000000149011612, 0.8999999761581421, 0.7400001287460327],
    ],
    [
        [0.699999988079071, 0.10000000149011612, 0.41999995708465576],
        [0.5199999809265137, 0.800000011920929, 0.20000000298023224],
        [0.0, 0.0, 0.0],
    ],
]
SAT = [
    [
        [0.5, 0.5, 0.5],
        [0.0, 0.8999999761581421, 0.8999999761581421],
        [0.8999999761581421, 0.8999999761581421, 0.0],
    ],
    [
        [0.0, 0.23333343863487244, 0.699999988079071],
        [0.800000011920929, 0.0, 0.26666679978370667],
        [0.0, 0.0, 0.0],
    ],
]
GAMMA_U8 = [
    [[216, 216, 216], [137, 255, 255], [255, 255, 96]],
    [[96, 167, 255], [255, 137, 193], [0, 0, 0]],
]
TV = 9.59999942779541
PSNR = 4.814860820770264
SSIM = -0.019996486604213715
SSIM5 = 0.029053229838609695
SOBEL = [
    [[1.4901161193847656e-08, 0.0], [-2.9802322387695312e-08, 0.19999998807907104], [0.0, 0.0]],
    [[0.0, 0.0], [1.1920928955078125e-07, 0.19999992847442627], [1.1920928955078125e-07, 0.0]],
]
RWP = [
    [0.0, 0.0, 0.0],
    [0.5, 0.20000000298023224, 0.8999999761581421],
    [0.10000000149011612, 0.800000011920929, 0.0],
    [0.0, 0.0, 0.0],
]


def _both(fn, *args):
    """fn(*args) eagerly and inside sf.function."""
    return np.asarray(fn(*args)), np.asarray(sf.function(fn)(*args))


@pytest.mark.parametrize(
    ("fn", "want"),
    [
        (sf.image.rgb_to_hsv, HSV),
        (lambda x: sf.image.adjust_hue(x, 0.3), HUE),
        (lambda x: sf.image.adjust_saturation(x, 1.7), SAT),
        (sf.image.total_variation, TV),
        (lambda x: sf.image.psnr(x, x[::-1], 1.0), PSNR),
        (lambda x: sf.image.sobel_edges(x[None])[0, :, :, 1], SOBEL),
        (lambda x: sf.image.resize_with_pad(x, 4, 3)[..., 0], RWP),
    ],
)
def test_matches_tensorflow(fn, want):
    for got in _both(fn, IMG):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_hsv_round_trip_and_numpy_formula():
    hsv = np.asarray(sf.image.rgb_to_hsv(IMG))
    np.testing.assert_allclose(hsv[..., 2], IMG.max(-1))
    np.testing.assert_allclose(np.asarray(sf.image.hsv_to_rgb(hsv)), IMG, atol=1e-6)


def test_gamma_uint8_and_negative_gamma():
    got = sf.image.adjust_gamma((IMG * 255).astype(np.uint8), 0.5, 1.2)
    assert got.dtype == sf.uint8
    np.testing.assert_array_equal(np.asarray(got), GAMMA_U8)
    with pytest.raises(ValueError, match="non-negative"):
        sf.image.adjust_gamma(IMG, -1.0)


def test_ssim_gaussian_window():
    for got in _both(lambda a, b: sf.image.ssim(a, b, 1.0), BIG, BIG2):
        np.testing.assert_allclose(got, SSIM, atol=1e-6)
    got = sf.image.ssim(BIG, BIG2, 1.0, filter_size=5, filter_sigma=1.0)
    np.testing.assert_allclose(np.asarray(got), SSIM5, atol=1e-6)
    assert float(sf.image.ssim(BIG, BIG, 1.0)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="smaller than the filter"):
        sf.image.ssim(IMG, IMG, 1.0)


def test_grayscale_to_rgb_and_crop_or_pad():
    rgb = sf.image.grayscale_to_rgb(IMG[..., :1])
    np.testing.assert_array_equal(np.asarray(rgb), np.repeat(IMG[..., :1], 3, -1))
    with pytest.raises(ValueError, match="last dim of 1"):
        sf.image.grayscale_to_rgb(IMG)
    image = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3, 1)
    for got in _both(lambda x: sf.image.resize_with_crop_or_pad(x, 4, 1), image):
        np.testing.assert_array_equal(got[..., 0], [[0.0], [2.0], [5.0], [0.0]])
    with pytest.raises(ValueError, match="target_height"):
        sf.image.resize_with_crop_or_pad(image, 0, 1)


def test_sobel_needs_two_pixels():
    with pytest.raises(ValueError, match="at least 2"):
        sf.image.sobel_edges(np.zeros((1, 1, 3, 1), np.float32))
