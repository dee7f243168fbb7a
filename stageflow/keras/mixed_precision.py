"""`sf.keras.mixed_precision`: Keras' precision policies.

``set_global_policy("mixed_bfloat16")`` makes the layers created from then on compute in
bfloat16 while their variables stay float32: each layer casts its floating inputs to
bfloat16 and reads its variables as bfloat16 casts inside its call (their gradients come
back float32, so optimizers update float32 values), losses and metrics compute in
float32, and batch and layer normalisation compute their statistics in float32. Give the
last layer ``dtype="float32"`` (``Activation("softmax", dtype="float32")``) for float32
outputs, as Keras' guide advises. The policy objects and the global state are
`stageflow.core.precision`'s (``sf.config.set_precision_policy`` is the same setter).

``mixed_float16`` also needs loss scaling, as in Keras: ``compile(optimizer=
LossScaleOptimizer(optimizer))`` (`stageflow.models.loss_scale`); bfloat16 does not.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.core.precision import Policy, global_policy, set_global_policy
from stageflow.models.loss_scale import LossScaleOptimizer

__all__ = ["LossScaleOptimizer", "Policy", "global_policy", "set_global_policy"]
__dir__ = _public_dir(globals())
