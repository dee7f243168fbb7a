"""GPU devices: tensors in the GPU's memory, ops as PTX kernels and cuBLAS gemms, the rest
on the host.

A `GPUDevice` runs on a `Driver` (`gpu_drivers`: CUDA, or the emulation that tests it on
any machine). Its tensors are `DeviceArray`s in the driver's memory, counted by the device
and returned to the driver's allocator when collected. An op on its tensors runs as:

- an elementwise op (one the kernels' table lowers): one kernel per op signature (its
  dtypes, ranks and params; cached), launched;
- a matrix product: one strided-batched gemm of the driver (cuBLAS on a CUDA GPU; `_gemm`
  says which products qualify);
- a move (transpose, slice, broadcast, reshape) or a reduction: the gather and reduce
  kernels of `stageflow.codegen.targets.indexed`, following an index map computed once per
  signature, or none where the op keeps the operand's order (a reshape is a
  device-to-device copy; a reduction over trailing axes reads its operand in place). A
  reduction is a tree of passes (`reduction_passes`): the first splits each row among many
  threads, each later one reduces the partial results of the one before;
- a convolution, a pooling window, a zero pad, a gather by run-time indices or a row
  update: the same kernels and the gemm, composed in `gpu_ops`;
- anything else, and an op whose kernel cannot be built: its NumPy kernel on the host, its
  inputs fetched and its results put back, each transfer counted as a copy (TensorFlow's
  soft placement, visible in the statistics).

A graph function placed on a GPU is optimised by the PTX pipeline and runs as a plan of
the same steps, its fused kernels launched on device memory (`Executable.build_gpu`,
`plan_step`), or replayed as one recorded graph (`gpu_graphs`).
"""

from __future__ import annotations

import functools
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.codegen.kernels.analysis import Kernel, analyse
from stageflow.codegen.kernels.wrapper import spec_value
from stageflow.codegen.targets.indexed import gather_entry, reduce_entry, reduce_name
from stageflow.core import devices, profiling
from stageflow.core.op_facts import LoweredBy, ReductionKind
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.frontend.tensor import DeviceTensor, Tensor, allocate
from stageflow.ir.builder import build_function, build_op
from stageflow.primitives.linalg import matmul_add_p, matmul_p
from stageflow.primitives.state import assign_variable_p, read_variable_p
from stageflow.primitives.structural import broadcast_to_p, reshape_p, slice_p, transpose_p
from stageflow.runtime import gpu_ops
from stageflow.runtime.cpu_devices import Device, copied
from stageflow.runtime.gpu_drivers import GEMM_MAX_SIZE, Driver

BLOCK = 256  # threads per block
MAX_BLOCKS = 65535
MAX_MAPS = 256  # index maps kept per GPU (by op signature)
# How a reduction's passes split their rows (`reduction_passes`).
# A GPU hides its memory's latency with many loads in flight: a first pass aims at about
# MIN_THREADS threads (an H100 holds 132 SMs x 2048). Each of them folds at least MIN_SPAN
# elements: a pass that folds fewer costs more in its launch than it saves in one thread's
# serial loads. The later passes read the few partial results of the pass before (from the
# cache) and each launch costs microseconds of the host's time: their items fold up to
# LATER_SPAN elements, so that a reduction of 2^27 elements takes four passes, not seven.
# A warp's threads load together: a row long enough gets at least a warp, read coalesced.
MIN_THREADS = 1 << 17
MIN_SPAN = 16
LATER_SPAN = 128
WARP = 32
# Ops that only move elements: applied to the flat indices of their operand, their NumPy
# kernel gives the index map the gather kernel follows.
MOVES = frozenset({broadcast_to_p, reshape_p, transpose_p, slice_p})
GEMMS = frozenset({matmul_p, matmul_add_p})  # matrix products: the driver's gemm


