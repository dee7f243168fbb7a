"""Keras' initializer classes: objects ``(shape, dtype=None) -> value`` with a config, for the
`*_initializer=` arguments of layers.

An initializer given a ``seed`` draws from a stream made of that seed alone, so every call
gives the same values (as Keras 3's seeded initializers do); without one it draws from the
global stream (`sf.random.set_seed`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.frontend.ops import random as sf_random
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import fill, ones, zeros
from stageflow.frontend.tensor import Tensor
from stageflow.models.initializers import _fans

__all__ = ["Constant", "GlorotNormal", "GlorotUniform", "HeNormal", "HeUniform", "Identity",
           "Initializer", "LecunNormal", "LecunUniform", "Ones", "Orthogonal", "RandomNormal",
           "RandomUniform", "TruncatedNormal", "VarianceScaling", "Zeros"]

# The stddev of a unit normal truncated at two standard deviations.
_TRUNCATED_STDDEV = 0.87962566103423978


class Initializer:
    """The base class: a callable ``(shape, dtype=None) -> value`` with `get_config`.

    >>> class Twos(sf.keras.initializers.Initializer):
    ...     def __call__(self, shape, dtype=None):
    ...         return 2 * sf.ones(shape, dtype or sf.float32)
    >>> Twos()((2,))
    sf.Tensor([2., 2.], shape=(2,), dtype=float32)
    """

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}: define __call__(shape, dtype)")

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Initializer:
        return cls(**config)

    def clone(self) -> Initializer:
        return type(self).from_config(self.get_config())


def _dtype(dtype: Any) -> np.dtype:
    return dtypes.as_dtype(dtype or dtypes.float32)


def _generator(seed: int | None) -> Any:
    """The seed's own stream (the same values on every call), else the global one."""
    if seed is None:
        return sf_random.get_global_generator()
    return sf_random.Generator.from_seed(seed)


class _Seeded(Initializer):
    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed}


class RandomNormal(_Seeded):
    """N(mean, stddev^2).

    >>> init = sf.keras.initializers.RandomNormal(stddev=1.0, seed=1)
    >>> bool(sf.reduce_all(init((2, 2)) == init((2, 2))))  # seeded: the same every call
    True
    """

    def __init__(self, mean: float = 0.0, stddev: float = 0.05,
                 seed: int | None = None) -> None:
        super().__init__(seed)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        return _generator(self.seed).normal(tuple(shape), self.mean, self.stddev,
                                            _dtype(dtype))

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "mean": self.mean, "stddev": self.stddev}


class TruncatedNormal(RandomNormal):
    """N(mean, stddev^2) redrawn outside two standard deviations.

    >>> x = sf.keras.initializers.TruncatedNormal(stddev=1.0, seed=0)((100,))
    >>> bool(sf.reduce_max(sf.abs(x)) <= 2.0)
    True
    """

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        return _generator(self.seed).truncated_normal(tuple(shape), self.mean, self.stddev,
                                                      _dtype(dtype))


class RandomUniform(_Seeded):
    """U(minval, maxval).

    >>> x = sf.keras.initializers.RandomUniform(0.0, 1.0, seed=2)((100,))
    >>> bool(sf.reduce_min(x) >= 0.0), bool(sf.reduce_max(x) < 1.0)
    (True, True)
    """

    def __init__(self, minval: float = -0.05, maxval: float = 0.05,
                 seed: int | None = None) -> None:
        super().__init__(seed)
        self.minval, self.maxval = minval, maxval

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        return _generator(self.seed).uniform(tuple(shape), self.minval, self.maxval,
                                             _dtype(dtype))

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "minval": self.minval, "maxval": self.maxval}


class VarianceScaling(_Seeded):
    """Values of variance ``scale / n``, n the fan-in, the fan-out or their mean (`mode`):
    a normal truncated at two standard deviations (``"truncated_normal"``), an untruncated
    one (``"untruncated_normal"``) or a uniform (``"uniform"``).

    >>> init = sf.keras.initializers.VarianceScaling(2.0, "fan_in", "uniform", seed=0)
    >>> bool(sf.reduce_max(sf.abs(init((8, 4)))) <= np.sqrt(3 * 2.0 / 8))
    True
    >>> init.get_config()
    {'seed': 0, 'scale': 2.0, 'mode': 'fan_in', 'distribution': 'uniform'}
    """

    def __init__(self, scale: float = 1.0, mode: str = "fan_in",
                 distribution: str = "truncated_normal", seed: int | None = None) -> None:
        super().__init__(seed)
        if scale <= 0.0:
            raise ValueError(f"VarianceScaling: scale must be positive, got {scale!r}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"VarianceScaling: mode must be 'fan_in', 'fan_out' or "
                             f"'fan_avg', got {mode!r}")
        distribution = distribution.lower()
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError(f"VarianceScaling: distribution must be 'truncated_normal', "
                             f"'untruncated_normal' or 'uniform', got {distribution!r}")
        self.scale, self.mode, self.distribution = scale, mode, distribution

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        shape = tuple(int(d) for d in shape)
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out,
             "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        variance = self.scale / max(1.0, n)
        generator, dtype = _generator(self.seed), _dtype(dtype)
        if self.distribution == "truncated_normal":
            stddev = math.sqrt(variance) / _TRUNCATED_STDDEV
            return generator.truncated_normal(shape, 0.0, stddev, dtype)
        if self.distribution == "untruncated_normal":
            return generator.normal(shape, 0.0, math.sqrt(variance), dtype)
        limit = math.sqrt(3.0 * variance)
        return generator.uniform(shape, -limit, limit, dtype)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "scale": self.scale, "mode": self.mode,
                "distribution": self.distribution}


