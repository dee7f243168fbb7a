"""`sf.signal`'s transforms: the discrete Fourier transforms (`fft`, `ifft`, `rfft`,
`irfft`, `fft2d`, `ifft2d`) and the discrete cosine transform (`dct`, `idct`), over the last
axis as TensorFlow's ``tf.signal`` takes them.

There is no FFT primitive: each transform is a product with the transform's matrix (its
cosines and sines, computed once per length on the host), written with `tensordot` on the
real and imaginary parts. So the transforms run eagerly and staged alike, compile like any
product and differentiate through it; the cost is quadratic in the transformed length, which
suits the frame and window lengths of audio and small images.

A float32 signal gives complex64 results and float64 complex128, as in TensorFlow.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.complex_numbers import complex as make_complex
from stageflow.frontend.ops.complex_numbers import imag, real
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.linalg import tensordot
from stageflow.frontend.ops.shape import pad, transpose
from stageflow.frontend.tensor import Tensor

__all__ = ["dct", "fft", "fft2d", "idct", "ifft", "ifft2d", "irfft", "rfft"]

_PART = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}
_WHOLE = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}


def _fail(op: str, message: str, error: type[Exception] = ValueError) -> Exception:
    return error(f"sf.signal.{op}: {message}{describe_location()}")


def _last_length(x: Tensor, op: str) -> int:
    if x.ndim < 1 or x.shape[-1] is None:
        raise _fail(op, f"the last dim must be known when the function is traced, got shape "
                        f"{x.shape}")
    return x.shape[-1]


def _parts(input_tensor: Any, op: str) -> tuple[Tensor, Tensor]:
    """The real and imaginary parts of a complex (or real) tensor."""
    x = convert_to_tensor(input_tensor)
    if x.dtype in _WHOLE:
        x = ew.cast(x, _WHOLE[x.dtype])
    if x.dtype not in _PART:
        raise _fail(op, f"expected a complex64 or complex128 tensor, got {x.dtype.name}",
                    TypeError)
    return real(x), imag(x)


def _real(input_tensor: Any, op: str) -> Tensor:
    x = convert_to_tensor(input_tensor)
    if x.dtype not in _WHOLE:
        raise _fail(op, f"expected a float32 or float64 tensor, got {x.dtype.name}", TypeError)
    return x


def _fit(x: Tensor, length: int) -> Tensor:
    """The last axis cut or zero-padded to `length`."""
    have = x.shape[-1]
    if have > length:
        return x[..., :length]
    if have < length:
        return pad(x, [[0, 0]] * (x.ndim - 1) + [[0, length - have]])
    return x


def _fft_length(fft_length: Any, have: int, op: str) -> int:
    if fft_length is None:
        return have
    lengths = np.asarray(fft_length._value if isinstance(fft_length, Tensor) else fft_length)
    if lengths.shape not in ((), (1,)):
        raise _fail(op, f"fft_length must hold one length, got {lengths.tolist()}")
    return operator.index(lengths.reshape(-1)[0].item())


@functools.lru_cache(maxsize=64)
def _angles(rows: int, columns: int, length: int) -> np.ndarray:
    """``2 pi n k / length`` for row n and column k, reduced modulo `length` first so that
    the cosines and sines stay exact for long transforms."""
    product = np.outer(np.arange(rows), np.arange(columns)) % length
    return 2.0 * np.pi * product / length


def _matrix(values: np.ndarray, like: Tensor) -> Tensor:
    """`values` in `like`'s dtype, the rounding left by ``cos(pi / 2)`` and the like made
    the exact zeros they stand for (no true entry is anywhere near so small)."""
    exact = np.where(np.abs(values) < 1e-12, 0.0, values)
    return convert_to_tensor(exact.astype(like.dtype))


def _complex_product(re: Tensor, im: Tensor, cos: np.ndarray, sin: np.ndarray) -> Tensor:
    """``(re + i im) @ (cos + i sin)`` over the last axis."""
    c, s = _matrix(cos, re), _matrix(sin, re)
    return make_complex(tensordot(re, c, 1) - tensordot(im, s, 1),
                        tensordot(re, s, 1) + tensordot(im, c, 1))


def fft(input: Any, name: str | None = None) -> Tensor:  # noqa: A002 - TensorFlow's name
    """The discrete Fourier transform over the last axis:
    ``X[k] = sum_n x[n] exp(-2 pi i n k / N)``.

    input: complex64 or complex128 [..., N] (float32/64 taken as complex); returns the same
    shape and complex dtype.

    >>> sf.signal.fft(sf.constant([1.0, 2.0, 3.0, 4.0]))
    sf.Tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j], shape=(4,), dtype=complex64)
    """
    re, im = _parts(input, "fft")
    n = _last_length(re, "fft")
    angles = _angles(n, n, n)
    return _complex_product(re, im, np.cos(angles), -np.sin(angles))


def ifft(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The inverse of `fft` over the last axis:
    ``x[n] = (1 / N) sum_k X[k] exp(2 pi i n k / N)``.

    >>> sf.signal.ifft(sf.signal.fft(sf.constant([1.0, 2.0, 3.0, 4.0])))
    sf.Tensor([1.+0.j, 2.+0.j, 3.+0.j, 4.+0.j], shape=(4,), dtype=complex64)
    """
    re, im = _parts(input, "ifft")
    n = _last_length(re, "ifft")
    angles = _angles(n, n, n)
    return _complex_product(re, im, np.cos(angles) / max(n, 1), np.sin(angles) / max(n, 1))


