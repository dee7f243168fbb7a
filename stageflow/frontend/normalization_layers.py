"""Layers of normalisation and lookup: `LayerNormalization` and `Embedding` (Keras' names,
arguments and initialisers), built from the `sf.nn` ops."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.initializers import get_initializer
from stageflow.frontend.layers import Layer
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.normalization import embedding_lookup, layer_normalization
from stageflow.frontend.tensor import Tensor

__all__ = ["Embedding", "LayerNormalization"]


class LayerNormalization(Layer):
    """Each example normalised over `axis` (the features) to mean 0 and variance 1, then
    ``* gamma + beta`` (learned, of the normalised dims' shape; `scale`/`center` False
    leaves them out). Unlike batch normalisation it needs no batch statistics, so training
    and inference compute the same; the shape and dtype are the input's.

    >>> ln = sf.layers.LayerNormalization()            # over the last axis
    >>> ln(sf.constant([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]]))
    sf.Tensor([[-1.2238274,  0.       ,  1.2238274],
               [-1.2247357,  0.       ,  1.2247357]], shape=(2, 3), dtype=float32)
    >>> ln.gamma.shape, ln.beta.shape
    ((3,), (3,))
    """

    def __init__(self, axis: int | Sequence[int] = -1, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True,
                 beta_initializer: str | Callable = "zeros",
                 gamma_initializer: str | Callable = "ones", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self.axis = (axis,) if isinstance(axis, int) else tuple(axis)
        self.epsilon, self.center, self.scale = float(epsilon), bool(center), bool(scale)
        self.beta_initializer = get_initializer(beta_initializer)
        self.gamma_initializer = get_initializer(gamma_initializer)
        self.gamma = self.beta = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        rank = len(input_shape)
        axes = sorted(a % rank if -rank <= a < rank else _bad_axis(a, rank) for a in self.axis)
        self._axes = tuple(axes)
        shape = [1] * rank
        for a in axes:
            if input_shape[a] is None:
                raise ValueError(f"LayerNormalization: dim {a} of the input {input_shape} "
                                 f"must be known{describe_location()}")
            shape[a] = input_shape[a]
        shape = shape[min(axes):]  # broadcasts against the input's trailing dims
        if self.scale:
            self.gamma = self.add_weight("gamma", shape, self.gamma_initializer)
        if self.center:
            self.beta = self.add_weight("beta", shape, self.beta_initializer)

    def call(self, inputs: Any) -> Tensor:
        return layer_normalization(inputs, self._axes, self.epsilon, self.gamma, self.beta)


def _bad_axis(axis: int, rank: int) -> int:
    raise ValueError(f"LayerNormalization: axis {axis} is out of range for rank {rank}"
                     f"{describe_location()}")


class Embedding(Layer):
    """A lookup table: integer ids of any shape -> their rows of `embeddings`
    (``[input_dim, output_dim]``, initialised U(-0.05, 0.05)): ids ``[...]`` give
    ``[..., output_dim]`` of the table's dtype (float32 unless `dtype` is given).

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
                 embeddings_initializer: str | Callable = "uniform", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        if int(input_dim) < 1 or int(output_dim) < 1:
            raise ValueError(f"Embedding: input_dim and output_dim must be positive, got "
                             f"{input_dim!r} and {output_dim!r}")
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = get_initializer(embeddings_initializer)
        self.embeddings = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim),
                                          self.embeddings_initializer)

    def call(self, inputs: Any) -> Tensor:
        ids = convert_to_tensor(inputs)
        if not dtypes.is_integer(ids.dtype):
            raise TypeError(f"Embedding: ids must be integers, got {ids.dtype.name}"
                            f"{describe_location()}")
        return embedding_lookup(self.embeddings, ids)
