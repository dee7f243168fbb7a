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
from stageflow.runtime import gpu_drivers
from stageflow.runtime.gpu import DeviceArray, GPUDevice
from stageflow.staging.compiler import Compilation


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1


class Attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75


class FakeCuda(types.ModuleType):
    """The subset of ``cuda.bindings.driver`` the driver uses, on host memory."""

    CUresult = CUresult
    CUdevice_attribute = Attribute

    def __init__(self, compiled: dict[str, object]) -> None:
        super().__init__("cuda.bindings.driver")
        self.compiled = compiled  # entry name -> what the emulated launch runs
        self.buffers: dict[int, ctypes.Array] = {}
        self.modules: dict[int, str] = {}
        self.functions: dict[int, tuple[str, int]] = {}
        self.current = None
        self.launches = 0
        self.stream: list = []  # work queued on the default stream, run in order

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
        self._run_stream()
        ctypes.memmove(int(device), host, nbytes)
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoH(self, host, device, nbytes):  # noqa: N802
        self._check_range(device, nbytes)
        self._run_stream()
        ctypes.memmove(host, int(device), nbytes)
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoDAsync(self, destination, source, nbytes, stream):  # noqa: N802
        assert stream == 0
        self._check_range(destination, nbytes)
        self._check_range(source, nbytes)
        self.stream.append(lambda: ctypes.memmove(int(destination), int(source), nbytes))
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
        self.stream.append(lambda: self.compiled[name](values, gx, bx))
        self.launches += 1
        return (CUresult.CUDA_SUCCESS,)

    def cuCtxSynchronize(self):  # noqa: N802
        self._run_stream()
        return (CUresult.CUDA_SUCCESS,)


@pytest.fixture
def device(monkeypatch):
    """A GPU device on `CUDADriver` over the stand-in bindings; every kernel the driver
    compiles to PTX is also compiled for the emulated launch, which the fake runs."""
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
    monkeypatch.setattr(ptx_target.PTXTarget, "compile", kernel_ptx)
    monkeypatch.setattr(ptx_target.PTXTarget, "compile_entry", entry_ptx)
    drivers, reason = gpu_drivers.cuda_gpus()
    assert len(drivers) == 1 and reason == ""
    gpu = GPUDevice("/device:GPU:7", drivers[0])
    gpu.fake = fake
    return gpu


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


def test_a_staged_function_runs_on_the_driver(device):
    f = sf.function(lambda x: sf.reduce_sum(sf.tanh(x * 2.0) + x, axis=1))
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    concrete = f.get_concrete_function(sf.constant(x))
    compilation = Compilation.of_graphs(concrete.name, [(concrete.graph, concrete.name)])
    compilation.run_passes(PTX_PIPELINE)
    [program] = compilation.gpu_executables([concrete.name], device)
    [result] = program.run([device.copy_in(x)])
    np.testing.assert_allclose(result.fetch(), (np.tanh(x * 2.0) + x).sum(axis=1), rtol=1e-5,
                               atol=1e-6)


def test_a_failing_call_names_the_function(device, monkeypatch):
    monkeypatch.setattr(device.fake, "cuMemAlloc",
                        lambda nbytes: (CUresult.CUDA_ERROR_INVALID_VALUE, None))
    with pytest.raises(gpu_drivers.CUDAError, match="cuMemAlloc failed: "
                                                     "CUDA_ERROR_INVALID_VALUE"):
        DeviceArray(device, (1000,), np.float32)
