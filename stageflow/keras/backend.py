"""`sf.keras.backend`: Keras' session state, which here is the layer name counters
(`stageflow.models.naming`)."""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.models.naming import clear_session

__all__ = ["clear_session"]
__dir__ = _public_dir(globals())
