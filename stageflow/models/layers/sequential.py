"""`Sequential`: layers applied in order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stageflow.models.layers.base import takes_training
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

    def __init__(self, layers: Iterable[Callable] | None = None, trainable: bool = True,
                 name: str | None = None) -> None:
        super().__init__(trainable=trainable, name=name)
        self.layers: list[Callable] = []
        for layer in layers or ():
            self.add(layer)

    def add(self, layer: Callable) -> None:
        if not callable(layer):
            raise TypeError(f"Sequential: layers must be callable, got {type(layer).__name__}")
        self.layers = [*self.layers, layer]  # an assignment: a restore may wait for it

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Nothing to do: each layer builds itself on its first call."""

    def call(self, inputs: Any, training: bool = False) -> Any:
        """Each layer in turn; those that take ``training`` get this call's mode."""
        outputs = inputs
        for layer in self.layers:
            if takes_training(layer):
                outputs = layer(outputs, training=training)
            else:
                outputs = layer(outputs)
        return outputs
