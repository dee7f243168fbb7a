"""`sf.io`: TensorFlow's `tf.io` names for bytes and files: reading bytes as tensors
(`decode_raw`), whole files (`read_file`, `write_file`, `matching_files`), web-safe base64
(`encode_base64`, `decode_base64`) and `gfile`, on host-only string tensors, eagerly.

Exactly the public names; they are defined and documented in
`stageflow.frontend.ops.raw_bytes`, `stageflow.frontend.ops.files` and
`stageflow.frontend.ops.file_system`.
"""

from stageflow.frontend.ops import gfile
from stageflow.frontend.ops.files import (
    decode_base64,
    encode_base64,
    matching_files,
    read_file,
    write_file,
)
from stageflow.frontend.ops.raw_bytes import decode_raw

__all__ = ["decode_base64", "decode_raw", "encode_base64", "gfile", "matching_files",
           "read_file", "write_file"]
