"""`sf.config.experimental`: the names TensorFlow keeps under ``tf.config.experimental``
(memory growth, and the older spellings of the device listings); defined and documented
in `stageflow.core.device_listing`."""

from stageflow.core.device_listing import (
    get_memory_growth,
    list_logical_devices,
    list_physical_devices,
    set_memory_growth,
)
from stageflow.core.exports import public_dir as _public_dir

__all__ = ["get_memory_growth", "list_logical_devices",
           "list_physical_devices", "set_memory_growth"]
__dir__ = _public_dir(globals())
