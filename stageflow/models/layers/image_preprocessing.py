"""Keras' image preprocessing layers on NHWC batches (or single HWC images): `Resizing` and
`CenterCrop`, and the augmentations `RandomFlip`, `RandomContrast` and `RandomCrop`.

The augmentations change their inputs only while training; as in Keras, called alone (not
inside a model's or another layer's call) without ``training=`` they take it as True.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import random as sf_random
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import range as sf_range
from stageflow.frontend.ops.image import flip_left_right, flip_up_down
from stageflow.frontend.ops.image_resize import resize
from stageflow.frontend.ops.reductions import reduce_mean
from stageflow.frontend.ops.shape import expand_dims, gather, squeeze
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers import symbolic
from stageflow.models.layers.base import Layer, in_layer_call

__all__ = ["CenterCrop", "RandomContrast", "RandomCrop", "RandomFlip", "Resizing"]


def _batch(inputs: Any, layer: str) -> tuple[Tensor, bool]:
    """NHWC float images (a single HWC image batched) and whether it was single."""
    x = convert_to_tensor(inputs)
    if x.ndim not in (3, 4):
        raise ValueError(f"{layer}: expected images (batch, height, width, channels) or "
                         f"(height, width, channels), got shape {tuple(x.shape)}"
                         f"{describe_location()}")
    if x.ndim == 3:
        return expand_dims(x, 0), True
    return x, False


def _unbatch(x: Tensor, single: bool) -> Tensor:
    return squeeze(x, [0]) if single else x


def _floating(x: Tensor, dtype: Any) -> Tensor:
    return x if x.dtype == dtype else ew.cast(x, dtype)


def _crop(x: Tensor, top: int, left: int, height: int, width: int) -> Tensor:
    return x[:, top:top + height, left:left + width, :]


def _aspect_crop(x: Tensor, height: int, width: int) -> Tensor:
    """The largest centred crop of `x` with the aspect ratio of height:width (Keras'
    ``crop_to_aspect_ratio``)."""
    in_height, in_width = int(x.shape[1]), int(x.shape[2])
    crop_height = max(min(in_height, int(in_width * height / width)), 1)
    crop_width = max(min(in_width, int(in_height * width / height)), 1)
    return _crop(x, (in_height - crop_height) // 2, (in_width - crop_width) // 2,
                 crop_height, crop_width)


class _Augmentation(Layer):
    """A random layer that, called alone without ``training=``, trains (Keras')."""

    def __call__(self, inputs: Any, *args: Any, training: Any = None, **kwargs: Any) -> Any:
        if training is None and not in_layer_call() and not symbolic.is_symbolic(inputs):
            training = True
        return super().__call__(inputs, *args, training=training, **kwargs)


class Resizing(Layer):
    """Images resized to ``(height, width)`` (`sf.image.resize`: ``"bilinear"``,
    ``"nearest"``, ...); with `crop_to_aspect_ratio` the largest centred crop of the
    target's proportions is resized instead, so nothing is stretched (padding to the
    proportions, and with it Keras' fill arguments, is not supported). Floating output
    (the layer's compute dtype).

    >>> images = sf.reshape(sf.range(24.0), (1, 4, 6, 1))
    >>> sf.keras.layers.Resizing(2, 3)(images)[0, ..., 0]
    sf.Tensor([[ 3.5,  5.5,  7.5],
               [15.5, 17.5, 19.5]], shape=(2, 3), dtype=float32)
    """

    def __init__(self, height: int, width: int, interpolation: str = "bilinear",
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 antialias: bool = False, data_format: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if pad_to_aspect_ratio:
            raise NotImplementedError("Resizing: pad_to_aspect_ratio is not supported")
        if data_format not in (None, "channels_last"):
            raise NotImplementedError("Resizing: only channels_last images are supported")
        self.height, self.width = int(height), int(width)
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = bool(crop_to_aspect_ratio)
        self.antialias = antialias

    def call(self, inputs: Any) -> Tensor:
        x, single = _batch(inputs, "Resizing")
        if self.crop_to_aspect_ratio:
            x = _aspect_crop(x, self.height, self.width)
        out = resize(x, [self.height, self.width], method=self.interpolation,
                     antialias=self.antialias)
        return _unbatch(_floating(out, self.compute_dtype), single)


class CenterCrop(Layer):
    """The centred ``(height, width)`` crop of each image; images smaller than that are
    resized up (their centred crop of the target's proportions), as in Keras.

    >>> images = sf.reshape(sf.range(24.0), (1, 4, 6, 1))
    >>> sf.keras.layers.CenterCrop(2, 3)(images)[0, ..., 0]
    sf.Tensor([[ 7.,  8.,  9.],
               [13., 14., 15.]], shape=(2, 3), dtype=float32)
    """

    def __init__(self, height: int, width: int, data_format: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):
            raise NotImplementedError("CenterCrop: only channels_last images are supported")
        self.height, self.width = int(height), int(width)

    def call(self, inputs: Any) -> Tensor:
        x, single = _batch(inputs, "CenterCrop")
        x = _floating(x, self.compute_dtype)
        in_height, in_width = int(x.shape[1]), int(x.shape[2])
        if in_height >= self.height and in_width >= self.width:
            out = _crop(x, (in_height - self.height) // 2, (in_width - self.width) // 2,
                        self.height, self.width)
        else:
            out = resize(_aspect_crop(x, self.height, self.width), [self.height, self.width])
        return _unbatch(_floating(out, self.compute_dtype), single)


class RandomFlip(_Augmentation):
    """While training, each image flipped left-right and/or up-down, each with
    probability one half (`mode`: ``"horizontal"``, ``"vertical"`` or
    ``"horizontal_and_vertical"``); the identity otherwise.

    >>> flip = sf.keras.layers.RandomFlip("horizontal", seed=1)
    >>> image = sf.reshape(sf.range(4.0), (1, 2, 2, 1))
    >>> out = flip(image)[0, ..., 0].numpy().tolist()
    >>> out in ([[0.0, 1.0], [2.0, 3.0]], [[1.0, 0.0], [3.0, 2.0]])
    True
    >>> flip(image, training=False)[0, ..., 0]
    sf.Tensor([[0., 1.],
               [2., 3.]], shape=(2, 2), dtype=float32)
    """

    def __init__(self, mode: str = "horizontal_and_vertical", seed: int | None = None,
                 data_format: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if mode not in ("horizontal", "vertical", "horizontal_and_vertical"):
            raise ValueError(f"RandomFlip: mode must be 'horizontal', 'vertical' or "
                             f"'horizontal_and_vertical', got {mode!r}")
        self.mode, self.seed = mode, seed

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        x, single = _batch(inputs, "RandomFlip")
        x = _floating(x, self.compute_dtype)
        if not training:
            return _unbatch(x, single)
        for axis, flip in (("horizontal", flip_left_right), ("vertical", flip_up_down)):
            if axis in self.mode:
                draw = sf_random.uniform((x.shape[0], 1, 1, 1), 0.0, 1.0, seed=self.seed)
                x = ew.where(ew.less(draw, 0.5), flip(x), x)
        return _unbatch(x, single)


class RandomContrast(_Augmentation):
    """While training, each image's contrast scaled by a factor drawn from
    ``[1 - lower, 1 + upper]`` (`factor`: a number for both, or the pair): ``(x - mean) *
    f + mean``, the mean per channel over the image, the result clipped to `value_range`;
    the identity otherwise.

    >>> contrast = sf.keras.layers.RandomContrast(0.5, value_range=(0, 10), seed=0)
    >>> out = contrast(sf.constant([[[[4.0], [6.0]]]])).numpy().ravel()
    >>> bool(abs(out.mean() - 5.0) < 1e-5), bool(0.5 <= (out[1] - out[0]) / 2 <= 1.5)
    (True, True)
    """

    def __init__(self, factor: float | Sequence[float], value_range: Sequence[float] = (0, 255),
                 seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        lower, upper = (factor, factor) if isinstance(factor, int | float) else factor
        if not (0.0 <= float(lower) <= 1.0 and float(upper) >= 0.0):
            raise ValueError(f"RandomContrast: factor must be in [0, 1] (or a pair), got "
                             f"{factor!r}")
        self.factor, self.value_range, self.seed = factor, tuple(value_range), seed
        self.lower, self.upper = float(lower), float(upper)

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        x, single = _batch(inputs, "RandomContrast")
        x = _floating(x, self.compute_dtype)
        if not training:
            return _unbatch(x, single)
        scale = sf_random.uniform((x.shape[0], 1, 1, 1), 1.0 - self.lower, 1.0 + self.upper,
                                  dtype=x.dtype, seed=self.seed)
        mean = reduce_mean(x, axis=[1, 2], keepdims=True)
        out = ew.clip_by_value((x - mean) * scale + mean, float(self.value_range[0]),
                               float(self.value_range[1]))
        return _unbatch(out, single)


class RandomCrop(_Augmentation):
    """While training, a ``(height, width)`` crop at a random place (one for the batch,
    as Keras draws it) of images at least that large (smaller ones: their centred crop of
    the target's proportions, resized to it); the identity at inference, as in Keras 3.

    >>> crop = sf.keras.layers.RandomCrop(2, 2, seed=0)
    >>> crop(sf.zeros((3, 4, 6, 1))).shape
    (3, 2, 2, 1)
    >>> crop(sf.zeros((3, 4, 6, 1)), training=False).shape
    (3, 4, 6, 1)
    """

    def __init__(self, height: int, width: int, seed: int | None = None,
                 data_format: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):
            raise NotImplementedError("RandomCrop: only channels_last images are supported")
        self.height, self.width, self.seed = int(height), int(width), seed

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        x, single = _batch(inputs, "RandomCrop")
        x = _floating(x, self.compute_dtype)
        if not training:
            return _unbatch(x, single)
        in_height, in_width = int(x.shape[1]), int(x.shape[2])
        if in_height >= self.height and in_width >= self.width:
            for axis, size, total in ((1, self.height, in_height), (2, self.width, in_width)):
                start = sf_random.uniform((), 0, total - size + 1, dtype="int32",
                                          seed=self.seed)
                x = gather(x, sf_range(size) + start, axis=axis)
            return _unbatch(x, single)
        out = resize(_aspect_crop(x, self.height, self.width), [self.height, self.width])
        return _unbatch(_floating(out, self.compute_dtype), single)
