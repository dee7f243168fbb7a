"""`sf.signal`'s framing and spectrograms: `frame`, `overlap_and_add`, the `hann_window`
and `hamming_window`, `stft` and `inverse_stft`, and the mel scale
(`linear_to_mel_weight_matrix`, `mfccs_from_log_mel_spectrograms`), as TensorFlow's
``tf.signal`` defines them.

Frame, window and FFT lengths are Python ints (they decide shapes), and the framed axis
must be known when a function is traced. Frames are a `gather` of the signal, overlap-add
a product with a matrix of ones: both run staged and differentiate.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.shapes import normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.linalg import tensordot
from stageflow.frontend.ops.shape import gather, pad, reshape
from stageflow.frontend.ops.spectral import dct, irfft, rfft
from stageflow.frontend.tensor import Tensor

__all__ = ["frame", "hamming_window", "hann_window", "inverse_stft",
           "linear_to_mel_weight_matrix", "mfccs_from_log_mel_spectrograms", "overlap_and_add",
           "stft"]


def _fail(op: str, message: str, error: type[Exception] = ValueError) -> Exception:
    return error(f"sf.signal.{op}: {message}{describe_location()}")


def _length(value: Any, what: str, op: str) -> int:
    if isinstance(value, Tensor):
        value = np.asarray(value._value).item()
    length = operator.index(value)
    if length < 0:
        raise _fail(op, f"{what} must not be negative, got {length}")
    return length


def frame(signal: Any, frame_length: int, frame_step: int, pad_end: bool = False,
          pad_value: Any = 0, axis: int = -1, name: str | None = None) -> Tensor:
    """Frames of `frame_length` samples every `frame_step` along `axis`, which becomes two
    axes [frames, frame_length]; `pad_end` pads the end with `pad_value` so that every
    sample is in a frame.

    >>> sf.signal.frame(sf.range(5), 3, 2)
    sf.Tensor([[0, 1, 2],
               [2, 3, 4]], shape=(2, 3), dtype=int32)
    """
    x = convert_to_tensor(signal)
    length = _length(frame_length, "frame_length", "frame")
    step = _length(frame_step, "frame_step", "frame")
    if step == 0:
        raise _fail("frame", "frame_step must be positive")
    axis = normalize_axis(operator.index(axis), x.ndim)
    samples = x.shape[axis]
    if samples is None:
        raise _fail("frame", f"the framed axis must be known when the function is traced, got "
                             f"shape {x.shape}")
    if pad_end:
        frames = -(-samples // step)
        extra = max(0, (frames - 1) * step + length - samples)
        if extra:
            paddings = [[0, 0]] * x.ndim
            paddings[axis] = [0, extra]
            x = pad(x, paddings, constant_values=pad_value)
    else:
        frames = max(0, 1 + (samples - length) // step) if samples >= length else 0
    indices = (np.arange(frames)[:, None] * step + np.arange(length)[None, :]).astype(np.int32)
    return gather(x, indices, axis=axis)


def overlap_and_add(signal: Any, frame_step: int, name: str | None = None) -> Tensor:
    """The frames of ``[..., frames, frame_length]`` added back together, frame ``f``
    starting at sample ``f * frame_step``: the inverse of `frame` up to the overlaps.

    >>> sf.signal.overlap_and_add(sf.ones((2, 3)), 2)
    sf.Tensor([1., 1., 2., 1., 1.], shape=(5,), dtype=float32)
    """
    x = convert_to_tensor(signal)
    step = _length(frame_step, "frame_step", "overlap_and_add")
    if x.ndim < 2 or None in x.shape[-2:]:
        raise _fail("overlap_and_add", f"expected [..., frames, frame_length] with both "
                                       f"known, got shape {x.shape}")
    frames, length = x.shape[-2:]
    out = max(0, (frames - 1) * step + length) if frames else 0
    rows = np.arange(frames * length)
    placing = np.zeros((frames * length, out), np.float64)
    placing[rows, (rows // max(length, 1)) * step + rows % max(length, 1)] = 1.0
    batch = [d if d is not None else -1 for d in x.shape[:-2]]  # one unknown dim at most
    flat = reshape(x, [*batch, frames * length])
    result = tensordot(flat, convert_to_tensor(placing.astype(x.dtype)), 1)
    return result


def _window(length: Any, periodic: bool, dtype: Any, a: float, op: str) -> Tensor:
    n = _length(length, "window_length", op)
    kind = dtypes.as_dtype(dtype)
    if not dtypes.is_floating(kind):
        raise _fail(op, f"dtype must be a float dtype, got {kind.name}", TypeError)
    if n == 1:
        return convert_to_tensor(np.ones(1, kind))
    denominator = n if periodic else n - 1
    values = a - (1.0 - a) * np.cos(2.0 * np.pi * np.arange(n) / max(denominator, 1))
    return convert_to_tensor(values.astype(kind))


def hann_window(window_length: int, periodic: bool = True, dtype: Any = dtypes.float32,
                name: str | None = None) -> Tensor:
    """The Hann window ``0.5 - 0.5 cos(2 pi n / N)`` with N the length (`periodic`, for
    spectral analysis) or the length less one.

    >>> sf.signal.hann_window(4)
    sf.Tensor([0. , 0.5, 1. , 0.5], shape=(4,), dtype=float32)
    """
    return _window(window_length, periodic, dtype, 0.5, "hann_window")


def hamming_window(window_length: int, periodic: bool = True, dtype: Any = dtypes.float32,
                   name: str | None = None) -> Tensor:
    """The Hamming window ``0.54 - 0.46 cos(2 pi n / N)``, N as in `hann_window`.

    >>> sf.signal.hamming_window(3, periodic=False)
    sf.Tensor([0.08, 1.  , 0.08], shape=(3,), dtype=float32)
    """
    return _window(window_length, periodic, dtype, 0.54, "hamming_window")


def _default_fft_length(frame_length: int) -> int:
    return 1 << max(0, (frame_length - 1).bit_length())


def stft(signals: Any, frame_length: int, frame_step: int, fft_length: int | None = None,
         window_fn: Callable[..., Any] | None = hann_window, pad_end: bool = False,
         name: str | None = None) -> Tensor:
    """The short-time Fourier transform: `rfft` of the windowed frames of the last axis
    (`fft_length` defaults to the smallest power of 2 holding a frame; `window_fn`
    (length, dtype=...) gives the window, None none).

    signals: float32/64 [..., samples]; returns complex [..., frames, fft_length // 2 + 1].

    >>> sf.signal.stft(sf.ones((16,)), frame_length=8, frame_step=4).shape
    (3, 5)
    """
    x = convert_to_tensor(signals)
    length = _length(frame_length, "frame_length", "stft")
    size = _default_fft_length(length) if fft_length is None else \
        _length(fft_length, "fft_length", "stft")
    frames = frame(x, length, frame_step, pad_end=pad_end, axis=-1)
    if window_fn is not None:
        frames = frames * window_fn(length, dtype=x.dtype)
    return rfft(frames, [size])


def inverse_stft(stfts: Any, frame_length: int, frame_step: int, fft_length: int | None = None,
                 window_fn: Callable[..., Any] | None = hann_window,
                 name: str | None = None) -> Tensor:
    """The signal of a `stft`: `irfft` of each frame, windowed, overlapped and added. It
    inverts `stft` exactly when the windows of the two sum to one where frames overlap
    (TensorFlow's ``inverse_stft_window_fn`` builds such a window).

    stfts: complex [..., frames, fft_length // 2 + 1]; returns [..., samples].

    >>> x = sf.signal.stft(sf.ones((16,)), 8, 4, window_fn=None)
    >>> sf.signal.inverse_stft(x, 8, 8, window_fn=None).shape
    (24,)
    """
    x = convert_to_tensor(stfts)
    length = _length(frame_length, "frame_length", "inverse_stft")
    size = _default_fft_length(length) if fft_length is None else \
        _length(fft_length, "fft_length", "inverse_stft")
    frames = irfft(x, [size])
    if size > length:
        frames = frames[..., :length]
    elif size < length:
        frames = pad(frames, [[0, 0]] * (frames.ndim - 1) + [[0, length - size]])
    if window_fn is not None:
        frames = frames * window_fn(length, dtype=frames.dtype)
    return overlap_and_add(frames, frame_step)


def _hertz_to_mel(frequencies: np.ndarray) -> np.ndarray:
    return 1127.0 * np.log1p(frequencies / 700.0)


def linear_to_mel_weight_matrix(num_mel_bins: int = 20, num_spectrogram_bins: int = 129,
                                sample_rate: float = 8000, lower_edge_hertz: float = 125.0,
                                upper_edge_hertz: float = 3800.0, dtype: Any = dtypes.float32,
                                name: str | None = None) -> Tensor:
    """The [num_spectrogram_bins, num_mel_bins] matrix that maps a linear-frequency
    magnitude spectrogram (``|stft|``) to mel bands: triangles between band edges evenly
    spaced on the mel scale ``1127 log(1 + f / 700)``, as TensorFlow's (the zero-frequency
    bin weighs nothing).

    >>> sf.signal.linear_to_mel_weight_matrix(4, 9, 8000, 0.0, 4000.0).shape
    (9, 4)
    """
    op = "linear_to_mel_weight_matrix"
    bins, mels = _length(num_spectrogram_bins, "num_spectrogram_bins", op), \
        _length(num_mel_bins, "num_mel_bins", op)
    if mels == 0 or sample_rate <= 0 or not 0 <= lower_edge_hertz < upper_edge_hertz or \
            upper_edge_hertz > sample_rate / 2:
        raise _fail(op, f"need num_mel_bins > 0, sample_rate > 0 and 0 <= lower_edge_hertz "
                        f"< upper_edge_hertz <= sample_rate / 2, got {mels}, {sample_rate}, "
                        f"{lower_edge_hertz}, {upper_edge_hertz}")
    linear = _hertz_to_mel(np.linspace(0.0, sample_rate / 2.0, bins)[1:])[:, None]
    edges = np.linspace(_hertz_to_mel(np.float64(lower_edge_hertz)),
                        _hertz_to_mel(np.float64(upper_edge_hertz)), mels + 2)
    lower, center, upper = edges[:-2][None], edges[1:-1][None], edges[2:][None]
    rising = (linear - lower) / (center - lower)
    falling = (upper - linear) / (upper - center)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    weights = np.concatenate([np.zeros((1, mels)), weights], axis=0)
    return convert_to_tensor(weights.astype(dtypes.as_dtype(dtype)))


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms: Any, name: str | None = None
                                    ) -> Tensor:
    """Mel-frequency cepstral coefficients: the type 2 `dct` of log mel spectrograms
    [..., num_mel_bins] over the bins, scaled by ``1 / sqrt(2 num_mel_bins)`` (keep the
    first few).

    >>> sf.signal.mfccs_from_log_mel_spectrograms(sf.ones((2, 8))).shape
    (2, 8)
    """
    x = convert_to_tensor(log_mel_spectrograms)
    mels = x.shape[-1]
    if mels is None or mels == 0:
        raise _fail("mfccs_from_log_mel_spectrograms", f"num_mel_bins must be known and "
                                                       f"positive, got shape {x.shape}")
    return ew.multiply(dct(x, type=2), convert_to_tensor(1.0 / np.sqrt(2.0 * mels), x.dtype))
