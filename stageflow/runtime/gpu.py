"""GPU devices: tensors in the GPU's memory, elementwise ops as PTX kernels, the rest on the
host.

A `GPUDevice` runs on a `Driver` (`gpu_drivers`: CUDA, or the emulation that tests it on
any machine). Its tensors are `DeviceArray`s in the driver's memory, counted by the device
and returned to the driver's allocator when collected. Eagerly, an elementwise op (one the
kernels' table lowers) compiles one kernel per op signature (its dtypes, ranks and
params; cached) and launches it; any other op, and an op whose kernel cannot be built,
runs its NumPy kernel on the host with its inputs fetched and its results put back, each
transfer counted as a copy (TensorFlow's soft placement, visible in the statistics). A
graph function placed on a GPU is optimised by the PTX pipeline and runs as one sequence
of steps: each fused kernel a launch on device memory, each other op on the host
(`Executable.build_gpu`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.codegen.kernels.analysis import Kernel, analyse
from stageflow.codegen.kernels.wrapper import spec_value
from stageflow.core import devices
from stageflow.core.op_facts import LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.frontend.tensor import DeviceTensor, Tensor, allocate
from stageflow.ir.builder import build_function, build_op
from stageflow.runtime.cpu_devices import Device
from stageflow.runtime.gpu_drivers import Driver

BLOCK = 256  # threads per block
MAX_BLOCKS = 65535


class DeviceArray:
    """An array in a GPU's memory: the driver's handle, shape and dtype."""

    __slots__ = ("__weakref__", "device", "dtype", "handle", "nbytes", "shape")

    def __init__(self, device: GPUDevice, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.device = device
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.handle = device.driver.allocate(self.nbytes)
        devices.COUNTERS.allocated(device.name, self.nbytes)
        weakref.finalize(self, device.release, self.handle, self.nbytes)

    def fetch(self) -> np.ndarray:
        """A host copy (counted)."""
        return self.device.download(self)

    def __repr__(self) -> str:
        return f"<DeviceArray {self.dtype.name}{list(self.shape)} on {self.device.name}>"


class GPUDevice(Device):
    """A GPU: its memory, its kernels by op signature, its graph functions' launch plans.
    Work runs on the calling thread, one call at a time per device (in order)."""

    def __init__(self, name: str, driver: Driver) -> None:
        super().__init__(name, driver.memory_bytes, 1)
        self.driver = driver
        self._order = threading.RLock()
        self._kernels: dict[tuple, Any] = {}

    def run(self, work: Callable[[], Any]) -> Any:
        with self._order:
            return work()

    # -- memory ---------------------------------------------------------------------------

    def release(self, handle: Any, nbytes: int) -> None:
        self.driver.free(handle, nbytes)
        devices.COUNTERS.freed(self.name, nbytes)

    def copy_in(self, value: Any) -> DeviceArray:
        """`value` (a host array) copied into this GPU's memory; counted."""
        array = np.asarray(value, order="C")  # (np.ascontiguousarray makes 0-d arrays 1-d)
        result = DeviceArray(self, array.shape, array.dtype)
        self.driver.upload(result.handle, array)
        devices.COUNTERS.copied(array.nbytes)
        return result

    def download(self, array: DeviceArray) -> np.ndarray:
        out = np.empty(array.shape, array.dtype)
        self.driver.download(array.handle, out)
        devices.COUNTERS.copied(out.nbytes)
        return out

    def duplicate(self, array: DeviceArray) -> DeviceArray:
        """A copy of `array` in this GPU's memory (device to device: what bandwidth is
        measured against)."""
        result = DeviceArray(self, array.shape, array.dtype)
        with self._order:
            self.driver.copy(result.handle, array.handle, array.nbytes)
        return result

    def on_device(self, value: Any) -> DeviceArray:
        """`value` in this GPU's memory: itself, or a copy of a host array."""
        if isinstance(value, DeviceArray) and value.device is self:
            return value
        if isinstance(value, DeviceArray):
            value = value.fetch()
        return self.copy_in(value)

    def variable_value(self, tensor: Any) -> Any:
        """A GPU's variables keep their value in host memory (reads put it on the GPU)."""
        return tensor._value

    def own(self, tensor: Any) -> DeviceArray:
        return tensor._buffer

    def wrap(self, value: Any) -> Tensor:
        tensor = allocate(DeviceTensor)
        tensor._buffer = self.on_device(value)
        tensor._device = self.name
        return tensor

    def describe(self) -> str:
        return f"{self.name}  {self.driver.kind}  memory {self.memory_bytes / 2**30:.1f} GiB"

    # -- eager ops --------------------------------------------------------------------------

    def execute(self, primitive: Primitive, values: list[Any], params: dict[str, Any]) -> Any:
        """An op on tensors of this GPU: its kernel launched, else run on the host."""
        kernel = self._op_kernel(primitive, values, params)
        if kernel is None:
            return host_step(primitive.kernel)(*values, **params)
        return kernel(*values)[0]

    def _op_kernel(self, primitive: Primitive, values: list[Any],
                   params: dict[str, Any]) -> KernelStep | None:
        """The op's kernel for this signature (built once; None: the op runs on the host)."""
        if primitive.lowered_by is not LoweredBy.ELEMENTWISE or primitive.multiple_results:
            return None
        try:
            key = (primitive.name, *[(v.dtype, len(v.shape)) for v in values],
                   *sorted(params.items()))
            hash(key)
        except TypeError:
            return None
        if key not in self._kernels:
            self._kernels[key] = self._build(primitive, values, params)
        return self._kernels[key]

    def _build(self, primitive: Primitive, values: list[Any],
               params: dict[str, Any]) -> KernelStep | None:
        types = [ShapedType((None,) * len(v.shape), np.dtype(v.dtype)) for v in values]
        result = primitive.abstract_eval(*types, **params)

        def body(args: Any) -> tuple[list, list]:
            op = build_op(primitive, args, params, result)
            return [op], list(op.results)

        try:
            return self.kernel_step(analyse(build_function(f"{primitive.name}_op", types,
                                                           body)))
        except NotImplementedError:  # e.g. float16 on a host without F16C, emulated
            return None

    def kernel_step(self, kernel: Kernel) -> KernelStep:
        """A fused kernel of this GPU, callable on device or host arrays (see `KernelStep`)."""
        return KernelStep(self, kernel, self.driver.load(kernel))


