"""`sf.config`'s device listings in TensorFlow's form: `PhysicalDevice` and `LogicalDevice`
records, `list_physical_devices`, `list_logical_devices`, `get_visible_devices`, and the
memory-growth setting TensorFlow programs make before their first op.

The logical devices are the devices ops and functions are placed on (`sf.list_devices`,
this process's only): ``/device:CPU:0`` ... as `set_logical_device_count` split the CPU,
then ``/device:GPU:0`` ..., the CUDA GPUs and then the emulated ones. The physical devices
are what they are made of: one CPU (``/physical_device:CPU:0``, whatever the split), and
each GPU, an emulated GPU counting as one (it is a device of its own to place work on, and
TensorFlow's logical devices are each backed by a physical one). Listing the logical
devices, or the GPUs, finds the devices, as their first use does, so the counts cannot
change afterwards; listing the physical CPU does not, so that a program can list it and
then split it (`set_logical_device_configuration`), as TensorFlow programs do.
"""

from __future__ import annotations

from typing import NamedTuple

from stageflow.core import devices

__all__ = ["LogicalDevice", "LogicalDeviceConfiguration", "PhysicalDevice",
           "get_logical_device_configuration", "get_memory_growth", "get_visible_devices",
           "list_logical_devices", "list_physical_devices", "set_logical_device_configuration",
           "set_memory_growth"]


class PhysicalDevice(NamedTuple):
    """A device of the machine, as TensorFlow names it.

    >>> sf.config.PhysicalDevice("/physical_device:CPU:0", "CPU")
    PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')
    """

    name: str
    device_type: str


class LogicalDevice(NamedTuple):
    """A device ops are placed on (``sf.device(d.name)``), as TensorFlow names it.

    >>> sf.config.list_logical_devices("CPU")[0]
    LogicalDevice(name='/device:CPU:0', device_type='CPU')
    """

    name: str
    device_type: str


def _local() -> list[devices.DeviceName]:
    """The parsed names of this process's devices, in order."""
    return [parsed for parsed in map(devices.parse, devices.listed()) if parsed.job is None]


def _kind(device_type: str | None) -> str | None:
    return None if device_type is None else str(device_type).upper()


def list_logical_devices(device_type: str | None = None) -> list[LogicalDevice]:
    """This process's devices of `device_type` (``"CPU"``, ``"GPU"``; all by default), the
    names `sf.device` takes (TensorFlow's ``tf.config.list_logical_devices``).

    >>> [d.name for d in sf.config.list_logical_devices("CPU")][:2]
    ['/device:CPU:0', '/device:CPU:1']
    """
    kind = _kind(device_type)
    return [LogicalDevice(str(parsed), parsed.type) for parsed in _local()
            if kind is None or parsed.type == kind]


def list_physical_devices(device_type: str | None = None) -> list[PhysicalDevice]:
    """The machine's devices of `device_type` (all by default): one CPU, then each GPU,
    real or emulated (TensorFlow's ``tf.config.list_physical_devices``).

    >>> sf.config.list_physical_devices("CPU")
    [PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')]
    """
    kind = _kind(device_type)
    found = [PhysicalDevice("/physical_device:CPU:0", "CPU")]
    if kind != "CPU":  # finding the GPUs starts the devices; the CPU is always there
        found += [PhysicalDevice(f"/physical_device:GPU:{parsed.index}", "GPU")
                  for parsed in _local() if parsed.type == "GPU"]
    return [d for d in found if kind is None or d.device_type == kind]


class LogicalDeviceConfiguration(NamedTuple):
    """One logical device to make of a physical one (TensorFlow's record); its limits are
    accepted and unused: the logical CPUs share the host's memory.

    >>> sf.config.LogicalDeviceConfiguration(memory_limit=1024).memory_limit
    1024
    """

    memory_limit: int | None = None
    experimental_priority: int | None = None
    experimental_device_ordinal: int | None = None


def set_logical_device_configuration(device: PhysicalDevice,
                                     logical_devices: list[LogicalDeviceConfiguration]
                                     ) -> None:
    """Split the physical CPU into one logical CPU per entry of `logical_devices`, before
    the devices are first used (`set_logical_device_count`; TensorFlow's function, also
    ``sf.config.experimental.set_virtual_device_configuration``). A GPU is one logical
    device here: splitting one is refused.

    >>> cpu = sf.config.list_physical_devices("CPU")[0]
    >>> sf.config.set_logical_device_configuration(
    ...     cpu, [sf.config.LogicalDeviceConfiguration()] * 4)   # the suite's split: 4
    """
    name = _physical(device, "set_logical_device_configuration")
    if not name.startswith("/physical_device:CPU"):
        raise ValueError(f"sf.config.set_logical_device_configuration: only the CPU is split "
                         f"into logical devices here, not {name}")
    devices.set_logical_device_count("CPU", len(logical_devices))


def get_logical_device_configuration(device: PhysicalDevice
                                     ) -> list[LogicalDeviceConfiguration]:
    """One `LogicalDeviceConfiguration` per logical device `device` is split into.

    >>> len(sf.config.get_logical_device_configuration(
    ...     sf.config.list_physical_devices("CPU")[0])) >= 1
    True
    """
    name = _physical(device, "get_logical_device_configuration")
    kind = "CPU" if name.startswith("/physical_device:CPU") else "GPU"
    count = devices.logical_device_count(kind) if kind == "CPU" else 1
    return [LogicalDeviceConfiguration()] * count


def get_visible_devices(device_type: str | None = None) -> list[PhysicalDevice]:
    """The physical devices the runtime uses: every one (stageflow hides none).

    >>> sf.config.get_visible_devices("CPU") == sf.config.list_physical_devices("CPU")
    True
    """
    return list_physical_devices(device_type)


_memory_growth: dict[str, bool] = {}


def _physical(device: PhysicalDevice, api: str) -> str:
    name = getattr(device, "name", device)
    if name == "/physical_device:CPU:0":  # known without finding the devices
        return name
    names = [d.name for d in list_physical_devices()]
    if name not in names:
        raise ValueError(f"sf.config.experimental.{api}: unrecognized device {device!r}; "
                         f"the physical devices are {', '.join(names)} "
                         f"(sf.config.list_physical_devices())")
    return name


def set_memory_growth(device: PhysicalDevice, enable: bool) -> None:
    """Accepted, and changes nothing: stageflow allocates a device's memory as its tensors
    need it (host memory for CPUs and emulated GPUs, a caching allocator over
    ``cuMemAlloc`` for CUDA GPUs), never all of it at start, which is what TensorFlow's
    memory growth asks for. Taken for every physical device, the CPU's too (TensorFlow
    refuses CPUs). ValueError for a device that is not one of `list_physical_devices`.

    >>> cpu = sf.config.list_physical_devices("CPU")[0]
    >>> sf.config.experimental.set_memory_growth(cpu, True)
    >>> sf.config.experimental.get_memory_growth(cpu)
    True
    >>> sf.config.experimental.set_memory_growth(cpu, False)
    """
    _memory_growth[_physical(device, "set_memory_growth")] = bool(enable)


def get_memory_growth(device: PhysicalDevice) -> bool:
    """What `set_memory_growth` last set for `device` (False before).

    >>> cpu = sf.config.list_physical_devices("CPU")[0]
    >>> sf.config.experimental.set_memory_growth(cpu, False)
    >>> sf.config.experimental.get_memory_growth(cpu)
    False
    """
    return _memory_growth.get(_physical(device, "get_memory_growth"), False)
