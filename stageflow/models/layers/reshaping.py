"""Layers that change a tensor's shape or layout, not its values (padding adds zeros)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.shape import expand_dims, gather, pad, reshape, transpose
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer, _pair

__all__ = ["Cropping1D", "Cropping2D", "Flatten", "Permute", "RepeatVector", "Reshape",
           "UpSampling1D", "UpSampling2D", "ZeroPadding1D", "ZeroPadding2D"]


class Flatten(Layer):
    """``[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]``, the dtype kept: between
    convolutions and dense layers. The non-batch dims must be known (the batch need not).

    >>> sf.layers.Flatten()(sf.ones((2, 3, 4, 5))).shape
    (2, 60)
    """

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        rest = inputs.shape[1:]
        if None in rest:
            raise ValueError(f"Flatten: the non-batch dims must be known, got shape "
                             f"{format_shape(inputs.shape)}{describe_location()}")
        return reshape(inputs, (-1, math.prod(rest)))


class Reshape(Layer):
    """Each example reshaped to `target_shape` (the batch dim kept; -1 inferred once), the
    dtype kept: ``[batch, *dims] -> [batch, *target_shape]``.

    >>> sf.layers.Reshape((2, -1))(sf.ones((4, 6))).shape
    (4, 2, 3)
    """

    def __init__(self, target_shape: Sequence[int], trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.target_shape = tuple(int(d) for d in target_shape)

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        target = list(self.target_shape)
        per_example = inputs.shape[1:]
        if -1 in target and None not in per_example:  # resolve it here: the batch may be
            known = math.prod(d for d in target if d != -1)  # the one unknown dim
            target[target.index(-1)] = math.prod(per_example) // max(known, 1)
        batch = inputs.shape[0]
        return reshape(inputs, (batch if batch is not None else -1, *target))


class Permute(Layer):
    """Each example's axes reordered: `dims` is a permutation of 1..rank-1 (the batch axis
    stays first), ``Permute((2, 1))`` turns ``[b, t, f]`` into ``[b, f, t]``.

    >>> sf.layers.Permute((2, 1))(sf.ones((4, 10, 3))).shape
    (4, 3, 10)
    """

    def __init__(self, dims: Sequence[int], trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.dims = tuple(int(d) for d in dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(f"Permute: dims must be a permutation of 1..{len(self.dims)}, "
                             f"got {dims!r}")

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        if inputs.ndim != len(self.dims) + 1:
            raise ValueError(f"Permute: dims {self.dims} are for inputs of rank "
                             f"{len(self.dims) + 1}, got shape {format_shape(inputs.shape)}"
                             f"{describe_location()}")
        return transpose(inputs, (0, *self.dims))


class RepeatVector(Layer):
    """Each example's vector repeated `n` times: ``[b, f] -> [b, n, f]`` (an encoder's
    summary fed to every step of a decoder).

    >>> sf.layers.RepeatVector(3)(sf.constant([[1.0, 2.0]]))
    sf.Tensor([[[1., 2.],
                [1., 2.],
                [1., 2.]]], shape=(1, 3, 2), dtype=float32)
    """

    def __init__(self, n: int, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.n = int(n)

    def call(self, inputs: Any) -> Tensor:
        inputs = convert_to_tensor(inputs)
        if inputs.ndim != 2:
            raise ValueError(f"RepeatVector: expected inputs [batch, features], got shape "
                             f"{format_shape(inputs.shape)}{describe_location()}")
        # a gather of row 0 n times, which a free batch dim does not hinder
        return gather(expand_dims(inputs, 1), np.zeros(self.n, np.int32), axis=1)


def _pads(value: Any, layer: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Keras' int, pair (symmetric per axis) or pair of pairs, as ((top, bottom), (left,
    right))."""
    if isinstance(value, int):
        return (value, value), (value, value)
    first, second = value
    if isinstance(first, int) and isinstance(second, int):
        return (first, first), (second, second)
    pads = tuple(first), tuple(second)
    if any(len(p) != 2 for p in pads):
        raise ValueError(f"{layer}: expected an int, a pair or a pair of pairs, got {value!r}")
    return (int(pads[0][0]), int(pads[0][1])), (int(pads[1][0]), int(pads[1][1]))


def _image(inputs: Any, layer: str) -> Tensor:
    inputs = convert_to_tensor(inputs)
    if inputs.ndim != 4:
        raise ValueError(f"{layer}: expected NHWC inputs of rank 4, got shape "
                         f"{format_shape(inputs.shape)}{describe_location()}")
    return inputs


