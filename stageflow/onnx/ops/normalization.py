"""Normalizations: BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, LRN, MeanVarianceNormalization and LpNormalization.

Per-channel parameters of channels-first data are reshaped to (C, 1, ...) and broadcast.
BatchNormalization in inference mode is one multiply-add per element: its scale and shift
are computed from the statistics once (at import when they are known, as they are in a
trained model). Statistics are computed in float32 for 16-bit inputs where the op's
stash_type asks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.convolution import channels_first, channels_last


def _dtype(x: Value) -> np.dtype:
    return np.dtype(x.dtype) if isinstance(x, np.ndarray) else np.dtype(x.dtype.name)


def _cast(value: Value, dtype: np.dtype) -> Value:
    """`value` in `dtype`: an array stays an array (so what is known stays known)."""
    if isinstance(value, np.ndarray):
        return value.astype(dtype, copy=False)
    return value if _dtype(value) == dtype else sf.cast(value, dtype.name)


def _channels(value: Value, rank: int) -> Value:
    """A (C,) parameter shaped (C, 1, ...) against a channels-first tensor of `rank`."""
    shape = (-1,) + (1,) * (rank - 2)
    return value.reshape(shape) if isinstance(value, np.ndarray) else sf.reshape(value, shape)


def _floating(node: Node, x: Value) -> np.dtype:
    dtype = _dtype(x)
    if not np.issubdtype(dtype, np.floating) and dtype.name != "bfloat16":
        raise node.error(f"expects a floating input, got {dtype.name}")
    return dtype


def _stash(node: Node, x: Value) -> Value:
    """x in the precision its statistics are computed in: float32 for 16-bit floats when
    stash_type is 1 (float), the default."""
    dtype = _floating(node, x)
    if dtype.itemsize < 4 and int(node.attr("stash_type", 1)) == 1:
        return _cast(x, np.dtype(np.float32))
    return x


def _normalize(x: Value, axes: Sequence[int], epsilon: float
               ) -> tuple[Value, Value, Value, Value]:
    """(x - mean) / sqrt(variance + epsilon) over `axes`, with the mean, the variance and
    1 / that root (their reduced axes kept)."""
    mean = sf.reduce_mean(x, axis=tuple(axes), keepdims=True)
    centred = x - mean
    variance = sf.reduce_mean(centred * centred, axis=tuple(axes), keepdims=True)
    inverse = sf.rsqrt(variance + epsilon)
    return centred * inverse, mean, variance, inverse


@converts("BatchNormalization")
def batch_normalization(node: Node, x: Value, scale: Value, bias: Value, mean: Value,
                        variance: Value) -> Value | list[Value]:
    dtype = _floating(node, x)
    epsilon = float(node.attr("epsilon", 1e-5))
    scale, bias, mean, variance = (_cast(v, dtype) for v in (scale, bias, mean, variance))
    if int(node.attr("training_mode", 0)):
        return _batch_statistics(node, x, scale, bias, mean, variance, epsilon)
    if all(isinstance(v, np.ndarray) for v in (scale, bias, mean, variance)):
        factor = (scale / np.sqrt(variance + np.asarray(epsilon, dtype))).astype(dtype)
        shift = (bias - mean * factor).astype(dtype)
    else:
        factor = scale * sf.rsqrt(variance + epsilon)
        shift = bias - mean * factor
    return x * _channels(factor, x.ndim) + _channels(shift, x.ndim)


def _batch_statistics(node: Node, x: Value, scale: Value, bias: Value, mean: Value,
                      variance: Value, epsilon: float) -> list[Value]:
    """Training mode: normalized by the batch's own statistics; the running mean and
    variance outputs move toward them by 1 - momentum."""
    momentum = float(node.attr("momentum", 0.9))
    axes = (0, *range(2, x.ndim))
    normalized, batch_mean, batch_variance, _ = _normalize(x, axes, epsilon)
    y = normalized * _channels(scale, x.ndim) + _channels(bias, x.ndim)
    batch_mean = sf.reshape(batch_mean, (-1,))
    batch_variance = sf.reshape(batch_variance, (-1,))
    return [y, mean * momentum + batch_mean * (1 - momentum),
            variance * momentum + batch_variance * (1 - momentum)]


@converts("InstanceNormalization")
def instance_normalization(node: Node, x: Value, scale: Value, bias: Value) -> Value:
    dtype = _floating(node, x)
    normalized, *_ = _normalize(x, range(2, x.ndim), float(node.attr("epsilon", 1e-5)))
    return normalized * _channels(_cast(scale, dtype), x.ndim) + \
        _channels(_cast(bias, dtype), x.ndim)


@converts("LayerNormalization")
def layer_normalization(node: Node, x: Value, scale: Value,
                        bias: Value | None = None) -> list[Value]:
    dtype = _floating(node, x)
    axis = int(node.attr("axis", -1))
    if not -x.ndim <= axis < x.ndim:
        raise node.error(f"axis {axis} is out of range for an input of rank {x.ndim}")
    axes = range(axis % x.ndim, x.ndim)
    normalized, mean, _, inverse = _normalize(_stash(node, x), axes,
                                              float(node.attr("epsilon", 1e-5)))
    y = _cast(normalized, dtype) * _cast(scale, dtype)
    if bias is not None:
        y = y + _cast(bias, dtype)
    return [y, mean, inverse]


@converts("GroupNormalization")
def group_normalization(node: Node, x: Value, scale: Value, bias: Value) -> Value:
    dtype = _floating(node, x)
    groups = int(node.attr("num_groups"))
    channels, spatial = x.shape[1], x.shape[2:]
    if channels is None or None in spatial or channels % groups:
        raise node.error(f"needs static channel and spatial dims, the channels a multiple "
                         f"of num_groups {groups}; got input shape {x.shape}")
    grouped = sf.reshape(_stash(node, x), (-1, groups, channels // groups, *spatial))
    normalized, *_ = _normalize(grouped, range(2, grouped.ndim),
                                float(node.attr("epsilon", 1e-5)))
    normalized = _cast(normalized, dtype)
    scale, bias = _cast(scale, dtype), _cast(bias, dtype)
    if node.opset < 21:  # a scale and bias per group
        shape = (groups,) + (1,) * (grouped.ndim - 2)
        normalized = normalized * sf.reshape(scale, shape) + sf.reshape(bias, shape)
        return sf.reshape(normalized, (-1, channels, *spatial))
    y = sf.reshape(normalized, (-1, channels, *spatial))
    return y * _channels(scale, x.ndim) + _channels(bias, x.ndim)


@converts("LRN")
def local_response_normalization(node: Node, x: Value) -> Value:
    """x / (bias + alpha / size * the sum of squares over `size` neighbouring channels)
    ** beta, the window floor((size - 1) / 2) channels before and the rest after.

    Computed channels-last, as the convolutions around it run (`convolution`): the
    transposes on either side meet theirs and cancel, where a window over axis 1 kept an
    image's worth of transposes on each side (AlexNet's, GoogLeNet's)."""
    _floating(node, x)
    size = int(node.attr("size"))
    alpha, beta = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75))
    bias = float(node.attr("bias", 1.0))
    channels = x.shape[1]
    if channels is None:
        raise node.error(f"needs a static channel count, got input shape {x.shape}")
    before = (size - 1) // 2
    image = channels_last(x)
    squares = sf.pad(image * image, [(0, 0)] * (x.ndim - 1) + [(before, size - 1 - before)])
    total = None
    for tap in range(size):
        piece = squares[..., tap:tap + channels]
        total = piece if total is None else total + piece
    return channels_first(image / sf.pow(total * (alpha / size) + bias, beta))


