"""Execution: the eager executor, the graph interpreter, compiled executables (with their
parallel kernels) and devices."""
