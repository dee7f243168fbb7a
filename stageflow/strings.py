"""`sf.strings`: TensorFlow's `tf.strings` names, on string tensors (`sf.string`), eagerly.

Exactly the public names; they are defined and documented in
`stageflow.frontend.ops.strings`.
"""

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
           "split", "strip", "substr", "to_number", "unicode_decode", "unicode_split", "upper"]
