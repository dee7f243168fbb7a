"""Attention and reshaping layers: `MultiHeadAttention` (Keras' arguments and equations)
and `Reshape`, composites of matmuls, softmax and data movement."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import where
from stageflow.frontend.ops.linalg import matmul
from stageflow.frontend.ops.nn import dropout, softmax
from stageflow.frontend.ops.shape import reshape_to, transpose
from stageflow.frontend.tensor import Tensor
from stageflow.models.initializers import get_initializer
from stageflow.models.layers.base import Layer

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(Layer):
    """Scaled dot-product attention over `num_heads` heads (Keras' layer).

    ``layer(query, value, key=None, attention_mask=None)`` with inputs ``[batch, length,
    features]``: each head projects them to `key_dim` (values to `value_dim`), attends
    with ``softmax(q k^T / sqrt(key_dim))`` (positions where `attention_mask` is false get
    no weight), and the heads' outputs are projected back to the query's features (or
    `output_shape`). ``return_attention_scores=True`` also returns the weights ``[batch,
    heads, query length, key length]``.

    The output is ``[batch, query length, query features]``, of the query's floating
    dtype; each query position's weights over the key positions sum to 1.

    >>> mha = sf.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    >>> query, value = sf.ones((1, 3, 8)), sf.ones((1, 5, 6))
    >>> out, scores = mha(query, value, return_attention_scores=True)
    >>> out.shape, scores.shape
    ((1, 3, 8), (1, 2, 3, 5))
    >>> mask = sf.constant([[[True, True, False, False, False]] * 3])   # [batch, 3, 5]
    >>> _, scores = mha(query, value, attention_mask=mask, return_attention_scores=True)
    >>> np.round(scores[0, 0, 0].numpy(), 2)      # the two unmasked (equal) keys share it
    array([0.5, 0.5, 0. , 0. , 0. ], dtype=float32)
    """

    def __init__(self, num_heads: int, key_dim: int, value_dim: int | None = None,
                 dropout: float = 0.0, use_bias: bool = True, output_shape: int | None = None,
                 kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", trainable: bool = True,
                 name: str | None = None, dtype: Any = None) -> None:
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        if int(num_heads) < 1 or int(key_dim) < 1:
            raise ValueError(f"MultiHeadAttention: num_heads and key_dim must be positive, "
                             f"got {num_heads!r} and {key_dim!r}")
        self.num_heads, self.key_dim = int(num_heads), int(key_dim)
        self.value_dim = int(value_dim) if value_dim is not None else self.key_dim
        self.dropout_rate, self.use_bias = float(dropout), bool(use_bias)
        self.output_size = output_shape
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.built_for: tuple[int, int, int] | None = None

    def _projection(self, name: str, inputs: int, outputs: int) -> tuple[Any, Any]:
        kernel = self.add_weight(f"{name}/kernel", (inputs, outputs), self.kernel_initializer)
        bias = (self.add_weight(f"{name}/bias", (outputs,), self.bias_initializer)
                if self.use_bias else None)
        return kernel, bias

    def _build_for(self, query: Tensor, value: Tensor, key: Tensor) -> None:
        widths = (query.shape[-1], value.shape[-1], key.shape[-1])
        if None in widths:
            raise ValueError(f"MultiHeadAttention: the feature dims must be known, got "
                             f"{widths}{describe_location()}")
        heads = self.num_heads
        self.query_dense = self._projection("query", widths[0], heads * self.key_dim)
        self.key_dense = self._projection("key", widths[2], heads * self.key_dim)
        self.value_dense = self._projection("value", widths[1], heads * self.value_dim)
        out = self.output_size or widths[0]
        self.output_dense = self._projection("attention_output", heads * self.value_dim, out)
        self.built_for = widths

    def __call__(self, query: Any, value: Any, key: Any = None, *args: Any,
                 **kwargs: Any) -> Any:
        if not self.built:
            query, value = convert_to_tensor(query), convert_to_tensor(value)
            self._dtype = self._variable_dtype(query.dtype)
            self._build_for(query, value, convert_to_tensor(key) if key is not None else value)
            self.built = True
        return super().__call__(query, value, key, *args, **kwargs)

    def call(self, query: Any, value: Any, key: Any = None, attention_mask: Any = None,
             return_attention_scores: bool = False, training: bool = False) -> Any:
        query, value = convert_to_tensor(query), convert_to_tensor(value)
        key = value if key is None else convert_to_tensor(key)
        q = self._heads(_dense(query, *self.query_dense), self.key_dim)
        k = self._heads(_dense(key, *self.key_dense), self.key_dim)
        v = self._heads(_dense(value, *self.value_dense), self.value_dim)
        scores = matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(self.key_dim))
        if attention_mask is not None:
            mask = convert_to_tensor(attention_mask)
            if mask.ndim == 3:  # [batch, query, key]: the same for every head
                mask = reshape_to(mask, (mask.shape[0], 1, *mask.shape[1:]))
            scores = where(mask, scores, -1e9)
        weights = softmax(scores, axis=-1)
        if training and self.dropout_rate:
            weights = dropout(weights, self.dropout_rate)
        attended = transpose(matmul(weights, v), (0, 2, 1, 3))  # [batch, query, heads, dv]
        batch, length = attended.shape[0], attended.shape[1]
        merged = reshape_to(attended, (batch, length, self.num_heads * self.value_dim))
        output = _dense(merged, *self.output_dense)
        return (output, weights) if return_attention_scores else output

    def _heads(self, x: Tensor, size: int) -> Tensor:
        """``[batch, length, heads * size]`` -> ``[batch, heads, length, size]``."""
        batch, length = x.shape[0], x.shape[1]
        return transpose(reshape_to(x, (batch, length, self.num_heads, size)), (0, 2, 1, 3))


def _dense(x: Tensor, kernel: Any, bias: Any) -> Tensor:
    y = matmul(x, kernel)
    return y + bias if bias is not None else y
