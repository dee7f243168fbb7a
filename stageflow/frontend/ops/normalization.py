"""`sf.nn` normalisation and embedding ops: moments, batch and layer normalisation, L2
normalisation, bias addition, embedding lookup, sigmoid cross-entropy.

All are composites of existing op functions (TensorFlow's `tf.nn` names and rules), so
they differentiate, fuse and compile like the ops they are made of.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor, matching_tensors
from stageflow.frontend.ops.dispatch import for_composites
from stageflow.frontend.ops.reductions import reduce_mean, reduce_sum
from stageflow.frontend.ops.shape import gather, squeeze
from stageflow.frontend.tensor import Tensor

__all__ = ["batch_normalization", "bias_add", "embedding_lookup", "l2_normalize",
           "layer_normalization", "moments", "sigmoid_cross_entropy_with_logits"]


def moments(x: Any, axes: Sequence[int], keepdims: bool = False) -> tuple[Tensor, Tensor]:
    """Mean and (biased) variance of `x` over `axes`: ``mean(x)``, ``mean((x - mean)**2)``.

    x: float tensor of any shape; returns two tensors of x's dtype without `axes` (kept as
    size 1 with keepdims=True). For images [N, H, W, C], ``axes=[0, 1, 2]`` gives the
    per-channel statistics [C].

    >>> mean, variance = sf.nn.moments([[1.0, 2.0], [3.0, 6.0]], axes=[0])
    >>> mean
    sf.Tensor([2., 4.], shape=(2,), dtype=float32)
    >>> variance
    sf.Tensor([1., 4.], shape=(2,), dtype=float32)
    """
    x = convert_to_tensor(x)
    mean = reduce_mean(x, tuple(axes), keepdims=True)
    variance = reduce_mean(ew.square(x - mean), tuple(axes), keepdims=True)
    if not keepdims:
        mean, variance = squeeze(mean, tuple(axes)), squeeze(variance, tuple(axes))
    return mean, variance


def batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any,
                        variance_epsilon: float) -> Tensor:
    """``scale * (x - mean) / sqrt(variance + epsilon) + offset``, everything broadcast
    against `x` (`offset` and `scale` may be None).

    x: float tensor [..., C]; mean, variance, offset, scale broadcast against it (usually [C]);
    returns x's shape and dtype.

    >>> x = sf.constant([[1.0, 2.0], [3.0, 6.0]])
    >>> sf.nn.batch_normalization(x, [2.0, 4.0], [1.0, 4.0], None, None, variance_epsilon=0.0)
    sf.Tensor([[-1., -1.],
               [ 1.,  1.]], shape=(2, 2), dtype=float32)
    """
    x = convert_to_tensor(x)
    inverse = ew.rsqrt(_like(variance, x) + variance_epsilon)
    if scale is not None:
        inverse = inverse * scale
    result = (x - mean) * inverse
    return result + offset if offset is not None else result


def _like(value: Any, x: Tensor) -> Tensor:
    """`value` as a tensor; Python numbers and arrays in `x`'s dtype (weakly typed)."""
    if isinstance(value, Tensor) or hasattr(value, "_as_tensor"):
        return convert_to_tensor(value)
    return convert_to_tensor(value, x.dtype)


def layer_normalization(x: Any, axis: int | Sequence[int] = -1, epsilon: float = 1e-3,
                        scale: Any = None, offset: Any = None) -> Tensor:
    """`x` normalised over `axis` (each example's features) to mean 0 and variance 1,
    then scaled and shifted: what `sf.layers.LayerNormalization` computes.

    x: float tensor [..., n]; scale and offset (optional) broadcast against the normalised axes;
    returns x's shape and dtype.

    >>> sf.nn.layer_normalization([[1.0, 3.0], [2.0, 6.0]])
    sf.Tensor([[-0.9995004 ,  0.9995004 ],
               [-0.99987507,  0.99987507]], shape=(2, 2), dtype=float32)
    """
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    mean, variance = moments(x, axes, keepdims=True)
    return batch_normalization(x, mean, variance, offset, scale, epsilon)


def l2_normalize(x: Any, axis: int | Sequence[int] | None = None,
                 epsilon: float = 1e-12) -> Tensor:
    """``x / sqrt(max(sum(x**2, axis), epsilon))``.

    x: float tensor of any shape; returns its shape and dtype.

    >>> sf.nn.l2_normalize([3.0, 4.0])
    sf.Tensor([0.6, 0.8], shape=(2,), dtype=float32)
    >>> sf.nn.l2_normalize([[3.0, 4.0], [0.0, 2.0]], axis=1)
    sf.Tensor([[0.6, 0.8],
               [0. , 1. ]], shape=(2, 2), dtype=float32)
    """
    x = convert_to_tensor(x)
    axes = None if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    squares = reduce_sum(ew.square(x), axes, keepdims=True)
    return x * ew.rsqrt(ew.maximum(squares, epsilon))


def bias_add(value: Any, bias: Any) -> Tensor:
    """``value + bias`` with a 1-D `bias` of `value`'s last dim (a clear error otherwise).

    value: tensor [..., C]; bias: [C] of its dtype; returns value's shape and dtype.

    >>> sf.nn.bias_add(sf.zeros((2, 3)), [1.0, 2.0, 3.0])
    sf.Tensor([[1., 2., 3.],
               [1., 2., 3.]], shape=(2, 3), dtype=float32)
    """
    value, bias = matching_tensors([value, bias])
    if bias.ndim != 1 or (value.ndim and None not in (value.shape[-1], bias.shape[0])
                          and value.shape[-1] != bias.shape[0]):
        raise ValueError(f"bias_add: bias must be 1-D of the value's last dim "
                         f"{value.shape[-1:] if value.ndim else ()}, got shape {bias.shape}"
                         f"{describe_location()}")
    return value + bias


@for_composites(operand=1)
def embedding_lookup(params: Any, ids: Any) -> Tensor:
    """The rows of `params` at integer `ids` (of any shape): ``params[ids]``.

    params: tensor [V, ...]; ids: int tensor of any shape; returns ids.shape + params.shape[1:]
    of params' dtype.

    >>> table = sf.constant([[0.0, 0.0], [1.0, 1.0], [2.0, 4.0]])
    >>> sf.nn.embedding_lookup(table, [[2, 0], [1, 1]]).shape
    (2, 2, 2)
    >>> sf.nn.embedding_lookup(table, [2, 1])
    sf.Tensor([[2., 4.],
               [1., 1.]], shape=(2, 2), dtype=float32)
    """
    return gather(params, ids, axis=0)


def sigmoid_cross_entropy_with_logits(labels: Any, logits: Any) -> Tensor:
    """Elementwise ``-labels * log(sigmoid(logits)) - (1 - labels) * log(1 - sigmoid)``,
    in TensorFlow's stable form ``max(x, 0) - x * z + log1p(exp(-|x|))``.

    labels, logits: float tensors of one shape (labels in [0, 1]); returns that shape in logits'
    dtype.

    >>> sf.nn.sigmoid_cross_entropy_with_logits([1.0, 0.0, 1.0], [0.0, 0.0, 100.0])
    sf.Tensor([6.931472e-01, 6.931472e-01, 3.783506e-44], shape=(3,), dtype=float32)
    """
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, logits.dtype)
    return (ew.maximum(logits, 0.0) - logits * labels
            + ew.log1p(ew.exp(ew.negative(ew.abs(logits)))))
