"""`sf.image`'s image measures and filters (TensorFlow's ``tf.image``): total variation,
PSNR, SSIM with TensorFlow's Gaussian window, and Sobel edges.

Each is TensorFlow's formula built of the op set (slices, arithmetic, reductions,
`depthwise_conv2d`), so it runs eagerly, stages and differentiates as those do. The
Gaussian window of `ssim` depends on its size and sigma only: it is computed in NumPy
when the op is traced, as TensorFlow computes it (a softmax of the squared distances).
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
    divide,
    log,
    multiply,
    square,
    subtract,
)
from stageflow.frontend.ops.image import convert_image_dtype, image_tensor
from stageflow.frontend.ops.nn import depthwise_conv2d
from stageflow.frontend.ops.reductions import reduce_mean, reduce_sum
from stageflow.frontend.ops.shape import gather, reshape, tile
from stageflow.frontend.tensor import Tensor

__all__ = ["psnr", "sobel_edges", "ssim", "total_variation"]


def total_variation(images: Any) -> Tensor:
    """The sum of the absolute differences of neighbouring pixels (down and across), of
    one image (3-D: a scalar) or of each of a batch (4-D: ``[batch]``), in the images'
    dtype.

    >>> sf.image.total_variation(sf.constant([[[0.0], [1.0]], [[3.0], [3.0]]]))
    sf.Tensor(6., shape=(), dtype=float32)
    """
    images = image_tensor(images, total_variation)
    axes = None if images.ndim == 3 else [1, 2, 3]
    down = subtract(images[..., 1:, :, :], images[..., :-1, :, :])
    across = subtract(images[..., :, 1:, :], images[..., :, :-1, :])
    return add(reduce_sum(absolute(down), axis=axes), reduce_sum(absolute(across), axis=axes))


def _same_images(op: str, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    if a.ndim < 3 or b.ndim < 3:
        raise ValueError(f"sf.image.{op}: the images must be at least 3-D, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}{describe_location()}")
    if a.shape[-3:] != b.shape[-3:]:
        raise ValueError(f"sf.image.{op}: the images' last three dims differ: "
                         f"{tuple(a.shape)} and {tuple(b.shape)}{describe_location()}")
    if a.dtype != b.dtype:
        raise TypeError(f"sf.image.{op}: the images are {a.dtype.name} and {b.dtype.name}"
                        f"{describe_location()}")
    return a, b


def _max_val(max_val: Any, dtype: np.dtype) -> Tensor:
    return convert_image_dtype(cast(max_val, dtype), dtypes.float32)


def psnr(a: Any, b: Any, max_val: Any) -> Tensor:
    """The peak signal-to-noise ratio of images `a` and `b` in decibels, over their last
    three dims (float32; integer images and `max_val` scaled by `convert_image_dtype`):
    ``20 log10(max_val) - 10 log10(mse)``.

    >>> sf.image.psnr(sf.constant([[[0.5]]]), sf.constant([[[0.4]]]), max_val=1.0)
    sf.Tensor(20., shape=(), dtype=float32)
    """
    a, b = _same_images("psnr", a, b)
    peak = _max_val(max_val, a.dtype)
    a, b = convert_image_dtype(a, dtypes.float32), convert_image_dtype(b, dtypes.float32)
    mse = reduce_mean(square(subtract(a, b)), axis=[-3, -2, -1])
    return subtract(divide(multiply(20.0, log(peak)), log(np.float32(10.0))),
                    multiply(np.float32(10 / np.log(10)), log(mse)))


def _gaussian(size: int, sigma: float) -> np.ndarray:
    coords = np.arange(size, dtype=np.float32) - np.float32(size - 1) / np.float32(2.0)
    g = np.square(coords) * (np.float32(-0.5) / np.square(np.float32(sigma)))
    g = (g[None, :] + g[:, None]).reshape(-1)
    g = np.exp(g - g.max())
    return (g / g.sum()).astype(np.float32).reshape(size, size, 1, 1)


def ssim(img1: Any, img2: Any, max_val: Any, filter_size: int = 11,
         filter_sigma: float = 1.5, k1: float = 0.01, k2: float = 0.03,
         return_index_map: bool = False) -> Tensor:
    """The structural similarity of images `img1` and `img2` (``[..., height, width,
    channels]``), TensorFlow's: local means, variances and covariance under a
    `filter_size` Gaussian window of `filter_sigma` (valid positions only), luminance
    times contrast-structure averaged over the height and width, then over the
    channels. Float32; integer images and `max_val` are scaled by `convert_image_dtype`.
    `return_index_map` gives the per-position map averaged over channels instead.

    >>> image = sf.reshape(sf.range(144.0), (12, 12, 1)) / 144.0
    >>> sf.image.ssim(image, image, max_val=1.0)
    sf.Tensor(1., shape=(), dtype=float32)
    """
    img1, img2 = _same_images("ssim", img1, img2)
    height, width = img1.shape[-3], img1.shape[-2]
    if height is not None and width is not None and (height < filter_size
                                                     or width < filter_size):
        raise ValueError(f"sf.image.ssim: the images ({height}x{width}) are smaller than the "
                         f"filter ({filter_size}){describe_location()}")
    peak = _max_val(max_val, img1.dtype)
    img1 = convert_image_dtype(img1, dtypes.float32)
    img2 = convert_image_dtype(img2, dtypes.float32)
    channels = img1.shape[-1]
    kernel = np.tile(_gaussian(int(filter_size), float(filter_sigma)), [1, 1, channels, 1])
    lead = tuple(img1.shape[:-3])

    def local_mean(x: Tensor) -> Tensor:
        y = depthwise_conv2d(reshape(x, (-1, *x.shape[-3:])), kernel, [1, 1, 1, 1], "VALID")
        return reshape(y, (*lead, *y.shape[1:]))

    c1 = square(multiply(np.float32(k1), peak))
    c2 = square(multiply(np.float32(k2), peak))
    mean1, mean2 = local_mean(img1), local_mean(img2)
    num0 = multiply(multiply(mean1, mean2), 2.0)
    den0 = add(square(mean1), square(mean2))
    luminance = divide(add(num0, c1), add(den0, c1))
    num1 = multiply(local_mean(multiply(img1, img2)), 2.0)
    den1 = local_mean(add(square(img1), square(img2)))
    structure = divide(add(subtract(num1, num0), c2), add(subtract(den1, den0), c2))
    if return_index_map:
        return reduce_mean(multiply(luminance, structure), axis=[-1])
    per_channel = reduce_mean(multiply(luminance, structure), axis=[-3, -2])
    return reduce_mean(per_channel, axis=[-1])


_SOBEL = np.transpose(np.asarray([[[-1, -2, -1], [0, 0, 0], [1, 2, 1]],
                                  [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]]), (1, 2, 0))[:, :, None, :]


def sobel_edges(image: Any) -> Tensor:
    """The vertical and horizontal Sobel responses of each channel of a batch of images
    ``[batch, height, width, channels]`` (edges reflected), as ``[batch, height, width,
    channels, 2]``: ``[..., 0]`` the change down the image, ``[..., 1]`` across it.

    >>> edges = sf.image.sobel_edges(sf.constant([[[[0.0], [1.0], [2.0]]] * 2]))
    >>> edges[0, 0, :, 0, 1]
    sf.Tensor([0., 8., 0.], shape=(3,), dtype=float32)
    """
    image = image_tensor(image, sobel_edges, (4,))
    height, width, channels = image.shape[1], image.shape[2], image.shape[3]
    if height is None or width is None or height < 2 or width < 2:
        raise ValueError(f"sf.image.sobel_edges: the height and width must be known and at "
                         f"least 2 (the edges are reflected), got shape {tuple(image.shape)}"
                         f"{describe_location()}")
    rows, cols = [1, *range(height), height - 2], [1, *range(width), width - 2]
    padded = gather(gather(image, np.asarray(rows, np.int32), axis=1),
                    np.asarray(cols, np.int32), axis=2)
    kernels = tile(cast(_SOBEL, image.dtype), [1, 1, channels, 1])
    output = depthwise_conv2d(padded, kernels, [1, 1, 1, 1], "VALID")
    return reshape(output, (-1, height, width, channels, 2))
