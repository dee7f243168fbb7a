"""The devices of this process: what eager ops and graph functions are placed on.

Both execution modes use one abstraction (the paper, section 4.4): a `Device`
(`cpu_devices`) holds the memory of the tensors placed on it and runs work, an eager op's
kernel or a whole graph function. The devices are found the first time anything asks for
them (`list_devices`, `sf.device`, a copy):

- ``/device:CPU:0``, the host. Its tensors are plain NumPy arrays and its work runs on the
  calling thread, so the eager fast path never stops for placement.
- ``/device:CPU:1`` ... when `sf.config.set_logical_device_count("CPU", n)` split the CPU
  (as TensorFlow's logical devices, so that placement, copies and concurrency are testable
  on any machine): each holds its own copies of the tensors placed on it, counts their
  bytes, and runs its work in order on a worker thread of its own.
- ``/device:GPU:0`` ...: the CUDA GPUs the driver reports (with ``cuda-python``), then the
  emulated GPUs `sf.config.set_emulated_gpu_count(n)` asks for (`gpu`, `gpu_drivers`).
  Without any, `gpu_unavailable_reason` says why, and so does every error naming a GPU.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from stageflow.core import devices, lazy
from stageflow.runtime.cpu_devices import Device, LogicalCPU

if TYPE_CHECKING:  # GPU devices compile their kernels: loaded when the table is built
    from stageflow.runtime import gpu, gpu_drivers
else:
    gpu = lazy.module("stageflow.runtime.gpu")
    gpu_drivers = lazy.module("stageflow.runtime.gpu_drivers")

_lock = threading.Lock()
_table: dict[str, Device] | None = None
_no_gpu_reason = ""


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def _devices() -> dict[str, Device]:
    global _table, _no_gpu_reason
    if _table is None:
        with _lock:
            if _table is None:
                count = devices.logical_device_count("CPU")
                memory = _host_memory()
                table: dict[str, Device] = {devices.HOST: Device(devices.HOST, memory, count)}
                for index in range(1, count):
                    name = f"/device:CPU:{index}"
                    table[name] = LogicalCPU(name, memory, count)
                drivers, _no_gpu_reason = gpu_drivers.cuda_gpus()
                drivers += [gpu_drivers.EmulatedDriver(memory)
                            for _ in range(devices.emulated_gpu_count())]
                for index, driver in enumerate(drivers):
                    name = f"/device:GPU:{index}"
                    table[name] = gpu.GPUDevice(name, driver)
                devices.mark_started(list(table))
                _table = table
    return _table


def gpu_unavailable_reason() -> str:
    """Why this process has no GPU device, in words for an error message."""
    _devices()
    return _no_gpu_reason or "no GPU was found"


def register(device: Device) -> None:
    """Add a device of another process (`sf.distribute.connect` adds its workers')."""
    table = _devices()
    with _lock:
        table[device.name] = device


def unregister(names: list[str]) -> None:
    """Remove devices of other processes (a shut down or replaced cluster's)."""
    table = _devices()
    with _lock:
        for name in names:
            table.pop(name, None)


def get(name: str) -> Device:
    """The device of a canonical name, or ValueError naming it and listing the real ones."""
    device = _devices().get(name)
    if device is None:
        raise ValueError(_missing(name))
    return device


def _missing(name: str) -> str:
    known = ", ".join(_devices())
    parsed = devices.parse(name)
    if parsed.job is not None:
        why = "no worker of that job and task is connected (sf.distribute.connect)"
    elif parsed.type == "GPU":
        gpus = sum(1 for d in _devices().values() if d.kind == "GPU")
        why = (f"there is no GPU: {gpu_unavailable_reason()}" if not gpus else
               f"there are {gpus} GPU(s)")
    else:
        why = (f"the CPU is split into {devices.logical_device_count('CPU')} device(s) "
               '(sf.config.set_logical_device_count("CPU", n) before first use makes more)')
    return f"no device {name}: {why}; the devices are {known}"


def resolve(name: str) -> str:
    """`name` (canonical) if such a device exists, else ValueError (see `get`)."""
    return get(name).name


def list_devices() -> list[str]:
    """Names of the available devices, as `sf.list_devices()` reports them.

    >>> "/device:CPU:0" in sf.list_devices()
    True
    """
    return list(_devices())


def all_devices() -> list[Device]:
    return list(_devices().values())


devices.set_resolver(resolve)
devices.set_lister(list_devices)
devices.set_variable_hook(lambda variable: get(variable._device).adopt(variable))
