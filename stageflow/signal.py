"""`sf.signal`: TensorFlow's `tf.signal` names: the discrete Fourier and cosine
transforms, framing, windows, short-time Fourier transforms and the mel scale.

Exactly the public names; they are defined and documented in
`stageflow.frontend.ops.spectral` (the transforms) and
`stageflow.frontend.ops.spectrograms` (frames, windows, spectrograms).
"""

from stageflow.frontend.ops.spectral import dct, fft, fft2d, idct, ifft, ifft2d, irfft, rfft
from stageflow.frontend.ops.spectrograms import (
    frame,
    hamming_window,
    hann_window,
    inverse_stft,
    linear_to_mel_weight_matrix,
    mfccs_from_log_mel_spectrograms,
    overlap_and_add,
    stft,
)

__all__ = ["dct", "fft", "fft2d", "frame", "hamming_window", "hann_window", "idct", "ifft",
           "ifft2d", "inverse_stft", "irfft", "linear_to_mel_weight_matrix",
           "mfccs_from_log_mel_spectrograms", "overlap_and_add", "rfft", "stft"]
