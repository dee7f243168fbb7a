"""What a GPU device needs from below it: memory, copies, kernels loaded and launched,
matrix products.

Two drivers give the same operations:

- `CUDADriver`: an NVIDIA GPU through the CUDA driver API (the ``cuda-python`` package, the
  ``stageflow[cuda]`` extra): ``cuMemAlloc`` behind a caching allocator,
  ``cuMemcpyHtoD``/``DtoH``, our PTX loaded with ``cuModuleLoadData`` and launched with
  ``cuLaunchKernel`` on a stream of the driver's own. Launches and device copies are
  asynchronous: the stream orders them, so a block freed into the cache and handed out
  again is only written after the launches that read it. Copies from and to the host go
  through the legacy default stream, with which the driver's (blocking) stream
  synchronises: they wait for the launches before them (a copy to the host reports a
  failed launch), and `synchronize` waits for everything. Work recorded from the stream
  becomes a CUDA graph (`record_graph`), launched as one (`launch_graph`). Matrix products
  are cuBLAS's strided-batched gemms (`cublas`), queued on the same stream.
- `EmulatedDriver`: host memory, and the PTX kernels' LLVM IR compiled for the host and
  launched over an emulated grid (`stageflow.codegen.targets.emulated`), so that the GPU
  device's own logic (what runs as a kernel, what falls back to the host, copies, staged
  launch sequences) is tested on every machine; its gemm is NumPy's matmul on the same
  row-major operands. Enabled by `sf.config.set_emulated_gpu_count`.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from stageflow.codegen.kernels.analysis import Kernel
from stageflow.codegen.targets.emulated import EmulatedLaunch
from stageflow.codegen.targets.ptx import EntryBuilder, PTXTarget, entry_name
from stageflow.runtime import cublas

# The dtypes of both drivers' gemms (cuBLAS's S, D, C and Z gemms, and its bfloat16 and
# float16 ones summing in float32), so that the emulation routes the same matmuls to the
# device as a real GPU does.
GEMM_DTYPES = cublas.GEMM_DTYPES
GEMM_MAX_SIZE = cublas.INT_MAX  # the largest m, n, k and batch count of a gemm


class Driver(Protocol):
    """Memory and kernels of one GPU (handles are the driver's own: pointers or arrays)."""

    kind: str
    memory_bytes: int

    def allocate(self, nbytes: int) -> Any: ...

    def free(self, handle: Any, nbytes: int) -> None: ...

    def upload(self, handle: Any, array: np.ndarray) -> None: ...

    def download(self, handle: Any, out: np.ndarray) -> None: ...

    def copy(self, destination: Any, source: Any, nbytes: int) -> None: ...

    def load(self, kernel: Kernel) -> Any: ...

    def launch(self, function: Any, kernel: Kernel, handles: list[Any], dims: list[int],
               grid: int, block: int) -> None: ...

    def load_entry(self, name: str, build: EntryBuilder, pointers: int,
                   integers: int) -> Any: ...

    def call(self, function: Any, handles: list[Any], integers: list[int], grid: int,
             block: int) -> None: ...

    def synchronize(self) -> None: ...

    def gemm_dtypes(self) -> frozenset[np.dtype]: ...

    def gemm(self, a: Any, b: Any, out: Any, dtype: np.dtype, batch: int, m: int, n: int,
             k: int, transpose_a: bool, transpose_b: bool, stride_a: int, stride_b: int,
             alpha: float, beta: float) -> None:
        """Row-major ``out[i] = alpha * op(a[i]) @ op(b[i]) + beta * out[i]`` for i below
        `batch`, queued like a launch: ``a[i]`` is the ``[m, k]`` matrix (``[k, m]``,
        transposed by op, with `transpose_a`) at element ``i * stride_a`` of `a`, likewise
        ``b[i]`` ``[k, n]`` (or ``[n, k]``); `out` holds ``[batch, m, n]`` contiguously.
        A stride of 0 gives every i the same matrix (a batch broadcast from one side). beta
        is 0 (`out` is only written) or 1; any size may be 0 (k = 0: a product of zeros).
        Only the dtypes of `gemm_dtypes`."""
        ...

    def address(self, handle: Any) -> int: ...

    def record_graph(self, replay: Callable[[], None]) -> Any: ...

    def launch_graph(self, graph: Any) -> None: ...


class EmulatedDriver:
    """Host memory and emulated launches of the PTX kernels' LLVM IR (one thread of the
    host runs every GPU thread in turn)."""

    kind = "GPU (emulated on the CPU)"

    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self._launch = EmulatedLaunch()

    def allocate(self, nbytes: int) -> np.ndarray:
        return np.empty(max(nbytes, 1), np.uint8)

    def free(self, handle: Any, nbytes: int) -> None:
        """Host memory: freed with its last reference."""

    def upload(self, handle: np.ndarray, array: np.ndarray) -> None:
        handle[:array.nbytes] = np.asarray(array, order="C").reshape(-1).view(np.uint8)

    def download(self, handle: np.ndarray, out: np.ndarray) -> None:
        out.reshape(-1).view(np.uint8)[:] = handle[:out.nbytes]

    def copy(self, destination: np.ndarray, source: np.ndarray, nbytes: int) -> None:
        destination[:nbytes] = source[:nbytes]

    def load(self, kernel: Kernel) -> Any:
        return self._launch.compile(kernel)

    def launch(self, function: Any, kernel: Kernel, handles: list[np.ndarray],
               dims: list[int], grid: int, block: int) -> None:
        arrays = []
        position = 0
        for handle, arg in zip(handles, kernel.args, strict=True):
            shape = tuple(dims[position:position + arg.ndim])
            position += arg.ndim
            count = int(np.prod(shape))
            arrays.append(handle[:count * arg.dtype.itemsize].view(arg.dtype).reshape(shape))
        count = len(kernel.inputs)
        function.launch(arrays[:count], arrays[count:], grid, block)

    def load_entry(self, name: str, build: EntryBuilder, pointers: int,
                   integers: int) -> Any:
        return self._launch.compile_entry(name, build, [ctypes.c_void_p] * pointers
                                          + [ctypes.c_int64] * integers)

    def call(self, function: Any, handles: list[np.ndarray], integers: list[int], grid: int,
             block: int) -> None:
        function(*[h.ctypes.data for h in handles], *integers, grid, block)

    def synchronize(self) -> None:
        """Emulated launches finish before they return."""

    def gemm_dtypes(self) -> frozenset[np.dtype]:
        return GEMM_DTYPES

    def gemm(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, dtype: np.dtype,
             batch: int, m: int, n: int, k: int, transpose_a: bool, transpose_b: bool,
             stride_a: int, stride_b: int, alpha: float, beta: float) -> None:
        dtype = np.dtype(dtype)
        left = _matrices(a, dtype, batch, stride_a, (k, m) if transpose_a else (m, k))
        right = _matrices(b, dtype, batch, stride_b, (n, k) if transpose_b else (k, n))
        if transpose_a:
            left = left.swapaxes(-1, -2)
        if transpose_b:
            right = right.swapaxes(-1, -2)
        result = out[:batch * m * n * dtype.itemsize].view(dtype).reshape(batch, m, n)
        # halves are summed in float32 and rounded once, as cuBLAS's compute type has them
        compute = np.dtype(np.float32) if dtype in cublas.EX_TYPES else dtype
        product = np.matmul(left.astype(compute, copy=False), right.astype(compute, copy=False))
        product *= compute.type(alpha)
        if beta:  # beta 0: out is not read
            product += result.astype(compute)
        result[...] = product.astype(dtype)

    def address(self, handle: np.ndarray) -> int:
        return handle.ctypes.data

    def record_graph(self, replay: Callable[[], None]) -> Callable[[], None]:
        """The emulated graph is the replay itself."""
        return replay

    def launch_graph(self, graph: Callable[[], None]) -> None:
        graph()


def _matrices(handle: np.ndarray, dtype: np.dtype, batch: int, stride: int,
              shape: tuple[int, int]) -> np.ndarray:
    """The ``[batch, *shape]`` matrices of a gemm operand in host memory, one every
    `stride` elements (0: the same one for all), read-only."""
    size = shape[0] * shape[1]
    count = (batch - 1) * stride + size if batch and size else 0
    if count * dtype.itemsize > handle.size:
        raise ValueError(f"a gemm operand of {handle.size} bytes is too small for {batch} "
                         f"{list(shape)} matrices {stride} elements apart")
    flat = handle[:count * dtype.itemsize].view(dtype)
    return np.lib.stride_tricks.as_strided(
        flat, (batch, *shape), (stride * dtype.itemsize, shape[1] * dtype.itemsize,
                                dtype.itemsize), writeable=False)


def _cuda() -> Any:
    """The CUDA driver bindings of ``cuda-python`` (ImportError where not installed)."""
    from cuda.bindings import driver  # noqa: PLC0415 - an optional package, probed

    return driver


class CUDAError(RuntimeError):
    """A CUDA driver call failed (its name and error code in the message)."""


class CUDADriver:
    """One GPU through the CUDA driver API: its primary context, made current on each
    calling thread; freed blocks are kept by size and reused (a caching allocator)."""

    kind = "GPU"

    def __init__(self, ordinal: int) -> None:
        self._cu = _cuda()
        self._check("cuInit", self._cu.cuInit(0))
        self.device = self._check("cuDeviceGet", self._cu.cuDeviceGet(ordinal))
        self.context = self._check("cuDevicePrimaryCtxRetain",
                                   self._cu.cuDevicePrimaryCtxRetain(self.device))
        self.memory_bytes = int(self._check("cuDeviceTotalMem",
                                            self._cu.cuDeviceTotalMem(self.device)))
        attribute = self._cu.CUdevice_attribute
        major = self._check("cuDeviceGetAttribute", self._cu.cuDeviceGetAttribute(
            attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device))
        if major < 8:
            raise CUDAError(f"GPU {ordinal} has compute capability {major}.x; stageflow's PTX "
                            "needs 8.0 or newer")
        self.target = PTXTarget("sm_90" if major >= 9 else "sm_80")
        self._thread = threading.local()
        self._current()
        self.stream = self._check("cuStreamCreate", self._cu.cuStreamCreate(0))
        self._free: dict[int, list[Any]] = defaultdict(list)
        self._lock = threading.Lock()
        self._blas: cublas.Cublas | None = None
        # Why matmuls run on the host ('' where cuBLAS runs them); None until first asked.
        self.blas_reason: str | None = None

    def _check(self, name: str, result: Any) -> Any:
        error, *values = result if isinstance(result, tuple) else (result,)
        if int(error) != 0:
            raise CUDAError(f"{name} failed: {getattr(error, 'name', error)}")
        return values[0] if len(values) == 1 else tuple(values)

    def _current(self) -> None:
        """Make the GPU's primary context current on this thread, once per thread: the
        primary context is also the one the CUDA runtime (and so cuBLAS, PyTorch, JAX)
        makes current, so nothing else replaces it."""
        if getattr(self._thread, "current", False):
            return
        self._check("cuCtxSetCurrent", self._cu.cuCtxSetCurrent(self.context))
        self._thread.current = True

    def allocate(self, nbytes: int) -> Any:
        size = max(nbytes, 1)
        with self._lock:
            if self._free[size]:
                return self._free[size].pop()
        self._current()
        return self._check("cuMemAlloc", self._cu.cuMemAlloc(size))

    def free(self, handle: Any, nbytes: int) -> None:
        with self._lock:
            self._free[max(nbytes, 1)].append(handle)

    def upload(self, handle: Any, array: np.ndarray) -> None:
        array = np.asarray(array, order="C")
        self._current()
        self._check("cuMemcpyHtoD", self._cu.cuMemcpyHtoD(handle, array.ctypes.data,
                                                          array.nbytes))

    def download(self, handle: Any, out: np.ndarray) -> None:
        self._current()
        self._check("cuMemcpyDtoH", self._cu.cuMemcpyDtoH(out.ctypes.data, handle, out.nbytes))

    def copy(self, destination: Any, source: Any, nbytes: int) -> None:
        self._current()
        self._check("cuMemcpyDtoDAsync",
                    self._cu.cuMemcpyDtoDAsync(destination, source, nbytes, self.stream))

    def load(self, kernel: Kernel) -> Any:
        return self._function(self.target.compile(kernel), entry_name(kernel))

    def load_entry(self, name: str, build: EntryBuilder, pointers: int,
                   integers: int) -> Any:
        return self._function(self.target.compile_entry(name, build), name)

    def _function(self, ptx: str, name: str) -> Any:
        text = ctypes.create_string_buffer(ptx.encode())
        self._current()
        module = self._check("cuModuleLoadData",
                             self._cu.cuModuleLoadData(ctypes.addressof(text)))
        return self._check("cuModuleGetFunction",
                           self._cu.cuModuleGetFunction(module, name.encode()))

    def launch(self, function: Any, kernel: Kernel, handles: list[Any], dims: list[int],
               grid: int, block: int) -> None:
        self.call(function, handles, dims, grid, block)

    def call(self, function: Any, handles: list[Any], integers: list[int], grid: int,
             block: int) -> None:
        # kernelParams: an array of pointers to the parameters' values, each 8 bytes (a
        # .u64 of the entry), read by cuLaunchKernel before it returns.
        count = len(handles) + len(integers)
        values = (ctypes.c_int64 * count)(*[int(h) for h in handles], *integers)
        start = ctypes.addressof(values)
        pointers = (ctypes.c_void_p * count)(*range(start, start + 8 * count, 8))
        self._current()
        self._check("cuLaunchKernel", self._cu.cuLaunchKernel(
            function, grid, 1, 1, block, 1, 1, 0, self.stream, ctypes.addressof(pointers), 0))

    def synchronize(self) -> None:
        self._current()
        self._check("cuCtxSynchronize", self._cu.cuCtxSynchronize())

    def gemm_dtypes(self) -> frozenset[np.dtype]:
        """cuBLAS's dtypes where it loads and makes a handle for this GPU (on first asking),
        else none: the matmuls then run on the host, and `blas_reason` says why."""
        with self._lock:
            if self.blas_reason is None:
                library, self.blas_reason = cublas.load()
                if library is not None:
                    self._current()
                    try:
                        self._blas = cublas.Cublas(library, int(self.stream))
                    except cublas.CublasError as failure:
                        self.blas_reason = str(failure)
        return GEMM_DTYPES if self._blas is not None else frozenset()

    def gemm(self, a: Any, b: Any, out: Any, dtype: np.dtype, batch: int, m: int, n: int,
             k: int, transpose_a: bool, transpose_b: bool, stride_a: int, stride_b: int,
             alpha: float, beta: float) -> None:
        """cuBLAS's gemm (after `gemm_dtypes` found it), except for empty products, which
        cuBLAS is not asked for: nothing to write, or (k = 0) zeros written by a memset."""
        if not batch * m * n:
            return
        self._current()
        if not k:
            if not beta:
                self._check("cuMemsetD8Async", self._cu.cuMemsetD8Async(
                    out, 0, batch * m * n * np.dtype(dtype).itemsize, self.stream))
            return
        self._blas.gemm(int(a), int(b), int(out), dtype, batch, m, n, k, transpose_a,
                        transpose_b, stride_a, stride_b, alpha, beta)

    def address(self, handle: Any) -> int:
        return int(handle)

    def record_graph(self, replay: Callable[[], None]) -> Any:
        """The work `replay` puts on the stream, captured as an instantiated CUDA graph
        (destroyed with the returned object)."""
        cu = self._cu
        self._current()
        self._check("cuStreamBeginCapture", cu.cuStreamBeginCapture(
            self.stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
        try:
            replay()
        except BaseException:
            cu.cuStreamEndCapture(self.stream)
            raise
        graph = self._check("cuStreamEndCapture", cu.cuStreamEndCapture(self.stream))
        executable = self._check("cuGraphInstantiate", cu.cuGraphInstantiate(graph, 0))
        return _Graph(cu, graph, executable)

    def launch_graph(self, graph: Any) -> None:
        self._current()
        self._check("cuGraphLaunch", self._cu.cuGraphLaunch(graph.executable, self.stream))


class _Graph:
    """An instantiated CUDA graph, destroyed when collected."""

    def __init__(self, cu: Any, graph: Any, executable: Any) -> None:
        self.executable = executable
        weakref.finalize(self, _destroy_graph, cu, graph, executable)


def _destroy_graph(cu: Any, graph: Any, executable: Any) -> None:
    cu.cuGraphExecDestroy(executable)
    cu.cuGraphDestroy(graph)


def cuda_gpus() -> tuple[list[CUDADriver], str]:
    """A driver per usable CUDA GPU, and why there are none (or '' where there are)."""
    try:
        cu = _cuda()
    except ImportError:
        return [], ("the CUDA driver bindings are not installed (pip install "
                    "'stageflow[cuda]' brings cuda-python)")
    try:
        error, = cu.cuInit(0)
    except RuntimeError as failure:  # no libcuda to load
        return [], f"the CUDA driver could not be loaded ({failure})"
    if int(error) != 0:
        return [], f"the CUDA driver could not be initialised ({getattr(error, 'name', error)})"
    error, count = cu.cuDeviceGetCount()
    if int(error) != 0 or count == 0:
        return [], "the CUDA driver reports no GPU"
    drivers, reasons = [], []
    for ordinal in range(count):
        try:
            drivers.append(CUDADriver(ordinal))
        except CUDAError as failure:
            reasons.append(str(failure))
    return drivers, "; ".join(reasons)
