"""Large result arrays reused from call to call instead of taken fresh from the OS.

An array of tens of megabytes is beyond the C allocator's heap: NumPy gets it from ``mmap``
and returns it with ``munmap`` when it dies, so every call of a compiled function on such
tensors pays the kernel's page faults and the zeroing of every page before the first byte
is written (for a result of tens of megabytes, a third as much again as a memory-bound
kernel's own time). Like the
caching allocators of XLA and PyTorch, the pool keeps such blocks after use and hands one
out again once nothing refers to it any more: a block is free when the pool holds the only
reference (every array NumPy derives from a block, views of views included, keeps the block
itself as its base). Blocks below `MIN_POOLED_BYTES` come from NumPy as usual; the pool
holds at most ``STAGEFLOW_POOL_BYTES`` (default 512 MiB; 0 turns it off), dropping free
blocks first.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np

MIN_POOLED_BYTES = 4 << 20
# References to a free block while it is examined: the pool's list, the loop variable and
# getrefcount's own argument.
_FREE_REFERENCES = 3


class BufferPool:
    """Hands out arrays backed by reusable blocks (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._blocks: list[np.ndarray] = []
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An uninitialised array, like ``np.empty(shape, dtype)``."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < MIN_POOLED_BYTES or nbytes > self.capacity:
            return np.empty(shape, dtype)
        with self._lock:
            block = self._take(nbytes)
        return block.view(dtype).reshape(shape)

    def _take(self, nbytes: int) -> np.ndarray:
        for block in self._blocks:
            if block.nbytes == nbytes and sys.getrefcount(block) == _FREE_REFERENCES:
                return block
        held = sum(block.nbytes for block in self._blocks)
        if held + nbytes > self.capacity:
            self._blocks = [b for b in self._blocks if sys.getrefcount(b) > _FREE_REFERENCES]
            held = sum(block.nbytes for block in self._blocks)
        block = np.empty(nbytes, np.uint8)
        if held + nbytes <= self.capacity:
            self._blocks.append(block)
        return block


POOL = BufferPool(int(os.environ.get("STAGEFLOW_POOL_BYTES", str(512 << 20))))
