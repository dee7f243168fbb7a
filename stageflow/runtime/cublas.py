"""cuBLAS through ctypes: the strided-batched gemms a CUDA GPU's matmuls run as.

The library comes from the ``nvidia-cublas`` wheel (the ``stageflow[cuda]`` extra; PyTorch
ships the same one), found under the ``nvidia`` namespace package (``nvidia/cu13/lib`` or
``nvidia/cublas/lib``, by the wheel's version), else wherever the system's loader finds
``libcublas``. Without it a GPU's matmuls run on the host, and `load` says why.

cuBLAS is column-major; `Cublas.gemm` takes row-major operands, as the rest of stageflow
stores them. A row-major ``[r, c]`` matrix is the column-major ``[c, r]`` matrix with
leading dim ``c``, its transpose, so the row-major ``C = op(A) @ op(B)`` is computed as the
column-major ``C^T = op(B)^T @ op(A)^T``: cuBLAS's first operand is B, its second A, and
the sizes ``m, n`` swap. The handle keeps cuBLAS's default math mode (no TF32), so float32
products match the host's to float32 rounding. bfloat16 and float16 products go through
``cublasGemmStridedBatchedEx``: operands and result in the dtype, the sums in float32
(``CUBLAS_COMPUTE_32F``, the tensor cores' mode), rounded once, as the host's products of
those dtypes are. Its stream is the driver's, on which the
kernels are launched, so a gemm runs after the launches that wrote its operands and before
those that read its result, and a CUDA graph captured from that stream records it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
from typing import Any

import numpy as np

from stageflow.core import dtypes

# The strided-batched gemm of each dtype (cuComplex and cuDoubleComplex scalars are two
# floats or doubles in a row, as NumPy's complex64 and complex128 are).
FUNCTIONS = {
    np.dtype(np.float32): "cublasSgemmStridedBatched",
    np.dtype(np.float64): "cublasDgemmStridedBatched",
    np.dtype(np.complex64): "cublasCgemmStridedBatched",
    np.dtype(np.complex128): "cublasZgemmStridedBatched",
}
# bfloat16 and float16 products: one function, the dtype named by its cudaDataType_t.
EX_FUNCTION = "cublasGemmStridedBatchedEx"
EX_TYPES = {dtypes.bfloat16: 14, np.dtype(np.float16): 2}  # CUDA_R_16BF, CUDA_R_16F
COMPUTE_32F, GEMM_DEFAULT = 68, -1  # cublasComputeType_t, cublasGemmAlgo_t
GEMM_DTYPES = frozenset(FUNCTIONS) | frozenset(EX_TYPES)
INT_MAX = 2**31 - 1  # m, n, k, leading dims and the batch count are C ints
OP_N, OP_T = 0, 1  # cublasOperation_t
STATUS_NAMES = {  # cublasStatus_t
    1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}

_GEMM_ARGS = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,  # handle, transa, transb
              ctypes.c_int, ctypes.c_int, ctypes.c_int,  # m, n, k
              ctypes.c_void_p,  # alpha (host memory)
              ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,  # A, lda, strideA
              ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,  # B, ldb, strideB
              ctypes.c_void_p,  # beta (host memory)
              ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,  # C, ldc, strideC
              ctypes.c_int]  # batchCount
_EX_ARGS = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,  # handle, transa, transb
            ctypes.c_int, ctypes.c_int, ctypes.c_int,  # m, n, k
            ctypes.c_void_p,  # alpha (host memory, float32)
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,  # A, type, lda, strideA
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,  # B, type, ldb, strideB
            ctypes.c_void_p,  # beta (host memory, float32)
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,  # C, type, ldc, strideC
            ctypes.c_int, ctypes.c_int, ctypes.c_int]  # batchCount, computeType, algo


class CublasError(RuntimeError):
    """A cuBLAS call failed (its name and status in the message)."""


def _candidates() -> list[str]:
    """Paths to try: the wheels' libraries, newest version first, then the system's."""
    try:
        import nvidia  # noqa: PLC0415 - the namespace package of NVIDIA's wheels, optional
    except ImportError:
        roots: list[str] = []
    else:
        roots = list(nvidia.__path__)
    found = [path for root in roots
             for path in glob.glob(os.path.join(root, "*", "lib", "libcublas.so*"))]
    found.sort(key=_version, reverse=True)
    system = ctypes.util.find_library("cublas")
    return found + ([system] if system else [])


def _version(path: str) -> tuple[int, ...]:
    """``libcublas.so.13.1`` -> (13, 1): which of several wheels' libraries is newest."""
    suffix = os.path.basename(path).partition(".so")[2]
    return tuple(int(part) for part in suffix.split(".") if part.isdigit())


