"""`sf.experimental`: TensorFlow's `tf.experimental` names stageflow has (`dlpack`)."""

from stageflow.experimental import dlpack

__all__ = ["dlpack"]
