"""`sf.io`: TensorFlow's `tf.io` names for reading bytes as tensors (`decode_raw`), on
host-only string tensors, eagerly.

Exactly the public names; they are defined and documented in
`stageflow.frontend.ops.raw_bytes`.
"""

from stageflow.frontend.ops.raw_bytes import decode_raw

__all__ = ["decode_raw"]
