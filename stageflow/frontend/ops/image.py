"""`sf.image`'s ops on images (TensorFlow's ``tf.image``): flips, rotations, crops and pads,
dtype conversion with TensorFlow's scaling, brightness, contrast, standardization and
grayscale; `image_resize` resizes.

An image is a tensor ``[height, width, channels]``, a batch ``[batch, height, width,
channels]``. Every op here is built of the op set (reverse, transpose, slices, pad,
arithmetic, reductions), so it runs eagerly, stages into a function's IR and
differentiates as those ops do. Offsets and sizes are Python ints (TensorFlow takes
tensors too): a crop's shape must be known when the op is traced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops.casting import saturate_cast
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import (
    add,
    cast,
    divide,
    floordiv,
    maximum,
    multiply,
    sqrt,
    square,
    subtract,
)
from stageflow.frontend.ops.linalg import tensordot
from stageflow.frontend.ops.math_ops import reverse
from stageflow.frontend.ops.reductions import reduce_mean
from stageflow.frontend.ops.shape import expand_dims, pad, transpose
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor

__all__ = ["adjust_brightness", "adjust_contrast", "central_crop", "convert_image_dtype",
           "crop_to_bounding_box", "flip_left_right", "flip_up_down", "pad_to_bounding_box",
           "per_image_standardization", "rgb_to_grayscale", "rot90", "transpose"]

_transpose = transpose


def image_tensor(image: Any, op: Callable[..., Any], ranks: tuple[int, ...] = (3, 4)
                 ) -> Tensor:
    """`image` as a tensor of one of `ranks`, or ValueError naming the op and the shape."""
    image = convert_to_tensor(image)
    if image.ndim not in ranks:
        wanted = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"sf.image.{op.__name__}: the image must be {wanted} ([batch,] height, "
                         f"width, channels), got shape {tuple(image.shape)}"
                         f"{describe_location()}")
    return image


def flip_left_right(image: Any) -> Tensor:
    """`image` mirrored along its width (the second-last dim).

    >>> sf.image.flip_left_right(sf.reshape(sf.range(4.0), (1, 2, 2)))[..., 0]
    sf.Tensor([[2., 0.]], shape=(1, 2), dtype=float32)
    """
    image = image_tensor(image, flip_left_right)
    return reverse(image, [image.ndim - 2])


def flip_up_down(image: Any) -> Tensor:
    """`image` mirrored along its height (the third-last dim).

    >>> sf.image.flip_up_down(sf.reshape(sf.range(4.0), (2, 1, 2)))[..., 0]
    sf.Tensor([[2.],
               [0.]], shape=(2, 1), dtype=float32)
    """
    image = image_tensor(image, flip_up_down)
    return reverse(image, [image.ndim - 3])


def transpose(image: Any) -> Tensor:
    """`image` with height and width swapped (``tf.image.transpose``).

    >>> sf.image.transpose(sf.zeros((2, 5, 3))).shape
    (5, 2, 3)
    """
    image = image_tensor(image, transpose)
    perm = [0, 2, 1, 3] if image.ndim == 4 else [1, 0, 2]
    return _transpose(image, perm)


def rot90(image: Any, k: int = 1) -> Tensor:
    """`image` rotated counter-clockwise by `k` quarter turns (`k` a Python int, any sign:
    ``np.rot90`` over the height and width).

    >>> image = sf.reshape(sf.range(4.0), (2, 2, 1))
    >>> sf.image.rot90(image)[..., 0]
    sf.Tensor([[1., 3.],
               [0., 2.]], shape=(2, 2), dtype=float32)
    """
    image = image_tensor(image, rot90)
    if isinstance(k, SymbolicTensor) or not isinstance(k, int | np.integer | Tensor):
        raise TypeError(f"sf.image.rot90: k must be a Python int or an eager tensor (the "
                        f"result's shape depends on it), got {k!r}{describe_location()}")
    turns = int(k) % 4
    height, width = image.ndim - 3, image.ndim - 2
    if turns == 1:
        return transpose(reverse(image, [width]))
    if turns == 2:
        return reverse(image, [height, width])
    if turns == 3:
        return reverse(transpose(image), [width])
    return image


def _dtype_max(dtype: np.dtype) -> Any:
    return (np.iinfo(dtype) if dtypes.is_integer(dtype) else ml_dtypes.finfo(dtype)).max


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False) -> Tensor:
    """`image` in `dtype`, its values rescaled as TensorFlow's ``convert_image_dtype``
    does: floats are in [0, 1), integers in [0, MAX] of their dtype. Integers to floats
    multiply by ``1 / MAX``; floats to integers multiply by ``MAX + 0.5`` and truncate;
    integers to integers shift by a power of two (a division when narrowing, a
    multiplication when widening); floats to floats only cast. `saturate` clamps before
    casts that could overflow (`saturate_cast`).

    >>> sf.image.convert_image_dtype(sf.constant([0, 128, 255], sf.uint8), sf.float32)
    sf.Tensor([0.       , 0.5019608, 1.       ], shape=(3,), dtype=float32)
    >>> sf.image.convert_image_dtype(sf.constant([0.0, 0.5, 1.0]), sf.uint8)
    sf.Tensor([  0, 127, 255], shape=(3,), dtype=uint8)
    """
    image = convert_to_tensor(image)
    dtype = dtypes.as_dtype(dtype)
    for d in (image.dtype, dtype):
        if not (dtypes.is_floating(d) or dtypes.is_integer(d)):
            raise TypeError(f"sf.image.convert_image_dtype: {d.name} is neither a float nor "
                            f"an integer dtype{describe_location()}")
    if image.dtype == dtype:
        return image
    to_dtype = saturate_cast if saturate else cast
    if dtypes.is_integer(image.dtype) and dtypes.is_integer(dtype):
        scale_in, scale_out = int(_dtype_max(image.dtype)), int(_dtype_max(dtype))
        if scale_in > scale_out:
            return to_dtype(floordiv(image, (scale_in + 1) // (scale_out + 1)), dtype)
        return multiply(to_dtype(image, dtype), (scale_out + 1) // (scale_in + 1))
    if dtypes.is_floating(image.dtype) and dtypes.is_floating(dtype):
        return cast(image, dtype)
    if dtypes.is_integer(image.dtype):
        return multiply(cast(image, dtype), 1.0 / float(_dtype_max(image.dtype)))
    return to_dtype(multiply(image, float(_dtype_max(dtype)) + 0.5), dtype)


def _in_float(image: Tensor, adjust: Any) -> Tensor:
    """`adjust` applied in float32 (float16 and float32 images as they are), and the
    result converted back to the image's dtype with saturation, as TensorFlow's
    adjustments do."""
    if image.dtype in (dtypes.float16, dtypes.float32):
        return convert_image_dtype(adjust(image), image.dtype, saturate=True)
    adjusted = adjust(convert_image_dtype(image, dtypes.float32))
    return convert_image_dtype(adjusted, image.dtype, saturate=True)


def adjust_brightness(image: Any, delta: float) -> Tensor:
    """`image` plus `delta` (in the [0, 1) scale of float images: integer images are
    converted to float32, shifted and converted back, saturating).

    >>> sf.image.adjust_brightness(sf.constant([[[0.25]]]), 0.5)
    sf.Tensor([[[0.75]]], shape=(1, 1, 1), dtype=float32)
    """
    image = convert_to_tensor(image)
    return _in_float(image, lambda x: add(x, cast(delta, x.dtype)))


def adjust_contrast(images: Any, contrast_factor: float) -> Tensor:
    """Each channel of each image moved away from (factor > 1) or toward its mean over
    the height and width: ``(x - mean) * contrast_factor + mean``.

    >>> sf.image.adjust_contrast(sf.constant([[[1.0], [3.0]]]), 2.0)[..., 0]
    sf.Tensor([[0., 4.]], shape=(1, 2), dtype=float32)
    """
    images = image_tensor(images, adjust_contrast, tuple(range(3, 9)))

    def adjust(x: Tensor) -> Tensor:
        mean = reduce_mean(x, axis=[x.ndim - 3, x.ndim - 2], keepdims=True)
        return add(multiply(subtract(x, mean), cast(contrast_factor, x.dtype)), mean)

    return _in_float(images, adjust)


def per_image_standardization(image: Any) -> Tensor:
    """Each image scaled to mean 0 and variance 1 in float32: ``(x - mean) /
    max(stddev, 1 / sqrt(N))`` over its last three dims, N their size (so a uniform
    image divides by no zero).

    >>> image = sf.reshape(sf.range(1, 13), (2, 2, 3))
    >>> sf.image.per_image_standardization(image)[0, 0]
    sf.Tensor([-1.593255 , -1.3035723, -1.0138896], shape=(3,), dtype=float32)
    """
    image = cast(image_tensor(image, per_image_standardization, tuple(range(3, 9))),
                 dtypes.float32)
    axes = [image.ndim - 3, image.ndim - 2, image.ndim - 1]
    count = int(np.prod([image.shape[a] for a in axes]))
    mean = reduce_mean(image, axis=axes, keepdims=True)
    centred = subtract(image, mean)
    stddev = sqrt(reduce_mean(square(centred), axis=axes, keepdims=True))
    return divide(centred, maximum(stddev, np.float32(1.0 / np.sqrt(count))))


def _check_box(op: str, image: Tensor, values: dict[str, int]) -> tuple[int, int]:
    for name, value in values.items():
        if not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"sf.image.{op}: {name} must be an int >= 0, got {value!r}"
                             f"{describe_location()}")
    height, width = image.shape[image.ndim - 3], image.shape[image.ndim - 2]
    if height is None or width is None:
        raise ValueError(f"sf.image.{op}: the image's height and width must be known when "
                         f"traced, got shape {tuple(image.shape)}{describe_location()}")
    return height, width


def crop_to_bounding_box(image: Any, offset_height: int, offset_width: int,
                         target_height: int, target_width: int) -> Tensor:
    """The ``target_height x target_width`` window of `image` whose top-left corner is
    at (`offset_height`, `offset_width`); ValueError where it does not fit.

    >>> image = sf.reshape(sf.range(16.0), (4, 4, 1))
    >>> sf.image.crop_to_bounding_box(image, 1, 2, 2, 2)[..., 0]
    sf.Tensor([[ 6.,  7.],
               [10., 11.]], shape=(2, 2), dtype=float32)
    """
    image = image_tensor(image, crop_to_bounding_box)
    height, width = _check_box("crop_to_bounding_box", image, {
        "offset_height": offset_height, "offset_width": offset_width,
        "target_height": target_height, "target_width": target_width})
    if target_height == 0 or target_width == 0 or offset_height + target_height > height \
            or offset_width + target_width > width:
        raise ValueError(f"sf.image.crop_to_bounding_box: a {target_height}x{target_width} "
                         f"window at ({offset_height}, {offset_width}) does not fit in a "
                         f"{height}x{width} image{describe_location()}")
    return image[..., offset_height:offset_height + target_height,
                 offset_width:offset_width + target_width, :]


def pad_to_bounding_box(image: Any, offset_height: int, offset_width: int,
                        target_height: int, target_width: int) -> Tensor:
    """`image` placed at (`offset_height`, `offset_width`) in a zero image of
    ``target_height x target_width``; ValueError where it does not fit.

    >>> sf.image.pad_to_bounding_box(sf.ones((1, 1, 1)), 1, 0, 2, 2)[..., 0]
    sf.Tensor([[0., 0.],
               [1., 0.]], shape=(2, 2), dtype=float32)
    """
    image = image_tensor(image, pad_to_bounding_box)
    height, width = _check_box("pad_to_bounding_box", image, {
        "offset_height": offset_height, "offset_width": offset_width,
        "target_height": target_height, "target_width": target_width})
    after_height = target_height - offset_height - height
    after_width = target_width - offset_width - width
    if after_height < 0 or after_width < 0:
        raise ValueError(f"sf.image.pad_to_bounding_box: a {height}x{width} image at "
                         f"({offset_height}, {offset_width}) does not fit in "
                         f"{target_height}x{target_width}{describe_location()}")
    paddings = [[0, 0]] * (image.ndim - 3) + [[offset_height, after_height],
                                              [offset_width, after_width], [0, 0]]
    return pad(image, paddings)


def central_crop(image: Any, central_fraction: float) -> Tensor:
    """The central `central_fraction` (in (0, 1]) of the height and width of `image`: an
    offset of ``int((size - size * central_fraction) / 2)`` cut from each side, as
    TensorFlow computes it.

    >>> image = sf.reshape(sf.range(1.0, 49.0), (4, 4, 3))
    >>> sf.image.central_crop(image, 0.5)[..., 0]
    sf.Tensor([[16., 19.],
               [28., 31.]], shape=(2, 2), dtype=float32)
    """
    image = image_tensor(image, central_crop)
    if not 0.0 < central_fraction <= 1.0:
        raise ValueError(f"sf.image.central_crop: central_fraction must be in (0, 1], got "
                         f"{central_fraction!r}{describe_location()}")
    if central_fraction == 1.0:
        return image
    height, width = _check_box("central_crop", image, {})
    top = int((float(height) - float(height) * central_fraction) / 2)
    left = int((float(width) - float(width) * central_fraction) / 2)
    return crop_to_bounding_box(image, top, left, height - 2 * top, width - 2 * left)


_GRAY = np.array([0.2989, 0.5870, 0.1140], np.float32)


def rgb_to_grayscale(images: Any) -> Tensor:
    """The luma of RGB images (weights 0.2989, 0.5870, 0.1140, TensorFlow's), with one
    channel, in the images' dtype (converted to float32 and back by
    `convert_image_dtype`).

    >>> sf.image.rgb_to_grayscale(sf.constant([[[1.0, 0.5, 0.0]]]))
    sf.Tensor([[[0.5924]]], shape=(1, 1, 1), dtype=float32)
    """
    images = convert_to_tensor(images)
    if images.ndim < 1 or images.shape[-1] != 3:
        raise ValueError(f"sf.image.rgb_to_grayscale: the last dim must be 3 (RGB), got "
                         f"shape {tuple(images.shape)}{describe_location()}")
    floats = convert_image_dtype(images, dtypes.float32)
    gray = expand_dims(tensordot(floats, _GRAY, [[floats.ndim - 1], [0]]), -1)
    return convert_image_dtype(gray, images.dtype)
