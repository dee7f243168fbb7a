"""Programs' buffers come from the heap, not fresh mappings, from the first compile on."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="the mmap threshold is glibc's")

# Counts the mapped blocks (mallinfo2's hblks) while an 8 MiB block is held, in a fresh
# process, before and after `raise_once`.
CHECK = """
import ctypes, ctypes.util
from stageflow.runtime.allocator import raise_once

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]

def mapped_while_holding(size):
    before = libc.mallinfo2().hblks
    block = libc.malloc(size)
    held = libc.mallinfo2().hblks
    libc.free(block)
    return held - before

first = mapped_while_holding(8 << 20)
raise_once()
print(first, mapped_while_holding(8 << 20), raise_once())
"""


def test_raising_the_threshold_keeps_large_buffers_off_fresh_mappings():
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                            check=True, timeout=120)
    first, after, again = result.stdout.split()
    assert (first, after, again) == ("1", "0", "True")


def test_the_first_program_compiled_raises_it():
    code = """
import numpy as np
import stageflow as sf
from stageflow.runtime.allocator import raise_once

sf.function(lambda x: x + 1.0)(sf.constant(np.ones(3, np.float32)))
print(raise_once.cache_info().currsize)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=300)
    assert result.stdout.split()[-1] == "1"
