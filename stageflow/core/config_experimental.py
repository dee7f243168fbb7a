"""`sf.config.experimental`: the names TensorFlow keeps under ``tf.config.experimental``
(memory growth, and the older spellings of the device listings and configurations:
``set_virtual_device_configuration``); defined and documented
in `stageflow.core.device_listing`."""

from stageflow.core.device_listing import LogicalDeviceConfiguration as VirtualDeviceConfiguration
from stageflow.core.device_listing import (
    get_logical_device_configuration as get_virtual_device_configuration,
)
from stageflow.core.device_listing import (
    get_memory_growth,
    list_logical_devices,
    list_physical_devices,
    set_memory_growth,
)
from stageflow.core.device_listing import (
    set_logical_device_configuration as set_virtual_device_configuration,
)
from stageflow.core.exports import public_dir as _public_dir

__all__ = ["VirtualDeviceConfiguration", "get_memory_growth", "get_virtual_device_configuration",
           "list_logical_devices", "list_physical_devices", "set_memory_growth",
           "set_virtual_device_configuration"]
__dir__ = _public_dir(globals())
