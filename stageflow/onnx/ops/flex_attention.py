"""FlexAttention (domain ai.onnx.preview, opset 1): scaled dot-product attention over
(batch, heads, sequence, head size) tensors whose scores and probabilities pass through
optional subgraphs, `score_mod` before the softmax and `prob_mod` after it (PyTorch's
flex_attention; a mask is a score_mod writing -inf).

The subgraphs run on the traced scores through `node.run_subgraph`, as If's branches do,
so they become ordinary ops of the staged function. The scores are computed in Q's type
and the softmax, the modifiers and the product with V in `softmax_precision` (float32,
or double for double inputs, by default), as ONNX's reference does; grouped-query heads
share their key/value head as in Attention (`attention._grouped_matmul`).
"""

from __future__ import annotations

import numpy as np
import onnx

import stageflow as sf
from stageflow.core.dtypes import is_floating
from stageflow.onnx import dtypes
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.attention import _grouped_matmul, _static

PREVIEW_DOMAIN = "ai.onnx.preview"


def _modify(node: Node, name: str, value: Value) -> Value:
    """`value` through the subgraph attribute `name` (one input, one output of its shape)
    where the node has one, cast back to `value`'s type."""
    graph = node.attr(name, None)
    if graph is None:
        return value
    if not isinstance(graph, onnx.GraphProto) or len(graph.output) != 1:
        raise node.error(f"{name} must be a graph with one output")
    assert node.run_subgraph is not None, "subgraphs run under evaluate.run_graph"
    result, = node.run_subgraph(graph, [value])
    if tuple(result.shape) != tuple(value.shape) and None not in result.shape:
        raise node.error(f"{name} must keep its input's shape {tuple(value.shape)}, got "
                         f"{tuple(result.shape)}")
    return sf.cast(result, value.dtype)


@converts("FlexAttention", domain=PREVIEW_DOMAIN)
def flex_attention(node: Node, query: Value, key: Value, value: Value) -> Value:
    """Y = prob_mod(softmax(score_mod(scale Q K^T))) V, (batch, q heads, q length, v
    head size) of V's type."""
    if query.ndim != 4 or key.ndim != 4 or value.ndim != 4:
        raise node.error(f"Q, K and V must be 4-D (batch, heads, sequence, head size), got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    q_heads, kv_heads = _static(node, (query.shape[1], key.shape[1]), "the head counts")
    if q_heads % kv_heads or value.shape[1] != kv_heads:
        raise node.error(f"the query heads ({q_heads}) must be a multiple of the key/value "
                         f"heads ({kv_heads}, {value.shape[1]}), which must agree")
    head_size = _static(node, query.shape[3:], "the head size of Q")[0]
    if key.shape[3] not in (head_size, None):
        raise node.error(f"Q and K must have the same head size, got {head_size} and "
                         f"{key.shape[3]}")
    dtype = np.dtype(query.dtype)
    precision = node.attr("softmax_precision", None)
    if precision is None:
        wide = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    else:
        wide = dtypes.from_onnx(precision)
        if wide is None or not is_floating(wide):
            raise node.error(f"softmax_precision must name a floating type, got "
                             f"{dtypes.type_name(precision)}")
    scale = node.attr("scale", None)
    root = np.sqrt(np.float32(1.0 / np.sqrt(head_size) if scale is None else scale))
    root = np.asarray(root, dtype)
    scores = sf.cast(_grouped_matmul(node, query * root, key * root, transpose_b=True), wide)
    scores = _modify(node, "score_mod", scores)
    probs = _modify(node, "prob_mod", sf.nn.softmax(scores, axis=-1))
    output = _grouped_matmul(node, probs, sf.cast(value, wide), transpose_b=False)
    return sf.cast(output, value.dtype)
