"""Activation layers: an activation function as a layer, for models that list them as steps
(``Sequential([Dense(64), LeakyReLU(), ...])``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import nn
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.models.activations import get_activation
from stageflow.models.initializers import get_initializer
from stageflow.models.layers.base import Layer

__all__ = ["ELU", "Activation", "LeakyReLU", "PReLU", "ReLU", "Softmax"]


class ReLU(Layer):
    """Keras' ReLU: `max_value` above it, x from `threshold` up, and
    ``negative_slope * (x - threshold)`` below (plain ``max(x, 0)`` by default). The
    shape and dtype are the input's.

    >>> sf.layers.ReLU(max_value=6.0, negative_slope=0.1)(sf.constant([-10.0, 3.0, 8.0]))
    sf.Tensor([-1.,  3.,  6.], shape=(3,), dtype=float32)
    """

    def __init__(self, max_value: float | None = None, negative_slope: float = 0.0,
                 threshold: float = 0.0, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.max_value = None if max_value is None else float(max_value)
        self.negative_slope = float(negative_slope)
        self.threshold = float(threshold)

    def call(self, inputs: Any) -> Tensor:
        x = convert_to_tensor(inputs)
        if self.negative_slope == 0.0 and self.threshold == 0.0:
            y = nn.relu(x)
        else:
            below = (x - self.threshold) * self.negative_slope
            y = ew.where(ew.greater_equal(x, self.threshold), x, below)
        return y if self.max_value is None else ew.minimum(y, self.max_value)


class Activation(Layer):
    """An activation, by Keras' name (``"relu"``, ``"softmax"``, ...) or a function, as a
    layer; the shape and dtype are the input's.

    >>> sf.layers.Activation("relu")(sf.constant([-1.0, 2.0]))
    sf.Tensor([0., 2.], shape=(2,), dtype=float32)
    >>> sf.layers.Activation(lambda t: 2.0 * t)(sf.constant([1.0]))
    sf.Tensor([2.], shape=(1,), dtype=float32)
    """

    _TRACKING_IGNORED = Layer._TRACKING_IGNORED | {"_function"}

    def __init__(self, activation: str | Callable, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.activation = activation
        self._function = get_activation(activation) or get_activation("linear")

    def call(self, inputs: Any) -> Tensor:
        return self._function(convert_to_tensor(inputs))


class LeakyReLU(Layer):
    """``x`` for ``x > 0``, else ``alpha * x``, with Keras' default slope 0.3 (its newer
    spelling, `negative_slope`, is taken too); the shape and dtype are the input's.

    >>> sf.layers.LeakyReLU()(sf.constant([-1.0, 2.0]))
    sf.Tensor([-0.3,  2. ], shape=(2,), dtype=float32)
    >>> sf.layers.LeakyReLU(alpha=0.1)(sf.constant([-1.0]))
    sf.Tensor([-0.1], shape=(1,), dtype=float32)
    """

    def __init__(self, alpha: float = 0.3, negative_slope: float | None = None,
                 trainable: bool = True, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.alpha = float(alpha if negative_slope is None else negative_slope)

    def call(self, inputs: Any) -> Tensor:
        return nn.leaky_relu(inputs, self.alpha)


class ELU(Layer):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``; the shape and dtype are the
    input's.

    >>> sf.layers.ELU(alpha=2.0)(sf.constant([-1.0, 3.0]))
    sf.Tensor([-1.2642411,  3.       ], shape=(2,), dtype=float32)
    """

    def __init__(self, alpha: float = 1.0, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.alpha = float(alpha)

    def call(self, inputs: Any) -> Tensor:
        x = convert_to_tensor(inputs)
        y = nn.elu(x)
        return y if self.alpha == 1.0 else ew.where(ew.greater(x, 0.0), y, y * self.alpha)


class Softmax(Layer):
    """`sf.nn.softmax` over `axis` (the last by default); the shape and dtype are the
    input's.

    >>> sf.layers.Softmax()(sf.constant([[0.0, 0.0], [0.0, np.log(3.0)]]))
    sf.Tensor([[0.5 , 0.5 ],
               [0.25, 0.75]], shape=(2, 2), dtype=float32)
    """

    def __init__(self, axis: int = -1, trainable: bool = True, name: str | None = None,
                 dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.axis = int(axis)

    def call(self, inputs: Any) -> Tensor:
        return nn.softmax(inputs, self.axis)


class PReLU(Layer):
    """A leaky ReLU whose slope is learned: ``max(x, 0) + alpha * min(x, 0)``, with `alpha`
    a variable of one value per input element (``input_shape[1:]``), or shared along
    `shared_axes` (``shared_axes=[1, 2]``: one slope per channel of images), initially
    zeros (`alpha_initializer`).

    >>> prelu = sf.layers.PReLU(alpha_initializer="ones", shared_axes=[1])
    >>> prelu(sf.constant([[[-2.0, 3.0], [-1.0, -4.0]]])).numpy().tolist()
    [[[-2.0, 3.0], [-1.0, -4.0]]]
    >>> prelu.alpha.shape
    (1, 2)
    """

    def __init__(self, alpha_initializer: str | Callable = "zeros",
                 shared_axes: Sequence[int] | int | None = None, trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.alpha_initializer = get_initializer(alpha_initializer)
        self.shared_axes = (() if shared_axes is None else (int(shared_axes),)
                            if isinstance(shared_axes, int) else tuple(int(a) for a in shared_axes))
        self.alpha = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        shape = [1 if axis in self.shared_axes else dim
                 for axis, dim in enumerate(input_shape[1:], 1)]
        self._last_dim(input_shape, 2)
        if None in shape:
            raise ValueError(f"PReLU {self.name!r}: the non-batch dims not in shared_axes "
                             f"must be known, got input shape {input_shape}")
        self.alpha = self.add_weight("alpha", shape, self.alpha_initializer)

    def call(self, inputs: Any) -> Tensor:
        x = convert_to_tensor(inputs)
        return nn.relu(x) + ew.minimum(x, 0.0) * self.alpha
