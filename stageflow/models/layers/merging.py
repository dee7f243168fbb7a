"""Layers that merge several inputs into one: elementwise (`Add`, `Subtract`, `Multiply`,
`Average`, `Maximum`, `Minimum`, whose inputs broadcast as the ops' do), `Concatenate` and
`Dot`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.linalg import matmul
from stageflow.frontend.ops.normalization import l2_normalize
from stageflow.frontend.ops.shape import concat, expand_dims, squeeze, transpose
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Add", "Average", "Concatenate", "Dot", "Maximum", "Minimum", "Multiply",
           "Subtract"]


class _Merge(Layer):
    """A layer over a list of inputs (at least `minimum`, at most `maximum`), folded
    pairwise with `_combine`."""

    minimum: int = 1
    maximum: int | None = None

    def __init__(self, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.built = True  # nothing to create, and the input is a list, not a tensor

    def call(self, inputs: Sequence[Any]) -> Tensor:
        count = len(inputs) if isinstance(inputs, list | tuple) else 0
        if count < self.minimum or (self.maximum is not None and count > self.maximum):
            wanted = ("a non-empty list" if self.minimum == 1 else
                      f"a list of exactly {self.minimum}" if self.maximum == self.minimum
                      else f"a list of at least {self.minimum}")
            got = f"{count}" if isinstance(inputs, list | tuple) else (
                f"a {type(inputs).__name__}")
            raise ValueError(f"{type(self).__name__}: expected {wanted} of tensors, got "
                             f"{got}{describe_location()}")
        return self._merge([convert_to_tensor(value) for value in inputs])

    def _merge(self, inputs: list[Tensor]) -> Tensor:
        total = inputs[0]
        for value in inputs[1:]:
            total = self._combine(total, value)
        return total

    _combine: Callable[[Any, Any], Tensor] = staticmethod(ew.add)


class Add(_Merge):
    """The sum of a list of inputs: ``Add()([residual, shortcut])`` closes a residual
    block. The inputs broadcast against each other, as `sf.add`'s do.

    >>> shortcut = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> sf.layers.Add()([sf.ones((2, 2)), shortcut])
    sf.Tensor([[2., 3.],
               [4., 5.]], shape=(2, 2), dtype=float32)
    """


class Subtract(_Merge):
    """The first of two inputs minus the second.

    >>> sf.layers.Subtract()([sf.constant([3.0, 5.0]), sf.constant([1.0, 1.0])])
    sf.Tensor([2., 4.], shape=(2,), dtype=float32)
    """

    minimum = maximum = 2
    _combine = staticmethod(ew.subtract)


class Multiply(_Merge):
    """The elementwise product of a list of inputs (a gate times features).

    >>> sf.layers.Multiply()([sf.constant([2.0, 3.0]), sf.constant([0.5, 2.0])])
    sf.Tensor([1., 6.], shape=(2,), dtype=float32)
    """

    _combine = staticmethod(ew.multiply)


class Maximum(_Merge):
    """The elementwise maximum of a list of inputs.

    >>> sf.layers.Maximum()([sf.constant([1.0, 5.0]), sf.constant([3.0, 2.0])])
    sf.Tensor([3., 5.], shape=(2,), dtype=float32)
    """

    _combine = staticmethod(ew.maximum)


class Minimum(_Merge):
    """The elementwise minimum of a list of inputs.

    >>> sf.layers.Minimum()([sf.constant([1.0, 5.0]), sf.constant([3.0, 2.0])])
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """

    _combine = staticmethod(ew.minimum)


class Average(_Merge):
    """The elementwise mean of a list of inputs (an ensemble's outputs).

    >>> sf.layers.Average()([sf.constant([1.0, 2.0]), sf.constant([3.0, 6.0])])
    sf.Tensor([2., 4.], shape=(2,), dtype=float32)
    """

    def _merge(self, inputs: list[Tensor]) -> Tensor:
        return super()._merge(inputs) * (1.0 / len(inputs))


class Concatenate(_Merge):
    """A list of inputs joined along `axis` (the last by default), as `sf.concat` joins
    them: ``Concatenate()([features, embedding])``.

    >>> sf.layers.Concatenate()([sf.ones((2, 1)), sf.zeros((2, 2))])
    sf.Tensor([[1., 0., 0.],
               [1., 0., 0.]], shape=(2, 3), dtype=float32)
    """

    minimum = 2

    def __init__(self, axis: int = -1, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.axis = int(axis)

    def _merge(self, inputs: list[Tensor]) -> Tensor:
        return concat(inputs, self.axis)


class Dot(_Merge):
    """The dot product of two batches of vectors or matrices along `axes` (an int for both,
    or one per input; the batch axis 0 is never one), as Keras' `batch_dot`: ``[b, d]``
    and ``[b, d]`` give ``[b, 1]``; ``[b, m, d]`` and ``[b, n, d]`` with ``axes=2`` give
    ``[b, m, n]`` (attention scores). With `normalize` the inputs are L2-normalised along
    the axes first, so the result is the cosine similarity. Inputs of rank 2 or 3.

    >>> sf.layers.Dot(axes=1)([sf.constant([[1.0, 2.0]]), sf.constant([[3.0, 4.0]])])
    sf.Tensor([[11.]], shape=(1, 1), dtype=float32)
    >>> sf.layers.Dot(axes=(1, 1))([sf.ones((2, 3, 4)), sf.ones((2, 3, 5))]).shape
    (2, 4, 5)
    """

    minimum = maximum = 2

    def __init__(self, axes: int | Sequence[int], normalize: bool = False,
                 trainable: bool = True, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.axes = (int(axes), int(axes)) if isinstance(axes, int) else tuple(
            int(a) for a in axes)
        if len(self.axes) != 2:
            raise ValueError(f"Dot: axes must be an int or a pair, got {axes!r}")
        self.normalize = bool(normalize)

    def _merge(self, inputs: list[Tensor]) -> Tensor:
        x, y = inputs
        if x.ndim not in (2, 3) or y.ndim not in (2, 3):
            raise ValueError(f"Dot: takes inputs of rank 2 or 3, got shapes "
                             f"{format_shape(x.shape)} and {format_shape(y.shape)}"
                             f"{describe_location()}")
        ax, ay = self.axes[0] % x.ndim, self.axes[1] % y.ndim
        if 0 in (ax, ay) or x.shape[ax] != y.shape[ay]:
            raise ValueError(f"Dot: axes {self.axes} must name non-batch dims of one size, "
                             f"got shapes {format_shape(x.shape)} and {format_shape(y.shape)}"
                             f"{describe_location()}")
        if self.normalize:
            x, y = l2_normalize(x, ax), l2_normalize(y, ay)
        # [b, rest of x, contracted] @ [b, contracted, rest of y]: a missing rest is a 1
        x = transpose(x, (0, 3 - ax, ax)) if x.ndim == 3 else expand_dims(x, 1)
        y = transpose(y, (0, ay, 3 - ay)) if y.ndim == 3 else expand_dims(y, 2)
        out = matmul(x, y)
        if inputs[1].ndim == 2:
            out = squeeze(out, 2)
        if inputs[0].ndim == 2 and out.ndim == 3:
            out = squeeze(out, 1)
        return out