def rfft(input_tensor: Any, fft_length: Any = None, name: str | None = None) -> Tensor:
    """The `fft` of a real signal, only its ``fft_length // 2 + 1`` non-negative
    frequencies (the others are their conjugates); the signal is cut or zero-padded to
    `fft_length` (default: its length) first.

    input_tensor: float32 or float64 [..., N]; returns complex64 or complex128
    [..., fft_length // 2 + 1].

    >>> sf.signal.rfft(sf.constant([1.0, 2.0, 3.0, 4.0]))
    sf.Tensor([10.+0.j, -2.+2.j, -2.+0.j], shape=(3,), dtype=complex64)
    """
    x = _real(input_tensor, "rfft")
    n = _fft_length(fft_length, _last_length(x, "rfft"), "rfft")
    x = _fit(x, n)
    angles = _angles(n, n // 2 + 1, max(n, 1))
    return make_complex(tensordot(x, _matrix(np.cos(angles), x), 1),
                        tensordot(x, _matrix(-np.sin(angles), x), 1))


def irfft(input_tensor: Any, fft_length: Any = None, name: str | None = None) -> Tensor:
    """The real signal of length `fft_length` whose `rfft` is `input_tensor` (default length
    ``2 * (M - 1)`` for M frequencies); the imaginary parts of the zero and (even lengths)
    the highest frequency are ignored, as in TensorFlow.

    input_tensor: complex64 or complex128 [..., M]; returns float32 or float64
    [..., fft_length].

    >>> sf.signal.irfft(sf.signal.rfft(sf.constant([1.0, 2.0, 3.0, 4.0])))
    sf.Tensor([1., 2., 3., 4.], shape=(4,), dtype=float32)
    """
    re, im = _parts(input_tensor, "irfft")
    have = _last_length(re, "irfft")
    n = _fft_length(fft_length, 2 * (have - 1), "irfft")
    bins = n // 2 + 1
    re, im = _fit(re, bins), _fit(im, bins)
    weight = np.full(bins, 2.0)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    angles = _angles(bins, n, max(n, 1))
    scale = weight[:, None] / max(n, 1)
    return (tensordot(re, _matrix(np.cos(angles) * scale, re), 1)
            - tensordot(im, _matrix(np.sin(angles) * scale, im), 1))


def _last_two(transform: Any, input: Any, op: str) -> Tensor:  # noqa: A002
    x = convert_to_tensor(input)
    if x.ndim < 2:
        raise _fail(op, f"expected at least 2 dims, got shape {x.shape}")
    perm = [*range(x.ndim - 2), x.ndim - 1, x.ndim - 2]
    return transpose(transform(transpose(transform(x), perm)), perm)


def fft2d(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The 2-D discrete Fourier transform over the last two axes (`fft` of each).

    >>> sf.signal.fft2d(sf.constant([[1.0, 2.0], [3.0, 4.0]]))
    sf.Tensor([[10.+0.j, -2.+0.j],
               [-4.+0.j,  0.+0.j]], shape=(2, 2), dtype=complex64)
    """
    return _last_two(fft, input, "fft2d")


def ifft2d(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The inverse of `fft2d` over the last two axes.

    >>> sf.math.real(sf.signal.ifft2d(sf.signal.fft2d(sf.constant([[1.0, 2.0], [3.0, 4.0]]))))
    sf.Tensor([[1., 2.],
               [3., 4.]], shape=(2, 2), dtype=float32)
    """
    return _last_two(ifft, input, "ifft2d")


def _dct_matrix(kind: int, n: int, ortho: bool) -> np.ndarray:
    """The [n, n] matrix of TensorFlow's DCT of `kind` (2 or 3): rows index the input."""
    grid_n, grid_k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    two = 2.0 * np.cos(np.pi * grid_k * (2 * grid_n + 1) / (2 * n))  # type 2, [n, k]
    if ortho:
        two = two * np.where(grid_k == 0, np.sqrt(1.0 / (4 * n)), np.sqrt(1.0 / (2 * n)))
    if kind == 2:
        return two
    if ortho:  # the orthonormal type 3 is the inverse (transpose) of the type 2
        return two.T
    three = np.cos(np.pi * grid_n * (2 * grid_k + 1) / (2 * n))
    three[1:] *= 2.0
    return three


def _dct(input: Any, kind: int, n: Any, axis: int, norm: Any, op: str) -> Tensor:  # noqa: A002
    x = _real(input, op)
    if kind not in (2, 3):
        raise _fail(op, f"type {kind}: only types 2 and 3 are implemented", NotImplementedError)
    if axis != -1:
        raise _fail(op, f"axis must be -1, got {axis}", NotImplementedError)
    if norm not in (None, "ortho"):
        raise _fail(op, f"norm must be None or 'ortho', got {norm!r}")
    if n is not None:
        x = _fit(x, operator.index(n))
    length = _last_length(x, op)
    return tensordot(x, _matrix(_dct_matrix(kind, length, norm == "ortho"), x), 1)


def dct(input: Any, type: int = 2, n: Any = None, axis: int = -1,  # noqa: A002
        norm: str | None = None, name: str | None = None) -> Tensor:
    """The discrete cosine transform of type 2 (or 3) over the last axis, as TensorFlow
    scales it: type 2 is ``y[k] = 2 sum_n x[n] cos(pi k (2n + 1) / (2N))``; ``norm='ortho'``
    makes it orthonormal. `n` cuts or zero-pads the signal first.

    >>> sf.signal.dct(sf.constant([1.0, 2.0, 3.0]))
    sf.Tensor([12. , -3.464101..., 0. ], shape=(3,), dtype=float32)
    """
    return _dct(input, type, n, axis, norm, "dct")


def idct(input: Any, type: int = 2, n: Any = None, axis: int = -1,  # noqa: A002
         norm: str | None = None, name: str | None = None) -> Tensor:
    """The inverse of `dct` of `type` 2 (or 3), as TensorFlow defines it: the DCT of the
    other type, which inverts it exactly with ``norm='ortho'`` and up to ``2N`` without.

    >>> sf.signal.idct(sf.constant([4.0, 0.0]))
    sf.Tensor([4., 4.], shape=(2,), dtype=float32)
    """
    return _dct(input, 5 - type if type in (2, 3) else type, n, axis, norm, "idct")
