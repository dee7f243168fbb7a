"""Signal processing: DFT, STFT and MelWeightMatrix.

ONNX holds a complex signal as a trailing dim of 2 (real, imaginary), a real one as a
trailing dim of 1. A DFT of static length is a matrix product: the signal's real and
imaginary parts side by side, times a matrix of cosines and sines built at import in
float64, gives the result's real and imaginary parts side by side. The matrix takes in the
signal's truncation to the DFT length (its zero padding adds nothing), the inverse's 1 / N,
the one-sided outputs, and the doubled middle bins of a one-sided inverse (the real signal of
a half spectrum, numpy.fft.irfft's), so that every variant is one `sf.matmul`. STFT gathers
its frames and folds a window known at import into the same matrix. MelWeightMatrix's
inputs are known at import and it is computed then.
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.creation import element_type
from stageflow.onnx.ops.shape import axis_of, ints


def _dft_matrix(used: int, length: int, bins: int, complex_in: bool, complex_out: bool,
                inverse: bool, weights: np.ndarray) -> np.ndarray:
    """The (parts_in * used, parts_out * bins) matrix taking the first `used` samples (real
    parts, then imaginary parts) to the first `bins` of the length-`length` DFT (real parts,
    then imaginary parts), each sample scaled by its weight."""
    sign = 1.0 if inverse else -1.0
    angle = 2 * np.pi * (np.outer(np.arange(used), np.arange(bins)) % length) / length
    gain = weights[:, None] / (length if inverse else 1)
    cos, sin = gain * np.cos(angle), gain * np.sin(angle)
    # e^(sign i angle) (a + i b) = a cos - sign b sin + i (sign a sin + b cos)
    rows = [[cos, sign * sin]]
    if complex_in:
        rows.append([-sign * sin, cos])
    if not complex_out:
        rows = [row[:1] for row in rows]
    return np.block(rows)


def _static_size(node: Node, x: Value, axis: int) -> int:
    size = x.shape[axis]
    if size is None:
        raise node.error(f"needs the transformed axis's size at import, got input shape "
                         f"{tuple(x.shape)}; give the model's inputs static shapes "
                         f"(sf.onnx.load(..., input_shapes={{name: shape}}))")
    return int(size)


def dft_along(node: Node, x: Value, axis: int, length: int, inverse: bool, onesided: bool,
        weights: Value | None = None) -> Value:
    """The DFT of length `length` of `x` (a trailing dim of 1 or 2) along `axis`; with
    `onesided`, the forward DFT's first length // 2 + 1 bins, or the inverse's real signal of
    a half spectrum; `weights` (of the used samples) scale the signal first."""
    parts = x.shape[-1]
    if parts not in (1, 2):
        raise node.error(f"the input's last dim holds a real (1) or complex (2) value, got "
                         f"shape {tuple(x.shape)}")
    size = _static_size(node, x, axis)
    if length < 1:
        raise node.error(f"the DFT length must be positive, got {length}")
    half = inverse and onesided
    used = min(size, length // 2 + 1 if half else length)
    bins = length // 2 + 1 if onesided and not inverse else length
    complex_out = not half
    gains = np.ones(used)
    if half:  # the bins of the other half, conjugates of 1 .. (length - 1) // 2
        gains[1:(length + 1) // 2] = 2
    known = weights is None or isinstance(weights, np.ndarray)
    if weights is not None and known:
        gains = gains * np.asarray(weights, np.float64)[:used]
    rank = x.ndim
    order = [a for a in range(rank - 1) if a != axis] + [axis, rank - 1]
    moved = x if axis == rank - 2 else sf.transpose(x, order)
    moved = moved[..., :used, :]
    if not known:
        moved = moved * sf.reshape(weights[:used], (-1, 1))
    signal = moved[..., 0] if parts == 1 else sf.concat([moved[..., 0], moved[..., 1]], -1)
    matrix = _dft_matrix(used, length, bins, parts == 2, complex_out, inverse, gains)
    y = sf.matmul(signal, matrix.astype(x.dtype))
    y = sf.stack([y[..., :bins], y[..., bins:]], -1) if complex_out else sf.expand_dims(y, -1)
    return y if axis == rank - 2 else sf.transpose(y, np.argsort(order).tolist())


@converts("DFT")
def dft(node: Node, x: Value, dft_length: Value | None = None,
         axis_input: Value | None = None) -> Value:
    """Opset 17 takes the axis as an attribute (default 1), opset 20 as an input (default
    -2, the last signal axis)."""
    if node.opset >= 20:
        axis = -2 if axis_input is None else ints(node, axis_input, "the axis input")[0]
    else:
        axis = int(node.attr("axis", 1))
    axis = axis_of(node, axis, x.ndim)
    if axis == x.ndim - 1:
        raise node.error("the last axis holds the real and imaginary parts; it cannot be "
                         "transformed")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if dft_length is not None:
        length = ints(node, dft_length, "the dft_length input")[0]
    else:
        size = _static_size(node, x, axis)
        length = 2 * (size - 1) if inverse and onesided else size
    return dft_along(node, x, axis, length, inverse, onesided)


@converts("STFT")
def stft(node: Node, signal: Value, frame_step: Value, window: Value | None = None,
         frame_length: Value | None = None) -> Value:
    """(batch, frames, bins, 2): the DFT of each frame_length-long frame, frame_step apart,
    times the window."""
    if signal.ndim != 3 or signal.shape[1] is None:
        raise node.error(f"takes a signal (batch, length, 1 or 2) of static length, got "
                         f"shape {tuple(signal.shape)}")
    total = int(signal.shape[1])
    step = ints(node, frame_step, "the frame_step input")[0]
    if frame_length is not None:
        frame = ints(node, frame_length, "the frame_length input")[0]
    elif window is not None:
        frame = window.shape[0]
    else:
        frame = total
    if window is not None and window.shape[0] != frame:
        raise node.error(f"the window's length {window.shape[0]} differs from frame_length "
                         f"{frame}")
    if step < 1 or not 1 <= frame <= total:
        raise node.error(f"frame_step {step} and frame_length {frame} do not frame a signal "
                         f"of length {total}")
    count = 1 + (total - frame) // step
    starts = np.arange(count)[:, None] * step + np.arange(frame)[None, :]
    frames = sf.gather(signal, starts, axis=1)  # (batch, frames, frame, parts)
    return dft_along(node, frames, 2, frame, False, bool(node.attr("onesided", 1)), window)


def _mel(hertz: np.ndarray) -> np.ndarray:
    return 2595 * np.log1p(hertz / 700) / np.log(10)


@converts("MelWeightMatrix")
def mel_weight_matrix(node: Node, num_mel_bins: Value, dft_length: Value, sample_rate: Value,
                      lower_edge_hertz: Value, upper_edge_hertz: Value) -> Value:
    """(dft_length // 2 + 1, num_mel_bins) triangular filters, evenly spaced on the mel
    scale, each peaking at 1 on its center's spectrogram bin."""
    bands = ints(node, num_mel_bins, "num_mel_bins")[0]
    length = ints(node, dft_length, "dft_length")[0]
    rate = ints(node, sample_rate, "sample_rate")[0]
    low = _mel(node.const(lower_edge_hertz, "lower_edge_hertz"))
    high = _mel(node.const(upper_edge_hertz, "upper_edge_hertz"))
    bins = length // 2 + 1
    points = np.arange(0, bands + 2) * ((high - low) / (bands + 2)) + low
    edges = (((length + 1) * (700 * np.expm1(points / 2595 * np.log(10)))) // rate).astype(int)
    if bands < 1 or edges.min() < 0 or edges.max() >= bins:
        raise node.error(f"{bands} mel bins from {lower_edge_hertz} to {upper_edge_hertz} Hz "
                         f"do not fit the {bins} bins of a {length}-point DFT at {rate} Hz")
    weights = np.zeros((bins, bands))
    for band in range(bands):
        left, center, right = edges[band:band + 3]
        if center == left:
            weights[center, band] = 1
        else:
            weights[left:center + 1, band] = np.arange(center - left + 1) / (center - left)
        if right > center:
            weights[center:right, band] = (right - np.arange(center, right)) / (right - center)
    return weights.astype(element_type(node, node.attr("output_datatype", 1)))
