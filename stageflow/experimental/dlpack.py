"""`sf.experimental.dlpack`: TensorFlow's `tf.experimental.dlpack` names.

Exactly the public names; they are defined and documented in `stageflow.frontend.dlpack`.
"""

from stageflow.frontend.dlpack import from_dlpack, to_dlpack

__all__ = ["from_dlpack", "to_dlpack"]
