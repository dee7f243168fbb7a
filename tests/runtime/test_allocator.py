"""glibc's malloc set up by the runtime (`runtime.allocator`): large arrays freed and
allocated again step after step stay in the heap, page-faulted in once, not at each step;
``STAGEFLOW_MALLOC=default`` leaves glibc's settings alone."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest

from stageflow.runtime import allocator

# Page faults and heap reuse of a process measured with the cores to itself.
pytestmark = pytest.mark.exclusive

STEPS = """
import resource, sys
import numpy as np
import stageflow
sizes = [1 << 18, 3 << 18, 1 << 21, 3 << 20, 1 << 22]  # float32 elements: 1-16 MiB


def step():
    kept = [np.ones(n, np.float32) for n in sizes]  # held across the step, as activations
    for n in sizes:  # temporaries made and dropped
        (kept[0][:1] + np.zeros(n, np.float32)).sum()
    del kept


for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""
glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or not ctypes.util.find_library("c")
                           or "glibc" not in os.confstr("CS_GNU_LIBC_VERSION").lower(),
                           reason="mallopt is glibc's")


def faults_per_step(env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, "-c", STEPS], capture_output=True, text=True,
                          env={**os.environ, **env}, check=True)
    return float(done.stdout.split()[-1])


@glibc
def test_arrays_of_every_step_reuse_the_heap():
    """Each step allocates ~70 MiB of arrays of 1-16 MiB (below the mmap threshold); once
    the heap holds them, a step faults in no pages (glibc's own settings: thousands)."""
    assert allocator.keep_freed_memory()
    assert faults_per_step({}) < 100 < faults_per_step({"STAGEFLOW_MALLOC": "default"})


@glibc
def test_the_default_setting_leaves_glibc_alone(monkeypatch):
    monkeypatch.setenv("STAGEFLOW_MALLOC", "default")
    assert not allocator.keep_freed_memory()
