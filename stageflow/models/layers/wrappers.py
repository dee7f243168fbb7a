"""Layers that apply another layer: to every time step (`TimeDistributed`), or to a
sequence in both directions (`Bidirectional`)."""

from __future__ import annotations

from typing import Any

from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.math_ops import reverse
from stageflow.frontend.ops.shape import concat, reshape
from stageflow.frontend.tensor import Tensor
from stageflow.models.layers.base import Layer

__all__ = ["Bidirectional", "TimeDistributed"]


class TimeDistributed(Layer):
    """`layer` applied to every time step of ``[batch, time, ...]`` inputs, with the same
    weights: the steps are folded into the batch, ``[batch * time, ...]``, for one call,
    and the outputs unfolded, ``[batch, time, ...out]``.

    >>> dense = sf.layers.TimeDistributed(sf.layers.Dense(8))
    >>> dense(sf.ones((2, 10, 16))).shape
    (2, 10, 8)
    >>> dense.layer.kernel.shape                     # one kernel for every step
    (16, 8)
    """

    def __init__(self, layer: Layer, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        if not isinstance(layer, Layer):
            raise TypeError(f"TimeDistributed: expected a layer, got {type(layer).__name__}")
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.layer = layer

    def call(self, inputs: Any, training: bool = False) -> Tensor:
        x = convert_to_tensor(inputs)
        if x.ndim < 3 or None in x.shape[1:]:
            raise ValueError(f"TimeDistributed: expected inputs [batch, time, ...] of known "
                             f"non-batch dims, got shape {format_shape(x.shape)}"
                             f"{describe_location()}")
        batch, steps = x.shape[:2]
        y = self.layer(reshape(x, (-1, *x.shape[2:])), training=training)
        return reshape(y, (-1 if batch is None else batch, steps, *y.shape[1:]))


_MERGES = {
    "concat": lambda f, b: concat([f, b], -1),
    "sum": ew.add,
    "mul": ew.multiply,
    "ave": lambda f, b: (f + b) * 0.5,
    None: lambda f, b: [f, b],
}


class Bidirectional(Layer):
    """A recurrent layer run forwards and, as a second layer of its own weights, backwards
    over the sequence (`backward_layer`, by default a copy of `layer` made from its
    `get_config` with `go_backwards` flipped), the two outputs merged by `merge_mode`:
    ``"concat"`` (the default: ``2 * units`` features), ``"sum"``, ``"mul"``, ``"ave"``,
    or None (the two as a list). With `return_sequences` the backward outputs are
    reversed back, so that step t of both belongs to input step t; with `return_state`
    the forward layer's states follow the output, then the backward one's.

    >>> bi = sf.layers.Bidirectional(sf.layers.LSTM(4, return_sequences=True))
    >>> bi(sf.ones((2, 5, 3))).shape
    (2, 5, 8)
    >>> bi.forward_layer.go_backwards, bi.backward_layer.go_backwards
    (False, True)
    """

    def __init__(self, layer: Layer, merge_mode: str | None = "concat",
                 backward_layer: Layer | None = None, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        if merge_mode not in _MERGES:
            raise ValueError(f"Bidirectional: merge_mode must be one of "
                             f"{', '.join(map(repr, _MERGES))}, got {merge_mode!r}")
        if backward_layer is None:
            if not hasattr(layer, "get_config") or not hasattr(layer, "go_backwards"):
                raise TypeError(f"Bidirectional: expected a recurrent layer (SimpleRNN, LSTM, "
                                f"GRU) or a backward_layer, got {type(layer).__name__}")
            config = layer.get_config()
            config.update(go_backwards=not config["go_backwards"],
                          name=f"backward_{layer.name}")
            backward_layer = type(layer)(**config)
        if layer.return_sequences != backward_layer.return_sequences or (
                layer.return_state != backward_layer.return_state):
            raise ValueError("Bidirectional: the forward and backward layers must agree on "
                             "return_sequences and return_state")
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.forward_layer, self.backward_layer = layer, backward_layer
        self.merge_mode = merge_mode

    def call(self, inputs: Any, initial_state: Any = None, training: bool = False) -> Any:
        states = [None, None]
        if initial_state is not None:  # the forward layer's states, then the backward one's
            half = len(initial_state) // 2
            states = [list(initial_state[:half]), list(initial_state[half:])]
        forward = self.forward_layer(inputs, initial_state=states[0], training=training)
        backward = self.backward_layer(inputs, initial_state=states[1], training=training)
        forward_states = backward_states = []
        if self.forward_layer.return_state:
            forward, *forward_states = forward
            backward, *backward_states = backward
        if self.forward_layer.return_sequences:
            backward = reverse(backward, 1)
        merged = _MERGES[self.merge_mode](forward, backward)
        if not forward_states:
            return merged
        return [*(merged if self.merge_mode is None else [merged]), *forward_states,
                *backward_states]