class _Fixed(VarianceScaling):
    """A variance scaling of fixed scale, mode and distribution: its config is its seed."""

    _RULE: tuple[float, str, str] = (1.0, "fan_in", "truncated_normal")

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(*self._RULE, seed=seed)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed}


class GlorotUniform(_Fixed):
    """U(-l, l), l = sqrt(6 / (fan_in + fan_out)): Keras' default kernel initializer.

    >>> w = sf.keras.initializers.GlorotUniform(seed=0)((3, 4))
    >>> bool(sf.reduce_max(sf.abs(w)) <= np.sqrt(6 / 7))
    True
    """

    _RULE = (1.0, "fan_avg", "uniform")


class GlorotNormal(_Fixed):
    """Truncated normal of variance 2 / (fan_in + fan_out).

    >>> sf.keras.initializers.GlorotNormal(seed=0)((3, 4)).shape
    (3, 4)
    """

    _RULE = (1.0, "fan_avg", "truncated_normal")


class HeNormal(_Fixed):
    """Truncated normal of variance 2 / fan_in (for ReLU networks).

    >>> sf.keras.initializers.HeNormal(seed=0)((3, 4)).shape
    (3, 4)
    """

    _RULE = (2.0, "fan_in", "truncated_normal")


class HeUniform(_Fixed):
    """U(-l, l), l = sqrt(6 / fan_in).

    >>> bool(sf.reduce_max(sf.abs(sf.keras.initializers.HeUniform(0)((6, 2)))) <= 1.0)
    True
    """

    _RULE = (2.0, "fan_in", "uniform")


class LecunNormal(_Fixed):
    """Truncated normal of variance 1 / fan_in (for SELU networks).

    >>> sf.keras.initializers.LecunNormal(seed=0)((3, 4)).dtype
    dtype('float32')
    """

    _RULE = (1.0, "fan_in", "truncated_normal")


class LecunUniform(_Fixed):
    """U(-l, l), l = sqrt(3 / fan_in).

    >>> bool(sf.reduce_max(sf.abs(sf.keras.initializers.LecunUniform(0)((3, 2)))) <= 1.0)
    True
    """

    _RULE = (1.0, "fan_in", "uniform")


class Zeros(Initializer):
    """All zeros.

    >>> sf.keras.initializers.Zeros()((2,))
    sf.Tensor([0., 0.], shape=(2,), dtype=float32)
    """

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        return zeros(tuple(shape), _dtype(dtype))


class Ones(Initializer):
    """All ones.

    >>> sf.keras.initializers.Ones()((2,), sf.float64)
    sf.Tensor([1., 1.], shape=(2,), dtype=float64)
    """

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        return ones(tuple(shape), _dtype(dtype))


class Constant(Initializer):
    """All `value`.

    >>> sf.keras.initializers.Constant(3.0)((2,))
    sf.Tensor([3., 3.], shape=(2,), dtype=float32)
    """

    def __init__(self, value: float = 0.0) -> None:
        self.value = value

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        dtype = _dtype(dtype)
        return fill(tuple(shape), convert_to_tensor(np.asarray(self.value, dtype)))

    def get_config(self) -> dict[str, Any]:
        return {"value": self.value}


class Identity(Initializer):
    """`gain` times the identity matrix (of a 2-D shape, rectangular allowed).

    >>> sf.keras.initializers.Identity(gain=2.0)((2, 3))
    sf.Tensor([[2., 0., 0.],
               [0., 2., 0.]], shape=(2, 3), dtype=float32)
    """

    def __init__(self, gain: float = 1.0) -> None:
        self.gain = gain

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        shape = tuple(int(d) for d in shape)
        if len(shape) != 2:
            raise ValueError(f"Identity initializer: needs a 2-D shape, got {shape}")
        return convert_to_tensor((self.gain * np.eye(*shape)).astype(_dtype(dtype)))

    def get_config(self) -> dict[str, Any]:
        return {"gain": self.gain}


class Orthogonal(_Seeded):
    """`gain` times a random matrix with orthonormal columns (or rows, when wider than
    tall), its shape's leading dims flattened: Keras' default for recurrent kernels.

    >>> q = sf.keras.initializers.Orthogonal(seed=1)((4, 4)).numpy()
    >>> bool(np.allclose(q.T @ q, np.eye(4), atol=1e-5))
    True
    """

    def __init__(self, gain: float = 1.0, seed: int | None = None) -> None:
        super().__init__(seed)
        self.gain = gain

    def __call__(self, shape: Any, dtype: Any = None) -> Tensor:
        shape, dtype = tuple(int(d) for d in shape), _dtype(dtype)
        rows, columns = math.prod(shape[:-1]), shape[-1]
        draw = _generator(self.seed).normal((max(rows, columns), min(rows, columns)),
                                            dtype=dtypes.float32).numpy().astype(np.float64)
        q, r = np.linalg.qr(draw)
        q = q * np.sign(np.diag(r))
        q = q.T if rows < columns else q
        return convert_to_tensor((self.gain * q).reshape(shape).astype(dtype))

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "gain": self.gain}
