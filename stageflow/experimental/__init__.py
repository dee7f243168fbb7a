"""`sf.experimental`: TensorFlow's `tf.experimental` names stageflow has (`dlpack`, the
shapes of ragged tensors)."""

from stageflow.experimental import dlpack
from stageflow.frontend.ragged_shape import DynamicRaggedShape, RowPartition

__all__ = ["DynamicRaggedShape", "RowPartition", "dlpack"]
