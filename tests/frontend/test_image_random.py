"""sf.image's random and stateless random augmentations: ranges, seeds, errors, staging."""

import numpy as np
import pytest

import stageflow as sf

IMAGE = np.arange(2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3) / 18.0


def test_flips_are_one_of_two_images():
    flipped = np.asarray(sf.image.flip_left_right(IMAGE))
    seen = set()
    for _ in range(20):
        got = np.asarray(sf.image.random_flip_left_right(IMAGE, seed=4))
        assert np.array_equal(got, IMAGE) or np.array_equal(got, flipped)
        seen.add(np.array_equal(got, IMAGE))
    assert seen == {True, False}
    batch = np.stack([IMAGE] * 8)
    got = np.asarray(sf.function(lambda x: sf.image.random_flip_up_down(x, seed=1))(batch))
    assert got.shape == batch.shape


def test_seeded_programs_repeat():
    def run():
        sf.random.set_seed(3)
        return [np.asarray(sf.image.random_brightness(IMAGE, 0.2, seed=7)) for _ in range(2)]
    first, second = run(), run()
    np.testing.assert_array_equal(first[0], second[0])
    assert np.all(np.abs(first[0] - IMAGE) <= 0.2 + 1e-6)


def test_stateless_same_seed_same_result():
    a = sf.image.stateless_random_flip_left_right(IMAGE, [1, 2])
    b = sf.function(lambda x: sf.image.stateless_random_flip_left_right(x, [1, 2]))(IMAGE)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    c = sf.image.stateless_random_contrast(IMAGE, 0.5, 1.5, [3, 4])
    np.testing.assert_array_equal(np.asarray(c),
                                  np.asarray(sf.image.stateless_random_contrast(
                                      IMAGE, 0.5, 1.5, [3, 4])))


def test_crop_is_a_window():
    value = np.arange(30).reshape(5, 6)
    for crop in (sf.image.random_crop(value, [2, 3], seed=2),
                 sf.function(lambda v: sf.image.random_crop(v, [2, 3], seed=2))(value)):
        got = np.asarray(crop)
        r, c = divmod(int(got[0, 0]), 6)
        np.testing.assert_array_equal(got, value[r:r + 2, c:c + 3])
    with pytest.raises(ValueError, match="value.shape >= size"):
        sf.image.random_crop(value, [6, 1])


def test_hue_saturation_contrast_ranges_and_errors():
    gray = np.full((2, 2, 3), 0.5, np.float32)
    np.testing.assert_allclose(np.asarray(sf.image.random_hue(gray, 0.5, seed=1)), gray)
    np.testing.assert_allclose(np.asarray(sf.image.random_saturation(gray, 0.1, 2.0)), gray)
    with pytest.raises(ValueError, match="<= 0.5"):
        sf.image.random_hue(gray, 0.6)
    with pytest.raises(ValueError, match="upper must be > lower"):
        sf.image.random_contrast(gray, 1.0, 1.0)
    with pytest.raises(ValueError, match="non-negative"):
        sf.image.random_saturation(gray, -1.0, 1.0)
    with pytest.raises(ValueError, match="non-negative"):
        sf.image.random_brightness(gray, -0.1)
