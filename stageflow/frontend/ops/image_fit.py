"""`sf.image`'s fitting of images to a target size (TensorFlow's ``tf.image``): a central
crop or zero padding (`resize_with_crop_or_pad`), and a resize keeping the aspect ratio
then zero padding (`resize_with_pad`).

Sizes are Python ints and the image's height and width must be known when the op is
traced; the offsets are TensorFlow's (integer halves of the difference, the extra pixel
after), so the same pixels land in the same places.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core.source import describe_location
from stageflow.frontend.ops.image import (
    _check_box,
    crop_to_bounding_box,
    image_tensor,
    pad_to_bounding_box,
)
from stageflow.frontend.ops.image_resize import ResizeMethod, resize
from stageflow.frontend.tensor import Tensor

__all__ = ["resize_with_crop_or_pad", "resize_with_pad"]


def _targets(op: str, target_height: Any, target_width: Any) -> None:
    for name, value in (("target_height", target_height), ("target_width", target_width)):
        if not isinstance(value, int | np.integer) or value <= 0:
            raise ValueError(f"sf.image.{op}: {name} must be an int > 0, got {value!r}"
                             f"{describe_location()}")


def resize_with_crop_or_pad(image: Any, target_height: int, target_width: int) -> Tensor:
    """`image` cut to ``target_height x target_width`` around its centre where it is
    larger, and centred in zeros where it is smaller (each dim on its own).

    >>> image = sf.reshape(sf.range(1.0, 5.0), (2, 2, 1))
    >>> sf.image.resize_with_crop_or_pad(image, 1, 4)[..., 0]
    sf.Tensor([[0., 1., 2., 0.]], shape=(1, 4), dtype=float32)
    """
    image = image_tensor(image, resize_with_crop_or_pad)
    _targets("resize_with_crop_or_pad", target_height, target_width)
    height, width = _check_box("resize_with_crop_or_pad", image, {})
    height_diff, width_diff = target_height - height, target_width - width
    cropped = crop_to_bounding_box(image, max(-height_diff // 2, 0), max(-width_diff // 2, 0),
                                   min(target_height, height), min(target_width, width))
    return pad_to_bounding_box(cropped, max(height_diff // 2, 0), max(width_diff // 2, 0),
                               target_height, target_width)


def resize_with_pad(image: Any, target_height: int, target_width: int,
                    method: str = ResizeMethod.BILINEAR, antialias: bool = False) -> Tensor:
    """`image` resized (by `sf.image.resize`, `method`) to fit in ``target_height x
    target_width`` without distortion, then centred in zeros to exactly that size.

    >>> sf.image.resize_with_pad(sf.ones((2, 4, 1)), 4, 4)[..., 0]
    sf.Tensor([[0., 0., 0., 0.],
               [1., 1., 1., 1.],
               [1., 1., 1., 1.],
               [0., 0., 0., 0.]], shape=(4, 4), dtype=float32)
    """
    image = image_tensor(image, resize_with_pad)
    _targets("resize_with_pad", target_height, target_width)
    height, width = _check_box("resize_with_pad", image, {})
    f32 = np.float32
    ratio = max(f32(width) / f32(target_width), f32(height) / f32(target_height))
    new_height, new_width = f32(height) / ratio, f32(width) / ratio
    pad_height = max(0, int(np.floor((f32(target_height) - new_height) / f32(2))))
    pad_width = max(0, int(np.floor((f32(target_width) - new_width) / f32(2))))
    resized = resize(image, [int(np.floor(new_height)), int(np.floor(new_width))], method,
                     antialias=antialias)
    return pad_to_bounding_box(resized, pad_height, pad_width, target_height, target_width)
