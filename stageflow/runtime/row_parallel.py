"""Large elementwise kernels split over the machine's cores.

A kernel whose values all share one leading dim is compiled with that dim unknown
(`codegen.kernels.analysis.leading_dim_splittable`), so the same machine code runs on any
block of rows (results of reductions over other axes too: each block reduces into its own
rows).
Calls with enough elements are cut into one block per core and run on a small thread
pool: the compiled code runs without the GIL (ctypes releases it), so the blocks really
run at once and memory-bound kernels reach the bandwidth of every core. Small calls stay
on the calling thread, where a thread hop would cost more than the work.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from stageflow.codegen.kernels.wrapper import spec_value
from stageflow.core import config_threading
from stageflow.runtime.buffer_pool import POOL

MIN_PARALLEL_ELEMENTS = 1 << 17

_pool: ThreadPoolExecutor | None = None


@functools.cache
def cores() -> int:
    """The cores this process may run on (asked once: a kernel's call reads it)."""
    return max(1, len(os.sched_getaffinity(0)))


def workers() -> int:
    """Threads a large kernel is split over: the cores, or fewer where
    `sf.config.threading` sets a lower intra-op count (read at each call)."""
    limit = int(config_threading.INTRA_OP[0])
    return min(cores(), limit) if limit > 0 else cores()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=cores(), thread_name_prefix="stageflow")
    return _pool


class RowParallelKernel:
    """Calls a row-splittable compiled kernel on blocks of rows in parallel when large."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self.kernel = compiled.kernel
        self.output_dtypes = [arg.dtype for arg in self.kernel.outputs]

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        first = arrays[0]
        n_workers = workers()
        if (getattr(first, "size", 0) < MIN_PARALLEL_ELEMENTS or n_workers < 2
                or type(first) is not np.ndarray or first.shape[0] < n_workers
                or not all(type(a) is np.ndarray and a.flags.c_contiguous
                           and a.shape == first.shape for a in arrays)):
            return self.compiled(*arrays)
        shapes = [a.shape for a in arrays]
        outputs = [POOL.empty(tuple(spec_value(d, shapes) for d in spec), dtype)
                   for spec, dtype in zip(self.kernel.output_shapes, self.output_dtypes,
                                          strict=True)]
        everything = list(arrays) + outputs
        rows = first.shape[0]
        bounds = [rows * i // n_workers for i in range(n_workers + 1)]
        blocks = [[a[lo:hi] for a in everything]
                  for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        futures = [_executor().submit(self.compiled.run_into, block) for block in blocks[1:]]
        codes = [self.compiled.run_into(blocks[0])] + [f.result() for f in futures]
        if any(codes):
            return self.compiled(*arrays)  # the checked path reports what is wrong
        return tuple(outputs)
