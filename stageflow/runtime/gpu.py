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
(`Executable.build_gpu`). Eagerly, moves (transpose, slice, broadcast, reshape) and
reductions run on the GPU too, as the gather and reduce kernels of
`stageflow.codegen.targets.indexed` following an index map computed once per signature.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.codegen.kernels.analysis import Kernel, analyse
from stageflow.codegen.kernels.wrapper import spec_value
from stageflow.codegen.targets.indexed import gather_entry, reduce_entry
from stageflow.core import devices
from stageflow.core.op_facts import LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.frontend.tensor import DeviceTensor, Tensor, allocate
from stageflow.ir.builder import build_function, build_op
from stageflow.runtime.cpu_devices import Device
from stageflow.runtime.gpu_drivers import Driver

BLOCK = 256  # threads per block
MAX_BLOCKS = 65535
MAX_MAPS = 256  # index maps kept per GPU (by op signature)
# Ops that only move elements: applied to the flat indices of their operand, their NumPy
# kernel gives the index map the gather kernel follows.
MOVES = frozenset({"broadcast_to", "reshape", "transpose", "slice"})


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
        self._maps: dict[tuple, tuple[DeviceArray, tuple]] = {}
        self._entries: dict[str, Any] = {}

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

    def synchronize(self) -> None:
        """Wait for every launch and copy queued on this GPU (they run asynchronously; a
        read to the host waits by itself)."""
        with self._order:
            self.driver.synchronize()

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
        """An op on tensors of this GPU: its kernel launched (an elementwise op's own, or
        the gather or reduce kernel on an index map), else run on the host."""
        kernel = self._op_kernel(primitive, values, params)
        if kernel is not None:
            return kernel(*values)[0]
        indexed = self._indexed(primitive, values, params)
        if indexed is not None:
            return indexed
        return host_step(primitive.kernel)(*values, **params)

    def _indexed(self, primitive: Primitive, values: list[Any],
                 params: dict[str, Any]) -> DeviceArray | None:
        """A move (`MOVES`) or a reduction done on this GPU through an index map, or None
        where neither applies (the op then runs on the host)."""
        kind = primitive.reduction
        if len(values) != 1 or primitive.multiple_results or not (
                primitive.name in MOVES
                or kind is not None and values[0].dtype in kind.native_dtypes
                and "axes" in params):
            return None
        try:
            key = (primitive.name, tuple(values[0].shape), *sorted(params.items()))
            hash(key)
        except TypeError:
            return None
        x = self.on_device(values[0])
        found = self._maps.get(key)
        if primitive.name in MOVES:
            if found is None:
                found = self._remember(key, primitive.kernel(_positions(x.shape), **params))
            indices, shape = found
            out = DeviceArray(self, shape, x.dtype)
            function = self._entry(f"gather_i{8 * x.dtype.itemsize}",
                                   gather_entry(8 * x.dtype.itemsize), 3, 1)
            self._launch(function, [x.handle, indices.handle, out.handle],
                         [int(np.prod(shape))])
            return out
        axes = tuple(params["axes"])
        width = int(np.prod([x.shape[a] for a in axes]))
        if width == 0 and kind.needs_elements:
            return None  # NumPy's error, from the host
        if found is None:
            kept = [a for a in range(len(x.shape)) if a not in axes]
            shape = primitive.abstract_eval(ShapedType(x.shape, x.dtype), **params).shape
            found = self._remember(key, _positions(x.shape).transpose(kept + list(axes)), shape)
        indices, shape = found
        out = DeviceArray(self, shape, x.dtype)
        rows = int(np.prod(shape))
        function = self._entry(f"reduce_{kind.name}_{x.dtype.name}",
                               reduce_entry(kind, x.dtype), 3, 2)
        self._launch(function, [x.handle, indices.handle, out.handle], [rows, width])
        return out

    def _remember(self, key: tuple, indices: np.ndarray,
                  shape: tuple[int, ...] | None = None) -> tuple[DeviceArray, tuple]:
        """An index map put on this GPU and kept for its signature."""
        if len(self._maps) >= MAX_MAPS:
            self._maps.clear()
        shape = tuple(indices.shape) if shape is None else tuple(shape)
        found = self._maps[key] = (self.copy_in(np.ascontiguousarray(indices)), shape)
        return found

    def _entry(self, name: str, build: Any, pointers: int, integers: int) -> Any:
        """An index-map kernel of this GPU, loaded once."""
        function = self._entries.get(name)
        if function is None:
            function = self._entries[name] = self.driver.load_entry(name, build, pointers,
                                                                    integers)
        return function

    def _launch(self, function: Any, handles: list[Any], integers: list[int]) -> None:
        if integers[0]:
            with self._order:
                self.driver.call(function, handles, integers, _blocks(integers[0]), BLOCK)

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

    def plan_step(self, kernel: Callable[..., Any],
                  primitive: Primitive | None = None) -> Callable[..., Any]:
        """What a step of a GPU plan runs for an op outside the fused kernels: a move or a
        reduction on this GPU (`execute`), anything else on the host (`host_step`)."""
        if primitive is not None and (primitive.name in MOVES or primitive.reduction):
            return lambda *values, **params: self.execute(primitive, list(values), params)
        return host_step(kernel)

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
            with device._order:
                device.driver.launch(self.function, self.kernel,
                                     [a.handle for a in everything], dims, _blocks(total),
                                     BLOCK)
        return tuple(outputs)


def _blocks(total: int) -> int:
    """Blocks of `BLOCK` threads for `total` elements (the grid-stride loop takes more)."""
    return min(MAX_BLOCKS, -(-total // BLOCK))


def _positions(shape: tuple[int, ...]) -> np.ndarray:
    """The flat index of every element of an array of `shape` (what index maps move)."""
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


def host_step(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """`kernel` run on the host: device arrays among its arguments fetched first."""

    def run(*values: Any, **params: Any) -> Any:
        host = [v.fetch() if isinstance(v, DeviceArray) else v for v in values]
        return kernel(*host, **params)

    return run
