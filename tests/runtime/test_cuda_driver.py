"""`CUDADriver` against a stand-in for ``cuda.bindings.driver``: no GPU runs the code here,
but every call the driver makes (context, allocation, copies, module loading, the packing
of kernel parameters, launches) goes through functions with the real bindings' names and
return tuples, backed by host memory. Launches and device-to-device copies are queued,
as on a stream, and run at the next copy from or to the host or synchronisation, so code
that reads device memory before the stream has run gets stale numbers. A launch decodes
the ``kernelParams`` array the driver packed, checks it against the PTX ``.entry`` it
loaded, and runs the same kernel through the emulated launch on those "device" addresses,
so a wrongly packed parameter gives a wrong number.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import gc
import re
import sys
import types

import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen.targets import ptx as ptx_target
from stageflow.codegen.targets.emulated import EmulatedLaunch
from stageflow.passes import PTX_PIPELINE
from stageflow.primitives import elementwise as ew
from stageflow.primitives import reduction, structural
from stageflow.primitives.conv import conv2d_p, reduce_window_p
from stageflow.primitives.linalg import matmul_add_p, matmul_p
from stageflow.runtime import cublas, gpu_drivers
from stageflow.runtime.gpu import DeviceArray, GPUDevice
from stageflow.runtime.gpu_graphs import LaunchGraph, LaunchGraphs, replayable
from stageflow.staging.compiler import Compilation


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906


class Attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75


class CaptureMode(enum.IntEnum):
    CU_STREAM_CAPTURE_MODE_RELAXED = 2


STREAM = 0x5EA3  # the driver's stream (the legacy one is 0); an address, as cuBLAS takes it


class FakeCuda(types.ModuleType):
    """The subset of ``cuda.bindings.driver`` the driver uses, on host memory."""

    CUresult = CUresult
    CUdevice_attribute = Attribute
    CUstreamCaptureMode = CaptureMode

    def __init__(self, compiled: dict[str, object]) -> None:
        super().__init__("cuda.bindings.driver")
        self.compiled = compiled  # entry name -> what the emulated launch runs
        self.buffers: dict[int, ctypes.Array] = {}
        self.modules: dict[int, str] = {}
        self.functions: dict[int, tuple[str, int]] = {}
        self.current = None
        self.launches = 0
        self.stream: list = []  # work queued on the stream, run in order
        self.capture: list | None = None  # work recorded instead, while capturing
        self.graphs: dict[int, list] = {}

    def _enqueue(self, stream, work):
        assert stream == STREAM
        (self.stream if self.capture is None else self.capture).append(work)

    def _run_stream(self):
        work, self.stream = self.stream, []
        for item in work:
            item()

    def cuInit(self, flags):  # noqa: N802 - the bindings' names
        return (CUresult.CUDA_SUCCESS,)

    def cuDeviceGetCount(self):  # noqa: N802
        return CUresult.CUDA_SUCCESS, 1

    def cuDeviceGet(self, ordinal):  # noqa: N802
        return CUresult.CUDA_SUCCESS, ordinal

    def cuDevicePrimaryCtxRetain(self, device):  # noqa: N802
        return CUresult.CUDA_SUCCESS, ("context", device)

    def cuCtxSetCurrent(self, context):  # noqa: N802
        self.current = context
        return (CUresult.CUDA_SUCCESS,)

    def cuDeviceTotalMem(self, device):  # noqa: N802
        return CUresult.CUDA_SUCCESS, 8 << 30

    def cuDeviceGetAttribute(self, attribute, device):  # noqa: N802
        return CUresult.CUDA_SUCCESS, 9

    def cuMemAlloc(self, nbytes):  # noqa: N802
        assert self.current is not None, "no current context"
        buffer = (ctypes.c_char * nbytes)()
        self.buffers[ctypes.addressof(buffer)] = buffer
        return CUresult.CUDA_SUCCESS, ctypes.addressof(buffer)

    def _check_range(self, pointer, nbytes):
        base = max(a for a in self.buffers if a <= int(pointer))
        assert int(pointer) + nbytes <= base + len(self.buffers[base]), "out of bounds"

    def cuMemcpyHtoD(self, device, host, nbytes):  # noqa: N802
        self._check_range(device, nbytes)
        if self.capture is not None:  # the legacy stream while capturing: as CUDA says
            return (CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,)
        self._run_stream()
        ctypes.memmove(int(device), host, nbytes)
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoH(self, host, device, nbytes):  # noqa: N802
        self._check_range(device, nbytes)
        if self.capture is not None:
            return (CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,)
        self._run_stream()
        ctypes.memmove(host, int(device), nbytes)
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoDAsync(self, destination, source, nbytes, stream):  # noqa: N802
        self._check_range(destination, nbytes)
        self._check_range(source, nbytes)
        self._enqueue(stream, lambda: ctypes.memmove(int(destination), int(source), nbytes))
        return (CUresult.CUDA_SUCCESS,)

    def cuMemsetD8Async(self, device, value, count, stream):  # noqa: N802
        self._check_range(device, count)
        self._enqueue(stream, lambda: ctypes.memset(int(device), value, count))
        return (CUresult.CUDA_SUCCESS,)

    def cuModuleLoadData(self, image):  # noqa: N802
        text = ctypes.string_at(image).decode()
        assert ".entry" in text and ".target sm_90" in text
        self.modules[len(self.modules) + 1] = text
        return CUresult.CUDA_SUCCESS, len(self.modules)

    def cuModuleGetFunction(self, module, name):  # noqa: N802
        text = self.modules[module]
        match = re.search(rf"\.entry {re.escape(name.decode())}\((.*?)\)", text, re.S)
        if match is None:
            return CUresult.CUDA_ERROR_INVALID_VALUE, None
        handle = len(self.functions) + 1
        self.functions[handle] = (name.decode(), match.group(1).count(".param"))
        return CUresult.CUDA_SUCCESS, handle

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params,  # noqa: N802
                       extra):
        name, count = self.functions[function]
        assert (gy, gz, by, bz, shared, extra) == (1, 1, 1, 1, 0, 0) and gx >= 1 and bx >= 1
        pointers = (ctypes.c_uint64 * count).from_address(params)
        values = [ctypes.c_uint64.from_address(p).value for p in pointers]  # read at launch
        self._enqueue(stream, lambda: self.compiled[name](values, gx, bx))
        self.launches += 1
        return (CUresult.CUDA_SUCCESS,)

    def cuCtxSynchronize(self):  # noqa: N802
        self._run_stream()
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamCreate(self, flags):  # noqa: N802
        assert flags == 0 and self.current is not None  # blocking: ordered with the legacy one
        return CUresult.CUDA_SUCCESS, STREAM

    def cuStreamBeginCapture(self, stream, mode):  # noqa: N802
        assert stream == STREAM and mode == CaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        assert self.capture is None
        self.capture = []
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamEndCapture(self, stream):  # noqa: N802
        handle = len(self.graphs) + 1
        self.graphs[handle], self.capture = self.capture, None
        return CUresult.CUDA_SUCCESS, handle

    def cuGraphInstantiate(self, graph, flags):  # noqa: N802
        return CUresult.CUDA_SUCCESS, ("executable", graph)

    def cuGraphLaunch(self, executable, stream):  # noqa: N802
        for work in self.graphs[executable[1]]:
            self._enqueue(stream, work)
        return (CUresult.CUDA_SUCCESS,)

    def cuGraphExecDestroy(self, executable):  # noqa: N802
        return (CUresult.CUDA_SUCCESS,)

    def cuGraphDestroy(self, graph):  # noqa: N802
        del self.graphs[graph]
        return (CUresult.CUDA_SUCCESS,)


class FakeCublas:
    """The cuBLAS functions `stageflow.runtime.cublas` calls, over the fake's memory. A gemm
    checks its sizes, leading dims and strides against the buffers it reads and writes,
    reads alpha and beta when called (host pointer mode), and queues its column-major
    product, computed by NumPy, on the stream the handle was given, as cuBLAS queues its
    kernels: a gemm run out of order with the launches around it gives wrong numbers."""

    HANDLE = 0x4B1A5

    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.stream = None
        self.gemms: list[tuple] = []  # (name, transa, transb, m, n, k, lda, ldb, ldc,
        #                                 strideA, strideB, strideC, batchCount) of each call
        for dtype, name in cublas.FUNCTIONS.items():
            setattr(self, name, functools.partial(self._gemm, name, dtype))

    def cublasGemmStridedBatchedEx(self, handle, transa, transb, m, n, k, alpha, a,  # noqa: N802
                                   a_type, lda, stride_a, b, b_type, ldb, stride_b, beta, c,
                                   c_type, ldc, stride_c, batch, compute, algo):
        """A half-precision gemm: the three matrices of one dtype, summed in float32 with
        float32 scalars, as `cublas` asks for them."""
        assert a_type == b_type == c_type and (compute, algo) == (cublas.COMPUTE_32F,
                                                                  cublas.GEMM_DEFAULT)
        [dtype] = [d for d, code in cublas.EX_TYPES.items() if code == a_type]
        return self._gemm(cublas.EX_FUNCTION, dtype, handle, transa, transb, m, n, k, alpha,
                          a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch,
                          scalars=np.dtype(np.float32))

    def cublasCreate_v2(self, handle):  # noqa: N802 - the library's names
        assert self.cuda.current is not None, "no current context"
        handle.contents.value = self.HANDLE
        return 0

    def cublasSetStream_v2(self, handle, stream):  # noqa: N802
        assert handle.value == self.HANDLE
        self.stream = stream
        return 0

    def _gemm(self, name, dtype, handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b,
              ldb, stride_b, beta, c, ldc, stride_c, batch, scalars=None):
        assert handle.value == self.HANDLE and self.cuda.current is not None
        assert min(m, n, k, batch) >= 1 and {transa, transb} <= {cublas.OP_N, cublas.OP_T}
        scalars = scalars or dtype
        alpha, beta = (np.frombuffer(ctypes.string_at(p, scalars.itemsize), scalars)[0]
                       for p in (alpha, beta))
        left = self._matrices(a, dtype, batch, stride_a, lda,
                              (m, k) if transa == cublas.OP_N else (k, m))
        right = self._matrices(b, dtype, batch, stride_b, ldb,
                               (k, n) if transb == cublas.OP_N else (n, k))
        out = self._matrices(c, dtype, batch, stride_c, ldc, (m, n))
        self.gemms.append((name, transa, transb, m, n, k, lda, ldb, ldc, stride_a, stride_b,
                           stride_c, batch))

        def run():
            x = left if transa == cublas.OP_N else left.swapaxes(1, 2)
            y = right if transb == cublas.OP_N else right.swapaxes(1, 2)
            wide = np.float32 if scalars != dtype else dtype  # halves: sums in float32
            product = alpha * np.matmul(x.astype(wide), y.astype(wide))
            # beta 0: C is not read
            out[...] = (product + beta * out.astype(wide) if beta else product).astype(dtype)

        self.cuda._enqueue(self.stream, run)
        return 0

    def _matrices(self, pointer, dtype, batch, stride, ld, shape):
        """The column-major ``[rows, cols]`` matrices at device address `pointer`, columns
        `ld` and matrices `stride` elements apart, checked to lie inside their buffer."""
        rows, cols = shape
        assert ld >= rows and stride >= 0
        extent = ((batch - 1) * stride + (cols - 1) * ld + rows) * dtype.itemsize
        self.cuda._check_range(pointer, extent)
        memory = np.frombuffer((ctypes.c_char * extent).from_address(pointer), dtype)
        size = dtype.itemsize
        return np.lib.stride_tricks.as_strided(memory, (batch, rows, cols),
                                               (stride * size, size, ld * size))


@pytest.fixture
def device(monkeypatch):
    """A GPU device on `CUDADriver` over the stand-in bindings; every kernel the driver
    compiles to PTX is also compiled for the emulated launch, which the fake runs, and its
    cuBLAS is the stand-in `FakeCublas` (``gpu.blas``), never a real library."""
    compiled: dict[str, object] = {}
    launch = EmulatedLaunch()
    compile_kernel = ptx_target.PTXTarget.compile
    compile_entry = ptx_target.PTXTarget.compile_entry

    def kernel_ptx(self, kernel):
        emulated = launch.compile(kernel)

        def run(values, grid, block):
            count = len(kernel.args)
            emulated._call(*values[:count], *[ctypes.c_int64(v).value for v in values[count:]],
                           grid, block)

        compiled[ptx_target.entry_name(kernel)] = run
        return compile_kernel(self, kernel)

    def entry_ptx(self, name, build):
        text = compile_entry(self, name, build)
        count = text.split(f".entry {name}(")[1].split(")")[0].count(".param .u64")
        emulated = launch.compile_entry(name, build, [ctypes.c_void_p] * 3
                                        + [ctypes.c_int64] * (count - 3))
        compiled[name] = lambda values, grid, block: emulated(*values, grid, block)
        return text

    fake = FakeCuda(compiled)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = fake
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", fake)
    blas = FakeCublas(fake)
    monkeypatch.setattr(cublas, "load", lambda: (blas, ""))
    monkeypatch.setattr(ptx_target.PTXTarget, "compile", kernel_ptx)
    monkeypatch.setattr(ptx_target.PTXTarget, "compile_entry", entry_ptx)
    drivers, reason = gpu_drivers.cuda_gpus()
    assert len(drivers) == 1 and reason == ""
    gpu = GPUDevice("/device:GPU:7", drivers[0])
    gpu.fake = fake
    gpu.blas = blas
    return gpu


def launch_graphs(device, function, *args) -> LaunchGraphs:
    """`function` traced for `args`, optimised by the PTX pipeline and planned on `device`,
    as the GPU device's staged calls do (`ConcreteFunction._gpu_program`)."""
    concrete = function.get_concrete_function(*args)
    compilation = Compilation.of_graphs(concrete.name, [(concrete.graph, concrete.name)])
    compilation.run_passes(PTX_PIPELINE)
    [program] = compilation.gpu_executables([concrete.name], device)
    return LaunchGraphs(device, program, replayable(compilation.module))


