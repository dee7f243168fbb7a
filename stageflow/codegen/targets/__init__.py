"""Targets: the CPU (LLVM JIT and object code, with the on-disk cache) and PTX."""
