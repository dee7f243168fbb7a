"""CausalConvWithState: the stateful causal depthwise 1-D convolution of Mamba and Gated
DeltaNet decoders, with its carried state.

The input (N, C, L) is prefixed by the past state (N, C, k - 1), zeros where there is none;
each output position sums its channel's k taps over the current and past positions, as shifted
slices of the prefixed input times the (C, 1, k) filter's columns. The sum is accumulated in
float32 (or float64), as is the optional SiLU, and returned in the input's type; the present
state is the prefixed input's last k - 1 positions.
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.quantization import as_dtype, dtype_of

_ACTIVATIONS = ("none", "silu", "swish")


@converts("CausalConvWithState")
def causal_conv_with_state(node: Node, x: Value, w: Value, bias: Value | None = None,
                           past_state: Value | None = None) -> list[Value]:
    activation = node.attr("activation", "none")
    if activation not in _ACTIVATIONS:
        raise node.error(f"activation {activation!r} is not one of {', '.join(_ACTIVATIONS)}")
    if x.ndim != 3 or w.ndim != 3 or w.shape[1] != 1:
        raise node.error(f"takes an input (N, C, L) and filters (C, 1, k), got shapes "
                         f"{tuple(x.shape)} and {tuple(w.shape)}")
    if w.shape[2] is None:
        raise node.error(f"the filters' shape {tuple(w.shape)} must be static")
    taps = int(w.shape[2])
    dtype = dtype_of(x)
    wide = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    if past_state is None:
        padded = sf.pad(x, [(0, 0), (0, 0), (taps - 1, 0)])
    elif past_state.ndim != 3 or past_state.shape[2] not in (taps - 1, None):
        raise node.error(f"the past state (N, C, k - 1) of filters of {taps} taps has shape "
                         f"{tuple(past_state.shape)}")
    else:
        padded = sf.concat([past_state, x], axis=2)
    signal = as_dtype(padded, wide)
    filters = as_dtype(w, wide)
    total = None
    for tap in range(taps):
        term = signal[:, :, tap:tap + 1 - taps or None] * filters[:, :, tap]
        total = term if total is None else total + term
    assert total is not None
    if bias is not None:
        total = total + sf.reshape(as_dtype(bias, wide), (-1, 1))
    if activation != "none":
        total = total * sf.sigmoid(total)
    state = padded[:, :, 1 - taps:] if taps > 1 else padded[:, :, :0]
    return [as_dtype(total, dtype), state]
