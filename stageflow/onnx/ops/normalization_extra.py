"""The default domain's normalisations and gates of transformer blocks that LayerNormalization's
family leaves out: RMSNormalization (opset 23) and SwiGLU (opset 28)."""

from __future__ import annotations

import stageflow as sf
from stageflow.core.dtypes import is_floating
from stageflow.onnx import dtypes
from stageflow.onnx.converters import Node, Value, converts


@converts("RMSNormalization")
def rms_normalization(node: Node, x: Value, scale: Value) -> Value:
    """x / sqrt(mean(x**2 over axes [axis, rank)) + epsilon) * scale, the first stage in
    the `stash_type` precision and cast back to x's type before the scale, as ONNX's
    function body does."""
    rank = len(x.shape)
    axis = node.attr("axis", -1)
    if not -rank <= axis < rank:
        raise node.error(f"axis {axis} is out of range for an input of rank {rank}")
    axis %= rank
    stash = dtypes.from_onnx(node.attr("stash_type", 1))
    if stash is None or not is_floating(stash):
        raise node.error(f"stash_type must name a floating type stageflow has, got "
                         f"{dtypes.type_name(node.attr('stash_type'))}")
    wide = sf.cast(x, stash)
    mean_square = sf.reduce_mean(wide * wide, axis=tuple(range(axis, rank)), keepdims=True)
    normalized = wide / sf.sqrt(mean_square + node.attr("epsilon", 1e-5))
    return sf.cast(normalized, x.dtype) * scale


@converts("SwiGLU")
def swiglu(node: Node, gate: Value, value: Value) -> Value:
    """Swish_alpha(gate) * value, Swish_alpha(a) = a * sigmoid(alpha * a); the inputs have
    one shape (ONNX does not broadcast them)."""
    if tuple(gate.shape) != tuple(value.shape):
        raise node.error(f"A and B must have the same shape (SwiGLU does not broadcast), "
                         f"got {tuple(gate.shape)} and {tuple(value.shape)}")
    return gate * sf.sigmoid(gate * node.attr("alpha", 1.0)) * value
