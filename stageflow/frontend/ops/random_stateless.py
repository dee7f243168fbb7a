"""More of TensorFlow's stateless random ops: `stateless_categorical`,
`stateless_truncated_normal`, the seed ops `fold_in` and (in `sf.random.experimental`)
`stateless_split` and `stateless_fold_in`, and `create_rng_state`.

Each is a function of its seed (a pair of ints) alone, drawn from a Philox state made of
the seed (the `_Stateless` generator of `stageflow.frontend.ops.random`), so they run
eagerly and staged with the same values. The numbers differ from TensorFlow's; the
distributions are TensorFlow's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.random import _fail, _philox, _seed_state, _shape, _Stateless
from stageflow.frontend.ops.reductions import argmax, reduce_sum
from stageflow.frontend.ops.shape import one_hot, stack
from stageflow.frontend.tensor import Tensor

__all__ = ["create_rng_state", "fold_in", "stateless_categorical", "stateless_fold_in",
           "stateless_split", "stateless_truncated_normal"]

# Normal candidates drawn per truncated value: the first within two standard deviations is
# kept; all of them miss with probability ``0.0455 ** _CANDIDATES``, negligible.
_CANDIDATES = 16
_SEED_DTYPES = (dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint64)


def _seed(seed: Any, op: str) -> Tensor:
    value = convert_to_tensor(seed)
    if value.dtype not in _SEED_DTYPES or tuple(value.shape) != (2,):
        raise _fail(op, f"seed must be a shape [2] integer tensor, got {value.dtype.name}"
                        f"{tuple(value.shape)}")
    return value


def stateless_categorical(logits: Any, num_samples: int, seed: Any,
                          dtype: Any = dtypes.int64, name: str | None = None) -> Tensor:
    """`num_samples` class indices per row of ``[batch, classes]`` `logits`, drawn with
    probabilities ``softmax(logits)``, as a function of `seed`.

    >>> sf.random.stateless_categorical([[0.0, -1e9]], 3, seed=[1, 2])
    sf.Tensor([[0, 0, 0]], shape=(1, 3), dtype=int64)
    """
    return _Stateless(_seed(seed, "stateless_categorical"), "stateless_categorical"
                      ).categorical(logits, num_samples, dtype)


def stateless_truncated_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0,
                               dtype: Any = dtypes.float32, name: str | None = None,
                               alg: Any = None) -> Tensor:
    """Normal values within two standard deviations of `mean` (others drawn again), as a
    function of `seed`: each is the first of a row of normal candidates that is in range,
    so a traced draw needs no loop.

    >>> bool(sf.reduce_all(sf.abs(sf.random.stateless_truncated_normal([100], [1, 2])) <= 2))
    True
    """
    op = "stateless_truncated_normal"
    _philox(alg, op)
    dims = _shape(shape, op)
    candidates = _Stateless(_seed(seed, op), op).normal((*dims, _CANDIDATES), dtype=dtype)
    inside = ew.less_equal(ew.abs(candidates), 2.0)
    first = argmax(ew.cast(inside, dtypes.int32), axis=-1)
    chosen = one_hot(first, _CANDIDATES, dtype=candidates.dtype)
    picked = reduce_sum(ew.multiply(candidates, chosen), axis=-1)
    picked = ew.minimum(ew.maximum(picked, -2.0), 2.0)  # the all-miss case, never seen
    return ew.add(ew.multiply(picked, convert_to_tensor(stddev, picked.dtype)),
                  convert_to_tensor(mean, picked.dtype))


def stateless_split(seed: Any, num: int = 2, alg: Any = None) -> Tensor:
    """`num` new seeds [num, 2] made from `seed`, of its dtype: independent streams for
    the stateless ops.

    >>> sf.random.experimental.stateless_split([1, 2], num=3).shape
    (3, 2)
    """
    _philox(alg, "stateless_split")
    value = _seed(seed, "stateless_split")
    return _Stateless(value, "stateless_split").uniform_full_int((int(num), 2), value.dtype)


def stateless_fold_in(seed: Any, data: Any, alg: Any = None) -> Tensor:
    """A new seed made from `seed` and the integer `data`, as TensorFlow makes it:
    ``[a draw from seed, data]`` in `data`'s dtype (int32 or int64).

    >>> sf.random.experimental.stateless_fold_in([1, 2], 3)[1]
    sf.Tensor(3, shape=(), dtype=int32)
    """
    _philox(alg, "stateless_fold_in")
    value = convert_to_tensor(data)
    if value.dtype not in (dtypes.int32, dtypes.int64) or value.ndim:
        raise _fail("stateless_fold_in", f"data must be an int32 or int64 scalar, got "
                                         f"{value.dtype.name}{tuple(value.shape)}", TypeError)
    drawn = _Stateless(_seed(seed, "stateless_fold_in"), "stateless_fold_in"
                       ).uniform_full_int((), value.dtype)
    return stack([drawn, value])


def fold_in(seed: Any, data: Any, alg: Any = None) -> Tensor:
    """`sf.random.experimental.stateless_fold_in` (TensorFlow's ``tf.random.fold_in``).

    >>> sf.random.fold_in([1, 2], 7).shape
    (2,)
    """
    return stateless_fold_in(seed, data, alg)


def create_rng_state(seed: int, alg: Any) -> np.ndarray:
    """The Philox state TensorFlow makes for an int `seed` (counter the seed, key 0, or all
    ones for a negative seed), in `sf.random.Generator`'s layout: uint32 words
    [key0, key1, counter_lo, counter_hi], for ``Generator.from_state``.

    >>> sf.random.create_rng_state(5, "philox")
    array([0, 0, 5, 0], dtype=uint32)
    """
    _philox(alg, "create_rng_state")
    return _seed_state(seed, "create_rng_state")