class DeviceArray:
    """An array in a GPU's memory: the driver's handle, shape and dtype."""

    __slots__ = ("__weakref__", "device", "dtype", "handle", "nbytes", "shape")

    def __init__(self, device: GPUDevice, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.device = device
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self.handle = device.driver.allocate(self.nbytes)
        devices.COUNTERS.allocated(device.name, self.nbytes)
        device._arrays[device.driver.address(self.handle)] = self
        weakref.finalize(self, device.release, self.handle, self.nbytes)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def fetch(self) -> np.ndarray:
        """A host copy (counted)."""
        return self.device.download(self)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """A host copy (counted), for whatever reads the value on the host: the predicate
        or branch index of a control-flow op a GPU plan runs, a NumPy kernel."""
        value = self.fetch()
        return value if dtype is None else value.astype(dtype, copy=False)

    def __bool__(self) -> bool:
        """The truth of a one-element array, read on the host (a ``while``'s predicate);
        NumPy's error for any other size."""
        return bool(self.fetch())

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
        self._maps: OrderedDict[tuple, tuple[DeviceArray | None, tuple]] = OrderedDict()
        self._entries: dict[str, Any] = {}
        self._arrays: weakref.WeakValueDictionary[int, DeviceArray] = (
            weakref.WeakValueDictionary())

    def array_at(self, address: int) -> DeviceArray | None:
        """The live array whose memory starts at `address` (launch graphs keep the arrays
        they read alive through this)."""
        return self._arrays.get(address)

    def run(self, work: Callable[[], Any]) -> Any:
        with self._order:
            return work()

    # -- memory ---------------------------------------------------------------------------

    def release(self, handle: Any, nbytes: int) -> None:
        self.driver.free(handle, nbytes)
        devices.COUNTERS.freed(self.name, nbytes)

    def copy_in(self, value: Any) -> DeviceArray:
        """`value` (a host array) copied into this GPU's memory; counted."""
        start = time.perf_counter()
        array = np.asarray(value, order="C")  # (np.ascontiguousarray makes 0-d arrays 1-d)
        result = DeviceArray(self, array.shape, array.dtype)
        self.driver.upload(result.handle, array)
        devices.COUNTERS.copied(array.nbytes)
        if profiling.state.session is not None:
            profiling.complete(f"copy to {self.name}", "copy", start, None,
                               copied(array))
        return result

    def download(self, array: DeviceArray) -> np.ndarray:
        start = time.perf_counter()
        out = np.empty(array.shape, array.dtype)
        self.driver.download(array.handle, out)
        devices.COUNTERS.copied(out.nbytes)
        if profiling.state.session is not None:
            profiling.complete(f"copy from {self.name}", "copy", start, None, copied(out))
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

    # -- variables: their values in this GPU's memory --------------------------------------

    def adopt(self, variable: Any) -> None:
        """A variable created on this GPU keeps its value in the GPU's memory; host reads
        (``numpy()``, checkpoints) fetch it."""
        variable._value = self.copy_in(variable._value)
        variable._fetch = functools.partial(_host_value, variable)

    def read_variable(self, variable: Any) -> Tensor:
        return self.wrap(variable._value)

    def assign_variable(self, variable: Any, tensor: Any) -> None:
        """Store `tensor` (copied here once if it lives elsewhere) as the value."""
        value = self.mirror(tensor)
        variable.check_value(value)
        variable._value = value

    def _plan_assign(self, variable: Any, value: Any) -> tuple:
        """A GPU plan's assign: the value stays in this GPU's memory for a variable of this
        GPU; any other variable stores it as its own device does (on the host here)."""
        if variable.device == self.name:
            variable._value = self.on_device(value)
        else:
            variable._store(value.fetch() if isinstance(value, DeviceArray) else value)
        return ()

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
        """An op on tensors of this GPU: its kernel launched (an elementwise op's own, a
        gemm for a matmul, the gather or reduce kernels for a move or a reduction), else run
        on the host."""
        kernel = self._op_kernel(primitive, values, params)
        if kernel is not None:
            return kernel(*values)[0]
        product = self._gemm(primitive, values, params)
        if product is not None:
            return product
        indexed = self._indexed(primitive, values, params)
        if indexed is not None:
            return indexed
        mapped = gpu_ops.run(self, primitive, values, params)
        if mapped is not None:
            return mapped
        return host_step(primitive.kernel)(*values, **params)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> DeviceArray:
        """New, unwritten memory of this GPU for an array of `shape` and `dtype`."""
        return DeviceArray(self, shape, dtype)

    def _indexed(self, primitive: Primitive, values: list[Any],
                 params: dict[str, Any]) -> DeviceArray | None:
        """A move (`MOVES`) or a reduction done on this GPU through an index map (or none,
        `_index_map`), or None where neither applies (the op then runs on the host)."""
        kind = primitive.reduction
        if len(values) != 1 or primitive.multiple_results or not (
                primitive in MOVES
                or kind is not None and values[0].dtype in kind.native_dtypes
                and "axes" in params):
            return None
        try:
            key = (primitive.name, tuple(values[0].shape), *sorted(params.items()))
            hash(key)
        except TypeError:
            return None
        x = self.on_device(values[0])
        if kind is not None and kind.needs_elements and 0 in [x.shape[a] for a in params["axes"]]:
            return None  # NumPy's error, from the host
        found = self.kept_map(key)
        if found is None:
            found = self._remember(key, *_index_map(primitive, x.shape, x.dtype, params))
        indices, shape = found
        out = DeviceArray(self, shape, x.dtype)
        if kind is None:
            self._gather(x, indices, out)
        else:
            self._reduce(kind, x, indices, out, math.prod(x.shape[a] for a in params["axes"]))
        return out

    def _gather(self, x: DeviceArray, indices: DeviceArray | None, out: DeviceArray) -> None:
        """`out` filled with the elements of `x` the map names, or with `x`'s bytes where
        there is no map (the move keeps their order: a device-to-device copy)."""
        if indices is None:
            if x.nbytes:
                with self._order:
                    self.driver.copy(out.handle, x.handle, x.nbytes)
            return
        bits = 8 * x.dtype.itemsize
        count = math.prod(out.shape)
        self._launch(self._entry(f"gather_i{bits}", gather_entry(bits), 3, 1),
                     [x.handle, indices.handle, out.handle], [count], count)

    def _reduce(self, kind: ReductionKind, x: DeviceArray, indices: DeviceArray | None,
                out: DeviceArray, width: int) -> None:
        """`out` filled with the rows of `width` elements of `x` (through the map, if any)
        reduced by `kind`, in the passes `reduction_passes` plans: each pass but the last
        leaves `parts` partial results per row in a temporary, the operand of the next pass,
        read in order. A temporary is freed once the next pass is queued: launches run in
        order, and the allocator hands its block out again."""
        rows = math.prod(out.shape)
        source = x
        for parts in reduction_passes(rows, width):
            target = out if parts == 1 else DeviceArray(self, (rows, parts), x.dtype)
            mapped = indices is not None
            handles = [source.handle, *([indices.handle] if mapped else []), target.handle]
            function = self._entry(reduce_name(kind, x.dtype, mapped),
                                   reduce_entry(kind, x.dtype, mapped), len(handles), 3)
            self._launch(function, handles, [rows, width, parts], rows * parts)
            source, indices, width = target, None, parts

    def _remember(self, key: tuple, indices: np.ndarray | None,
                  shape: tuple[int, ...]) -> tuple[DeviceArray | None, tuple]:
        """An index map put on this GPU (None: the op needs none) and the result's shape,
        kept for the op's signature."""
        if len(self._maps) >= MAX_MAPS:  # the least recently used goes
            self._maps.popitem(last=False)
        found = self._maps[key] = (
            None if indices is None else self.copy_in(np.ascontiguousarray(indices)),
            tuple(shape))
        return found

    def kept_map(self, key: tuple) -> tuple[DeviceArray | None, tuple] | None:
        """The index map kept for `key` and its result's shape (None: not kept), now the
        most recently used: a model's maps stay while other signatures come and go."""
        found = self._maps.get(key)
        if found is not None:
            self._maps.move_to_end(key)
        return found

    def _entry(self, name: str, build: Any, pointers: int, integers: int) -> Any:
        """An index-map kernel of this GPU, loaded once."""
        function = self._entries.get(name)
        if function is None:
            function = self._entries[name] = self.driver.load_entry(name, build, pointers,
                                                                    integers)
        return function

    def _launch(self, function: Any, handles: list[Any], integers: list[int],
                items: int) -> None:
        """`function` launched over enough blocks for `items` work items (none: no launch;
        its grid-stride loop takes the items beyond `MAX_BLOCKS` blocks)."""
        if items:
            with self._order:
                self.driver.call(function, handles, integers, _blocks(items), BLOCK)

    def _gemm(self, primitive: Primitive, values: list[Any],
              params: dict[str, Any]) -> DeviceArray | None:
        """A matmul (`GEMMS`) as one strided-batched gemm of the driver, or None where the
        driver has no gemm of the dtype, or the batch dims broadcast from both sides (no
        one stride per operand walks them): the op then runs on the host."""
        if primitive not in GEMMS:
            return None
        dtype = np.dtype(values[0].dtype)
        if dtype not in self.driver.gemm_dtypes():
            return None
        a_shape, b_shape = tuple(values[0].shape), tuple(values[1].shape)
        transpose_a, transpose_b = params["transpose_a"], params["transpose_b"]
        m, k = (a_shape[-1], a_shape[-2]) if transpose_a else (a_shape[-2], a_shape[-1])
        n = b_shape[-2] if transpose_b else b_shape[-1]
        leading = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
        batch = math.prod(leading)
        strides = []
        for shape in (a_shape, b_shape):
            count = math.prod(shape[:-2])
            if count not in (1, batch):
                return None
            strides.append(0 if count == 1 else shape[-2] * shape[-1])
        if max(batch, m, n, k) > GEMM_MAX_SIZE:
            return None
        a, b = self.on_device(values[0]), self.on_device(values[1])
        shape = (*leading, m, n)
        if primitive is matmul_add_p:
            out, alpha, beta = self._addend(values[2], shape), params["alpha"], 1.0
        else:
            out, alpha, beta = DeviceArray(self, shape, dtype), 1.0, 0.0
        with self._order:
            self.driver.gemm(a.handle, b.handle, out.handle, dtype, batch, m, n, k,
                             transpose_a, transpose_b, strides[0], strides[1], alpha, beta)
        return out

    def _addend(self, value: Any, shape: tuple[int, ...]) -> DeviceArray:
        """matmul_add's addend broadcast to the product's `shape` in new memory of this GPU
        (a copy, or a gather), where the gemm then adds the product (beta 1)."""
        addend = self.on_device(value)
        if addend.shape == shape:
            return self.duplicate(addend)
        return self.on_device(self.execute(broadcast_to_p, [addend], {"shape": shape}))

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
        """What a step of a GPU plan runs for an op outside the fused kernels: a move, a
        reduction or a matrix product on this GPU (`execute`); a variable's read (its
        value where it is: a variable of this GPU's is in its memory) and write
        (`_plan_assign`); anything else on the host (`host_step`)."""
        if primitive is not None and (primitive in MOVES or primitive in GEMMS
                                      or primitive in gpu_ops.OPS
                                      or primitive.reduction is not None):
            return lambda *values, **params: self.execute(primitive, list(values), params)
        if primitive is read_variable_p:
            return lambda variable: variable._value
        if primitive is assign_variable_p:
            return self._plan_assign
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
        total = max((math.prod(out.shape) for out in outputs), default=0)
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


def reduction_passes(rows: int, width: int) -> list[int]:
    """The partial results per row that each pass of a reduction of `rows` rows of `width`
    elements leaves (`reduce_entry`): the last pass leaves 1, and each pass reduces the rows
    of the previous pass's partial results. A pass doubles its parts while it has fewer work
    items than it wants, `MIN_THREADS` (or a warp per row for rows of a warp's `MIN_SPAN`
    elements and more, so that consecutive threads read consecutive elements), and each
    item still folds `MIN_SPAN` elements or more (`LATER_SPAN` after the first pass)."""
    passes = []
    span = MIN_SPAN
    while not passes or passes[-1] > 1:
        wanted = MIN_THREADS if width < WARP * span else max(MIN_THREADS, WARP * rows)
        parts = 1
        while 0 < rows * parts < wanted and width // (2 * parts) >= span:
            parts *= 2
        passes.append(parts)
        width, span = parts, LATER_SPAN
    return passes


def _index_map(primitive: Primitive, shape: tuple[int, ...], dtype: np.dtype,
               params: dict[str, Any]) -> tuple[np.ndarray | None, tuple[int, ...]]:
    """The index map of a move or a reduction of an operand of `shape`, and the result's
    shape. A reduction's map lists the operand's flat indices with the kept axes first and
    the reduced ones last (its rows are the elements each result reduces). No map (None)
    where it would be the identity: a reshape keeps the elements' order, and so does a
    reduction whose reduced axes trail (in the operand's memory its rows are consecutive)."""
    if primitive in MOVES and primitive is not reshape_p:
        moved = primitive.kernel(_positions(shape), **params)
        return moved, tuple(moved.shape)
    result = tuple(primitive.abstract_eval(ShapedType(shape, dtype), **params).shape)
    if primitive is reshape_p:
        return None, result
    axes = sorted(params["axes"])
    order = [a for a in range(len(shape)) if a not in axes] + axes
    long = [a for a in order if shape[a] > 1]
    if long == sorted(long) or 0 in shape:
        return None, result
    return _positions(shape).transpose(order), result


def _positions(shape: tuple[int, ...]) -> np.ndarray:
    """The flat index of every element of an array of `shape` (what index maps move)."""
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


def _host_value(variable: Any) -> np.ndarray:
    """The value of a variable of a GPU, on the host (a host write may have left it there)."""
    value = variable._value
    return value.fetch() if isinstance(value, DeviceArray) else value


def host_step(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """`kernel` run on the host: device arrays among its arguments fetched first; each run
    counted (``host_fallbacks`` of `sf.config.statistics`)."""

    def run(*values: Any, **params: Any) -> Any:
        devices.COUNTERS.fell_back()
        host = [v.fetch() if isinstance(v, DeviceArray) else v for v in values]
        return kernel(*host, **params)

    return run