@functools.cache
def load() -> tuple[Any, str]:
    """The cuBLAS library with the signatures of the functions used declared, and '', or
    None and why not (in words for a message). Loaded once per process."""
    paths = _candidates()
    if not paths:
        return None, ("no cuBLAS library was found (pip install 'stageflow[cuda]' brings "
                      "nvidia-cublas)")
    failures = []
    for path in paths:
        try:
            library = ctypes.CDLL(path)
            _declare(library)
        except (OSError, AttributeError) as failure:  # not loadable, or not cuBLAS v2
            failures.append(f"{path}: {failure}")
            continue
        return library, ""
    return None, f"cuBLAS could not be loaded ({'; '.join(failures)})"


def _declare(library: Any) -> None:
    """Argument and result types, so that ctypes passes 64-bit pointers and strides."""
    library.cublasCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    library.cublasCreate_v2.restype = ctypes.c_int
    library.cublasSetStream_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    library.cublasSetStream_v2.restype = ctypes.c_int
    for name in FUNCTIONS.values():
        function = getattr(library, name)
        function.argtypes = _GEMM_ARGS
        function.restype = ctypes.c_int
    library.cublasGemmStridedBatchedEx.argtypes = _EX_ARGS
    library.cublasGemmStridedBatchedEx.restype = ctypes.c_int


def check(name: str, status: int) -> None:
    """Raise `CublasError` naming `name` and its status unless it succeeded."""
    if int(status) != 0:
        label = STATUS_NAMES.get(int(status), "unknown status")
        raise CublasError(f"{name} failed: {label} ({int(status)})")


class Cublas:
    """A cuBLAS handle, made for the CUDA context current when it is created (the caller
    makes its GPU's context current first, and again before each call), its work queued on
    `stream` (a ``CUstream``'s address). It lives as long as the process: destroying it at
    exit could follow the context's own teardown."""

    def __init__(self, library: Any, stream: int) -> None:
        self._library = library
        self._handle = ctypes.c_void_p()
        check("cublasCreate_v2", library.cublasCreate_v2(ctypes.pointer(self._handle)))
        check("cublasSetStream_v2", library.cublasSetStream_v2(self._handle, stream))

    def gemm(self, a: int, b: int, out: int, dtype: np.dtype, batch: int, m: int, n: int,
             k: int, transpose_a: bool, transpose_b: bool, stride_a: int, stride_b: int,
             alpha: float, beta: float) -> None:
        """Row-major ``out[i] = alpha * op(a[i]) @ op(b[i]) + beta * out[i]`` for i below
        `batch` (see `Driver.gemm`); `a`, `b`, `out` are device addresses, strides in
        elements (0: one matrix for every i). Queued on the handle's stream. Every size must
        be positive and at most `INT_MAX` (the caller skips empty products)."""
        dtype = np.dtype(dtype)
        half = EX_TYPES.get(dtype)
        # alpha and beta are read before the call returns; float32 for the sums of halves
        scalars = np.array([alpha, beta], dtype if half is None else np.float32)
        sizes = (self._handle, OP_T if transpose_b else OP_N, OP_T if transpose_a else OP_N,
                 n, m, k, scalars.ctypes.data)
        # B row-major: its leading dim is its row's length
        matrices = [(int(b), k if transpose_b else n, stride_b),
                    (int(a), m if transpose_a else k, stride_a)]
        beta_at, result = scalars.ctypes.data + scalars.itemsize, (int(out), n, m * n)
        if half is None:
            name = FUNCTIONS[dtype]
            check(name, getattr(self._library, name)(
                *sizes, *matrices[0], *matrices[1], beta_at, *result, batch))
        else:
            def typed(pointer: int, ld: int, stride: int) -> tuple[int, ...]:
                return pointer, half, ld, stride

            check(EX_FUNCTION, self._library.cublasGemmStridedBatchedEx(
                *sizes, *typed(*matrices[0]), *typed(*matrices[1]), beta_at, *typed(*result),
                batch, COMPUTE_32F, GEMM_DEFAULT))
