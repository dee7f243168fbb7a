"""`sf.image.resize`: TensorFlow 2's ``tf.image.resize`` (half-pixel centres), bilinear and
nearest-neighbour, with TensorFlow's antialiasing filter for bilinear downsampling.

Resizing is separable: each output row is a weighted sum of input rows, each output column
of input columns. The weights depend on the sizes only, so they are computed here in NumPy
when the op is traced and the images are contracted with them (`einsum`), which stages
and differentiates as a matrix product does; nearest-neighbour `gather`s instead, exact
for every dtype.

The bilinear weights are those of TensorFlow's ``ScaleAndTranslate`` with its triangle
kernel: output pixel i samples the input at ``(i + 0.5) / scale - 0.5``, each input pixel j
weighted ``max(0, 1 - |sample - j| / s)`` where s is 1, or with `antialias` when
downsampling ``1 / scale`` (the filter widened to cover every input pixel), and each row
of weights normalised to sum to one over the pixels inside the image. With s = 1 this is
exactly ``resize_bilinear`` with half-pixel centres (the edges clamp).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops.elementwise import cast
from stageflow.frontend.ops.image import image_tensor
from stageflow.frontend.ops.linalg import einsum
from stageflow.frontend.ops.shape import expand_dims, gather, squeeze
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor, constant_value

__all__ = ["ResizeMethod", "resize"]


class ResizeMethod:
    """TensorFlow's names of the resampling methods (strings, as TensorFlow's are):
    `resize` supports ``BILINEAR`` and ``NEAREST_NEIGHBOR``; the others are named so that
    a program using them fails at the call, saying which methods there are.

    >>> sf.image.ResizeMethod.NEAREST_NEIGHBOR
    'nearest'
    >>> sf.image.resize(sf.ones((2, 2, 1)), [3, 3], sf.image.ResizeMethod.BILINEAR).shape
    (3, 3, 1)
    """

    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"
    AREA = "area"
    LANCZOS3 = "lanczos3"
    LANCZOS5 = "lanczos5"
    GAUSSIAN = "gaussian"
    MITCHELLCUBIC = "mitchellcubic"


METHODS = (ResizeMethod.BILINEAR, ResizeMethod.NEAREST_NEIGHBOR)


def bilinear_weights(in_size: int, out_size: int, antialias: bool) -> np.ndarray:
    """The ``[out_size, in_size]`` matrix of TensorFlow's triangle-kernel resampling."""
    inverse_scale = in_size / out_size
    width = max(inverse_scale, 1.0) if antialias else 1.0
    sample = (np.arange(out_size) + 0.5) * inverse_scale - 0.5
    weights = np.maximum(0.0, 1.0 - np.abs(sample[:, None] - np.arange(in_size)[None, :])
                         / width)
    return (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)


def nearest_indices(in_size: int, out_size: int) -> np.ndarray:
    """The input pixel of each output pixel: ``floor((i + 0.5) * in / out)`` in float32,
    clamped to the image, as TensorFlow's half-pixel nearest-neighbour computes it."""
    scale = np.float32(in_size) / np.float32(out_size)
    index = np.floor((np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale)
    return np.clip(index.astype(np.int64), 0, in_size - 1).astype(np.int32)


def _size(size: Any) -> tuple[int, int]:
    if isinstance(size, SymbolicTensor):
        size = constant_value(size)
        if size is None:
            raise TypeError(f"sf.image.resize: size must be known when traced (Python ints, "
                            f"a constant or an eager tensor), got a traced tensor computed "
                            f"from the function's arguments{describe_location()}")
    values = np.asarray(size._value if isinstance(size, Tensor) else size)
    if values.shape != (2,) or not np.issubdtype(values.dtype, np.integer) or np.any(
            values <= 0):
        raise ValueError(f"sf.image.resize: size must be [new_height, new_width], two "
                         f"positive ints, got {size!r}{describe_location()}")
    return int(values[0]), int(values[1])


def resize(images: Any, size: Sequence[int] | Any, method: str = "bilinear",
           preserve_aspect_ratio: bool = False, antialias: bool = False) -> Tensor:
    """`images` (``[height, width, channels]`` or a batch of them) resized to `size`
    ``[new_height, new_width]``, sampling at pixel centres as TensorFlow 2 does.

    ``method="bilinear"`` returns float32 (TensorFlow's rule); with `antialias`, shrinking
    averages every input pixel under a widened triangle filter instead of sampling two.
    ``"nearest"`` keeps the images' dtype. `preserve_aspect_ratio` fits the images inside
    `size` keeping their proportions (each side rounded as TensorFlow rounds it).

    >>> image = sf.reshape(sf.constant([0.0, 1.0, 2.0, 3.0]), (2, 2, 1))
    >>> sf.image.resize(image, [4, 4])[..., 0]
    sf.Tensor([[0.  , 0.25, 0.75, 1.  ],
               [0.5 , 0.75, 1.25, 1.5 ],
               [1.5 , 1.75, 2.25, 2.5 ],
               [2.  , 2.25, 2.75, 3.  ]], shape=(4, 4), dtype=float32)
    >>> sf.image.resize(image, [1, 3], method="nearest")[..., 0]
    sf.Tensor([[2., 3., 3.]], shape=(1, 3), dtype=float32)
    """
    images = image_tensor(images, resize)
    method = str(method).lower()
    if method not in METHODS:
        raise ValueError(f"sf.image.resize: method {method!r} is not supported; use one of "
                         f"{', '.join(METHODS)}{describe_location()}")
    single = images.ndim == 3
    batch = expand_dims(images, 0) if single else images
    in_height, in_width = batch.shape[1], batch.shape[2]
    if in_height is None or in_width is None:
        raise ValueError(f"sf.image.resize: the images' height and width must be known when "
                         f"traced, got shape {tuple(images.shape)}{describe_location()}")
    height, width = _size(size)
    if preserve_aspect_ratio:
        scale = min(height / in_height, width / in_width)
        height, width = int(round(in_height * scale)), int(round(in_width * scale))
    if method == "nearest":
        result = gather(gather(batch, nearest_indices(in_height, height), axis=1),
                        nearest_indices(in_width, width), axis=2)
    else:
        floats = cast(batch, dtypes.float32)
        rows = bilinear_weights(in_height, height, antialias)
        columns = bilinear_weights(in_width, width, antialias)
        result = einsum("pw,nowc->nopc", columns, einsum("oh,nhwc->nowc", rows, floats))
    return squeeze(result, 0) if single else result
