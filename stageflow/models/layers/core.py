"""Dense and embedding layers: the kernels of fully connected models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import cast, not_equal
from stageflow.frontend.ops.linalg import matmul
from stageflow.frontend.ops.normalization import embedding_lookup
from stageflow.frontend.ops.shape import reshape
from stageflow.frontend.sparse_ops import sparse_dense_matmul
from stageflow.frontend.sparse_tensor import SparseTensor
from stageflow.frontend.tensor import Tensor
from stageflow.models.initializers import get_initializer
from stageflow.models.layers.base import (
    Layer,
    _KernelLayer,
)

__all__ = ["Dense", "Embedding", "Lambda"]


class Dense(_KernelLayer):
    """``activation(inputs @ kernel + bias)`` over the last dim of the inputs.

    `kernel` is ``[input_dim, units]``, created on the first call with
    `kernel_initializer` (Glorot uniform), `bias` is ``[units]`` of `bias_initializer`
    (zeros). The variables take the input's floating dtype unless the layer has a
    precision policy (`dtype`, or the global one: `sf.keras.mixed_precision`).

    Inputs ``[..., input_dim]`` (rank 1 or more), outputs ``[..., units]`` of the
    layer's compute dtype (the variables' dtype unless the policy is mixed).

    >>> layer = sf.layers.Dense(4, activation="relu")
    >>> y = layer(sf.ones((2, 3)))          # the first call creates the variables
    >>> y.shape, y.dtype.name
    ((2, 4), 'float32')
    >>> layer.kernel.shape, layer.bias.shape
    ((3, 4), (4,))
    >>> sf.layers.Dense(2, kernel_initializer="ones")(sf.constant([[1.0, 2.0, 3.0]]))
    sf.Tensor([[6., 6.]], shape=(1, 2), dtype=float32)
    """

    def __init__(self, units: int, activation: str | Callable | None = None,
                 use_bias: bool = True, kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(activation, use_bias, kernel_initializer, bias_initializer,
                         trainable, name, dtype)
        if int(units) < 1:
            raise ValueError(f"Dense: units must be a positive int, got {units!r}")
        self.units = int(units)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self._create((self._last_dim(input_shape, 1), self.units), self.units)

    def call(self, inputs: Any) -> Tensor:
        if isinstance(inputs, SparseTensor):  # Keras' sparse inputs: a dense result
            if len(inputs.shape) != 2:
                raise ValueError(f"Dense: a sparse input must be a matrix [batch, features], "
                                 f"got shape {inputs.shape}{describe_location()}")
            if inputs.dtype != self.kernel.dtype:
                inputs = SparseTensor(inputs.indices, cast(inputs.values, self.kernel.dtype),
                                      inputs.dense_shape)
            return self._epilogue(sparse_dense_matmul(inputs, self.kernel))
        inputs = convert_to_tensor(inputs)
        if inputs.ndim == 1:
            outputs = matmul(reshape(inputs, (1, -1)), self.kernel)
            outputs = reshape(outputs, (self.units,))
        else:
            outputs = matmul(inputs, self.kernel)
        return self._epilogue(outputs)


class Embedding(Layer):
    """A lookup table: integer ids of any shape -> their rows of `embeddings`
    (``[input_dim, output_dim]``, initialised U(-0.05, 0.05)): ids ``[...]`` give
    ``[..., output_dim]`` of the layer's compute dtype (float32 unless `dtype` or the
    global policy say otherwise: ``mixed_bfloat16`` looks up float32 rows, then casts them).

    >>> embed = sf.layers.Embedding(input_dim=10, output_dim=4)
    >>> vectors = embed(sf.constant([[1, 2, 3], [4, 5, 5]]))
    >>> vectors.shape, vectors.dtype.name
    ((2, 3, 4), 'float32')
    >>> embed.embeddings.shape
    (10, 4)
    >>> bool(sf.reduce_all(vectors[1, 1] == vectors[1, 2]))      # the same id, the same row
    True
    """

    def __init__(self, input_dim: int, output_dim: int,
                 embeddings_initializer: str | Callable = "uniform", mask_zero: bool = False,
                 trainable: bool = True, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.mask_zero = bool(mask_zero)
        if int(input_dim) < 1 or int(output_dim) < 1:
            raise ValueError(f"Embedding: input_dim and output_dim must be positive, got "
                             f"{input_dim!r} and {output_dim!r}")
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = get_initializer(embeddings_initializer)
        self.embeddings = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim),
                                          self.embeddings_initializer)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Tensor | None:
        """Keras' padding mask: with ``mask_zero=True``, True where an id is not 0 (id 0
        is padding); None otherwise. (Stageflow's layers do not consume masks yet.)

        >>> sf.keras.layers.Embedding(5, 2, mask_zero=True).compute_mask(sf.constant([[3, 0]]))
        sf.Tensor([[ True, False]], shape=(1, 2), dtype=bool)
        """
        del mask
        return not_equal(convert_to_tensor(inputs), 0) if self.mask_zero else None

    def call(self, inputs: Any) -> Tensor:
        ids = convert_to_tensor(inputs)
        if not dtypes.is_integer(ids.dtype):
            raise TypeError(f"Embedding: ids must be integers, got {ids.dtype.name}"
                            f"{describe_location()}")
        # The table read as kept (not cast whole to the compute dtype): only the rows
        # looked up are cast, as Keras' embedding does.
        rows = embedding_lookup(self.embeddings.read_value(), ids)
        compute = dtypes.as_dtype(self.compute_dtype)
        return rows if rows.dtype == compute else cast(rows, compute)


class Lambda(Layer):
    """Any function of the inputs as a layer, so that a functional model can apply an op
    that no layer wraps: ``Lambda(lambda t: sf.reduce_mean(t, axis=1))(x)``. It has no
    variables (a function that creates some should be a `Layer` subclass).

    >>> sf.layers.Lambda(lambda t: 2.0 * t)(sf.ones((1, 2)))
    sf.Tensor([[2., 2.]], shape=(1, 2), dtype=float32)
    """

    def __init__(self, function: Callable[..., Any], arguments: dict[str, Any] | None = None,
                 trainable: bool = True, name: str | None = None, dtype: Any = None) -> None:
        if not callable(function):
            raise TypeError(f"Lambda: expected a function, got {type(function).__name__}")
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.function = function
        self.arguments = dict(arguments or {})
        self.built = True

    def call(self, inputs: Any) -> Any:
        return self.function(inputs, **self.arguments)