class ZeroPadding2D(Layer):
    """Zeros around NHWC images: `padding` is an int (all sides), a pair (height, width:
    each on both sides) or ``((top, bottom), (left, right))``.

    >>> sf.layers.ZeroPadding2D(1)(sf.ones((2, 3, 3, 4))).shape
    (2, 5, 5, 4)
    >>> sf.layers.ZeroPadding2D(((1, 0), (0, 2)))(sf.ones((1, 1, 1, 1)))[0, :, :, 0]
    sf.Tensor([[0., 0., 0.],
               [1., 0., 0.]], shape=(2, 3), dtype=float32)
    """

    def __init__(self, padding: Any = (1, 1), trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.padding = _pads(padding, "ZeroPadding2D")

    def call(self, inputs: Any) -> Tensor:
        return pad(_image(inputs, "ZeroPadding2D"), ((0, 0), *self.padding, (0, 0)))


class Cropping2D(Layer):
    """NHWC images with rows and columns cut from their borders: `cropping` is an int,
    a pair or ``((top, bottom), (left, right))``, as `ZeroPadding2D`'s padding.

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> sf.layers.Cropping2D(((1, 0), (1, 2)))(x)[0, :, :, 0]
    sf.Tensor([[ 5.],
               [ 9.],
               [13.]], shape=(3, 1), dtype=float32)
    """

    def __init__(self, cropping: Any = ((0, 0), (0, 0)), trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.cropping = _pads(cropping, "Cropping2D")

    def call(self, inputs: Any) -> Tensor:
        x = _image(inputs, "Cropping2D")
        (top, bottom), (left, right) = self.cropping
        height, width = x.shape[1:3]
        if height is None or width is None or top + bottom >= height or left + right >= width:
            raise ValueError(f"Cropping2D: cropping {self.cropping} leaves nothing of images "
                             f"of shape {format_shape(x.shape)}{describe_location()}")
        return x[:, top: height - bottom, left: width - right]


class UpSampling2D(Layer):
    """NHWC images enlarged by `size` (an int or a (rows, columns) pair), each pixel
    repeated into a block (Keras' ``interpolation="nearest"``, the only one here).

    >>> x = sf.reshape(sf.constant([1.0, 2.0]), (1, 1, 2, 1))
    >>> sf.layers.UpSampling2D(2)(x)[0, :, :, 0]
    sf.Tensor([[1., 1., 2., 2.],
               [1., 1., 2., 2.]], shape=(2, 4), dtype=float32)
    """

    def __init__(self, size: int | Sequence[int] = (2, 2), interpolation: str = "nearest",
                 trainable: bool = True, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        if interpolation != "nearest":
            raise ValueError(f"UpSampling2D: only interpolation='nearest' is supported, got "
                             f"{interpolation!r}")
        self.size = _pair(size, "size", "UpSampling2D")
        self.interpolation = interpolation

    def call(self, inputs: Any) -> Tensor:
        x = _image(inputs, "UpSampling2D")
        if None in x.shape[1:3]:
            raise ValueError(f"UpSampling2D: needs inputs of known height and width, got "
                             f"{format_shape(x.shape)}{describe_location()}")
        # row i of the output is row i // size of the input: a gather along each axis
        for axis, size in ((1, self.size[0]), (2, self.size[1])):
            x = gather(x, np.arange(x.shape[axis] * size, dtype=np.int32) // size, axis=axis)
        return x


def _ends(value: int | Sequence[int], layer: str) -> tuple[int, int]:
    """Keras' 1-D amount: an int for both ends, or (start, end)."""
    ends = (value, value) if isinstance(value, int) else tuple(value)
    if len(ends) != 2 or min(int(e) for e in ends) < 0:
        raise ValueError(f"{layer}: expected a non-negative int or a pair, got {value!r}")
    return int(ends[0]), int(ends[1])


def _sequence(inputs: Any, layer: str) -> Tensor:
    inputs = convert_to_tensor(inputs)
    if inputs.ndim != 3:
        raise ValueError(f"{layer}: expected inputs [batch, steps, features], got shape "
                         f"{format_shape(inputs.shape)}{describe_location()}")
    return inputs


class ZeroPadding1D(Layer):
    """Zero steps at the start and end of ``[batch, steps, features]`` sequences:
    `padding` is an int (both ends) or a (start, end) pair.

    >>> sf.layers.ZeroPadding1D((1, 2))(sf.ones((1, 2, 1)))[0, :, 0]
    sf.Tensor([0., 1., 1., 0., 0.], shape=(5,), dtype=float32)
    """

    def __init__(self, padding: int | Sequence[int] = 1, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.padding = _ends(padding, "ZeroPadding1D")

    def call(self, inputs: Any) -> Tensor:
        return pad(_sequence(inputs, "ZeroPadding1D"), ((0, 0), self.padding, (0, 0)))


class Cropping1D(Layer):
    """Steps cut from the start and end of ``[batch, steps, features]`` sequences:
    `cropping` is an int (both ends) or a (start, end) pair.

    >>> sf.layers.Cropping1D((1, 2))(sf.reshape(sf.range(5.0), (1, 5, 1)))[0, :, 0]
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """

    def __init__(self, cropping: int | Sequence[int] = (1, 1), trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.cropping = _ends(cropping, "Cropping1D")

    def call(self, inputs: Any) -> Tensor:
        x = _sequence(inputs, "Cropping1D")
        start, end = self.cropping
        steps = x.shape[1]
        if steps is None or start + end >= steps:
            raise ValueError(f"Cropping1D: cropping {self.cropping} leaves nothing of "
                             f"sequences of shape {format_shape(x.shape)}{describe_location()}")
        return x[:, start: steps - end]


class UpSampling1D(Layer):
    """Each step of ``[batch, steps, features]`` sequences repeated `size` times.

    >>> sf.layers.UpSampling1D(2)(sf.reshape(sf.constant([1.0, 2.0]), (1, 2, 1)))[0, :, 0]
    sf.Tensor([1., 1., 2., 2.], shape=(4,), dtype=float32)
    """

    def __init__(self, size: int = 2, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        if int(size) < 1:
            raise ValueError(f"UpSampling1D: size must be a positive int, got {size!r}")
        self.size = int(size)

    def call(self, inputs: Any) -> Tensor:
        x = _sequence(inputs, "UpSampling1D")
        if x.shape[1] is None:
            raise ValueError(f"UpSampling1D: needs a known number of steps, got shape "
                             f"{format_shape(x.shape)}{describe_location()}")
        steps = np.arange(x.shape[1] * self.size, dtype=np.int32) // self.size
        return gather(x, steps, axis=1)
