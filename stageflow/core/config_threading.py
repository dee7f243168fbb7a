"""`sf.config.threading`: TensorFlow's thread counts (``tf.config.threading``).

The intra-op count bounds how many cores one op uses: the tasks a compiled op splits into
(convolutions, gemms, large kernels: their pool of worker threads, `codegen.lowered.tasks`),
the blocks a large kernel splits into (`runtime.row_parallel`) and the threads of NumPy's
OpenBLAS, which eager matmuls run on. 0 is every core the
process may run on; the default is ``OMP_NUM_THREADS`` where the environment sets it, as
PyTorch's intra-op count and OpenBLAS's own do (Ray's workers get 1: several share a
machine), else 0. Compiled code reads the count when each op runs, so a change
applies to functions compiled before it too; libraries compiled ahead of time are not
this process's and use every core. The inter-op count is TensorFlow's bound on ops run at
the same time; stageflow runs a function's ops one after another, so it bounds nothing
here, and is kept only to be read back, as TensorFlow code sets both.
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

from stageflow.core.exports import public_dir

__all__ = ["get_inter_op_parallelism_threads", "get_intra_op_parallelism_threads",
           "set_inter_op_parallelism_threads", "set_intra_op_parallelism_threads"]
__dir__ = public_dir(globals())

# The intra-op count, one process-wide word that compiled code reads (its address is the
# JIT's symbol `INTRA_OP_SYMBOL`).
INTRA_OP = (ctypes.c_int64 * 1)()
INTRA_OP_SYMBOL = "sf.threads.intra_op"
# The multiply-adds from which a gemm is split over the cores (`codegen.lowered.gemm_split`)
# and an eager float matmul runs its compiled op (`runtime.eager_kernels`): several times
# what starting a task costs.
SPLIT_MACS = 1 << 21
_inter_op = [0]
OPENBLAS_THREADS = "scipy_openblas_set_num_threads64_"


def _from_environment() -> int:
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() else 0


INTRA_OP[0] = _from_environment()


def openblas_libraries() -> list[str]:
    """The paths of NumPy's bundled OpenBLAS (what an ahead-of-time library links to)."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    return sorted(os.path.realpath(p)
                  for p in glob.glob(os.path.join(libs, "libscipy_openblas64_*.so*")))


def set_intra_op_parallelism_threads(num_threads: int) -> None:
    """Use at most `num_threads` cores for one op (0: all of them).

    >>> sf.config.threading.set_intra_op_parallelism_threads(1)
    >>> sf.config.threading.get_intra_op_parallelism_threads()
    1
    >>> sf.config.threading.set_intra_op_parallelism_threads(0)   # every core again
    """
    count = _count(num_threads, "set_intra_op_parallelism_threads")
    INTRA_OP[0] = count
    cores = len(os.sched_getaffinity(0))
    for path in openblas_libraries():
        setter = getattr(ctypes.CDLL(path), OPENBLAS_THREADS, None)
        if setter is not None:
            setter(ctypes.c_int(min(count, cores) if count else cores))


def get_intra_op_parallelism_threads() -> int:
    """The intra-op count set last (0: every core).

    >>> sf.config.threading.set_intra_op_parallelism_threads(0)
    >>> sf.config.threading.get_intra_op_parallelism_threads()
    0
    """
    return int(INTRA_OP[0])


def set_inter_op_parallelism_threads(num_threads: int) -> None:
    """TensorFlow's bound on ops run at once: kept to be read back (the module says why it
    bounds nothing here).

    >>> sf.config.threading.set_inter_op_parallelism_threads(2)
    >>> sf.config.threading.get_inter_op_parallelism_threads()
    2
    >>> sf.config.threading.set_inter_op_parallelism_threads(0)
    """
    _inter_op[0] = _count(num_threads, "set_inter_op_parallelism_threads")


def get_inter_op_parallelism_threads() -> int:
    """The inter-op count set last (0: the default).

    >>> sf.config.threading.get_inter_op_parallelism_threads()
    0
    """
    return _inter_op[0]


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"sf.config.threading.{name}: a count of threads (0 or more, 0 for "
                         f"the default), got {value!r}")
    return int(value)
