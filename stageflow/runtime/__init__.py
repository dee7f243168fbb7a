"""Execution: the eager executor, the graph interpreter, compiled executables (with their
parallel kernels) and devices. Importing it sets up glibc's malloc for large arrays freed
and allocated again at every step (`allocator`)."""

from stageflow.runtime.allocator import keep_freed_memory

keep_freed_memory()
