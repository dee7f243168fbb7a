"""The host's devices: the CPU, and logical CPU devices splitting it.

A `Device` holds the memory of the tensors placed on it and runs work, an eager op's kernel
or a whole graph function, through `Device.run`; `Device.wrap` makes a tensor of a value
computed there and `Device.mirror` gives a tensor's value there, copied once.
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np

from stageflow.core import devices, profiling
from stageflow.core.primitive import Primitive
from stageflow.frontend.tensor import Tensor, placed

T = TypeVar("T")


class Device:
    """A device of this process: the memory of its tensors and the order its work runs in.
    A device of another process (`remote`) runs graph functions itself (`call_function`)."""

    remote = False

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
        start = time.perf_counter()
        copy = np.array(value)
        devices.COUNTERS.copied(copy.nbytes)
        if profiling.state.session is not None:
            profiling.complete(f"copy to {self.name}", "copy", start, None, copied(copy))
        return self.hold(copy) if self.name != devices.HOST else copy

    def mirror(self, tensor: Any) -> Any:
        """The value of `tensor` on this device: its own if it lives here, else its copy
        here, made on first use and kept on the tensor (tensors never change). A tensor
        in a GPU's memory reaches the host as the copy its ``_value`` fetches."""
        if tensor.device == self.name:
            return self.own(tensor)
        mirrors = getattr(tensor, "_mirrors", None)
        if mirrors is None:
            mirrors = tensor._mirrors = {}
        value = mirrors.get(self.name)
        if value is None:
            if self.name == devices.HOST and hasattr(tensor, "_buffer"):
                value = tensor._value
            else:  # (a copy is the runtime's, made on the calling thread)
                value = self.copy_in(tensor._value)
            mirrors[self.name] = value
        return value

    def own(self, tensor: Any) -> Any:
        """The value of a tensor that lives on this device."""
        return tensor._value

    def read_variable(self, variable: Any) -> Tensor:
        """A tensor of the variable's value on this device (eager reads)."""
        return self.wrap(variable._value)

    def assign_variable(self, variable: Any, tensor: Any) -> None:
        """Store `tensor` as the variable's value (eager writes)."""
        variable._store(self.variable_value(tensor))

    def adopt(self, variable: Any) -> None:
        """A variable was created on this device (kept in this process's memory)."""

    def variable_value(self, tensor: Any) -> Any:
        """What a variable of this device stores when `tensor` is assigned to it."""
        return self.mirror(tensor)

    def wrap(self, value: Any) -> Tensor:
        """A tensor of `value`, computed on this device."""
        return placed(self.hold(value), self.name)

    def execute(self, primitive: Primitive, values: list[Any], params: dict[str, Any]) -> Any:
        """Run an op's kernel on its inputs' values on this device (results unwrapped);
        while the profiler records, a span on the thread that runs it."""
        if profiling.state.session is None:
            return self.run(lambda: primitive.kernel(*values, **params))

        def recorded() -> Any:
            with profiling.span(primitive.name, "kernel", {"device": self.name}):
                return primitive.kernel(*values, **params)
        return self.run(recorded)

    def describe(self) -> str:
        """One line for ``stageflow devices``: kind and memory."""
        gib = self.memory_bytes / 2**30
        shared = f", shared by {self.shared_by} logical devices" if self.shared_by > 1 else ""
        return f"{self.name}  {self.kind}  host memory {gib:.1f} GiB{shared}"

    def __repr__(self) -> str:
        return f"<Device {self.name}>"


def copied(array: np.ndarray) -> dict[str, Any]:
    """What a profiler span of a copy says: the bytes, shape and dtype copied."""
    return {"bytes": array.nbytes, "shape": list(array.shape), "dtype": array.dtype.name}


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
