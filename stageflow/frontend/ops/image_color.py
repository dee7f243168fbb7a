"""`sf.image`'s colour-space ops (TensorFlow's ``tf.image``): RGB to and from HSV, hue,
saturation and gamma adjustments, and grayscale to RGB.

HSV follows TensorFlow's kernels: value is the largest channel, saturation the range
over the value (zero for black), hue in [0, 1) from the channel that is largest (red,
then green, then blue where two tie), zero for grays. `adjust_hue` and
`adjust_saturation` go through HSV as TensorFlow's kernels do, so their numbers are
TensorFlow's up to float rounding. Every op is built of elementwise ops, reductions and
`where`, so it runs eagerly, stages and differentiates as those do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import (
    abs as absolute,
)
from stageflow.frontend.ops.elementwise import (
    add,
    cast,
    clip_by_value,
    divide,
    equal,
    floor,
    greater,
    less,
    maximum,
    minimum,
    multiply,
    subtract,
    where,
)
from stageflow.frontend.ops.elementwise import (
    pow as power,
)
from stageflow.frontend.ops.image import _in_float, convert_image_dtype
from stageflow.frontend.ops.shape import stack, tile
from stageflow.frontend.tensor import Tensor

__all__ = ["adjust_gamma", "adjust_hue", "adjust_saturation", "grayscale_to_rgb",
           "hsv_to_rgb", "rgb_to_hsv"]


def _rgb(op: str, images: Any) -> Tensor:
    images = convert_to_tensor(images)
    if images.ndim < 1 or images.shape[-1] != 3:
        raise ValueError(f"sf.image.{op}: the last dim must be 3 (RGB or HSV), got shape "
                         f"{tuple(images.shape)}{describe_location()}")
    return images


def _float_rgb(op: str, images: Any) -> Tensor:
    images = _rgb(op, images)
    if not dtypes.is_floating(images.dtype):
        raise TypeError(f"sf.image.{op}: the images must be floats (sf.image."
                        f"convert_image_dtype converts), got {images.dtype.name}"
                        f"{describe_location()}")
    return images


def _channels(images: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return images[..., 0], images[..., 1], images[..., 2]


def _to_hsv(images: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    r, g, b = _channels(images)
    value = maximum(maximum(r, g), b)
    spread = subtract(value, minimum(minimum(r, g), b))
    zero = cast(0, images.dtype)
    positive = greater(spread, zero)
    safe_spread = where(positive, spread, cast(1, images.dtype))
    saturation = where(greater(value, zero),
                       divide(spread, where(greater(value, zero), value,
                                            cast(1, images.dtype))), zero)
    norm = divide(cast(1, images.dtype), multiply(cast(6, images.dtype), safe_spread))
    hue = where(equal(r, value), multiply(norm, subtract(g, b)),
                where(equal(g, value),
                      add(multiply(norm, subtract(b, r)), cast(2.0 / 6.0, images.dtype)),
                      add(multiply(norm, subtract(r, g)), cast(4.0 / 6.0, images.dtype))))
    hue = where(positive, hue, zero)
    hue = where(less(hue, zero), add(hue, cast(1, images.dtype)), hue)
    return hue, saturation, value


def _from_hsv(hue: Tensor, saturation: Tensor, value: Tensor) -> Tensor:
    dtype = hue.dtype
    one, two = cast(1, dtype), cast(2, dtype)
    sixths = multiply(hue, cast(6, dtype))

    def ramp(x: Tensor) -> Tensor:
        return clip_by_value(x, cast(0, dtype), one)

    red = ramp(subtract(absolute(subtract(sixths, cast(3, dtype))), one))
    green = ramp(subtract(two, absolute(subtract(sixths, two))))
    blue = ramp(subtract(two, absolute(subtract(sixths, cast(4, dtype)))))
    unsaturated = subtract(one, saturation)
    return stack([multiply(add(unsaturated, multiply(saturation, c)), value)
                  for c in (red, green, blue)], axis=-1)


def rgb_to_hsv(images: Any) -> Tensor:
    """RGB images (floats in [0, 1], last dim 3) as HSV, each in [0, 1], with TensorFlow's
    formulas.

    >>> sf.image.rgb_to_hsv(sf.constant([[1.0, 0.5, 0.0]]))
    sf.Tensor([[0.08333334, 1.        , 1.        ]], shape=(1, 3), dtype=float32)
    """
    images = _float_rgb("rgb_to_hsv", images)
    return stack(list(_to_hsv(images)), axis=-1)


def hsv_to_rgb(images: Any) -> Tensor:
    """HSV images (floats, last dim 3) as RGB, the inverse of `rgb_to_hsv`, with
    TensorFlow's formulas.

    >>> sf.image.hsv_to_rgb(sf.constant([[0.5, 1.0, 1.0]]))
    sf.Tensor([[0., 1., 1.]], shape=(1, 3), dtype=float32)
    """
    images = _float_rgb("hsv_to_rgb", images)
    return _from_hsv(*_channels(images))


def _via_float32(images: Tensor, adjust: Any) -> Tensor:
    """`adjust` of the images in float32 (float16 ones computed in float32), converted back
    to their dtype without saturation, as TensorFlow's hue and saturation ops do."""
    if images.dtype in (dtypes.float16, dtypes.float32):
        return cast(adjust(cast(images, dtypes.float32)), images.dtype)
    return convert_image_dtype(adjust(convert_image_dtype(images, dtypes.float32)),
                               images.dtype)


