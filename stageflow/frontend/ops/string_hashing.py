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

__all__ = ["to_hash_bucket_fast"]


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
