"""Preprocessing layers: rescaling and normalisation of the inputs inside the model, so
that a saved model takes raw data (Keras' `Rescaling` and `Normalization`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Normalization", "Rescaling"]

_EPSILON = 1e-7  # Keras' floor of the standard deviation (its `backend.epsilon()`)


def _floating(inputs: Any, dtype: Any) -> Tensor:
    x = convert_to_tensor(inputs)
    return x if x.dtype == dtype else ew.cast(x, dtype)


class Rescaling(Layer):
    """``inputs * scale + offset``, in the layer's floating dtype (float32 for integer
    inputs): ``Rescaling(1 / 255)`` maps pixels to [0, 1], ``Rescaling(1 / 127.5, -1)`` to
    [-1, 1].

    >>> sf.layers.Rescaling(1 / 127.5, offset=-1.0)(sf.constant([[0, 255]], sf.uint8))
    sf.Tensor([[-1.,  1.]], shape=(1, 2), dtype=float32)
    """

    def __init__(self, scale: float, offset: float = 0.0, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.scale, self.offset = float(scale), float(offset)

    def call(self, inputs: Any) -> Tensor:
        return _floating(inputs, self.compute_dtype) * self.scale + self.offset


class Normalization(Layer):
    """``(inputs - mean) / max(sqrt(variance), 1e-7)`` per index of `axis` (the features,
    by default the last; None: one mean for everything), as Keras' layer: give `mean` and
    `variance`, or call `adapt(data)` to compute them from data (the population variance
    over every other axis). They are non-trainable variables, saved with the model.

    >>> norm = sf.layers.Normalization()
    >>> norm.adapt(np.array([[1.0, 10.0], [3.0, 30.0]]))
    >>> norm.mean.numpy(), norm.variance.numpy()
    (array([ 2., 20.], dtype=float32), array([  1., 100.], dtype=float32))
    >>> norm(sf.constant([[2.0, 40.0]]))
    sf.Tensor([[0., 2.]], shape=(1, 2), dtype=float32)
    >>> sf.layers.Normalization(mean=3.0, variance=4.0)(sf.constant([5.0]))
    sf.Tensor([1.], shape=(1,), dtype=float32)
    """

    def __init__(self, axis: int | None = -1, mean: Any = None, variance: Any = None,
                 trainable: bool = True, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        if (mean is None) != (variance is None):
            raise ValueError("Normalization: give both mean and variance, or neither (and "
                             "call adapt)")
        self.axis = None if axis is None else int(axis)
        self._given = None if mean is None else (np.asarray(mean), np.asarray(variance))
        self.mean = self.variance = None

    def _stat_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int, ...]:
        """The statistics' shape, broadcasting against the inputs: the size of `axis`
        followed by ones for the axes after it (``(features,)`` for the last)."""
        if self.axis is None:
            return ()
        if len(input_shape) == 1:  # a batch of scalars is one feature, as in Keras
            input_shape = (*input_shape, 1)
        rank = len(input_shape)
        if not -rank <= self.axis < rank or self.axis % rank == 0:
            raise ValueError(f"Normalization {self.name!r}: axis {self.axis} is not a "
                             f"non-batch axis of inputs of shape {format_shape(input_shape)}"
                             f"{describe_location()}")
        axis = self.axis % rank
        if input_shape[axis] is None:
            raise ValueError(f"Normalization {self.name!r}: axis {self.axis} of inputs of "
                             f"shape {format_shape(input_shape)} must be known")
        return (int(input_shape[axis]), *([1] * (rank - axis - 1)))

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        shape = self._stat_shape(input_shape)
        self.mean = self.add_weight("mean", shape, "zeros", trainable=False)
        self.variance = self.add_weight("variance", shape, "ones", trainable=False)
        if self._given is not None:
            mean, variance = (np.broadcast_to(v, shape) for v in self._given)
            self._set(mean, variance)

    def _set(self, mean: np.ndarray, variance: np.ndarray) -> None:
        self.mean.assign(np.asarray(mean, self.mean.dtype))
        self.variance.assign(np.asarray(variance, self.variance.dtype))

    def adapt(self, data: Any) -> None:
        """Set `mean` and `variance` from `data`: an array of examples ``[n, ...]``, or an
        iterable of such batches (an `sf.data.Dataset`); computed eagerly, in float64, and
        kept in the layer's dtype (float32 unless given)."""
        if isinstance(data, np.ndarray | Tensor) or not isinstance(data, Iterable):
            batches = [np.asarray(data)]
        else:
            batches = [np.asarray(batch) for batch in data]
        values = np.concatenate(batches).astype(np.float64)
        if values.ndim == 1:
            values = values[:, None]
        if not self.built:
            self._dtype = self._dtype or dtypes.float32
            self.build(values.shape)
            self.built = True
        shape = self.mean.shape
        axis = None if self.axis is None else self.axis % values.ndim
        reduced = tuple(a for a in range(values.ndim) if a != axis)
        if axis is not None and values.shape[axis] != shape[0]:
            raise ValueError(f"Normalization {self.name!r}: adapt's data of shape "
                             f"{values.shape} does not match the layer's {shape[0]} values "
                             f"along axis {self.axis}")
        self._set(values.mean(reduced).reshape(shape), values.var(reduced).reshape(shape))

    def call(self, inputs: Any) -> Tensor:
        x = _floating(inputs, self.compute_dtype)
        return (x - self.mean) / ew.maximum(ew.sqrt(self.variance), _EPSILON)