def adjust_hue(image: Any, delta: Any) -> Tensor:
    """RGB images with their hue rotated by `delta` (in [-1, 1], a fraction of the colour
    circle), in the images' dtype (integers converted to float32 and back).

    >>> sf.image.adjust_hue(sf.constant([[[1.0, 0.0, 0.0]]]), 1.0 / 3.0)
    sf.Tensor([[[0., 1., 0.]]], shape=(1, 1, 3), dtype=float32)
    """
    image = _rgb("adjust_hue", image)

    def adjust(x: Tensor) -> Tensor:
        hue, saturation, value = _to_hsv(x)
        hue = add(hue, cast(delta, x.dtype))
        return _from_hsv(subtract(hue, floor(hue)), saturation, value)

    return _via_float32(image, adjust)


def adjust_saturation(image: Any, saturation_factor: Any) -> Tensor:
    """RGB images with their saturation multiplied by `saturation_factor` and clipped to
    [0, 1], in the images' dtype (integers converted to float32 and back).

    >>> sf.image.adjust_saturation(sf.constant([[[1.0, 0.5, 0.5]]]), 0.0)
    sf.Tensor([[[1., 1., 1.]]], shape=(1, 1, 3), dtype=float32)
    """
    image = _rgb("adjust_saturation", image)

    def adjust(x: Tensor) -> Tensor:
        hue, saturation, value = _to_hsv(x)
        saturation = clip_by_value(multiply(saturation, cast(saturation_factor, x.dtype)),
                                   cast(0, x.dtype), cast(1, x.dtype))
        return _from_hsv(hue, saturation, value)

    return _via_float32(image, adjust)


def adjust_gamma(image: Any, gamma: Any = 1, gain: Any = 1) -> Tensor:
    """``gain * image ** gamma`` in the [0, 1] scale (integer images converted to float32
    and back, saturating); `gamma` must be non-negative (ValueError for a negative number).

    >>> sf.image.adjust_gamma(sf.constant([0.25, 1.0]), gamma=0.5, gain=2.0)
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """
    image = convert_to_tensor(image)
    if not isinstance(gamma, Tensor) and np.any(np.asarray(gamma) < 0):
        raise ValueError(f"sf.image.adjust_gamma: gamma should be a non-negative real number, "
                         f"got {gamma!r}{describe_location()}")
    return _in_float(image, lambda x: multiply(cast(gain, x.dtype),
                                               power(x, cast(gamma, x.dtype))))


def grayscale_to_rgb(images: Any) -> Tensor:
    """Grayscale images (last dim 1, rank at least 2) with the channel repeated three
    times.

    >>> sf.image.grayscale_to_rgb(sf.constant([[[0.5]]]))
    sf.Tensor([[[0.5, 0.5, 0.5]]], shape=(1, 1, 3), dtype=float32)
    """
    images = convert_to_tensor(images)
    if images.ndim < 2 or images.shape[-1] != 1:
        raise ValueError(f"sf.image.grayscale_to_rgb: the images must be at least 2-D with a "
                         f"last dim of 1, got shape {tuple(images.shape)}{describe_location()}")
    return tile(images, [1] * (images.ndim - 1) + [3])
