"""Recurrent layers: `SimpleRNN`, `LSTM` and `GRU` (Keras' names, arguments, weights and
gate orders), each one `sf.while_loop` over the time steps, not unrolled.

The inputs' projections for every step are one matmul before the loop; the loop carries
the state and, for ``return_sequences``, the outputs, written a row (a time step) at a
time with `dynamic_update_index`, which a compiled loop does in place. Staged, the IR
holds the cell once whatever the sequence length, and the loop's gradient comes from
`while_loop`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core.source import describe_location
from stageflow.frontend.ops.control import while_loop
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import zeros_like
from stageflow.frontend.ops.elementwise import add, less, subtract
from stageflow.frontend.ops.linalg import matmul
from stageflow.frontend.ops.shape import dynamic_update_index, transpose
from stageflow.frontend.tensor import Tensor
from stageflow.models.activations import get_activation
from stageflow.models.initializers import get_initializer
from stageflow.models.layers.base import Layer

__all__ = ["GRU", "LSTM", "SimpleRNN"]


class _Recurrent(Layer):
    """The loop over time shared by the cells: `_step(x_t, state) -> (output, state)`."""

    gates = 1
    _TRACKING_IGNORED = Layer._TRACKING_IGNORED | {"_config"}

    def __init__(self, units: int, activation: str | Callable = "tanh",
                 recurrent_activation: str | Callable = "sigmoid", use_bias: bool = True,
                 kernel_initializer: str | Callable = "glorot_uniform",
                 recurrent_initializer: str | Callable = "orthogonal",
                 bias_initializer: str | Callable = "zeros", return_sequences: bool = False,
                 return_state: bool = False, go_backwards: bool = False,
                 trainable: bool = True, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        if int(units) < 1:
            raise ValueError(f"{type(self).__name__}: units must be positive, got {units!r}")
        self._config = {
            "units": units, "activation": activation,
            "recurrent_activation": recurrent_activation, "use_bias": use_bias,
            "kernel_initializer": kernel_initializer,
            "recurrent_initializer": recurrent_initializer,
            "bias_initializer": bias_initializer, "return_sequences": return_sequences,
            "return_state": return_state, "go_backwards": go_backwards,
            "trainable": trainable, "name": self.name, "dtype": dtype}
        self.units = int(units)
        self.activation = get_activation(activation)
        self.recurrent_activation = get_activation(recurrent_activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.recurrent_initializer = get_initializer(recurrent_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.return_sequences, self.return_state = bool(return_sequences), bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.kernel = self.recurrent_kernel = self.bias = None

    def get_config(self) -> dict[str, Any]:
        """The arguments the layer was made with (Keras' `get_config`):
        ``type(layer)(**config)`` makes a fresh, unbuilt copy, as `Bidirectional` makes
        its backward layer.

        >>> config = sf.layers.GRU(4, go_backwards=True, name="gru_b").get_config()
        >>> config["units"], config["go_backwards"], sf.layers.GRU(**config).name
        (4, True, 'gru_b')
        """
        return dict(self._config)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(f"{type(self).__name__}: inputs must be [batch, time, features] "
                             f"with known features, got {input_shape}{describe_location()}")
        width = self.gates * self.units
        self.kernel = self.add_weight("kernel", (input_shape[-1], width),
                                      self.kernel_initializer)
        self.recurrent_kernel = self.add_weight("recurrent_kernel", (self.units, width),
                                                self.recurrent_initializer)
        if self.use_bias:
            self.bias = self.add_weight("bias", self._bias_shape(), self._bias_initializer())

    def _bias_shape(self) -> tuple[int, ...]:
        return (self.gates * self.units,)

    def _bias_initializer(self) -> Callable[..., Any]:
        return self.bias_initializer

    def _input_bias(self) -> Any:
        return self.bias

    def call(self, inputs: Any, initial_state: Any = None) -> Any:
        inputs = convert_to_tensor(inputs)
        steps = inputs.shape[1]
        if steps is None:
            raise ValueError(f"{type(self).__name__}: the number of time steps must be known "
                             f"(an input_signature with None batch is fine){describe_location()}")
        projected = matmul(transpose(inputs, (1, 0, 2)), self.kernel)  # [time, batch, gates]
        if self._input_bias() is not None:
            projected = projected + self._input_bias()
        h0 = zeros_like(projected[0][:, : self.units])
        state = list(initial_state) if isinstance(initial_state, list | tuple) else (
            [initial_state] if initial_state is not None else self._zero_state(h0))
        outputs = zeros_like(projected[:, :, : self.units])  # [time, batch, units]

        def body(t: Any, outputs: Any, *state: Any) -> list:
            position = subtract(steps - 1, t) if self.go_backwards else t
            output, new_state = self._step(projected[position], list(state))
            if self.return_sequences:
                outputs = dynamic_update_index(outputs, output, t)
            return [add(t, 1), outputs, *new_state]

        final = while_loop(lambda t, *_: less(t, steps), body,
                           [convert_to_tensor(np.int32(0)), outputs, *state],
                           maximum_iterations=steps)
        sequence, state = final[1], final[2:]
        result = transpose(sequence, (1, 0, 2)) if self.return_sequences else state[0]
        return [result, *state] if self.return_state else result

    def _zero_state(self, h0: Tensor) -> list[Tensor]:
        return [h0]

    def _step(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        raise NotImplementedError


class SimpleRNN(_Recurrent):
    """``h = activation(x @ kernel + h @ recurrent_kernel + bias)``.

    Inputs ``[batch, time, features]`` (time known); the last ``h``, ``[batch, units]``, or
    with `return_sequences` every step's, ``[batch, time, units]``, of the inputs' floating
    dtype. Here a linear cell with unit weights keeps a running sum:

    >>> rnn = sf.layers.SimpleRNN(1, activation="linear", return_sequences=True,
    ...                           kernel_initializer="ones", recurrent_initializer="ones")
    >>> sf.reshape(rnn(sf.ones((1, 4, 1))), (4,))
    sf.Tensor([1., 2., 3., 4.], shape=(4,), dtype=float32)
    >>> rnn.kernel.shape, rnn.recurrent_kernel.shape, rnn.bias.shape
    ((1, 1), (1, 1), (1,))
    """

    def __init__(self, units: int, activation: str | Callable = "tanh", **options: Any) -> None:
        super().__init__(units, activation=activation, **options)

    def _step(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        h = self.activation(x + matmul(state[0], self.recurrent_kernel))
        return h, [h]


class LSTM(_Recurrent):
    """Keras' LSTM: gates i, f, c, o in the kernels' columns; ``c = f*c + i*tanh(z_c)``,
    ``h = o * tanh(c)``; the forget gate's bias starts at one (`unit_forget_bias`), so
    that the cell remembers by default.

    Inputs ``[batch, time, features]``; the kernels hold the four gates side by side,
    ``[features, 4 * units]`` and ``[units, 4 * units]``. With `return_state` the layer
    also returns the last ``h`` and ``c``, ``[batch, units]`` each.

    >>> lstm = sf.layers.LSTM(4, return_sequences=True, return_state=True)
    >>> sequence, h, c = lstm(sf.ones((2, 5, 3)))
    >>> sequence.shape, h.shape, c.shape
    ((2, 5, 4), (2, 4), (2, 4))
    >>> lstm.kernel.shape, lstm.recurrent_kernel.shape
    ((3, 16), (4, 16))
    >>> lstm.bias.numpy().reshape(4, 4)[1]          # the forget gate's
    array([1., 1., 1., 1.], dtype=float32)
    >>> bool(np.allclose(sequence[:, -1].numpy(), h.numpy()))
    True
    """

    gates = 4

    def __init__(self, units: int, unit_forget_bias: bool = True, **options: Any) -> None:
        super().__init__(units, **options)
        self.unit_forget_bias = bool(unit_forget_bias)
        self._config["unit_forget_bias"] = unit_forget_bias

    def _bias_initializer(self) -> Callable[..., Any]:
        if not self.unit_forget_bias:
            return self.bias_initializer
        units, base = self.units, self.bias_initializer

        def initializer(shape: tuple[int, ...], dtype: Any) -> Tensor:
            values = np.array(convert_to_tensor(base(shape, dtype)).numpy())
            values[units: 2 * units] = 1.0
            return convert_to_tensor(values)
        return initializer

    def _zero_state(self, h0: Tensor) -> list[Tensor]:
        return [h0, h0]

    def _step(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        h, c = state
        u = self.units
        z = x + matmul(h, self.recurrent_kernel)
        i = self.recurrent_activation(z[:, :u])
        f = self.recurrent_activation(z[:, u: 2 * u])
        candidate = self.activation(z[:, 2 * u: 3 * u])
        o = self.recurrent_activation(z[:, 3 * u:])
        c = f * c + i * candidate
        h = o * self.activation(c)
        return h, [h, c]


class GRU(_Recurrent):
    """Keras' GRU (``reset_after=True``): gates z, r, h; ``h = z * h + (1 - z) * hh`` with
    ``hh = tanh(x_h + r * (h @ U_h + b_h))``; a bias for the inputs and one for the state
    (`bias` is ``[2, 3 * units]``), Keras' layout of the weights.

    Inputs ``[batch, time, features]``; outputs ``[batch, units]`` (``[batch, time,
    units]`` with `return_sequences`) of their floating dtype.

    >>> gru = sf.layers.GRU(3)
    >>> gru(sf.ones((2, 5, 4))).shape
    (2, 3)
    >>> gru.kernel.shape, gru.recurrent_kernel.shape, gru.bias.shape
    ((4, 9), (3, 9), (2, 9))
    """

    gates = 3

    def _bias_shape(self) -> tuple[int, ...]:
        return (2, self.gates * self.units)

    def _input_bias(self) -> Any:
        return None if self.bias is None else self.bias[0]

    def _step(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        (h,) = state
        u = self.units
        recurrent = matmul(h, self.recurrent_kernel)
        if self.bias is not None:
            recurrent = recurrent + self.bias[1]
        z = self.recurrent_activation(x[:, :u] + recurrent[:, :u])
        r = self.recurrent_activation(x[:, u: 2 * u] + recurrent[:, u: 2 * u])
        candidate = self.activation(x[:, 2 * u:] + r * recurrent[:, 2 * u:])
        h = z * h + (1.0 - z) * candidate
        return h, [h]
