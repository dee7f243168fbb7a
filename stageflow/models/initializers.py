"""Variable initializers by name, for the `*_initializer=` arguments of layers (Keras'
names and rules: Glorot-uniform kernels, zero biases)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.frontend.ops import random as sf_random
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones, zeros
from stageflow.frontend.tensor import Tensor

__all__ = ["INITIALIZERS", "get_initializer", "glorot_normal", "glorot_uniform", "he_normal",
           "he_uniform", "lecun_normal", "lecun_uniform", "orthogonal", "random_normal",
           "random_uniform"]


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """Keras' fan-in and fan-out: the last two dims, times the receptive field for convs."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def glorot_uniform(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """U(-l, l) with l = sqrt(6 / (fan_in + fan_out)) (Keras' default kernel initializer)."""
    fan_in, fan_out = _fans(shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return sf_random.uniform(shape, -limit, limit, dtype=dtype)


def he_uniform(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """U(-l, l) with l = sqrt(6 / fan_in) (for ReLU networks)."""
    limit = math.sqrt(6.0 / _fans(shape)[0])
    return sf_random.uniform(shape, -limit, limit, dtype=dtype)


def lecun_uniform(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """U(-l, l) with l = sqrt(3 / fan_in) (for SELU networks)."""
    limit = math.sqrt(3.0 / _fans(shape)[0])
    return sf_random.uniform(shape, -limit, limit, dtype=dtype)


def _scaled_normal(shape: tuple[int, ...], dtype: Any, variance: float) -> Tensor:
    """Keras' variance-scaling normals: a normal truncated at two standard deviations, its
    stddev divided by 0.8796 (the stddev of a unit normal so truncated) to keep
    `variance`."""
    return sf_random.truncated_normal(shape, 0.0, math.sqrt(variance) / 0.87962566103423978,
                                      dtype=dtype)


def glorot_normal(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """Truncated normal with variance 2 / (fan_in + fan_out)."""
    fan_in, fan_out = _fans(shape)
    return _scaled_normal(shape, dtype, 2.0 / (fan_in + fan_out))


def he_normal(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """Truncated normal with variance 2 / fan_in (for ReLU networks)."""
    return _scaled_normal(shape, dtype, 2.0 / _fans(shape)[0])


def lecun_normal(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """Truncated normal with variance 1 / fan_in (for SELU networks)."""
    return _scaled_normal(shape, dtype, 1.0 / _fans(shape)[0])


def random_normal(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """N(0, 0.05^2) (Keras' "random_normal")."""
    return sf_random.normal(shape, 0.0, 0.05, dtype=dtype)


def random_uniform(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """U(-0.05, 0.05) (Keras' "uniform", the default of embeddings)."""
    return sf_random.uniform(shape, -0.05, 0.05, dtype=dtype)


def orthogonal(shape: tuple[int, ...], dtype: Any = dtypes.float32) -> Tensor:
    """A random matrix with orthonormal columns (or rows, when wider than tall): Keras'
    default for recurrent kernels, which keeps repeated products from growing or fading."""
    rows, columns = shape[0], math.prod(shape[1:])
    draw = sf_random.normal((max(rows, columns), min(rows, columns)), dtype=dtype).numpy()
    q, r = np.linalg.qr(draw)
    q = q * np.sign(np.diag(r))
    return convert_to_tensor((q.T if rows < columns else q).reshape(shape).astype(dtype))


INITIALIZERS: dict[str, Callable[..., Tensor]] = {
    "orthogonal": orthogonal,
    "glorot_uniform": glorot_uniform,
    "glorot_normal": glorot_normal,
    "uniform": random_uniform,
    "random_uniform": random_uniform,
    "random_normal": random_normal,
    "he_uniform": he_uniform,
    "he_normal": he_normal,
    "lecun_uniform": lecun_uniform,
    "lecun_normal": lecun_normal,
    "zeros": zeros,
    "ones": ones,
}


def get_initializer(initializer: str | Callable) -> Callable[..., Any]:
    """A callable ``(shape, dtype) -> value`` for an initializer name or callable: what
    the layers' ``*_initializer=`` arguments accept (Keras calls it with ``dtype=`` by
    keyword, so ``sf.random.normal`` is one). Names: Keras' ``"glorot_uniform"``,
    ``"glorot_normal"``, ``"he_uniform"``, ``"he_normal"``, ``"lecun_uniform"``,
    ``"lecun_normal"``, ``"random_uniform"`` (``"uniform"``), ``"random_normal"``,
    ``"orthogonal"``, ``"zeros"``, ``"ones"``.

    >>> sf.layers.get_initializer("ones")((2, 3), sf.float64)
    sf.Tensor([[1., 1., 1.],
               [1., 1., 1.]], shape=(2, 3), dtype=float64)
    >>> kernel = sf.layers.get_initializer("glorot_uniform")((3, 4), sf.float32)
    >>> bool(np.abs(kernel.numpy()).max() <= np.sqrt(6 / (3 + 4)))  # U(-l, l)
    True
    >>> q = sf.layers.get_initializer("orthogonal")((4, 4), sf.float32).numpy()
    >>> bool(np.allclose(q.T @ q, np.eye(4), atol=1e-5))
    True
    """
    if isinstance(initializer, type):  # an initializer class (Keras'): made without arguments
        return initializer()
    if callable(initializer):
        return initializer
    if isinstance(initializer, str) and initializer in INITIALIZERS:
        return INITIALIZERS[initializer]
    names = ", ".join(sorted(INITIALIZERS))
    raise ValueError(f"sf.layers: unknown initializer {initializer!r} (use a callable "
                     f"(shape, dtype) -> value, or one of {names})")
