"""`sf.strings.to_hash_bucket_fast`: strings to buckets by a stable fingerprint, as
TensorFlow hashes its string features (vocabulary-free embeddings, feature crosses).

The buckets are FarmHash ``Fingerprint64`` of each string's bytes modulo the number of
buckets (`stageflow.frontend.ops.fingerprint`), so a model trained with TensorFlow's buckets
finds the same ones here. String tensors are host-only: these run eagerly.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.fingerprint import fingerprint64
from stageflow.frontend.ops.strings import _each, _host, _per_value
from stageflow.frontend.tensor import Tensor, wrap

__all__ = ["to_hash_bucket_fast", "to_hash_bucket_strong"]


@_per_value
def to_hash_bucket_fast(input: Any, num_buckets: int) -> Tensor:  # noqa: A002 - TF's name
    """Each string's bucket in ``[0, num_buckets)``: its FarmHash ``Fingerprint64`` modulo
    `num_buckets`, the numbers TensorFlow's ``tf.strings.to_hash_bucket_fast`` gives. An
    `sf.RaggedTensor` of strings keeps its rows.

    input: string tensor (or ragged tensor of strings); num_buckets: int >= 1; returns int64
    of input's shape.

    >>> sf.strings.to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3)
    sf.Tensor([0, 2, 2], shape=(3,), dtype=int64)
    """
    buckets = operator.index(num_buckets)
    if buckets < 1:
        raise InvalidArgumentError(f"sf.strings.to_hash_bucket_fast: num_buckets must be at "
                                   f"least 1, got {buckets}{describe_location()}")
    array = _host("to_hash_bucket_fast", input)
    return wrap(_each(array, lambda item: fingerprint64(item) % buckets, np.int64))


_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def siphash24(k0: int, k1: int, data: bytes) -> int:
    """SipHash-2-4 of `data` under the key words (`k0`, `k1`), as a 64-bit int."""
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573

    def rounds(count: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(count):
            v0 = (v0 + v1) & _MASK
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _MASK
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _MASK
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _MASK
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    whole = len(data) - len(data) % 8
    for start in range(0, whole, 8):
        word = int.from_bytes(data[start:start + 8], "little")
        v3 ^= word
        rounds(2)
        v0 ^= word
    last = ((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


@_per_value
def to_hash_bucket_strong(input: Any, num_buckets: int, key: Any  # noqa: A002 - TF's name
                          ) -> Tensor:
    """Each string's bucket in ``[0, num_buckets)``: its SipHash-2-4 under `key` (two
    int64s, the 128-bit key as two 64-bit words, two's complement) modulo `num_buckets`, the
    numbers TensorFlow's ``tf.strings.to_hash_bucket_strong`` gives.

    >>> sf.strings.to_hash_bucket_strong(["Hello", "TF"], 3, [1, 2])
    sf.Tensor([2, 0], shape=(2,), dtype=int64)
    """
    buckets = operator.index(num_buckets)
    if buckets < 1:
        raise InvalidArgumentError(f"sf.strings.to_hash_bucket_strong: num_buckets must be "
                                   f"at least 1, got {buckets}{describe_location()}")
    words = [operator.index(k) for k in key]
    if len(words) != 2 or any(not -(1 << 63) <= k < 1 << 63 for k in words):
        raise InvalidArgumentError(f"sf.strings.to_hash_bucket_strong: key must be two "
                                   f"int64s, got {key!r}{describe_location()}")
    words = [k & _MASK for k in words]
    array = _host("to_hash_bucket_strong", input)
    return wrap(_each(array, lambda item: siphash24(words[0], words[1], item) % buckets,
                      np.int64))
