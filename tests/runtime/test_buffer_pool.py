"""The buffer pool hands a block out again only when nothing refers to it any more."""

from __future__ import annotations

import numpy as np

import stageflow as sf
from stageflow.runtime.buffer_pool import MIN_POOLED_BYTES, BufferPool

SHAPE = (MIN_POOLED_BYTES // 4 // 256, 256)


def test_a_free_block_is_reused_and_a_held_one_is_not():
    pool = BufferPool(1 << 30)
    a = pool.empty(SHAPE, np.float32)
    address = a.ctypes.data
    b = pool.empty(SHAPE, np.float32)
    assert b.ctypes.data != address  # `a` still holds its block
    del a
    c = pool.empty(SHAPE, np.float32)
    assert c.ctypes.data == address and c.shape == SHAPE and c.dtype == np.float32


def test_views_of_a_result_keep_its_block():
    pool = BufferPool(1 << 30)
    a = pool.empty(SHAPE, np.float32)
    a[:] = 7.0
    corner = a[:2, ::-1].T  # a view of a view: its base is the block itself
    address = a.ctypes.data
    del a
    b = pool.empty(SHAPE, np.float32)
    b[:] = 0.0
    assert b.ctypes.data != address
    assert np.all(corner == 7.0)


def test_small_arrays_and_a_full_pool_fall_back_to_numpy():
    pool = BufferPool(MIN_POOLED_BYTES)
    small = pool.empty((4,), np.float64)
    assert small.base is None
    held = pool.empty(SHAPE, np.float32)
    other = pool.empty(SHAPE, np.float32)  # over capacity while `held` lives: not pooled
    assert len(pool._blocks) == 1 and held.base is pool._blocks[0] and other.base is not None


def test_large_staged_results_stay_correct_when_blocks_are_reused():
    f = sf.function(lambda x: sf.tanh(x) * 2.0)
    x = np.linspace(-1.0, 1.0, 1 << 21, dtype=np.float32).reshape(1 << 11, 1 << 10)
    first = f(sf.constant(x)).numpy()
    kept = first[:3]
    del first
    for scale in (0.5, 0.25):
        np.testing.assert_allclose(f(sf.constant(x * scale)).numpy(),
                                   np.tanh(x * scale) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(kept, np.tanh(x[:3]) * 2.0, rtol=1e-6)
