"""Layers that pass their inputs on: Keras' `InputLayer` (a declared input shape),
`Identity`, and `Masking` (timesteps equal to the mask value zeroed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.math_ops import reduce_any
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Identity", "InputLayer", "Masking"]


class InputLayer(Layer):
    """A model's declared input: ``shape`` without the batch dim (or ``batch_shape`` with
    it); first in a `Sequential`, it builds the model's layers as they are added, as
    `sf.keras.Input` does. Called, it returns its input.

    >>> model = sf.keras.Sequential([sf.keras.layers.InputLayer(shape=(3,)),
    ...                              sf.keras.layers.Dense(2)])
    >>> [tuple(v.shape) for v in model.variables]
    [(3, 2), (2,)]
    """

    def __init__(self, shape: Sequence[int | None] | None = None, batch_size: int | None = None,
                 dtype: Any = None, sparse: bool | None = None,
                 batch_shape: Sequence[int | None] | None = None, input_tensor: Any = None,
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(name=name)
        del sparse, input_tensor
        shape = kwargs.pop("input_shape", shape)
        if kwargs:
            raise TypeError(f"InputLayer: unexpected arguments {sorted(kwargs)}")
        if batch_shape is None and shape is not None:
            batch_shape = (batch_size, *shape)
        if batch_shape is not None:
            self.batch_input_shape = tuple(None if d is None else int(d) for d in batch_shape)
        self.input_dtype = dtype

    def call(self, inputs: Any) -> Any:
        return inputs


class Identity(Layer):
    """Its input, unchanged (a placeholder in a model's graph).

    >>> sf.keras.layers.Identity()(sf.constant([1.0, 2.0]))
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """

    def call(self, inputs: Any) -> Any:
        return inputs


class Masking(Layer):
    """Timesteps whose features all equal `mask_value` zeroed (Keras' output; the mask
    itself is not passed on to later layers here).

    >>> sf.keras.layers.Masking(mask_value=0.0)(sf.constant([[[1.0, 2.0], [0.0, 0.0]]]))
    sf.Tensor([[[1., 2.],
                [0., 0.]]], shape=(1, 2, 2), dtype=float32)
    """

    def __init__(self, mask_value: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mask_value = mask_value

    def call(self, inputs: Any) -> Tensor:
        x = convert_to_tensor(inputs)
        keep = reduce_any(ew.not_equal(x, self.mask_value), axis=-1, keepdims=True)
        return x * ew.cast(keep, x.dtype)
