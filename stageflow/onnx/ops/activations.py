"""ONNX's activation functions, the softmax family over one axis (opset 13's semantics), and
Dropout at inference, composed from sf ops with ONNX's attribute defaults."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import stageflow as sf
from stageflow.core import dtypes
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.elementwise import like

_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875


def _unit_clip(x: Value) -> Value:
    """x clipped into [0, 1]."""
    return sf.minimum(sf.maximum(x, like(0, x)), like(1, x))


def _elu(x: Value, alpha: float) -> Value:
    """x where x > 0, else alpha (e**x - 1)."""
    return sf.where(sf.greater(x, like(0, x)), x, sf.multiply(sf.expm1(x), like(alpha, x)))


def _relu(node: Node, x: Value) -> Value:
    return sf.nn.relu(x)


def _leaky_relu(node: Node, x: Value) -> Value:
    alpha = node.attr("alpha", 0.01)
    return sf.where(sf.less(x, like(0, x)), sf.multiply(x, like(alpha, x)), x)


def _elu_op(node: Node, x: Value) -> Value:
    return _elu(x, node.attr("alpha", 1.0))


def _selu(node: Node, x: Value) -> Value:
    alpha, gamma = node.attr("alpha", _SELU_ALPHA), node.attr("gamma", _SELU_GAMMA)
    return sf.multiply(_elu(x, alpha), like(gamma, x))


def _celu(node: Node, x: Value) -> Value:
    """max(0, x) + min(0, alpha (e**(x / alpha) - 1))."""
    alpha = node.attr("alpha", 1.0)
    negative = sf.multiply(sf.expm1(sf.divide(x, like(alpha, x))), like(alpha, x))
    return sf.add(sf.maximum(x, like(0, x)), sf.minimum(negative, like(0, x)))


def _gelu(node: Node, x: Value) -> Value:
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.error(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return sf.nn.gelu(x, approximate=approximate == "tanh")


def _hard_sigmoid(node: Node, x: Value) -> Value:
    """max(0, min(1, alpha x + beta))."""
    alpha, beta = node.attr("alpha", 0.2), node.attr("beta", 0.5)
    return _unit_clip(sf.add(sf.multiply(x, like(alpha, x)), like(beta, x)))


def _hard_swish(node: Node, x: Value) -> Value:
    """x max(0, min(1, x / 6 + 1 / 2))."""
    return sf.multiply(x, _unit_clip(sf.add(sf.multiply(x, like(1 / 6, x)), like(0.5, x))))


def _mish(node: Node, x: Value) -> Value:
    return sf.multiply(x, sf.tanh(sf.nn.softplus(x)))


def _shrink(node: Node, x: Value) -> Value:
    """x + bias below -lambd, x - bias above lambd, 0 between; integers are shrunk in
    float64 and converted back, as ONNX's reference does."""
    bias, lambd = node.attr("bias", 0.0), node.attr("lambd", 0.5)
    y = sf.cast(x, sf.float64) if dtypes.is_integer(x.dtype) else x
    result = sf.where(sf.less(y, like(-lambd, y)), sf.add(y, like(bias, y)),
                      sf.where(sf.greater(y, like(lambd, y)), sf.subtract(y, like(bias, y)),
                               like(0, y)))
    return sf.cast(result, x.dtype) if y is not x else result


def _softplus(node: Node, x: Value) -> Value:
    return sf.nn.softplus(x)


def _softsign(node: Node, x: Value) -> Value:
    return sf.divide(x, sf.add(sf.abs(x), like(1, x)))


def _swish(node: Node, x: Value) -> Value:
    return sf.multiply(x, sf.sigmoid(sf.multiply(x, like(node.attr("alpha", 1.0), x))))


def _thresholded_relu(node: Node, x: Value) -> Value:
    alpha = node.attr("alpha", 1.0)
    return sf.where(sf.greater(x, like(alpha, x)), x, like(0, x))


def _sigmoid(node: Node, x: Value) -> Value:
    return sf.sigmoid(x)


def _tanh(node: Node, x: Value) -> Value:
    return sf.tanh(x)


_ACTIVATIONS: dict[str, Callable[[Node, Value], Value]] = {
    "Relu": _relu,
    "LeakyRelu": _leaky_relu,
    "Elu": _elu_op,
    "Selu": _selu,
    "Celu": _celu,
    "Gelu": _gelu,
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "Mish": _mish,
    "Shrink": _shrink,
    "Softplus": _softplus,
    "Softsign": _softsign,
    "Swish": _swish,
    "ThresholdedRelu": _thresholded_relu,
    "Sigmoid": _sigmoid,
    "Tanh": _tanh,
}


@converts(*_ACTIVATIONS)
def activation(node: Node, x: Value) -> Value:
    return _ACTIVATIONS[node.op_type](node, x)


@converts("PRelu")
def prelu(node: Node, x: Value, slope: Value) -> Value:
    """slope x where x < 0, else x; slope broadcasts to x (ONNX's unidirectional rule).
    A slope of one value per channel (dim 1) that does not broadcast is opset 6's
    per-channel slope, which ONNX's version converter leaves as it was: it applies along
    dim 1."""
    shape, slope_shape = tuple(x.shape), tuple(slope.shape)
    if (len(slope_shape) == 1 and len(shape) >= 3 and slope_shape[0] == shape[1]
            and shape[-1] is not None and shape[-1] not in (1, slope_shape[0])):
        slope = sf.reshape(slope, (slope_shape[0],) + (1,) * (len(shape) - 2))
    return sf.where(sf.less(x, like(0, x)), sf.multiply(x, slope), x)


def _axis(node: Node, x: Value) -> int:
    """The one axis of the softmax family (opset 13: default -1), checked against x's rank."""
    axis = node.attr("axis", -1)
    rank = len(x.shape)
    if not -rank <= axis < max(rank, 1):
        raise node.error(f"axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank if rank else 0


@converts("Softmax", "LogSoftmax")
def softmax(node: Node, x: Value) -> Value:
    function = sf.nn.softmax if node.op_type == "Softmax" else sf.nn.log_softmax
    return function(x, axis=_axis(node, x))


@converts("Hardmax")
def hardmax(node: Node, x: Value) -> Value:
    """1 at the first maximum along the axis, 0 elsewhere: the maxima, less those with an
    earlier maximum before them (a running count along the axis)."""
    axis = _axis(node, x)
    maxima = sf.equal(x, sf.reduce_max(x, axis=axis, keepdims=True))
    count = sf.cumsum(sf.cast(maxima, sf.int32), axis=axis)
    first = sf.logical_and(maxima, sf.equal(count, np.asarray(1, np.int32)))
    return sf.cast(first, x.dtype)


@converts("Dropout")
def dropout(node: Node, x: Value, ratio: Value | None = None,
            training_mode: Value | None = None) -> Value | tuple[Value, Value]:
    """Inference: the data unchanged and, when asked, a mask of ones. Training with a
    nonzero ratio draws a random mask, which an imported model does not do."""
    training = training_mode is not None and bool(node.const(training_mode, "training_mode"))
    if training:
        rate = 0.5 if ratio is None else float(node.const(ratio, "the ratio input"))
        if rate != 0:
            raise node.error(
                f"training_mode is true with ratio {rate}: stageflow imports Dropout for "
                f"inference only; export the model in inference mode (training_mode false "
                f"or omitted), or apply sf.nn.dropout yourself")
    output = x if isinstance(x, np.ndarray) else sf.identity(x)
    if not node.wants(1):
        return output
    return output, sf.ones_like(x, dtype=sf.bool)

