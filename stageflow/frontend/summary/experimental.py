"""`sf.summary.experimental`: the default step of summaries, as TensorFlow places it."""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.summary.writers import get_step, set_step

__all__ = ["get_step", "set_step"]
__dir__ = _public_dir(globals())