class KernelStep:
    """A kernel loaded on a GPU, called like a compiled CPU kernel: ``step(*inputs)`` puts
    host inputs on the device, allocates the outputs there, launches over enough blocks of
    `BLOCK` threads for the largest output (the kernel's grid-stride loop takes any more),
    and returns the outputs as `DeviceArray`s."""

    def __init__(self, device: GPUDevice, kernel: Kernel, function: Any) -> None:
        self.device = device
        self.kernel = kernel
        self.function = function

    def __call__(self, *inputs: Any) -> tuple[DeviceArray, ...]:
        device = self.device
        arrays = [device.on_device(v) for v in inputs]
        shapes = [a.shape for a in arrays]
        outputs = [DeviceArray(device, tuple(spec_value(d, shapes) for d in spec), arg.dtype)
                   for arg, spec in zip(self.kernel.outputs, self.kernel.output_shapes,
                                        strict=True)]
        total = max((int(np.prod(out.shape)) for out in outputs), default=0)
        if total:
            everything = arrays + outputs
            dims = [d for array in everything for d in array.shape]
            grid = min(MAX_BLOCKS, -(-total // BLOCK))
            with device._order:
                device.driver.launch(self.function, self.kernel,
                                     [a.handle for a in everything], dims, grid, BLOCK)
        return tuple(outputs)


def host_step(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """`kernel` run on the host: device arrays among its arguments fetched first."""

    def run(*values: Any, **params: Any) -> Any:
        host = [v.fetch() if isinstance(v, DeviceArray) else v for v in values]
        return kernel(*host, **params)

    return run
