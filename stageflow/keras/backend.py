"""`sf.keras.backend`: Keras' session state, which here is the layer name counters
(`stageflow.models.naming`), and its global settings (`stageflow.models.backend_config`):
the default float dtype, the fuzz factor and the image data format."""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.models.backend_config import (
    epsilon,
    floatx,
    image_data_format,
    set_epsilon,
    set_floatx,
    set_image_data_format,
)
from stageflow.models.naming import clear_session

__all__ = ["clear_session", "epsilon", "floatx", "image_data_format", "set_epsilon",
           "set_floatx", "set_image_data_format"]
__dir__ = _public_dir(globals())
