"""`sf.strings`: TensorFlow's `tf.strings` names, on string tensors (`sf.string`), eagerly.

Exactly the public names; they are defined and documented in
`stageflow.frontend.ops.strings`, `string_hashing` (the hash buckets), `string_joins`
(joins along dims and segments, regex rewrites) and `string_unicode` (in
`stageflow.frontend.ops`).
"""

from stageflow.frontend.ops.string_hashing import to_hash_bucket_fast, to_hash_bucket_strong
from stageflow.frontend.ops.string_joins import reduce_join, regex_replace, unsorted_segment_join
from stageflow.frontend.ops.string_unicode import unicode_encode
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

__all__ = ["as_string", "bytes_split", "format", "join", "length", "lower", "reduce_join",
           "regex_full_match", "regex_replace", "split", "strip", "substr",
           "to_hash_bucket_fast", "to_hash_bucket_strong", "to_number", "unicode_decode",
           "unicode_encode", "unicode_split", "unsorted_segment_join", "upper"]
