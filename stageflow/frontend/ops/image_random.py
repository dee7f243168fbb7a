"""`sf.image`'s random augmentations (TensorFlow's ``tf.image.random_*`` and
``tf.image.stateless_random_*``): flips, brightness, contrast, hue, saturation and crops
by random amounts.

Each draws its amounts with `sf.random.uniform` (op seed `seed`, TensorFlow's seed rule:
with ``sf.random.set_seed`` the same program draws the same amounts, and repeated calls
with one op seed continue its stream) or, for the stateless forms, with
`sf.random.stateless_uniform` of the pair `seed` (the same seed, the same amounts), then
applies the matching ``adjust_*``, flip or crop. The draws are TensorFlow's in kind and
range (one scalar per call, or one per image of a batch for flips), not its numbers.
Everything stages: the random amounts are tensors, chosen with `where` and `gather`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import add, less, mod, where
from stageflow.frontend.ops.image import (
    adjust_brightness,
    adjust_contrast,
    flip_left_right,
    flip_up_down,
    image_tensor,
)
from stageflow.frontend.ops.image_color import adjust_hue, adjust_saturation
from stageflow.frontend.ops.random import stateless_uniform, uniform
from stageflow.frontend.ops.shape import gather, reshape
from stageflow.frontend.tensor import Tensor

__all__ = ["random_brightness", "random_contrast", "random_crop", "random_flip_left_right",
           "random_flip_up_down", "random_hue", "random_saturation", "stateless_random_brightness",
           "stateless_random_contrast", "stateless_random_crop",
           "stateless_random_flip_left_right", "stateless_random_flip_up_down",
           "stateless_random_hue", "stateless_random_saturation"]

Draw = Callable[..., Tensor]


def _seeded(seed: Any) -> Draw:
    return lambda shape, minval=0.0, maxval=1.0, dtype=dtypes.float32: uniform(
        shape, minval, maxval, dtype, seed=seed)


def _stateless(seed: Any) -> Draw:
    return lambda shape, minval=0.0, maxval=1.0, dtype=dtypes.float32: stateless_uniform(
        shape, seed, minval, maxval, dtype)


def _flip(op: Callable[..., Any], image: Any, flip: Callable[[Tensor], Tensor],
          draw: Draw) -> Tensor:
    image = image_tensor(image, op)
    if image.ndim == 3:
        return where(less(draw([]), 0.5), flip(image), image)
    batch = image.shape[0]
    if batch is None:
        raise ValueError(f"sf.image.{op.__name__}: the batch size must be known when traced"
                         f"{describe_location()}")
    chosen = reshape(less(draw([batch]), 0.5), (batch, 1, 1, 1))
    return where(chosen, flip(image), image)


def random_flip_left_right(image: Any, seed: int | None = None) -> Tensor:
    """`image` mirrored left to right with probability one half (each image of a batch
    on its own).

    >>> sf.image.random_flip_left_right(sf.ones((2, 3, 1)), seed=5).shape
    (2, 3, 1)
    """
    return _flip(random_flip_left_right, image, flip_left_right, _seeded(seed))


def random_flip_up_down(image: Any, seed: int | None = None) -> Tensor:
    """`image` mirrored upside down with probability one half (each image of a batch on
    its own).

    >>> sf.image.random_flip_up_down(sf.ones((2, 3, 1)), seed=5).shape
    (2, 3, 1)
    """
    return _flip(random_flip_up_down, image, flip_up_down, _seeded(seed))


def stateless_random_flip_left_right(image: Any, seed: Any) -> Tensor:
    """`random_flip_left_right` decided by the seed pair `seed`.

    >>> a = sf.image.stateless_random_flip_left_right(sf.eye(3)[..., None], seed=[1, 2])
    >>> b = sf.image.stateless_random_flip_left_right(sf.eye(3)[..., None], seed=[1, 2])
    >>> bool(sf.reduce_all(a == b))
    True
    """
    return _flip(stateless_random_flip_left_right, image, flip_left_right, _stateless(seed))


def stateless_random_flip_up_down(image: Any, seed: Any) -> Tensor:
    """`random_flip_up_down` decided by the seed pair `seed`.

    >>> sf.image.stateless_random_flip_up_down(sf.ones((2, 3, 1)), seed=[1, 2]).shape
    (2, 3, 1)
    """
    return _flip(stateless_random_flip_up_down, image, flip_up_down, _stateless(seed))


def _fail(op: str, message: str) -> ValueError:
    return ValueError(f"sf.image.{op}: {message}{describe_location()}")


def _brightness(op: str, image: Any, max_delta: float, draw: Draw) -> Tensor:
    if max_delta < 0:
        raise _fail(op, f"max_delta must be non-negative, got {max_delta!r}")
    return adjust_brightness(image, draw([], -max_delta, max_delta))


def _range(op: str, lower: float, upper: float) -> None:
    if upper <= lower:
        raise _fail(op, f"upper must be > lower, got {lower!r} and {upper!r}")
    if lower < 0:
        raise _fail(op, f"lower must be non-negative, got {lower!r}")


def _hue(op: str, image: Any, max_delta: float, draw: Draw) -> Tensor:
    if max_delta > 0.5:
        raise _fail(op, f"max_delta must be <= 0.5, got {max_delta!r}")
    if max_delta < 0:
        raise _fail(op, f"max_delta must be non-negative, got {max_delta!r}")
    return adjust_hue(image, draw([], -max_delta, max_delta))


def random_brightness(image: Any, max_delta: float, seed: int | None = None) -> Tensor:
    """`adjust_brightness` by a delta drawn uniformly from ``[-max_delta, max_delta)``.

    >>> x = sf.image.random_brightness(sf.fill((2, 2, 1), 0.5), 0.1, seed=3)
    >>> bool(sf.reduce_all(sf.abs(x - 0.5) <= 0.1))
    True
    """
    return _brightness("random_brightness", image, max_delta, _seeded(seed))


def stateless_random_brightness(image: Any, max_delta: float, seed: Any) -> Tensor:
    """`random_brightness` drawn from the seed pair `seed`.

    >>> sf.image.stateless_random_brightness(sf.zeros((2, 2, 1)), 0.2, seed=[1, 2]).shape
    (2, 2, 1)
    """
    return _brightness("stateless_random_brightness", image, max_delta, _stateless(seed))


def random_contrast(image: Any, lower: float, upper: float, seed: int | None = None) -> Tensor:
    """`adjust_contrast` by a factor drawn uniformly from ``[lower, upper)`` (0 <= lower <
    upper).

    >>> sf.image.random_contrast(sf.ones((2, 2, 3)), 0.5, 1.5, seed=3)[0, 0]
    sf.Tensor([1., 1., 1.], shape=(3,), dtype=float32)
    """
    _range("random_contrast", lower, upper)
    return adjust_contrast(image, _seeded(seed)([], lower, upper))


def stateless_random_contrast(image: Any, lower: float, upper: float, seed: Any) -> Tensor:
    """`random_contrast` drawn from the seed pair `seed`.

    >>> sf.image.stateless_random_contrast(sf.ones((2, 2, 3)), 0.5, 1.5, seed=[1, 2]).shape
    (2, 2, 3)
    """
    _range("stateless_random_contrast", lower, upper)
    return adjust_contrast(image, _stateless(seed)([], lower, upper))


def random_hue(image: Any, max_delta: float, seed: int | None = None) -> Tensor:
    """`adjust_hue` by a delta drawn uniformly from ``[-max_delta, max_delta)`` (0 <=
    max_delta <= 0.5).

    >>> sf.image.random_hue(sf.fill((1, 1, 3), 0.5), 0.2, seed=3)
    sf.Tensor([[[0.5, 0.5, 0.5]]], shape=(1, 1, 3), dtype=float32)
    """
    return _hue("random_hue", image, max_delta, _seeded(seed))


def stateless_random_hue(image: Any, max_delta: float, seed: Any) -> Tensor:
    """`random_hue` drawn from the seed pair `seed`.

    >>> sf.image.stateless_random_hue(sf.ones((1, 1, 3)), 0.2, seed=[1, 2]).shape
    (1, 1, 3)
    """
    return _hue("stateless_random_hue", image, max_delta, _stateless(seed))


def random_saturation(image: Any, lower: float, upper: float,
                      seed: int | None = None) -> Tensor:
    """`adjust_saturation` by a factor drawn uniformly from ``[lower, upper)`` (0 <= lower
    < upper).

    >>> sf.image.random_saturation(sf.fill((1, 1, 3), 0.5), 0.5, 1.5, seed=3)
    sf.Tensor([[[0.5, 0.5, 0.5]]], shape=(1, 1, 3), dtype=float32)
    """
    _range("random_saturation", lower, upper)
    return adjust_saturation(image, _seeded(seed)([], lower, upper))


def stateless_random_saturation(image: Any, lower: float, upper: float, seed: Any) -> Tensor:
    """`random_saturation` drawn from the seed pair `seed`.

    >>> sf.image.stateless_random_saturation(sf.ones((1, 1, 3)), 0.5, 1.5, [1, 2]).shape
    (1, 1, 3)
    """
    _range("stateless_random_saturation", lower, upper)
    return adjust_saturation(image, _stateless(seed)([], lower, upper))


def _crop(op: str, value: Any, size: Any, draw: Draw) -> Tensor:
    value = convert_to_tensor(value)
    sizes = [int(s) for s in np.asarray(size.numpy() if isinstance(size, Tensor) else size)
             .reshape(-1)]
    shape = tuple(value.shape)
    if len(sizes) != len(shape):
        raise _fail(op, f"size needs one entry per dim of the rank-{len(shape)} value, got "
                        f"{sizes}")
    if any(d is None for d in shape):
        raise _fail(op, f"the value's shape must be known when traced, got {shape}")
    if any(s < 0 or s > d for s, d in zip(sizes, shape, strict=True)):
        raise _fail(op, f"need value.shape >= size, got {shape} and {sizes}")
    limits = np.asarray([d - s + 1 for s, d in zip(sizes, shape, strict=True)], np.int32)
    offsets = mod(draw([len(sizes)], 0, np.iinfo(np.int32).max, dtypes.int32), limits)
    for axis, size_here in enumerate(sizes):
        value = gather(value, add(np.arange(size_here, dtype=np.int32), offsets[axis]),
                       axis=axis)
    return value


def random_crop(value: Any, size: Any, seed: int | None = None) -> Tensor:
    """A block of `size` (one int per dim of `value`, each at most that dim) of `value` at a
    uniformly drawn offset.

    >>> sf.image.random_crop(sf.reshape(sf.range(16), (4, 4)), [2, 3], seed=1).shape
    (2, 3)
    """
    return _crop("random_crop", value, size, _seeded(seed))


def stateless_random_crop(value: Any, size: Any, seed: Any) -> Tensor:
    """`random_crop` at an offset drawn from the seed pair `seed`.

    >>> sf.image.stateless_random_crop(sf.zeros((4, 4, 3)), [2, 2, 3], seed=[1, 2]).shape
    (2, 2, 3)
    """
    return _crop("stateless_random_crop", value, size, _stateless(seed))
