"""`sf.config.threading`: the intra-op count bounds the tasks of compiled ops (read when
each op runs) and OpenBLAS's threads; wrong counts are refused."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import pytest

import stageflow as sf
from stageflow.core import config_threading

# In a process of its own: the worker pool is process-wide and starts once.
_SCRIPT = """
import json, os
import numpy as np
import stageflow as sf

def threads():
    return len(os.listdir("/proc/self/task"))

rng = np.random.default_rng(0)
x = sf.constant(rng.standard_normal((512, 512)).astype(np.float32))
w = sf.constant(rng.standard_normal((512, 512)).astype(np.float32))
product = sf.function(lambda x: sf.matmul(x, w))
sf.config.threading.set_intra_op_parallelism_threads(1)
one = product(x).numpy()       # compiled here; its rows in one task: no worker started
before = threads()
for _ in range(3):
    product(x)
after_one = threads()
sf.config.threading.set_intra_op_parallelism_threads(0)
every = product(x).numpy()     # the same code, split over the pool now
print(json.dumps({"same": bool(np.allclose(one, every, rtol=1e-5, atol=1e-4)), "before": before,
                  "after_one": after_one, "after_all": threads()}))
"""


@pytest.mark.exclusive
def test_one_thread_per_op_starts_no_worker_and_gives_the_same_numbers():
    result = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "STAGEFLOW_PARALLEL_COMPILE": "0"})
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["same"], seen
    assert seen["after_one"] == seen["before"]
    if len(os.sched_getaffinity(0)) > 1:
        assert seen["after_all"] > seen["after_one"]


def test_openblas_follows_the_intra_op_count():
    get = ctypes.CDLL(config_threading.openblas_libraries()[0]).scipy_openblas_get_num_threads64_
    try:
        sf.config.threading.set_intra_op_parallelism_threads(1)
        assert get() == 1
        sf.config.threading.set_intra_op_parallelism_threads(0)
        assert get() == len(os.sched_getaffinity(0))
    finally:
        sf.config.threading.set_intra_op_parallelism_threads(0)


@pytest.mark.parametrize("count", [-1, 1.5, True, "2"])
def test_counts_that_are_not_counts_are_refused(count):
    with pytest.raises(ValueError, match="set_intra_op_parallelism_threads: a count of threads"):
        sf.config.threading.set_intra_op_parallelism_threads(count)
    with pytest.raises(ValueError, match="set_inter_op_parallelism_threads"):
        sf.config.threading.set_inter_op_parallelism_threads(count)