def test_memory_round_trips_and_blocks_are_reused(device):
    x = np.arange(10, dtype=np.float32)
    on_device = device.copy_in(x)
    assert isinstance(on_device, DeviceArray) and on_device.nbytes == 40
    np.testing.assert_array_equal(device.download(on_device), x)
    copy = device.duplicate(on_device)
    np.testing.assert_array_equal(copy.fetch(), x)
    handle = copy.handle
    del copy
    again = DeviceArray(device, (10,), np.float32)  # the same size: the freed block again
    assert again.handle == handle
    assert device.driver.target.arch == "sm_90"


def test_elementwise_kernels_launch_with_packed_parameters(device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    y = rng.standard_normal(7).astype(np.float32)
    a, b = device.copy_in(x), device.copy_in(y)
    for primitive, want in [(ew.add_p, x + y), (ew.exp_p, np.exp(x))]:
        operands = [a, b] if primitive is ew.add_p else [a]
        got = device.execute(primitive, operands, {})
        np.testing.assert_allclose(got.fetch(), want, rtol=1e-6)
    assert device.fake.launches == 2


def test_moves_and_reductions_launch_the_index_map_kernels(device):
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    on_device = device.copy_in(x)
    moved = device.execute(structural.transpose_p, [on_device], {"perm": (2, 0, 1)})
    np.testing.assert_array_equal(moved.fetch(), x.transpose(2, 0, 1))
    total = device.execute(reduction.reduce_sum_p, [on_device],
                           {"axes": (0, 2), "keepdims": False})
    np.testing.assert_allclose(total.fetch(), x.sum(axis=(0, 2)))


def test_convolutions_pooling_and_row_updates_launch_on_the_driver(device):
    """`gpu_ops` through the CUDA driver: a padded, strided convolution (a gather through
    the windows' map, then one cuBLAS gemm), a max pool whose padding never wins, and a row
    update (a copy, then the put kernel with its offset packed as a parameter)."""
    rng = np.random.default_rng(4)
    x = -rng.uniform(1, 2, (2, 5, 5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    geometry = {"strides": (2, 1), "padding": ((1, 1), (0, 2)), "dilations": (1, 1)}
    on_device = device.copy_in(x)
    got = device.execute(conv2d_p, [on_device, device.copy_in(w)], geometry)
    np.testing.assert_allclose(got.fetch(), conv2d_p.kernel(x, w, **geometry), rtol=1e-5,
                               atol=1e-5)
    pool = {"kind": "max", "window": (3, 3), "strides": (2, 2), "padding": ((1, 1), (1, 1))}
    pooled = device.execute(reduce_window_p, [on_device], pool)
    np.testing.assert_array_equal(pooled.fetch(), reduce_window_p.kernel(x, **pool))
    row = np.full((5, 5, 3), 7.0, np.float32)
    updated = device.execute(structural.update_index_p,
                             [on_device, device.copy_in(row), np.int32(-1)], {})
    want = x.copy()
    want[-1] = row
    np.testing.assert_array_equal(updated.fetch(), want)


def test_a_staged_function_runs_on_the_driver(device):
    f = sf.function(lambda x: sf.reduce_sum(sf.tanh(x * 2.0) + x, axis=1))
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    program = launch_graphs(device, f, sf.constant(x)).program
    [result] = program.run([device.copy_in(x)])
    np.testing.assert_allclose(result.fetch(), (np.tanh(x * 2.0) + x).sum(axis=1), rtol=1e-5,
                               atol=1e-6)


def test_a_staged_function_replays_as_a_captured_cuda_graph(device):
    def chain(x):
        for _ in range(3):
            x = sf.transpose(sf.tanh(x))[::-1] * 0.5 + x
        return x

    f = sf.function(chain)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    graphs = launch_graphs(device, f, sf.constant(x))
    for call in range(4):
        value = x + call
        [result] = graphs.run([device.copy_in(value)], [])
        np.testing.assert_allclose(result.fetch(), chain(sf.constant(value)).numpy(),
                                   rtol=1e-6)
    [graph] = graphs._states.values()
    assert isinstance(graph, LaunchGraph) and len(device.fake.graphs) == 1
    del graphs, graph
    gc.collect()
    assert not device.fake.graphs  # destroyed with the last replay's owner


def test_a_failing_call_names_the_function(device, monkeypatch):
    monkeypatch.setattr(device.fake, "cuMemAlloc",
                        lambda nbytes: (CUresult.CUDA_ERROR_INVALID_VALUE, None))
    with pytest.raises(gpu_drivers.CUDAError, match="cuMemAlloc failed: "
                                                     "CUDA_ERROR_INVALID_VALUE"):
        DeviceArray(device, (1000,), np.float32)


def random(rng, shape, dtype):
    values = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


def product(a, b, transpose_a, transpose_b):
    return np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a,
                     np.swapaxes(b, -1, -2) if transpose_b else b)


GEMMS = [  # a's shape, b's shape, transpose_a, transpose_b
    ((3, 4), (4, 5), False, False),
    ((4, 3), (5, 4), True, True),
    ((2, 3, 4), (4, 5), False, False),  # b's batch broadcast: its stride 0
    ((1, 4, 3), (2, 2, 4, 5), True, False),  # a's batch broadcast
    ((2, 2, 3, 4), (2, 2, 5, 4), False, True),
    ((2, 1, 3), (2, 4, 1), True, True),  # k = 1, m = 3, n = 2
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128,
                                   np.float16, sf.bfloat16])
@pytest.mark.parametrize(("a_shape", "b_shape", "transpose_a", "transpose_b"), GEMMS)
def test_a_matmul_is_one_cublas_gemm(device, dtype, a_shape, b_shape, transpose_a,
                                     transpose_b):
    """One gemm of the dtype's function; halves through the typed one, summing in
    float32 and rounding once (to the half's precision of the exact product)."""
    rng = np.random.default_rng(0)
    a, b = random(rng, a_shape, dtype), random(rng, b_shape, dtype)
    got = device.execute(matmul_p, [device.copy_in(a), device.copy_in(b)],
                         {"transpose_a": transpose_a, "transpose_b": transpose_b})
    assert isinstance(got, DeviceArray) and len(device.blas.gemms) == 1
    half = np.dtype(dtype) in cublas.EX_TYPES
    assert device.blas.gemms[0][0] == (cublas.EX_FUNCTION if half
                                       else cublas.FUNCTIONS[np.dtype(dtype)])
    tolerance = {np.dtype(np.float16): 2 ** -10, sf.bfloat16: 2 ** -7}.get(
        np.dtype(dtype), 1e-5 if dtype in (np.float32, np.complex64) else 1e-12)
    wide = np.complex128 if np.issubdtype(dtype, np.complexfloating) else np.float64
    want = product(a.astype(wide), b.astype(wide), transpose_a, transpose_b)
    np.testing.assert_allclose(got.fetch().astype(want.dtype), want, rtol=tolerance,
                               atol=tolerance)


def test_the_row_major_product_is_the_column_major_product_of_the_transposes(device):
    a, b = np.ones((2, 4, 3), np.float32), np.ones((5, 4), np.float32)  # m 3, k 4, n 5
    device.execute(matmul_p, [device.copy_in(a), device.copy_in(b)],
                   {"transpose_a": True, "transpose_b": True})
    # cuBLAS's A is b (its rows of k: lda k; one matrix for the batch: stride 0), its B is
    # a (rows of m: ldb m; stride 12); C is the [n, m] column-major transpose of the result.
    assert device.blas.gemms == [("cublasSgemmStridedBatched", cublas.OP_T, cublas.OP_T,
                                  5, 3, 4, 4, 3, 5, 0, 12, 15, 2)]


def test_a_gemm_runs_in_order_with_the_launches_around_it(device):
    rng = np.random.default_rng(1)
    x, w = random(rng, (3, 4), np.float32), random(rng, (4, 2), np.float32)
    on_device = device.copy_in(w)  # (a copy from the host runs what is queued first)
    exp = device.execute(ew.exp_p, [device.copy_in(x)], {})  # queued: not yet run
    p = device.execute(matmul_p, [exp, on_device], {"transpose_a": False, "transpose_b": False})
    twice = device.execute(ew.add_p, [p, p], {})
    assert device.fake.stream  # nothing has run: the first copy to the host runs it all
    np.testing.assert_allclose(twice.fetch(), 2 * np.exp(x) @ w, rtol=1e-5)


@pytest.mark.parametrize("addend", [(2, 3, 4), (4,)])
def test_a_matmul_add_is_a_gemm_over_a_copy_of_its_addend(device, addend):
    rng = np.random.default_rng(2)
    a, b, c = (random(rng, s, np.float64) for s in [(2, 3, 5), (5, 4), addend])
    on_device = device.copy_in(c)
    got = device.execute(matmul_add_p, [device.copy_in(a), device.copy_in(b), on_device],
                         {"alpha": -2.0, "transpose_a": False, "transpose_b": False})
    np.testing.assert_allclose(got.fetch(), -2.0 * (a @ b) + c, rtol=1e-12)
    np.testing.assert_array_equal(on_device.fetch(), c)  # the addend is left as it was
    assert len(device.blas.gemms) == 1


def test_empty_products_call_no_cublas(device):
    dirty = device.copy_in(np.full((3, 4), np.nan, np.float32))
    del dirty  # its block is handed out again, for the product
    zeros = device.execute(matmul_p, [device.copy_in(np.ones((3, 0), np.float32)),
                                      device.copy_in(np.ones((0, 4), np.float32))],
                           {"transpose_a": False, "transpose_b": False})
    np.testing.assert_array_equal(zeros.fetch(), np.zeros((3, 4)))  # set by a memset
    empty = device.execute(matmul_p, [device.copy_in(np.ones((0, 2), np.float32)),
                                      device.copy_in(np.ones((2, 4), np.float32))],
                           {"transpose_a": False, "transpose_b": False})
    assert empty.shape == (0, 4) and not device.blas.gemms


def test_without_cublas_or_for_other_dtypes_matmuls_run_on_the_host(device, monkeypatch):
    monkeypatch.setattr(cublas, "load", lambda: (None, "no cuBLAS here"))
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    params = {"transpose_a": False, "transpose_b": False}
    got = device.execute(matmul_p, [device.copy_in(a), device.copy_in(b)], params)
    np.testing.assert_array_equal(got, a @ b)  # the host's product, a NumPy array
    assert device.driver.gemm_dtypes() == frozenset()
    assert device.driver.blas_reason == "no cuBLAS here"
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(
        device.execute(matmul_p, [device.copy_in(ints), device.copy_in(ints.T)], params),
        ints @ ints.T)


def test_a_failing_gemm_names_the_function_and_status(device, monkeypatch):
    monkeypatch.setattr(device.blas, "cublasDgemmStridedBatched", lambda *args: 7)
    with pytest.raises(cublas.CublasError, match="cublasDgemmStridedBatched failed: "
                                                 r"CUBLAS_STATUS_INVALID_VALUE \(7\)"):
        device.execute(matmul_p, [device.copy_in(np.ones((2, 2))),
                                  device.copy_in(np.ones((2, 2)))],
                       {"transpose_a": False, "transpose_b": False})


def test_a_staged_function_captures_its_gemms_in_the_cuda_graph(device):
    def chain(x, w):
        for _ in range(3):
            x = sf.tanh(sf.matmul(x, w, transpose_b=True) * 0.5 + 1.0)
        return x

    f = sf.function(chain)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    w = np.linspace(1, -1, 16, dtype=np.float32).reshape(4, 4)
    graphs = launch_graphs(device, f, sf.constant(x), sf.constant(w))
    for call in range(4):
        value = x + call
        [result] = graphs.run([device.copy_in(value), device.copy_in(w)], [])
        np.testing.assert_allclose(result.fetch(),
                                   chain(sf.constant(value), sf.constant(w)).numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert len(device.blas.gemms) == 3 * 3  # planned, recorded, captured; then replayed
    [graph] = graphs._states.values()
    assert isinstance(graph, LaunchGraph)


def test_cublas_is_looked_for_in_the_wheels_newest_first(tmp_path, monkeypatch):
    for folder, name in [("cublas", "libcublas.so.12"), ("cu13", "libcublas.so.13"),
                         ("cu13", "libcublasLt.so.13")]:
        (tmp_path / folder / "lib").mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "lib" / name).write_bytes(b"not a library")
    namespace = types.ModuleType("nvidia")
    namespace.__path__ = [str(tmp_path)]
    monkeypatch.setitem(sys.modules, "nvidia", namespace)
    monkeypatch.setattr("ctypes.util.find_library", lambda name: None)
    library, reason = cublas.load.__wrapped__()  # (uncached)
    assert library is None and reason.startswith("cuBLAS could not be loaded")
    assert "libcublasLt" not in reason
    assert 0 < reason.index("cu13/lib/libcublas.so.13") < reason.index("libcublas.so.12")
    namespace.__path__ = []
    assert cublas.load.__wrapped__() == (None, "no cuBLAS library was found (pip install "
                                               "'stageflow[cuda]' brings nvidia-cublas)")
