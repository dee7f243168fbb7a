"""`sf.ragged`: TensorFlow's `tf.ragged` names, for `sf.RaggedTensor` (rows of different
lengths).

Exactly the public names; they are defined and documented in
`stageflow.frontend.ragged_ops`. The reductions and `sf.concat` take ragged tensors too.
"""

from stageflow.frontend.ragged_ops import constant, map_flat_values, range

__all__ = ["constant", "map_flat_values", "range"]
