"""glibc's malloc, set up for steps that free and allocate the same large arrays each time.

Every eager op's result is a fresh NumPy array, freed a few ops later. glibc serves blocks
above its mmap threshold with mmap and gives the heap's free top back to the system above
its trim threshold, both moving with what the process did before (the thresholds adjust
as mmapped blocks are freed). In a process that had also allocated a staged function's
workspace, an eager training step's megabyte arrays went back to the system and were
page-faulted in again at every step, which made the step up to twice as slow, and its time
bimodal. With the mmap threshold at glibc's largest (`MMAP_THRESHOLD`: smaller blocks come
from the heap) and the heap kept up to `TRIM_THRESHOLD` of free memory, the arrays stay
mapped from step to step; either setting alone does not suffice.

`keep_freed_memory` sets both once, at import of the runtime; ``STAGEFLOW_MALLOC=default``
leaves glibc's settings alone. Elsewhere than glibc (no ``mallopt``) nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>
MMAP_THRESHOLD = 32 << 20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64 bits)
TRIM_THRESHOLD = 256 << 20


def keep_freed_memory() -> bool:
    """Fix glibc's thresholds as the module says; whether they were set."""
    if os.environ.get("STAGEFLOW_MALLOC", "") == "default":
        return False
    name = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None) if name else None
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
