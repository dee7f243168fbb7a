"""`sf.strings`: TensorFlow's `tf.strings` names, on string tensors (`sf.string`), eagerly.

Exactly the public names; they are defined and documented in
`stageflow.frontend.ops.strings` (`to_hash_bucket_fast` in
`stageflow.frontend.ops.string_hashing`).
"""

from stageflow.frontend.ops.string_hashing import to_hash_bucket_fast
from stageflow.frontend.ops.strings import (
    as_string,
    bytes_split,
    format,
    join,
    length,
    lower,
    regex_full_match,
    split,
    strip,
    substr,
    to_number,
    unicode_decode,
    unicode_split,
    upper,
)

__all__ = ["as_string", "bytes_split", "format", "join", "length", "lower", "regex_full_match",
           "split", "strip", "substr", "to_hash_bucket_fast", "to_number", "unicode_decode",
           "unicode_split", "upper"]
