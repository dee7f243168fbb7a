"""`Sequential`: layers applied in order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.spec import TensorSpec
from stageflow.models.layers import symbolic
from stageflow.models.layers.base import Layer, takes_training
from stageflow.models.training import Model

__all__ = ["Sequential"]


class Sequential(Model):
    """Layers (or any callables) applied in order: ``Sequential([Dense(64, "relu"),
    Dense(10)])``. Its variables are its layers' variables, in layer order, so an optimizer
    or a checkpoint given the model reaches them all. A `Model`: it compiles and fits.

    >>> model = sf.layers.Sequential([sf.layers.Dense(8, activation="relu"),
    ...                               sf.layers.Dropout(0.5),
    ...                               sf.layers.Dense(2)])
    >>> model(sf.ones((4, 3)), training=True).shape   # Dropout gets training=True
    (4, 2)
    >>> [v.shape for v in model.trainable_variables]
    [(3, 8), (8,), (8, 2), (2,)]
    """

    _TRACKING_IGNORED = Model._TRACKING_IGNORED | {"_symbolic_output"}

    def __init__(self, layers: Iterable[Callable] | None = None, trainable: bool = True,
                 name: str | None = None) -> None:
        super().__init__(trainable=trainable, name=name)
        self.layers: list[Callable] = []
        # With an `Input` (or a first layer's ``input_shape=``) the layers are built as
        # they are added, as Keras does, so `summary` works before any call.
        self._symbolic_output: symbolic.KerasTensor | None = None
        for layer in layers or ():
            self.add(layer)

    def add(self, layer: Callable | symbolic.KerasTensor) -> None:
        """Append a layer; an `sf.keras.Input` (first only) gives the model its input."""
        if isinstance(layer, symbolic.KerasTensor):
            if self.layers or self._symbolic_output is not None:
                raise ValueError(f"Sequential: an Input must come first{describe_location()}")
            self._start(layer)
            return
        if not callable(layer):
            raise TypeError(f"Sequential: layers must be callable, got {type(layer).__name__}")
        shape = getattr(layer, "batch_input_shape", None)
        if not self.layers and self._symbolic_output is None and shape is not None:
            self._start(symbolic.Input(shape[1:], batch_size=shape[0]))
        self.layers = [*self.layers, layer]  # an assignment: a restore may wait for it
        if self._symbolic_output is not None:
            self._symbolic_output = layer(self._symbolic_output)

    def _start(self, value: symbolic.KerasTensor) -> None:
        self._symbolic_output = value
        self.input_spec = TensorSpec((None, *value.shape[1:]), value.dtype)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Build every layer for inputs of `input_shape` (batch dim first), as Keras'
        ``model.build((None, 6))`` does, so the variables exist before a call (in a
        distribution strategy's scope, say), for float32 inputs. Layers that are plain
        callables build on the first call instead, and so does every layer when the first
        call builds the model (it knows the input's dtype: `_dtype` is set by then).

        >>> model = sf.keras.Sequential([sf.keras.layers.Dense(4), sf.keras.layers.Dense(2)])
        >>> model.build((None, 3))
        >>> [tuple(v.shape) for v in model.variables]
        [(3, 4), (4,), (4, 2), (2,)]
        """
        if self._dtype is not None or self._symbolic_output is not None or not self.layers \
                or not all(isinstance(layer, Layer) for layer in self.layers):
            return
        self._start(symbolic.Input(tuple(input_shape[1:]), batch_size=input_shape[0]))
        for layer in self.layers:
            self._symbolic_output = layer(self._symbolic_output)

    def get_config(self) -> dict[str, Any]:
        """Its name, trainability and layers, and the input shape and dtype where it was
        given an `Input` (or a first layer's ``input_shape=``)."""
        config: dict[str, Any] = {"name": self.name, "trainable": self.trainable,
                                  "layers": list(self.layers)}
        if self._symbolic_output is not None and self.input_spec is not None:
            config["input_shape"] = list(self.input_spec.shape[1:])
            config["input_dtype"] = self.input_spec.dtype.name
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Sequential:
        """A new `Sequential` from a `get_config` config (its layers already made)."""
        config = dict(config)
        layers, shape = config.pop("layers"), config.pop("input_shape", None)
        dtype = config.pop("input_dtype", None)
        model = cls(**config)
        if shape is not None:
            model.add(symbolic.Input(tuple(shape), dtype=dtype))
        for layer in layers:
            model.add(layer)
        return model

    def call(self, inputs: Any, training: bool = False) -> Any:
        """Each layer in turn; those that take ``training`` get this call's mode."""
        outputs = inputs
        for layer in self.layers:
            if takes_training(layer):
                outputs = layer(outputs, training=training)
            else:
                outputs = layer(outputs)
        return outputs
