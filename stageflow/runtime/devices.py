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
import resource
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


def _thread_stack_bytes() -> int:
    """The address space one more thread reserves for its stack (glibc sizes it from the
    stack limit, or 8 MiB without one)."""
    chosen = threading.stack_size()
    if chosen:
        return chosen
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    return soft if soft != resource.RLIM_INFINITY else 8 << 20


def _address_space_in_use() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _check_room_for_threads(count: int) -> None:
    """Refuse, before starting any, more worker threads than the address-space limit holds.

    A thread that finds no memory once it runs fails inside CPython's start-up of it, and
    `Thread.start` then waits for it forever: the one failure that must not happen by trial.
    """
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit == resource.RLIM_INFINITY or count == 0:
        return
    needed = count * _thread_stack_bytes()
    room = limit - _address_space_in_use()
    if needed > room // 2:
        raise RuntimeError(
            f"{count + 1} logical CPUs need {count} worker threads with "
            f"{needed >> 20} MiB of stacks, more than half the {room >> 20} MiB left under "
            "the address-space limit (ulimit -v); ask sf.config.set_logical_device_count "
            "for fewer")


def _devices() -> dict[str, Device]:
    global _table, _no_gpu_reason
    if _table is None:
        with _lock:
            if _table is None:
                count = devices.logical_device_count("CPU")
                memory = _host_memory()
                _check_room_for_threads(count - 1)
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
