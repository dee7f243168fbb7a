"""The devices of this process: what eager ops and graph functions are placed on.

Both execution modes use one abstraction (the paper, section 4.4): a `Device` holds the
memory of the tensors placed on it and runs work, an eager op's kernel or a whole graph
function, through `Device.run`. The devices are found the first time anything asks for
them (`list_devices`, `sf.device`, a copy):

- ``/device:CPU:0``, the host. Its tensors are plain NumPy arrays and its work runs on the
  calling thread, so the eager fast path never stops for placement.
- ``/device:CPU:1`` ... when `sf.config.set_logical_device_count("CPU", n)` split the CPU
  (as TensorFlow's logical devices, so that placement, copies and concurrency are testable
  on any machine): each holds its own copies of the tensors placed on it, counts their
  bytes, and runs its work in order on a worker thread of its own.
- GPUs: none yet. `gpu_unavailable_reason` says why, and so does every error naming one.
"""

from __future__ import annotations

import os
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np

from stageflow.core import devices

T = TypeVar("T")


class Device:
    """A device of this process: the memory of its tensors and the order its work runs in."""

    def __init__(self, name: str, memory_bytes: int, shared_by: int) -> None:
        self.name = name
        self.kind = devices.parse(name).type
        self.memory_bytes = memory_bytes
        self.shared_by = shared_by
        self._held: set[int] = set()
        self._lock = threading.Lock()

    def run(self, work: Callable[[], T]) -> T:
        """Run `work` (an op's kernel, a graph function's program) on this device."""
        return work()

    def hold(self, value: Any) -> Any:
        """Count `value`'s bytes as this device's until it is freed (arrays owning their
        memory, once each; views and NumPy scalars hold none of their own)."""
        if isinstance(value, np.ndarray) and value.base is None:
            key = id(value)
            with self._lock:
                if key in self._held:
                    return value
                self._held.add(key)
            devices.COUNTERS.allocated(self.name, value.nbytes)
            weakref.finalize(value, self._release, key, value.nbytes)
        return value

    def _release(self, key: int, nbytes: int) -> None:
        with self._lock:
            self._held.discard(key)
        devices.COUNTERS.freed(self.name, nbytes)

    def copy_in(self, value: Any) -> Any:
        """A copy of `value` (from another device) in this device's memory; counted."""
        copy = np.array(value)
        devices.COUNTERS.copied(copy.nbytes)
        return self.hold(copy) if self.name != devices.HOST else copy

    def mirror(self, tensor: Any) -> Any:
        """The value of `tensor` on this device: its own if it lives here, else its copy
        here, made on first use and kept on the tensor (tensors never change)."""
        if tensor.device == self.name:
            return tensor._value
        mirrors = getattr(tensor, "_mirrors", None)
        if mirrors is None:
            mirrors = tensor._mirrors = {}
        value = mirrors.get(self.name)
        if value is None:
            value = mirrors[self.name] = self.run(lambda: self.copy_in(tensor._value))
        return value

    def describe(self) -> str:
        """One line for ``stageflow devices``: kind and memory."""
        gib = self.memory_bytes / 2**30
        shared = f", shared by {self.shared_by} logical devices" if self.shared_by > 1 else ""
        return f"{self.name}  {self.kind}  host memory {gib:.1f} GiB{shared}"

    def __repr__(self) -> str:
        return f"<Device {self.name}>"


class LogicalCPU(Device):
    """A logical CPU device: its work runs in order on a worker thread of its own (work it
    gives itself, e.g. an op inside a callback it runs, runs at once)."""

    def __init__(self, name: str, memory_bytes: int, shared_by: int) -> None:
        super().__init__(name, memory_bytes, shared_by)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=f"stageflow {name}",
                                        daemon=True)
        self._thread.start()

    def run(self, work: Callable[[], T]) -> T:
        if threading.current_thread() is self._thread:
            return work()
        future: Future = Future()
        self._queue.put((work, future))
        return future.result()

    def _serve(self) -> None:
        while True:
            work, future = self._queue.get()
            try:
                future.set_result(work())
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                future.set_exception(error)
            del work, future  # hold nothing of it while waiting for the next

    @property
    def thread(self) -> threading.Thread:
        return self._thread


_lock = threading.Lock()
_table: dict[str, Device] | None = None


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def _devices() -> dict[str, Device]:
    global _table
    if _table is None:
        with _lock:
            if _table is None:
                count = devices.logical_device_count("CPU")
                memory = _host_memory()
                table: dict[str, Device] = {devices.HOST: Device(devices.HOST, memory, count)}
                for index in range(1, count):
                    name = f"/device:CPU:{index}"
                    table[name] = LogicalCPU(name, memory, count)
                devices.mark_started(list(table))
                _table = table
    return _table


def gpu_unavailable_reason() -> str:
    """Why this process has no GPU device, in words for an error message."""
    try:
        from cuda.bindings import driver  # noqa: PLC0415 - an optional package, probed
    except ImportError:
        return ("stageflow has no CUDA runtime yet and the CUDA driver bindings "
                "(the cuda-python package) are not installed")
    error, = driver.cuInit(0)
    if error != driver.CUresult.CUDA_SUCCESS:
        return f"the CUDA driver could not be initialised ({error.name})"
    error, count = driver.cuDeviceGetCount()
    if error != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "the CUDA driver reports no GPU"
    return f"the CUDA driver reports {count} GPU(s), but stageflow has no CUDA runtime yet"


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
        why = "devices of other processes are not connected"
    elif parsed.type == "GPU":
        why = f"there is no GPU: {gpu_unavailable_reason()}"
    else:
        why = (f"the CPU is split into {devices.logical_device_count('CPU')} device(s) "
               '(sf.config.set_logical_device_count("CPU", n) before first use makes more)')
    return f"no device {name}: {why}; the devices are {known}"


def resolve(name: str) -> str:
    """`name` (canonical) if such a device exists, else ValueError (see `get`)."""
    return get(name).name


def list_devices() -> list[str]:
    """Names of the available devices, as `sf.list_devices()` reports them."""
    return list(_devices())


def all_devices() -> list[Device]:
    return list(_devices().values())


devices.set_resolver(resolve)