@converts("MeanVarianceNormalization")
def mean_variance_normalization(node: Node, x: Value) -> Value:
    """(x - mean) / (sqrt(variance) + 1e-9) over `axes`, as ONNX's function body."""
    _floating(node, x)
    axes = tuple(int(a) for a in node.attr("axes", [0, 2, 3]))
    mean = sf.reduce_mean(x, axis=axes, keepdims=True)
    variance = sf.reduce_mean(x * x, axis=axes, keepdims=True) - mean * mean
    return (x - mean) / (sf.sqrt(variance) + 1e-9)


@converts("LpNormalization")
def lp_normalization(node: Node, x: Value) -> Value:
    """x divided by its L1 or L2 norm along `axis`; 0 where that norm is 0."""
    _floating(node, x)
    axis, p = int(node.attr("axis", -1)), int(node.attr("p", 2))
    if p == 1:
        norm = sf.reduce_sum(sf.abs(x), axis=axis, keepdims=True)
    elif p == 2:
        norm = sf.sqrt(sf.reduce_sum(x * x, axis=axis, keepdims=True))
    else:
        raise node.error(f"p is {p}; ONNX defines LpNormalization for p 1 and 2")
    zero = sf.equal(norm, 0.0)
    return sf.where(zero, 0.0, x / sf.where(zero, 1.0, norm))
